"""A page in a real browser as a handout, an embed and a dim room: printed with Chromium (page.pdf), the sidebar,
the router's widgets and the course links are absent, the charts are kept and the Chinese summary fits its sheets;
``?embed=true`` shows the page alone; the theme follows the browser's colour preference."""
import io
import os
import pathlib
import shutil
import unicodedata

import pytest

from ui.i18n import catalog

ROOT = pathlib.Path(__file__).resolve().parent.parent
SUMMARY_ZH_SHEETS = 6      # A4 sheets; on the app without the print style it was 6 with the sidebar on each, and
                           # each of its three sections now starts a sheet of its own

if shutil.which("chromium") is None:
    if os.environ.get("CI"):
        raise RuntimeError("CI must install Debian's chromium for the browser tests (.ci/run does)")
    pytest.skip("no chromium on this machine: `apt-get install -y chromium` to run the browser tests",
                allow_module_level=True)

sync_playwright = pytest.importorskip("playwright.sync_api").sync_playwright
pypdf = pytest.importorskip("pypdf")


@pytest.fixture
def base(server):
    return server


def loaded(context, url: str):
    page = context.new_page()
    page.goto(url)
    page.wait_for_selector("[data-testid='stMain'] h1", timeout=90_000)
    page.wait_for_selector("[data-testid='stApp'][data-test-script-state='notRunning']", timeout=90_000)
    page.wait_for_selector(".st-key-course_nav", state="attached", timeout=90_000)   # the router's last part
    page.wait_for_timeout(1500)                                                       # charts drawn
    return page


def printed(page) -> tuple[int, str]:
    reader = pypdf.PdfReader(io.BytesIO(page.pdf(format="A4", print_background=True)))
    return len(reader.pages), "\n".join(p.extract_text() for p in reader.pages)


def squeeze(text: str) -> str:
    """PDF text without spaces and line breaks (pypdf splits a line where it likes), NFKC-normalised (the PDF's
    font maps some characters to their Kangxi radical forms, ⼩ for 小, and a few to radicals NFKC leaves alone)."""
    return "".join(unicodedata.normalize("NFKC", text).translate(RADICALS).split())


RADICALS = str.maketrans("⻚⻓⻛⻋⻅⻔⻩⻝⻢⻜⻘⻬⻰", "页长风车见门黄食马飞青齐龙")


def chrome_words(lang: str) -> list[str]:
    """Words only the app's frame shows: the sidebar's language switch, presenter toggle and footer, and the
    course links under the page."""
    cat = catalog(lang)
    return ["Language/语言", squeeze(cat["common.present_on"]), squeeze(cat["common.footer"]),
            squeeze(cat["common.course_prev"].split("{")[0]), squeeze(cat["common.course_next"].split("{")[0])]


def test_the_chinese_summary_prints_without_the_sidebar_on_its_sheets(base, browser):
    context = browser.new_context(viewport={"width": 1280, "height": 720})
    page = loaded(context, f"{base}/summary?lang=zh")
    on_screen = page.locator("section[data-testid='stSidebar']").inner_text()
    assert "Language / 语言" in on_screen                           # on screen the sidebar is there
    sheets, text = printed(page)
    flat = squeeze(text)
    assert squeeze(catalog("zh")["summary.title"]) in flat
    assert "实际运行它的页面" in flat                    # the text is read back whole, 页 included (as in 上一页)
    for word in chrome_words("zh"):
        assert word not in flat, f"{word!r} printed"
    assert 2 <= sheets <= SUMMARY_ZH_SHEETS, sheets
    context.close()


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_a_printed_page_keeps_its_charts_and_drops_the_controls(base, browser, lang):
    context = browser.new_context(viewport={"width": 1280, "height": 720})
    page = loaded(context, f"{base}/qkv?lang={lang}")
    sheets, text = printed(page)
    flat = squeeze(text)
    assert squeeze(catalog(lang)["qkv.title"]) in flat
    for word in chrome_words(lang):
        assert word not in flat, f"{word!r} printed"
    page.emulate_media(media="print")
    shown = page.evaluate("""() => {
        const visible = sel => [...document.querySelectorAll(sel)].filter(e => e.getClientRects().length > 0).length;
        return {charts: visible('[data-testid="stVegaLiteChart"]'), sliders: visible('[data-testid="stSlider"]'),
                buttons: visible('[data-testid="stButton"]'), sidebar: visible('section[data-testid="stSidebar"]')};
    }""")
    assert shown["charts"] >= 1 and shown["sliders"] == shown["buttons"] == shown["sidebar"] == 0, shown
    context.close()


def test_embed_shows_the_page_alone(base, browser):
    context = browser.new_context(viewport={"width": 1280, "height": 720})
    page = loaded(context, f"{base}/qkv?lang=en&embed=true")
    assert catalog("en")["qkv.title"] in page.locator("[data-testid='stMain'] h1").first.inner_text()
    assert page.locator("[data-testid='stSidebarNav']").count() == 0           # st.navigation(position="hidden")
    assert not page.locator("section[data-testid='stSidebar']").is_visible()
    context.close()


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_the_theme_follows_the_browser(base, browser, scheme):
    context = browser.new_context(viewport={"width": 1280, "height": 720}, color_scheme=scheme)
    page = loaded(context, f"{base}/qkv?lang=en")
    colours = page.evaluate("""() => {
        const rgb = s => {          // any CSS colour ("#31333f", "rgb(…)") as the browser resolves it
            const probe = document.createElement('span'); probe.style.color = s; document.body.appendChild(probe);
            const resolved = getComputedStyle(probe).color; probe.remove();
            return resolved.match(/[\\d.]+/g).slice(0, 3).map(Number);
        };
        const lum = ([r, g, b]) => (0.2126 * r + 0.7152 * g + 0.0722 * b) / 255;
        const axis = document.querySelector('[data-testid="stVegaLiteChart"] svg .role-axis-label text');
        return {app: lum(rgb(getComputedStyle(document.querySelector('.stApp')).backgroundColor)),
                text: lum(rgb(getComputedStyle(document.querySelector('.stMainBlockContainer p')).color)),
                axis: axis ? lum(rgb(axis.getAttribute('fill') || getComputedStyle(axis).fill)) : null};
    }""")
    dark = scheme == "dark"
    assert (colours["app"] < 0.2) if dark else (colours["app"] > 0.9), colours
    assert (colours["text"] > 0.6) if dark else (colours["text"] < 0.4), colours
    if colours["axis"] is not None:                  # the charts' text follows the theme (Streamlit's Vega theme)
        assert abs(colours["axis"] - colours["app"]) > 0.4, colours
    context.close()

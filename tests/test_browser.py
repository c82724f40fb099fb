"""End to end in a real browser: `streamlit run` on a free port; what a learner clicks (the language switch, a heatmap
cell, presenter mode's steps) and what only a browser can tell (Vega's own colours and legends).

Fails on any exception shown on a page and on any request that leaves localhost (the app must work offline).
Screenshots land in shots/ for a human to look at. Every page in both languages at both sizes is opened once, by
tests/test_layout.py, which checks each page's title, exceptions and requests in the visit of its layout check.
"""
import json
import os
import pathlib
import shutil
import time
from urllib.parse import urlparse

import pytest

from scripts.server import start_server
from tests.apptest_util import label_parts, shows_label
from ui.i18n import catalog
from ui.registry import available_pages

ROOT = pathlib.Path(__file__).resolve().parent.parent
SHOTS = ROOT / "shots"

if shutil.which("chromium") is None:
    if os.environ.get("CI"):
        raise RuntimeError("CI must install Debian's chromium for the browser tests (.ci/run does)")
    pytest.skip("no chromium on this machine: `apt-get install -y chromium` to run the browser tests",
                allow_module_level=True)

pytest.importorskip("playwright.sync_api")       # the server and browser fixtures: tests/conftest.py


# the page's own charts, not the intuition's picture (ui.anatomy.intuition draws it in a container keyed picture_<ns>)
LESSON_CHARTS = "[data-testid='stVegaLiteChart']:not([class*='st-key-picture_'] *)"


def visit(browser, url: str, shot: str):
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    outside, console = [], []
    page.on("request", lambda r: outside.append(r.url)
            if urlparse(r.url).hostname not in ("localhost", "127.0.0.1", None) else None)
    page.on("console", lambda m: console.append(m.text) if m.type == "error" else None)
    t0 = time.perf_counter()
    page.goto(url)
    page.wait_for_selector("[data-testid='stMain'] h1", timeout=60_000)  # every page has a title
    page.wait_for_selector("[data-testid='stApp'][data-test-script-state='notRunning']", timeout=60_000)
    page.wait_for_function("document.querySelectorAll('[data-testid=stSkeleton]').length == 0",
                           timeout=60_000)
    page.wait_for_timeout(500)
    took = time.perf_counter() - t0
    SHOTS.mkdir(exist_ok=True)
    page.screenshot(path=str(SHOTS / f"{shot}.png"), full_page=True)
    return page, outside, console, took


# Every page in both languages at both sizes is opened in tests/test_layout.py, which checks there that each page
# draws its title, shows no exception and sends no request outside localhost, in the visit of its layout check.


def test_language_switch_in_browser(server, browser):
    page, outside, _, _ = visit(browser, f"{server}/?lang=en", "switch_before")
    assert catalog("en")["home.title"] in page.locator("[data-testid='stMain']").inner_text()
    page.locator("[data-testid=stSidebar]").get_by_text("中文", exact=True).click()
    page.wait_for_function(
        "t => document.querySelector('[data-testid=stMain]').innerText.includes(t)",
        arg=catalog("zh")["home.title"], timeout=30_000)
    assert "lang=zh" in page.url
    page.screenshot(path=str(SHOTS / "switch_after.png"), full_page=True)
    page.close()
    assert outside == []


def test_deep_link_on_a_fresh_server_goes_through_the_router(browser):
    """The first request of a new server is a shared link to a page, not the home page."""
    key = next(p.key for p in available_pages() if p.key != "home")
    proc = start_server(ROOT)
    base = proc.base
    try:
        page, outside, _, _ = visit(browser, f"{base}/{key}?lang=zh", "deep_link_cold")
        body = page.locator("[data-testid='stMain']").inner_text()
        sidebar = page.locator("[data-testid='stSidebar']").inner_text()
        page.close()
    finally:
        proc.terminate()
        proc.wait(10)
    assert catalog("zh")[f"{key}.title"] in body          # the page, in the language of the link
    assert "中文" in sidebar and catalog("zh")["nav.home"] in sidebar  # router's switch and navigation
    assert outside == []


def test_clicking_a_heatmap_cell_selects_its_query_row(server, browser):
    """A real click on a heatmap cell (Vega's point selection, returned by st.vega_lite_chart with
    on_select="rerun") makes that cell's query the row the page explains below the heatmap."""
    page, _outside, _console, _took = visit(browser, f"{server}/masking?lang=en", "masking_click")

    def row_captions():
        return [c for c in page.locator("[data-testid='stCaptionContainer']").all_inner_texts()
                if c.startswith(label_parts("masking.row_caption")[0])]

    def row_of(word):
        return label_parts("masking.row_caption", q=word)[0]                 # "Row of query “word”: ..."

    assert any(c.startswith(row_of("The")) for c in row_captions()), row_captions()   # the first visible row
    chart = page.locator(LESSON_CHARTS).nth(1)                          # the padding section's weights
    cell = chart.locator("g.mark-rect path[aria-label*='query: sat;']").first
    cell.scroll_into_view_if_needed()
    cell.click(position={"x": 4, "y": 4})                                  # a corner: the number sits mid-cell
    page.wait_for_function("[...document.querySelectorAll('[data-testid=stCaptionContainer]')]"
                           f".some(e => e.innerText.startsWith({json.dumps(row_of('sat'))}))", timeout=30_000)
    assert any(shows_label(c, "masking.row_caption", q="sat") for c in row_captions()), row_captions()
    page.wait_for_function("location.search.includes('row_pad_w=2')", timeout=10_000)   # a link keeps the row
    page.close()


def test_presenter_mode_steps_through_a_page(server, browser):
    """?present=1 in a real browser (a page shown to a room): the sidebar is hidden, only the current step is shown (the
    scaling page's question alone at step 2, its variance charts at step 3), and a clicker's PageDown / PageUp and
    the Next button move the step in the URL."""
    def idle(page):
        page.wait_for_timeout(300)
        page.wait_for_selector("[data-testid='stApp'][data-test-script-state='notRunning']", timeout=60_000)
        page.wait_for_timeout(700)

    def visible(page, selector: str) -> int:
        return page.evaluate("s => [...document.querySelectorAll(s)].filter(e => e.offsetParent !== null).length",
                             selector)

    page, outside, _, _ = visit(browser, f"{server}/scaling?lang=en&present=1&step=2", "present_scaling_2")
    try:
        en = catalog("en")
        assert visible(page, "[data-testid=stSidebar]") == 0
        assert en["common.present_step"].format(i=2, n=8) in page.locator("[data-testid=stMain]").inner_text()
        assert visible(page, "[data-testid=stRadio]") == 1                  # the question, alone
        assert visible(page, "[data-testid=stVegaLiteChart]") == 0
        page.mouse.click(5, 700)                                             # focus the page, as a clicker would
        page.keyboard.press("PageDown")
        idle(page)
        assert "step=3" in page.url
        assert visible(page, "[data-testid=stVegaLiteChart]") >= 1          # the evidence that answers it
        assert visible(page, "[data-testid=stRadio]") == 0
        page.keyboard.press("PageUp")
        idle(page)
        assert "step=2" in page.url
        page.get_by_role("button", name=en["common.present_next"]).click()
        idle(page)
        assert "step=3" in page.url
        page.screenshot(path=str(SHOTS / "present_scaling_3.png"), full_page=True)
    finally:
        page.close()
    assert outside == []


def test_the_layer_diagram_images_are_coloured_as_vega_colours_its_legend(server, browser):
    """The encoder's layer diagram draws each mini heatmap as one image coloured in Python (ui.charts.scheme_rgb):
    the colours must be the ones Vega draws for the same scale. Vega's own legend gradient is the oracle (13 stops
    at 1/12 steps, half of them inside a segment of the scheme); the images are drawn unsmoothed; hovering a row
    names its token."""
    import re

    import numpy as np

    from ui.charts import scheme_rgb
    from ui.encoder_charts import VALUE_CLAMP

    page, outside, _console, _took = visit(browser, f"{server}/encoder?lang=en", "encoder_images")
    chart = page.locator(LESSON_CHARTS).first
    stops = chart.evaluate("c => [...c.querySelectorAll('linearGradient stop')].map("
                           "s => [+s.getAttribute('offset'), s.getAttribute('stop-color')])")
    assert len(stops) >= 5, stops
    offsets = np.array([o for o, _ in stops])
    vega = np.array([[int(v) for v in re.findall(r"\d+", colour)] for _, colour in stops])
    ours = scheme_rgb(-VALUE_CLAMP + 2 * VALUE_CLAMP * offsets, (-VALUE_CLAMP, VALUE_CLAMP))
    assert np.abs(vega - ours.astype(int)).max() <= 1, (vega.tolist(), ours.tolist())
    styles = chart.evaluate("c => [...c.querySelectorAll('image')].map(i => i.getAttribute('style') || '')")
    assert len(styles) == 8 and all("pixelated" in s for s in styles), styles
    image = chart.locator("image").nth(4)                                  # the FFN's hidden layer
    image.scroll_into_view_if_needed()
    box = image.bounding_box()
    page.mouse.move(box["x"] + box["width"] / 2, box["y"] + 2)            # the first token's row
    page.wait_for_function("(document.querySelector('#vg-tooltip-element') || {}).innerText?.includes('RMS')",
                           timeout=10_000)
    tip = page.locator("#vg-tooltip-element").inner_text()
    page.close()
    assert "The" in tip and catalog("en")["encoder.step_ffn_hidden"] in tip, tip
    assert outside == []


def test_kernel_dots_and_heatmap_share_one_colour_scale_read_from_the_data(server, browser):
    """qkv's kernel charts carry no colour domain in their specs (a new seed then swaps their data only): the
    heatmap's scale is Vega's 0 .. max of its data, the dots' ends at ``top`` read from the query's data set by an
    expression. In a real browser both legends must end at the same weight, the sample's largest (0.269 for
    kseed 5: ticks up to 0.25; 0.235 for kseed 0: up to 0.20)."""
    for seed, last in ((5, "0.25"), (0, "0.20")):
        page, outside, _console, _took = visit(browser, f"{server}/qkv?lang=en&kseed={seed}", f"qkv_kernel_{seed}")
        try:
            page.wait_for_timeout(1500)
            legends = [c.evaluate("c => [...c.querySelectorAll('.role-legend-label text')].map(t => t.textContent)"
                                  ".filter(s => /^[0-9.]+$/.test(s))")
                       for c in page.locator(LESSON_CHARTS).all()[:2]]
            assert legends[0] == legends[1] and legends[0][-1] == last, legends
        finally:
            page.close()
        assert outside == []

"""Presenter mode made for charts, and a picture on every concept page's first screen, in a real browser at
1280x720 (a projector), both languages:

- in presenter mode (``?present=1``) every chart's text (axis labels, legends, cell numbers, titles) is at least
  ``ui.charts.PRESENT_MIN_FONT`` px, read from the rendered SVG;
- each step that shows a chart shows it on the step's first screen: the chart's top is inside the viewport with
  room for some of it (``ROOM`` px) before the bottom edge, without scrolling;
- the first paint of a fresh load is already the presenter layout: sampled every 30 ms from the navigation on,
  the sidebar is never visible and the page's text is never drawn at the normal 16 px
  (``presenter.styling_first``), and the page drawn is the one linked, with its step bar;
- a control inside a fragment (the seed) keeps the step shown, and a tab opened in presenter mode starts at its
  first step (the step holding the tab bar, or the first one in the tab), shown (``presenter.Lesson.part``, ``tabs``);
- outside presenter mode, every concept page shows a chart on its first screen (its top above 720 px): checked in
  the visit of tests/test_layout.py (``PageReport.chart_tops``).

``PRESENT=subset`` checks a few pages (the densest charts, tabs, many steps) for a quick local run.
"""
from __future__ import annotations

import os
import re
import shutil

import pytest

from scripts.layout_check import click_and_wait, launch_browser, wait_idle, watch_runs
from tests.apptest_util import lesson_pages
from ui.charts import PRESENT_MIN_FONT
from ui.i18n import catalog

if shutil.which("chromium") is None:
    if os.environ.get("CI"):
        raise RuntimeError("CI must install Debian's chromium for the browser tests (.ci/run does)")
    pytest.skip("no chromium on this machine: `apt-get install -y chromium` to run the browser tests",
                allow_module_level=True)

sync_playwright = pytest.importorskip("playwright.sync_api").sync_playwright

VIEWPORT = {"width": 1280, "height": 720}
ROOM = 100            # px of a step's chart that must be on its first screen
CONCEPT = lesson_pages()
SUBSET = ["masking", "kv_cache", "gqa", "scaling"]
PAGES = {"subset": SUBSET}.get(os.environ.get("PRESENT", ""), CONCEPT)

# the visible charts of the page: top edge (px from the viewport's top) and the smallest font of their visible text
CHARTS_JS = """() => [...document.querySelectorAll('[data-testid=stVegaLiteChart]')]
  .filter(c => c.offsetParent !== null && c.getBoundingClientRect().height > 0)
  .map(c => {
    const texts = [...c.querySelectorAll('svg.marks text')].filter(t => {
      if (!t.textContent.trim()) return false;
      for (let e = t; e && e.tagName !== 'svg'; e = e.parentElement) {
        const s = getComputedStyle(e);
        if (s.display === 'none' || s.visibility === 'hidden' || +s.opacity === 0 || +s.fillOpacity === 0) return false;
        if (e.getAttribute('opacity') === '0' || e.getAttribute('fill-opacity') === '0') return false;
      }
      return true;
    });
    const sizes = texts.map(t => parseFloat(getComputedStyle(t).fontSize));
    const small = texts.filter((t, i) => sizes[i] < MIN).map(t => t.textContent.trim().slice(0, 20));
    return {top: c.getBoundingClientRect().top + window.scrollY, n: texts.length,
            min: sizes.length ? Math.min(...sizes) : null, small: small.slice(0, 5)};
  })""".replace("MIN", str(PRESENT_MIN_FONT))


# the current step's own box: shown, and how high (0 when it is hidden, e.g. in a tab that is not open)
STEP_HEIGHT_JS = """(n) => { const e = document.querySelector('.st-key-present_step_' + n);
  return e && e.offsetParent !== null ? e.getBoundingClientRect().height : 0; }"""
# the run is over and the step bar names the step (its text in the page's language)
STEP_SHOWN_JS = """(label) => {
  const app = document.querySelector('[data-testid=stApp]');
  return app && app.getAttribute('data-test-script-state') === 'notRunning'
    && document.querySelector('[data-testid=stMain]').innerText.includes(label); }"""


def settle(page) -> None:
    wait_idle(page)
    page.wait_for_timeout(400)


def step_count(page, lang: str) -> int:
    pattern = re.escape(catalog(lang)["common.present_step"]).replace(r"\{i\}", r"(\d+)").replace(r"\{n\}", r"(\d+)")
    found = re.search(pattern, page.locator("[data-testid=stMain]").inner_text())
    assert found, "no step bar in presenter mode"
    return int(found.group(2))


def presenter_problems(page, base: str, key: str, lang: str) -> list[str]:
    """Every step of ``key`` in presenter mode: the chart on the first screen, its text large enough."""
    watch_runs(page)
    page.goto(f"{base}/{key}?lang={lang}&present=1&step=1")
    settle(page)
    n, problems = step_count(page, lang), []
    for step in range(1, n + 1):
        if step > 1:                        # what a teacher does: Next (PageDown), in the same session
            click_and_wait(page, page.locator(".st-key-present_next button"))
            label = catalog(lang)["common.present_step"].format(i=step, n=n)
            page.wait_for_function(STEP_SHOWN_JS, arg=label, timeout=30_000, polling=50)
            wait_idle(page, settle_ms=0)   # its charts drawn (the run may have started after click_and_wait gave up)
        assert page.evaluate("window.scrollY") == 0
        height = page.evaluate(STEP_HEIGHT_JS, step)
        if height < 30:             # e.g. a step inside a tab that is not open
            problems.append(f"step {step}: nothing shown (its box is {height:.0f} px high)")
        charts = page.evaluate(CHARTS_JS)
        for i, chart in enumerate(charts):
            if chart["small"]:
                problems.append(f"step {step} chart {i}: text below {PRESENT_MIN_FONT} px "
                                f"({chart['min']:.1f} px: {chart['small']})")
        if charts and charts[0]["top"] > VIEWPORT["height"] - ROOM:
            problems.append(f"step {step}: the first chart starts at y={charts[0]['top']:.0f} (of 720)")
    return problems


def first_paint_frames(page, url: str) -> list[str]:
    """Sample the page every ~30 ms from the navigation until the run is done: what showed the normal layout."""
    page.add_init_script("""
      window.__frames = [];
      const sample = () => {
        const side = document.querySelector('[data-testid=stSidebar]');
        const box = side && side.getBoundingClientRect();
        const main = document.querySelector('.stMainBlockContainer');
        const text = [...document.querySelectorAll('[data-testid=stMain] h1, [data-testid=stMain] p')]
          .some(e => e.offsetParent !== null && e.innerText.trim() !== '');
        window.__frames.push({t: performance.now(),
          sidebar: !!side && side.offsetParent !== null && box.width > 0 && box.right > 0,
          prose: main && text ? parseFloat(getComputedStyle(main).fontSize) : null});
        if (window.__frames.length < 2000) setTimeout(sample, 30);
      };
      sample();
    """)
    page.goto(url)
    settle(page)
    frames = page.evaluate("window.__frames")
    assert len(frames) > 20, "the sampler did not run"
    drawn = [f for f in frames if f["prose"] is not None]
    assert drawn, "the page's text was never sampled"
    return ([f"{f['t']:.0f} ms: the sidebar is visible" for f in frames if f["sidebar"]][:5]
            + [f"{f['t']:.0f} ms: the page's text is {f['prose']:.0f} px" for f in drawn if f["prose"] < 18][:5])


@pytest.mark.parametrize("lang", ["en", "zh"])
@pytest.mark.parametrize("key", PAGES)
def test_every_step_shows_its_chart_large_on_the_first_screen(server, page, key, lang):
    assert page.viewport_size == VIEWPORT
    problems = presenter_problems(page, server, key, lang)
    assert problems == [], "\n".join(problems)


@pytest.mark.parametrize("lang", ["en", "zh"])
@pytest.mark.parametrize("key", ["kv_cache", "gqa", "masking", "qkv"])
def test_the_first_paint_is_already_the_presenter_layout(server, browser, key, lang):
    page = browser.new_page(viewport=VIEWPORT)
    try:
        bad = first_paint_frames(page, f"{server}/{key}?lang={lang}&present=1")
        assert page.evaluate("location.pathname").endswith(f"/{key}")   # the run that waited kept the address
        assert step_count(page, lang) > 1                                # and the page drawn is the lesson's
    finally:
        page.close()
    assert bad == [], "frames in the normal layout:\n" + "\n".join(bad)


# the step bar's step, and the step the page shows: the one step container that is visible
SHOWN_JS = """() => [...document.querySelectorAll('[class*=st-key-present_step_]')].filter(e => e.offsetParent !== null)
  .map(e => +[...e.classList].find(c => c.startsWith('st-key-present_step_')).slice(20))"""
# the first step of the open tab, read from the page: the lowest step holding the tab bar or inside the open panel
TAB_FIRST_JS = """() => Math.min(...[...document.querySelectorAll('[class*=st-key-present_step_]')]
  .filter(e => e.querySelector('[role=tablist]') || e.closest('[role=tabpanel]:not([hidden])'))
  .map(e => +[...e.classList].find(c => c.startsWith('st-key-present_step_')).slice(20)))"""


def bar_step(page, lang: str) -> int:
    pattern = re.escape(catalog(lang)["common.present_step"]).replace(r"\{i\}", r"(\d+)").replace(r"\{n\}", r"(\d+)")
    return int(re.search(pattern, page.locator("[data-testid=stMain]").inner_text()).group(1))


@pytest.mark.parametrize("lang", ["en", "zh"])
@pytest.mark.parametrize("key, step, tab", [("masking", 3, 2), ("multihead", 3, 1), ("efficiency", 3, 1),
                                            ("qkv", 4, 1), ("analysis", 2, 1)])
def test_a_fragment_keeps_the_step_and_a_tab_opens_at_its_first_step(server, page, key, step, tab, lang):
    page.goto(f"{server}/{key}?lang={lang}&present=1&step={step}")
    settle(page)
    assert (bar_step(page, lang), page.evaluate(SHOWN_JS)) == (step, [step])
    seed = page.locator(".st-key-seed input").first
    if key in ("masking", "multihead"):                  # the seed: a fragment's own rerun, inside the lesson
        seed.focus()
        seed.press("ArrowUp")
        page.wait_for_timeout(800)
        settle(page)
        assert (bar_step(page, lang), page.evaluate(SHOWN_JS)) == (step, [step]), "the seed moved the step"
    page.get_by_role("tab").nth(tab).click()
    page.wait_for_function("location.search.includes('tab=')", timeout=30_000)
    page.wait_for_timeout(800)
    settle(page)
    first = page.evaluate(TAB_FIRST_JS)
    assert first < step + 10 and bar_step(page, lang) == first, (bar_step(page, lang), first)
    assert page.evaluate(SHOWN_JS) == [first] and page.evaluate(STEP_HEIGHT_JS, first) > 30
    assert f"step={first}" in page.url


if __name__ == "__main__":          # a survey of every page: python -m tests.test_presenter_browser [keys]
    import sys

    keys = sys.argv[1:] or CONCEPT
    with sync_playwright() as p:
        b = launch_browser(p)
        base = os.environ.get("BASE", "http://127.0.0.1:8731")
        for key in keys:
            for lang in os.environ.get("LANGS", "en").split(","):
                pg = b.new_page(viewport=VIEWPORT)
                print(key, lang, presenter_problems(pg, base, key, lang), flush=True)
                pg.close()
                pg = b.new_page(viewport=VIEWPORT)
                pg.goto(f"{base}/{key}?lang={lang}")
                settle(pg)
                print("   normal tops:", [round(c["top"]) for c in pg.evaluate(CHARTS_JS)][:3], flush=True)
                pg.close()

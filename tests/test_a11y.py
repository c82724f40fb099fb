"""WCAG 2.1 AA in a real browser: axe-core (bundled by ``axe-playwright-python``, nothing downloaded; the check is
scripts/a11y_check.py) finds what it should on a planted page, and presenter mode and an exercise work from the
keyboard alone. Every page in both languages at 1280x720 is checked in the visit of tests/test_layout.py (no
critical or serious finding in the app's own markup, the document's language is the page's, the tab names the page
in it, every chart has its own text alternative in that language).

One server, one browser, one tab reused for every page (about 5 s a page on a shared 2-core machine).

    python tests/test_a11y.py [--root CHECKOUT] [--pages KEY ...]    # the findings by rule and element, no asserts
"""
from __future__ import annotations

import argparse
import collections
import pathlib
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from scripts.a11y_check import app_failures, chart_labels, describe, run_axe  # noqa: E402
from scripts.layout_check import launch_browser, page_keys, page_url, wait_idle  # noqa: E402
from scripts.server import start_server  # noqa: E402

VIEWPORT = {"width": 1280, "height": 720}


def open_view(page, base: str, key: str, lang: str, query: str = "") -> None:
    page.goto(page_url(base, key, lang) + query)
    wait_idle(page)


# ----------------------------------------------------------------------------------------------- the tests
@pytest.fixture
def in_lang():
    """Set the language ``t()`` uses outside a page run, and restore it."""
    import streamlit as st

    before = st.session_state.get("lang")

    def use(lang: str) -> None:
        st.session_state["lang"] = lang
    yield use
    st.session_state["lang"] = before or "en"


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_every_chart_carries_one_text_alternative_in_the_page_language(in_lang, lang):
    """The one spec path (a chart kind's call) writes the chart's title, axes and colour into its description;
    per-mark labels stay off above the cell limit (one label per chart, not one per cell)."""
    import numpy as np

    from ui import charts
    from ui.i18n import catalog

    in_lang(lang)
    cat = catalog(lang)
    n = 30                                                    # 900 cells > MAX_ARIA_CELLS
    spec = charts.attention_heatmap(np.full((n, n), 1 / n), [f"t{i}" for i in range(n)], title="标题 T")
    text = spec["description"]
    assert text.startswith(cat["a11y.chart_title"].format(title="标题 T")), text
    for key, name in (("a11y.chart_x", "common.key"), ("a11y.chart_y", "common.query"),
                      ("a11y.chart_colour", "common.weight")):
        assert cat[key].format(name=cat[name]) in text, text
    assert spec["layer"][0]["mark"].get("aria") is False              # no label per cell
    bars = charts.bars([0.25, 0.75], ["a", "b"], value_title=cat["common.weight"], label_title=cat["common.key"])
    assert bars["description"].startswith(cat["a11y.chart"]), bars["description"]   # untitled: "Chart."
    assert cat["a11y.chart_y"].format(name=cat["common.weight"]) in bars["description"]
    assert ("。 " in text, ". " in text) == ((False, True) if lang == "en" else (False, False)), text  # no gap in zh


def test_reference_rules_are_hidden_and_data_rules_keep_their_labels():
    """A rule whose tooltip names no data field (a threshold line) gets no unlabelled graphic role; a rule whose
    items carry data keeps Vega's label per item."""
    import altair as alt
    import pandas as pd

    from ui.charts import chart_kind

    @chart_kind()
    def rules_toy(frame, *, title: str = "t") -> alt.LayerChart:
        base = alt.Chart(frame)
        line = base.mark_rule().encode(y=alt.datum(1.0))
        named = base.mark_rule(color="#333333").encode(x="x:Q", tooltip=[alt.Tooltip("x:Q")])
        return alt.layer(base.mark_point().encode(x="x:Q", y="y:Q"), line, named).properties(title=title)

    spec = rules_toy(pd.DataFrame({"x": [1.0, 2.0], "y": [0.5, 1.5]}))
    marks = [layer["mark"] for layer in spec["layer"]]
    assert marks[1] == {"type": "rule", "aria": False}
    assert marks[2].get("aria") is None and marks[0] in ("point", {"type": "point"})
    assert spec["description"].startswith("Chart: t.")


def test_the_declaration_names_the_language(in_lang):
    from ui import a11y

    assert 'document.documentElement.lang = "zh"' in a11y.declaration("zh")
    in_lang("zh")
    assert a11y.tab_title("masking") == "掩码 · 注意力机制，边运行边理解"
    in_lang("en")
    assert a11y.tab_title("masking") == "Masking · Attention, explained by running it"




@pytest.fixture(scope="module")
def tab(browser):
    page = browser.new_page(viewport=VIEWPORT, device_scale_factor=1)
    yield page
    page.close()


def test_a_planted_page_shows_what_the_check_catches(tab):
    """The check itself: low-contrast text, an unlabelled graphic and a scrolling box the keyboard cannot reach
    are found (serious), and a list of Streamlit's navigation shape is set aside only inside the navigation."""
    tab.set_content("""<html lang="en"><body><main>
      <p style="color:#aaaaaa;background:#ffffff">faint text</p>
      <svg role="img" width="20" height="20"><rect width="20" height="20"/></svg>
      <div id="scroller" style="width:80px;height:40px;overflow:auto"><p style="width:400px">wide wide wide</p></div>
      <ul data-testid="stSidebarNavItems"><div><span>section</span><li>nav item</li></div></ul>
      <ul><div><li>app list item</li></div></ul></main></body></html>""")
    found = run_axe(tab)
    rules = collections.Counter(f["rule"] for f in app_failures(found))
    assert {"color-contrast", "svg-img-alt", "scrollable-region-focusable"} <= set(rules), describe(found)
    upstream = [f for f in found if f["upstream"]]
    assert {f["rule"] for f in upstream} == {"list", "listitem"}, describe(found)
    assert all("stSidebarNavItems" in f["html"] or "nav item" in f["html"] for f in upstream), describe(upstream)
    assert rules["list"] == 1 and rules["listitem"] == 1, describe(found)     # the app's own list still fails


def focused(page) -> dict:
    return page.evaluate("""() => { const e = document.activeElement;
      const keyed = e && e.closest('[class*="st-key-"]');
      return {tag: e ? e.tagName : '', type: e ? e.getAttribute('type') || '' : '',
              text: e ? (e.innerText || e.getAttribute('aria-label') || '').trim().slice(0, 80) : '',
              key: keyed ? [...keyed.classList].find(c => c.startsWith('st-key-')).slice(7) : ''}; }""")


def tab_to(page, want, limit: int = 60) -> dict:
    """Press Tab until the focused element satisfies ``want``; fail if it never does."""
    seen = []
    for _ in range(limit):
        page.keyboard.press("Tab")
        now = focused(page)
        seen.append(now)
        if want(now):
            return now
    raise AssertionError(f"Tab never reached it; focus went through: {seen}")


def idle(page) -> None:
    page.wait_for_timeout(300)
    wait_idle(page, title=False)


def test_presenter_mode_and_the_exercise_from_the_keyboard_alone(server, tab):
    """The scaling page in presenter mode with no mouse: Tab reaches the exercise's choices, Space picks one, Tab
    reaches Reveal and Enter reveals the feedback; PageDown shows the next step and PageUp the one before; Tab
    reaches Next and Enter moves on. Each view passes axe."""
    from ui.i18n import catalog

    en = catalog("en")
    open_view(tab, server, "scaling", "en", "&present=1&step=2")
    assert "step=2" in tab.url
    choice = tab_to(tab, lambda f: f["type"] == "radio")
    assert choice["key"].endswith("_guess"), choice
    tab.keyboard.press("Space")                                     # pick the first answer
    idle(tab)
    exercise = choice["key"][:-len("_guess")]
    reveal = tab_to(tab, lambda f: f["key"] == f"{exercise}_reveal")
    assert reveal["text"] == en["common.reveal"], reveal
    tab.keyboard.press("Enter")
    idle(tab)
    feedback = tab.locator("[data-testid=stMain] [data-testid=stAlertContainer]").all_inner_texts()
    assert any(en["common.correct"] in x or en["common.not_quite"].split("{")[0].strip() in x for x in feedback), \
        feedback
    assert app_failures(run_axe(tab)) == []
    tab.keyboard.press("PageDown")                                  # a clicker's "next"
    idle(tab)
    assert "step=3" in tab.url
    tab.keyboard.press("PageUp")
    idle(tab)
    assert "step=2" in tab.url
    nxt = tab_to(tab, lambda f: f["key"] == "present_next")
    assert en["common.present_next"] in nxt["text"], nxt
    tab.keyboard.press("Enter")
    idle(tab)
    assert "step=3" in tab.url
    failures = app_failures(run_axe(tab))
    assert failures == [], describe(failures)


def test_code_blocks_take_keyboard_focus(server, tab):
    """A code block wider than its column scrolls; Tab reaches it and the arrow keys scroll it."""
    open_view(tab, server, "efficiency", "en")
    wide = tab.evaluate("[...document.querySelectorAll('[data-testid=stCode] pre')]"
                        ".filter(e => e.scrollWidth > e.clientWidth + 1).length")
    assert wide >= 1
    tab.evaluate("document.activeElement && document.activeElement.blur()")
    tab.evaluate("""() => { const pre = [...document.querySelectorAll('[data-testid=stCode] pre')]
      .find(e => e.scrollWidth > e.clientWidth + 1); pre.setAttribute('data-probe', '1');
      pre.scrollIntoView(); }""")
    reached = False
    for _ in range(200):
        tab.keyboard.press("Tab")
        if tab.evaluate("document.activeElement.getAttribute('data-probe') === '1'"):
            reached = True
            break
    assert reached, "Tab never reached the scrolling code block"
    tab.keyboard.press("ArrowRight")
    tab.keyboard.press("ArrowRight")
    tab.wait_for_timeout(200)
    assert tab.evaluate("document.activeElement.scrollLeft") > 0


# ----------------------------------------------------------------------------------------------- the measurement
def main() -> None:
    from playwright.sync_api import sync_playwright

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--root", type=pathlib.Path, default=ROOT, help="checkout of the app to measure")
    ap.add_argument("--pages", nargs="*", help="page keys (default: every registered page)")
    a = ap.parse_args()
    keys = a.pages or page_keys(a.root)
    proc = start_server(a.root)
    rows = []
    try:
        with sync_playwright() as p:
            browser = launch_browser(p)
            page = browser.new_page(viewport=VIEWPORT, device_scale_factor=1)
            for key in keys:
                for lang in ("en", "zh"):
                    open_view(page, proc.base, key, lang)
                    found = run_axe(page)
                    labels = chart_labels(page)
                    unlabelled = sum(1 for x in labels if not x or x == "Vega visualization")
                    doc_lang, title = page.evaluate("[document.documentElement.lang, document.title]")
                    rows += [{**f, "page": key, "lang": lang} for f in found]
                    print(f"{key:16s} {lang}  html lang={doc_lang!r:5s} charts {len(labels):2d} (no text "
                          f"alternative: {unlabelled:2d})  findings {len(found):3d}  title {title!r}", flush=True)
            browser.close()
    finally:
        proc.terminate()
        proc.wait(30)
    print("\nby rule (impact, app / Streamlit's navigation):")
    for (rule, impact), n in collections.Counter((r["rule"], r["impact"]) for r in rows).most_common():
        app = sum(1 for r in rows if r["rule"] == rule and not r["upstream"])
        print(f"  {rule:30s} {impact:9s} {n:4d}   app {app:4d}   navigation {n - app:4d}")
    print("\nthe app's findings by element:")
    for (rule, html), n in collections.Counter((r["rule"], r["html"][:110]) for r in rows
                                               if not r["upstream"]).most_common():
        pages = sorted({r["page"] for r in rows if r["rule"] == rule and r["html"][:110] == html})
        print(f"  {n:3d}  {rule:28s} {html}  [{', '.join(pages)[:80]}]")


if __name__ == "__main__":
    main()

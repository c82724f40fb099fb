"""Every chart legible at 1280x720 (projector) and 390x844 (phone): no chart text clipped, truncated, overlapping or
dropped while the page quotes it, and nothing scrolling sideways on a phone (the checks are defined in
scripts/layout_check.py, which also prints the full list for a checkout).

By default every registered page is checked in both languages at both sizes, in one visit per page and language
(one server, one browser), which also runs the WCAG 2.1 AA check of scripts/a11y_check.py at 1280x720. ``LAYOUT=subset``
checks a representative subset instead (the pages with the densest charts: cells with numbers, tabs, legends, formulas),
for a quick local run. A planted app first shows that the checker finds each kind of problem and passes a clean chart.
"""
import os
import pathlib
import shutil
import tempfile
import textwrap

import pytest

from scripts.a11y_check import app_failures, chart_labels, describe, run_axe
from scripts.layout_check import VIEWPORTS, check_page, check_views, page_keys
from scripts.server import start_server, stop_server
from tests.apptest_util import lesson_pages

ROOT = pathlib.Path(__file__).resolve().parent.parent
SHOTS = ROOT / "shots" / "layout" if os.environ.get("SHOTS") else None     # SHOTS=1: a screenshot of each view

if shutil.which("chromium") is None:
    if os.environ.get("CI"):
        raise RuntimeError("CI must install Debian's chromium for the browser tests (.ci/run does)")
    pytest.skip("no chromium on this machine: `apt-get install -y chromium` to run the layout tests",
                allow_module_level=True)

sync_playwright = pytest.importorskip("playwright.sync_api").sync_playwright

CONCEPT = set(lesson_pages())
# (page, language, viewport): heatmaps with numbers in cells, many tabs, legends, long axis titles, formulas
SUBSET = [("multihead", "en"), ("efficiency", "zh"), ("pronoun", "zh"), ("positional", "en")]
if os.environ.get("LAYOUT") == "subset":
    VIEWS = [v for v in SUBSET if (ROOT / "app_pages" / f"{v[0]}.py").exists()]
else:
    VIEWS = [(k, lang) for k in page_keys(ROOT) for lang in ("en", "zh")]

PLANTED = '''
import altair as alt
import pandas as pd
import streamlit as st

st.title("planted")
labels = [f"word{i}" for i in range(40)]
st.markdown("The page quotes every label: " + " ".join(labels))
n = 24                                            # 0: numbers in 24x24 cells of a 240 px heatmap overlap
cells = pd.DataFrame([(f"t{i}", f"t{j}", (i * j % 7) / 7) for i in range(n) for j in range(n)], columns=list("qkw"))
base = alt.Chart(cells, width=240, height=240).encode(x="k:N", y="q:N")
st.altair_chart(base.mark_rect().encode(color="w:Q") + base.mark_text().encode(text=alt.Text("w:Q", format=".2f")),
                use_container_width=False)
legend = pd.DataFrame({"x": [1, 2], "y": [1, 2], "c": ["a very long legend label that will not fit", "b"]})
st.altair_chart(alt.Chart(legend).mark_point().encode(x="x:Q", y="y:Q", color=alt.Color(
    "c:N", legend=alt.Legend(labelLimit=60))), use_container_width=False)                       # 1: truncated
outside = pd.DataFrame({"x": [50, 300], "t": ["inside", "far outside"]})
st.altair_chart(alt.Chart(outside, width=150, height=60, autosize="none").mark_text(clip=False).encode(
    x=alt.X("x:Q", scale=alt.Scale(domain=[0, 100]), axis=None), text="t:N"), use_container_width=False)  # 2: clipped
many = pd.DataFrame({"k": labels, "v": range(40)})
st.altair_chart(alt.Chart(many, width=120).mark_bar().encode(x=alt.X("k:N", sort=labels, axis=alt.Axis(
    labelOverlap=True, labelAngle=0)), y="v:Q"), use_container_width=False)                     # 3: dropped, quoted
clean = pd.DataFrame({"k": ["a", "b", "c"], "v": [1, 2, 3]})
st.altair_chart(alt.Chart(clean, title="clean").mark_bar().encode(x="k:N", y="v:Q"))          # 4: nothing wrong
st.latex(r"\\mathrm{" + "+".join(["softmax(QK^T/\\\\sqrt{d_k})V"] * 6) + "}")                  # sideways at 390
'''


def test_the_checker_finds_each_planted_problem_and_passes_a_clean_chart(browser):
    with tempfile.TemporaryDirectory() as d:
        (pathlib.Path(d) / "app.py").write_text(textwrap.dedent(PLANTED))
        proc = start_server(pathlib.Path(d))
        try:
            wide = check_page(browser, proc.base, "home", "en", "1280x720")
            phone = check_page(browser, proc.base, "home", "en", "390x844")
        finally:
            stop_server(proc)
    assert wide.error == "" and phone.error == "", (wide.error, phone.error)
    kinds = {(f.chart, f.kind) for f in wide.findings}
    lines = "\n".join(f.line() for f in wide.findings)
    assert (0, "overlap") in kinds, lines
    assert (1, "truncated") in kinds, lines
    assert any(f.chart == 2 and f.kind == "clipped" and f.text == "far outside" for f in wide.findings), lines
    assert not any(f.chart == 2 and f.text == "inside" for f in wide.findings), lines
    assert (3, "dropped-quoted") in kinds, lines
    assert not any(f.chart == 4 for f in wide.findings), lines            # the clean chart passes
    assert len(wide.charts) == 5
    assert not any(f.kind == "h-scroll" for f in wide.findings)           # sideways scrolling is a phone check
    assert any(f.kind == "h-scroll" for f in phone.findings), "\n".join(f.line() for f in phone.findings)


def accessibility(page) -> dict:
    """WCAG 2.1 A/AA findings (scripts/a11y_check.py), each chart's text alternative, the document's language and
    the tab's title: of the page as first drawn."""
    found = run_axe(page)
    doc_lang, title = page.evaluate("[document.documentElement.lang, document.title]")
    return {"found": found, "labels": chart_labels(page), "lang": doc_lang, "title": title}


def assert_accessible(seen: dict, key: str, lang: str) -> None:
    from ui.a11y import LANG_TAGS
    from ui.i18n import catalog

    failures = app_failures(seen["found"])
    assert failures == [], f"{len(failures)} serious or critical findings:\n{describe(failures)}"
    cat = catalog(lang)
    assert seen["lang"] == LANG_TAGS[lang]
    name = cat["a11y.app_title"] if key == "home" else cat[f"nav.{key}"]
    assert name in seen["title"] and cat["a11y.app_title"] in seen["title"], seen["title"]
    # the templates' own words in this language (a title may quote the other language: a date format "YYYY年M月D日")
    words = [str(v).split("{")[0] for k, v in cat.items() if k.startswith("a11y.chart") or k.startswith("a11y.kind.")]
    for label in seen["labels"]:               # one text alternative per chart, in the page's language
        assert label and label != "Vega visualization", seen["labels"]
        assert any(w and w in label for w in words), label


@pytest.mark.parametrize("key,lang", VIEWS)
def test_each_page_in_the_browser(server, browser, page, key, lang):
    """One visit per page and language: loaded at 1280x720, each state of the page (as loaded, each tab opened,
    every expander open) checked there and with the window resized to 390x844 (a phone turned upright, a window
    narrowed), then the page loaded afresh at 390x844 and checked as first drawn there: no chart text clipped, truncated, overlapping or dropped while quoted, nothing
    sideways on the phone; the page draws its title in its language, shows no exception and sends no request
    outside localhost (the app works offline); a concept page shows a chart on its first screen at 1280x720 (its
    top above 720 px) outside presenter mode; and the page as first drawn meets WCAG 2.1 AA (axe, no critical or
    serious finding in the app's markup), says its language and names itself in the tab, each chart with its own
    text alternative in that language."""
    from ui.i18n import catalog

    reports = check_views(browser, server, key, lang, list(VIEWPORTS), shots=SHOTS, on_load=accessibility, page=page,
                          fresh=False)
    for report in reports:
        where = f"{key} {lang} {report.viewport}"
        assert report.error == "", f"{where}: {report.error}"
        assert report.outside == [], f"requests left localhost: {sorted(set(report.outside))}"
        assert catalog(lang)["home.title" if key == "home" else f"{key}.title"] in report.main_text, where
        assert report.findings == [], f"{where}: {len(report.findings)} layout problems:\n" + "\n".join(
            f.line() for f in report.findings)
    wide = reports[0]
    assert wide.viewport == "1280x720"
    if key in CONCEPT:                                   # a picture on a concept page's first screen (a projector)
        assert wide.chart_tops and min(wide.chart_tops) < 720, \
            f"the first chart starts at y={min(wide.chart_tops, default=None)} (of 720)"
    assert_accessible(wide.extra, key, lang)

"""Presenter mode's layout comes from the router, first (``ui.presenter.early_css``): with ``?present=1`` the first
element of the run is the CSS (a style-only ``st.html``: it hides the sidebar) with the URL's step, drawn alone in a
session's first presenter run (``styling_first``, with the component that reports from the browser once it applies)
and first again in the run that draws the page, and the presenter skeleton of every chart kind has its text at
least ``PRESENT_MIN_FONT`` px; without it there is no such CSS and charts keep their sizes. The browser side (first
paint, fonts as drawn): tests/test_presenter_browser.py."""
import json

import pytest

from streamlit.testing.v1 import AppTest

from tests.apptest_util import APP, chart_spec, charts, exceptions, held_back, open_page
from ui.charts import PRESENT_MIN_FONT, styled


def font_sizes(node) -> list:
    out = []
    if isinstance(node, dict):
        for k, v in node.items():
            if (k == "fontSize" or k.endswith("FontSize")) and isinstance(v, (int, float)):
                out.append(v)
            out += font_sizes(v)
    elif isinstance(node, list):
        for v in node:
            out += font_sizes(v)
    return out


def test_the_router_sends_the_presenter_css_first_and_charts_grow():
    at = open_page("masking", "en", {"present": "1", "step": "3"})
    assert exceptions(at) == []
    # a style-only st.html goes to Streamlit's event container (it takes no space); its first element is the layout
    first = [h.proto.body for h in at._tree.children[2].get("html")][0]
    assert "header[data-testid=\"stHeader\"] {display: none;}" in first
    assert ":not(.st-key-present_step_3)" in first
    assert at.session_state["_presenter_styled"] is True
    sizes = [s for c in charts(at) for s in font_sizes(chart_spec(c))]
    assert sizes and min(sizes) >= PRESENT_MIN_FONT
    plain = open_page("masking", "en")
    assert not any("stHeader\"] {display: none;}" in h.proto.body for h in plain.get("html"))
    assert "_presenter_styled" not in plain.session_state
    assert min(s for c in charts(plain) for s in font_sizes(chart_spec(c))) < PRESENT_MIN_FONT


@pytest.mark.parametrize("key", ["analysis", "pretrained", "long_context"])
def test_a_chart_a_student_drew_first_reaches_the_projector_large(key):
    """The pages that cache their chart specs (``ui.charts.chart_cache``): a student's run on the same server draws
    them first in the normal style; the presenter's run after it still gets the large text."""
    plain = open_page(key, "en")
    assert min(s for c in charts(plain) for s in font_sizes(chart_spec(c))) < PRESENT_MIN_FONT
    at = open_page(key, "en", {"present": "1"})
    assert exceptions(at) == []
    small = {i: min(font_sizes(chart_spec(c))) for i, c in enumerate(charts(at))
             if min(font_sizes(chart_spec(c)), default=PRESENT_MIN_FONT) < PRESENT_MIN_FONT}
    assert charts(at) and small == {}


def test_a_sessions_first_presenter_run_draws_the_css_alone_until_the_browser_reports():
    at = AppTest.from_file(APP, default_timeout=60)
    at.query_params["lang"], at.query_params["present"] = "zh", "1"
    at.run()
    assert held_back(at) and len(at.main.children) == 1                # only the component that reports
    assert list(at.title) == [] and list(at.main.get("markdown")) == []    # (the sidebar, collapsed, is hidden)
    assert "--presenter-layout: on;" in at._tree.children[2].get("html")[0].proto.body
    at.run()                                                        # what its report does: the page, drawn
    assert not held_back(at) and at.title and exceptions(at) == []
    at.query_params["step"] = "2"
    at.run()                                                        # the session's later runs are not held back
    assert not held_back(at) and at.title


def test_the_presenter_style_keeps_fill_placeholders_and_rescales_the_fit_rules():
    spec = {"mark": {"type": "text", "fontSize": 11,
                     "opacity": {"expr": "bandwidth('x') >= 30 && bandwidth('y') >= 13 ? 1 : 0"}},
            "encoding": {"x": {"axis": {"labelExpr": "ceil(17 / max(1, 2))", "labelFontSize": 918273000}}}}
    out = json.dumps(styled(spec, "present"))
    assert '"fontSize": 18' in out and "918273000" in out                   # a fill placeholder stays as it is
    assert "bandwidth('x') >= 50 && bandwidth('y') >= 22" in out and "ceil(26 / max(" in out
    assert styled(spec, "") is spec


def test_without_custom_components_the_first_run_waits_a_fixed_moment_and_says_so(monkeypatch):
    """An upgrade without ``st.components.v2``: the held-back run waits ``STYLE_WAIT_S`` and reruns itself, and
    every page names the feature that stepped down, in the learner's language."""
    from serving import compat
    from ui import presenter
    from ui.i18n import catalog

    monkeypatch.setattr(presenter, "_style_ready", None)
    monkeypatch.setattr(compat, "_missing", {})
    at = AppTest.from_file(APP, default_timeout=60)
    at.query_params["lang"], at.query_params["present"] = "zh", "1"
    at.run()                                                        # no report to wait for: it reran by itself
    assert exceptions(at) == [] and at.title and not held_back(at)
    zh = catalog("zh")
    notice = zh["common.compat_notice"].format(feature=zh["common.compat_presenter_style"])
    assert notice in [c.value for c in at.caption]
    assert compat.degraded() == {"presenter_style": "st.components.v2.component"}

"""The one chart mechanism (ui.charts.chart_kind): a chart kind's filled spec is the spec Altair builds
directly with the same arguments, skeletons are keyed by the arguments, and every page draws through it."""
import json

import altair as alt
import numpy as np
import pandas as pd
import pytest

from tests.apptest_util import exceptions, open_page, title_text
from ui import charts
from ui.registry import available_pages


@pytest.fixture
def verify(monkeypatch):
    monkeypatch.setattr(charts, "VERIFY", True)     # every fill is also built directly and schema-validated


@pytest.mark.parametrize("case", range(40))
def test_heatmap_fill_equals_the_altair_built_heatmap(case, verify):
    """Any input, including labels that spell placeholders, quotes, HTML, CJK and emoji: VERIFY rebuilds each
    spec with Altair (and validates it against the schema) and raises on any difference."""
    rng = np.random.default_rng(case)
    n_q, n_k = (int(x) for x in rng.choice([1, 2, 5, 16, 17, 41, 49, 130, 300], size=2))
    kind = ["weights", "scores"][case % 2]
    m = rng.random((n_q, n_k)) if kind == "weights" else rng.standard_normal((n_q, n_k)) * rng.choice([0.01, 3, 40])
    masked = None if case % 3 == 0 else rng.random((n_q, n_k)) < 0.3
    if kind == "scores" and masked is not None:
        m = np.where(masked, -np.inf, m)
        masked = None if case % 4 == 1 else masked
    words = ["the", "\u27e6fill:0\u27e7", "'\u27e6fill:1\u27e7'", '"q"', "<b>x</b>", "猫", "👍🏽",
             "918273000", "61728.0625"]       # labels that spell the placeholders
    rows = [words[int(i)] for i in rng.integers(0, len(words), n_q)]
    cols = [words[int(i)] for i in rng.integers(0, len(words), n_k)]
    kw = {"kind": kind, "masked": masked,
          "title": [None, "title", "\u27e6fill:2\u27e7 918273007 \"x\"", "注意力"][case % 4],
          "show_numbers": [None, True, False][case % 3],
          "selected_row": [None, 0, n_q - 1][(case // 2) % 3],
          "selectable": case % 5 != 0,
          "height": [None, 333][(case // 3) % 2],
          "domain": [None, (0, 2), (-1.5, 1.5)][(case // 4) % 3],
          "width": [None, 340][case % 2], "legend": case % 7 != 3, "fit_x": case % 3 == 2,
          "x_title": ["key", "键 (K)"][case % 2], "y_title": "query", "value_title": ["weight", "score"][case % 2]}
    spec = charts.heatmap(m, rows, cols, **kw)
    frame = spec["datasets"]["data"]
    assert spec["layer"][0]["encoding"]["x"]["sort"] == {"field": "key_pos", "op": "min"}
    keys = frame.drop_duplicates("key").sort_values("key_pos")["key"].tolist()     # position order = label order
    assert keys == charts.unique_labels(cols) or n_k > 128
    if kw["title"]:
        assert title_text(spec) == kw["title"]                       # filled verbatim, placeholders in it untouched
    if n_q <= 128 and n_k <= 128:
        got = frame.sort_values(["query_pos", "key_pos"])["value"].to_numpy().reshape(n_q, n_k)
        expect = np.where(np.isfinite(m), m, np.nan)
        assert np.allclose(np.nan_to_num(got, nan=-7), np.nan_to_num(expect, nan=-7))


@pytest.mark.parametrize("case", range(8))
def test_bars_fill_equals_the_altair_built_bars(case, verify):
    rng = np.random.default_rng(case)
    n = int(rng.integers(1, 40))
    words = ["the", "猫", "<b>", "the", "👍🏽", '"'] if case % 2 else ["猫", "7", "a", "它"]     # even: all short
    labels = [words[int(i)] for i in rng.integers(0, len(words), n)]
    kw = {"value_title": ["weight", "权重"][case % 2], "label_title": "key",
          "domain": [(0.0, 1.0), None, (-2, 5)][case % 3], "highlight": [None, 0, n - 1][case % 3],
          "height": [220, 180][case % 2], "title": [None, "row 3", ""][case % 3], "fit_x": case % 4 == 1}
    vals = rng.standard_normal(n)
    spec = charts.bars(vals, labels, **kw)
    assert np.allclose(spec["datasets"]["data"]["value"], vals)


# ----------------------------------------------------------------------------- the mechanism itself
BUILDS = []


@charts.chart_kind(fill=("order", "lo", "cut", "title", "height", "picked"))
def _toy(frame, *, colour: str, order=(), lo: float = 0.0, cut: float = 0.5, title=None, height: int = 100,
         picked=None):
    BUILDS.append(colour)
    pick = alt.selection_point(name="p", fields=["x"], value=None if picked is None else [{"x": picked}])
    chart = alt.Chart(frame).mark_bar(color=colour).encode(
        x=alt.X("x:N", sort=order), y=alt.Y("y:Q", scale=alt.Scale(domain=[lo, 1.0])),
        opacity=alt.when(alt.datum.y > cut).then(alt.value(1.0)).otherwise(alt.value(0.4)),
    ).add_params(pick).properties(height=height)
    return chart.properties(title=title) if title else chart


def _frame(n=3):
    return pd.DataFrame({"x": [f"x{i}" for i in range(n)], "y": np.linspace(0, 1, n)})


def test_fill_values_reach_the_spec_and_one_skeleton_serves_every_fill(verify):
    charts.SKELETONS.clear()
    BUILDS.clear()
    a = _toy(_frame(), colour="red", order=["x2", "x1", "x0"], lo=-0.5, cut=0.25, title="它说“好”", height=150,
             picked="x1")
    b = _toy(_frame(4), colour="red", order=["a", "'b'", "\"c\""], lo=0.125, cut=0.75, title="<b>", height=90,
             picked="x3")
    # a fill value of another type (None, empty) is a new static shape; a new static argument too
    c = _toy(_frame(), colour="red", title=None)
    d = _toy(_frame(), colour="blue", order=["x0"], lo=-0.5, cut=0.25, title="t", height=150, picked="x1")
    assert BUILDS.count("red") == 2 + 3    # 2 skeletons (a and b share one) + one direct build per call (VERIFY)
    assert a["encoding"]["x"]["sort"] == ["x2", "x1", "x0"] and a["title"] == "它说“好”" and a["height"] == 150
    assert a["encoding"]["y"]["scale"]["domain"] == [-0.5, 1.0]
    assert "0.25" in a["encoding"]["opacity"]["condition"][0]["test"]
    assert b["encoding"]["x"]["sort"] == ["a", "'b'", "\"c\""] and b["title"] == "<b>"
    assert b["params"][0]["value"] == [{"x": "x3"}]
    assert "title" not in c and d["mark"]["color"] == "blue"
    assert a["usermeta"]["chart_kind"].endswith("_toy")
    assert a["datasets"]["data"] is not b["datasets"]["data"] and len(b["datasets"]["data"]) == 4


def test_without_verify_a_skeleton_is_built_once_per_static_shape():
    charts.SKELETONS.clear()
    BUILDS.clear()
    for i in range(5):
        _toy(_frame(), colour="green", order=[f"x{i}"], lo=-i / 10, title=f"t{i}", height=100 + i)
    assert BUILDS == ["green"]


def test_verify_catches_a_builder_that_changes_a_fill_value(verify):
    @charts.chart_kind(fill=("height",))
    def doubled(frame, *, height: int = 100):
        return alt.Chart(frame).mark_point().properties(height=2 * height)   # arithmetic on a fill value

    with pytest.raises(AssertionError, match="differs from a direct build"):
        doubled(_frame(), height=120)


def test_a_fill_name_the_builder_lacks_is_refused():
    with pytest.raises(TypeError, match="no argument"):
        charts.chart_kind(fill=("nope",))(lambda frame, *, height=1: None)


@pytest.mark.parametrize("key", [p.key for p in available_pages()])
def test_every_chart_of_every_page_is_a_verified_chart_kind(key, verify):
    """Each page in its default state: every chart is drawn from a chart kind (its spec names one) and every
    fill equals the direct Altair build (VERIFY raises inside the page otherwise)."""
    at = open_page(key, "en")
    assert exceptions(at) == []
    for chart in at.get("vega_lite_chart"):
        spec = json.loads(chart.proto.spec)
        assert "chart_kind" in spec.get("usermeta", {}), f"{key}: a chart not drawn through ui.charts.chart_kind"
    assert not at.get("arrow_vega_lite_chart")

"""The shared chart builders: decode the Vega-Lite spec and data they produce."""
import io

import altair as alt
import numpy as np
import pandas as pd
import pytest
import torch
from streamlit.testing.v1 import AppTest

from attention_core import causal_mask, masked_softmax
from tests.apptest_util import assert_same_spec, chart_data, chart_spec
from ui import charts


def spec_and_rows(chart):
    spec = chart.to_dict()
    (name, rows), = spec["datasets"].items()
    return spec, pd.DataFrame(rows)


def layer_marks(spec):
    return [layer["mark"]["type"] if isinstance(layer["mark"], dict) else layer["mark"] for layer in spec["layer"]]


def test_heatmap_cells_labels_tooltip_and_fixed_domain():
    tokens = ["the", "cat", "saw", "the", "dog"]
    w = masked_softmax(torch.randn(5, 5), causal_mask(5))
    spec, rows = spec_and_rows(charts.heatmap(w, tokens, masked=~causal_mask(5)))
    assert len(rows) == 25
    # repeated tokens stay distinct positions, in order
    assert list(dict.fromkeys(rows["key"])) == ["the·0", "cat", "saw", "the·3", "dog"]
    rect = spec["layer"][0]
    assert rect["encoding"]["x"]["sort"] == ["the·0", "cat", "saw", "the·3", "dog"]
    colour = rect["encoding"]["color"]
    assert colour["scale"]["domain"] == [0.0, 1.0] and colour["scale"]["scheme"] == "viridis"
    assert colour["condition"]["value"] == charts.MASKED_GREY  # masked cells are grey, not dark
    assert [t["field"] for t in rect["encoding"]["tooltip"]] == ["query", "key", "exact"]
    # the data are the matrix, exactly; masked weights are 0 and flagged
    got = rows.pivot(index="query_pos", columns="key_pos", values="value").to_numpy()
    assert np.allclose(got, w.numpy(), atol=1e-7)
    assert (rows.loc[rows.masked, "value"] == 0).all()
    assert rows.masked.sum() == 10
    assert rows.loc[(rows.query_pos == 2) & (rows.key_pos == 1), "exact"].item() == f"{w[2, 1].item():.8g}"
    # numbers printed in cells (small matrix), click selects a query row
    assert "text" in layer_marks(spec)
    assert spec["params"][0]["name"] == charts.ROW_SELECTION
    assert spec["params"][0]["select"]["fields"] == ["query_pos"]


def test_scores_heatmap_diverging_and_neg_inf_is_masked():
    s = torch.randn(4, 4)
    s[0, 3] = float("-inf")
    spec, rows = spec_and_rows(charts.heatmap(s, list("abcd"), kind="scores"))
    scale = spec["layer"][0]["encoding"]["color"]["scale"]
    assert scale["scheme"] == charts.SIGNED_SCHEME and scale["domainMid"] == 0
    cell = rows[(rows.query_pos == 0) & (rows.key_pos == 3)].iloc[0]
    assert cell.masked and cell.exact == "−∞" and pd.isna(cell.value)


def test_no_numbers_above_16_and_large_matrices_are_pooled():
    spec, _ = spec_and_rows(charts.heatmap(torch.rand(17, 17), [str(i) for i in range(17)]))
    assert "text" not in layer_marks(spec)
    big = torch.rand(300, 300)
    frame, factor = charts.heatmap_frame(big, [str(i) for i in range(300)], [str(i) for i in range(300)])
    assert factor == 3 and len(frame) == 100 * 100
    assert np.isclose(frame.iloc[0].value, big[:3, :3].double().mean().item())
    assert frame.iloc[0].query == "0–2"


def test_selected_row_is_preselected():
    spec, _ = spec_and_rows(charts.heatmap(torch.rand(4, 4), list("abcd"), selected_row=2))
    assert spec["params"][0]["value"] == [{"query_pos": 2}]


def test_bars_and_csv():
    spec, rows = spec_and_rows(charts.bars([0.1, 0.7, 0.2], ["a", "b", "a"], highlight=1))
    assert list(rows.label) == ["a·0", "b", "a·2"] and rows.highlight.tolist() == [False, True, False]
    assert spec["encoding"]["y"]["scale"]["domain"] == [0.0, 1.0]
    csv = charts.matrix_csv(torch.eye(2), ["它", "猫"]).decode("utf-8-sig")
    back = pd.read_csv(io.StringIO(csv), index_col=0)
    assert list(back.columns) == ["它", "猫"] and back.to_numpy().tolist() == [[1, 0], [0, 1]]


def test_heatmap_rejects_mismatched_labels():
    with pytest.raises(ValueError):
        charts.heatmap(torch.rand(3, 3), ["a", "b"])


def _render_script():
    import torch

    from attention_core import causal_mask, masked_softmax
    from ui.anatomy import show_matrix
    from ui.charts import heatmap

    tokens = ["<script>", "好", "🤖", "x"]
    w = masked_softmax(torch.arange(16.0).reshape(4, 4) / 4, causal_mask(4))
    show_matrix(heatmap(w, tokens), w, tokens, key="demo")


def test_show_matrix_renders_arrow_data_and_csv_button():
    at = AppTest.from_function(_render_script)
    at.session_state["lang"] = "zh"
    at.run()
    assert not at.exception
    chart = at.get("vega_lite_chart")[0]
    spec = chart_spec(chart)
    assert spec["params"][0]["name"] == "row"
    data = pd.concat(chart_data(chart).values())
    assert set(data["key"]) == {"<script>", "好", "🤖", "x"}  # user text is data, never markup
    expect = masked_softmax(torch.arange(16.0).reshape(4, 4) / 4, causal_mask(4))
    got = data.sort_values(["query_pos", "key_pos"])["value"].to_numpy().reshape(4, 4)
    assert np.allclose(got, expect.numpy(), atol=1e-7)
    assert at.get("download_button")[0].proto.label == "下载矩阵（CSV）"


def test_to_spec_matches_validated_spec_and_keeps_data_as_a_frame():
    chart = charts.heatmap(torch.rand(6, 6), list("abcdef"), masked=torch.eye(6, dtype=torch.bool))
    fast = charts.to_spec(chart)
    full = chart.to_dict()  # validated against the Vega-Lite schema
    assert fast["layer"] == full["layer"] and fast["params"] == full["params"]
    assert fast["data"] == {"name": "data"} and isinstance(fast["datasets"]["data"], pd.DataFrame)
    assert fast["datasets"]["data"].equals(chart.data)
    assert charts.to_spec(fast) is fast
    assert charts.to_spec(alt.layer(alt.Chart(pd.DataFrame({"x": [1]})).mark_point(),
                                    alt.Chart(pd.DataFrame({"y": [2]})).mark_point())) is None


def _cached_chart_script():
    import streamlit as st

    from ui.anatomy import show_chart
    from ui.charts import bars

    builds = st.session_state.setdefault("builds", [])

    def build():
        builds.append(1)
        return bars([0.25, 0.75], ["a", "b"])

    show_chart(build, key="cached", cache=("v1",))
    show_chart(bars([0.5, 0.5], ["x", "y"]), key="plain")


def test_show_chart_builds_a_cached_chart_once_and_keeps_its_data():
    at = AppTest.from_function(_cached_chart_script)
    at.run()
    at.run()
    assert not at.exception
    assert len(at.session_state["builds"]) <= 1  # built at most once across reruns (cache may be warm)
    first, second = at.get("vega_lite_chart")
    rows = pd.concat(chart_data(first).values())
    assert rows["value"].tolist() == [0.25, 0.75]  # the cached spec still carries its data on rerun
    assert pd.concat(chart_data(second).values())["value"].tolist() == [0.5, 0.5]


@pytest.mark.parametrize("case", range(40))
def test_heatmap_spec_equals_the_altair_built_heatmap(case):
    """heatmap_spec fills a cached skeleton; it must give exactly to_spec(heatmap(...)) for any input,
    including labels that spell its placeholders, quotes, HTML, CJK and emoji."""
    rng = np.random.default_rng(case)
    n_q, n_k = (int(x) for x in rng.choice([1, 2, 5, 16, 17, 41, 49, 130, 300], size=2))
    kind = ["weights", "scores"][case % 2]
    m = rng.random((n_q, n_k)) if kind == "weights" else rng.standard_normal((n_q, n_k)) * rng.choice([0.01, 3, 40])
    masked = None if case % 3 == 0 else rng.random((n_q, n_k)) < 0.3
    if kind == "scores" and masked is not None:
        m = np.where(masked, -np.inf, m)
        masked = None if case % 4 == 1 else masked
    words = ["the", "@@rows@@", "@@title@@", '"q"', "<b>x</b>", "猫", "👍🏽", "987654321", "123456.5", "it"]
    rows = [words[int(i)] for i in rng.integers(0, len(words), n_q)]
    cols = [words[int(i)] for i in rng.integers(0, len(words), n_k)]
    kw = {"kind": kind, "masked": masked,
          "title": [None, "title", "@@cols@@ 987654321 \"x\"", "注意力"][case % 4],
          "show_numbers": [None, True, False][case % 3],
          "selected_row": [None, 0, n_q - 1][(case // 2) % 3],
          "selectable": case % 5 != 0,
          "height": [None, 333][(case // 3) % 2],
          "domain": [None, (0, 2), (-1.5, 1.5)][(case // 4) % 3],
          "width": [None, 340][case % 2], "legend": case % 7 != 3, "fit_x": case % 3 == 2,
          "x_title": ["key", "键 (K)"][case % 2], "y_title": "query", "value_title": ["weight", "score"][case % 2]}
    fresh = charts.to_spec(charts.heatmap(m, rows, cols, **kw))
    made = charts.heatmap_spec(m, rows, cols, **kw)
    assert_same_spec(made, fresh)
    again = charts.heatmap_spec(m[::-1].copy(), rows[::-1], cols, **kw)    # the cached skeleton is not altered
    assert_same_spec(again, charts.to_spec(charts.heatmap(m[::-1].copy(), rows[::-1], cols, **kw)))


@pytest.mark.parametrize("case", range(8))
def test_bars_spec_equals_the_altair_built_bars(case):
    rng = np.random.default_rng(case)
    n = int(rng.integers(1, 40))
    words = ["the", "猫", "<b>", "the", "👍🏽", '"'] if case % 2 else ["猫", "7", "a", "它"]     # even: all short
    labels = [words[int(i)] for i in rng.integers(0, len(words), n)]
    kw = {"value_title": ["weight", "权重"][case % 2], "label_title": "key",
          "domain": [(0.0, 1.0), None, (-2, 5)][case % 3], "highlight": [None, 0, n - 1][case % 3],
          "height": [220, 180][case % 2], "title": [None, "row 3", ""][case % 3], "fit_x": case % 4 == 1}
    vals = rng.standard_normal(n)
    assert_same_spec(charts.bars_spec(vals, labels, **kw), charts.to_spec(charts.bars(vals, labels, **kw)))

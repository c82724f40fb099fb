"""The shared chart builders: decode the Vega-Lite spec and data they produce."""
import io

import numpy as np
import pandas as pd
import pytest
import torch
from streamlit.testing.v1 import AppTest

from attention_core import causal_mask, masked_softmax
from tests.apptest_util import chart_data, chart_spec
from ui import charts


def spec_and_rows(spec):
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

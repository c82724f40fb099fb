"""The shared chart builders: decode the Vega-Lite spec and data they produce."""
import io

import numpy as np
import pandas as pd
import pytest
import torch
from streamlit.testing.v1 import AppTest

from attention_core import causal_mask, masked_softmax
from tests.apptest_util import chart_data, chart_spec, title_text
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
    # the axes are in position order (a sort by position, not a label list: the spec stays for new labels)
    assert rect["encoding"]["x"]["sort"] == {"field": "key_pos", "op": "min"}
    assert rect["encoding"]["y"]["sort"] == {"field": "query_pos", "op": "min"}
    order = rows.drop_duplicates("key").sort_values("key_pos")["key"].tolist()
    assert order == ["the·0", "cat", "saw", "the·3", "dog"]
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


# ----------------------------------------------------------------- legible at 1280x720 and on a 390 px phone
def _axis(spec, channel):
    return spec["layer"][0]["encoding"][channel]["axis"]


def test_cell_numbers_are_drawn_only_where_the_laid_out_cells_hold_the_widest_number():
    """The number layer's opacity is a Vega expression on the rendered band widths; its threshold covers the
    widest number the cells print (the estimate is an upper bound of Source Sans' widths: "0.64" is 19.7 px)."""
    for kind, m in [("weights", torch.rand(6, 6)), ("scores", torch.randn(6, 6) * 40)]:
        spec, rows = spec_and_rows(charts.heatmap(m, list("abcdef"), kind=kind))
        text = spec["layer"][1]
        assert text["mark"]["type"] == "text"
        expr = text["mark"]["opacity"]["expr"]
        min_w = int(expr.split("bandwidth('x') >= ")[1].split(" ")[0])
        assert f"bandwidth('y') >= {charts.NUMBER_FONT + 2}" in expr
        widest = max(charts.text_px(f"{v:.2f}".replace("-", "−"), charts.NUMBER_FONT) for v in rows["value"])
        assert widest + 4 <= min_w < widest + 30
    weights_w = charts.number_width(0.0, 1.0)
    assert 24 <= weights_w <= 32                    # "0.00": four glyphs of 11 px
    assert charts.number_width(-40.0, 40.0) > weights_w + 10


def test_dense_axes_keep_every_kth_label_instead_of_overlapping_or_dropping():
    spec, _ = spec_and_rows(charts.heatmap(torch.rand(40, 32), [f"tok{i}" for i in range(40)],
                                           [str(j) for j in range(32)], kind="scores"))
    x, y = _axis(spec, "x"), _axis(spec, "y")
    for axis, channel in [(x, "x"), (y, "y")]:
        assert axis["labelOverlap"] is False and axis["labelFlush"] is False     # Vega neither hides nor shifts
        assert f"indexof(domain('{channel}'), datum.value) %" in axis["labelExpr"]
        assert f"span(range('{channel}'))" in axis["labelExpr"]
    assert x["labelAngle"] == 0 and "ceil(" in x["labelExpr"]
    # a small heatmap keeps every label as it is
    small, _ = spec_and_rows(charts.heatmap(torch.rand(5, 5), list("abcde")))
    assert "labelExpr" not in _axis(small, "y") and _axis(small, "x")["labelOverlap"] is False
    # bars: never Vega's labelOverlap (it hides labels the page quotes); thinned by the same rule
    bars = charts.bars(np.random.rand(30), [f"w{i}" for i in range(30)])
    assert bars["encoding"]["x"]["axis"]["labelOverlap"] is False
    assert "indexof(domain('x')" in bars["encoding"]["x"]["axis"]["labelExpr"]


def test_long_titles_shrink_with_the_width_and_stay_the_string_given():
    long = "Decoder weights of sentence 1: padding AND look-ahead (click a row)"
    for spec in (charts.heatmap(torch.rand(3, 3), list("abc"), title=long), charts.bars([0.5], ["a"], title=long)):
        assert title_text(spec) == long                                # other code finds a chart by its title
        size = spec["config"]["title"]["fontSize"]["expr"]
        assert "containerSize()[0]" in size and f"/ {charts.title_width(long)}," in size and ", 10, 16)" in size
    assert charts.title_width(long) >= 0.5 * 16 * len(long)        # Source Sans bold: ~0.46 em per character
    assert "config" not in charts.bars([0.5], ["a"]) or "title" not in charts.bars([0.5], ["a"])["config"]


def test_label_spacing_covers_the_longest_upright_label_and_rotated_labels():
    assert charts.label_spacing(["7", "31"], upright=True) >= charts.text_px("31", charts.LABEL_FONT) + 4
    assert charts.label_spacing(["animal", "x"], upright=False) >= (charts.LABEL_FONT + 2) * 1.41


PLANTED = '''
import sys
sys.path.insert(0, {root!r})
import numpy as np
import streamlit as st
from ui import charts
from ui.anatomy import show_chart

st.title("shared chart kinds")
rng = np.random.default_rng(0)
words = "The animal didn't cross the street because it was too tired and slow today ok".split()
for n_q, n_k, kind in [(5, 5, "weights"), (12, 12, "weights"), (16, 16, "weights"), (12, 32, "scores"),
                       (40, 40, "weights"), (3, 16, "scores"), (8, 8, "scores")]:
    m = rng.random((n_q, n_k)) if kind == "weights" else rng.standard_normal((n_q, n_k)) * 3
    rows = [words[i % len(words)] + (str(i) if i >= len(words) else "") for i in range(n_q)]
    cols = [str(j) for j in range(n_k)] if n_k > 16 else [words[i % len(words)] for i in range(n_k)]
    show_chart(charts.heatmap(m, rows, cols, kind=kind, title=f"{{n_q}}x{{n_k}} {{kind}}"), key=f"h{{n_q}}{{n_k}}{{kind}}")
for n in (5, 12, 32):
    show_chart(charts.bars(rng.random(n), [words[i % len(words)] for i in range(n)], highlight=1, fit_x=True),
               key=f"b{{n}}")
    show_chart(charts.bars(rng.random(n), [str(i) for i in range(n)]), key=f"bd{{n}}")
for i, title in enumerate(["Decoder weights of sentence 1: padding AND look-ahead (click a row)",
                           "cos(P[m], P[n]) — learned table at initialisation", "第 1 句的解码器权重：填充 且 前瞻（点击一行查看）"]):
    show_chart(charts.heatmap(rng.random((6, 6)), words[:6], title=title), key=f"t{{i}}")
show_chart(charts.bars(rng.random(6), words[:6], title="Attention weights under your mask (click a row to see it)"),
           key="tb")
'''


@pytest.mark.browser
def test_shared_chart_kinds_are_legible_in_a_browser_at_1280_and_390_px(tmp_path, browser):
    """Headless Chromium, the layout checker of scripts/layout_check.py: 7 heatmaps (5x5 to 40x40, numbers in 12x12
    cells that fit at 1280 px and not at 390 px) and 6 bar rows: no overlap, clipping or truncation at either size, and
    the numbers of a 12 x 12 heatmap are shown on the projector; long titles shrink instead of being cut.
    About 45 s on a loaded 2-core machine."""
    import pathlib

    from scripts.layout_check import check_page
    from scripts.server import start_server

    root = pathlib.Path(__file__).resolve().parent.parent
    (tmp_path / "app.py").write_text(PLANTED.format(root=str(root)))
    proc = start_server(tmp_path)
    try:
        reports = {vp: check_page(browser, proc.base, "home", "en", vp) for vp in ("1280x720", "390x844")}
    finally:
        proc.terminate()
        proc.wait(30)
    for vp, report in reports.items():
        assert report.error == "", report.error
        assert report.findings == [], "\n".join(f.line() for f in report.findings)
        assert len(report.charts) == 17
    wide = {c["title"]: c["texts"] for c in reports["1280x720"].charts}
    phone = {c["title"]: c["texts"] for c in reports["390x844"].charts}
    assert wide["12x12 weights"] >= 144 > phone["12x12 weights"]     # 144 numbers on the projector, not the phone
    assert phone["5x5 weights"] >= 25                                # the phone keeps the numbers that fit


def test_a_title_given_as_lines_is_as_wide_as_its_widest_line():
    """Vega takes a title as a list of lines; the title-size rule must measure it, not crash (it did: ord() of a
    whole line)."""
    from ui.charts import title_width
    assert title_width(["ab", "abcdef"]) == title_width("abcdef") > title_width("ab") >= 1
    assert title_width(None) == title_width("") == 1


def test_scheme_rgb_is_vegas_blueorange_clamped_with_grey_for_nan():
    """The colours of image-drawn heatmaps (the encoder's layer diagram): the scheme's own colours at its 11 stops,
    linear in RGB between them, clamped outside the domain, masked grey for NaN (Vega's legend is compared in
    tests/test_browser.py)."""
    hexes = charts.SCHEME_COLOURS["blueorange"]
    palette = [[int(hexes[i + j:i + j + 2], 16) for j in (0, 2, 4)] for i in range(0, 66, 6)]
    at_stops = charts.scheme_rgb(np.linspace(-3, 3, 11), (-3, 3))
    assert at_stops.tolist() == palette
    between = charts.scheme_rgb([-3 + 0.3], (-3, 3))[0]                  # halfway between the first two stops
    assert np.abs(between - (np.array(palette[0]) + palette[1]) / 2).max() <= 0.5
    assert charts.scheme_rgb([-7, 9], (-3, 3)).tolist() == [palette[0], palette[-1]]
    assert charts.scheme_rgb([np.nan], (-3, 3)).tolist() == [[0xd4, 0xd4, 0xd4]]
    assert charts.scheme_rgb(np.zeros((2, 3)), (-1, 1)).shape == (2, 3, 3)


def test_heatmap_data_travels_in_small_types_and_large_heatmaps_carry_no_aria_label_per_cell():
    """Less to send per redraw (docs/performance.md): a 30 x 30 heatmap shipped 8-byte positions and a string per label
    and cell (54 KB per redraw); positions are int16 and labels categorical now, in the axis order, and the values keep
    float64. Above MAX_ARIA_CELLS cells Vega writes no ARIA label per cell (the tooltip and CSV keep every value)."""
    labels = [f"t{i}" for i in range(30)]
    m = np.random.default_rng(0).random((30, 30))
    frame, _ = charts.heatmap_frame(m, labels, labels)
    assert [str(frame[c].dtype) for c in ("query_pos", "key_pos", "query", "key", "value")] == \
        ["int16", "int16", "category", "category", "float64"]
    assert list(frame["query"].cat.categories) == labels and list(frame["key"][:30]) == labels
    np.testing.assert_array_equal(frame["value"].to_numpy().reshape(30, 30), m)
    big = charts.heatmap(m, labels)
    small = charts.heatmap(m[:8, :8], labels[:8])
    assert big["layer"][0]["mark"].get("aria") is False
    assert "aria" not in small["layer"][0]["mark"]
    # repeated labels that unique_labels cannot separate (a typed "a·1" next to a repeated "a") stay strings
    frame, _ = charts.heatmap_frame(np.eye(3), ["a·1", "a", "a"], ["x", "y", "z"])
    assert frame["query"].tolist() == ["a·1"] * 3 + ["a·1"] * 3 + ["a·2"] * 3


def test_a_heatmap_of_new_labels_keeps_its_spec_so_the_browser_swaps_only_the_data():
    """A swap, not a rebuild, per redraw: the axes are sorted by position, so a new sentence or digit string of the same
    length gives the same spec (Streamlit then replaces the data instead of rebuilding the chart); only the data
    differ."""
    m = np.random.default_rng(1).random((30, 30))
    a = charts.heatmap(m, [f"{d}{i}" for i, d in enumerate("123456789012345678901234567890")])
    b = charts.heatmap(m[::-1], [f"{d}{i}" for i, d in enumerate("987654321098765432109876543210")])
    without = lambda spec: {k: v for k, v in spec.items() if k != "datasets"}  # noqa: E731
    assert without(a) == without(b)
    assert a["datasets"]["data"]["query"].tolist() != b["datasets"]["data"]["query"].tolist()


def test_unique_labels_quote_a_repeated_sign():
    """A repeated "-" at position 4 must not read "minus 4": the sign is quoted; words and digits are not."""
    assert charts.unique_labels(["2", "-", "0", "-", "0", "a"]) == ["2", "“-”·1", "0·2", "“-”·3", "0·4", "a"]
    assert charts.unique_labels(["+", "+", "the", "the"]) == ["“+”·0", "“+”·1", "the·2", "the·3"]

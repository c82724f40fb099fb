"""The encoder-block page in AppTest: what its charts contain, checked against independent computations
(torch.nn.TransformerEncoderLayer with copied weights, a numpy rollout, inverted dropout), its notices,
the URL, and every control at its extremes."""
import base64
import io
import json

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from PIL import Image
from torch import nn

from attention_core.labs.encoder import encoder_for
from attention_core.positional import sinusoidal_encoding
from attention_core.text import embed_tokens, tokenize
from tests.apptest_util import (
    all_text,
    chart_data,
    chart_spec,
    charts,
    exceptions,
    open_page,
    presenter_steps,
    title_text,
)
from ui.charts import scheme_rgb, unique_labels
from ui.i18n import catalog

EN, ZH = catalog("en"), catalog("zh")
SENTENCE = EN["common.default_sentence"]
TOKENS = tokenize(SENTENCE)


def frame_with(at, *columns):
    """The dataset (DataFrame) of the first chart whose data has all these columns."""
    for chart in charts(at):
        for frame in chart_data(chart).values():
            if set(columns) <= set(frame.columns):
                return frame
    raise AssertionError(f"no chart with columns {columns}")


def tab(name: str, lang: str = "en") -> dict:
    """The URL parameter that opens one of the page's tabs (only the open tab runs)."""
    return {"tab": catalog(lang)[f"encoder.tab_{name}"]}


IMAGES = ("step", "url", "x0", "x1")            # the layer diagram's mini heatmaps: one image per step
ROWS = ("label", "token", "rms", "range")        # ... and one hover row per step and token
BOXES = ("label", "formula", "detail")
STEPS = {"post": ("input", "attention", "residual1", "norm1", "ffn_hidden", "ffn_output", "residual2", "norm2"),
         "pre": ("input", "norm1", "attention", "residual1", "norm2", "ffn_hidden", "ffn_output", "residual2")}


def series_frame(at, name):
    """The dataset of the first paired-bars chart with a series called ``name``."""
    for chart in charts(at):
        for frame in chart_data(chart).values():
            if "series" in frame.columns and name in set(frame["series"]):
                return frame
    raise AssertionError(f"no chart with a series {name!r}")


def heatmap_titled(at, prefix):
    for chart in charts(at):
        title = title_text(chart_spec(chart))
        if isinstance(title, str) and title.startswith(prefix):
            (frame,) = chart_data(chart).values()
            n = frame["query_pos"].max() + 1
            return frame, frame.sort_values(["query_pos", "key_pos"])["value"].to_numpy().reshape(n, n)
    raise AssertionError(f"no heatmap titled {prefix!r}")


def diagram_images(at) -> list[np.ndarray]:
    """The mini heatmaps as drawn: one RGB image (tokens x dimensions) per step, decoded from the PNG data URLs."""
    frame = frame_with(at, *IMAGES).sort_values("step")
    assert all(u.startswith("data:image/png;base64,") for u in frame["url"])
    return [np.asarray(Image.open(io.BytesIO(base64.b64decode(u.split(",", 1)[1]))).convert("RGB"))
            for u in frame["url"]]


def assert_drawn(image: np.ndarray, tensor: np.ndarray) -> None:
    """The image is ``tensor`` coloured on the diagram's ±3 scale: every cell's colour within one level per channel
    (the scale itself is checked against Vega's own legend in tests/test_browser.py)."""
    expected = scheme_rgb(tensor, (-3.0, 3.0))
    assert image.shape == expected.shape
    assert np.abs(image.astype(int) - expected.astype(int)).max() <= 1


def assert_rows_quote(rows, tensors) -> None:
    """Each hover row (step x token) quotes its token's RMS and range (3 decimals) of the oracle's tensor."""
    assert len(rows) == sum(len(m) for m in tensors)
    rms = np.concatenate([np.sqrt(np.mean(m ** 2, axis=1)) for m in tensors])
    np.testing.assert_allclose(rows["rms"].astype(float), rms, atol=1.5e-3)
    lo_hi = np.array([[float(v) for v in r.split(" … ")] for r in rows["range"]])
    np.testing.assert_allclose(lo_hi[:, 0], np.concatenate([m.min(1) for m in tensors]), atol=1.5e-3)
    np.testing.assert_allclose(lo_hi[:, 1], np.concatenate([m.max(1) for m in tensors]), atol=1.5e-3)


def torch_steps(ref: nn.TransformerEncoderLayer, x: torch.Tensor, variant: str, act: str) -> list[np.ndarray]:
    """The eight tensors of the diagram, computed with torch's own modules (copied weights), in the page's order;
    checked to end at ``ref(x)``, torch's forward of the whole layer."""
    f = F.relu if act == "relu" else F.gelu
    with torch.no_grad():
        if variant == "post":
            a = ref.self_attn(x, x, x, need_weights=False)[0]
            r1 = x + a
            n1 = ref.norm1(r1)
            hidden = f(ref.linear1(n1))
            out = ref.linear2(hidden)
            r2 = n1 + out
            values = [x, a, r1, n1, hidden, out, r2, ref.norm2(r2)]
        else:
            n1 = ref.norm1(x)
            a = ref.self_attn(n1, n1, n1, need_weights=False)[0]
            r1 = x + a
            n2 = ref.norm2(r1)
            hidden = f(ref.linear1(n2))
            out = ref.linear2(hidden)
            values = [x, n1, a, r1, n2, hidden, out, r1 + out]
        torch.testing.assert_close(values[-1], ref(x), atol=1e-5, rtol=1e-5)
    return [v[0].numpy().astype(np.float64) for v in values]


def torch_reference(variant, act, d, h, seed, layer=0):
    """torch.nn.TransformerEncoderLayer holding the weights of the page's layer ``layer`` (0 = the first)."""
    mine = encoder_for(variant, d, h, 12, act, seed, max_len=24).layers[layer]
    ref = nn.TransformerEncoderLayer(d, h, 4 * d, dropout=0.0, activation=act, batch_first=True,
                                     norm_first=variant == "pre")
    a = mine.self_attn
    with torch.no_grad():
        ref.self_attn.in_proj_weight.copy_(torch.cat([a.W_query.weight, a.W_key.weight, a.W_value.weight]))
        ref.self_attn.in_proj_bias.copy_(torch.cat([a.W_query.bias, a.W_key.bias, a.W_value.bias]))
        ref.self_attn.out_proj.weight.copy_(a.W_output.weight)
        ref.self_attn.out_proj.bias.copy_(a.W_output.bias)
        for dst, src in ((ref.linear1, mine.ffn.linear1), (ref.linear2, mine.ffn.linear2),
                         (ref.norm1, mine.norm1), (ref.norm2, mine.norm2)):
            dst.weight.copy_(src.weight)
            dst.bias.copy_(src.bias)
    return ref.eval()


@pytest.fixture(scope="module")
def en_page():
    return open_page("encoder", "en")


@pytest.fixture(scope="module")
def prepost_page():
    return open_page("encoder", "en", tab("prepost"))


@pytest.fixture(scope="module")
def stack_page():
    return open_page("encoder", "en", tab("stack"))


@pytest.fixture(scope="module")
def dropout_page():
    return open_page("encoder", "en", tab("dropout"))


def test_opens_in_chinese_with_chinese_labels():
    at = open_page("encoder", "zh")
    assert exceptions(at) == []
    text = all_text(at)
    assert ZH["encoder.title"] in text and ZH["encoder.layer_title"] in text
    boxes = frame_with(at, *BOXES)
    assert ZH["encoder.step_attention"] in set(boxes["label"])


def test_diagram_is_the_layer_of_torch_and_its_boxes_quote_the_tensors(en_page):
    at = en_page
    assert exceptions(at) == []
    boxes = frame_with(at, *BOXES)
    assert list(boxes["label"]) == [EN[f"encoder.step_{s}"] for s in STEPS["post"]]
    n, d = len(TOKENS), 32
    x = embed_tokens(TOKENS, d, 0) + sinusoidal_encoding(n, d)        # the input, computed independently
    steps = torch_steps(torch_reference("post", "relu", d, 4, 0), x[None].float(), "post", "relu")
    images = diagram_images(at)
    assert [im.shape[:2] for im in images] == [(n, 4 * d if s == "ffn_hidden" else d) for s in STEPS["post"]]
    for image, tensor in zip(images, steps):
        assert_drawn(image, tensor)
    rows = frame_with(at, *ROWS)
    assert_rows_quote(rows, steps)
    assert list(rows["token"]) == unique_labels(TOKENS) * 8
    assert rows[rows["label"] == EN["encoder.step_ffn_hidden"]]["range"].str.startswith("0.000").all()   # ReLU
    # each box states the shape and the RMS of its tensor
    for s, detail in enumerate(boxes["detail"]):
        assert f"(1, {n}, {steps[s].shape[1]})" in detail
        assert f"RMS {np.sqrt(np.mean(steps[s] ** 2)):.2f}" in detail
    # what to notice quotes the same numbers
    text = all_text(at)
    assert f"RMS {np.sqrt(np.mean(steps[2] ** 2)):.2f}" in text
    assert f"{100 * (steps[4] == 0).mean():.0f}%" in text


def test_scale_chart_post_stays_at_one_pre_grows_and_notice_agrees(prepost_page):
    scale = frame_with(prepost_page, "series", "rms", "layer")
    post = scale[scale["series"] == EN["encoder.series_post"]].sort_values("layer")["rms"].to_numpy()
    pre = scale[scale["series"] == EN["encoder.series_pre"]].sort_values("layer")["rms"].to_numpy()
    final = scale[scale["series"] == EN["encoder.series_pre_final"]]["rms"].to_numpy()
    assert len(post) == len(pre) == 7                                           # layers 0..6
    np.testing.assert_allclose(post[1:], 1.0, atol=1e-4)
    assert post[0] == pytest.approx(pre[0]) and pre[0] > 1.0
    assert pre[-1] > 1.5 * pre[1] and np.all(np.diff(pre[1:]) > -0.2)
    assert final == pytest.approx([1.0], abs=1e-4)
    text = all_text(prepost_page)
    assert f"{pre[1]:.2f} after layer 1 and {pre[-1]:.2f} after layer 6" in text


def test_double_residual_bars_halve_the_update(prepost_page):
    bars = series_frame(prepost_page, EN["encoder.dr_correct"])
    right = bars[bars["series"] == EN["encoder.dr_correct"]]["value"].to_numpy()
    wrong = bars[bars["series"] == EN["encoder.dr_tutorial"]]["value"].to_numpy()
    assert len(right) == len(wrong) == len(TOKENS)
    assert np.all(wrong < right)
    assert f"a factor {np.median(wrong / right):.2f}" in all_text(prepost_page)


def test_head_grid_enlarged_tile_and_rollout_agree(stack_page):
    en_page = stack_page
    grid = frame_with(en_page, "layer", "head", "q", "k")
    n, n_layers, n_heads = len(TOKENS), 6, 4
    assert grid["layer"].nunique() == n_layers and grid["head"].nunique() == n_heads
    w = grid.sort_values(["layer", "head", "q", "k"])["value"].to_numpy().astype(float).reshape(
        n_layers, n_heads, n, n)
    np.testing.assert_allclose(w.sum(-1), 1.0, atol=1e-5)
    # the enlarged tile is the sharpest head, and is that head's weights
    sharp = np.unravel_index(np.argmax(w.max(-1).mean(-1)), (n_layers, n_heads))
    _, tile = heatmap_titled(en_page, EN["encoder.tile_title"].format(layer=sharp[0] + 1, head=sharp[1] + 1))
    np.testing.assert_allclose(tile, w[sharp], atol=1e-6)          # the grid ships float32
    # rollout, recomputed with numpy from the grid's weights
    r = np.eye(n)
    for layer in range(n_layers):
        a = w[layer].mean(0) + np.eye(n)
        r = (a / a.sum(-1, keepdims=True)) @ r
    _, rollout = heatmap_titled(en_page, EN["encoder.rollout_title"].format(n=n_layers))
    np.testing.assert_allclose(rollout, r, atol=1e-5)
    np.testing.assert_allclose(rollout.sum(-1), 1.0, atol=1e-5)
    row = frame_with(en_page, "label", "highlight", "exact")
    np.testing.assert_allclose(row["value"].to_numpy(), r[0], atol=1e-6)


def test_dropout_train_weights_are_inverted_dropout_of_eval_and_row_sums_shown(dropout_page):
    en_page = dropout_page
    p, head = 0.2, None
    for chart in charts(en_page):
        title = title_text(chart_spec(chart))
        if isinstance(title, str) and title.startswith("eval mode"):
            head = int(title.rsplit("head ", 1)[1])
    _, ev = heatmap_titled(en_page, EN["encoder.eval_title"].format(head=head))
    train_frame, tr = heatmap_titled(en_page, EN["encoder.train_title"].format(head=head, p="0.20"))
    np.testing.assert_allclose(ev.sum(-1), 1.0, atol=1e-5)
    kept = tr != 0
    np.testing.assert_allclose(tr[kept], ev[kept] / (1 - p), rtol=1e-5)
    assert (~kept).sum() > 0
    assert set(train_frame.sort_values(["query_pos", "key_pos"])["masked"].to_numpy().nonzero()[0]) == \
        set((~kept).ravel().nonzero()[0])                                       # dropped cells drawn grey
    sums = series_frame(en_page, EN["encoder.mode_train"])
    np.testing.assert_allclose(sums[sums["series"] == EN["encoder.mode_train"]]["value"].to_numpy(), tr.sum(-1),
                               atol=1e-6)
    np.testing.assert_allclose(sums[sums["series"] == EN["encoder.mode_eval"]]["value"].to_numpy(), 1.0, atol=1e-5)
    text = all_text(en_page)
    assert f"between {tr.sum(-1).min():.3f} and {tr.sum(-1).max():.3f}" in text
    assert f"{int((~kept).sum())} of the {tr.size} weights" in text


def test_exercise_reveals_feedback(prepost_page):
    at = prepost_page
    at.radio(key="ex_scale_guess").set_value(1).run()
    at.button(key="ex_scale_reveal").click().run()
    assert exceptions(at) == []
    assert EN["common.correct"] in [s.value for s in at.success]


def test_url_reproduces_the_view_pre_ln_gelu():
    params = {"ln": "pre-LN", "act": "GELU", "d": "16", "h": "2", "L": "3", "l": "2", "p": "0.5", "seed": "7"}
    at = open_page("encoder", "en", params)
    assert exceptions(at) == []
    assert at.slider(key="L").value == 3 and at.slider(key="l").value == 2
    assert at.number_input(key="seed").value == 7 and at.selectbox(key="d").value == 16
    boxes = frame_with(at, *BOXES)
    assert list(boxes["label"])[:3] == [EN["encoder.step_input"], EN["encoder.step_norm1"],
                                        EN["encoder.step_attention"]]
    assert "GELU" in " ".join(boxes["formula"])
    # layer 2 of a pre-LN stack, checked against torch: its input is layer 1's output
    x = (embed_tokens(TOKENS, 16, 7) + sinusoidal_encoding(len(TOKENS), 16))[None]
    with torch.no_grad():
        layer1 = torch_reference("pre", "gelu", 16, 2, 7)(x)
    steps = torch_steps(torch_reference("pre", "gelu", 16, 2, 7, layer=1), layer1, "pre", "gelu")
    images = diagram_images(at)
    assert images[5].shape[:2] == (len(TOKENS), 64)
    for image, tensor in zip(images, steps):
        assert_drawn(image, tensor)
    rows = frame_with(at, *ROWS)
    assert_rows_quote(rows, steps)
    assert steps[5].min() < 0                                                  # GELU lets negatives through
    hidden_rows = rows[rows["label"] == EN["encoder.step_ffn_hidden"]]["range"]
    assert any(r.startswith("-") for r in hidden_rows)
    at.session_state["tab"] = EN["encoder.tab_prepost"]
    at.run()
    scale = frame_with(at, "series", "rms", "layer")
    assert scale["layer"].max() == 3
    at.session_state["tab"] = EN["encoder.tab_dropout"]
    at.run()
    assert at.slider(key="p").value == 0.5                                     # the URL's p, kept while hidden


@pytest.mark.parametrize("params, message", [
    ({"d": "16", "h": "3"}, EN["encoder.err_heads"].format(d=16, h=3, ok="1, 2, 4, 8")),
    ({"text": ""}, EN["common.err_empty"]),
    ({"text": "hi"}, EN["common.err_too_few"].format(n=1, min=2)),
    ({"text": " ".join(["word"] * 300)}, EN["common.warn_truncated"].format(n=300, max=24)),
])
def test_bad_input_gives_a_message_not_a_traceback(params, message):
    at = open_page("encoder", "en", params)
    assert exceptions(at) == []
    assert message in [w.value for w in at.warning]


@pytest.mark.parametrize("text", ["😀 🎉 👍🏽 ok", "动物没有过马路，因为它太累了。", "<script>alert(1)</script>"])
def test_odd_text_runs_and_is_never_html(text):
    at = open_page("encoder", "zh", {"text": text})
    for name, least in (("layer", 1), ("prepost", 2), ("stack", 4), ("dropout", 3)):
        at.session_state["tab"] = ZH[f"encoder.tab_{name}"]
        at.run()
        assert exceptions(at) == []
        assert len(charts(at)) >= least, name
        assert all("<script" not in md.value for md in at.markdown)


def test_every_control_at_its_extremes():
    at = open_page("encoder", "en")

    def to(name):
        at.session_state["tab"] = EN[f"encoder.tab_{name}"]

    moves = [
        lambda: at.slider(key="L").set_value(1),
        lambda: at.slider(key="L").set_value(12),
        lambda: at.slider(key="l").set_value(12),
        lambda: at.slider(key="L").set_value(3),          # shallower than the layer drawn: clamped to 3
        lambda: at.slider(key="L").set_value(12),
        lambda: to("dropout"),
        lambda: at.slider(key="p").set_value(0.0),
        lambda: at.slider(key="p").set_value(0.9),
        lambda: at.selectbox(key="d").set_value(64),
        lambda: at.selectbox(key="h").set_value(8),
        lambda: to("stack"),
        lambda: at.selectbox(key="h").set_value(1),
        lambda: to("prepost"),
        lambda: at.selectbox(key="d").set_value(16),
        lambda: at.number_input(key="seed").set_value(9999),
        lambda: [w for w in at.get("button_group") if w.key == "act"][0].set_value("gelu"),
        lambda: [w for w in at.get("button_group") if w.key == "ln"][0].set_value("pre"),
        lambda: to("layer"),
    ]
    for move in moves:
        move()
        at.run()
        assert exceptions(at) == [], exceptions(at)
    assert at.slider(key="l").value <= at.slider(key="L").value
    to("dropout")
    at.run()
    assert EN["encoder.notice_p0"] not in all_text(at)
    at.slider(key="p").set_value(0.0).run()
    assert EN["encoder.notice_p0"] in all_text(at)
    to("stack")
    at.run()
    grid = frame_with(at, "layer", "head", "q")
    assert grid["layer"].nunique() == 12 and grid["head"].nunique() == 1


def test_a_clicked_tile_and_rollout_row_are_kept_in_the_url():
    """?tile=2.3 and ?row_rollout=1 (what clicks write) open the page on that tile and rollout row; a tile
    outside the grid falls back to the default one."""
    at = open_page("encoder", "en", {"tile": "2.3", "row_rollout": "1"} | tab("stack"))
    assert exceptions(at) == []
    titles = [title_text(chart_spec(c)) for c in charts(at)]
    assert EN["encoder.tile_title"].format(layer=2, head=3) in titles
    tokens = tokenize(EN["common.default_sentence"])
    assert any(c.value.startswith(EN["encoder.rollout_row"].split("{")[0] + tokens[1]) for c in at.caption)
    at = open_page("encoder", "en", {"tile": "40.1"} | tab("stack"))
    assert exceptions(at) == []
    assert EN["encoder.tile_title"].format(layer=40, head=1) not in [title_text(chart_spec(c)) for c in charts(at)]


@pytest.mark.parametrize("text, p", [("a b", "0.9"), ("a b c", "0.9")])
def test_a_draw_that_drops_every_weight_is_explained_not_a_crash(text, p):
    """A crash once: with 2-3 tokens and p = 0.8-0.9 a draw can zero all n² weights; the notice then had no
    survivor to quote (argmax of an empty sequence). 2 s."""
    at = open_page("encoder", "en", {"text": text, "p": p} | tab("dropout"))
    assert exceptions(at) == []
    _, train = heatmap_titled(at, EN["encoder.train_title"].split("{")[0])
    n = len(tokenize(text))
    if (train == 0).all():   # this draw (seeded, so the same on every run) dropped everything
        assert EN["encoder.notice_all_dropped"].split("{")[0] in all_text(at)
    else:
        assert EN["encoder.notice_scaled"].split("{")[0] in all_text(at)
    assert train.shape == (n, n)



# ---------------------------------------------------------------- redraw budget: payload, lazy tabs, a phone
def test_only_the_open_tab_runs_and_the_layer_diagram_ships_one_image_per_step(en_page):
    """The layer tab draws one chart (the other tabs run only when opened); the diagram's thousands of cells
    travel as one small PNG per step (one pixel per cell: 4,000+ SVG rects took 150-250 ms to redraw), placed
    without a transform run per datum, drawn unsmoothed, and the diagram has no fixed width (it stretches to a
    phone's column). About 0 s (shared page)."""
    specs = [chart_spec(c) for c in charts(en_page)]
    assert [s["usermeta"]["chart_kind"] for s in specs] == ["ui.encoder_charts.layer_diagram_chart"]
    frames = chart_data(charts(en_page)[0])
    assert max(len(f) for f in frames.values()) <= 8 * len(TOKENS)           # rows per token, no row per cell
    marks = [layer["mark"] for layer in specs[0]["layer"]]
    image = next(m for m in marks if isinstance(m, dict) and m.get("type") == "image")
    assert image["smooth"] is False and image["aspect"] is False
    assert all("transform" not in layer for layer in specs[0]["layer"])
    assert "width" not in specs[0] and specs[0]["autosize"]["type"] == "fit-x"
    raw = sum(len(d.data.data) for d in charts(en_page)[0].proto.datasets)
    assert raw < 50_000, raw                                  # was 613 KB at the default sentence, then 35 KB of cells


def test_the_grid_is_pooled_full_colour_and_frames_the_enlarged_tile():
    """24 tokens x 12 layers x 8 heads: the grid's tiles are averaged to 12 x 12 (the enlarged tile keeps every
    value), no tile is dimmed, and the orange frame sits on the tile the heatmap enlarges. About 3 s."""
    at = open_page("encoder", "en", {"text": " ".join(f"w{i}" for i in range(24)), "L": "12", "h": "8",
                                     "tile": "3.5"} | tab("stack"))
    assert exceptions(at) == []
    grid = frame_with(at, "layer", "head", "q", "k")
    assert grid["q"].max() == 11 and len(grid) == 12 * 8 * 12 * 12
    spec = next(chart_spec(c) for c in charts(at)
                if chart_spec(c)["usermeta"]["chart_kind"].endswith("head_grid_chart"))
    text = json.dumps(spec)
    assert "opacity" not in text                              # not washed out
    assert "(datum.layer === 3) && (datum.head === 5)" in text
    assert EN["encoder.tile_title"].format(layer=3, head=5) in [title_text(chart_spec(c)) for c in charts(at)]
    raw = sum(len(d.data.data) for c in charts(at) for d in c.proto.datasets)
    assert raw < 400_000, raw                                 # was 6.8 MB


def test_presenter_steps_keep_their_place_inside_the_tab_fragments():
    """Each tab runs as an st.fragment; its steps are numbered as if the whole page ran (the dropout tab: its
    controls kept, then question, evidence, pitfall as steps 2-4 after the intuition)."""
    at = open_page("encoder", "en", {"present": "1", "step": "2"} | tab("dropout"))
    assert exceptions(at) == []
    steps = presenter_steps(at)
    keys = list(steps)
    assert keys[:2] == ["present_step_1", "present_keep_1"]
    assert [k for k in keys if k.startswith("present_step_")] == [f"present_step_{i}" for i in range(1, 5)]
    assert "present_keep_2" in keys
    assert ("radio", "ex_drop_guess") in steps["present_step_2"]            # the question is step 2, alone

"""The encoder block: one layer as a flow of sublayers with live tensors, post-LN vs pre-LN across a
stack, attention per layer and its rollout, dropout on the weights in train vs eval mode."""
from __future__ import annotations

import copy

import numpy as np
import pandas as pd
import streamlit as st
import torch

from attention_core.analysis import attention_rollout
from attention_core.labs import encoder as el
from attention_core.text import embed_tokens
from attention_core.transformer import PositionWiseFFN, TransformerEncoder, TransformerEncoderLayer
from ui import anatomy
from ui.cache import MB, shared_arrays
from ui.charts import bars_spec, heatmap_spec, respec, unique_labels
from ui.controls import keep_row, sentence
from ui.controls import seed as seed_control
from ui.encoder_charts import (
    TILE_GRID,
    DiagramStep,
    head_grid,
    head_grid_frame,
    layer_diagram,
    layer_diagram_frame,
    paired_bars,
    paired_bars_frame,
    row_sums_chart,
    row_sums_frame,
    scale_chart,
    scale_frame,
)
from ui.i18n import current_lang, lesson, t

NS = "encoder"
MAX_TOKENS = 24
MAX_LAYERS = 12              # the stack is always computed 12 deep; the slider shows its first N layers
D_CHOICES = (16, 24, 32, 48, 64)
H_CHOICES = (1, 2, 3, 4, 6, 8)
ACTS = ("relu", "gelu")
HALF_NUMBERS = 8             # two heatmaps side by side: numbers in the cells only up to 8 tokens


# the order of the boxes and the residual skips (branch below box a -> into add box b) of each variant
ORDER = {
    "post": ("input", "attention", "residual1", "norm1", "ffn_hidden", "ffn_output", "residual2", "norm2"),
    "pre": ("input", "norm1", "attention", "residual1", "norm2", "ffn_hidden", "ffn_output", "residual2"),
}
SKIPS = {"post": ((0, 2), (3, 6)), "pre": ((0, 3), (3, 7))}
KINDS = {"input": "io", "attention": "attention", "residual1": "add", "residual2": "add", "norm1": "norm",
         "norm2": "norm", "ffn_hidden": "ffn", "ffn_output": "ffn"}
FORMULAS = {   # notation, the same in both languages
    "post": {"input": "x", "attention": "a = MHA(x)", "residual1": "x + a", "norm1": "h = LN₁(x + a)",
             "ffn_hidden": "{act}(W₁h + b₁)", "ffn_output": "f = W₂(·) + b₂", "residual2": "h + f",
             "norm2": "LN₂(h + f)"},
    "pre": {"input": "x", "norm1": "LN₁(x)", "attention": "a = MHA(LN₁(x))", "residual1": "h = x + a",
            "norm2": "LN₂(h)", "ffn_hidden": "{act}(W₁LN₂(h) + b₁)", "ffn_output": "f = W₂(·) + b₂",
            "residual2": "h + f"},
}
LATEX = (r"\begin{aligned}"
         r"&\textbf{post-LN:} && x \leftarrow \mathrm{LN}\big(x + \mathrm{MHA}(x)\big), &&"
         r"x \leftarrow \mathrm{LN}\big(x + \mathrm{FFN}(x)\big) \\"
         r"&\textbf{pre-LN:} && x \leftarrow x + \mathrm{MHA}\big(\mathrm{LN}(x)\big), &&"
         r"x \leftarrow x + \mathrm{FFN}\big(\mathrm{LN}(x)\big) \\[4pt]"
         r"& && \mathrm{FFN}(x) = W_2\,\sigma(W_1 x + b_1) + b_2, &&"
         r"\mathrm{LN}(x) = \gamma \odot \frac{x - \mu}{\sqrt{\sigma_x^2 + \epsilon}} + \beta"
         r"\end{aligned}")


# ------------------------------------------------------------------ computation (cached on plain params)
# key = (tokens, activation, d_model, heads, seed): everything the weights and the input depend on.
@shared_arrays(max_entries=8, max_bytes=24 * MB)
def encoders(act: str, d: int, h: int, seed: int) -> dict[str, TransformerEncoder]:
    """Both variants, 12 layers deep, the same weights (read-only: never put in train mode)."""
    return {v: el.encoder_for(v, d, h, MAX_LAYERS, act, seed, max_len=MAX_TOKENS) for v in el.VARIANTS}


@shared_arrays(max_entries=32, max_bytes=24 * MB)
def run_stacks(key: tuple) -> dict:
    """Per variant: every step of every layer (numpy), weights (L, h, n, n), stream RMS, cumulative rollout."""
    tokens, act, d, h, seed = key
    x = embed_tokens(list(tokens), d, seed)[None]                  # (1, n, d), entries ~ N(0, 1)
    out = {}
    for variant, enc in encoders(act, d, h, seed).items():
        with torch.no_grad():
            tr = enc.trace_embeddings(x)
            outputs = [layer.output for layer in tr.layers]
            stream = el.residual_stream_rms(tr.embeddings, outputs)
            finals = [float(el.rms(enc.final_norm(y))) if enc.final_norm is not None else float(el.rms(y))
                      for y in outputs]
            gaps = [float(el.final_layernorm_gap(y)) for y in outputs]
            rollout = attention_rollout([layer.weights for layer in tr.layers], cumulative=True)[:, 0]
        out[variant] = {
            "steps": [{k: v[0].numpy().copy() for k, v in layer.steps.items()} for layer in tr.layers],
            "weights": np.stack([layer.weights[0].numpy() for layer in tr.layers]),   # (L, h, n, n)
            "stream": stream.numpy(), "final_rms": np.array(finals), "final_gap": np.array(gaps),
            "rollout": rollout.numpy(),                                               # (L, n, n)
        }
    return out


@shared_arrays(max_entries=32, max_bytes=4 * MB)
def dropout_demo(key: tuple, variant: str, p: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Layer 1's attention weights (h, n, n), eval vs train mode, and the kept entries.

    Runs on a copy of the layer, so the cached encoder stays in eval mode for every session."""
    tokens, act, d, h, seed = key
    x = torch.tensor(run_stacks(key)[variant]["steps"][0]["input"])[None]
    view = el.attention_dropout(copy.deepcopy(encoders(act, d, h, seed)[variant].layers[0]), x, p, seed=seed)
    return view.eval_weights[0].numpy(), view.train_weights[0].numpy(), view.keep[0].numpy()


@shared_arrays(max_entries=32, max_bytes=2 * MB)
def double_residual(key: tuple, layer: int) -> tuple[np.ndarray, np.ndarray]:
    """How far the FFN sublayer moves each token (n,): correct post-LN layer vs the second tutorial's."""
    tokens, act, d, h, seed = key
    x = torch.tensor(run_stacks(key)["post"]["steps"][layer]["input"])[None]
    eff = el.double_residual_effect(encoders(act, d, h, seed)["post"].layers[layer], x)
    return eff.correct_update.numpy(), eff.tutorial_update.numpy()


def matrix_of(key: tuple, source: tuple) -> np.ndarray:
    """The (n, n) matrix a heatmap draws, named by plain values (so charts can be cached on them)."""
    kind, variant, *rest = source
    if kind == "tile":                              # (layer index, head index)
        return run_stacks(key)[variant]["weights"][rest[0], rest[1]]
    if kind == "rollout":                           # (number of layers)
        return run_stacks(key)[variant]["rollout"][rest[0] - 1]
    ev, tr, _ = dropout_demo(key, variant, rest[0])  # ("eval" | "train", variant, p, head index)
    return (ev if kind == "eval" else tr)[rest[1]]


# ------------------------------------------------------------------ charts (drawn by ui.anatomy, specs cached there)
def diagram_chart(key: tuple, variant: str, li: int) -> dict:
    """Built once per language and variant; another sentence or layer swaps in the data and the height."""
    steps = run_stacks(key)[variant]["steps"][li]
    act = key[1]
    boxes = [DiagramStep(label=t(f"encoder.step_{name}"),
                         formula=FORMULAS[variant][name].format(act=t(f"encoder.act_{act}")),
                         detail=t("encoder.box_detail", shape=f"(1, {steps[name].shape[0]}, {steps[name].shape[1]})",
                                  rms=f2(el.rms(torch.tensor(steps[name])).item())),
                         kind=KINDS[name], matrix=steps[name], wide=name == "ffn_hidden")
             for name in ORDER[variant]]
    skeleton = anatomy.cached_spec(("diagram_skel", variant), lambda: layer_diagram(
        boxes, key[0], SKIPS[variant], value_title=t("common.value"), token_title=t("encoder.token"),
        dim_title=t("encoder.dim"), step_title=t("encoder.where")))
    frame, width, height = layer_diagram_frame(boxes, key[0], SKIPS[variant])
    return respec(skeleton, frame, domain={"x": [0, width], "y": [0, height]}, width=width, height=height)


def scale_data(key: tuple, n_layers: int) -> pd.DataFrame:
    runs = run_stacks(key)
    frames = [pd.DataFrame({"layer": np.arange(n_layers + 1), "rms": runs[v]["stream"][:n_layers + 1],
                            "series": t(f"encoder.series_{v}"), "final": False}) for v in el.VARIANTS]
    frames.append(pd.DataFrame({"layer": [n_layers], "rms": [runs["pre"]["final_rms"][n_layers - 1]],
                                "series": [t("encoder.series_pre_final")], "final": [True]}))
    return pd.concat(frames, ignore_index=True)


def scale_figure(key: tuple, n_layers: int) -> dict:
    """Built once per language; another sentence or number of layers only swaps the data in."""
    skeleton = anatomy.cached_spec(("scale_skel", current_lang()), lambda: scale_chart(
        scale_data(key, n_layers), x_title=t("encoder.scale_x"), y_title=t("encoder.scale_y"),
        series_title=t("encoder.variant"), max_layer=n_layers))
    return respec(skeleton, scale_frame(scale_data(key, n_layers)), domain={"x": [0, n_layers]})


def double_residual_chart(key: tuple, li: int) -> dict:
    """Built once per language; another sentence or layer only swaps the data and the token order in."""
    right_u, wrong_u = double_residual(key, li)
    names = dict(first_title=t("encoder.dr_correct"), second_title=t("encoder.dr_tutorial"))
    skeleton = anatomy.cached_spec(("dr_skel", current_lang()), lambda: paired_bars(
        right_u, wrong_u, key[0], **names, label_title=t("encoder.token"), value_title=t("encoder.dr_value"),
        series_title=t("encoder.dr_series")))
    return respec(skeleton, paired_bars_frame(right_u, wrong_u, key[0], **names), sort={"token": unique_labels(key[0])})


def grid_chart(key: tuple, variant: str, n_layers: int, selected: tuple[int, int]) -> dict:
    """Built once per language and number of heads; another sentence or N only swaps the data in."""
    weights = run_stacks(key)[variant]["weights"][:n_layers]
    skeleton = anatomy.cached_spec(("grid_skel", key[3]), lambda: head_grid(
        weights, key[0], layer_title=t("encoder.layer"), head_title=t("encoder.head"),
        value_title=t("common.weight"), query_title=t("common.query"), key_title=t("common.key"),
        selected=selected))
    return respec(skeleton, head_grid_frame(weights, key[0]),
                  selection={TILE_GRID: None if selected is None else [{"layer": selected[0], "head": selected[1]}]})


def heat_chart(key: tuple, source: tuple, titles: tuple[str, str, str, str], numbers: bool, selectable: bool):
    """Weights on the fixed 0..1 scale; rollout on 0..its maximum (its entries are all near 1/n);
    entries dropped by dropout drawn grey with a cross."""
    title, x_title, y_title, value_title = titles
    m = matrix_of(key, source)
    dropped = (m == 0) & (matrix_of(key, ("eval",) + source[1:]) > 0) if source[0] == "train" else None
    domain = (0.0, float(m.max())) if source[0] == "rollout" else None
    return heatmap_spec(m, key[0], title=title, x_title=x_title, y_title=y_title, value_title=value_title,
                        show_numbers=numbers, selectable=selectable, masked=dropped, domain=domain)


def row_sums_figure(key: tuple, variant: str, p: float, head: int) -> dict:
    """Built once per language; another sentence, p or head only swaps the data and the query order in."""
    ev, tr = matrix_of(key, ("eval", variant, p, head)), matrix_of(key, ("train", variant, p, head))
    names = dict(eval_title=t("encoder.mode_eval"), train_title=t("encoder.mode_train"))
    skeleton = anatomy.cached_spec(("rs_skel", current_lang()), lambda: row_sums_chart(
        ev.sum(-1), tr.sum(-1), key[0], **names, query_title=t("common.query"), sum_title=t("encoder.row_sum"),
        mode_title=t("encoder.mode")))
    return respec(skeleton, row_sums_frame(ev.sum(-1), tr.sum(-1), key[0], **names),
                  sort={"query": unique_labels(key[0])})


def weights_heatmap(key: tuple, source: tuple, title: str, *, chart_key: str, numbers: bool,
                    x_title: str | None = None, y_title: str | None = None, value_title: str | None = None,
                    selectable: bool = False) -> int | None:
    """A cached heatmap drawn by ui.anatomy.show_matrix; returns the clicked query row."""
    titles = (title, x_title or t("common.key"), y_title or t("common.query"), value_title or t("common.weight"))
    spec = anatomy.cached_spec((chart_key, current_lang(), key, source, titles, numbers, selectable),
                    lambda: heat_chart(key, source, titles, numbers, selectable))
    return anatomy.show_matrix(spec, matrix_of(key, source), key[0], key=chart_key, selectable=selectable,
                               file_name=f"{chart_key}.csv")


def url_tile(n_layers: int, h: int) -> tuple[int, int] | None:
    """The grid tile (layer, head), 1-based, kept in the URL as ?tile=L.H by an earlier click; None if absent
    or outside the grid now shown."""
    try:
        layer, head = (int(v) for v in st.query_params.get("tile", "").split("."))
    except ValueError:
        return None
    return (layer, head) if 1 <= layer <= n_layers and 1 <= head <= h else None


def picked_value(event, selection: str, field: str):
    try:
        points = event.selection.get(selection) or []
    except AttributeError:
        return None
    for point in points:
        if isinstance(point, dict) and field in point:
            return point
    return None


def f2(x: float) -> str:
    return f"{x:.2f}"


def ffn_notice(hidden: np.ndarray, act: str, dff: int) -> str:
    if act == "relu":
        return t("encoder.notice_ffn_relu", dff=dff, zero=f"{100 * float((hidden == 0).mean()):.0f}")
    return t("encoder.notice_ffn_gelu", dff=dff, neg=f"{100 * float((hidden < 0).mean()):.0f}",
             min=f"{float(hidden.min()):.3f}")


# ------------------------------------------------------------------ page
anatomy.header(NS)
anatomy.intuition(NS)
anatomy.formula(LATEX, t("encoder.formula_caption"))

tokens = sentence(max_tokens=MAX_TOKENS, min_tokens=2)
c1, c2, c3, c4, c5, c6 = st.columns([1.3, 1.2, 0.9, 0.9, 1.6, 1])
with c1:
    variant = st.segmented_control(t("encoder.variant"), list(el.VARIANTS), default="post", required=True,
                                   format_func=lambda v: t(f"encoder.variant_{v}"), key="ln",
                                   bind="query-params", help=t("encoder.variant_help")) or "post"
with c2:
    act = st.segmented_control(t("encoder.activation"), list(ACTS), default="relu", required=True,
                               format_func=lambda a: t(f"encoder.act_{a}"), key="act", bind="query-params",
                               help=t("encoder.activation_help")) or "relu"
with c3:
    d = int(st.selectbox("d_model", D_CHOICES, index=D_CHOICES.index(32), key="d", bind="query-params",
                         help=t("encoder.d_help")))
with c4:
    h = int(st.selectbox(t("encoder.heads"), H_CHOICES, index=H_CHOICES.index(4), key="h",
                         bind="query-params"))
with c5:
    n_layers = int(st.slider(t("encoder.layers"), 1, MAX_LAYERS, 6, key="L", bind="query-params",
                             help=t("encoder.layers_help")))
with c6:
    seed = seed_control()

if tokens is None:
    st.stop()
if d % h:
    anatomy.problem("encoder.err_heads", d=d, h=h, ok=", ".join(str(x) for x in H_CHOICES if d % x == 0))
    st.stop()

key = (tuple(tokens), act, d, h, seed)
runs = run_stacks(key)
run = runs[variant]
n = len(tokens)
labels = unique_labels(tokens)
vname = t(f"encoder.variant_{variant}")

# ---- 1. one layer, live
st.header(t("encoder.layer_title"))
st.markdown(lesson("encoder/layer"))
if st.session_state.get("l", 1) > n_layers:    # the stack got shallower than the layer drawn
    st.session_state["l"] = n_layers
layer_no = int(st.slider(t("encoder.layer_pick"), 1, n_layers, key="l", bind="query-params")) \
    if n_layers > 1 else 1
li = min(layer_no, n_layers) - 1
steps = run["steps"][li]
rms_of = {k: float(np.sqrt(np.mean(v ** 2))) for k, v in steps.items()}
st.caption(t("encoder.diagram_caption", variant=vname, layer=li + 1, n=n, d=d, dff=4 * d))
anatomy.show_chart(lambda: diagram_chart(key, variant, li), key="diagram", cache=(key, variant, li), width="content")
anatomy.notice([
    t("encoder.notice_ln", rms=f2(rms_of["norm1"]), mean=f"{abs(steps['norm1'].mean(-1)).max():.1e}"),
    t(f"encoder.notice_residual_{variant}", x=f2(rms_of["input"]), a=f2(rms_of["attention"]),
      s=f2(rms_of["residual1"])),
    ffn_notice(steps["ffn_hidden"], act, 4 * d),
    t(f"encoder.notice_out_{variant}", out=f2(rms_of["norm2" if variant == "post" else "residual2"])),
])

# ---- 2. post-LN vs pre-LN
st.header(t("encoder.prepost_title"))
st.markdown(lesson("encoder/post_pre"))
anatomy.show_chart(lambda: scale_figure(key, n_layers), key="scale", cache=(key, n_layers))
st.caption(t("encoder.scale_caption"))
pre_s, post_s = runs["pre"]["stream"], runs["post"]["stream"]
pre_final = runs["pre"]["final_rms"][n_layers - 1]
anatomy.notice([
    t("encoder.notice_scale_post", n=n_layers, dev=f"{np.abs(post_s[1:n_layers + 1] - 1).max():.0e}"),
    t("encoder.notice_scale_pre", n=n_layers, first=f2(pre_s[1]), last=f2(pre_s[n_layers]),
      ratio=f2(pre_s[n_layers] / pre_s[1]), x0=f2(pre_s[0])),
    t("encoder.notice_scale_final", last=f2(pre_s[n_layers]), after=f2(pre_final)),
])
anatomy.exercise("ex_scale", t("encoder.ex_scale_q"),
                 [t("encoder.ex_scale_a0"), t("encoder.ex_scale_a1"), t("encoder.ex_scale_a2")], 1,
                 t("encoder.ex_scale_expl", r1=f2(pre_s[1]), r6=f2(pre_s[6]), r12=f2(pre_s[MAX_LAYERS]),
                   post=f2(post_s[MAX_LAYERS])))


def double_residual_demo() -> None:
    anatomy.show_chart(lambda: double_residual_chart(key, li), key="double_residual", cache=(key, li))
    right_u, wrong_u = double_residual(key, li)
    st.markdown(t("encoder.dr_notice", layer=li + 1, right=f2(float(np.median(right_u))),
                  wrong=f2(float(np.median(wrong_u))), ratio=f2(float(np.median(wrong_u / right_u)))))


anatomy.pitfall(t("encoder.pit_double_title"), t("encoder.pit_double_body"), code=t("encoder.pit_double_code"),
                demo=double_residual_demo)
anatomy.pitfall(t("encoder.pit_final_title"),
                t("encoder.pit_final_body", n=n_layers, gap=f"{runs['post']['final_gap'][n_layers - 1]:.1e}",
                  pre=f2(pre_s[n_layers]), after=f2(pre_final)),
                code=t("encoder.pit_final_code"))

# ---- 3. the stack on your sentence: attention per layer and head, rollout
st.header(t("encoder.stack_title", n=n_layers, variant=vname))
st.markdown(lesson("encoder/stack"))
weights = run["weights"][:n_layers]                                        # (L, h, n, n)
sharpest = np.unravel_index(int(np.argmax(weights.max(-1).mean(-1))), weights.shape[:2])
default_tile = (int(sharpest[0]) + 1, int(sharpest[1]) + 1)
tile = url_tile(n_layers, h) or default_tile                               # a link keeps the clicked tile
event = anatomy.show_chart(lambda: grid_chart(key, variant, n_layers, tile), key="grid",
                           cache=(key, variant, n_layers, tile), select=True, width="content")
clicked = picked_value(event, TILE_GRID, "layer")
if clicked and (int(clicked["layer"]), int(clicked.get("head", 1))) != tile:
    tile = (int(clicked["layer"]), int(clicked.get("head", 1)))
    if 1 <= tile[0] <= n_layers and 1 <= tile[1] <= h:
        st.query_params["tile"] = f"{tile[0]}.{tile[1]}"
    else:
        tile = default_tile
st.caption(t("encoder.grid_caption"))
numbers = n <= HALF_NUMBERS
left, right = st.columns(2)
with left:
    weights_heatmap(key, ("tile", variant, tile[0] - 1, tile[1] - 1),
                    t("encoder.tile_title", layer=tile[0], head=tile[1]), chart_key="tile", numbers=numbers)
with right:
    picked = weights_heatmap(key, ("rollout", variant, n_layers), t("encoder.rollout_title", n=n_layers),
                            chart_key="rollout", numbers=numbers, x_title=t("encoder.rollout_x"),
                            y_title=t("encoder.rollout_y"), value_title=t("encoder.rollout_value"),
                            selectable=True)
q = keep_row("row_rollout", picked, n, 0)
rollout = run["rollout"][n_layers - 1]
st.caption(t("encoder.rollout_row", q=anatomy.md_escape(labels[q]), n=n_layers))
anatomy.show_chart(lambda: bars_spec(run["rollout"][n_layers - 1][q], key[0], value_title=t("encoder.rollout_value"),
                                label_title=t("encoder.rollout_x"), domain=None, highlight=q),
                   key="rollout_bars", cache=(key, variant, n_layers, q))
st.warning(lesson("encoder/rollout_caveat"), icon=":material/report:")
w_tile = weights[tile[0] - 1, tile[1] - 1]
top_q = int(np.argmax(w_tile.max(-1)))
deviation = np.abs(run["rollout"][:n_layers] - 1.0 / n).max(axis=(-1, -2))
anatomy.notice([
    t("encoder.notice_tile", layer=tile[0], head=tile[1], w=f2(float(w_tile.max())),
      q=anatomy.md_escape(labels[top_q]), k=anatomy.md_escape(labels[int(np.argmax(w_tile[top_q]))]),
      u=f2(1.0 / n)),
    t("encoder.notice_rollout", n=n_layers, first=f2(float(deviation[0])), last=f2(float(deviation[-1])),
      u=f2(1.0 / n), diag=f2(float(np.diag(rollout).mean()))),
    t("encoder.notice_untrained"),
])

# ---- 4. dropout on the weights: train vs eval
st.header(t("encoder.dropout_title"))
st.markdown(lesson("encoder/dropout"))
p = round(float(st.slider(t("encoder.p"), 0.0, 0.9, 0.2, 0.05, key="p", bind="query-params",
                          help=t("encoder.p_help"))), 2)
head = tile[1] - 1
left, right = st.columns(2)
with left:
    weights_heatmap(key, ("eval", variant, p, head), t("encoder.eval_title", head=head + 1), chart_key="w_eval",
                    numbers=numbers)
with right:
    weights_heatmap(key, ("train", variant, p, head), t("encoder.train_title", head=head + 1, p=f2(p)),
                    chart_key="w_train", numbers=numbers)
anatomy.show_chart(lambda: row_sums_figure(key, variant, p, head), key="row_sums", cache=(key, variant, p, head))
ev, tr = matrix_of(key, ("eval", variant, p, head)), matrix_of(key, ("train", variant, p, head))
sums_eval, sums_train = ev.sum(-1), tr.sum(-1)
items = [t("encoder.notice_sums", lo=f"{sums_train.min():.3f}", hi=f"{sums_train.max():.3f}",
           ev=f"{np.abs(sums_eval - 1).max():.1e}")]
if p > 0:
    kept = tr != 0
    items.append(t("encoder.notice_dropped", k=int((~kept).sum()), total=n * n, exp=f"{p * n * n:.1f}"))
    if kept.any():
        ii, jj = np.argwhere(kept)[int(np.argmax(ev[kept]))]
        items.append(t("encoder.notice_scaled", q=anatomy.md_escape(labels[ii]), k=anatomy.md_escape(labels[jj]),
                       ev=f"{ev[ii, jj]:.4f}", tr=f"{tr[ii, jj]:.4f}", f=f"{1 / (1 - p):.4f}", p=f2(p)))
    else:   # a short sentence at high p: this draw zeroed every weight (2 tokens, p = 0.9: 0.9^4 = 66 %)
        items.append(t("encoder.notice_all_dropped", total=n * n, p=f2(p), chance=f"{p ** (n * n):.0%}"))
else:
    items.append(t("encoder.notice_p0"))
anatomy.notice(items)
anatomy.exercise("ex_drop", t("encoder.ex_drop_q"),
                 [t("encoder.ex_drop_a0"), t("encoder.ex_drop_a1"), t("encoder.ex_drop_a2")], 1,
                 t("encoder.ex_drop_expl", lo=f"{sums_train.min():.3f}", hi=f"{sums_train.max():.3f}"))
anatomy.pitfall(t("encoder.pit_dropout_title"), t("encoder.pit_dropout_body"), code=t("encoder.pit_dropout_code"))

anatomy.show_code(TransformerEncoderLayer.forward_trace, PositionWiseFFN, TransformerEncoder.trace_embeddings,
                  el.encoder_for, el.residual_stream_rms, attention_rollout, el.attention_dropout,
                  el.TutorialEncoderLayer, el.double_residual_effect)

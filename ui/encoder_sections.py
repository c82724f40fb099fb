"""The encoder page's sections: the stacks computed and cached on plain values (both variants 12 layers deep, every
step of every layer, dropout's weights, the double residual), the tile and layer the tabs share, the controls, and each
tab's body (one layer as a flow of sublayers, post-LN vs pre-LN with its pitfalls, the stack's attention and rollout,
dropout in train vs eval mode)."""
from __future__ import annotations

from typing import NamedTuple

import numpy as np
import streamlit as st
import torch

from attention_core import text, transformer
from attention_core.labs import encoder as lab
from serving.cache import MB, shared_arrays
from ui import anatomy, charts, controls, presenter
from ui import encoder_charts as ec
from ui import format as fmt
from ui.i18n import lesson as lesson_text
from ui.i18n import t

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


# ------------------------------------------------------------------ computation (cached on plain values)
@shared_arrays(max_entries=8, max_bytes=24 * MB)
def encoders(act: str, d: int, h: int, seed: int) -> dict[str, transformer.TransformerEncoder]:
    """Both variants, 12 layers deep, the same weights (read-only: never put in train mode)."""
    return lab.encoders_for(d, h, MAX_LAYERS, act, seed, max_len=MAX_TOKENS)


def encoders_of(setup: lab.EncoderSetup) -> dict[str, transformer.TransformerEncoder]:
    return encoders(setup.activation, setup.d_model, setup.heads, setup.seed)


@shared_arrays(max_entries=32, max_bytes=24 * MB)
def run_stacks(setup: lab.EncoderSetup) -> dict[str, lab.StackRun]:
    """Per variant: every step of every layer, weights (L, h, n, n), stream RMS, cumulative rollout."""
    x = text.embed_tokens(list(setup.tokens), setup.d_model, setup.seed)[None]     # (1, n, d), entries ~ N(0, 1)
    return {variant: lab.run_stack(enc, x) for variant, enc in encoders_of(setup).items()}


def layer_input(setup: lab.EncoderSetup, variant: str, layer: int) -> torch.Tensor:
    return torch.tensor(run_stacks(setup)[variant].steps[layer]["input"])[None]


@shared_arrays(max_entries=32, max_bytes=4 * MB)
def dropout_demo(setup: lab.EncoderSetup, variant: str, p: float) -> lab.DropoutWeights:
    """Layer 1's attention weights (h, n, n), eval vs train mode (on a copy of the cached layer)."""
    return lab.dropout_weights(encoders_of(setup)[variant].layers[0], layer_input(setup, variant, 0), p,
                               setup.seed)


@shared_arrays(max_entries=32, max_bytes=2 * MB)
def double_residual(setup: lab.EncoderSetup, layer: int) -> lab.DoubleResidual:
    """How far the FFN sublayer moves each token (n,): correct post-LN layer vs the second tutorial's."""
    eff = lab.double_residual_effect(encoders_of(setup)["post"].layers[layer], layer_input(setup, "post", layer))
    return lab.DoubleResidual._make(v.numpy() for v in eff)


# ------------------------------------------------------------------ drawing helpers
class Choice(NamedTuple):
    """The page's controls: the stacks' setup, the variant drawn and how many layers are shown."""

    setup: lab.EncoderSetup
    variant: str
    n_layers: int


def weights_heatmap(matrix: np.ndarray, tokens, title: str, *, chart_key: str, numbers: bool,
                    selectable: bool = False, **options) -> int | None:
    """A weight heatmap with its CSV download; returns the clicked query row."""
    spec = charts.attention_heatmap(matrix, tokens, title=title, show_numbers=numbers, selectable=selectable,
                                    **options)
    return anatomy.show_matrix(spec, matrix, tokens, key=chart_key, selectable=selectable,
                               file_name=f"{chart_key}.csv")


def url_tile(n_layers: int, h: int) -> tuple[int, int] | None:
    """The grid tile (layer, head), 1-based, kept in the URL as ?tile=L.H by an earlier click; None if absent
    or outside the grid now shown."""
    try:
        layer, head = (int(v) for v in st.query_params.get("tile", "").split("."))
    except ValueError:
        return None
    return (layer, head) if 1 <= layer <= n_layers and 1 <= head <= h else None


def sharpest_tile(weights: np.ndarray) -> tuple[int, int]:
    """The (layer, head), 1-based, whose rows put the most weight on one key (the grid's default tile)."""
    sharpest = np.unravel_index(int(np.argmax(weights.max(-1).mean(-1))), weights.shape[:2])
    return int(sharpest[0]) + 1, int(sharpest[1]) + 1


def shown_tile(choice: Choice) -> tuple[int, int]:
    """The tile the stack tab enlarges (and whose head the dropout tab shows): the URL's, else the sharpest."""
    weights = run_stacks(choice.setup)[choice.variant].weights[:choice.n_layers]
    return url_tile(choice.n_layers, choice.setup.heads) or sharpest_tile(weights)


def shown_layer(n_layers: int) -> int:
    """The layer the layer tab draws (0-based), for the other tabs: its slider's value, else the URL's, else 1."""
    value = st.session_state.get("l", st.query_params.get("l", 1))
    try:
        return min(max(int(value), 1), n_layers) - 1
    except (TypeError, ValueError):
        return 0


def adopt_tile_click(n_layers: int, h: int) -> None:
    """A new click on the grid (its selection, kept by Streamlit under the chart's key) becomes ?tile=L.H
    before the grid is drawn, so the grid frames the tile the enlarged heatmap shows."""
    try:
        points = st.session_state["grid"]["selection"][ec.TILE_GRID] or []
    except (KeyError, TypeError):
        points = []
    points = points if isinstance(points, list) else [points]
    picked = next(((int(p["layer"]), int(p.get("head", 1))) for p in points if isinstance(p, dict) and "layer" in p),
                  None)
    if picked is None:
        st.session_state.pop("_grid_adopted", None)
    elif picked != st.session_state.get("_grid_adopted"):
        st.session_state["_grid_adopted"] = picked
        if 1 <= picked[0] <= n_layers and 1 <= picked[1] <= h:
            st.query_params["tile"] = f"{picked[0]}.{picked[1]}"


def ffn_notice(hidden: np.ndarray, act: str, dff: int) -> str:
    if act == "relu":
        return t("encoder.notice_ffn_relu", dff=dff, zero=fmt.fixed(100 * float((hidden == 0).mean()), 0))
    return t("encoder.notice_ffn_gelu", dff=dff, neg=fmt.fixed(100 * float((hidden < 0).mean()), 0),
             min=fmt.fixed(float(hidden.min()), 3))


# ------------------------------------------------------------------ sections
def controls_section() -> Choice | None:
    tokens = controls.sentence(max_tokens=MAX_TOKENS, min_tokens=2)
    # one flex row, not six columns: each column is a message of its own in every rerun (the redraw budget)
    with st.container(horizontal=True, vertical_alignment="bottom", gap="xsmall"):
        variant = st.segmented_control(t("encoder.variant"), list(lab.VARIANTS), default="post", required=True,
                                       format_func=lambda v: t(f"encoder.variant_{v}"), key="ln",
                                       bind="query-params", help=t("encoder.variant_help")) or "post"
        act = st.segmented_control(t("encoder.activation"), list(ACTS), default="relu", required=True,
                                   format_func=lambda a: t(f"encoder.act_{a}"), key="act", bind="query-params",
                                   help=t("encoder.activation_help")) or "relu"
        d = int(st.selectbox("d_model", D_CHOICES, index=D_CHOICES.index(32), key="d", bind="query-params",
                             help=t("encoder.d_help"), width=95))
        h = int(st.selectbox(t("encoder.heads"), H_CHOICES, index=H_CHOICES.index(4), key="h",
                             bind="query-params", width=95))
        n_layers = int(st.slider(t("encoder.layers"), 1, MAX_LAYERS, 6, key="L", bind="query-params",
                                 help=t("encoder.layers_help"), width=170))
        seed = controls.seed(width=130)
    if tokens is None:
        return None
    if d % h:
        anatomy.problem("encoder.err_heads", d=d, h=h, ok=", ".join(str(x) for x in H_CHOICES if d % x == 0))
        return None
    return Choice(lab.EncoderSetup(tuple(tokens), act, d, h, seed), variant, n_layers)


def layer_controls(n_layers: int) -> int:
    """1. One layer, live: which layer of the stack to draw. Returns its index."""
    if not presenter.active():     # in presenter mode the passage is folded under the title (every step of the tab)
        st.header(t("encoder.layer_title"))
    anatomy.explanation(lesson_text("encoder/layer"), t("encoder.layer_title"))
    if st.session_state.get("l", 1) > n_layers:    # the stack got shallower than the layer drawn
        st.session_state["l"] = n_layers
    layer_no = int(st.slider(t("encoder.layer_pick"), 1, n_layers, key="l", bind="query-params")) \
        if n_layers > 1 else 1
    return min(layer_no, n_layers) - 1


def layer_section(choice: Choice, li: int) -> None:
    """The diagram of the layer's sublayers with their tensors, and what to notice."""
    setup, variant, _ = choice
    steps = run_stacks(setup)[variant].steps[li]
    rms_of = {k: float(np.sqrt(np.mean(v ** 2))) for k, v in steps.items()}
    n, d = len(setup.tokens), setup.d_model
    st.caption(t("encoder.diagram_caption", variant=t(f"encoder.variant_{variant}"), layer=li + 1, n=n, d=d,
                 dff=4 * d))
    boxes = [ec.DiagramStep(label=t(f"encoder.step_{name}"),
                            formula=FORMULAS[variant][name].format(act=t(f"encoder.act_{setup.activation}")),
                            detail=t("encoder.box_detail", shape=f"(1, {n}, {steps[name].shape[1]})",
                                     rms=fmt.fixed(rms_of[name])),
                            kind=KINDS[name], matrix=steps[name], wide=name == "ffn_hidden")
             for name in ORDER[variant]]
    anatomy.show_chart(ec.layer_diagram(boxes, setup.tokens, SKIPS[variant], value_title=t("common.value"),
                                        token_title=t("encoder.token"), step_title=t("encoder.where")),
                       key="diagram")
    anatomy.notice([
        t("encoder.notice_ln", rms=fmt.fixed(rms_of["norm1"]), mean=f"{abs(steps['norm1'].mean(-1)).max():.1e}"),
        t(f"encoder.notice_residual_{variant}", x=fmt.fixed(rms_of["input"]), a=fmt.fixed(rms_of["attention"]),
          s=fmt.fixed(rms_of["residual1"])),
        ffn_notice(steps["ffn_hidden"], setup.activation, 4 * d),
        t(f"encoder.notice_out_{variant}", out=fmt.fixed(rms_of["norm2" if variant == "post" else "residual2"])),
    ])


def prepost_question(choice: Choice) -> None:
    """2. post-LN vs pre-LN: the question before the residual stream's scale."""
    runs = run_stacks(choice.setup)
    pre_s, post_s, f2 = runs["pre"].stream, runs["post"].stream, fmt.fixed
    st.header(t("encoder.prepost_title"))
    st.markdown(lesson_text("encoder/post_pre"))
    anatomy.exercise("ex_scale", t("encoder.ex_scale_q"),
                     [t("encoder.ex_scale_a0"), t("encoder.ex_scale_a1"), t("encoder.ex_scale_a2")], 1,
                     t("encoder.ex_scale_expl", r1=f2(pre_s[1]), r6=f2(pre_s[6]), r12=f2(pre_s[MAX_LAYERS]),
                       post=f2(post_s[MAX_LAYERS])))


def prepost_section(choice: Choice) -> None:
    """The residual stream's scale per layer in both variants, and what to notice."""
    setup, _, n_layers = choice
    runs = run_stacks(setup)
    pre_s, post_s = runs["pre"].stream, runs["post"].stream
    pre_final = runs["pre"].final_rms[n_layers - 1]
    stream = {t(f"encoder.series_{v}"): runs[v].stream[:n_layers + 1] for v in lab.VARIANTS}
    anatomy.show_chart(ec.residual_scale(stream, (t("encoder.series_pre_final"), n_layers, pre_final),
                                         x_title=t("encoder.scale_x"), y_title=t("encoder.scale_y"),
                                         series_title=t("encoder.variant")), key="scale")
    st.caption(t("encoder.scale_caption"))
    f2 = fmt.fixed
    anatomy.notice([
        t("encoder.notice_scale_post", n=n_layers, dev=f"{np.abs(post_s[1:n_layers + 1] - 1).max():.0e}"),
        t("encoder.notice_scale_pre", n=n_layers, first=f2(pre_s[1]), last=f2(pre_s[n_layers]),
          ratio=f2(pre_s[n_layers] / pre_s[1]), x0=f2(pre_s[0])),
        t("encoder.notice_scale_final", last=f2(pre_s[n_layers]), after=f2(pre_final)),
    ])


def prepost_pitfalls(choice: Choice, li: int) -> None:
    """The two pitfalls: the second tutorial's double residual, and pre-LN without a final LayerNorm."""
    setup, _, n_layers = choice
    runs = run_stacks(setup)
    pre_s, pre_final, f2 = runs["pre"].stream, runs["pre"].final_rms[n_layers - 1], fmt.fixed

    def double_residual_demo() -> None:
        right_u, wrong_u = double_residual(setup, li)[:2]
        anatomy.show_chart(ec.paired_bars(right_u, wrong_u, setup.tokens,
                                          series=(t("encoder.dr_correct"), t("encoder.dr_tutorial")),
                                          label_title=t("encoder.token"), value_title=t("encoder.dr_value"),
                                          series_title=t("encoder.dr_series")), key="double_residual")
        st.markdown(t("encoder.dr_notice", layer=li + 1, right=f2(float(np.median(right_u))),
                      wrong=f2(float(np.median(wrong_u))), ratio=f2(float(np.median(wrong_u / right_u)))))

    anatomy.pitfall(t("encoder.pit_double_title"), t("encoder.pit_double_body"), code=t("encoder.pit_double_code"),
                    demo=double_residual_demo, shows=(lab.TutorialEncoderLayer, lab.double_residual_effect))
    anatomy.pitfall(t("encoder.pit_final_title"),
                    t("encoder.pit_final_body", n=n_layers, gap=f"{runs['post'].final_gap[n_layers - 1]:.1e}",
                      pre=f2(pre_s[n_layers]), after=f2(pre_final)),
                    code=t("encoder.pit_final_code"))


def stack_section(choice: Choice) -> None:
    """3. The stack on the sentence: attention per layer and head (click a tile to enlarge it), and its rollout."""
    setup, variant, n_layers = choice
    tokens, n, h = setup.tokens, len(setup.tokens), setup.heads
    run = run_stacks(setup)[variant]
    labels = charts.unique_labels(tokens)
    st.header(t("encoder.stack_title", n=n_layers, variant=t(f"encoder.variant_{variant}")))
    st.markdown(lesson_text("encoder/stack"))
    weights = run.weights[:n_layers]                                           # (L, h, n, n)
    adopt_tile_click(n_layers, h)                                              # a click, before the grid
    tile = shown_tile(choice)                                                  # a link keeps the clicked tile
    anatomy.show_chart(ec.head_grid(weights, tokens, layer_title=t("encoder.layer"), head_title=t("encoder.head"),
                                    value_title=t("common.weight"), query_title=t("common.query"),
                                    key_title=t("common.key"), selected=tile), key="grid", select=True,
                       width="content")
    st.caption(t("encoder.grid_caption"))
    numbers = n <= HALF_NUMBERS
    w_tile = weights[tile[0] - 1, tile[1] - 1]
    rollout = run.rollout[n_layers - 1]
    left, right = st.columns(2)
    with left:
        weights_heatmap(w_tile, tokens, t("encoder.tile_title", layer=tile[0], head=tile[1]), chart_key="tile",
                        numbers=numbers)
    with right:   # rollout on 0..its maximum: its entries are all near 1/n
        picked = weights_heatmap(rollout, tokens, t("encoder.rollout_title", n=n_layers), chart_key="rollout",
                                 numbers=numbers, selectable=True, x_title=t("encoder.rollout_x"),
                                 y_title=t("encoder.rollout_y"), value_title=t("encoder.rollout_value"),
                                 domain=(0.0, float(rollout.max())))
    q = controls.keep_row("row_rollout", picked, n, 0)
    st.caption(t("encoder.rollout_row", q=anatomy.md_escape(labels[q]), n=n_layers))
    anatomy.show_chart(charts.bars(rollout[q], tokens, value_title=t("encoder.rollout_value"),
                                   label_title=t("encoder.rollout_x"), domain=None, highlight=q), key="rollout_bars")
    st.warning(lesson_text("encoder/rollout_caveat"), icon=":material/report:")
    top_q = int(np.argmax(w_tile.max(-1)))
    deviation = np.abs(run.rollout[:n_layers] - 1.0 / n).max(axis=(-1, -2))
    f2 = fmt.fixed
    anatomy.notice([
        t("encoder.notice_tile", layer=tile[0], head=tile[1], w=f2(float(w_tile.max())),
          q=anatomy.md_escape(labels[top_q]), k=anatomy.md_escape(labels[int(np.argmax(w_tile[top_q]))]),
          u=f2(1.0 / n)),
        t("encoder.notice_rollout", n=n_layers, first=f2(float(deviation[0])), last=f2(float(deviation[-1])),
          u=f2(1.0 / n), diag=f2(float(np.diag(rollout).mean()))),
        t("encoder.notice_untrained"),
    ])


def dropout_controls() -> float:
    """4. Dropout on the weights: the rate p."""
    st.header(t("encoder.dropout_title"))
    st.markdown(lesson_text("encoder/dropout"))
    return round(float(st.slider(t("encoder.p"), 0.0, 0.9, 0.2, 0.05, key="p", bind="query-params",
                                 help=t("encoder.p_help"))), 2)


def dropout_question(drop: lab.DropoutWeights, head: int) -> None:
    sums_train = drop.train[head].sum(-1)
    anatomy.exercise("ex_drop", t("encoder.ex_drop_q"),
                     [t("encoder.ex_drop_a0"), t("encoder.ex_drop_a1"), t("encoder.ex_drop_a2")], 1,
                     t("encoder.ex_drop_expl", lo=fmt.fixed(sums_train.min(), 3), hi=fmt.fixed(sums_train.max(), 3)))


def dropout_section(choice: Choice, head: int, p: float, drop: lab.DropoutWeights) -> None:
    """Train vs eval mode weights of one head, their row sums, and what to notice."""
    tokens, n = choice.setup.tokens, len(choice.setup.tokens)
    labels = charts.unique_labels(tokens)
    f2 = fmt.fixed
    ev, tr = drop.eval[head], drop.train[head]
    numbers = n <= HALF_NUMBERS
    left, right = st.columns(2)
    with left:
        weights_heatmap(ev, tokens, t("encoder.eval_title", head=head + 1), chart_key="w_eval", numbers=numbers)
    with right:   # entries dropped by dropout drawn grey with a cross
        weights_heatmap(tr, tokens, t("encoder.train_title", head=head + 1, p=f2(p)), chart_key="w_train",
                        numbers=numbers, masked=drop.dropped(head))
    sums_eval, sums_train = ev.sum(-1), tr.sum(-1)
    anatomy.show_chart(ec.paired_bars(sums_eval, sums_train, tokens,
                                      series=(t("encoder.mode_eval"), t("encoder.mode_train")),
                                      label_title=t("common.query"), value_title=t("encoder.row_sum"),
                                      series_title=t("encoder.mode"), rule_at_one=True, height=340, digits=6),
                       key="row_sums")
    items = [t("encoder.notice_sums", lo=fmt.fixed(sums_train.min(), 3), hi=fmt.fixed(sums_train.max(), 3),
               ev=f"{np.abs(sums_eval - 1).max():.1e}")]
    if p > 0:
        kept = tr != 0
        items.append(t("encoder.notice_dropped", k=int((~kept).sum()), total=n * n, exp=fmt.fixed(p * n * n, 1)))
        if kept.any():
            ii, jj = np.argwhere(kept)[int(np.argmax(ev[kept]))]
            items.append(t("encoder.notice_scaled", q=anatomy.md_escape(labels[ii]), k=anatomy.md_escape(labels[jj]),
                           ev=fmt.fixed(ev[ii, jj], 4), tr=fmt.fixed(tr[ii, jj], 4), f=fmt.fixed(1 / (1 - p), 4),
                           p=f2(p)))
        else:   # a short sentence at high p: this draw zeroed every weight (2 tokens, p = 0.9: 0.9^4 = 66 %)
            items.append(t("encoder.notice_all_dropped", total=n * n, p=f2(p), chance=f"{p ** (n * n):.0%}"))
    else:
        items.append(t("encoder.notice_p0"))
    anatomy.notice(items)

"""The cross-attention page's sections, tab by tab: a decoder's words over an encoded source sentence (its controls,
its heatmap, the row and the notice), the cross-modal module over a picture (its controls, the exercise, the weights,
the spot, the gate), Table 1's self-attention against recurrence (its controls, the exercise, the tables), and the
pitfall's demo of the tutorial's gate; with the cached computations they draw."""
from __future__ import annotations

from typing import NamedTuple

import pandas as pd
import streamlit as st

from attention_core import crossmodal
from attention_core.labs import cross_attention as lab
from serving.cache import MB, cache_data
from ui import anatomy, charts, controls, presenter
from ui import cross_attention_charts as cc
from ui import format as fmt
from ui.i18n import current_lang, t
from ui.i18n import lesson as lesson_text

MAX_SOURCE, MAX_TARGET = 24, 32     # tokens: the heatmap stays readable
MAX_WORDS = 12                      # caption words over the patches
IMAGE_SIZE = 32
TEXT_DIM = 32                       # d of the cross-modal module
PATCHES = (4, 8, 16)
HEADS = (1, 2, 4)
SPOT_SIZE = 170                     # px per picture: the two pictures side by side fit a 390 px phone


# ------------------------------------------------------------------ drawing
def region_names(regions: list[str]) -> list[str]:
    """The picture's words, with the Chinese characters that name them on the Chinese page."""
    if current_lang() != "zh":
        return regions
    chars = {r: "".join(c for c, name in lab.ZH_SCENE_WORDS.items() if name == r) for r in regions}
    return [f"{r}（{chars[r]}）" if chars[r] else r for r in regions]


# ------------------------------------------------------------------ cached computations
@cache_data(max_entries=64, max_bytes=8 * MB)
def translate(source: tuple[str, ...], target: tuple[str, ...], d_model: int, seed: int,
              trained: bool) -> lab.DecoderView:
    return lab.decoder_view(source, target, d_model, seed, trained)


@cache_data(max_entries=64, max_bytes=8 * MB)
def look(kind: str, words: tuple[str, ...], patch: int, heads: int, sharpness: float, seed: int) -> lab.SceneView:
    return lab.scene_view(kind, words, patch, heads, sharpness, seed, image_size=IMAGE_SIZE, text_dim=TEXT_DIM)


# ------------------------------------------------------------------ 1. decoder over encoder
class Translation(NamedTuple):
    """The decoder tab's controls: the two sentences, trained or random stand-in, d_model."""

    source: tuple[str, ...]
    target: tuple[str, ...]
    mode: str
    d_model: int


def decoder_intro() -> None:
    st.header(t("cross_attention.dec_title"))
    st.markdown(lesson_text("cross_attention/decoder"))


def decoder_controls() -> tuple[Translation | None, int]:
    """The decoder tab's controls and the seed (next to what it drives: a fragment redraws only this tab)."""
    left, right = st.columns(2)
    with left:
        source = controls.sentence(key="src", default=t("cross_attention.default_source_sentence"),
                                   max_tokens=MAX_SOURCE, label=t("cross_attention.source"))
    with right:
        target = controls.sentence(key="tgt", default=t("cross_attention.default_target_sentence"),
                                   max_tokens=MAX_TARGET, label=t("cross_attention.target"))
    c1, c2, c3 = st.columns([2, 1.4, 1], vertical_alignment="bottom")
    mode = c1.segmented_control(t("cross_attention.mode"), ["trained", "random"], default="trained",
                                required=True, format_func=lambda m: t(f"cross_attention.mode_{m}"),
                                key="mode", bind="query-params", help=t("cross_attention.mode_help"))
    mode = mode if mode in ("trained", "random") else "trained"
    d_model = c2.slider(t("cross_attention.d_model"), 8, 128, 64, step=8, key="dm", bind="query-params")
    with c3:
        seed = controls.seed()
    if source is None or target is None:
        return None, seed
    return Translation(tuple(source), tuple(target), mode, int(d_model)), seed


def decoder_section(choice: Translation, seed: int) -> None:
    source, target, mode, d_model = choice
    w, meaning = translate(source, target, d_model, seed, mode == "trained")
    n_t, n_s = w.shape
    shapes = t("cross_attention.shapes", n_t=n_t, n_s=n_s, d=d_model)
    on_stage = presenter.active()        # presenter mode: the heatmap first, on the step's first screen
    if not on_stage:
        st.code(shapes, language=None)

    before = controls.kept_row("row_xa", len(target))
    spec = charts.attention_heatmap(w, target, source, title=t("cross_attention.dec_heatmap", n_t=n_t, n_s=n_s),
                                    x_title=t("cross_attention.source_axis"), y_title=t("cross_attention.target_axis"),
                                    selected_row=before, height=170 if n_t < 6 else None)
    picked = anatomy.show_matrix(spec, w, target, source, key="xa", file_name="xa.csv")
    if on_stage:
        st.code(shapes, language=None)
    present = {tok.lower() for tok in source}
    first_known = next((j for j, m in enumerate(meaning) if m in present), 0)
    row = controls.keep_row("row_xa", picked, n_t, first_known)
    tgt_labels, src_labels = charts.unique_labels(target), charts.unique_labels(source)
    st.caption(t("cross_attention.row_caption", tok=anatomy.md_escape(tgt_labels[row]),
                 gloss=anatomy.md_escape(meaning[row] or "—")))
    anatomy.show_chart(cc.row_bars(w[row], source, value_title=t("common.weight"),
                                   label_title=t("cross_attention.source_axis"), highlight=int(w[row].argmax())),
                       key="xa_row")

    best = int(w[row].argmax())
    items = [t("cross_attention.notice_shape", n_t=n_t, n_s=n_s, lo=fmt.fixed(float(w.sum(1).min()), 6),
               hi=fmt.fixed(float(w.sum(1).max()), 6))]
    items.append(t("cross_attention.notice_row", tok=anatomy.md_escape(tgt_labels[row]),
                   src=anatomy.md_escape(src_labels[best]), w=fmt.fixed(float(w[row, best]))))
    lowered = [tok.lower() for tok in source]
    twin = next((j for j, m in enumerate(meaning) if m is not None and lowered.count(m) > 1), None)
    if twin is not None and mode == "trained":
        cols = [i for i, tok in enumerate(lowered) if tok == meaning[twin]]
        items.append(t("cross_attention.notice_twins", tok=anatomy.md_escape(tgt_labels[twin]),
                       gloss=anatomy.md_escape(meaning[twin]),
                       a=anatomy.md_escape(src_labels[cols[0]]), b=anatomy.md_escape(src_labels[cols[1]]),
                       wa=fmt.fixed(float(w[twin, cols[0]]), 4), wb=fmt.fixed(float(w[twin, cols[1]]), 4)))
    lonely = [j for j, m in enumerate(meaning) if m not in present]
    if lonely and mode == "trained":
        j = lonely[0]
        items.append(t("cross_attention.notice_lonely", tok=anatomy.md_escape(tgt_labels[j]),
                       w=fmt.fixed(float(w[j].max())), uniform=fmt.fixed(1 / n_s)))
    col_mass = w.sum(0)
    quiet = int(col_mass.argmin())
    items.append(t("cross_attention.notice_column", src=anatomy.md_escape(src_labels[quiet]),
                   mass=fmt.fixed(float(col_mass[quiet])), n_t=n_t))
    if mode == "random":
        items.append(t("cross_attention.notice_random", peak=fmt.fixed(float(w.max(1).mean()))))
    anatomy.notice(items)


# ------------------------------------------------------------------ 2. cross-modal
class Scene(NamedTuple):
    """The cross-modal tab's controls: the picture, the caption, patch size, heads, sharpness."""

    kind: str
    words: tuple[str, ...]
    patch: int
    heads: int
    sharpness: float


class GateSeen(NamedTuple):
    """What the gated fusion ran on, for the pitfall's demo."""

    n_words: int
    shape: tuple[int, ...]


def crossmodal_intro() -> None:
    st.header(t("cross_attention.cm_title"))
    st.markdown(lesson_text("cross_attention/crossmodal"))


def crossmodal_controls() -> tuple[Scene | None, int]:
    """The cross-modal tab's controls and the seed (a fragment redraws only this tab)."""
    kind = st.segmented_control(t("cross_attention.image"), list(crossmodal.IMAGE_KINDS), default="circle_square",
                                required=True, format_func=lambda k: t(f"cross_attention.img_{k}"), key="img",
                                bind="query-params")
    kind = kind if kind in crossmodal.IMAGE_KINDS else "circle_square"
    c_words, c_seed = st.columns([4, 1])
    with c_words:
        words = controls.sentence(key="words", default=t("cross_attention.default_caption"), max_tokens=MAX_WORDS,
                                  label=t("cross_attention.caption"))
    with c_seed:
        seed = controls.seed()
    c1, c2, c3 = st.columns([5, 3, 4])
    patch = c1.segmented_control(t("cross_attention.patch"), list(PATCHES), default=4, required=True,
                                 format_func=lambda p: t("cross_attention.patch_option", p=p,
                                                         g=crossmodal.grid_shape(IMAGE_SIZE, IMAGE_SIZE, p)[0]),
                                 key="patch", bind="query-params", help=t("cross_attention.patch_help"))
    patch = patch if patch in PATCHES else 4
    heads = c2.segmented_control(t("cross_attention.heads"), list(HEADS), default=2, required=True,
                                 key="heads", bind="query-params", help=t("cross_attention.heads_help"))
    heads = heads if heads in HEADS else 2
    sharp = c3.slider(t("cross_attention.sharpness"), 0.0, 40.0, 20.0, step=1.0, format="%.0f", key="sharp",
                      bind="query-params", help=t("cross_attention.sharpness_help"))
    return (None if words is None else Scene(kind, tuple(words), patch, heads, float(sharp))), seed


def crossmodal_question() -> None:
    anatomy.exercise("xa_ex", t("cross_attention.ex_question"),
                     [t("cross_attention.ex_a"), t("cross_attention.ex_b"), t("cross_attention.ex_c")], 1,
                     t("cross_attention.ex_explain"))


def crossmodal_section(scene: Scene, seed: int) -> GateSeen:
    kind, words, patch, heads, sharp = scene
    res = look(kind, words, patch, heads, sharp, seed)
    w, cov, gate = res.weights, res.coverage, res.gate
    n_w, n_p = w.shape
    rows = crossmodal.grid_shape(IMAGE_SIZE, IMAGE_SIZE, patch)[0]
    known = [i for i, tok in enumerate(words) if lab.scene_word(tok) in res.regions]

    def what_it_knows() -> None:
        st.caption(t("cross_attention.known", words=", ".join(region_names(res.regions)),
                     found=", ".join(anatomy.md_escape(words[i]) for i in known) or "—"))
        st.code(t("cross_attention.cm_shapes", n_w=n_w, n_p=n_p, g=rows, p=patch, v=res.visual_shape[1],
                  d=TEXT_DIM, h=heads), language=None)

    on_stage = presenter.active()        # presenter mode: the heatmap first, on the step's first screen
    if not on_stage:
        what_it_knows()

    before = controls.kept_row("row_cm", len(words))
    labels = charts.unique_labels(words)
    patches = [str(i) for i in range(n_p)]
    spec = charts.attention_heatmap(w, words, patches, title=t("cross_attention.cm_heatmap", n_w=n_w, n_p=n_p),
                                    x_title=t("cross_attention.patch_axis"), y_title=t("cross_attention.word_axis"),
                                    selected_row=before, show_numbers=n_p <= 16, height=170 if n_w < 6 else None,
                                    domain=(0.0, float(max(w.max(), 1e-6))))
    picked = anatomy.show_matrix(spec, w, words, patches, key="cm", file_name="cm.csv")
    st.caption(t("cross_attention.cm_heatmap_caption"))
    if on_stage:
        what_it_knows()
    row = controls.keep_row("row_cm", picked, n_w, known[0] if known else 0)

    anatomy.show_chart(cc.image_attention(
        res.image, w[row], patch, cov[row] > 0.5, title=t("cross_attention.spot_title", w=labels[row]),
        picture_title=t("cross_attention.picture_title"), weight_title=t("common.weight"),
        patch_title=t("cross_attention.patch_axis"), size=SPOT_SIZE), key="spot", width="content")
    st.caption(t("cross_attention.spot_caption"))

    st.subheader(t("cross_attention.gate_title"))
    st.latex(r"\begin{aligned} g &= \sigma\left(W_g\,[\,t_{enh}\,;\,\bar v\,] + b_g\right) \\ "
             r"\mathrm{out} &= g \odot t_{enh} + (1 - g) \odot \bar v \end{aligned}\,")
    st.caption(t("cross_attention.gate_caption", d=TEXT_DIM))
    anatomy.show_chart(charts.heatmap(                 # full width: 32 channel labels need the room
        gate, words, [str(j) for j in range(TEXT_DIM)], kind="weights", show_numbers=False,
        title=t("cross_attention.gate_heatmap", n_w=n_w, d=TEXT_DIM),
        x_title=t("cross_attention.channel"), y_title=t("cross_attention.word_axis"),
        value_title=t("cross_attention.gate_value"),
        selectable=False, height=max(190, 22 * n_w)), key="gate")

    inside = cov[row] > 0.5
    mass = float(w[row][inside].sum()) if inside.any() else 0.0
    items = []
    if inside.any():
        items.append(t("cross_attention.notice_mass", w=anatomy.md_escape(labels[row]), mass=fmt.fixed(mass),
                       k=int(inside.sum()), n=n_p, share=fmt.fixed(inside.sum() / n_p)))
    else:
        items.append(t("cross_attention.notice_absent", w=anatomy.md_escape(labels[row]),
                       lo=fmt.fixed(float(w[row].min()), 4), hi=fmt.fixed(float(w[row].max()), 4),
                       uniform=fmt.fixed(1 / n_p, 4)))
    g_mean = gate.mean(1)
    items.append(t("cross_attention.notice_gate", w=anatomy.md_escape(labels[row]), g=fmt.fixed(float(g_mean[row])),
                   lo=fmt.fixed(float(gate.min())), hi=fmt.fixed(float(gate.max()))))
    if heads > 1:
        per_head = res.head_weights[:, row][:, inside].sum(-1) if inside.any() else None
        if per_head is not None:
            items.append(t("cross_attention.notice_heads", h=heads,
                           masses=", ".join(fmt.fixed(float(m)) for m in per_head)))
    anatomy.notice(items)
    return GateSeen(len(words), tuple(gate.shape))


# ------------------------------------------------------------------ 3. self-attention vs recurrence (Table 1)
PATH_N = (4, 64, 32)
PATH_D = (16, 32, 64, 128, 256, 512)
TABLE1 = {"self_attention": ("O(n²·d)", "O(1)", "O(1)"), "recurrent": ("O(n·d²)", "O(n)", "O(n)"),
          "convolution": ("O(k·n·d²)", "O(1)", "O(n/k)"), "restricted": ("O(r·n·d)", "O(1)", "O(n/r)")}


@cache_data(max_entries=64, max_bytes=2 * MB)
def table1_view(n: int, d: int, i: int, j: int, kernel: int, r: int) -> list[lab.Table1Row]:
    return lab.table1(n, d, i, j, kernel=kernel, neighbourhood=r)


class Paths(NamedTuple):
    """The Table 1 tab's controls: sequence length, width, kernel, neighbourhood, the two positions."""

    n: int
    d: int
    kernel: int
    r: int
    i: int
    j: int


def paths_intro() -> None:
    st.header(t("cross_attention.paths_title"))
    st.markdown(lesson_text("cross_attention/paths"))


def paths_controls() -> Paths:
    c1, c2, c3, c4 = st.columns(4)
    lo, hi, default = PATH_N
    n = int(c1.slider(t("cross_attention.paths_n"), lo, hi, default, key="pl_n", bind="query-params"))
    d = int(c2.select_slider(t("cross_attention.paths_d"), PATH_D, value=64, key="pl_d", bind="query-params"))
    kernel = int(c3.select_slider(t("cross_attention.paths_k"), (3, 5, 7, 9), value=3, key="pl_k",
                                  bind="query-params"))
    r = int(c4.slider(t("cross_attention.paths_r"), 1, 8, 4, key="pl_r", bind="query-params"))
    n = min(max(n, lo), hi)
    c1, c2 = st.columns(2)
    i = int(c1.slider(t("cross_attention.paths_i"), 0, hi - 1, 0, key="pl_i", bind="query-params"))
    j = int(c2.slider(t("cross_attention.paths_j"), 0, hi - 1, default - 1, key="pl_j", bind="query-params"))
    if i >= n or j >= n:
        st.caption(t("cross_attention.paths_clamped", n=n))
    return Paths(n, d, kernel, r, min(i, n - 1), min(j, n - 1))


def paths_question(n: int) -> None:
    anatomy.exercise("paths_ex", t("cross_attention.paths_ex_q", n=n, last=n - 1),
                     [t("cross_attention.paths_ex_a0", last=n - 1), t("cross_attention.paths_ex_a1"),
                      t("cross_attention.paths_ex_a2")], 0, t("cross_attention.paths_ex_why"))


def paths_section(paths: Paths) -> None:
    n, d, kernel, r, i, j = paths
    rows = table1_view(n, d, i, j, kernel, r)
    frame = pd.DataFrame([{
        t("cross_attention.paths_c_kind"): t(f"cross_attention.paths_{row.kind}"),
        t("cross_attention.paths_c_ops"): f"{TABLE1[row.kind][0]} = {fmt.count(row.ops_per_layer)}",
        t("cross_attention.paths_c_seq"): f"{TABLE1[row.kind][1]} = {row.sequential}",
        t("cross_attention.paths_c_path"): f"{TABLE1[row.kind][2]} → {row.max_path}",
        t("cross_attention.paths_c_steps", i=i, j=j): row.steps} for row in rows])
    frame = frame.set_index(frame.columns[0])
    # two narrow tables (cost; paths) that wrap their cells: a phone's 358 px hold three columns, not five
    st.table(frame[frame.columns[:2]])
    st.table(frame[frame.columns[2:]])
    st.caption(t("cross_attention.paths_caption", k=kernel, r=r))
    by = {row.kind: row for row in rows}
    sa, rnn = by["self_attention"], by["recurrent"]
    anatomy.notice([
        t("cross_attention.paths_notice_steps", i=i, j=j, sa=sa.steps, rnn=rnn.steps,
          conv=by["convolution"].steps, k=kernel, res=by["restricted"].steps, r=r),
        t("cross_attention.paths_notice_seq", n=n, seq=rnn.sequential),
        t("cross_attention.paths_notice_cost", n=n, d=d, sa=fmt.count(sa.ops_per_layer),
          rnn=fmt.count(rnn.ops_per_layer),
          verdict=t("cross_attention.paths_cheaper" if n < d else "cross_attention.paths_dearer")),
    ])


# ------------------------------------------------------------------ pitfall demo
def gate_demo(n_words: int, gate_shape: tuple[int, ...] | None) -> None:
    err = lab.tutorial_gate_error(n_words, TEXT_DIM)
    if err:
        st.error(t("cross_attention.gate_error", n=n_words, d=TEXT_DIM, err=err), icon=":material/error:")
    else:
        st.caption(t("cross_attention.gate_no_error", n=n_words))
    if gate_shape is not None:
        st.success(t("cross_attention.gate_fixed", n=gate_shape[0], d=gate_shape[1]),
                   icon=":material/check_circle:")
    tutorial, fixed = lab.tutorial_parameter_counts(4 * 4 * 3, TEXT_DIM, 2)
    st.caption(t("cross_attention.param_counts", tutorial=fmt.count(tutorial), fixed=fmt.count(fixed),
                 extra=fmt.count(fixed - tutorial)))

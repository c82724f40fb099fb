"""The qkv page's sections: the lessons computed and cached on plain values, the heatmap with its CSV download, and
per tab its controls and its evidence with what to notice (kernel regression, the library, a sentence's Q, K, V step
by step with the neuron view, the three similarity functions), the pitfalls' demos and where attention comes from."""
from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
import streamlit as st
import torch

from attention_core.diagnostics import attention_entropy
from attention_core.labs import qkv as lab
from serving.cache import MB, cache_data
from ui import anatomy, controls, i18n, qkv_charts, qkv_state
from ui import format as fmt
from ui.anatomy import exercise, md_escape, notice, problem, show_chart
from ui.charts import bars, heatmap, unique_labels
from ui.i18n import t

GRID_STEP = 0.25                  # query positions of the kernel heatmap: 0, 0.25, ..., 5 (21 rows x n keys:
                                  # 840 cells at n = 40 redraw in half the time of the 41 rows of 0.125)
N_GRID = int(5 / GRID_STEP) + 1
LIMIT = 100.0                     # largest magnitude accepted in the library table
MAX_BOOKS = 12
MAX_TOKENS = 48
STAGES = {1: "① X → Q, K, V", 2: "② Q Kᵀ", 3: "③ ÷ √d_k", 4: "④ softmax", 5: "⑤ × V"}
DIMS = (2, 4, 8, 16, 32, 64)
CMP_DIMS = (2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)
CMP_D_MODEL = 32


kernel_lesson = cache_data(max_entries=64, max_bytes=8 * MB)(lab.kernel_lesson)
sentence_lesson = cache_data(max_entries=64, max_bytes=8 * MB)(lab.sentence_lesson)
similarity_lesson = cache_data(max_entries=64, max_bytes=16 * MB)(lab.similarity_lesson)


def draw_heatmap(matrix: np.ndarray, rows, cols, *, key: str, csv_name: str | None = None, selectable=True, **options):
    """A heatmap (a CSV download with ``csv_name``); a click picks its query row (``qkv_state.clicked_row``)."""
    spec = heatmap(matrix, list(rows), list(cols), selectable=selectable, **options)
    if csv_name:
        anatomy.show_matrix(spec, matrix, list(rows), list(cols), key=key, selectable=selectable, file_name=csv_name)
    else:
        show_chart(spec, key=key, select=selectable)


# --- tab 1: Nadaraya-Watson kernel regression ------------------------------------------------------------------

class KernelChoice(NamedTuple):
    """The kernel tab's controls and the regression they computed."""
    run: lab.KernelLesson
    bandwidth: float
    n_train: int
    row: int               # the query: its row of the heatmap (grid position)


def kernel_data_controls() -> tuple[float, int, float]:
    """The data and the bandwidth: one flex row (not four columns: fewer messages per rerun, the redraw budget)."""
    with st.container(horizontal=True):
        h = st.slider(t("qkv.k_bandwidth"), 0.05, 3.0, 0.4, 0.05, key="h", bind="query-params")
        n_train = st.slider(t("qkv.k_n_train"), 2, 100, 40, key="n", bind="query-params")
        noise = st.slider(t("qkv.k_noise"), 0.0, 1.5, 0.5, 0.05, key="noise", bind="query-params")
    return float(h), int(n_train), float(noise)


def kernel_query_controls(h: float, n_train: int, noise: float) -> KernelChoice:
    """The seed and the query in one row; the regression they and the data controls compute."""
    with st.container(horizontal=True):
        data_seed = controls.seed("kseed")
        d = kernel_lesson(n_train, noise, data_seed, h, N_GRID)
        clicked = qkv_state.clicked_row(("k_heat",))
        if clicked is not None:
            st.session_state["x"] = float(d.grid[min(clicked, N_GRID - 1)])
        xq = st.slider(t("qkv.k_query"), 0.0, 5.0, 2.5, GRID_STEP, key="x", bind="query-params")
    return KernelChoice(d, h, n_train, min(N_GRID - 1, max(0, int(round(float(xq) / GRID_STEP)))))


def kernel_evidence(k: KernelChoice) -> None:
    """The weights of every grid query, the fit with the chosen query's weights, what to notice."""
    d, row, h = k.run, k.row, k.bandwidth
    w_row = d.weights[row]
    q_labels = [f"{g:g}" for g in d.grid]
    k_labels = [f"{x:.2f}" for x in d.x]
    left, right = st.columns(2)
    top_w = float(d.weights.max())    # the colours stretch to it (a wide band has small weights); Vega finds it too
    with left:
        draw_heatmap(d.weights, q_labels, k_labels, key="k_heat", csv_name="kernel_weights.csv",
                     kind="weights", domain="data", outline_row=row, x_title=t("qkv.k_keys_axis"),
                     y_title=t("qkv.k_queries_axis"), value_title=t("common.weight"), title=t("qkv.k_heat_title"))
        st.caption(t("qkv.k_heat_caption", top=fmt.fixed(top_w, 3)))
    with right:
        labels = qkv_charts.KernelLabels(
            x="x", y="y", weight=t("qkv.k_weight_for", x=q_labels[row]), truth=t("qkv.k_truth"),
            fit=t("qkv.k_fit", h=fmt.fixed(h)), query=t("qkv.k_query_short"), prediction=t("qkv.k_prediction"),
            series=t("qkv.k_series"))
        show_chart(qkv_charts.kernel_fit(d.x, d.y, d.curve, d.truth, d.fit, query_x=float(d.grid[row]),
                                         query_weights=w_row, query_pred=float(d.pred[row]), labels=labels,
                                         height=480, weight_max=top_w), key="k_fit")
        st.caption(t("qkv.k_fit_caption"))
    top = int(np.argmax(w_row))
    truth_at = float(lab.true_function(torch.tensor([float(d.grid[row])]))[0])
    notice([
        t("qkv.k_notice_weights", x=q_labels[row], xi=k_labels[top], w=fmt.fixed(w_row[top], 3),
          neff=fmt.fixed(d.neighbours[row], 1), n=k.n_train),
        t("qkv.k_notice_pred", x=q_labels[row], pred=fmt.fixed(d.pred[row]), truth=fmt.fixed(truth_at),
          rmse=fmt.fixed(d.rmse, 3)),
        t("qkv.k_notice_rows", dev=f"{float(np.abs(d.weights.sum(axis=1) - 1).max()):.1e}", h=fmt.fixed(h)),
    ])


# --- tab 2: the library ----------------------------------------------------------------------------------------

def query_sliders() -> np.ndarray:
    st.markdown(f"**{t('qkv.l_query')}**")
    defaults = {"science": 2.0, "cooking": 2.0, "history": 0.0}
    return np.array([col.slider(t(f"qkv.axis_{axis}"), -3.0, 3.0, defaults[axis], 0.1,
                                key=f"q{axis[0]}", bind="query-params")
                     for col, axis in zip(st.columns(3), lab.KEY_AXES)])


def library_evidence(books: qkv_state.Books, query: np.ndarray, r: lab.LibraryResult) -> None:
    """Scores, weights, the key plane and the weighted mix of the values, then what to notice."""
    titles, keys, values = books
    scores, weights = r.scores.numpy(), r.weights.numpy()
    best = int(np.argmax(weights))
    labels = unique_labels(titles)
    value_names = [t(f"qkv.vaxis_{a}") for a in lab.VALUE_AXES]
    axis_names = [t(f"qkv.axis_{a}") for a in lab.KEY_AXES]
    words = qkv_charts.LibraryLabels(
        feature=t("qkv.l_feature"), contribution=t("qkv.l_contribution"), book=t("qkv.l_book"),
        weight=t("common.weight"), value=t("common.value"), total=t("qkv.l_total"), score=t("common.score"),
        query=t("qkv.l_query_short"), projection=t("qkv.l_projection"))

    left, right = st.columns([3, 2])
    with left:
        st.markdown(f"**{t('qkv.l_scores_title')}**")
        show_chart(qkv_charts.book_bars(scores, labels, value_title=t("common.score"), book_title=words.book),
                   key="l_scores")
        st.markdown(f"**{t('qkv.l_weights_title')}**")
        show_chart(qkv_charts.book_bars(weights, labels, value_title=t("common.weight"), book_title=words.book,
                                        domain=(0.0, 1.0)), key="l_weights")
    with right:
        st.markdown(f"**{t('qkv.l_plane_title')}**")
        planes = [(0, 1), (0, 2), (1, 2)]
        plane = st.selectbox(t("qkv.l_plane"), planes, key="plane", bind="query-params",
                             format_func=lambda p: f"{axis_names[p[0]]} × {axis_names[p[1]]}")
        a, b = plane if plane in planes else planes[0]
        show_chart(qkv_charts.library_plane(keys[:, [a, b]], query[[a, b]], labels, scores, weights, size=360,
                                            labels=words, x_title=axis_names[a], y_title=axis_names[b]),
                   key="l_plane", width="content")      # square
        other = ({0, 1, 2} - {a, b}).pop()
        st.caption(t("qkv.l_plane_caption", other=axis_names[other]))
    st.markdown(f"**{t('qkv.l_mix_title')}**")
    show_chart(qkv_charts.library_mix(r.contributions.numpy(), weights, values, labels, value_names, height=230,
                                      labels=words), key="l_mix")

    expr = " + ".join(f"{weights[i]:.2f}×{values[i, 0]:g}" for i in np.argsort(-weights)[:4]) + (
        " + …" if len(weights) > 4 else "")
    notice([
        t("qkv.l_notice_best", book=md_escape(titles[best]), w=fmt.fixed(weights[best]), s=fmt.fixed(scores[best]),
          qn=fmt.fixed(np.linalg.norm(query)), kn=fmt.fixed(np.linalg.norm(keys[best])),
          cos=fmt.fixed(r.cosines[best])),
        t("qkv.l_notice_mix", feature=value_names[0], expr=expr, total=fmt.fixed(float(r.output[0]))),
        t("qkv.l_notice_range", smin=fmt.fixed(scores.min()), smax=fmt.fixed(scores.max()),
          wmin=fmt.fixed(weights.min(), 3), wmax=fmt.fixed(weights.max()), wsum=fmt.fixed(weights.sum(), 4)),
    ])


# --- tab 3: a sentence, step by step ---------------------------------------------------------------------------

def sentence_controls(label_a: str, dims_a, value_a: int, key_a: str, label_b: str, dims_b, value_b: int, key_b: str):
    """The sentence, two dimension sliders and the seed in one row (tokens None after a message)."""
    c1, c2, c3, c4 = st.columns([4, 1, 1, 1])
    with c1:
        tokens = controls.sentence("text", max_tokens=MAX_TOKENS)
    a = c2.select_slider(t(label_a), dims_a, value=value_a, key=key_a, bind="query-params")
    b = c3.select_slider(t(label_b), dims_b, value=value_b, key=key_b, bind="query-params")
    with c4:
        seed = controls.seed("seed")
    return tokens, int(a), int(b), seed


def stage_charts(s: lab.StepThrough, stage: int, qi: int, labels: list[str], d_model: int, d_k: int) -> None:
    """Stage 1: the four matrices X, Q, K, V; later stages: the stage's matrix and the query's row."""
    n = len(labels)
    if stage == 1:
        for col, name, dims in zip(st.columns(2) + st.columns(2), "xqkv", (d_model, d_k, d_k, d_k)):
            with col:
                draw_heatmap(getattr(s, name).numpy(), labels, [str(j) for j in range(dims)], key=f"t_{name}",
                             csv_name=f"{name}.csv", kind="scores", selected_row=qi,
                             x_title=t("qkv.t_dim"), y_title=t("qkv.t_token"), value_title=name.upper(),
                             title=t(f"qkv.t_mat_{name}", n=n, d=dims))
        return
    matrix = {2: s.scores, 3: s.scaled, 4: s.weights, 5: s.output}[stage].numpy()
    cols_labels = labels if stage < 5 else [str(j) for j in range(d_k)]
    col_title = t("qkv.t_dim") if stage == 5 else t("common.key")
    left, right = st.columns([3, 2])
    with left:
        draw_heatmap(matrix, labels, cols_labels, key="t_heat", csv_name=f"stage{stage}.csv",
                     kind="weights" if stage == 4 else "scores", selected_row=qi, x_title=col_title,
                     y_title=t("common.query"), value_title=t(f"qkv.t_value{stage}"),
                     title=t(f"qkv.t_mat{stage}", n=n, d=d_k))
    with right:
        st.markdown(f"**{t('qkv.t_row_title', q=md_escape(labels[qi]))}**")
        show_chart(bars(matrix[qi], cols_labels, value_title=t(f"qkv.t_value{stage}"), label_title=col_title,
                        domain=(0.0, 1.0) if stage == 4 else None,
                        highlight=int(np.argmax(matrix[qi])) if stage < 5 else None, height=260), key="t_row")
        st.caption(row_caption(stage, matrix[qi], s, qi, labels))


def row_caption(stage: int, row: np.ndarray, s: lab.StepThrough, qi: int, labels: list[str]) -> str:
    if stage == 2:
        return t("qkv.t_row2", lo=fmt.fixed(row.min()), hi=fmt.fixed(row.max()))
    if stage == 3:
        return t("qkv.t_row3", lo=fmt.fixed(row.min()), hi=fmt.fixed(row.max()), sqrt=fmt.fixed(math.sqrt(s.d_k), 3))
    if stage == 4:
        return t("qkv.t_row4", sum=fmt.fixed(row.sum(), 4), top=md_escape(labels[int(np.argmax(row))]),
                 w=fmt.fixed(row.max(), 3))
    w = s.weights[qi].numpy()
    parts = " + ".join(f"{w[j]:.2f}·v({md_escape(labels[j])})" for j in np.argsort(-w)[:3])
    return t("qkv.t_row5", parts=parts)


def neuron_view(s: lab.StepThrough, qi: int, labels: list[str]) -> None:
    """One query and one key dimension by dimension: the products q_j k_j add up to the score."""
    st.subheader(t("qkv.t_neuron_title"))
    st.caption(t("qkv.t_neuron_caption"))
    kj = qkv_state.pick_token("kt", t("qkv.t_key"), labels, int(s.weights[qi].argmax()))
    prods, score = lab.neuron_view(s.q[qi], s.k[kj])          # the products q_j k_j and their sum, the score
    n1, n2 = st.columns([3, 2])
    with n1:    # q, k and their products, one column per dimension
        draw_heatmap(np.stack([s.q[qi].numpy(), s.k[kj].numpy(), prods.numpy()]),
                     [f"q ({labels[qi]})", f"k ({labels[kj]})", "q ⊙ k"],
                     [str(j) for j in range(s.d_k)], key="t_neuron", kind="scores", selectable=False,
                     show_numbers=s.d_k <= 16, x_title=t("qkv.t_dim"), y_title=" ", value_title=t("qkv.t_product"))
    with n2:
        show_chart(qkv_charts.products(prods.numpy(), height=170, dim_title=t("qkv.t_dim"),
                                       product_title=t("qkv.t_product")), key="t_products")
    st.markdown(t("qkv.t_neuron_sum", q=md_escape(labels[qi]), k=md_escape(labels[kj]), total=fmt.fixed(score, 3),
                  pos=fmt.fixed(prods[prods > 0].sum(), 3), neg=fmt.fixed(prods[prods < 0].sum(), 3),
                  sqrt=fmt.fixed(math.sqrt(s.d_k), 3), scaled=fmt.fixed(s.scaled[qi, kj], 3),
                  w=fmt.fixed(s.weights[qi, kj], 3)))


class TokenChoice(NamedTuple):
    """The sentence tab's controls and the step-through they computed."""
    run: lab.SentenceLesson
    labels: list[str]      # the tokens, made unique for the axes
    d_model: int
    stage: int             # 1..5, the keys of STAGES
    query: int             # the query token's position


def tokens_controls() -> TokenChoice | None:
    tokens, d_model, d_k, seed = sentence_controls("qkv.t_d_model", DIMS, 32, "dm", "qkv.t_d_k", DIMS, 8, "dk")
    if tokens is None:
        return None
    run = sentence_lesson(tuple(tokens), d_model, d_k, seed)
    labels = unique_labels(tokens)
    if len(tokens) == 1:
        problem("qkv.t_one_token")
    default_q = next((i for i, tok in enumerate(tokens) if tok.lower() in ("it", "它")), 0)
    stage = st.segmented_control(t("qkv.t_stage"), list(STAGES), default=1, format_func=STAGES.get,
                                 key="stage", bind="query-params", required=True) or 1
    clicked = qkv_state.clicked_row(("t_heat", "t_x", "t_q", "t_k", "t_v"))
    qi = qkv_state.pick_token("q", t("qkv.t_query"), labels, default_q, clicked)
    return TokenChoice(run, labels, d_model, int(stage), qi)


def tokens_evidence(c: TokenChoice) -> None:
    """The chosen stage's formula and matrices, the neuron view, what to notice."""
    s, labels, qi, n, d_k = c.run.steps, c.labels, c.query, len(c.labels), c.run.steps.d_k
    sqrt_dk = math.sqrt(d_k)
    st.latex(qkv_charts.stage_formula(c.stage, n, c.d_model, d_k))
    st.caption(t(f"qkv.t_stage{c.stage}_caption", dk=d_k, sqrt=fmt.fixed(sqrt_dk, 3), dm=c.d_model))
    stage_charts(s, c.stage, qi, labels, c.d_model, d_k)
    neuron_view(s, qi, labels)
    w_row = s.weights[qi].numpy()
    top = int(np.argmax(w_row))
    raw, scaled = (fmt.fixed(float(m.numpy().std()) if n > 1 else 0.0) for m in (s.scores, s.scaled))  # population
    notice([
        t("qkv.t_notice_row", q=md_escape(labels[qi]), sum=fmt.fixed(w_row.sum(), 4), k=md_escape(labels[top]),
          w=fmt.fixed(w_row[top], 3), n=n, uniform=fmt.fixed(1 / n, 3)),
        t("qkv.t_notice_scale", raw=raw, scaled=scaled, sqrt=fmt.fixed(sqrt_dk, 3), dk=d_k),
        t("qkv.t_notice_random"),
        t("qkv.t_notice_ref", err=f"{c.run.reference_error:.1e}"),
    ])


def normalisation_demo(c: TokenChoice) -> None:
    """The query's row of weights computed right, with √d_model, and softmax applied twice."""
    p, qi, labels, d_model, d_k = c.run.pitfalls, c.query, c.labels, c.d_model, c.run.steps.d_k
    rows = {t("qkv.p_correct", dk=d_k): p.correct[qi].numpy(), t("qkv.p_sqrt", dm=d_model): p.sqrt_d_model[qi].numpy(),
            t("qkv.p_twice"): p.softmax_twice[qi].numpy()}
    show_chart(qkv_charts.grouped_rows(rows, labels, key_title=t("common.key"), weight_title=t("common.weight"),
                                       series_title=t("qkv.p_series")), key="t_pitfall")
    (m0, m1, m2), (e0, e1, e2) = zip(*((fmt.fixed(np.max(r), 3), fmt.fixed(attention_entropy(torch.as_tensor(r)), 3))
                                       for r in rows.values()))
    st.markdown(t("qkv.p_numbers", q=md_escape(labels[qi]), m0=m0, e0=e0, m1=m1, e1=e1, m2=m2, e2=e2,
                  emax=fmt.fixed(math.log(len(labels)), 3)))
    if d_model == d_k:
        st.caption(t("qkv.p_same", d=d_k))


# --- tab 4: additive, dot, scaled dot --------------------------------------------------------------------------

def similarity_evidence(res: lab.SimilarityLesson, labels: list[str], d_k: int, hidden: int) -> None:
    """The three functions' weights side by side, their table, what to notice."""
    by, names = res.by_name, ("additive", "dot", "scaled")
    for col, name in zip(st.columns(3), names):      # one row of titles and formulas, so the heatmaps align
        with col:
            st.markdown(f"**{t(f'qkv.s_{name}')}**")
            st.latex(qkv_charts.SIMILARITY_LATEX[name])
    for col, name in zip(st.columns(3), names):
        with col:
            draw_heatmap(by[name].weights, labels, labels, key=f"s_{name}", legend=False, kind="weights",
                         selectable=False, show_numbers=False, x_title=t("common.key"), y_title=t("common.query"),
                         value_title=t("common.weight"))
            st.caption(t("qkv.s_caption", params=fmt.count(by[name].parameters), max=fmt.fixed(by[name].max_weight, 3),
                         ent=fmt.fixed(by[name].entropy, 2)))
    rows = {c: t(f"qkv.s_col_{c}") for c in ("param_formula", "params", "max", "entropy")}
    rows |= {c: t(f"qkv.s_row_{c}") for c in ("measure", "score_min", "score_max")}
    st.caption(t("qkv.s_colours"))
    # a static table, transposed (a column per function): it wraps on a phone instead of scrolling sideways
    st.table(qkv_charts.similarity_table([by[n] for n in names], [t(f"qkv.s_{n}") for n in names], rows)
             .set_index(rows["measure"]))
    notice([
        t("qkv.s_notice_saturate", dk=d_k, dot=fmt.fixed(by["dot"].max_weight, 3),
          scaled=fmt.fixed(by["scaled"].max_weight, 3), uniform=fmt.fixed(1 / len(labels), 3)),
        t("qkv.s_notice_bound", bound=fmt.fixed(res.additive_bound), add=fmt.fixed(by["additive"].max_weight, 3)),
        t("qkv.s_notice_params", params=fmt.count(by["additive"].parameters), h=hidden, dk=d_k,
          proj=fmt.count(2 * CMP_D_MODEL * d_k), dm=CMP_D_MODEL),
    ])


def additive_pitfall_demo(r: lab.AdditivePairing, n: int) -> None:
    st.markdown(t("qkv.p_add_now", n=n, theirs=r.theirs_shape, ours=r.ours_shape, diff=f"{r.diag_diff:.1e}",
                  missing=r.off_diag))
    if r.fewer_queries_error:
        st.markdown(t("qkv.p_add_error", m=n - 1, n=n, err=r.fewer_queries_error.replace("`", "'")))


# --- where attention comes from --------------------------------------------------------------------------------

def origin_section() -> None:
    with st.expander(t("qkv.origin_title"), expanded=True, icon=":material/visibility:"):
        st.markdown(i18n.lesson("qkv/origin"))
        exercise("qkv_ex_origin", t("qkv.origin_ex_q"), [t(f"qkv.origin_ex_a{i}") for i in range(3)], 1,
                 t("qkv.origin_ex_why"))

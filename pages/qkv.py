"""Query, Key, Value: attention as a weighted average chosen by similarity.

First tutorial, sections 3-5 and pitfall 3 of section 10; the second tutorial's first section.
Four steps, one tab each: kernel regression (attention pooling with no learning) -> the library
(keys, values, a query you steer) -> a sentence's Q, K, V step by step -> the three similarity
functions side by side.
"""
import math

import numpy as np
import pandas as pd
import streamlit as st
import torch

from attention_core.diagnostics import attention_entropy
from attention_core.functional import masked_softmax
from attention_core.labs import qkv as lab
from attention_core.labs import seed_bugs
from attention_core.modules import AdditiveAttention
from ui import qkv_charts, qkv_state
from ui.anatomy import (
    cached_spec,
    exercise,
    formula,
    header,
    intuition,
    md_escape,
    notice,
    pitfall,
    problem,
    show_chart,
    show_code,
    show_matrix,
)
from ui.cache import MB, cache_data
from ui.charts import bars, heatmap, heatmap_spec, unique_labels
from ui.controls import seed, sentence
from ui.i18n import LANGS, catalog, current_lang, lesson, t

NS = "qkv"
TABS = ("tab_kernel", "tab_library", "tab_tokens", "tab_similarity")
GRID_STEP = 0.125                 # query positions of the kernel heatmap: 0, 0.125, ..., 5
N_GRID = int(5 / GRID_STEP) + 1
LIMIT = 100.0                     # largest magnitude accepted in the library table
MAX_BOOKS = 12
MAX_TOKENS = 48
STAGES = {1: "① X → Q, K, V", 2: "② Q Kᵀ", 3: "③ ÷ √d_k", 4: "④ softmax", 5: "⑤ × V"}
DIMS = (2, 4, 8, 16, 32, 64)
CMP_DIMS = (2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)
CMP_D_MODEL = 32


# ---------------------------------------------------------------------------------------------
# cached computations (plain parameters in, numpy arrays out)
# ---------------------------------------------------------------------------------------------

@cache_data(max_entries=64, max_bytes=8 * MB)
def kernel_fit(n_train: int, noise: float, seed_: int, h: float) -> dict:
    x, y = lab.kernel_regression_data(n_train, noise, seed_)
    grid, curve = lab.query_grid(N_GRID), lab.query_grid(201)
    pred, w = lab.nadaraya_watson(grid, x, y, h)
    fit, _ = lab.nadaraya_watson(curve, x, y, h)
    rmse = float(((fit - lab.true_function(curve)) ** 2).mean().sqrt())
    return {"x": x.numpy(), "y": y.numpy(), "grid": grid.numpy(), "w": w.numpy(), "pred": pred.numpy(),
            "curve": curve.numpy(), "fit": fit.numpy(), "truth": lab.true_function(curve).numpy(),
            "neff": lab.effective_neighbours(w).numpy(), "rmse": rmse}


@cache_data(max_entries=64, max_bytes=8 * MB)
def step_through(tokens: tuple[str, ...], d_model: int, d_k: int, seed_: int) -> dict:
    s = lab.qkv_step_through(tokens, d_model, d_k, seed=seed_)
    p = lab.normalisation_pitfalls(s)
    names = ("x", "q", "k", "v", "scores", "scaled", "weights", "output")
    out = {name: getattr(s, name).numpy() for name in names}
    out.update(bug_sqrt=p.sqrt_d_model.numpy(), bug_twice=p.softmax_twice.numpy(),
               ref_err=lab.check_against_reference(s))
    return out


@cache_data(max_entries=64, max_bytes=16 * MB)
def similarities(tokens: tuple[str, ...], d_k: int, hidden: int, seed_: int) -> dict:
    s = lab.qkv_step_through(tokens, CMP_D_MODEL, d_k, seed=seed_)
    res = lab.compare_similarities(s.q, s.k, hidden, seed_)
    bound = lab.additive_score_bound(hidden, seed_, d_k, d_k)
    return {name: {"scores": r.scores.detach().numpy(), "weights": r.weights.detach().numpy(),
                   "params": r.parameters,
                   "max": float(r.weights.max(-1).values.mean()),
                   "entropy": float(attention_entropy(r.weights.detach()).mean())}
            for name, r in res.items()} | {"bound": bound}


# ---------------------------------------------------------------------------------------------
# small helpers of this page
# ---------------------------------------------------------------------------------------------

def keep_tab_across_languages(key: str) -> list[str]:
    """Tab labels are the URL value; keep the open tab when the language changes."""
    labels = [t(f"{NS}.{name}") for name in TABS]
    current = st.session_state.get(key) or st.query_params.get(key)
    if current is not None and current not in labels:
        for lang in LANGS:
            other = [str(catalog(lang).get(f"{NS}.{name}")) for name in TABS]
            if current in other:
                st.session_state[key] = labels[other.index(current)]
                break
    return labels


def clicked_row(chart_keys: tuple[str, ...]) -> int | None:
    """The query row just clicked on one of these heatmaps (None if no new click since last run)."""
    for chart_key in chart_keys:
        try:
            points = st.session_state[chart_key]["selection"]["row"] or []
        except (KeyError, TypeError, AttributeError):
            continue
        pos = next((int(p["query_pos"]) for p in points if isinstance(p, dict) and "query_pos" in p), None)
        seen = f"_{chart_key}_seen"
        if pos is not None and st.session_state.get(seen) != pos:
            st.session_state[seen] = pos
            return pos
    return None


def pick_token(key: str, label: str, labels: list[str], default: int, clicked: int | None = None) -> int:
    """A select box over the tokens (the URL keeps the token's label); a heatmap click moves it."""
    if clicked is not None and 0 <= clicked < len(labels):
        st.session_state[key] = labels[clicked]
    elif st.session_state.get(key) is not None and st.session_state[key] not in labels:
        st.session_state[key] = labels[default]
    # a value set through st.session_state must not meet a default as well (Streamlit warns about both)
    start = {} if st.session_state.get(key) in labels else {"index": default}
    chosen = st.selectbox(label, labels, key=key, bind="query-params", **start)
    return labels.index(chosen) if chosen in labels else default


def sized_heatmap(matrix: np.ndarray, rows, cols, *, width: int, cell: int = 26, extra: int = 120,
                  outline: int | None = None, legend: bool = True, **kwargs):
    """ui.charts.heatmap sized for its column (a band-scale chart does not stretch by itself, so the
    plotting width is set and every row gets room for its label), optionally with a row outlined."""
    if len(rows) > 16:                      # long sentences: thinner rows, the page stays scrollable
        cell = max(12, cell * 16 // len(rows))
    size = dict(width=width, height=max(150, cell * len(rows) + extra), legend=legend, fit_x=False)  # own width
    if outline is None:
        return heatmap_spec(matrix, list(rows), list(cols), **size, **kwargs)
    return qkv_charts.outline_row(heatmap(matrix, list(rows), list(cols), **size, **kwargs), list(rows), outline)


def show_heatmap(matrix: np.ndarray, rows, cols, *, key: str, inputs: tuple, width: int,
                 csv_name: str | None = None, **kwargs) -> None:
    """A sized heatmap drawn by ui.anatomy (show_matrix when it has a CSV; click a cell to pick its query
    row). ``inputs``: the plain values the matrix is computed from (the spec is cached on them). The clicked
    row is read back by ``clicked_row`` before the controls are drawn."""
    cache = (*inputs, tuple(rows), tuple(cols), width, *sorted(kwargs.items()))

    def build():
        return sized_heatmap(np.asarray(matrix), rows, cols, width=width, **kwargs)

    selectable = kwargs.get("selectable", True)
    if csv_name:
        show_matrix(cached_spec((key, current_lang(), *cache), build), np.asarray(matrix), list(rows), list(cols),
                    key=key, selectable=selectable, file_name=csv_name)
    else:
        show_chart(build, key=key, select=selectable, cache=cache)


def fmt(x: float, digits: int = 2) -> str:
    return f"{x:.{digits}f}"


# ---------------------------------------------------------------------------------------------
# tab 1: Nadaraya-Watson kernel regression
# ---------------------------------------------------------------------------------------------

def kernel_tab() -> None:
    st.markdown(lesson("qkv/kernel"))
    formula(r"f(x) = \sum_{i=1}^{n} \underbrace{\operatorname{softmax}_i\!"
            r"\Big(-\frac{(x - x_i)^2}{2h^2}\Big)}_{\alpha(x,\,x_i)}\; y_i", t("qkv.k_formula_caption"))
    c1, c2, c3, c4 = st.columns(4)
    h = c1.slider(t("qkv.k_bandwidth"), 0.05, 3.0, 0.4, 0.05, key="h", bind="query-params")
    n_train = c2.slider(t("qkv.k_n_train"), 2, 100, 40, key="n", bind="query-params")
    noise = c3.slider(t("qkv.k_noise"), 0.0, 1.5, 0.5, 0.05, key="noise", bind="query-params")
    with c4:
        data_seed = seed("kseed")
    d = kernel_fit(int(n_train), float(noise), data_seed, float(h))
    clicked = clicked_row(("k_heat",))
    if clicked is not None:
        st.session_state["x"] = float(d["grid"][min(clicked, N_GRID - 1)])
    xq = st.slider(t("qkv.k_query"), 0.0, 5.0, 2.5, GRID_STEP, key="x", bind="query-params")
    row = min(N_GRID - 1, max(0, int(round(float(xq) / GRID_STEP))))
    w_row = d["w"][row]
    q_labels = [f"{g:g}" for g in d["grid"]]
    k_labels = [f"{x:.2f}" for x in d["x"]]

    left, right = st.columns(2)
    with left:
        top_w = max(0.05, float(d["w"].max()))  # stretch the colours: a wide band has small weights
        heat = dict(width=380, cell=13, kind="weights", x_title=t("qkv.k_keys_axis"),
                    y_title=t("qkv.k_queries_axis"), value_title=t("common.weight"), title=t("qkv.k_heat_title"))
        # built once per shape and language; a new h, n, noise, seed or query only swaps data and domain
        skeleton = cached_spec(("k_heat", d["w"].shape, *sorted(heat.items())),
                            lambda: sized_heatmap(d["w"], q_labels, k_labels, outline=row, **heat))
        spec = qkv_charts.weights_heatmap_like(skeleton, d["w"], q_labels, k_labels, outline=row,
                                               domain=(0.0, top_w))
        show_matrix(spec, d["w"], q_labels, k_labels, key="k_heat", file_name="kernel_weights.csv")
        st.caption(t("qkv.k_heat_caption", top=fmt(top_w, 3)))
    with right:
        fit_labels = {"x": "x", "y": "y", "weight": t("qkv.k_weight_for", x=q_labels[row]),
                      "truth": t("qkv.k_truth"), "fit": t("qkv.k_fit", h=fmt(h)),
                      "query": t("qkv.k_query_short"), "prediction": t("qkv.k_prediction"),
                      "series": t("qkv.k_series")}
        fit_data = dict(query_x=float(d["grid"][row]), query_weights=w_row, query_pred=float(d["pred"][row]),
                        labels=fit_labels, weight_max=top_w)
        curves = (d["x"], d["y"], d["curve"], d["truth"], d["fit"])
        skeleton = cached_spec(("k_fit", *sorted((k, v) for k, v in fit_labels.items() if k != "fit")),
                            lambda: qkv_charts.kernel_fit(*curves, height=480, **fit_data))
        show_chart(qkv_charts.kernel_fit_like(skeleton, *curves, **fit_data), key="k_fit")
        st.caption(t("qkv.k_fit_caption"))

    top = int(np.argmax(w_row))
    truth_at = float(lab.true_function(torch.tensor([float(d["grid"][row])]))[0])
    notice([
        t("qkv.k_notice_weights", x=q_labels[row], xi=k_labels[top], w=fmt(w_row[top], 3),
          neff=fmt(d["neff"][row], 1), n=n_train),
        t("qkv.k_notice_pred", x=q_labels[row], pred=fmt(d["pred"][row]), truth=fmt(truth_at),
          rmse=fmt(d["rmse"], 3)),
        t("qkv.k_notice_rows", dev=f"{float(np.abs(d['w'].sum(axis=1) - 1).max()):.1e}", h=fmt(h)),
    ])
    exercise("qkv_ex_kernel", t("qkv.k_ex_q"), [t("qkv.k_ex_a0"), t("qkv.k_ex_a1"), t("qkv.k_ex_a2")], 1,
             t("qkv.k_ex_why", mean=fmt(float(np.mean(d["y"])))))
    show_code(lab.nadaraya_watson, lab.gaussian_kernel_scores, masked_softmax)


# ---------------------------------------------------------------------------------------------
# tab 2: the library
# ---------------------------------------------------------------------------------------------

def default_books() -> pd.DataFrame:
    keys, values = lab.library_arrays()
    frame = pd.DataFrame({"title": [t(f"qkv.book_{b.id}") for b in lab.LIBRARY]})
    for j, axis in enumerate(lab.KEY_AXES):
        frame[axis] = keys[:, j]
    for j, axis in enumerate(lab.VALUE_AXES):
        frame[axis] = values[:, j]
    return frame


def reset_books() -> None:
    st.session_state["_qkv_books_v"] = st.session_state.get("_qkv_books_v", 0) + 1


def library_tab() -> None:
    st.markdown(lesson("qkv/library"))
    formula(r"s_i = q \cdot k_i, \qquad \alpha_i = \operatorname{softmax}_i(s), \qquad "
            r"o = \sum_i \alpha_i\, v_i", t("qkv.l_formula_caption"))
    cols = {"title": st.column_config.TextColumn(t("qkv.l_col_title"), max_chars=60, width="medium")}
    for axis in lab.KEY_AXES:
        cols[axis] = st.column_config.NumberColumn(t("qkv.l_col_key", axis=t(f"qkv.axis_{axis}")),
                                                   min_value=-LIMIT, max_value=LIMIT, step=0.1, format="%.2f",
                                                   width="small")
    for axis in lab.VALUE_AXES:
        cols[axis] = st.column_config.NumberColumn(t("qkv.l_col_value", axis=t(f"qkv.vaxis_{axis}")),
                                                   min_value=-LIMIT, max_value=LIMIT, step=0.5, format="%.1f",
                                                   width="small")
    version = st.session_state.get("_qkv_books_v", 0)
    edited = st.data_editor(default_books(), key="books" if version == 0 else f"books{version}",
                            column_config=cols, num_rows="dynamic", hide_index=True, width="stretch")
    st.button(t("qkv.l_reset"), on_click=reset_books, key="books_reset", icon=":material/restart_alt:",
              type="tertiary")
    st.markdown(f"**{t('qkv.l_query')}**")
    defaults = {"science": 2.0, "cooking": 2.0, "history": 0.0}
    query = np.array([col.slider(t(f"qkv.axis_{axis}"), -3.0, 3.0, defaults[axis], 0.1,
                                 key=f"q{axis[0]}", bind="query-params")
                      for col, axis in zip(st.columns(3), lab.KEY_AXES)])

    if len(edited) == 0:
        problem("qkv.err_no_books")
        return
    if len(edited) > MAX_BOOKS:
        problem("qkv.err_many_books", n=len(edited), max=MAX_BOOKS)
        edited = edited.iloc[:MAX_BOOKS]
    titles = [str(x).strip() if isinstance(x, str) and x.strip() else t("qkv.l_untitled", i=i + 1)
              for i, x in enumerate(edited["title"].tolist())]
    columns = list(lab.KEY_AXES) + list(lab.VALUE_AXES)
    numbers, bad = qkv_state.parse_number_table(edited[columns].astype(object).values.tolist(), LIMIT)
    if bad:
        names = {a: t(f"qkv.axis_{a}") for a in lab.KEY_AXES}
        names |= {a: t(f"qkv.vaxis_{a}") for a in lab.VALUE_AXES}
        cells = ", ".join(f"{md_escape(titles[i])} · {names[columns[j]]}" for i, j in bad[:8])
        problem("qkv.err_cells", n=len(bad), cells=cells + (" …" if len(bad) > 8 else ""),
                limit=f"{LIMIT:g}")
        return
    keys, values = numbers[:, :len(lab.KEY_AXES)], numbers[:, len(lab.KEY_AXES):]
    r = lab.library_attention(query, keys, values)
    scores, weights = r.scores.numpy(), r.weights.numpy()
    best = int(np.argmax(weights))
    labels = unique_labels(titles)
    value_names = [t(f"qkv.vaxis_{a}") for a in lab.VALUE_AXES]
    inputs = (tuple(titles), tuple(map(tuple, numbers.tolist())), tuple(query.tolist()))
    axis_names = [t(f"qkv.axis_{a}") for a in lab.KEY_AXES]

    left, right = st.columns([3, 2])
    with left:
        st.markdown(f"**{t('qkv.l_scores_title')}**")
        show_chart(lambda: qkv_charts.book_bars(scores, labels, value_title=t("common.score"),
                                                book_title=t("qkv.l_book")), key="l_scores", cache=inputs)
        st.markdown(f"**{t('qkv.l_weights_title')}**")
        show_chart(lambda: qkv_charts.book_bars(weights, labels, value_title=t("common.weight"),
                                                book_title=t("qkv.l_book"), domain=(0.0, 1.0)),
                   key="l_weights", cache=inputs)
    with right:
        st.markdown(f"**{t('qkv.l_plane_title')}**")
        planes = [(0, 1), (0, 2), (1, 2)]
        plane = st.selectbox(t("qkv.l_plane"), planes, key="plane", bind="query-params",
                             format_func=lambda p: f"{axis_names[p[0]]} × {axis_names[p[1]]}")
        a, b = plane if plane in planes else planes[0]
        plane_spec = cached_spec(("l_plane", *inputs, a, b), lambda: qkv_charts.library_plane(
            keys[:, [a, b]], query[[a, b]], labels, scores, weights, size=360,
            labels={"x": axis_names[a], "y": axis_names[b], "book": t("qkv.l_book"), "score": t("common.score"),
                    "weight": t("common.weight"), "query": t("qkv.l_query_short"),
                    "projection": t("qkv.l_projection")}))
        st.vega_lite_chart(dict(plane_spec), width="content", key="l_plane")   # square: show_chart only stretches
        other = ({0, 1, 2} - {a, b}).pop()
        st.caption(t("qkv.l_plane_caption", other=axis_names[other]))
    st.markdown(f"**{t('qkv.l_mix_title')}**")
    show_chart(lambda: qkv_charts.library_mix(
        r.contributions.numpy(), weights, values, labels, value_names, height=230,
        labels={"feature": t("qkv.l_feature"), "contribution": t("qkv.l_contribution"),
                "book": t("qkv.l_book"), "weight": t("common.weight"), "value": t("common.value"),
                "total": t("qkv.l_total")}), key="l_mix", cache=inputs)

    qn = float(np.linalg.norm(query))
    kn = float(np.linalg.norm(keys[best]))
    first = value_names[0]
    terms = [f"{weights[i]:.2f}×{values[i, 0]:g}" for i in np.argsort(-weights)[:4]]
    expr = " + ".join(terms) + (" + …" if len(weights) > 4 else "")
    notice([
        t("qkv.l_notice_best", book=md_escape(titles[best]), w=fmt(weights[best]), s=fmt(scores[best]),
          qn=fmt(qn), kn=fmt(kn), cos=fmt(float(r.cosines[best]))),
        t("qkv.l_notice_mix", feature=first, expr=expr, total=fmt(float(r.output[0]))),
        t("qkv.l_notice_range", smin=fmt(scores.min()), smax=fmt(scores.max()), wmin=fmt(weights.min(), 3),
          wmax=fmt(weights.max()), wsum=f"{weights.sum():.4f}"),
    ])
    exercise("qkv_ex_library", t("qkv.l_ex_q", book=md_escape(titles[best])),
             [t("qkv.l_ex_a0"), t("qkv.l_ex_a1"), t("qkv.l_ex_a2")], 2, t("qkv.l_ex_why"))
    show_code(lab.library_attention, qkv_state.parse_number_table)


# ---------------------------------------------------------------------------------------------
# tab 3: a sentence, step by step
# ---------------------------------------------------------------------------------------------

def tokens_tab() -> None:
    st.markdown(lesson("qkv/tokens"))
    c1, c2, c3, c4 = st.columns([4, 1, 1, 1])
    with c1:
        tokens = sentence("text", max_tokens=MAX_TOKENS)
    d_model = c2.select_slider(t("qkv.t_d_model"), DIMS, value=32, key="dm", bind="query-params")
    d_k = c3.select_slider(t("qkv.t_d_k"), DIMS, value=8, key="dk", bind="query-params")
    with c4:
        seed_ = seed("seed")
    if tokens is None:
        return
    s = step_through(tuple(tokens), int(d_model), int(d_k), seed_)
    inputs = (tuple(tokens), int(d_model), int(d_k), seed_)
    n = len(tokens)
    labels = unique_labels(tokens)
    if n == 1:
        problem("qkv.t_one_token")
    default_q = next((i for i, tok in enumerate(tokens) if tok.lower() in ("it", "它")), 0)
    stage = st.segmented_control(t("qkv.t_stage"), list(STAGES), default=1, format_func=STAGES.get,
                                 key="stage", bind="query-params", required=True) or 1
    heat_keys = ("t_heat", "t_x", "t_q", "t_k", "t_v")
    qi = pick_token("q", t("qkv.t_query"), labels, default_q, clicked_row(heat_keys))

    sqrt_dk = math.sqrt(d_k)
    st.latex(STAGE_LATEX[stage].replace("%N", str(n)).replace("%D", str(d_model)).replace("%K", str(d_k)))
    st.caption(t(f"qkv.t_stage{stage}_caption", dk=d_k, sqrt=fmt(sqrt_dk, 3), dm=d_model))
    if stage == 1:
        grid = st.columns(2) + st.columns(2)
        mats = (("x", "t_x", d_model), ("q", "t_q", d_k), ("k", "t_k", d_k), ("v", "t_v", d_k))
        for col, (name, key, dims) in zip(grid, mats):
            with col:
                dim_labels = [str(j) for j in range(dims)]
                show_heatmap(s[name], labels, dim_labels, key=key, inputs=inputs, csv_name=f"{name}.csv", width=340,
                             kind="scores", selected_row=qi, x_title=t("qkv.t_dim"), y_title=t("qkv.t_token"),
                             value_title=name.upper(), title=t(f"qkv.t_mat_{name}", n=n, d=dims))
    else:
        matrix = {2: s["scores"], 3: s["scaled"], 4: s["weights"], 5: s["output"]}[stage]
        cols_labels = labels if stage < 5 else [str(j) for j in range(d_k)]
        left, right = st.columns([3, 2])
        with left:
            show_heatmap(matrix, labels, cols_labels, key="t_heat", inputs=(*inputs, stage),
                         csv_name=f"stage{stage}.csv", width=420,
                         kind="weights" if stage == 4 else "scores", selected_row=qi,
                         x_title=t("qkv.t_dim") if stage == 5 else t("common.key"), y_title=t("common.query"),
                         value_title=t(f"qkv.t_value{stage}"), title=t(f"qkv.t_mat{stage}", n=n, d=d_k))
        with right:
            st.markdown(f"**{t('qkv.t_row_title', q=md_escape(labels[qi]))}**")
            show_chart(lambda: bars(matrix[qi], cols_labels, value_title=t(f"qkv.t_value{stage}"),
                                    label_title=t("qkv.t_dim") if stage == 5 else t("common.key"),
                                    domain=(0.0, 1.0) if stage == 4 else None,
                                    highlight=int(np.argmax(matrix[qi])) if stage < 5 else None, height=260),
                       key="t_row", cache=(*inputs, stage, qi))
            st.caption(row_caption(stage, s, qi, labels, sqrt_dk))

    st.subheader(t("qkv.t_neuron_title"))
    st.caption(t("qkv.t_neuron_caption"))
    default_k = int(np.argmax(s["weights"][qi]))
    kj = pick_token("kt", t("qkv.t_key"), labels, default_k)
    prods = s["q"][qi] * s["k"][kj]
    score = float(s["scores"][qi, kj])
    n1, n2 = st.columns([3, 2])
    with n1:
        neuron = np.stack([s["q"][qi], s["k"][kj], prods])
        rows = [f"q ({labels[qi]})", f"k ({labels[kj]})", "q ⊙ k"]
        dim_labels = [str(j) for j in range(d_k)]
        show_heatmap(neuron, rows, dim_labels, key="t_neuron", inputs=(*inputs, qi, kj), width=420, cell=34,
                     extra=90, kind="scores",
                     selectable=False, show_numbers=d_k <= 16, x_title=t("qkv.t_dim"), y_title=" ",
                     value_title=t("qkv.t_product"))
    with n2:
        show_chart(lambda: qkv_charts.products(prods, height=170, labels={"dim": t("qkv.t_dim"),
                                                                          "product": t("qkv.t_product")}),
                   key="t_products", cache=(*inputs, qi, kj))
    st.markdown(t("qkv.t_neuron_sum", q=md_escape(labels[qi]), k=md_escape(labels[kj]), total=fmt(score, 3),
                  pos=fmt(float(prods[prods > 0].sum()), 3), neg=fmt(float(prods[prods < 0].sum()), 3),
                  sqrt=fmt(sqrt_dk, 3), scaled=fmt(float(s["scaled"][qi, kj]), 3),
                  w=fmt(float(s["weights"][qi, kj]), 3)))

    w_row = s["weights"][qi]
    top = int(np.argmax(w_row))
    notice([
        t("qkv.t_notice_row", q=md_escape(labels[qi]), sum=f"{w_row.sum():.4f}", k=md_escape(labels[top]),
          w=fmt(w_row[top], 3), n=n, uniform=fmt(1 / n, 3)),
        t("qkv.t_notice_scale", raw=fmt(float(s["scores"].std()) if n > 1 else 0.0),
          scaled=fmt(float(s["scaled"].std()) if n > 1 else 0.0), sqrt=fmt(sqrt_dk, 3), dk=d_k),
        t("qkv.t_notice_random"),
        t("qkv.t_notice_ref", err=f"{s['ref_err']:.1e}"),
    ])
    exercise("qkv_ex_tokens", t("qkv.t_ex_q"), [t("qkv.t_ex_a0"), t("qkv.t_ex_a1"), t("qkv.t_ex_a2")], 0,
             t("qkv.t_ex_why"))
    pitfall(t("qkv.p_title"), t("qkv.p_body"), t("qkv.p_code"),
            demo=lambda: pitfall_demo(s, qi, labels, d_model, d_k, inputs))
    show_code(lab.qkv_step_through, lab.neuron_view, lab.normalisation_pitfalls)


STAGE_LATEX = {
    1: r"X \in \mathbb{R}^{%N \times %D},\quad Q = X W_Q,\; K = X W_K,\; V = X W_V "
       r"\in \mathbb{R}^{%N \times %K}",
    2: r"S = Q K^\top \in \mathbb{R}^{%N \times %N}, \qquad S_{ij} = q_i \cdot k_j "
       r"= \sum_{m=1}^{%K} q_{im} k_{jm}",
    3: r"S' = \frac{Q K^\top}{\sqrt{d_k}} = \frac{S}{\sqrt{%K}}",
    4: r"A = \operatorname{softmax}(S'), \qquad A_{ij} = \frac{e^{S'_{ij}}}{\sum_{l} e^{S'_{il}}}, \qquad "
       r"\sum_j A_{ij} = 1",
    5: r"O = A V \in \mathbb{R}^{%N \times %K}, \qquad o_i = \sum_j A_{ij}\, v_j",
}


def row_caption(stage: int, s: dict, qi: int, labels: list[str], sqrt_dk: float) -> str:
    row = {2: s["scores"], 3: s["scaled"], 4: s["weights"], 5: s["output"]}[stage][qi]
    if stage == 2:
        return t("qkv.t_row2", lo=fmt(row.min()), hi=fmt(row.max()))
    if stage == 3:
        return t("qkv.t_row3", lo=fmt(row.min()), hi=fmt(row.max()), sqrt=fmt(sqrt_dk, 3))
    if stage == 4:
        return t("qkv.t_row4", sum=f"{row.sum():.4f}", top=md_escape(labels[int(np.argmax(row))]),
                 w=fmt(row.max(), 3))
    w = s["weights"][qi]
    top = np.argsort(-w)[:3]
    parts = " + ".join(f"{w[j]:.2f}·v({md_escape(labels[j])})" for j in top)
    return t("qkv.t_row5", parts=parts)


def pitfall_demo(s: dict, qi: int, labels: list[str], d_model: int, d_k: int, inputs: tuple) -> None:
    rows = {t("qkv.p_correct", dk=d_k): s["weights"][qi], t("qkv.p_sqrt", dm=d_model): s["bug_sqrt"][qi],
            t("qkv.p_twice"): s["bug_twice"][qi]}
    show_chart(lambda: qkv_charts.grouped_rows(rows, labels, labels={"key": t("common.key"),
                                                                     "weight": t("common.weight"),
                                                                     "series": t("qkv.p_series")}),
               key="t_pitfall", cache=(*inputs, qi))
    (m0, m1, m2), (e0, e1, e2) = zip(*((fmt(float(np.max(r)), 3),
                                        fmt(float(attention_entropy(torch.as_tensor(r))), 3))
                                       for r in rows.values()))
    st.markdown(t("qkv.p_numbers", q=md_escape(labels[qi]), m0=m0, e0=e0, m1=m1, e1=e1, m2=m2, e2=e2,
                  emax=fmt(math.log(len(labels)), 3)))
    if d_model == d_k:
        st.caption(t("qkv.p_same", d=d_k))


# ---------------------------------------------------------------------------------------------
# tab 4: additive, dot, scaled dot
# ---------------------------------------------------------------------------------------------

SIM_LATEX = {
    "additive": r"a(q, k) = v^\top \tanh(W_q q + W_k k)",
    "dot": r"a(q, k) = q \cdot k",
    "scaled": r"a(q, k) = \frac{q \cdot k}{\sqrt{d_k}}",
}


def similarity_tab() -> None:
    st.markdown(lesson("qkv/similarity"))
    c1, c2, c3, c4 = st.columns([4, 1, 1, 1])
    with c1:
        tokens = sentence("text", max_tokens=MAX_TOKENS)
    d_k = c2.select_slider(t("qkv.s_d_k"), CMP_DIMS, value=64, key="cdk", bind="query-params")
    hidden = c3.select_slider(t("qkv.s_hidden"), DIMS, value=16, key="hid", bind="query-params")
    with c4:
        seed_ = seed("seed")
    if tokens is None:
        return
    if len(tokens) == 1:
        problem("qkv.t_one_token")
    res = similarities(tuple(tokens), int(d_k), int(hidden), seed_)
    labels = unique_labels(tokens)
    names = ("additive", "dot", "scaled")
    for col, name in zip(st.columns(3), names):      # one row of titles and formulas, so the heatmaps align
        with col:
            st.markdown(f"**{t(f'qkv.s_{name}')}**")
            st.latex(SIM_LATEX[name])
    for col, name in zip(st.columns(3), names):
        r = res[name]
        with col:
            show_heatmap(r["weights"], labels, labels, key=f"s_{name}", inputs=(tuple(tokens), d_k, hidden, seed_),
                         width=260, cell=22, legend=False,
                         kind="weights", selectable=False, show_numbers=False, x_title=t("common.key"),
                         y_title=t("common.query"), value_title=t("common.weight"))
            st.caption(t("qkv.s_caption", params=f"{r['params']:,}", max=fmt(r["max"], 3),
                         ent=fmt(r["entropy"], 2)))
    table = pd.DataFrame({
        t("qkv.s_col_function"): [t(f"qkv.s_{n}") for n in names],
        t("qkv.s_col_param_formula"): ["h·(d_q + d_k + 1)", "0", "0"],
        t("qkv.s_col_params"): [res[n]["params"] for n in names],
        t("qkv.s_col_max"): [round(res[n]["max"], 4) for n in names],
        t("qkv.s_col_entropy"): [round(res[n]["entropy"], 4) for n in names],
        t("qkv.s_col_range"): [f"{res[n]['scores'].min():.2f} … {res[n]['scores'].max():.2f}"
                               for n in names],
    })
    st.caption(t("qkv.s_colours"))
    st.dataframe(table, hide_index=True, width="stretch")
    notice([
        t("qkv.s_notice_saturate", dk=d_k, dot=fmt(res["dot"]["max"], 3), scaled=fmt(res["scaled"]["max"], 3),
          uniform=fmt(1 / len(tokens), 3)),
        t("qkv.s_notice_bound", bound=fmt(res["bound"], 2), add=fmt(res["additive"]["max"], 3)),
        t("qkv.s_notice_params", params=f"{res['additive']['params']:,}", h=hidden, dk=d_k,
          proj=f"{2 * CMP_D_MODEL * d_k:,}", dm=CMP_D_MODEL),
    ])
    exercise("qkv_ex_similarity", t("qkv.s_ex_q"), [t("qkv.s_ex_a0"), t("qkv.s_ex_a1"), t("qkv.s_ex_a2")], 0,
             t("qkv.s_ex_why"))
    pitfall(t("qkv.p_add_title"), t("qkv.p_add_body"), t("qkv.p_add_code"),
            demo=lambda: additive_pitfall_demo(tuple(tokens), int(d_k), int(hidden), seed_))
    show_code(lab.compare_similarities, AdditiveAttention.scores, seed_bugs.tutorial_additive_scores,
              seed_bugs.additive_pairing_demo)


@cache_data(max_entries=64, max_bytes=2 * MB)
def additive_pairing(tokens: tuple[str, ...], d_k: int, hidden: int, seed_: int) -> dict:
    s = lab.qkv_step_through(tokens, CMP_D_MODEL, d_k, seed=seed_)
    return seed_bugs.additive_pairing_demo(lab.make_additive(d_k, d_k, hidden, seed_), s.q[None], s.k[None])


def additive_pitfall_demo(tokens: tuple[str, ...], d_k: int, hidden: int, seed_: int) -> None:
    r = additive_pairing(tokens, d_k, hidden, seed_)
    n = len(tokens)
    st.markdown(t("qkv.p_add_now", n=n, theirs=r["theirs_shape"], ours=r["ours_shape"],
                  diff=f"{r['diag_diff']:.1e}", missing=r["off_diag"]))
    if r["fewer_queries_error"]:
        st.markdown(t("qkv.p_add_error", m=n - 1, n=n, err=r["fewer_queries_error"].replace("`", "'")))


# ---------------------------------------------------------------------------------------------
# the page
# ---------------------------------------------------------------------------------------------

header(NS)
intuition(NS)
with st.expander(t("qkv.origin_title"), expanded=True, icon=":material/visibility:"):
    st.markdown(lesson("qkv/origin"))
    exercise("qkv_ex_origin", t("qkv.origin_ex_q"), [t(f"qkv.origin_ex_a{i}") for i in range(3)], 1,
             t("qkv.origin_ex_why"))
formula(r"\operatorname{Attention}\big(q, (k_1, v_1), \dots, (k_n, v_n)\big) = \sum_{i=1}^{n} "
        r"\underbrace{\operatorname{softmax}_i\big(a(q, k_i)\big)}_{\alpha_i}\; v_i",
        t("qkv.formula_caption"))
tab_labels = keep_tab_across_languages("tab")
tabs = st.tabs(tab_labels, key="tab", bind="query-params")
for tab, body in zip(tabs, (kernel_tab, library_tab, tokens_tab, similarity_tab)):
    if tab.open or tab.open is None:
        with tab:
            body()

"""Multi-head attention: cut d_model into h heads, let each attend on its own, concatenate, project.

First tutorial, section 6 (MultiHeadAttention, split_heads, the divisibility assert of section 10)
and section 7 (visualize_attention, which averages heads silently; the pattern table of 7.3).
Order: the shapes of one forward pass and the parameter count -> every head (click to enlarge)
-> how much heads differ and what averaging hides -> the pattern gallery and the classifier ->
the query/key geometry of one head.
"""
from typing import NamedTuple

import numpy as np
import pandas as pd
import streamlit as st
import torch

from attention_core.analysis import PATTERNS, classify_heads, head_similarity, qk_geometry, synthetic_pattern
from attention_core.labs.multihead import (
    MODES,
    build_mha,
    model_input,
    nearest_d_models,
    nearest_head_counts,
    parameter_count,
    position_dims,
    structured_mha,
    trace_mha,
)
from attention_core.modules import HeadDivisibilityError, MultiHeadAttention
from ui import multihead_charts as mc
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
from ui.charts import ROW_SELECTION, heatmap_spec, unique_labels
from ui.controls import seed, sentence
from ui.i18n import LANGS, catalog, current_lang, lesson, t
from ui.registry import ROOT

NS = "multihead"
ANALYSIS_PAGE = ROOT / "pages" / "analysis.py"    # where the tutorial's pattern table is mapped
D_MIN, D_MAX, D_DEFAULT = 4, 256, 64
H_MAX, H_DEFAULT = 32, 8
MAX_CHARTS = 60       # fixed-size and matrix charts kept (the largest, 32 heads x 64 tokens, holds ~1.5 MB of data)
# the gallery pattern each planted recipe should be recognised as ("local", "previous_2" have none)
EXPECTED = {"previous": "previous", "next": "next", "self": "diagonal", "first": "vertical", "broad": "broad"}
FORMULA = (r"\mathrm{MultiHead}(X)=\mathrm{Concat}(\mathrm{head}_1,\dots,\mathrm{head}_h)\,W^O,\qquad "
           r"\mathrm{head}_i=\mathrm{softmax}\!\Big(\frac{XW_i^Q\,(XW_i^K)^{\top}}{\sqrt{d_k}}\Big)\,XW_i^V,"
           r"\qquad d_k=\frac{d_{\mathrm{model}}}{h}")
STEPS = (("x", "x"), ("q_proj", "W_query(x)"), ("view", ".view(b, n, h, d_k)"),
         ("q", "split_heads(...)  # .transpose(1, 2)"), ("scores", "q @ k.transpose(-2, -1) / sqrt(d_k)"),
         ("weights", "masked_softmax(scores)"), ("heads", "weights @ v"), ("concat", "merge_heads(heads)"),
         ("output", "W_output(concat)"))


# ---------------------------------------------------------------------------------------------
# cached computations: plain parameters in, numpy arrays out
# ---------------------------------------------------------------------------------------------

@cache_data(max_entries=32, max_bytes=24 * MB)
def run_heads(tokens: tuple[str, ...], d_model: int, num_heads: int, seed_: int, mode: str) -> dict:
    """One forward pass with every step, the classifier, head similarity, and the parameter counts."""
    mha, recipes = build_mha(mode, d_model, num_heads, seed_)
    tr = trace_mha(mha, model_input(list(tokens), d_model, seed_))
    w = tr.weights[0]                                                          # (h, n, n)
    classes = classify_heads(w)
    n, d_k = len(tokens), d_model // num_heads
    shapes = {"x": tr.x, "q_proj": tr.q_proj, "view": tr.q_proj.view(1, n, num_heads, d_k), "q": tr.q,
              "scores": tr.scores, "weights": tr.weights, "heads": tr.heads, "concat": tr.concat,
              "output": tr.output}
    return {
        "weights": w.numpy(), "q": tr.q[0].numpy(), "k": tr.k[0].numpy(), "v": tr.v[0].numpy(),
        "q_proj": tr.q_proj[0].numpy(), "shapes": {k: tuple(v.shape) for k, v in shapes.items()},
        "recipes": recipes, "labels": [label for label, _ in classes],
        "pattern_scores": np.array([[s[p] for p in PATTERNS] for _, s in classes]),
        "js": head_similarity(w).numpy(), "average": w.mean(0).numpy(),
        "params": {h: parameter_count(d_model, h) for h in (1, num_heads)},
        "module_params": {h: MultiHeadAttention(d_model, h).parameter_count() for h in (1, num_heads)},
        "position_dims": position_dims(d_model),
    }


@cache_data(max_entries=32, max_bytes=8 * MB)
def gallery(n: int) -> np.ndarray:
    return np.stack([synthetic_pattern(name, n).numpy() for name in PATTERNS])


def geometry(r: dict, head: int):
    return qk_geometry(torch.from_numpy(r["q"][head]), torch.from_numpy(r["k"][head]),
                       torch.from_numpy(r["v"][head]))


# ---------------------------------------------------------------------------------------------
# helpers of this page
# ---------------------------------------------------------------------------------------------

def fmt_int(x: int) -> str:
    return f"{x:,}"


def pattern_name(p: str) -> str:
    return t(f"{NS}.pattern_{p}")


def recipe_name(r: str) -> str:
    return t(f"{NS}.recipe_{r}")


def head_name(i: int) -> str:
    """Head i (0-based) as the learner sees it: 1-based."""
    return t(f"{NS}.head_n", i=i + 1)


def joined(items: list[str]) -> str:
    return t(f"{NS}.or").join(items)


def adopt_click(chart_key: str, selection: str, field: str, widget_key: str, valid) -> None:
    """A click on a chart becomes the value of a URL-bound select box (set before the box is drawn).

    The chart keeps its last selection across reruns; only a new click overrides the box, so the
    box can still be changed by hand afterwards."""
    try:
        points = st.session_state[chart_key]["selection"][selection] or []
    except (KeyError, TypeError):
        points = []
    points = points if isinstance(points, list) else [points]
    picked = next((int(p[field]) for p in points if isinstance(p, dict) and field in p), None)
    memo = f"_{chart_key}_adopted"
    if picked is None:
        st.session_state.pop(memo, None)
    elif picked != st.session_state.get(memo):
        st.session_state[memo] = picked
        if picked in valid:
            st.session_state[widget_key] = picked


def default_query(tokens: list[str]) -> int:
    lower = [tok.lower() for tok in tokens]
    for pronoun in ("it", "它"):
        if pronoun in lower:
            return lower.index(pronoun)
    return len(tokens) // 2


def hm_height(n: int) -> int:
    return 28 * n + 130 if n <= 16 else max(300, 560 // max(n, 1) * n + 110)


TABS = ("tab_heads", "tab_shapes", "tab_compare", "tab_gallery", "tab_geometry")


def keep_choice_across_languages(key: str, options, prefix: str) -> None:
    """Bound widgets store their translated label in the URL; a link made in the other language
    (e.g. ?lang=zh&mode=Random+(untrained)) is mapped back to the option before the widget is drawn."""
    asked = st.query_params.get(key)
    if asked is None or key in st.session_state:
        return
    for lang in LANGS:
        labels = [str(catalog(lang).get(f"{NS}.{prefix}_{o}")) for o in options]
        if asked in labels and lang != current_lang():
            st.session_state[key] = options[labels.index(asked)]
            return


def tab_labels() -> list[str]:
    """The tab titles; an open tab named in the other language (URL or session) is kept open."""
    labels = [t(f"{NS}.{name}") for name in TABS]
    current = st.session_state.get("tab") or st.query_params.get("tab")
    if current is not None and current not in labels:
        for lang in LANGS:
            other = [str(catalog(lang).get(f"{NS}.{name}")) for name in TABS]
            if current in other:
                st.session_state["tab"] = labels[other.index(current)]
                break
    return labels


# ---------------------------------------------------------------------------------------------
# the sections
# ---------------------------------------------------------------------------------------------

class View(NamedTuple):
    """What the learner chose; ``key`` (plain values) identifies the computation for the caches."""

    tokens: list[str]
    d_model: int
    num_heads: int
    seed: int
    mode: str
    head: int        # 0-based
    query: int

    @property
    def key(self) -> tuple:
        return (tuple(self.tokens), self.d_model, self.num_heads, self.seed, self.mode)

    @property
    def labels(self) -> list[str]:
        return unique_labels(self.tokens)


def divisibility_problem(d_model: int, num_heads: int) -> None:
    """The tutorial's assert, as a message with the numbers and the nearest settings that work."""
    heads = nearest_head_counts(d_model, num_heads, max_heads=H_MAX)
    dims = nearest_d_models(d_model, num_heads, min_d=D_MIN, max_d=D_MAX)
    problem(f"{NS}.err_divisible", d_model=d_model, h=num_heads, ratio=f"{d_model / num_heads:.4g}",
            heads=joined([t(f"{NS}.heads_option", h=h, d_k=d_model // h) for h in heads]),
            dims=joined([t(f"{NS}.dims_option", d=d, d_k=d // num_heads) for d in dims]))


def shapes_section(r: dict, v: View) -> None:
    st.markdown(lesson(f"{NS}/split"))
    s, d_model, h = r["shapes"], v.d_model, v.num_heads
    table = pd.DataFrame({
        t(f"{NS}.col_step"): [t(f"{NS}.step_{name}") for name, _ in STEPS],
        t(f"{NS}.col_code"): [code for _, code in STEPS],
        t(f"{NS}.col_shape"): [str(s[name]) for name, _ in STEPS],
    })
    st.dataframe(table, hide_index=True, width="stretch")
    st.caption(t(f"{NS}.shape_legend", n=len(v.tokens), d_model=d_model, h=h, d_k=d_model // h))
    show_chart(lambda: mc.split_chart(
        r["q_proj"][v.query], h,
        top_title=t(f"{NS}.split_top", q=v.labels[v.query], d_model=d_model),
        bottom_title=t(f"{NS}.split_bottom", h=h, d_k=d_model // h),
        dim_title=t(f"{NS}.dim"), head_title=t(f"{NS}.head"), within_title=t(f"{NS}.within"),
        value_title=t("common.value")), key="mh_split", cache=(v.key, v.query), width="content")

    one, many = r["params"][1], r["params"][h]
    st.markdown(f"**{t(f'{NS}.params_title')}**")
    c1, c2 = st.columns(2)
    c1.metric(t(f"{NS}.params_one", d_k=one.d_k), fmt_int(one.total))
    c2.metric(t(f"{NS}.params_many", h=h, d_k=many.d_k), fmt_int(many.total))
    rows = [(t(f"{NS}.param_per_head"), f"3 × ({d_model}×{one.d_k} + {one.d_k}) = {fmt_int(one.per_head)}",
             f"3 × ({d_model}×{many.d_k} + {many.d_k}) = {fmt_int(many.per_head)}"),
            (t(f"{NS}.param_heads"), "1", str(h)),
            (t(f"{NS}.param_qkv"), fmt_int(one.qkv), f"{h} × {fmt_int(many.per_head)} = {fmt_int(many.qkv)}"),
            (t(f"{NS}.param_output"), fmt_int(one.output), fmt_int(many.output)),
            (t(f"{NS}.param_total"), fmt_int(one.total), fmt_int(many.total)),
            (t(f"{NS}.param_module"), fmt_int(r["module_params"][1]), fmt_int(r["module_params"][h]))]
    table = pd.DataFrame(rows, columns=["", t(f"{NS}.params_one", d_k=one.d_k),
                                        t(f"{NS}.params_many", h=h, d_k=many.d_k)])
    # with one head both columns are the same model (and would share a name, which Arrow refuses)
    st.dataframe(table.iloc[:, :2] if h == 1 else table, hide_index=True, width="stretch")


def mode_banner(r: dict, v: View) -> None:
    if v.mode == "structured":
        built = sum(rec != "random" for rec in r["recipes"])
        st.info(t(f"{NS}.mode_structured_banner", built=built, h=v.num_heads, seed=v.seed,
                  p=r["position_dims"]),
                icon=":material/construction:")
    else:
        st.info(t(f"{NS}.mode_random_banner", seed=v.seed), icon=":material/casino:")


def best_score(r: dict, i: int) -> str:
    return f"{r['pattern_scores'][i][PATTERNS.index(r['labels'][i])]:.2f}"


def panel_title(r: dict, i: int, short: bool) -> str:
    """"head 3 · diagonal (itself) 0.92"; with many small panels "3 · self 0.92"."""
    label = r["labels"][i]
    if short:
        return t(f"{NS}.panel_short", head=i + 1, pattern=t(f"{NS}.short_{label}"), score=best_score(r, i))
    return t(f"{NS}.panel", head=i + 1, pattern=pattern_name(label), score=best_score(r, i))


def heads_section(r: dict, v: View) -> None:
    mode_banner(r, v)
    w, h, n, head, query = r["weights"], v.num_heads, len(v.tokens), v.head, v.query
    columns = h if h <= 4 else 4 if h <= 8 else 6            # fits the main column of a 1400 px screen
    size = 170 if h <= 4 else 150 if h <= 8 else 90 if h <= 18 else 80
    show_chart(lambda: mc.small_multiples_spec(
        w, v.tokens, columns=columns, selected=head + 1, panel_size=size, title_limit=size + 20,
        titles=[("▶ " if i == head else "") + panel_title(r, i, short=h > 8) for i in range(h)],
        x_title=t("common.key"), y_title=t("common.query"), value_title=t("common.weight"),
        panel_title=t(f"{NS}.head")), key="mh_grid", cache=(v.key, head), select=True, width="content")
    st.caption(t(f"{NS}.grid_caption") + (" " + t(f"{NS}.grid_pooled") if n > mc.MAX_PANEL_SIDE else ""))
    d_k = v.d_model // h
    if v.mode == "structured" and d_k < 8:
        st.caption(t(f"{NS}.small_dk", d_k=d_k, pairs=d_k // 2) if d_k >= 2 else t(f"{NS}.small_dk_one"))

    left, right = st.columns(2)
    with left:
        big = cached_spec(("mh_big", v.key, head, query), lambda: heatmap_spec(
            w[head], v.tokens, x_title=t("common.key"), y_title=t("common.query"),
            value_title=t("common.weight"),
            selected_row=query, height=hm_height(n),
            title=t(f"{NS}.big_title", head=head + 1, recipe=recipe_name(r["recipes"][head]))))
        show_matrix(big, w[head], v.tokens, key="mh_big", file_name=f"head_{head + 1}.csv")
        st.caption(t(f"{NS}.big_caption", pattern=pattern_name(r["labels"][head]), score=best_score(r, head)))
    with right:
        per_head = w[:, query, :]                                              # (h, n)
        show_chart(lambda: heatmap_spec(
            per_head, [head_name(i) for i in range(h)], v.tokens,
            title=t(f"{NS}.drill_title", q=v.labels[query]), x_title=t("common.key"),
            y_title=t(f"{NS}.head"), value_title=t("common.weight"), selectable=False,
            show_numbers=False, height=max(160, 26 * h + 120)), key="mh_drill", cache=(v.key, query))
        st.caption(t(f"{NS}.drill_caption", q=md_escape(v.labels[query]),
                     n_distinct=len(set(per_head.argmax(-1).tolist())), h=h))


def compare_section(r: dict, v: View) -> None:
    """Head-to-head JS distance and the averaged view."""
    avg, js, h, n = r["average"], r["js"], v.num_heads, len(v.tokens)
    left, right = st.columns(2)
    with left:
        names = [head_name(i) for i in range(h)]
        show_chart(lambda: heatmap_spec(
            js, names, names, title=t(f"{NS}.js_title"), x_title=t(f"{NS}.head"), y_title=t(f"{NS}.head"),
            value_title=t(f"{NS}.js"), selectable=False,
            height=max(160, (30 if h <= 16 else 560 // h) * h + 120)), key="mh_js", cache=(v.key,))
        st.caption(t(f"{NS}.js_caption"))
    with right:
        chart = cached_spec(("mh_avg", v.key), lambda: heatmap_spec(
            avg, v.tokens, title=t(f"{NS}.avg_title", h=h), x_title=t("common.key"),
            y_title=t("common.query"),
            value_title=t("common.weight"), selectable=False, height=hm_height(n)))
        show_matrix(chart, avg, v.tokens, key="mh_avg", selectable=False, file_name="average.csv")
        st.caption(t(f"{NS}.avg_caption"))


def compare_facts(r: dict, v: View) -> dict:
    """The numbers the notice and the averaging pitfall quote (whatever tab is open)."""
    w, avg, js, h = r["weights"], r["average"], r["js"], v.num_heads
    key = int(w[v.head, v.query].argmax())
    facts = {"q": v.labels[v.query], "k": v.labels[key], "head": v.head + 1,
             "w_head": float(w[v.head, v.query, key]), "w_avg": float(avg[v.query, key]),
             "avg_max": float(avg.max(-1).mean()), "head_max": float(w.max(-1).mean(-1).max())}
    if h > 1:
        off = js + np.diag(np.full(h, np.inf))
        a, b = np.unravel_index(np.argmin(off), off.shape)
        off = js - np.diag(np.full(h, np.inf))
        c, d = np.unravel_index(np.argmax(off), off.shape)
        facts.update(near=(int(a) + 1, int(b) + 1, float(js[a, b])),
                     far=(int(c) + 1, int(d) + 1, float(js[c, d])))
    return facts


def gallery_section(r: dict, v: View) -> None:
    """The synthetic patterns and the classifier's verdict on each head."""
    st.markdown(lesson(f"{NS}/gallery"))
    n, h = len(v.tokens), v.num_heads
    show_chart(lambda: mc.small_multiples_spec(
        gallery(n), v.tokens, titles=[pattern_name(p) for p in PATTERNS], columns=6, x_title=t("common.key"),
        y_title=t("common.query"), value_title=t("common.weight"), panel_title=t(f"{NS}.pattern"),
        selectable=False, panel_size=120 if n <= 16 else 100), key="mh_gallery", cache=(tuple(v.tokens),),
        width="content")
    st.caption(t(f"{NS}.gallery_caption"))
    st.page_link(ANALYSIS_PAGE, label=t(f"{NS}.seedpat_link"), icon=":material/table_view:")
    left, right = st.columns(2)
    with left:
        show_chart(lambda: heatmap_spec(
            r["pattern_scores"].T, [pattern_name(p) for p in PATTERNS], [str(i + 1) for i in range(h)],
            title=t(f"{NS}.scores_title"), x_title=t(f"{NS}.head"), y_title=t(f"{NS}.pattern"),
            value_title=t(f"{NS}.score"), selectable=False, show_numbers=h <= 12, height=6 * 30 + 130),
            key="mh_scores", cache=(v.key,))
    with right:
        order = np.argsort(-r["pattern_scores"], axis=1)
        table = pd.DataFrame({
            t(f"{NS}.head"): [i + 1 for i in range(h)],
            t(f"{NS}.col_planted"): [recipe_name(x) for x in r["recipes"]],
            t(f"{NS}.col_label"): [pattern_name(x) for x in r["labels"]],
            t(f"{NS}.score"): [round(float(r["pattern_scores"][i][order[i][0]]), 3) for i in range(h)],
            t(f"{NS}.col_runner_up"): [
                f"{pattern_name(PATTERNS[order[i][1]])} {r['pattern_scores'][i][order[i][1]]:.2f}"
                for i in range(h)],
        })
        st.dataframe(table, hide_index=True, width="stretch", height=min(38 + 35 * h, 420))


def geometry_section(r: dict, v: View) -> None:
    head, query, labels = v.head, v.query, v.labels
    st.markdown(lesson(f"{NS}/geometry"))
    g = geometry(r, head)
    w_row = r["weights"][head, query]
    var = g.explained_variance_ratio.numpy()
    left, right = st.columns(2)
    with left:
        show_chart(lambda: mc.geometry_spec(
            g.queries, g.keys, v.tokens, w_row, query,
            title=t(f"{NS}.geo_chart", head=head + 1, q=labels[query]),
            x_title=t(f"{NS}.pc", i=1, pct=f"{100 * var[0]:.0f}"),
            y_title=t(f"{NS}.pc", i=2, pct=f"{100 * var[1]:.0f}"), key_name=t("common.key"),
            query_name=t("common.query"), weight_title=t("common.weight"), token_title=t(f"{NS}.token")),
            key="mh_geo", cache=(v.key, head, query), width="content")
    with right:
        show_chart(lambda: mc.values_spec(
            g.values, v.tokens, w_row, title=t(f"{NS}.values_chart", head=head + 1, q=labels[query]),
            x_title=t(f"{NS}.pc_plain", i=1), y_title=t(f"{NS}.pc_plain", i=2), value_name=t("common.value"),
            output_name=t(f"{NS}.output_point"), weight_title=t("common.weight"),
            token_title=t(f"{NS}.token")),
            key="mh_values", cache=(v.key, head, query), width="content")
    dist = np.linalg.norm(g.keys.numpy() - g.queries.numpy()[query], axis=1)
    top = int(w_row.argmax())
    st.caption(t(f"{NS}.geo_caption", q=md_escape(labels[query]), top=md_escape(labels[top]),
                 w=f"{float(w_row[top]):.2f}", rank=int((dist < dist[top]).sum()) + 1,
                 nearest=md_escape(labels[int(dist.argmin())]), var=f"{100 * float(var.sum()):.0f}",
                 n=len(v.tokens)))


def what_to_notice(r: dict, v: View, facts: dict) -> None:
    h = v.num_heads
    one, many, sh = r["params"][1], r["params"][h], r["shapes"]
    items = [t(f"{NS}.notice_shapes", x=sh["x"], q=sh["q"], concat=sh["concat"], h=h, d_k=many.d_k),
             t(f"{NS}.notice_params", one=fmt_int(one.total), many=fmt_int(many.total), h=h,
               d_model=v.d_model, d_k=many.d_k)]
    if v.mode == "structured":
        planted = sum(rec in EXPECTED for rec in r["recipes"])
        recognised = sum(EXPECTED.get(rec) == label for rec, label in zip(r["recipes"], r["labels"]))
        items.append(t(f"{NS}.notice_classifier_structured", ok=recognised, planted=planted, h=h))
    else:
        broad = sum(label == "broad" for label in r["labels"])
        items.append(t(f"{NS}.notice_classifier_random", broad=broad, h=h, max_w=f"{facts['head_max']:.2f}"))
    items.append(t(f"{NS}.notice_average", q=md_escape(facts["q"]), k=md_escape(facts["k"]),
                   head=facts["head"],
                   w_head=f"{facts['w_head']:.2f}", w_avg=f"{facts['w_avg']:.2f}"))
    if "near" in facts:
        (a, b, near), (c, d, far) = facts["near"], facts["far"]
        items.append(t(f"{NS}.notice_js", a=a, b=b, near=f"{near:.2f}", c=c, d=d, far=f"{far:.2f}"))
    else:
        items.append(t(f"{NS}.notice_one_head"))
    notice(items)


def parameter_exercise(r: dict, v: View) -> None:
    h, d_model, many = v.num_heads, v.d_model, r["params"][v.num_heads]
    if d_model % (2 * h) == 0:
        double = parameter_count(d_model, 2 * h)
        explain = t(f"{NS}.ex_explain", h=h, h2=2 * h, d_model=d_model, p=fmt_int(many.total),
                    p2=fmt_int(double.total), d_k=many.d_k, d_k2=double.d_k)
    else:
        explain = t(f"{NS}.ex_explain_generic", d_model=d_model, p=fmt_int(many.total))
    exercise("mh_ex", t(f"{NS}.ex_question", h=h, d_model=d_model),
             [t(f"{NS}.ex_opt_double"), t(f"{NS}.ex_opt_half"), t(f"{NS}.ex_opt_same"),
              t(f"{NS}.ex_opt_more")],
             answer=2, explanation=explain)


def averaging_pitfall(facts: dict) -> None:
    pitfall(t(f"{NS}.pit_avg_title"),
            t(f"{NS}.pit_avg_body", q=md_escape(facts["q"]), k=md_escape(facts["k"]), head=facts["head"],
              w_head=f"{facts['w_head']:.2f}", w_avg=f"{facts['w_avg']:.2f}",
              avg_max=f"{facts['avg_max']:.2f}",
              head_max=f"{facts['head_max']:.2f}"),
            code=t(f"{NS}.pit_avg_code"))


def pick_head_and_query(tokens: list[str], num_heads: int) -> tuple[int, int]:
    """The two URL-bound select boxes; a click on the grid / on a row of the big heatmap sets them."""
    n, labels = len(tokens), unique_labels(tokens)
    adopt_click("mh_grid", mc.HEAD_SELECTION, "head", "head", range(1, num_heads + 1))
    adopt_click("mh_big", ROW_SELECTION, "query_pos", "q", range(n))
    auto = default_query(tokens)
    left, right = st.columns(2)
    with left:
        head = st.selectbox(t(f"{NS}.pick_head"), list(range(1, num_heads + 1)), index=0, key="head",
                            bind="query-params", help=t(f"{NS}.pick_head_help"))
    with right:
        picked = st.selectbox(t(f"{NS}.pick_query"), list(range(n)), index=None, key="q", bind="query-params",
                              format_func=lambda i: t("common.indexed", i=i, label=labels[i]),
                              placeholder=t(f"{NS}.query_auto", q=labels[auto]),
                              help=t(f"{NS}.pick_query_help"))
    query = auto if picked is None or picked >= n else int(picked)
    return (head or 1) - 1, query


# ---------------------------------------------------------------------------------------------
# the page
# ---------------------------------------------------------------------------------------------

header(NS)
intuition(NS)
formula(FORMULA, t(f"{NS}.formula_caption"))

tokens = sentence("text")
c1, c2, c3, c4 = st.columns([3, 3, 1.6, 3.4])
with c1:
    d_model = int(st.slider(t(f"{NS}.d_model"), D_MIN, D_MAX, D_DEFAULT, step=1, key="d", bind="query-params",
                            help=t(f"{NS}.d_model_help")))
with c2:
    num_heads = int(st.slider(t(f"{NS}.num_heads"), 1, H_MAX, H_DEFAULT, step=1, key="h", bind="query-params",
                              help=t(f"{NS}.num_heads_help")))
with c3:
    seed_ = seed("seed")
with c4:
    keep_choice_across_languages("mode", MODES, "mode")
    mode = st.segmented_control(t(f"{NS}.mode"), list(MODES), default=MODES[0], required=True,
                                format_func=lambda m: t(f"{NS}.mode_{m}"), key="mode", bind="query-params",
                                help=t(f"{NS}.mode_help")) or MODES[0]

result = None
if tokens is not None:
    try:
        result = run_heads(tuple(tokens), d_model, num_heads, seed_, mode)
    except HeadDivisibilityError as err:
        divisibility_problem(err.d_model, err.num_heads)

if result is not None:
    head, query = pick_head_and_query(tokens, num_heads)
    view = View(tokens, d_model, num_heads, seed_, mode, head, query)
    tabs = st.tabs(tab_labels(), key="tab", bind="query-params")
    for tab, body in zip(tabs, (heads_section, shapes_section, compare_section, gallery_section,
                                geometry_section)):
        if tab.open or tab.open is None:          # lazy: only the open tab runs
            with tab:
                body(result, view)
    facts = compare_facts(result, view)
    what_to_notice(result, view, facts)
    parameter_exercise(result, view)
    averaging_pitfall(facts)

pitfall(t(f"{NS}.pit_div_title"), t(f"{NS}.pit_div_body"), code=t(f"{NS}.pit_div_code"))
show_code(MultiHeadAttention, build_mha, structured_mha, model_input, trace_mha, parameter_count,
          classify_heads, head_similarity, qk_geometry)

"""The multi-head page's sections: its controls (d_model, the heads, the kind of weights, the head and query
pickers), the cached forward pass and pattern gallery, and what each tab draws (every head, the shapes and the
parameter count, the heads compared and averaged, the gallery and the classifier, the query/key geometry), with
the notice, the question and the pitfalls around them."""
import re
import textwrap
from typing import NamedTuple

import numpy as np
import pandas as pd
import streamlit as st
import torch

from attention_core.analysis import PATTERNS, qk_geometry, synthetic_pattern
from attention_core.labs import multihead as lab
from attention_core.modules import HeadDivisibilityError
from serving import url_guard
from serving.cache import MB, cache_data
from ui import anatomy, controls, i18n, presenter
from ui import format as fmt
from ui import multihead_charts as mc
from ui.anatomy import md_escape, show_chart
from ui.charts import ROW_SELECTION, attention_heatmap, heatmap, unique_labels
from ui.i18n import t
from ui.registry import ROOT

NS = "multihead"
ANALYSIS_PAGE = ROOT / "app_pages" / "analysis.py"    # where the tutorial's pattern table is mapped
D_MIN, D_MAX, D_DEFAULT = 4, 256, 64
H_MAX, H_DEFAULT = 32, 8
# the gallery pattern each planted recipe should be recognised as ("local", "previous_2" have none)
EXPECTED = {"previous": "previous", "next": "next", "self": "diagonal", "first": "vertical", "broad": "broad"}
STEPS = (("x", "x"), ("q_proj", "W_query(x)"), ("view", ".view(b, n, h, d_k)"),
         ("q", "split_heads(...)  # .transpose(1, 2)"), ("scores", "q @ k.transpose(-2, -1) / sqrt(d_k)"),
         ("weights", "masked_softmax(scores)"), ("heads", "weights @ v"), ("concat", "merge_heads(heads)"),
         ("output", "W_output(concat)"))
GRID_WIDTH, GRID_GAP = 340, 8     # the small multiples fit a phone's column (358 px); hover a cell for its tokens
PLANE = (300, 280)                # the query/key and value planes (px): side by side or stacked on a phone


# ---------------------------------------------------------------------------------------------
# cached computations: plain parameters in, numpy arrays out
# ---------------------------------------------------------------------------------------------

heads_lesson = cache_data(max_entries=32, max_bytes=24 * MB)(lab.heads_lesson)


@cache_data(max_entries=32, max_bytes=8 * MB)
def gallery(n: int) -> np.ndarray:
    return np.stack([synthetic_pattern(name, n).numpy() for name in PATTERNS])


# ---------------------------------------------------------------------------------------------
# helpers of this page
# ---------------------------------------------------------------------------------------------

def pattern_name(p: str) -> str:
    return t(f"{NS}.pattern_{p}")


def recipe_name(r: str) -> str:
    return t(f"{NS}.recipe_{r}")


def head_name(i: int) -> str:
    """Head i (0-based) as the learner sees it: 1-based."""
    return t(f"{NS}.head_n", i=i + 1)


def lines(title: str, width: int = 44) -> list[str]:
    """A long chart title as short lines (Vega draws a list as lines), so it fits a phone's column: cut after
    "; " / "；" / ": " / "：" / "，", then long English parts at spaces."""
    out = []
    for part in re.split(r"; |；|(?<=:) |(?<=：)|(?<=，)", title):
        out += textwrap.wrap(part, width) if " " in part else [part]
    return [line for line in out if line]


def joined(items: list[str]) -> str:
    return t(f"{NS}.or").join(items)


def default_query(tokens: list[str]) -> int:
    lower = [tok.lower() for tok in tokens]
    for pronoun in ("it", "它"):
        if pronoun in lower:
            return lower.index(pronoun)
    return len(tokens) // 2




# ---------------------------------------------------------------------------------------------
# the sections
# ---------------------------------------------------------------------------------------------

class View(NamedTuple):
    """What the learner chose."""

    tokens: list[str]
    d_model: int
    num_heads: int
    seed: int
    mode: str
    head: int        # 0-based
    query: int

    @property
    def labels(self) -> list[str]:
        return unique_labels(self.tokens)


def divisibility_problem(d_model: int, num_heads: int) -> None:
    """The tutorial's assert, as a message with the numbers and the nearest settings that work."""
    heads = lab.nearest_head_counts(d_model, num_heads, max_heads=H_MAX)
    dims = lab.nearest_d_models(d_model, num_heads, min_d=D_MIN, max_d=D_MAX)
    anatomy.problem(f"{NS}.err_divisible", d_model=d_model, h=num_heads, ratio=f"{d_model / num_heads:.4g}",
                    heads=joined([t(f"{NS}.heads_option", h=h, d_k=d_model // h) for h in heads]),
                    dims=joined([t(f"{NS}.dims_option", d=d, d_k=d // num_heads) for d in dims]))


def shapes_section(r: lab.HeadsLesson, v: View) -> None:
    st.markdown(i18n.lesson(f"{NS}/split"))
    s, d_model, h = r.shapes, v.d_model, v.num_heads
    table = pd.DataFrame({
        t(f"{NS}.col_step"): [t(f"{NS}.step_{name}") for name, _ in STEPS],
        t(f"{NS}.col_code"): [code for _, code in STEPS],
        t(f"{NS}.col_shape"): [str(s[name]) for name, _ in STEPS],
    })
    st.table(table, hide_index=True, border="horizontal")      # a static table wraps on a phone; a grid scrolls
    st.caption(t(f"{NS}.shape_legend", n=len(v.tokens), d_model=d_model, h=h, d_k=d_model // h))
    show_chart(mc.split_chart(
        r.q_proj[v.query], h, top_title=lines(t(f"{NS}.split_top", q=v.labels[v.query], d_model=d_model)),
        bottom_title=lines(t(f"{NS}.split_bottom", h=h, d_k=d_model // h)), dim_title=t(f"{NS}.dim"),
        head_title=t(f"{NS}.head"), within_title=t(f"{NS}.within"), value_title=t("common.value"),
        width=GRID_WIDTH - 60),                                       # the head axis takes ~60 px on the left
        key="mh_split", width="content")

    one, many, n_ = r.params[1], r.params[h], fmt.count
    st.markdown(f"**{t(f'{NS}.params_title')}**")
    c1, c2 = st.columns(2)
    c1.metric(t(f"{NS}.params_one", d_k=one.d_k), n_(one.total))
    c2.metric(t(f"{NS}.params_many", h=h, d_k=many.d_k), n_(many.total))
    rows = [(t(f"{NS}.param_per_head"), f"3 × ({d_model}×{one.d_k} + {one.d_k}) = {n_(one.per_head)}",
             f"3 × ({d_model}×{many.d_k} + {many.d_k}) = {n_(many.per_head)}"),
            (t(f"{NS}.param_heads"), "1", str(h)),
            (t(f"{NS}.param_qkv"), n_(one.qkv), f"{h} × {n_(many.per_head)} = {n_(many.qkv)}"),
            (t(f"{NS}.param_output"), n_(one.output), n_(many.output)),
            (t(f"{NS}.param_total"), n_(one.total), n_(many.total)),
            (t(f"{NS}.param_module"), n_(r.module_params[1]), n_(r.module_params[h]))]
    table = pd.DataFrame(rows, columns=["", t(f"{NS}.params_one", d_k=one.d_k),
                                        t(f"{NS}.params_many", h=h, d_k=many.d_k)])
    # with one head both columns are the same model (and would share a name, which Arrow refuses)
    st.table(table.iloc[:, :2] if h == 1 else table, hide_index=True, border="horizontal")


def mode_banner(r: lab.HeadsLesson, v: View) -> None:
    with anatomy.folded():
        banner(r, v)


def banner(r: lab.HeadsLesson, v: View) -> None:
    if v.mode == "structured":
        built = sum(rec != "random" for rec in r.recipes)
        st.info(t(f"{NS}.mode_structured_banner", built=built, h=v.num_heads, seed=v.seed, p=r.position_dims),
                icon=":material/construction:")
    else:
        st.info(t(f"{NS}.mode_random_banner", seed=v.seed), icon=":material/casino:")


def best_score(r: lab.HeadsLesson, i: int) -> str:
    return fmt.fixed(r.pattern_scores[i][PATTERNS.index(r.labels[i])])


def panel_title(r: lab.HeadsLesson, i: int, short: bool, tiny: bool = False) -> str:
    """"head 3 · diagonal (itself) 0.92"; with small panels "3 · self 0.92"; with tiny ones "3 · self"."""
    label = r.labels[i]
    if tiny:
        return t(f"{NS}.panel_tiny", head=i + 1, pattern=t(f"{NS}.short_{label}"))
    if short:
        return t(f"{NS}.panel_short", head=i + 1, pattern=t(f"{NS}.short_{label}"), score=best_score(r, i))
    return t(f"{NS}.panel", head=i + 1, pattern=pattern_name(label), score=best_score(r, i))


def heads_section(r: lab.HeadsLesson, v: View) -> None:
    mode_banner(r, v)
    w, h, n, head, query = r.weights, v.num_heads, len(v.tokens), v.head, v.query
    # at most 3 columns up to 9 heads: panels of 108 px, legible from the back of a room (4 columns were 79 px)
    columns = h if h <= 3 else 3 if h <= 9 else 4 if h <= 16 else 6 if h <= 18 else 8
    size = min(160, (GRID_WIDTH - GRID_GAP * (columns - 1)) // columns)    # fits a phone's column too
    show_chart(mc.small_multiples(
        w, v.tokens, columns=columns, selected=head + 1, panel_size=size, title_limit=size + GRID_GAP,
        titles=[("▶ " if i == head else "") + panel_title(r, i, short=True, tiny=size < 100) for i in range(h)],
        x_title=t("common.key"), y_title=t("common.query"), value_title=t("common.weight"),
        panel_title=t(f"{NS}.head"), labels=False, spacing=GRID_GAP, legend_below=True), key="mh_grid",
        select=True, width="content")
    d_k = v.d_model // h
    small = ""
    if v.mode == "structured" and d_k < 8:
        small = " " + (t(f"{NS}.small_dk", d_k=d_k, pairs=d_k // 2) if d_k >= 2 else t(f"{NS}.small_dk_one"))
    st.caption(t(f"{NS}.grid_caption") + (" " + t(f"{NS}.grid_pooled") if n > mc.MAX_PANEL_SIDE else "") + small)

    left, right = st.columns(2)
    with left:
        big = attention_heatmap(w[head], v.tokens, selected_row=query,
                                title=t(f"{NS}.big_title", head=head + 1, recipe=recipe_name(r.recipes[head])))
        anatomy.show_matrix(big, w[head], v.tokens, key="mh_big", file_name=f"head_{head + 1}.csv")
        st.caption(t(f"{NS}.big_caption", pattern=pattern_name(r.labels[head]), score=best_score(r, head)))
    with right:
        per_head = w[:, query, :]                                              # (h, n)
        show_chart(attention_heatmap(per_head, [head_name(i) for i in range(h)], v.tokens, y_title=t(f"{NS}.head"),
                                     title=t(f"{NS}.drill_title", q=v.labels[query]), selectable=False,
                                     show_numbers=False), key="mh_drill")
        st.caption(t(f"{NS}.drill_caption", q=md_escape(v.labels[query]),
                     n_distinct=len(set(per_head.argmax(-1).tolist())), h=h))


def compare_section(r: lab.HeadsLesson, v: View) -> None:
    """Head-to-head JS distance and the averaged view."""
    left, right = st.columns(2)
    with left:
        names = [head_name(i) for i in range(v.num_heads)]
        show_chart(heatmap(r.js, names, names, title=t(f"{NS}.js_title"), x_title=t(f"{NS}.head"),
                           y_title=t(f"{NS}.head"), value_title=t(f"{NS}.js"), selectable=False), key="mh_js")
        st.caption(t(f"{NS}.js_caption"))
    with right:
        avg = attention_heatmap(r.average, v.tokens, title=t(f"{NS}.avg_title", h=v.num_heads), selectable=False)
        anatomy.show_matrix(avg, r.average, v.tokens, key="mh_avg", selectable=False, file_name="average.csv")
        st.caption(t(f"{NS}.avg_caption"))


def gallery_section(r: lab.HeadsLesson, v: View) -> None:
    """The synthetic patterns and the classifier's verdict on each head."""
    st.markdown(i18n.lesson(f"{NS}/gallery"))
    n, h = len(v.tokens), v.num_heads
    size = (GRID_WIDTH - 2 * GRID_GAP) // 3
    show_chart(mc.small_multiples(
        gallery(n), v.tokens, titles=[pattern_name(p) for p in PATTERNS], columns=3, x_title=t("common.key"),
        y_title=t("common.query"), value_title=t("common.weight"), panel_title=t(f"{NS}.pattern"),
        selectable=False, panel_size=size, title_limit=size + GRID_GAP, labels=False, spacing=GRID_GAP,
        legend_below=True),
        key="mh_gallery", width="content")
    st.caption(t(f"{NS}.gallery_caption"))
    st.page_link(ANALYSIS_PAGE, label=t(f"{NS}.seedpat_link"), icon=":material/table_view:")
    left, right = st.columns(2)
    with left:
        show_chart(heatmap(r.pattern_scores.T, [pattern_name(p) for p in PATTERNS], [str(i + 1) for i in range(h)],
                           title=t(f"{NS}.scores_title"), x_title=t(f"{NS}.head"), y_title=t(f"{NS}.pattern"),
                           value_title=t(f"{NS}.score"), selectable=False, show_numbers=h <= 12), key="mh_scores")
    with right:
        order = np.argsort(-r.pattern_scores, axis=1)
        table = pd.DataFrame({
            t(f"{NS}.head"): [i + 1 for i in range(h)],
            t(f"{NS}.col_planted"): [recipe_name(x) for x in r.recipes],
            t(f"{NS}.col_label"): [pattern_name(x) for x in r.labels],
            t(f"{NS}.score"): [round(float(r.pattern_scores[i][order[i][0]]), 3) for i in range(h)],
            t(f"{NS}.col_runner_up"): [
                f"{pattern_name(PATTERNS[order[i][1]])} {fmt.fixed(r.pattern_scores[i][order[i][1]])}"
                for i in range(h)],
        })
        st.table(table, hide_index=True, border="horizontal")


def geometry_section(r: lab.HeadsLesson, v: View) -> None:
    head, query, labels = v.head, v.query, v.labels
    st.markdown(i18n.lesson(f"{NS}/geometry"))
    g = qk_geometry(*(torch.from_numpy(m[head]) for m in (r.q, r.k, r.v)))
    presenter.shows(qk_geometry)
    w_row = r.weights[head, query]
    var = g.explained_variance_ratio.numpy()
    words = dict(weight_title=t("common.weight"), token_title=t(f"{NS}.token"))
    left, right = st.columns(2)
    with left:
        show_chart(mc.geometry_chart(
            g.queries, g.keys, v.tokens, w_row, query, width=PLANE[0], height=PLANE[1],
            title=lines(t(f"{NS}.geo_chart", head=head + 1, q=labels[query])),
            x_title=t(f"{NS}.pc", i=1, pct=fmt.fixed(100 * var[0], 0)),
            y_title=t(f"{NS}.pc", i=2, pct=fmt.fixed(100 * var[1], 0)),
            key_name=t("common.key"), query_name=t("common.query"), **words), key="mh_geo", width="content")
    with right:
        show_chart(mc.values_chart(
            g.values, v.tokens, w_row, width=PLANE[0], height=PLANE[1],
            title=lines(t(f"{NS}.values_chart", head=head + 1, q=labels[query])),
            x_title=t(f"{NS}.pc_plain", i=1), y_title=t(f"{NS}.pc_plain", i=2), value_name=t("common.value"),
            output_name=t(f"{NS}.output_point"), **words), key="mh_values", width="content")
    dist = np.linalg.norm(g.keys.numpy() - g.queries.numpy()[query], axis=1)
    top = int(w_row.argmax())
    st.caption(t(f"{NS}.geo_caption", q=md_escape(labels[query]), top=md_escape(labels[top]),
                 w=fmt.fixed(w_row[top]), rank=int((dist < dist[top]).sum()) + 1,
                 nearest=md_escape(labels[int(dist.argmin())]), var=fmt.fixed(100 * var.sum(), 0), n=len(v.tokens)))


def what_to_notice(r: lab.HeadsLesson, v: View, f: lab.AveragingFacts) -> None:
    h = v.num_heads
    one, many, sh = r.params[1], r.params[h], r.shapes
    items = [t(f"{NS}.notice_shapes", x=sh["x"], q=sh["q"], concat=sh["concat"], h=h, d_k=many.d_k),
             t(f"{NS}.notice_params", one=fmt.count(one.total), many=fmt.count(many.total), h=h,
               d_model=v.d_model, d_k=many.d_k)]
    if v.mode == "structured":
        planted = sum(rec in EXPECTED for rec in r.recipes)
        recognised = sum(EXPECTED.get(rec) == label for rec, label in zip(r.recipes, r.labels))
        items.append(t(f"{NS}.notice_classifier_structured", ok=recognised, planted=planted, h=h))
    else:
        broad = sum(label == "broad" for label in r.labels)
        items.append(t(f"{NS}.notice_classifier_random", broad=broad, h=h, max_w=fmt.fixed(f.head_max)))
    items.append(t(f"{NS}.notice_average", q=md_escape(v.labels[v.query]), k=md_escape(v.labels[f.key]),
                   head=v.head + 1, w_head=fmt.fixed(f.w_head), w_avg=fmt.fixed(f.w_avg),
                   avg_max=fmt.fixed(f.avg_max), head_max=fmt.fixed(f.head_max)))
    if f.nearest is not None:
        items.append(t(f"{NS}.notice_js", a=f.nearest.a, b=f.nearest.b, near=fmt.fixed(f.nearest.distance),
                       c=f.farthest.a, d=f.farthest.b, far=fmt.fixed(f.farthest.distance)))
    else:
        items.append(t(f"{NS}.notice_one_head"))
    anatomy.notice_items(items)     # its heading (anatomy.notice_heading) is drawn outside the seed's fragment


def parameter_exercise(d_model: int, h: int) -> None:
    """Depends on d_model and h only (not on the seed: it stays outside the seed's fragment)."""
    many = lab.parameter_count(d_model, h)
    if d_model % (2 * h) == 0:
        double = lab.parameter_count(d_model, 2 * h)
        explain = t(f"{NS}.ex_explain", h=h, h2=2 * h, d_model=d_model, p=fmt.count(many.total),
                    p2=fmt.count(double.total), d_k=many.d_k, d_k2=double.d_k)
    else:
        explain = t(f"{NS}.ex_explain_generic", d_model=d_model, p=fmt.count(many.total))
    anatomy.exercise("mh_ex", t(f"{NS}.ex_question", h=h, d_model=d_model),
                     [t(f"{NS}.ex_opt_double"), t(f"{NS}.ex_opt_half"), t(f"{NS}.ex_opt_same"),
                      t(f"{NS}.ex_opt_more")], answer=2, explanation=explain)


def averaging_pitfall() -> None:
    """Static (outside the seed's fragment): the numbers it is about are in the notice above it."""
    anatomy.pitfall(t(f"{NS}.pit_avg_title"), t(f"{NS}.pit_avg_body"), code=t(f"{NS}.pit_avg_code"))


def pick_head_and_query(tokens: list[str], num_heads: int) -> tuple[int, int]:
    """The two URL-bound select boxes; a click on the grid / on a row of the big heatmap sets them."""
    n, labels = len(tokens), unique_labels(tokens)
    controls.adopt_click("mh_grid", mc.HEAD_SELECTION, "head", "head", range(1, num_heads + 1))
    controls.adopt_click("mh_big", ROW_SELECTION, "query_pos", "q", range(n))
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


def model_controls() -> tuple[int, int, str]:
    """d_model, the number of heads and the kind of weights, in one row (the seed sits above the tabs)."""
    c1, c2, c4 = st.columns([3, 3, 3.4])
    d_model = c1.slider(t(f"{NS}.d_model"), D_MIN, D_MAX, D_DEFAULT, step=1, key="d", bind="query-params",
                        help=t(f"{NS}.d_model_help"))
    num_heads = c2.slider(t(f"{NS}.num_heads"), 1, H_MAX, H_DEFAULT, step=1, key="h", bind="query-params",
                          help=t(f"{NS}.num_heads_help"))
    with c4:
        url_guard.adopt_label("mode", lab.MODES, lambda o, lg: str(i18n.catalog(lg).get(f"{NS}.mode_{o}")))
        mode = st.segmented_control(t(f"{NS}.mode"), list(lab.MODES), default=lab.MODES[0], required=True,
                                    format_func=lambda m: t(f"{NS}.mode_{m}"), key="mode", bind="query-params",
                                    help=t(f"{NS}.mode_help")) or lab.MODES[0]
    return int(d_model), int(num_heads), mode


def sizes_ok(tokens: list[str] | None, d_model: int, num_heads: int) -> bool:
    """False (after a message) when the sentence or the sizes are bad."""
    if tokens is None:
        return False
    try:
        lab.parameter_count(d_model, num_heads)
    except HeadDivisibilityError as err:
        divisibility_problem(err.d_model, err.num_heads)
        return False
    return True


def seed_control() -> int:
    """The seed of the weights, right above the tabs it redraws (a narrow box: it needs 4 digits)."""
    return controls.seed(width=160)


def new_click(chart_key: str, selection: str, field: str) -> bool:
    """The chart's selection holds a click that ``controls.adopt_click`` has not adopted yet."""
    try:
        points = st.session_state[chart_key]["selection"][selection] or []
    except (KeyError, TypeError):
        return False
    points = points if isinstance(points, list) else [points]
    picked = next((int(p[field]) for p in points if isinstance(p, dict) and field in p), None)
    return picked is not None and picked != st.session_state.get(f"_{chart_key}_adopted")

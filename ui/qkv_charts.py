"""Charts of the Query-Key-Value page: frame builders (arrays in, DataFrames out), the chart kinds that
draw them (``ui.charts.chart_kind``: Altair builders, built once per static shape and filled per rerun),
and one small public function per chart that makes the frames and calls its kind.

Every word on a chart is passed in by the page (translated there); nothing here calls Streamlit. A chart
drawn from several frames gets them as a dict (one named dataset each).
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import altair as alt
import numpy as np
import pandas as pd

from .charts import Spec, as_numpy, chart_kind, label_spacing, thin_labels, unique_labels

QUERY_ORANGE = "#e66101"
KEY_BLUE = "#3b528b"
TRUTH_GREY = "#888888"
# one colour per book (no orange: orange is the query's colour everywhere on the page)
BOOK_COLOURS = ["#4e79a7", "#59a14f", "#e15759", "#76b7b2", "#b07aa1", "#edc948", "#9c755f", "#ff9da7",
                "#bab0ac", "#1b9e77", "#7570b3", "#66a61e"]
SIGN_COLOURS = ["#2166ac", "#e66101"]  # negative, positive (blue / orange, colour-blind safe)
PITFALL_COLOURS = [KEY_BLUE, QUERY_ORANGE, "#5ab4ac"]


def _vec(values) -> np.ndarray:
    """Tensor / array / list -> flat float64 array."""
    if hasattr(values, "detach"):
        values = values.detach().cpu().double().numpy()
    return np.asarray(values, dtype=np.float64).reshape(-1)


def _exact(values: np.ndarray) -> np.ndarray:
    return np.char.mod("%.6g", values)


def _book_colours(books: Sequence[str]) -> list[str]:
    return [BOOK_COLOURS[i % len(BOOK_COLOURS)] for i in range(len(books))]


# --- 1. kernel regression --------------------------------------------------------------------

class KernelLabels(NamedTuple):
    """The translated words of the kernel-regression chart."""
    x: str
    y: str
    weight: str         # "weight for x = 2.5": changes with the query
    truth: str
    fit: str            # "fit (h = 0.40)": changes with the bandwidth
    query: str
    prediction: str
    series: str         # legend title


def kernel_fit_frames(x_train, y_train, x_curve, y_true, y_fit, query_x: float, query_weights,
                      query_pred: float, labels: KernelLabels, weight_max: float = 1.0) -> dict[str, pd.DataFrame]:
    """The frames of ``kernel_fit``: the two curves, the training points, the query (with ``top``, the end of the
    weight colour scale: a number in the data, not in the spec, so a new sample swaps the data only)."""
    xt, yt, w = _vec(x_train), _vec(y_train), _vec(query_weights)
    xc = _vec(x_curve)
    curves = pd.DataFrame({    # float32 and a categorical series (each label sent once): a quarter of the bytes
        "x": np.concatenate([xc, xc]).astype(np.float32),
        "y": np.concatenate([_vec(y_true), _vec(y_fit)]).astype(np.float32),
        "series": pd.Categorical([labels.truth] * len(xc) + [labels.fit] * len(xc),
                                 categories=list(dict.fromkeys([labels.truth, labels.fit]))),
    })
    points = pd.DataFrame({"x": xt, "y": yt, "weight": w, "exact": _exact(w)})
    query = pd.DataFrame({"x": [float(query_x)], "y": [float(query_pred)], "exact": [f"{float(query_pred):.6g}"],
                          "top": [float(weight_max)]})
    return {"curves": curves, "points": points, "query": query}


# the weight colours end at the "top" of the query's data set (the heatmap's largest weight), read by Vega: the
# dots and the heatmap beside them share one colour scale, and the spec stays the same for a new sample
WEIGHT_TOP = "length(data('query')) ? data('query')[0].top : 1"


@chart_kind(fill=("series", "weight_title", "height"))
def kernel_fit_chart(data, *, x_title: str, y_title: str, series_title: str, query_title: str,
                     prediction_title: str, series=(), weight_title: str = "weight",
                     height: int = 420) -> alt.LayerChart:
    """Dot sizes run from 0 to the query's largest weight (Vega's domain of the dots' data), their colours from 0 to
    ``top`` (``WEIGHT_TOP``)."""
    x_enc = alt.X("x:Q", title=x_title, scale=alt.Scale(domain=[0, 5], nice=False))
    colour = alt.Color("series:N", title=series_title, scale=alt.Scale(domain=series, range=[TRUTH_GREY, KEY_BLUE]),
                       legend=alt.Legend(orient="bottom", direction="vertical"))    # one per line: fits 390 px
    lines = alt.Chart(data["curves"]).mark_line(strokeWidth=2.5).encode(
        x=x_enc, y=alt.Y("y:Q", title=y_title), color=colour,
        strokeDash=alt.StrokeDash("series:N", legend=None, scale=alt.Scale(domain=series, range=[[5, 4], [1, 0]])))
    dots = alt.Chart(data["points"]).mark_circle(stroke="black", strokeWidth=0.4).encode(
        x=x_enc, y="y:Q",
        size=alt.Size("weight:Q", scale=alt.Scale(domainMin=0, range=[12, 420]), legend=None),
        color=alt.Color("weight:Q", scale=alt.Scale(domainMin=0, domainMax=alt.ExprRef(WEIGHT_TOP),
                                                    scheme="viridis", clamp=True),
                        title=weight_title, legend=alt.Legend(orient="right")),
        tooltip=[alt.Tooltip("x:Q", title=x_title, format=".4f"), alt.Tooltip("y:Q", title=y_title, format=".4f"),
                 alt.Tooltip("exact:N", title=weight_title)])
    rule = alt.Chart(data["query"]).mark_rule(color=QUERY_ORANGE, strokeWidth=2).encode(x="x:Q")
    pred = alt.Chart(data["query"]).mark_point(shape="diamond", size=220, filled=True, color=QUERY_ORANGE,
                                               stroke="black", strokeWidth=0.8).encode(
        x="x:Q", y="y:Q", tooltip=[alt.Tooltip("x:Q", title=query_title, format=".3f"),
                                   alt.Tooltip("exact:N", title=prediction_title)])
    return alt.layer(lines, dots, rule, pred).resolve_scale(color="independent").properties(height=height)


def kernel_fit(x_train, y_train, x_curve, y_true, y_fit, *, query_x: float, query_weights, query_pred: float,
               labels: KernelLabels, height: int = 420, weight_max: float = 1.0) -> Spec:
    """Training points (size and colour = their weight for the chosen query), the true curve,
    the Nadaraya-Watson fit, and the chosen query as a vertical rule with its prediction.
    The weight colours span 0..``weight_max`` (match the heatmap next to it)."""
    frames = kernel_fit_frames(x_train, y_train, x_curve, y_true, y_fit, query_x, query_weights, query_pred, labels,
                               weight_max)
    return kernel_fit_chart(frames, x_title=labels.x, y_title=labels.y, series_title=labels.series,
                            query_title=labels.query, prediction_title=labels.prediction,
                            series=[labels.truth, labels.fit], weight_title=labels.weight, height=height)


# --- 2. the library --------------------------------------------------------------------------

class LibraryLabels(NamedTuple):
    """The translated words of the library charts."""
    feature: str
    contribution: str
    book: str
    weight: str
    value: str
    total: str
    score: str
    query: str
    projection: str


def library_mix_frames(contributions, weights, values, books: Sequence[str],
                       value_names: Sequence[str]) -> dict[str, pd.DataFrame]:
    c = as_numpy(contributions)
    w, books_u = _vec(weights), unique_labels(list(books))
    n, d = c.shape
    bars = pd.DataFrame({
        "feature": np.tile(list(value_names), n),
        "book": np.repeat(books_u, d),
        "order": np.repeat(np.arange(n), d),
        "weight": np.repeat(w, d),
        "value": as_numpy(values).ravel(),
        "part": c.ravel(),
        "exact": _exact(c.ravel()),
    })
    totals = pd.DataFrame({"feature": list(value_names), "total": c.sum(axis=0),
                           "text": [f"{v:.2f}" for v in c.sum(axis=0)]})
    return {"bars": bars, "totals": totals}


@chart_kind(fill=("features", "books", "colours"))
def library_mix_chart(data, *, labels: LibraryLabels, height: int, features=(), books=(),
                      colours=()) -> alt.LayerChart:
    y = alt.Y("feature:N", sort=features, title=labels.feature)
    bars = alt.Chart(data["bars"]).mark_bar(stroke="white", strokeWidth=0.5).encode(
        y=y, x=alt.X("part:Q", stack="zero", title=labels.contribution),
        color=alt.Color("book:N", sort=books, scale=alt.Scale(domain=books, range=colours), title=labels.book,
                        legend=alt.Legend(orient="right", labelLimit=170)),
        order=alt.Order("order:Q"),
        tooltip=[alt.Tooltip("book:N", title=labels.book),
                 alt.Tooltip("feature:N", title=labels.feature),
                 alt.Tooltip("weight:Q", title=labels.weight, format=".4f"),
                 alt.Tooltip("value:Q", title=labels.value, format=".4g"),
                 alt.Tooltip("exact:N", title=labels.contribution)])
    text = alt.Chart(data["totals"]).mark_text(align="left", dx=4, fontWeight="bold").encode(
        y=y, x=alt.X("total:Q"), text="text:N",
        tooltip=[alt.Tooltip("feature:N", title=labels.feature),
                 alt.Tooltip("total:Q", title=labels.total, format=".6g")])
    return alt.layer(bars, text).properties(height=height)


def library_mix(contributions, weights, values, books: Sequence[str], value_names: Sequence[str], *,
                labels: LibraryLabels, height: int = 200) -> Spec:
    """The answer as stacked bars: for every value feature, the parts w_i v_i of each book."""
    books_u = unique_labels(list(books))
    return library_mix_chart(library_mix_frames(contributions, weights, values, books, value_names),
                             labels=labels, height=height, features=list(value_names), books=books_u,
                             colours=_book_colours(books_u))


def book_bars_frame(values, books: Sequence[str]) -> pd.DataFrame:
    v = _vec(values)
    return pd.DataFrame({"book": unique_labels(list(books)), "value": v, "exact": _exact(v),
                         "text": [f"{x:.2f}" for x in v]})


@chart_kind(fill=("books", "colours", "height"))
def book_bars_chart(frame, *, value_title: str, book_title: str, domain=None, books=(), colours=(),
                    height: int = 130) -> alt.LayerChart:
    y = alt.Y("book:N", sort=books, title=book_title, axis=alt.Axis(labelLimit=170))
    x = alt.X("value:Q", title=value_title, scale=alt.Scale(domain=domain) if domain else alt.Undefined)
    tooltip = [alt.Tooltip("book:N", title=book_title), alt.Tooltip("exact:N", title=value_title)]
    bars = alt.Chart(frame).mark_bar().encode(
        y=y, x=x, tooltip=tooltip,
        color=alt.Color("book:N", sort=books, scale=alt.Scale(domain=books, range=colours), legend=None))
    text = alt.Chart(frame).mark_text(align="left", dx=3, fontSize=11).encode(
        y=y, x=alt.X("value:Q"), text="text:N", tooltip=tooltip)
    return alt.layer(bars, text).properties(height=height)


def book_bars(values, books: Sequence[str], *, value_title: str, book_title: str,
              domain: tuple[float, float] | None = None) -> Spec:
    """One number per book as horizontal bars in the book's colour (same colours as library_mix),
    with the value printed at the end of each bar."""
    frame = book_bars_frame(values, books)
    books_u = list(frame["book"])
    return book_bars_chart(frame, value_title=value_title, book_title=book_title,
                           domain=None if domain is None else [float(d) for d in domain], books=books_u,
                           colours=_book_colours(books_u), height=max(130, 34 * len(frame) + 50))


def library_plane_frames(keys2d, query2d, books: Sequence[str], scores, weights,
                         query_name: str) -> tuple[dict[str, pd.DataFrame], float]:
    """The frames of ``library_plane`` (the query's line, the keys, the query) and the axes' reach."""
    k, q = as_numpy(keys2d), _vec(query2d)
    reach = max(1.0, float(np.abs(k).max(initial=0.0))) * 1.25
    qn = float(np.linalg.norm(q))
    qhat = q / qn if qn > 0 else np.zeros(2)
    q_draw = qhat * reach / 1.25
    shadow = (k @ qhat)[:, None] * qhat[None, :]                     # foot of each key on the q line
    keys = pd.DataFrame({"x": k[:, 0], "y": k[:, 1], "x0": 0.0, "y0": 0.0, "book": unique_labels(list(books)),
                         "score": _vec(scores), "weight": _vec(weights), "px": shadow[:, 0], "py": shadow[:, 1],
                         "along": k @ qhat})
    query = pd.DataFrame({"x": [q_draw[0]], "y": [q_draw[1]], "x0": [0.0], "y0": [0.0], "name": [query_name]})
    line = pd.DataFrame({"x": [-reach * qhat[0], reach * qhat[0]], "y": [-reach * qhat[1], reach * qhat[1]]})
    return {"line": line, "keys": keys, "query": query}, reach


@chart_kind(fill=("domain", "x_title", "y_title", "books", "colours"))
def library_plane_chart(data, *, labels: LibraryLabels, size: int, domain=(-1, 1), x_title: str = "x",
                        y_title: str = "y", books=(), colours=()) -> alt.LayerChart:
    scale = alt.Scale(domain=domain, nice=False)
    X, Y = alt.X("x:Q", scale=scale, title=x_title), alt.Y("y:Q", scale=scale, title=y_title)
    X0, Y0 = alt.X("x0:Q", scale=scale, title=x_title), alt.Y("y0:Q", scale=scale, title=y_title)
    colour = alt.Color("book:N", sort=books, scale=alt.Scale(domain=books, range=colours), title=labels.book,
                       legend=None)
    tooltip = [alt.Tooltip("book:N", title=labels.book),
               alt.Tooltip("score:Q", title=labels.score, format=".4f"),
               alt.Tooltip("weight:Q", title=labels.weight, format=".4f"),
               alt.Tooltip("along:Q", title=labels.projection, format=".4f")]
    keys, query = alt.Chart(data["keys"]), alt.Chart(data["query"])
    layers = [
        alt.Chart(data["line"]).mark_line(color=QUERY_ORANGE, strokeDash=[6, 4], opacity=0.7).encode(X, Y),
        keys.mark_rule(color="#999999", strokeDash=[2, 3]).encode(X, Y, x2="px:Q", y2="py:Q"),
        keys.mark_rule(strokeWidth=2.5).encode(X0, Y0, x2="x:Q", y2="y:Q", color=colour, tooltip=tooltip),
        keys.mark_circle(stroke="black", strokeWidth=0.6, opacity=1).encode(
            X, Y, color=colour, tooltip=tooltip,
            size=alt.Size("weight:Q", scale=alt.Scale(domain=[0, 1], range=[30, 700]), legend=None)),
        query.mark_rule(color=QUERY_ORANGE, strokeWidth=4).encode(X0, Y0, x2="x:Q", y2="y:Q"),
        query.mark_point(shape="diamond", size=160, filled=True, color=QUERY_ORANGE).encode(X, Y),
        query.mark_text(align="left", dx=8, dy=-8, fontWeight="bold", fontSize=14,
                        color=QUERY_ORANGE).encode(X, Y, text="name:N"),
    ]
    return alt.layer(*layers).properties(width=size, height=size)


def library_plane(keys2d, query2d, books: Sequence[str], scores, weights, *, labels: LibraryLabels,
                  x_title: str, y_title: str, size: int = 380) -> Spec:
    """Keys as arrows from the origin in one plane of the key space, coloured like the books
    elsewhere, the dot at each tip sized by the book's weight; the query's direction in orange.

    The query arrow is drawn with the length of the longest key (its direction is what matters
    for alignment; its length |q| multiplies every score). The dotted segments drop each key onto
    the query's line: the signed length of that shadow, times |q|, is the in-plane part of the score.
    """
    frames, reach = library_plane_frames(keys2d, query2d, books, scores, weights, labels.query)
    books_u = list(frames["keys"]["book"])
    return library_plane_chart(frames, labels=labels, size=size, domain=[-reach, reach], x_title=x_title,
                               y_title=y_title, books=books_u, colours=_book_colours(books_u))


# --- 3. tokens: neuron view and the pitfall comparison ------------------------------------------

def products_frame(values) -> pd.DataFrame:
    p = _vec(values)
    return pd.DataFrame({"dim": np.arange(len(p)), "product": p, "exact": _exact(p), "positive": p >= 0})


@chart_kind(fill=())
def products_chart(frame, *, dim_title: str, product_title: str, height: int = 200) -> alt.Chart:
    return alt.Chart(frame).mark_bar().encode(
        x=alt.X("dim:O", title=dim_title, axis=alt.Axis(labelAngle=0, labelOverlap=True)),
        y=alt.Y("product:Q", title=product_title),
        color=alt.Color("positive:N", scale=alt.Scale(domain=[False, True], range=SIGN_COLOURS), legend=None),
        tooltip=[alt.Tooltip("dim:O", title=dim_title), alt.Tooltip("exact:N", title=product_title)],
    ).properties(height=height)


def products(values, *, dim_title: str, product_title: str, height: int = 200) -> Spec:
    """The element-wise products q_j k_j as signed bars (orange adds to the score, blue takes away)."""
    return products_chart(products_frame(values), dim_title=dim_title, product_title=product_title,
                          height=height)


def grouped_rows_frame(rows: dict[str, object], keys: Sequence[str]) -> pd.DataFrame:
    keys_u = unique_labels(list(keys))
    return pd.concat([pd.DataFrame({"key": keys_u, "series": name, "weight": _vec(row), "exact": _exact(_vec(row))})
                      for name, row in rows.items()], ignore_index=True)


@chart_kind(fill=("keys", "series", "domain"))
def grouped_rows_chart(frame, *, key_title: str, weight_title: str, series_title: str, colours: tuple,
                       keys=(), series=(), domain=(0, 1), height: int = 340) -> alt.Chart:
    return alt.Chart(frame).mark_bar().encode(
        # every key labelled where the bands allow (the page quotes keys); thinned, never hidden by Vega
        x=alt.X("key:N", sort=keys, title=key_title,
                axis=alt.Axis(labelAngle=-45, labelOverlap=False, labelFlush=False,
                              labelExpr=thin_labels("x", label_spacing(["xx"], upright=False)))),
        xOffset=alt.XOffset("series:N", sort=series),
        y=alt.Y("weight:Q", title=weight_title, scale=alt.Scale(domain=domain)),
        color=alt.Color("series:N", sort=series, title=series_title, scale=alt.Scale(range=list(colours)),
                        legend=alt.Legend(orient="bottom", direction="vertical", labelLimit=320, titleLimit=400)),
        tooltip=[alt.Tooltip("series:N", title=series_title), alt.Tooltip("key:N", title=key_title),
                 alt.Tooltip("exact:N", title=weight_title)],
    ).properties(height=height)


def grouped_rows(rows: dict[str, object], keys: Sequence[str], *, key_title: str, weight_title: str,
                 series_title: str, height: int = 340) -> Spec:
    """Several weight rows over the same keys as grouped bars (one colour per way of computing them);
    the weight axis runs from 0 to just above the largest bar so small differences stay visible."""
    frame = grouped_rows_frame(rows, keys)
    top = min(1.0, max(0.1, 1.15 * float(frame["weight"].max())))
    return grouped_rows_chart(frame, key_title=key_title, weight_title=weight_title, series_title=series_title,
                              colours=tuple(PITFALL_COLOURS[:len(rows)]), keys=unique_labels(list(keys)),
                              series=list(rows), domain=[0, top], height=height)


# --- formulas drawn next to the charts (LaTeX) -----------------------------------------------

# each formula in lines that fit a phone's column (about 330 px), aligned at "=" where it has one
STAGE_LATEX = {
    1: r"\begin{gathered}X \in \mathbb{R}^{%N \times %D},\quad Q, K, V \in \mathbb{R}^{%N \times %K}\\"
       r"Q = X W_Q,\; K = X W_K,\; V = X W_V\end{gathered}\,",
    2: r"\begin{aligned}S &= Q K^\top \in \mathbb{R}^{%N \times %N}\\ S_{ij} &= q_i \cdot k_j "
       r"= \sum_{m=1}^{%K} q_{im} k_{jm}\end{aligned}\,",
    3: r"S' = \frac{Q K^\top}{\sqrt{d_k}} = \frac{S}{\sqrt{%K}}",
    4: r"\begin{gathered}A = \operatorname{softmax}(S'),\qquad \sum_j A_{ij} = 1\\"
       r"A_{ij} = \frac{e^{S'_{ij}}}{\sum_{l} e^{S'_{il}}}\end{gathered}\,",
    5: r"\begin{gathered}O = A V \in \mathbb{R}^{%N \times %K}\\ o_i = \sum_j A_{ij}\, v_j\end{gathered}\,",
}
SIMILARITY_LATEX = {
    "additive": r"a(q, k) = v^\top \tanh(W_q q + W_k k)",
    "dot": r"a(q, k) = q \cdot k",
    "scaled": r"a(q, k) = \frac{q \cdot k}{\sqrt{d_k}}",
}


def stage_formula(stage: int, n: int, d_model: int, d_k: int) -> str:
    """The step-through's formula of ``stage`` (1..5) with the sizes now on screen."""
    return STAGE_LATEX[stage].replace("%N", str(n)).replace("%D", str(d_model)).replace("%K", str(d_k))


def similarity_table(stats: Sequence, names: Sequence[str], rows: dict[str, str]) -> pd.DataFrame:
    """One column per similarity function (additive, dot, scaled dot: ``labs.qkv.SimilarityStats``, in that
    order), one row per measure: its parameters (formula and count), the mean largest weight, the mean entropy,
    the lowest and highest score. ``rows``: the translated row titles by name (measure: the first column's
    title; param_formula, params, max, entropy, score_min, score_max). Four narrow columns fit a phone."""
    cells = {
        "param_formula": ["h·(d_q + d_k + 1)", "0", "0"],
        "params": [f"{s.parameters:,}" for s in stats],
        "max": [f"{s.max_weight:.4f}" for s in stats],
        "entropy": [f"{s.entropy:.4f}" for s in stats],
        "score_min": [f"{float(s.scores.min()):.2f}" for s in stats],
        "score_max": [f"{float(s.scores.max()):.2f}" for s in stats],
    }
    frame = pd.DataFrame({rows["measure"]: [rows[k] for k in cells]})
    for j, name in enumerate(names):
        frame[name] = [cells[k][j] for k in cells]
    return frame

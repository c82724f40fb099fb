"""Altair charts of the Query-Key-Value page (pure builders: arrays in, ``alt.Chart`` out).

Every word on a chart is passed in by the page (translated there); nothing here calls Streamlit.
"""
from __future__ import annotations

from collections.abc import Sequence

import altair as alt
import numpy as np
import pandas as pd

from .charts import as_numpy, heatmap_frame, respec, unique_labels

QUERY_ORANGE = "#e66101"
KEY_BLUE = "#3b528b"
TRUTH_GREY = "#888888"
# one colour per book (no orange: orange is the query's colour everywhere on the page)
BOOK_COLOURS = ["#4e79a7", "#59a14f", "#e15759", "#76b7b2", "#b07aa1", "#edc948", "#9c755f", "#ff9da7",
                "#bab0ac", "#1b9e77", "#7570b3", "#66a61e"]
SIGN_COLOURS = ("#2166ac", "#e66101")  # negative, positive (blue / orange, colour-blind safe)


def _vec(values) -> np.ndarray:
    """Tensor / array / list -> flat float64 array."""
    if hasattr(values, "detach"):
        values = values.detach().cpu().double().numpy()
    return np.asarray(values, dtype=np.float64).reshape(-1)


def _book_scale(books: Sequence[str]) -> alt.Scale:
    colours = [BOOK_COLOURS[i % len(BOOK_COLOURS)] for i in range(len(books))]
    return alt.Scale(domain=list(books), range=colours)


def _fmt(values: np.ndarray) -> np.ndarray:
    return np.char.mod("%.6g", values)


def _one_frame(**pieces: pd.DataFrame) -> pd.DataFrame:
    """A chart's frames as one, each row tagged with its ``piece`` (ui.charts.to_spec ships one dataset)."""
    return pd.concat([frame.assign(piece=name) for name, frame in pieces.items()], ignore_index=True)


def _piece(name: str) -> alt.Chart:
    """A layer that draws one piece of the chart's frame."""
    return alt.Chart().transform_filter(alt.datum.piece == name)


# --- 1. kernel regression --------------------------------------------------------------------

def _kernel_fit_frame(x_train, y_train, x_curve, y_true, y_fit, query_x: float, query_weights,
                      query_pred: float, labels: dict[str, str]) -> pd.DataFrame:
    """The one frame of ``kernel_fit``: pieces curves, points and query."""
    xt, yt, w = _vec(x_train), _vec(y_train), _vec(query_weights)
    xc = _vec(x_curve)
    curves = pd.DataFrame({
        "x": np.concatenate([xc, xc]),
        "y": np.concatenate([_vec(y_true), _vec(y_fit)]),
        "series": [labels["truth"]] * len(xc) + [labels["fit"]] * len(xc),
    })
    points = pd.DataFrame({"x": xt, "y": yt, "weight": w, "exact": _fmt(w)})
    query = pd.DataFrame({"x": [float(query_x)], "y": [float(query_pred)],
                          "exact": [f"{float(query_pred):.6g}"]})
    return _one_frame(curves=curves, points=points, query=query)


def _size_max(query_weights) -> float:
    return max(float(_vec(query_weights).max()), 1e-9)


def kernel_fit(x_train, y_train, x_curve, y_true, y_fit, *, query_x: float, query_weights, query_pred: float,
               labels: dict[str, str], height: int = 420, weight_max: float = 1.0) -> alt.Chart:
    """Training points (size and colour = their weight for the chosen query), the true curve,
    the Nadaraya-Watson fit, and the chosen query as a vertical rule with its prediction.
    The weight colours span 0..``weight_max`` (match the heatmap next to it).

    ``labels``: x, y, weight, truth, fit, query, prediction, series (legend title).
    """
    x_enc = alt.X("x:Q", title=labels["x"], scale=alt.Scale(domain=[0, 5], nice=False))
    colour = alt.Color("series:N", title=labels["series"],
                       scale=alt.Scale(domain=[labels["truth"], labels["fit"]], range=[TRUTH_GREY, KEY_BLUE]),
                       legend=alt.Legend(orient="bottom"))
    lines = _piece("curves").mark_line(strokeWidth=2.5).encode(
        x=x_enc, y=alt.Y("y:Q", title=labels["y"]), color=colour,
        strokeDash=alt.StrokeDash("series:N", legend=None, scale=alt.Scale(
            domain=[labels["truth"], labels["fit"]], range=[[5, 4], [1, 0]])))
    dots = _piece("points").mark_circle(stroke="black", strokeWidth=0.4).encode(
        x=x_enc, y="y:Q",
        size=alt.Size("weight:Q", scale=alt.Scale(domain=[0, _size_max(query_weights)], range=[12, 420]),
                      legend=None),
        color=alt.Color("weight:Q", scale=alt.Scale(domain=[0, weight_max], scheme="viridis", clamp=True),
                        title=labels["weight"], legend=alt.Legend(orient="right")),
        tooltip=[alt.Tooltip("x:Q", title=labels["x"], format=".4f"), alt.Tooltip("y:Q", title=labels["y"],
                                                                             format=".4f"),
                 alt.Tooltip("exact:N", title=labels["weight"])])
    rule = _piece("query").mark_rule(color=QUERY_ORANGE, strokeWidth=2).encode(x="x:Q")
    pred = _piece("query").mark_point(shape="diamond", size=220, filled=True, color=QUERY_ORANGE,
                                       stroke="black", strokeWidth=0.8).encode(
        x="x:Q", y="y:Q", tooltip=[alt.Tooltip("x:Q", title=labels["query"], format=".3f"),
                                   alt.Tooltip("exact:N", title=labels["prediction"])])
    frame = _kernel_fit_frame(x_train, y_train, x_curve, y_true, y_fit, query_x, query_weights, query_pred,
                              labels)
    return alt.layer(lines, dots, rule, pred, data=frame).resolve_scale(color="independent").properties(
        height=height)


def kernel_fit_like(skeleton: dict, x_train, y_train, x_curve, y_true, y_fit, *, query_x: float, query_weights,
                    query_pred: float, labels: dict[str, str], weight_max: float = 1.0) -> dict:
    """The spec of ``kernel_fit(...)`` made from the finished spec (``ui.charts.to_spec``) of another
    kernel_fit with the same height and labels (``labels["fit"]`` may differ): new frame, new legend
    entries of the two curves, new domains of the weight size and colour (``ui.charts.respec``).
    A test checks the result equals a freshly built spec."""
    series = [labels["truth"], labels["fit"]]
    return respec(skeleton, _kernel_fit_frame(x_train, y_train, x_curve, y_true, y_fit, query_x, query_weights,
                                              query_pred, labels),
                  domain={("color", "series"): series, ("strokeDash", "series"): series,
                          ("size", "weight"): [0, _size_max(query_weights)], ("color", "weight"): [0, weight_max]})


def weights_heatmap_like(skeleton: dict, matrix, row_labels: Sequence[str], col_labels: Sequence[str], *,
                         outline: int | None = None, domain: tuple[float, float] = (0.0, 1.0)) -> dict:
    """The spec of a kind="weights" ``ui.charts.heatmap`` (optionally with ``outline_row``) made from the
    finished spec of another one with the same shape and options (``ui.charts.respec``): new data, axis
    orders, outlined row and colour domain. A test checks it equals a freshly built spec."""
    frame, factor = heatmap_frame(matrix, row_labels, col_labels)
    if factor != 1:
        raise ValueError("weights_heatmap_like handles unpooled heatmaps only")
    rows, cols = unique_labels(list(row_labels)), unique_labels(list(col_labels))
    if outline is not None:
        frame = frame.assign(outlined=frame["query"] == rows[outline])
    return respec(skeleton, frame, sort={"query": rows, "key": cols}, domain={("color", "value"): list(domain)})


def outline_row(chart: alt.LayerChart, row_labels: Sequence[str], row: int) -> alt.LayerChart:
    """An orange frame around one query row of a ui.charts.heatmap (the query now shown elsewhere):
    the row is flagged in the heatmap's own frame (column ``outlined``) and framed by one more layer."""
    order = unique_labels(list(row_labels))
    box = alt.Chart().transform_filter(alt.datum.outlined).transform_aggregate(groupby=["query"]).mark_rect(
        fill=None, stroke=QUERY_ORANGE, strokeWidth=2.5).encode(y=alt.Y("query:N", sort=order))
    framed = chart.copy()
    framed.data = chart.data.assign(outlined=chart.data["query"] == order[row])
    framed.layer = [*chart.layer, box]
    return framed


# --- 2. the library --------------------------------------------------------------------------

def library_mix(contributions, weights, values, books: Sequence[str], value_names: Sequence[str], *,
                labels: dict[str, str], height: int = 200) -> alt.Chart:
    """The answer as stacked bars: for every value feature, the parts w_i v_i of each book.

    ``labels``: feature, contribution, book, weight, value, total.
    """
    c = as_numpy(contributions)
    w, books_u = _vec(weights), unique_labels(list(books))
    vals = as_numpy(values)
    n, d = c.shape
    frame = pd.DataFrame({
        "feature": np.tile(list(value_names), n),
        "book": np.repeat(books_u, d),
        "order": np.repeat(np.arange(n), d),
        "weight": np.repeat(w, d),
        "value": vals.ravel(),
        "part": c.ravel(),
        "exact": _fmt(c.ravel()),
    })
    totals = pd.DataFrame({"feature": list(value_names), "total": c.sum(axis=0),
                           "text": [f"{v:.2f}" for v in c.sum(axis=0)]})
    y = alt.Y("feature:N", sort=list(value_names), title=labels["feature"])
    bars = _piece("bars").mark_bar(stroke="white", strokeWidth=0.5).encode(
        y=y, x=alt.X("part:Q", stack="zero", title=labels["contribution"]),
        color=alt.Color("book:N", sort=books_u, scale=_book_scale(books_u), title=labels["book"],
                        legend=alt.Legend(orient="right", labelLimit=170)),
        order=alt.Order("order:Q"),
        tooltip=[alt.Tooltip("book:N", title=labels["book"]),
                 alt.Tooltip("feature:N", title=labels["feature"]),
                 alt.Tooltip("weight:Q", title=labels["weight"], format=".4f"),
                 alt.Tooltip("value:Q", title=labels["value"], format=".4g"),
                 alt.Tooltip("exact:N", title=labels["contribution"])])
    text = _piece("totals").mark_text(align="left", dx=4, fontWeight="bold").encode(
        y=y, x=alt.X("total:Q"), text="text:N",
        tooltip=[alt.Tooltip("feature:N", title=labels["feature"]),
                 alt.Tooltip("total:Q", title=labels["total"], format=".6g")])
    return alt.layer(bars, text, data=_one_frame(bars=frame, totals=totals)).properties(height=height)


def book_bars(values, books: Sequence[str], *, value_title: str, book_title: str,
              domain: tuple[float, float] | None = None, height: int | None = None) -> alt.Chart:
    """One number per book as horizontal bars in the book's colour (same colours as library_mix),
    with the value printed at the end of each bar."""
    v = _vec(values)
    books_u = unique_labels(list(books))
    frame = pd.DataFrame({"book": books_u, "value": v, "exact": _fmt(v), "text": [f"{x:.2f}" for x in v]})
    y = alt.Y("book:N", sort=books_u, title=book_title, axis=alt.Axis(labelLimit=170))
    x = alt.X("value:Q", title=value_title, scale=alt.Scale(domain=list(domain)) if domain else alt.Undefined)
    tooltip = [alt.Tooltip("book:N", title=book_title), alt.Tooltip("exact:N", title=value_title)]
    bars = alt.Chart(frame).mark_bar().encode(
        y=y, x=x, tooltip=tooltip,
        color=alt.Color("book:N", sort=books_u, scale=_book_scale(books_u), legend=None))
    text = alt.Chart(frame).mark_text(align="left", dx=3, fontSize=11).encode(
        y=y, x=alt.X("value:Q"), text="text:N", tooltip=tooltip)
    return alt.layer(bars, text).properties(height=height or max(130, 34 * len(v) + 50))


def library_plane(keys2d, query2d, books: Sequence[str], scores, weights, *, labels: dict[str, str],
                  size: int = 380) -> alt.Chart:
    """Keys as arrows from the origin in one plane of the key space, coloured like the books
    elsewhere, the dot at each tip sized by the book's weight; the query's direction in orange.

    The query arrow is drawn with the length of the longest key (its direction is what matters
    for alignment; its length |q| multiplies every score). The dotted segments drop each key onto
    the query's line: the signed length of that shadow, times |q|, is the in-plane part of the score.
    ``labels``: x, y, book, score, weight, query, projection.
    """
    k = as_numpy(keys2d)
    q = _vec(query2d)
    books_u = unique_labels(list(books))
    s, w = _vec(scores), _vec(weights)
    reach = max(1.0, float(np.abs(k).max(initial=0.0))) * 1.25
    qn = float(np.linalg.norm(q))
    qhat = q / qn if qn > 0 else np.zeros(2)
    q_draw = qhat * reach / 1.25
    shadow = (k @ qhat)[:, None] * qhat[None, :]                     # foot of each key on the q line
    keys = pd.DataFrame({"x": k[:, 0], "y": k[:, 1], "x0": 0.0, "y0": 0.0, "book": books_u,
                         "score": s, "weight": w, "px": shadow[:, 0], "py": shadow[:, 1],
                         "along": k @ qhat})
    qf = pd.DataFrame({"x": [q_draw[0]], "y": [q_draw[1]], "x0": [0.0], "y0": [0.0],
                       "name": [labels["query"]]})
    line = pd.DataFrame({"x": [-reach * qhat[0], reach * qhat[0]], "y": [-reach * qhat[1], reach * qhat[1]]})
    sx = alt.Scale(domain=[-reach, reach], nice=False)
    sy = alt.Scale(domain=[-reach, reach], nice=False)
    X, Y = alt.X("x:Q", scale=sx, title=labels["x"]), alt.Y("y:Q", scale=sy, title=labels["y"])
    X0, Y0 = alt.X("x0:Q", scale=sx, title=labels["x"]), alt.Y("y0:Q", scale=sy, title=labels["y"])
    colour = alt.Color("book:N", sort=books_u, scale=_book_scale(books_u), title=labels["book"], legend=None)
    tooltip = [alt.Tooltip("book:N", title=labels["book"]),
               alt.Tooltip("score:Q", title=labels["score"], format=".4f"),
               alt.Tooltip("weight:Q", title=labels["weight"], format=".4f"),
               alt.Tooltip("along:Q", title=labels["projection"], format=".4f")]
    layers = [
        _piece("line").mark_line(color=QUERY_ORANGE, strokeDash=[6, 4], opacity=0.7).encode(X, Y),
        _piece("keys").mark_rule(color="#999999", strokeDash=[2, 3]).encode(X, Y, x2="px:Q", y2="py:Q"),
        _piece("keys").mark_rule(strokeWidth=2.5).encode(X0, Y0, x2="x:Q", y2="y:Q", color=colour,
                                                         tooltip=tooltip),
        _piece("keys").mark_circle(stroke="black", strokeWidth=0.6, opacity=1).encode(
            X, Y, color=colour, tooltip=tooltip,
            size=alt.Size("weight:Q", scale=alt.Scale(domain=[0, 1], range=[30, 700]), legend=None)),
        _piece("query").mark_rule(color=QUERY_ORANGE, strokeWidth=4).encode(X0, Y0, x2="x:Q", y2="y:Q"),
        _piece("query").mark_point(shape="diamond", size=160, filled=True, color=QUERY_ORANGE).encode(X, Y),
        _piece("query").mark_text(align="left", dx=8, dy=-8, fontWeight="bold", fontSize=14,
                                  color=QUERY_ORANGE).encode(X, Y, text="name:N"),
    ]
    frame = _one_frame(line=line, keys=keys, query=qf)
    return alt.layer(*layers, data=frame).properties(width=size, height=size)


# --- 3. tokens: neuron view and the pitfall comparison ------------------------------------------

def products(values, *, labels: dict[str, str], height: int = 200) -> alt.Chart:
    """The element-wise products q_j k_j as signed bars (orange adds to the score, blue takes away).

    ``labels``: dim, product.
    """
    p = _vec(values)
    frame = pd.DataFrame({"dim": np.arange(len(p)), "product": p, "exact": _fmt(p), "positive": p >= 0})
    return alt.Chart(frame).mark_bar().encode(
        x=alt.X("dim:O", title=labels["dim"], axis=alt.Axis(labelAngle=0, labelOverlap=True)),
        y=alt.Y("product:Q", title=labels["product"]),
        color=alt.Color("positive:N", scale=alt.Scale(domain=[False, True], range=list(SIGN_COLOURS)),
                        legend=None),
        tooltip=[alt.Tooltip("dim:O", title=labels["dim"]), alt.Tooltip("exact:N", title=labels["product"])],
    ).properties(height=height)


def grouped_rows(rows: dict[str, object], keys: Sequence[str], *, labels: dict[str, str],
                 height: int = 340) -> alt.Chart:
    """Several weight rows over the same keys as grouped bars (one colour per way of computing them);
    the weight axis runs from 0 to just above the largest bar so small differences stay visible.

    ``labels``: key, weight, series.
    """
    names = list(rows)
    keys_u = unique_labels(list(keys))
    frames = []
    for name in names:
        v = _vec(rows[name])
        frames.append(pd.DataFrame({"key": keys_u, "series": name, "weight": v, "exact": _fmt(v)}))
    frame = pd.concat(frames, ignore_index=True)
    return alt.Chart(frame).mark_bar().encode(
        x=alt.X("key:N", sort=keys_u, title=labels["key"], axis=alt.Axis(labelAngle=-45, labelOverlap=True)),
        xOffset=alt.XOffset("series:N", sort=names),
        y=alt.Y("weight:Q", title=labels["weight"],
                scale=alt.Scale(domain=[0, min(1.0, max(0.1, 1.15 * float(frame["weight"].max())))])),
        color=alt.Color("series:N", sort=names, title=labels["series"],
                        scale=alt.Scale(range=[KEY_BLUE, QUERY_ORANGE, "#5ab4ac"][:len(names)]),
                        legend=alt.Legend(orient="bottom", labelLimit=320, titleLimit=400)),
        tooltip=[alt.Tooltip("series:N", title=labels["series"]), alt.Tooltip("key:N", title=labels["key"]),
                 alt.Tooltip("exact:N", title=labels["weight"])],
    ).properties(height=height)

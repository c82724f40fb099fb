"""Altair charts of the Query-Key-Value page (pure builders: arrays in, ``alt.Chart`` out).

Every word on a chart is passed in by the page (translated there); nothing here calls Streamlit.
"""
from __future__ import annotations

from collections.abc import Sequence

import altair as alt
import numpy as np
import pandas as pd

from .charts import as_numpy, unique_labels

QUERY_ORANGE = "#e66101"
KEY_BLUE = "#3b528b"
TRUTH_GREY = "#888888"
BOOK_SCHEME = "tableau10"
SIGN_COLOURS = ("#2166ac", "#e66101")  # negative, positive (blue / orange, colour-blind safe)


def _vec(values) -> np.ndarray:
    """Tensor / array / list -> flat float64 array."""
    if hasattr(values, "detach"):
        values = values.detach().cpu().double().numpy()
    return np.asarray(values, dtype=np.float64).reshape(-1)


def _fmt(values: np.ndarray) -> np.ndarray:
    return np.char.mod("%.6g", values)


# --- 1. kernel regression --------------------------------------------------------------------

def kernel_fit(x_train, y_train, x_curve, y_true, y_fit, *, query_x: float, query_weights, query_pred: float,
               labels: dict[str, str], height: int = 420) -> alt.Chart:
    """Training points (size and colour = their weight for the chosen query), the true curve,
    the Nadaraya-Watson fit, and the chosen query as a vertical rule with its prediction.

    ``labels``: x, y, weight, truth, fit, query, prediction, series (legend title).
    """
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
    x_enc = alt.X("x:Q", title=labels["x"], scale=alt.Scale(domain=[0, 5], nice=False))
    colour = alt.Color("series:N", title=labels["series"],
                       scale=alt.Scale(domain=[labels["truth"], labels["fit"]], range=[TRUTH_GREY, KEY_BLUE]),
                       legend=alt.Legend(orient="bottom"))
    lines = alt.Chart(curves).mark_line(strokeWidth=2.5).encode(
        x=x_enc, y=alt.Y("y:Q", title=labels["y"]), color=colour,
        strokeDash=alt.StrokeDash("series:N", legend=None,
                                  scale=alt.Scale(domain=[labels["truth"], labels["fit"]], range=[[5, 4], [1, 0]])))
    dots = alt.Chart(points).mark_circle(stroke="black", strokeWidth=0.4).encode(
        x=x_enc, y="y:Q",
        size=alt.Size("weight:Q", scale=alt.Scale(domain=[0, max(float(w.max()), 1e-9)], range=[12, 420]),
                      legend=None),
        color=alt.Color("weight:Q", scale=alt.Scale(domain=[0, 1], scheme="viridis", clamp=True),
                        title=labels["weight"], legend=alt.Legend(orient="right")),
        tooltip=[alt.Tooltip("x:Q", title=labels["x"], format=".4f"), alt.Tooltip("y:Q", title=labels["y"],
                                                                             format=".4f"),
                 alt.Tooltip("exact:N", title=labels["weight"])])
    rule = alt.Chart(query).mark_rule(color=QUERY_ORANGE, strokeWidth=2).encode(x="x:Q")
    pred = alt.Chart(query).mark_point(shape="diamond", size=220, filled=True, color=QUERY_ORANGE,
                                       stroke="black", strokeWidth=0.8).encode(
        x="x:Q", y="y:Q", tooltip=[alt.Tooltip("x:Q", title=labels["query"], format=".3f"),
                                   alt.Tooltip("exact:N", title=labels["prediction"])])
    return alt.layer(lines, dots, rule, pred).resolve_scale(color="independent").properties(height=height)


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
    bars = alt.Chart(frame).mark_bar(stroke="white", strokeWidth=0.5).encode(
        y=y, x=alt.X("part:Q", stack="zero", title=labels["contribution"]),
        color=alt.Color("book:N", sort=books_u, scale=alt.Scale(scheme=BOOK_SCHEME), title=labels["book"],
                        legend=alt.Legend(orient="bottom", columns=3, labelLimit=160)),
        order=alt.Order("order:Q"),
        tooltip=[alt.Tooltip("book:N", title=labels["book"]), alt.Tooltip("feature:N", title=labels["feature"]),
                 alt.Tooltip("weight:Q", title=labels["weight"], format=".4f"),
                 alt.Tooltip("value:Q", title=labels["value"], format=".4g"),
                 alt.Tooltip("exact:N", title=labels["contribution"])])
    text = alt.Chart(totals).mark_text(align="left", dx=4, fontWeight="bold").encode(
        y=y, x=alt.X("total:Q"), text="text:N",
        tooltip=[alt.Tooltip("feature:N", title=labels["feature"]),
                 alt.Tooltip("total:Q", title=labels["total"], format=".6g")])
    return alt.layer(bars, text).properties(height=height)


def library_plane(keys2d, query2d, books: Sequence[str], scores, weights, *, labels: dict[str, str],
                  size: int = 380) -> alt.Chart:
    """Query and keys as arrows from the origin in one plane of the key space.

    The dashed line is the query's direction; the dotted segments drop each key onto it, so the
    length of a key's shadow along q (times |q|) is the in-plane part of its score.
    ``labels``: x, y, book, score, weight, query, projection.
    """
    k = as_numpy(keys2d)
    q = _vec(query2d)
    books_u = unique_labels(list(books))
    s, w = _vec(scores), _vec(weights)
    reach = max(1.0, float(np.abs(k).max(initial=0.0)), float(np.abs(q).max(initial=0.0))) * 1.15
    qn = float(np.linalg.norm(q))
    qhat = q / qn if qn > 0 else np.zeros(2)
    shadow = (k @ qhat)[:, None] * qhat[None, :]                     # foot of each key on the q line
    keys = pd.DataFrame({"x": k[:, 0], "y": k[:, 1], "x0": 0.0, "y0": 0.0, "book": books_u,
                         "score": s, "weight": w, "px": shadow[:, 0], "py": shadow[:, 1],
                         "along": k @ qhat})
    qf = pd.DataFrame({"x": [q[0]], "y": [q[1]], "x0": [0.0], "y0": [0.0], "name": [labels["query"]]})
    line = pd.DataFrame({"x": [-reach * qhat[0], reach * qhat[0]], "y": [-reach * qhat[1], reach * qhat[1]]})
    sx = alt.Scale(domain=[-reach, reach], nice=False)
    sy = alt.Scale(domain=[-reach, reach], nice=False)
    X, Y = alt.X("x:Q", scale=sx, title=labels["x"]), alt.Y("y:Q", scale=sy, title=labels["y"])
    tooltip = [alt.Tooltip("book:N", title=labels["book"]), alt.Tooltip("score:Q", title=labels["score"], format=".4f"),
               alt.Tooltip("weight:Q", title=labels["weight"], format=".4f"),
               alt.Tooltip("along:Q", title=labels["projection"], format=".4f")]
    layers = [
        alt.Chart(line).mark_line(color=QUERY_ORANGE, strokeDash=[6, 4], opacity=0.6).encode(X, Y),
        alt.Chart(keys).mark_rule(color="#999999", strokeDash=[2, 3]).encode(X, Y, x2="px:Q", y2="py:Q"),
        alt.Chart(keys).mark_rule(strokeWidth=2).encode(
            alt.X("x0:Q", scale=sx, title=labels["x"]), alt.Y("y0:Q", scale=sy, title=labels["y"]),
            x2="x:Q", y2="y:Q",
            color=alt.Color("weight:Q", scale=alt.Scale(domain=[0, 1], scheme="viridis", clamp=True),
                            title=labels["weight"]), tooltip=tooltip),
        alt.Chart(keys).mark_circle(size=90, stroke="black", strokeWidth=0.5).encode(
            X, Y, color=alt.Color("weight:Q", scale=alt.Scale(domain=[0, 1], scheme="viridis", clamp=True),
                                  title=labels["weight"]), tooltip=tooltip),
        alt.Chart(keys).mark_text(align="left", dx=7, dy=-7, fontSize=11).encode(X, Y, text="book:N",
                                                                              tooltip=tooltip),
        alt.Chart(qf).mark_rule(color=QUERY_ORANGE, strokeWidth=4).encode(
            alt.X("x0:Q", scale=sx, title=labels["x"]), alt.Y("y0:Q", scale=sy, title=labels["y"]),
            x2="x:Q", y2="y:Q"),
        alt.Chart(qf).mark_point(shape="diamond", size=200, filled=True, color=QUERY_ORANGE).encode(X, Y),
        alt.Chart(qf).mark_text(align="left", dx=8, dy=10, fontWeight="bold", color=QUERY_ORANGE).encode(
            X, Y, text="name:N"),
    ]
    return alt.layer(*layers).properties(width=size, height=size)


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
        color=alt.Color("positive:N", scale=alt.Scale(domain=[False, True], range=list(SIGN_COLOURS)), legend=None),
        tooltip=[alt.Tooltip("dim:O", title=labels["dim"]), alt.Tooltip("exact:N", title=labels["product"])],
    ).properties(height=height)


def grouped_rows(rows: dict[str, object], keys: Sequence[str], *, labels: dict[str, str],
                 height: int = 240) -> alt.Chart:
    """Several weight rows over the same keys as grouped bars (one colour per way of computing them).

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
        y=alt.Y("weight:Q", title=labels["weight"], scale=alt.Scale(domain=[0, 1])),
        color=alt.Color("series:N", sort=names, title=labels["series"],
                        scale=alt.Scale(range=[KEY_BLUE, QUERY_ORANGE, "#5ab4ac"][:len(names)]),
                        legend=alt.Legend(orient="bottom", labelLimit=320)),
        tooltip=[alt.Tooltip("series:N", title=labels["series"]), alt.Tooltip("key:N", title=labels["key"]),
                 alt.Tooltip("exact:N", title=labels["weight"])],
    ).properties(height=height)

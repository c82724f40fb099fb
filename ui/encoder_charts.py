"""Charts of the encoder-block page: the layer as a flow of boxes with live tensors, the activation
scale per layer, the layer x head grid, dropout row sums, the double-residual bars.

Pure functions (no Streamlit calls); every title and label is passed in already translated.
The layer diagram is drawn in pixel coordinates in ONE layered chart, so each box and the mini
heatmap of its tensor share a row exactly, whatever the number of tokens.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import altair as alt
import numpy as np
import pandas as pd

from .charts import (FIT_X, SIGNED_SCHEME, WEIGHT_SCHEME, Spec, _pool, as_numpy, chart_kind, png_data_url, scheme_rgb,
                     unique_labels)

KIND_FILL = {            # light fills, told apart by their labels too (not by colour alone)
    "io": "#eeeeee",
    "attention": "#fdd0a2",
    "add": "#f7f7f7",
    "norm": "#c7e9c0",
    "ffn": "#c6dbef",
}
VALUE_CLAMP = 3.0        # shared colour domain of the mini heatmaps: a LayerNorm output is ~N(0, 1)
BOX_X0, BOX_W, GAP_X = 26, 200, 12
MIN_HM_W = 40            # the mini heatmaps share the width right of the boxes: d_model columns get half of it,
                         # d_ff = 4 d_model all of it (at least MIN_HM_W px)
ARROW_GAP = 22
SKIP_X = 9
SKIP_COLOUR = "#e66101"
TILE_GRID = "tile"       # name of the click selection of the layer x head grid


@dataclass(frozen=True)
class DiagramStep:
    """One box of the layer diagram: its texts, its kind (colour) and the tensor (n, width) at that point."""

    label: str
    formula: str
    detail: str
    kind: str
    matrix: np.ndarray
    wide: bool = False   # the FFN's hidden layer (d_ff = 4 d_model): drawn twice as wide


def _row_height(n: int) -> int:
    return int(max(56, min(5 * n, 130)))


def layer_diagram_frame(steps: Sequence[DiagramStep], tokens: Sequence[str],
                        skips: Sequence[tuple[int, int]]) -> tuple[dict[str, pd.DataFrame], int, int]:
    """The datasets ``layer_diagram`` draws, the units of the heatmaps' width and the diagram's height.

    Pixel coordinates: "boxes" (one row per step: step, x0..y1, fill, label, formula, detail, the label's anchor
    tx, ty1), "lines" (the formula and detail lines: tx, ty, text), "arrows" (x, y0, y1), "skips" (the residual
    paths: skip, order, x, y), "heads" (arrow heads: x, y, shape, colour).
    The mini heatmaps: "images" (one row per step: step, its tensor as a PNG data URL ``url``, one pixel per
    cell, rows = tokens, coloured by ``scheme_rgb`` on ±VALUE_CLAMP; its box x0, x1 in *units*, y0, y1 in px)
    and "rows" (one row per step and token, for the tooltip: label, token, rms, range, and its box likewise).
    x in units: the heatmaps share the width right of the boxes, known only in the browser (a phone's column or a
    projector's), so the chart's x scale maps 0..units onto it; a d_model column is 2 units, a d_ff column 1
    (half that width vs all of it). "legend": the colour scale's ends (its legend).
    One image per step, not a rect per cell: 4,000+ SVG rects are too slow to redraw (docs/performance.md).
    """
    n, S = len(tokens), len(steps)
    h = _row_height(n)
    mats = [as_numpy(step.matrix) for step in steps]
    for s_, m in enumerate(mats):
        if m.shape[0] != n:
            raise ValueError(f"step {s_}: {m.shape[0]} rows for {n} tokens")
    y0 = np.arange(S) * (h + ARROW_GAP)                      # top of each step's row
    cx = BOX_X0 + BOX_W / 2
    # the residual skips: 4 points each, from below the source box to the left edge of the target box
    sk = np.asarray(skips, dtype=int).reshape(-1, 2)
    yb = y0[sk[:, 0]] + h + ARROW_GAP / 2
    ym = y0[sk[:, 1]] + h / 2
    skip_x = np.tile([cx, SKIP_X, SKIP_X, BOX_X0 - 2], len(sk)).astype(float)
    skip_y = np.stack([yb, yb, ym, ym], 1).ravel().astype(float)
    boxes = pd.DataFrame({
        "step": np.arange(S), "x0": float(BOX_X0), "x1": float(BOX_X0 + BOX_W), "y0": y0.astype(float),
        "y1": (y0 + h).astype(float), "fill": [KIND_FILL[st.kind] for st in steps],
        "label": [st.label for st in steps], "formula": [st.formula for st in steps],
        "detail": [st.detail for st in steps], "tx": float(BOX_X0 + 8), "ty1": y0 + h / 2 - 14})
    lines = pd.DataFrame({"tx": float(BOX_X0 + 8), "ty": np.concatenate([y0 + h / 2, y0 + h / 2 + 14]),
                          "text": [st.formula for st in steps] + [st.detail for st in steps]})
    arrows = pd.DataFrame({"x": cx, "y0": (y0[:-1] + h).astype(float), "y1": (y0[1:] - 3).astype(float)})
    skip_rows = pd.DataFrame({"skip": np.repeat(np.arange(len(sk)), 4), "order": np.tile(np.arange(4), len(sk)),
                              "x": skip_x, "y": skip_y})
    heads = pd.DataFrame({"x": np.concatenate([np.full(S - 1, cx), skip_x[3::4]]),
                          "y": np.concatenate([y0[1:] - 3, skip_y[3::4]]).astype(float),
                          "shape": ["triangle-down"] * (S - 1) + ["triangle-right"] * len(sk),
                          "colour": ["#555555"] * (S - 1) + [SKIP_COLOUR] * len(sk)})
    shares = [1.0 if st.wide else 0.5 for st in steps]
    units = int(max(round(m.shape[1] / sh) for m, sh in zip(mats, shares)))
    right = [int(round(units * sh)) for sh in shares]          # each heatmap's right edge, in units
    images = pd.DataFrame({"step": np.arange(S), "url": [png_data_url(scheme_rgb(m, (-VALUE_CLAMP, VALUE_CLAMP)))
                                                         for m in mats],
                           "x0": 0, "x1": right, "y0": y0.astype(float), "y1": (y0 + h).astype(float)})
    labels = unique_labels(tokens)
    rms = np.concatenate([np.sqrt(np.mean(m ** 2, axis=1)) for m in mats])
    lows, highs = np.concatenate([m.min(axis=1) for m in mats]), np.concatenate([m.max(axis=1) for m in mats])
    rows = pd.DataFrame({
        "label": np.repeat([st.label for st in steps], n), "token": labels * S,
        "rms": np.char.mod("%.3f", rms), "range": [f"{a:.3f} … {b:.3f}" for a, b in zip(lows, highs)],
        "x0": 0, "x1": np.repeat(right, n), "y0": (np.repeat(y0, n) + np.tile(np.arange(n), S) * (h / n)),
        "y1": (np.repeat(y0, n) + np.tile(np.arange(1, n + 1), S) * (h / n))})
    legend = pd.DataFrame({"value": [-VALUE_CLAMP, VALUE_CLAMP]})
    data = {"boxes": boxes, "lines": lines, "arrows": arrows, "skips": skip_rows, "heads": heads, "images": images,
            "rows": rows, "legend": legend}
    return data, units, int(y0[-1] + h) + 2


@chart_kind(fill=("height",))
def layer_diagram_chart(data, *, value_title: str, token_title: str, step_title: str, units: int,
                        height: int) -> alt.LayerChart:
    """A vertical flow of labelled boxes (name, formula, shape and RMS), each with the mini heatmap of its
    tensor (rows = tokens top to bottom, columns = dimensions; an image, one pixel per cell, drawn unsmoothed) on
    the same row; the residual skips drawn on the left. Colours of the heatmaps share one diverging scale clamped
    at +-3, so growth shows (its legend below). Hovering a heatmap's row names its token, RMS and range."""
    ys = alt.Scale(domain=[0, height], nice=False, zero=False, reverse=True)

    def X(field):
        return alt.X(field, type="quantitative", scale=None, axis=None)     # pixels

    def Y(field):
        return alt.Y(field, type="quantitative", scale=ys, axis=None)

    boxes = alt.Chart(data["boxes"]).mark_rect(stroke="#555555", strokeWidth=1, cornerRadius=6).encode(
        x=X("x0"), x2=alt.X2("x1"), y=Y("y0"), y2=alt.Y2("y1"), fill=alt.Fill("fill:N", scale=None),
        tooltip=[alt.Tooltip("label:N", title=step_title), alt.Tooltip("formula:N", title="f"),
                 alt.Tooltip("detail:N", title=" ")])
    # dark ink on the light fills in either theme (the dark theme's default text colour is light)
    label = alt.Chart(data["boxes"]).mark_text(align="left", baseline="middle", fontWeight="bold", fontSize=12,
                                               color="#222222").encode(x=X("tx"), y=Y("ty1"), text=alt.Text("label:N"))
    lines = alt.Chart(data["lines"]).mark_text(align="left", baseline="middle", fontSize=11, font="monospace",
                                               color="#222222").encode(x=X("tx"), y=Y("ty"), text=alt.Text("text:N"))
    arrows = alt.Chart(data["arrows"]).mark_rule(strokeWidth=1.5, color="#555555").encode(
        x=X("x"), y=Y("y0"), y2=alt.Y2("y1"))
    skips = alt.Chart(data["skips"]).mark_line(strokeWidth=1.5, color=SKIP_COLOUR, strokeDash=[4, 2]).encode(
        x=X("x"), y=Y("y"), detail=alt.Detail("skip:N"), order=alt.Order("order:Q"))
    points = alt.Chart(data["heads"]).mark_point(filled=True, size=40, opacity=1).encode(
        x=X("x"), y=Y("y"), shape=alt.Shape("shape:N", scale=None), color=alt.Color("colour:N", scale=None))
    # the heatmaps stretch over the width right of the boxes (the signal "width": a phone's column or a projector's)
    x_hm = BOX_X0 + BOX_W + GAP_X
    hm_x = alt.Scale(domain=[0, units], range=[x_hm, alt.ExprRef(f"max(width - 4, {x_hm + 2 * MIN_HM_W})")],
                     nice=False, zero=False)
    images = alt.Chart(data["images"]).mark_image(aspect=False, smooth=False).encode(
        x=alt.X("x0:Q", scale=hm_x, axis=None), x2=alt.X2("x1"), y=Y("y0"), y2=alt.Y2("y1"), url=alt.Url("url:N"))
    rows = alt.Chart(data["rows"]).mark_rect(opacity=0).encode(
        x=alt.X("x0:Q", scale=hm_x, axis=None), x2=alt.X2("x1"), y=Y("y0"), y2=alt.Y2("y1"),
        tooltip=[alt.Tooltip("label:N", title=step_title), alt.Tooltip("token:N", title=token_title),
                 alt.Tooltip("rms:N", title="RMS"), alt.Tooltip("range:N", title=value_title)])
    legend = alt.Chart(data["legend"]).mark_point(opacity=0, size=0).encode(
        x=alt.value(0), y=alt.value(0),
        color=alt.Color("value:Q", title=value_title,
                        scale=alt.Scale(scheme=SIGNED_SCHEME, domain=[-VALUE_CLAMP, VALUE_CLAMP], clamp=True),
                        legend=alt.Legend(orient="bottom", gradientLength=160)))
    return alt.layer(boxes, label, lines, arrows, skips, points, images, rows, legend).properties(
        height=height, autosize=FIT_X, view=alt.ViewBackground(stroke=None)).resolve_scale(color="independent")


def layer_diagram(steps: Sequence[DiagramStep], tokens: Sequence[str], skips: Sequence[tuple[int, int]], *,
                  value_title: str, token_title: str, step_title: str) -> Spec:
    """The layer diagram of ``steps`` on ``tokens`` (see ``layer_diagram_chart``)."""
    data, units, height = layer_diagram_frame(steps, tokens, skips)
    return layer_diagram_chart(data, value_title=value_title, token_title=token_title, step_title=step_title,
                               units=units, height=height)


def _rule_at_one() -> alt.Chart:
    """A horizontal rule at y = 1 drawn from the layer's own data (one row after the aggregate)."""
    return alt.Chart().transform_aggregate(rows="count()").transform_calculate(y="1")


SERIES_COLOURS = ["#3b528b", "#e66101", "#5ec962", "#999999"]


def scale_frame(stream: dict[str, np.ndarray], final: tuple[str, int, float]) -> pd.DataFrame:
    """One row per (series, layer) of the residual stream's RMS (layer 0 = input of layer 1), and the
    ``final`` point (series label, layer, RMS after a final LayerNorm), drawn as a diamond."""
    frames = [pd.DataFrame({"layer": np.arange(len(v)), "rms": np.asarray(v, dtype=float), "series": name,
                            "final": False}) for name, v in stream.items()]
    frames.append(pd.DataFrame({"layer": [final[1]], "rms": [float(final[2])], "series": [final[0]],
                                "final": [True]}))
    frame = pd.concat(frames, ignore_index=True)
    frame["exact"] = np.char.mod("%.4f", frame["rms"].to_numpy(dtype=float))
    return frame


@chart_kind(fill=("max_layer",))
def scale_chart(frame, *, series: list[str], x_title: str, y_title: str, series_title: str,
                max_layer: int) -> alt.LayerChart:
    """Activation scale of the residual stream per layer, one line per series (``scale_frame``); the
    ``final`` points as large diamonds, not joined to the lines."""
    colour = alt.Color("series:N", title=series_title, sort=series,
                       scale=alt.Scale(range=SERIES_COLOURS[:len(series)]))
    tooltip = [alt.Tooltip("series:N", title=series_title), alt.Tooltip("layer:Q", title=x_title),
               alt.Tooltip("exact:N", title=y_title)]
    x = alt.X("layer:Q", title=x_title, scale=alt.Scale(domain=[0, max_layer], nice=False),
              axis=alt.Axis(tickMinStep=1, format="d"))
    base = alt.Chart().encode(x=x, y=alt.Y("rms:Q", title=y_title, scale=alt.Scale(zero=True)),
                              color=colour, tooltip=tooltip)
    lines = base.transform_filter(~alt.datum.final).mark_line(point=True, strokeWidth=2)
    finals = base.transform_filter(alt.datum.final).mark_point(shape="diamond", size=260, filled=True, opacity=1,
                                                               stroke="white", strokeWidth=1)
    one = _rule_at_one().mark_rule(strokeDash=[3, 3], color="#777777").encode(y=alt.Y("y:Q"))
    return alt.layer(one, lines, finals, data=frame).properties(height=300)


def residual_scale(stream: dict[str, np.ndarray], final: tuple[str, int, float], *, x_title: str, y_title: str,
                   series_title: str) -> Spec:
    """The scale chart of ``stream`` (series label -> RMS per layer, 0..N) and the ``final`` diamond."""
    frame = scale_frame(stream, final)
    return scale_chart(frame, series=[*stream, final[0]], x_title=x_title, y_title=y_title,
                       series_title=series_title, max_layer=int(frame["layer"].max()))


GRID_SIDE = 12           # a tile of the layer x head grid shows at most 12 x 12 cells (averaged beyond)
GRID_OUTLINE = "#e66101"


def head_grid_frame(weights, tokens: Sequence[str]) -> dict[str, pd.DataFrame]:
    """weights (L, h, n, n) -> "cells": one row per (layer, head, query, key) (layer and head count from 1;
    small integer types and float32: the grid is a glance, the enlarged tile has the exact values); beyond
    ``GRID_SIDE`` tokens a tile shows averaged blocks (q, k are block numbers). "labels": the label of each
    q / k (a token, or a range of positions)."""
    w = np.asarray(weights, dtype=np.float64)
    n_layers, n_heads, n, _ = w.shape
    f = max(1, -(-n // GRID_SIDE))
    if f > 1:
        w = np.stack([np.stack([_pool(m, f, f) for m in layer]) for layer in w])
        labels = [f"{i}–{min(i + f, n) - 1}" for i in range(0, n, f)]
    else:
        labels = unique_labels(tokens)
    m = w.shape[-1]
    li, hi, qi, ki = np.meshgrid(np.arange(n_layers), np.arange(n_heads), np.arange(m), np.arange(m),
                                 indexing="ij")
    cells = pd.DataFrame({"layer": (li.ravel() + 1).astype(np.uint8), "head": (hi.ravel() + 1).astype(np.uint8),
                          "q": qi.ravel().astype(np.uint8), "k": ki.ravel().astype(np.uint8),
                          "value": w.ravel().astype(np.float32)})
    return {"cells": cells, "labels": pd.DataFrame({"pos": np.arange(m), "label": labels})}


@chart_kind(fill=("selected_layer", "selected_head"))
def head_grid_chart(data, *, size: int, layer_title: str, head_title: str, value_title: str, query_title: str,
                    key_title: str, selected_layer: int = 1, selected_head: int = 1) -> alt.FacetChart:
    """All heads of all layers as small heatmaps: rows = layers, columns = heads; click one to enlarge
    (selection ``tile`` with fields layer, head). Fixed 0..1 colour domain, as every weight heatmap; every
    tile at full colour, the enlarged one framed in orange."""
    pick = alt.selection_point(name=TILE_GRID, fields=["layer", "head"], on="click",
                               value=[{"layer": selected_layer, "head": selected_head}])
    labels = data["labels"]
    tile = alt.Chart().mark_rect().encode(
        x=alt.X("k:O", axis=None), y=alt.Y("q:O", axis=None),
        color=alt.Color("value:Q", title=value_title, scale=alt.Scale(domain=[0, 1], scheme=WEIGHT_SCHEME),
                        legend=alt.Legend(orient="bottom", gradientLength=160)),
        tooltip=[alt.Tooltip("layer:O", title=layer_title), alt.Tooltip("head:O", title=head_title),
                 alt.Tooltip("query:N", title=query_title), alt.Tooltip("key:N", title=key_title),
                 alt.Tooltip("value:Q", title=value_title, format=".4f")],
    ).add_params(pick)
    frame = alt.Chart().transform_filter(
        (alt.datum.layer == selected_layer) & (alt.datum.head == selected_head)
    ).transform_aggregate(cells="count()").mark_rect(fill=None, stroke=GRID_OUTLINE, strokeWidth=3).encode(
        x=alt.value(0), x2=alt.value(size), y=alt.value(0), y2=alt.value(size))
    # the label lookups sit on the facet: inside a layer next to the outline, Vega drew nothing
    return alt.layer(tile, frame).properties(width=size, height=size).facet(
        data=data["cells"], row=alt.Row("layer:O", title=layer_title),
        column=alt.Column("head:O", title=head_title), spacing=4
    ).resolve_scale(x="shared", y="shared").transform_lookup(
        lookup="q", from_=alt.LookupData(data=labels, key="pos", fields=["label"]), as_=["query"]
    ).transform_lookup(
        lookup="k", from_=alt.LookupData(data=labels, key="pos", fields=["label"]), as_=["key"])


def head_grid(weights, tokens: Sequence[str], *, layer_title: str, head_title: str, value_title: str,
              query_title: str, key_title: str, selected: tuple[int, int] = (1, 1)) -> Spec:
    """The layer x head grid of ``weights`` (L, h, n, n); ``selected`` = (layer, head), 1-based, framed."""
    n_heads = int(np.shape(weights)[1])
    return head_grid_chart(head_grid_frame(weights, tokens), size=int(max(28, min(64, 250 // max(n_heads, 1)))),
                           layer_title=layer_title, head_title=head_title, value_title=value_title,
                           query_title=query_title, key_title=key_title,
                           selected_layer=int(selected[0]), selected_head=int(selected[1]))


def paired_frame(first, second, tokens: Sequence[str], series: tuple[str, str], digits: int) -> pd.DataFrame:
    """Two values per token (label, pos, series, value, exact with ``digits`` decimals)."""
    labels = unique_labels(tokens)
    values = np.concatenate([np.asarray(first, dtype=float), np.asarray(second, dtype=float)])
    return pd.DataFrame({"label": labels * 2, "pos": list(range(len(labels))) * 2,
                         "series": [series[0]] * len(labels) + [series[1]] * len(labels), "value": values,
                         "exact": np.char.mod(f"%.{digits}f", values)})


@chart_kind(fill=("order",))
def paired_bars_chart(frame, *, series: list[str], label_title: str, value_title: str, series_title: str,
                      rule_at_one: bool, height: int, order=()) -> alt.Chart | alt.LayerChart:
    """Two bars per token side by side, in ``order``; with ``rule_at_one`` a dashed line at 1."""
    bars = alt.Chart().mark_bar().encode(
        # every token stays labelled (the notices quote them): upright, so 24 of them fit a phone's column
        x=alt.X("label:N", sort=order, title=label_title, axis=alt.Axis(labelAngle=-90, labelOverlap=False)),
        xOffset=alt.XOffset("series:N", sort=series),
        y=alt.Y("value:Q", title=value_title),
        color=alt.Color("series:N", title=series_title, sort=series, scale=alt.Scale(range=SERIES_COLOURS[:2]),
                        # below: the bars keep the chart's width on a phone
                        legend=alt.Legend(orient="bottom", direction="vertical", labelLimit=0)),
        tooltip=[alt.Tooltip("label:N", title=label_title), alt.Tooltip("series:N", title=series_title),
                 alt.Tooltip("exact:N", title=value_title)])
    layers = [bars]
    if rule_at_one:
        layers.append(_rule_at_one().mark_rule(strokeDash=[4, 3], color="#333333").encode(y=alt.Y("y:Q")))
    return alt.layer(*layers, data=frame).properties(height=height, padding={"top": 8, "left": 5, "right": 5,
                                                                             "bottom": 5})


def paired_bars(first, second, tokens: Sequence[str], *, series: tuple[str, str], label_title: str,
                value_title: str, series_title: str, rule_at_one: bool = False, height: int = 320,
                digits: int = 4) -> Spec:
    """Two values per token side by side: the FFN's update, correct layer vs the tutorial's; or the row
    sums of the attention weights in eval vs train mode (``rule_at_one``: the line at 1)."""
    frame = paired_frame(first, second, tokens, series, digits)
    return paired_bars_chart(frame, series=list(series), label_title=label_title, value_title=value_title,
                             series_title=series_title, rule_at_one=rule_at_one, height=height,
                             order=unique_labels(tokens))

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

from .charts import SIGNED_SCHEME, WEIGHT_SCHEME, Spec, as_numpy, chart_kind, unique_labels

KIND_FILL = {            # light fills, told apart by their labels too (not by colour alone)
    "io": "#eeeeee",
    "attention": "#fdd0a2",
    "add": "#f7f7f7",
    "norm": "#c7e9c0",
    "ffn": "#c6dbef",
}
VALUE_CLAMP = 3.0        # shared colour domain of the mini heatmaps: a LayerNorm output is ~N(0, 1)
BOX_X0, BOX_W, GAP_X = 26, 230, 16
HM_W = 240               # width of a (n, d_model) mini heatmap; d_ff = 4 d_model is drawn twice as wide
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
                        skips: Sequence[tuple[int, int]]) -> tuple[pd.DataFrame, int, int]:
    """The one frame ``layer_diagram`` draws, in pixel coordinates, and its width and height.

    Column ``part`` says which layer draws a row: "boxes" (one per step: x0..y1, fill, label, formula,
    detail, text anchors tx, ty1..ty3), "lines" (the formula and detail lines: tx, ty, text), "arrows"
    (x, y0, y1), "skips" (the residual paths: skip, order, x, y), "heads" (arrow heads: x, y, shape,
    colour) and "cells" (the mini heatmaps: step, where, token, dim, x0..y1, value). Columns a part does
    not use are NaN there. Text columns are categoricals (Arrow dictionaries: the thousands of cells
    repeat a few step names and tokens). Built column by column in numpy: a new sentence costs ~2 ms.
    """
    n, S = len(tokens), len(steps)
    h = _row_height(n)
    labels = unique_labels(tokens)
    mats = [as_numpy(step.matrix) for step in steps]
    for s_, m in enumerate(mats):
        if m.shape[0] != n:
            raise ValueError(f"step {s_}: {m.shape[0]} rows for {n} tokens")
    x_hm = BOX_X0 + BOX_W + GAP_X
    y0 = np.arange(S) * (h + ARROW_GAP)                      # top of each step's row
    cx = BOX_X0 + BOX_W / 2
    # the residual skips: 4 points each, from below the source box to the left edge of the target box
    sk = np.asarray(skips, dtype=int).reshape(-1, 2)
    yb = y0[sk[:, 0]] + h + ARROW_GAP / 2
    ym = y0[sk[:, 1]] + h / 2
    skip_x = np.tile([cx, SKIP_X, SKIP_X, BOX_X0 - 2], len(sk)).astype(float)
    skip_y = np.stack([yb, yb, ym, ym], 1).ravel().astype(float)
    # the cells of every step's heatmap
    widths = [m.shape[1] for m in mats]
    step_of = np.repeat(np.arange(S), [n * w for w in widths])
    tok = np.concatenate([np.repeat(np.arange(n), w) for w in widths])
    dim = np.concatenate([np.tile(np.arange(w), n) for w in widths])
    cw = np.repeat([HM_W * (2 if st.wide else 1) / w for st, w in zip(steps, widths)], [n * w for w in widths])
    ch = h / n
    sizes = {"boxes": S, "lines": 2 * S, "arrows": S - 1, "skips": 4 * len(sk), "heads": S - 1 + len(sk),
             "cells": len(step_of)}
    at = dict(zip(sizes, np.cumsum([0, *sizes.values()])[:-1]))
    R = sum(sizes.values())
    num = {c: np.full(R, np.nan) for c in ("step", "x0", "x1", "y0", "y1", "tx", "ty1", "ty2", "ty3", "ty",
                                           "x", "skip", "order", "y", "dim", "value")}

    for col, part, values in (
            ("step", "boxes", np.arange(S)), ("x0", "boxes", BOX_X0), ("x1", "boxes", BOX_X0 + BOX_W),
            ("y0", "boxes", y0), ("y1", "boxes", y0 + h), ("tx", "boxes", BOX_X0 + 8),
            ("ty1", "boxes", y0 + h / 2 - 14), ("ty2", "boxes", y0 + h / 2), ("ty3", "boxes", y0 + h / 2 + 14),
            ("tx", "lines", BOX_X0 + 8), ("ty", "lines", np.concatenate([y0 + h / 2, y0 + h / 2 + 14])),
            ("x", "arrows", cx), ("y0", "arrows", y0[:-1] + h), ("y1", "arrows", y0[1:] - 3),
            ("skip", "skips", np.repeat(np.arange(len(sk)), 4)), ("order", "skips", np.tile(np.arange(4), len(sk))),
            ("x", "skips", skip_x), ("y", "skips", skip_y),
            ("x", "heads", np.concatenate([np.full(S - 1, cx), skip_x[3::4]])),
            ("y", "heads", np.concatenate([y0[1:] - 3, skip_y[3::4]])),
            ("step", "cells", step_of), ("dim", "cells", dim),
            ("x0", "cells", x_hm + dim * cw), ("x1", "cells", x_hm + (dim + 1) * cw),
            ("y0", "cells", y0[step_of] + tok * ch), ("y1", "cells", y0[step_of] + (tok + 1) * ch),
            ("value", "cells", np.concatenate([m.ravel() for m in mats]))):
        num[col][at[part]:at[part] + sizes[part]] = values

    def text(part_values: dict) -> pd.Categorical:
        """A categorical column: {part: per-row strings (list) or (codes, categories)}; NaN elsewhere."""
        cats = list(dict.fromkeys(v for vals in part_values.values()
                                  for v in (vals[1] if isinstance(vals, tuple) else vals)))
        index = {v: k for k, v in enumerate(cats)}
        codes = np.full(R, -1)
        for part, vals in part_values.items():
            if isinstance(vals, tuple):
                local, names = vals
                codes[at[part]:at[part] + sizes[part]] = np.asarray([index[v] for v in names])[local]
            else:
                codes[at[part]:at[part] + sizes[part]] = [index[v] for v in vals]
        return pd.Categorical.from_codes(codes, categories=cats)

    names = [st.label for st in steps]
    columns = {
        "fill": text({"boxes": [KIND_FILL[st.kind] for st in steps]}),
        "label": text({"boxes": names}),
        "formula": text({"boxes": [st.formula for st in steps]}),
        "detail": text({"boxes": [st.detail for st in steps]}),
        "text": text({"lines": [st.formula for st in steps] + [st.detail for st in steps]}),
        "shape": text({"heads": ["triangle-down"] * (S - 1) + ["triangle-right"] * len(sk)}),
        "colour": text({"heads": ["#555555"] * (S - 1) + [SKIP_COLOUR] * len(sk)}),
        "where": text({"cells": (step_of, names)}),
        "token": text({"cells": (tok, labels)}),
    }
    order = ("step", "x0", "x1", "y0", "y1", "fill", "label", "formula", "detail", "tx", "ty1", "ty2", "ty3",
             "ty", "text", "x", "skip", "order", "y", "shape", "colour", "where", "token", "dim", "value")
    frame = {c: num[c] if c in num else columns[c] for c in order}
    frame["part"] = pd.Categorical.from_codes(np.repeat(np.arange(len(sizes)), list(sizes.values())),
                                              categories=list(sizes))
    width = int(np.max(x_hm + np.asarray([HM_W * (2 if st.wide else 1) for st in steps]))) + 4
    return pd.DataFrame(frame), width, int(y0[-1] + h) + 2


@chart_kind(fill=("width", "height"))
def layer_diagram_chart(frame, *, value_title: str, token_title: str, dim_title: str, step_title: str,
                        width: int, height: int) -> alt.LayerChart:
    """A vertical flow of labelled boxes (name, formula, shape and RMS), each with the mini heatmap of its
    tensor (rows = tokens top to bottom, columns = dimensions) on the same row; the residual skips drawn
    on the left. Colours of the heatmaps share one diverging scale clamped at +-3, so growth shows."""
    xs = alt.Scale(domain=[0, width], nice=False, zero=False)
    ys = alt.Scale(domain=[0, height], nice=False, zero=False, reverse=True)

    def X(field):
        return alt.X(field, type="quantitative", scale=xs, axis=None)

    def Y(field):
        return alt.Y(field, type="quantitative", scale=ys, axis=None)

    def part(name):                     # one frame for the whole diagram: each layer draws its part
        return alt.Chart().transform_filter(alt.datum.part == name)

    boxes = part("boxes").mark_rect(stroke="#555555", strokeWidth=1, cornerRadius=6).encode(
        x=X("x0"), x2=alt.X2("x1"), y=Y("y0"), y2=alt.Y2("y1"), fill=alt.Fill("fill:N", scale=None),
        tooltip=[alt.Tooltip("label:N", title=step_title), alt.Tooltip("formula:N", title="f"),
                 alt.Tooltip("detail:N", title=" ")])
    label = part("boxes").mark_text(align="left", baseline="middle", fontWeight="bold",
                                    fontSize=12).encode(x=X("tx"), y=Y("ty1"), text=alt.Text("label:N"))
    lines = part("lines").mark_text(align="left", baseline="middle", fontSize=11, font="monospace",
                                    color="#222222").encode(x=X("tx"), y=Y("ty"), text=alt.Text("text:N"))
    arrows = part("arrows").mark_rule(strokeWidth=1.5, color="#555555").encode(
        x=X("x"), y=Y("y0"), y2=alt.Y2("y1"))
    skips = part("skips").mark_line(strokeWidth=1.5, color=SKIP_COLOUR, strokeDash=[4, 2]).encode(
        x=X("x"), y=Y("y"), detail=alt.Detail("skip:N"), order=alt.Order("order:Q"))
    points = part("heads").mark_point(filled=True, size=40, opacity=1).encode(
        x=X("x"), y=Y("y"), shape=alt.Shape("shape:N", scale=None), color=alt.Color("colour:N", scale=None))
    cells = part("cells").mark_rect().encode(
        x=X("x0"), x2=alt.X2("x1"), y=Y("y0"), y2=alt.Y2("y1"),
        color=alt.Color("value:Q", title=value_title,
                        scale=alt.Scale(scheme=SIGNED_SCHEME, domain=[-VALUE_CLAMP, VALUE_CLAMP], clamp=True)),
        tooltip=[alt.Tooltip("where:N", title=step_title), alt.Tooltip("token:N", title=token_title),
                 alt.Tooltip("dim:Q", title=dim_title),
                 alt.Tooltip("value:Q", title=value_title, format=".6~g")])   # thousands of cells: no text column
    return alt.layer(boxes, label, lines, arrows, skips, points, cells, data=frame).properties(
        width=width, height=height, view=alt.ViewBackground(stroke=None)).resolve_scale(color="independent")


def layer_diagram(steps: Sequence[DiagramStep], tokens: Sequence[str], skips: Sequence[tuple[int, int]], *,
                  value_title: str, token_title: str, dim_title: str, step_title: str) -> Spec:
    """The layer diagram of ``steps`` on ``tokens`` (see ``layer_diagram_chart``)."""
    frame, width, height = layer_diagram_frame(steps, tokens, skips)
    return layer_diagram_chart(frame, value_title=value_title, token_title=token_title, dim_title=dim_title,
                               step_title=step_title, width=width, height=height)


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


def head_grid_frame(weights, tokens: Sequence[str]) -> pd.DataFrame:
    """weights (L, h, n, n) -> one row per (layer, head, query, key); layer and head count from 1."""
    w = np.asarray(weights, dtype=np.float64)
    n_layers, n_heads, n, _ = w.shape
    li, hi, qi, ki = np.meshgrid(np.arange(n_layers), np.arange(n_heads), np.arange(n), np.arange(n),
                                 indexing="ij")
    labels = np.asarray(unique_labels(tokens))
    return pd.DataFrame({"layer": li.ravel() + 1, "head": hi.ravel() + 1, "query_pos": qi.ravel(),
                         "key_pos": ki.ravel(), "query": labels[qi.ravel()], "key": labels[ki.ravel()],
                         "value": w.ravel(), "exact": np.char.mod("%.6g", w.ravel())})


@chart_kind(fill=("selected_layer", "selected_head"))
def head_grid_chart(frame, *, size: int, layer_title: str, head_title: str, value_title: str, query_title: str,
                    key_title: str, selected_layer: int | None = None,
                    selected_head: int | None = None) -> alt.FacetChart:
    """All heads of all layers as small heatmaps: rows = layers, columns = heads; click one to enlarge
    (selection ``tile`` with fields layer, head). Fixed 0..1 colour domain, as every weight heatmap."""
    value = None if selected_layer is None else [{"layer": selected_layer, "head": selected_head}]
    pick = alt.selection_point(name=TILE_GRID, fields=["layer", "head"], on="click", value=value)
    tile = alt.Chart().mark_rect().encode(
        x=alt.X("key_pos:O", axis=None), y=alt.Y("query_pos:O", axis=None),
        color=alt.Color("value:Q", title=value_title, scale=alt.Scale(domain=[0, 1], scheme=WEIGHT_SCHEME)),
        opacity=alt.when(pick).then(alt.value(1.0)).otherwise(alt.value(0.45)),
        tooltip=[alt.Tooltip("layer:O", title=layer_title), alt.Tooltip("head:O", title=head_title),
                 alt.Tooltip("query:N", title=query_title), alt.Tooltip("key:N", title=key_title),
                 alt.Tooltip("exact:N", title=value_title)],
    ).add_params(pick).properties(width=size, height=size)
    return tile.facet(data=frame, row=alt.Row("layer:O", title=layer_title),
                      column=alt.Column("head:O", title=head_title)).resolve_scale(x="shared", y="shared")


def head_grid(weights, tokens: Sequence[str], *, layer_title: str, head_title: str, value_title: str,
              query_title: str, key_title: str, selected: tuple[int, int] | None = None) -> Spec:
    """The layer x head grid of ``weights`` (L, h, n, n); ``selected`` = (layer, head), 1-based."""
    n_heads = int(np.shape(weights)[1])
    return head_grid_chart(head_grid_frame(weights, tokens), size=int(max(46, min(96, 560 // max(n_heads, 1)))),
                           layer_title=layer_title, head_title=head_title, value_title=value_title,
                           query_title=query_title, key_title=key_title,
                           selected_layer=None if selected is None else int(selected[0]),
                           selected_head=None if selected is None else int(selected[1]))


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
        x=alt.X("label:N", sort=order, title=label_title, axis=alt.Axis(labelAngle=-45)),
        xOffset=alt.XOffset("series:N", sort=series),
        y=alt.Y("value:Q", title=value_title),
        color=alt.Color("series:N", title=series_title, sort=series, scale=alt.Scale(range=SERIES_COLOURS[:2])),
        tooltip=[alt.Tooltip("label:N", title=label_title), alt.Tooltip("series:N", title=series_title),
                 alt.Tooltip("exact:N", title=value_title)])
    layers = [bars]
    if rule_at_one:
        layers.append(_rule_at_one().mark_rule(strokeDash=[4, 3], color="#333333").encode(y=alt.Y("y:Q")))
    return alt.layer(*layers, data=frame).properties(height=height)


def paired_bars(first, second, tokens: Sequence[str], *, series: tuple[str, str], label_title: str,
                value_title: str, series_title: str, rule_at_one: bool = False, height: int = 220,
                digits: int = 4) -> Spec:
    """Two values per token side by side: the FFN's update, correct layer vs the tutorial's; or the row
    sums of the attention weights in eval vs train mode (``rule_at_one``: the line at 1)."""
    frame = paired_frame(first, second, tokens, series, digits)
    return paired_bars_chart(frame, series=list(series), label_title=label_title, value_title=value_title,
                             series_title=series_title, rule_at_one=rule_at_one, height=height,
                             order=unique_labels(tokens))

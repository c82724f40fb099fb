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
from pandas.api.types import union_categoricals

from .charts import SIGNED_SCHEME, WEIGHT_SCHEME, as_numpy, unique_labels

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


def diagram_frames(steps: Sequence[DiagramStep], tokens: Sequence[str],
                   skips: Sequence[tuple[int, int]]) -> dict[str, pd.DataFrame]:
    """The data of ``layer_diagram``: boxes, heatmap cells, down arrows, skip paths (pixel coordinates)."""
    parts = _diagram_parts(steps, tokens, skips)
    return {**parts, "cells": pd.DataFrame(parts["cells"])}


def _diagram_parts(steps: Sequence[DiagramStep], tokens: Sequence[str], skips: Sequence[tuple[int, int]]) -> dict:
    n = len(tokens)
    h = _row_height(n)
    labels = unique_labels(tokens)
    x_hm = BOX_X0 + BOX_W + GAP_X
    boxes, cells = [], {k: [] for k in ("step", "where", "token", "dim", "x0", "x1", "y0", "y1", "value")}
    for s, step in enumerate(steps):
        m = as_numpy(step.matrix)
        if m.shape[0] != n:
            raise ValueError(f"step {s}: {m.shape[0]} rows for {n} tokens")
        y0 = s * (h + ARROW_GAP)
        boxes.append({"step": s, "x0": BOX_X0, "x1": BOX_X0 + BOX_W, "y0": y0, "y1": y0 + h,
                      "fill": KIND_FILL[step.kind], "label": step.label, "formula": step.formula,
                      "detail": step.detail, "tx": BOX_X0 + 8, "ty1": y0 + h / 2 - 14, "ty2": y0 + h / 2,
                      "ty3": y0 + h / 2 + 14})
        width = HM_W * (2 if step.wide else 1)
        cw, ch = width / m.shape[1], h / n
        ti, di = np.meshgrid(np.arange(n), np.arange(m.shape[1]), indexing="ij")
        ti, di = ti.ravel(), di.ravel()
        for k, v in (("step", np.full(ti.size, s)), ("where", np.full(ti.size, s)), ("token", ti), ("dim", di),
                     ("x0", x_hm + di * cw), ("x1", x_hm + (di + 1) * cw),
                     ("y0", y0 + ti * ch), ("y1", y0 + (ti + 1) * ch), ("value", m.ravel())):
            cells[k].append(v)
    cells = {k: np.concatenate(v) for k, v in cells.items()}
    # text columns of thousands of cells as categoricals (codes into the few step names and tokens)
    names = list(dict.fromkeys(step.label for step in steps))
    cells["where"] = pd.Categorical.from_codes(np.asarray([names.index(step.label) for step in steps])[cells["where"]],
                                               categories=names)
    cells["token"] = pd.Categorical.from_codes(cells["token"], categories=labels)
    box = pd.DataFrame(boxes)
    cx = BOX_X0 + BOX_W / 2
    arrows = pd.DataFrame({"x": cx, "y0": box["y1"].iloc[:-1].to_numpy(),
                           "y1": box["y0"].iloc[1:].to_numpy() - 3})
    paths = []
    for j, (src, dst) in enumerate(skips):
        yb = box["y1"].iloc[src] + ARROW_GAP / 2
        ym = (box["y0"].iloc[dst] + box["y1"].iloc[dst]) / 2
        for order, (x, y) in enumerate(((cx, yb), (SKIP_X, yb), (SKIP_X, ym), (BOX_X0 - 2, ym))):
            paths.append({"skip": j, "order": order, "x": x, "y": y})
    return {"boxes": box, "cells": cells, "arrows": arrows,        # cells: columns as numpy arrays
            "skips": pd.DataFrame(paths, columns=["skip", "order", "x", "y"])}


def layer_diagram_frame(steps: Sequence[DiagramStep], tokens: Sequence[str],
                        skips: Sequence[tuple[int, int]]) -> tuple[pd.DataFrame, int, int]:
    """The one frame ``layer_diagram`` draws (column ``part`` says which layer draws a row), and its pixel
    width and height. With ``ui.charts.respec`` a page turns the spec of one diagram into another's."""
    f = _diagram_parts(steps, tokens, skips)
    width = int(f["cells"]["x1"].max()) + 4
    height = int(f["boxes"]["y1"].max()) + 2
    sub = pd.concat([f["boxes"][["tx", "ty2", "formula"]].set_axis(["tx", "ty", "text"], axis=1),
                     f["boxes"][["tx", "ty3", "detail"]].set_axis(["tx", "ty", "text"], axis=1)])
    ends = f["skips"][f["skips"]["order"] == 3]
    heads = pd.DataFrame({
        "x": np.concatenate([f["arrows"]["x"].to_numpy(), ends["x"].to_numpy()]),
        "y": np.concatenate([f["arrows"]["y1"].to_numpy(), ends["y"].to_numpy()]),
        "shape": ["triangle-down"] * len(f["arrows"]) + ["triangle-right"] * len(ends),
        "colour": ["#555555"] * len(f["arrows"]) + [SKIP_COLOUR] * len(ends)})
    parts = {"boxes": f["boxes"], "lines": sub, "arrows": f["arrows"], "skips": f["skips"], "heads": heads,
             "cells": f["cells"]}
    return _stack_parts(parts), width, height


def _stack_parts(parts: dict[str, pd.DataFrame]) -> pd.DataFrame:
    """``pd.concat([df.assign(part=name) ...], ignore_index=True)``, column by column (3x faster): a
    column missing from a part is NaN there, as concat makes it. A part may be a dict of numpy columns."""
    columns = list(dict.fromkeys(c for df in parts.values() for c in df)) + ["part"]
    sizes = {name: len(next(iter(df.values()))) if isinstance(df, dict) else len(df) for name, df in parts.items()}
    out = {}
    for c in columns[:-1]:
        pieces = [df[c] if c in df else None for df in parts.values()]
        kinds = {np.asarray(p).dtype.kind for p in pieces if p is not None and not isinstance(p, pd.Categorical)}
        numeric = kinds <= {"i", "f", "u"} and bool(kinds) and not any(isinstance(p, pd.Categorical) for p in pieces)
        if numeric:
            filled = [np.asarray(p) if p is not None else np.full(sizes[name], np.nan)
                      for p, name in zip(pieces, parts)]
            if any(p is None for p in pieces):
                filled = [f.astype(float) for f in filled]
            out[c] = np.concatenate(filled)
        else:   # text: one categorical (an Arrow dictionary), missing rows NaN
            given = [p if isinstance(p, pd.Categorical) or p is None else pd.Categorical(np.asarray(p, dtype=object))
                     for p in pieces]
            none = next(p for p in given if p is not None).categories[:0]
            out[c] = union_categoricals([p if p is not None else pd.Categorical.from_codes(
                np.full(sizes[name], -1), categories=none) for p, name in zip(given, parts)])
    out["part"] = pd.Categorical.from_codes(np.repeat(np.arange(len(parts)), [sizes[name] for name in parts]),
                                            categories=list(parts))
    return pd.DataFrame(out)


def layer_diagram(steps: Sequence[DiagramStep], tokens: Sequence[str], skips: Sequence[tuple[int, int]], *,
                  value_title: str, token_title: str, dim_title: str, step_title: str) -> alt.LayerChart:
    """A vertical flow of labelled boxes (name, formula, shape and RMS), each with the mini heatmap of its
    tensor (rows = tokens top to bottom, columns = dimensions) on the same row; the residual skips drawn
    on the left. Colours of the heatmaps share one diverging scale clamped at +-3, so growth shows."""
    frame, width, height = layer_diagram_frame(steps, tokens, skips)
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


def _rule_at_one() -> alt.Chart:
    """A horizontal rule at y = 1 drawn from the layer's own data (one row after the aggregate)."""
    return alt.Chart().transform_aggregate(rows="count()").transform_calculate(y="1")


def scale_frame(frame: pd.DataFrame) -> pd.DataFrame:
    """The data ``scale_chart`` draws: its input with ``final`` (default False) and ``exact`` (text)."""
    frame = frame.copy()
    if "final" not in frame:
        frame["final"] = False
    frame["exact"] = np.char.mod("%.4f", frame["rms"].to_numpy(dtype=float))
    return frame


def scale_chart(frame: pd.DataFrame, *, x_title: str, y_title: str, series_title: str,
                max_layer: int) -> alt.LayerChart:
    """Activation scale of the residual stream per layer, one line per variant.

    ``frame``: columns layer (0 = input of layer 1), rms, series (label), and optional ``final`` (bool):
    points drawn as a large diamond (the RMS after a final LayerNorm), not joined to the lines.
    """
    frame = scale_frame(frame)
    series = list(dict.fromkeys(frame["series"]))
    colour = alt.Color("series:N", title=series_title, sort=series,
                       scale=alt.Scale(range=["#3b528b", "#e66101", "#5ec962", "#999999"][:len(series)]))
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


def head_grid(weights, tokens: Sequence[str], *, layer_title: str, head_title: str, value_title: str,
              query_title: str, key_title: str, selected: tuple[int, int] | None = None) -> alt.FacetChart:
    """All heads of all layers as small heatmaps: rows = layers, columns = heads; click one to enlarge
    (selection ``tile`` with fields layer, head). Fixed 0..1 colour domain, as every weight heatmap."""
    frame = head_grid_frame(weights, tokens)
    n_heads = int(frame["head"].max())
    n = int(frame["query_pos"].max()) + 1
    size = int(max(46, min(96, 560 // max(n_heads, 1))))
    pick = alt.selection_point(name=TILE_GRID, fields=["layer", "head"], on="click",
                               value=None if selected is None else [{"layer": selected[0], "head": selected[1]}])
    tile = alt.Chart().mark_rect().encode(
        x=alt.X("key_pos:O", axis=None), y=alt.Y("query_pos:O", axis=None),
        color=alt.Color("value:Q", title=value_title, scale=alt.Scale(domain=[0, 1], scheme=WEIGHT_SCHEME)),
        opacity=alt.when(pick).then(alt.value(1.0)).otherwise(alt.value(0.45)),
        tooltip=[alt.Tooltip("layer:O", title=layer_title), alt.Tooltip("head:O", title=head_title),
                 alt.Tooltip("query:N", title=query_title), alt.Tooltip("key:N", title=key_title),
                 alt.Tooltip("exact:N", title=value_title)],
    ).add_params(pick).properties(width=size, height=size * n / max(n, 1))
    return tile.facet(data=frame, row=alt.Row("layer:O", title=layer_title),
                      column=alt.Column("head:O", title=head_title)).resolve_scale(x="shared", y="shared")


def row_sums_frame(eval_sums, train_sums, tokens: Sequence[str], *, eval_title: str,
                   train_title: str) -> pd.DataFrame:
    """The data of ``row_sums_chart`` (its spec depends on the tokens only through the query order)."""
    labels = unique_labels(tokens)
    ev, tr = np.asarray(eval_sums, dtype=float), np.asarray(train_sums, dtype=float)
    frame = pd.DataFrame({"query": labels * 2, "pos": list(range(len(labels))) * 2,
                          "mode": [eval_title] * len(labels) + [train_title] * len(labels),
                          "sum": np.concatenate([ev, tr])})
    frame["exact"] = np.char.mod("%.6f", frame["sum"].to_numpy())
    return frame


def row_sums_chart(eval_sums, train_sums, tokens: Sequence[str], *, eval_title: str, train_title: str,
                   query_title: str, sum_title: str, mode_title: str) -> alt.LayerChart:
    """Row sums of the attention weights per query, eval vs train mode, with the line at 1."""
    labels = unique_labels(tokens)
    frame = row_sums_frame(eval_sums, train_sums, tokens, eval_title=eval_title, train_title=train_title)
    bars = alt.Chart().mark_bar().encode(
        x=alt.X("query:N", sort=labels, title=query_title, axis=alt.Axis(labelAngle=-45)),
        xOffset=alt.XOffset("mode:N", sort=[eval_title, train_title]),
        y=alt.Y("sum:Q", title=sum_title),
        color=alt.Color("mode:N", title=mode_title, sort=[eval_title, train_title],
                        scale=alt.Scale(range=["#3b528b", "#e66101"])),
        tooltip=[alt.Tooltip("query:N", title=query_title), alt.Tooltip("mode:N", title=mode_title),
                 alt.Tooltip("exact:N", title=sum_title)])
    one = _rule_at_one().mark_rule(strokeDash=[4, 3], color="#333333").encode(y=alt.Y("y:Q"))
    return alt.layer(bars, one, data=frame).properties(height=240)


def paired_bars_frame(first, second, tokens: Sequence[str], *, first_title: str, second_title: str) -> pd.DataFrame:
    """The data of ``paired_bars`` (its spec depends on the tokens only through the token order)."""
    labels = unique_labels(tokens)
    a, b = np.asarray(first, dtype=float), np.asarray(second, dtype=float)
    frame = pd.DataFrame({"token": labels * 2, "series": [first_title] * len(labels) + [second_title] * len(labels),
                          "value": np.concatenate([a, b])})
    frame["exact"] = np.char.mod("%.4f", frame["value"].to_numpy())
    return frame


def paired_bars(first, second, tokens: Sequence[str], *, first_title: str, second_title: str,
                label_title: str, value_title: str, series_title: str) -> alt.Chart:
    """Two values per token side by side (e.g. the FFN's update, correct layer vs the tutorial's)."""
    labels = unique_labels(tokens)
    frame = paired_bars_frame(first, second, tokens, first_title=first_title, second_title=second_title)
    return alt.Chart(frame).mark_bar().encode(
        x=alt.X("token:N", sort=labels, title=label_title, axis=alt.Axis(labelAngle=-45)),
        xOffset=alt.XOffset("series:N", sort=[first_title, second_title]),
        y=alt.Y("value:Q", title=value_title),
        color=alt.Color("series:N", title=series_title, sort=[first_title, second_title],
                        scale=alt.Scale(range=["#3b528b", "#e66101"])),
        tooltip=[alt.Tooltip("token:N", title=label_title), alt.Tooltip("series:N", title=series_title),
                 alt.Tooltip("exact:N", title=value_title)],
    ).properties(height=220)

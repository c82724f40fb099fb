"""Charts of the masking page: the padded batch, boolean masks side by side, and one row of weights.

Frame builders (data -> DataFrame, pure) and ``ui.charts.chart_kind`` builders (Altair, built once per
language and option, filled per rerun); every title and label is passed in already translated.
Visible cells are blue, hidden ones grey with a "×", so a mask reads without a colour legend.
"""
from __future__ import annotations

from collections.abc import Sequence

import altair as alt
import numpy as np
import pandas as pd

from . import format as fmt
from .charts import MASKED_GREY, Spec, as_numpy, chart_kind, label_spacing, text_px, thin_labels, unique_labels

VISIBLE_BLUE = "#4c78a8"
HIGHLIGHT = "#e66101"
MAX_TOKEN_CHARS = 8
CELL = 22                  # px per cell of the mask panels
BATCH_ROW = 28             # px per sentence of the batch grid
PHONE_WIDTH = 358          # px, the main column at 390 px


def _visible_colour():
    return alt.when(alt.datum.visible).then(alt.value(VISIBLE_BLUE)).otherwise(alt.value(MASKED_GREY))


# ------------------------------------------------------------------ the padded batch
def batch_frame(tokens: Sequence[Sequence[str]], keep, row_names: Sequence[str],
                selected: int | None = None) -> pd.DataFrame:
    """One row per (sentence, position): the token, and whether the padding mask keeps it."""
    keep = as_numpy(keep).astype(bool)
    b, n = keep.shape
    rows = np.repeat(np.arange(b), n)
    return pd.DataFrame({
        "sentence": np.repeat(list(row_names), n),
        "row": rows,
        "pos": np.tile(np.arange(n), b),
        "token": [tok for row in tokens for tok in row],
        "cell_text": [fmt.clip(tok, MAX_TOKEN_CHARS) for row in tokens for tok in row],
        "mask": keep.ravel().astype(int),
        "visible": keep.ravel(),
        "selected": rows == (-1 if selected is None else selected),
    })


@chart_kind(fill=("title", "row_order"))
def batch_grid(frame, *, x_title: str, y_title: str, mask_title: str, token_title: str, title: str = "",
               row_order=()) -> alt.LayerChart:
    """The padded batch as a (b, n) grid: real tokens blue, [PAD] grey; the selected sentence outlined."""
    tooltip = [alt.Tooltip("sentence:N", title=y_title), alt.Tooltip("pos:O", title=x_title),
               alt.Tooltip("token:N", title=token_title), alt.Tooltip("mask:Q", title=mask_title)]
    base = alt.Chart(frame).encode(
        x=alt.X("pos:O", title=x_title, axis=alt.Axis(orient="top", labelAngle=0)),
        y=alt.Y("sentence:N", sort=row_order, title=y_title))
    rect = base.mark_rect(strokeWidth=2).encode(
        color=_visible_colour(), tooltip=tooltip,
        stroke=alt.when(alt.datum.selected).then(alt.value(HIGHLIGHT)).otherwise(alt.value("white")))
    text = base.mark_text(fontSize=11).encode(
        text="cell_text:N", tooltip=tooltip,
        color=alt.when(alt.datum.visible).then(alt.value("white")).otherwise(alt.value("#555555")))
    return alt.layer(rect, text).properties(title=title, height=alt.Step(BATCH_ROW))   # one row per sentence


def batch_chart(tokens: Sequence[Sequence[str]], keep, *, row_names: Sequence[str], title: str,
                x_title: str, y_title: str, mask_title: str, token_title: str,
                selected: int | None = None) -> Spec:
    return batch_grid(batch_frame(tokens, keep, row_names, selected), x_title=x_title, y_title=y_title,
                      mask_title=mask_title, token_title=token_title, title=title, row_order=list(row_names))


# ------------------------------------------------------------------ boolean masks side by side
def mask_frame(mask, labels: Sequence[str], panel: str = "") -> pd.DataFrame:
    m = as_numpy(mask).astype(bool)
    names = unique_labels(list(labels))
    n_q, n_k = m.shape
    qi, ki = np.meshgrid(np.arange(n_q), np.arange(n_k), indexing="ij")
    return pd.DataFrame({"panel": panel, "query_pos": qi.ravel(), "key_pos": ki.ravel(),
                         "query": np.repeat(names[:n_q], n_k), "key": np.tile(names[:n_k], n_q),
                         "visible": m.ravel(), "mask": m.ravel().astype(int)})


@chart_kind(fill=("panel_order", "order"))
def mask_facets(frame, *, x_title: str, y_title: str, mask_title: str, panel_order=(), order=(),
                columns: int = 3) -> alt.FacetChart:
    """Masks side by side (e.g. padding, look-ahead, their AND), one facet column per mask; ``columns``: panels
    per row (1: one above the other, when three side by side would not fit a phone's 358 px)."""
    tooltip = [alt.Tooltip("query:N", title=y_title), alt.Tooltip("key:N", title=x_title),
               alt.Tooltip("mask:Q", title=mask_title)]
    # every token labelled (the page quotes them): never Vega's labelOverlap, nor the theme's labelFlush
    base = alt.Chart().encode(
        x=alt.X("key:N", sort=order, title=x_title,
                axis=alt.Axis(orient="bottom", labelAngle=-45, labelLimit=70, labelOverlap=False, labelFlush=False)),
        y=alt.Y("query:N", sort=order, title=y_title, axis=alt.Axis(labelLimit=70, labelOverlap=False,
                                                                    labelFlush=False)))
    rect = base.mark_rect(stroke="white", strokeWidth=1).encode(color=_visible_colour(), tooltip=tooltip)
    cross = base.transform_filter("!datum.visible").mark_text(text="×", color="#666666", fontSize=11)
    return alt.layer(rect, cross, data=frame).properties(width=alt.Step(CELL), height=alt.Step(CELL)).facet(
        facet=alt.Facet("panel:N", sort=panel_order, title=None,       # a wrapped facet: ``columns`` per row
                        header=alt.Header(labelFontSize=13, labelFontWeight="bold", labelOrient="top")),
        spacing=24, columns=columns)


def mask_panels(panels: Sequence[tuple[str, object]], labels: Sequence[str], *, x_title: str,
                y_title: str, mask_title: str) -> Spec:
    frame = pd.concat([mask_frame(m, labels, title) for title, m in panels], ignore_index=True)
    # side by side only when the panels (cells or their bold 13 px title, the y labels ~70 px once per row, gaps)
    # fit a phone; else one above the other
    widths = [max(len(labels) * CELL, text_px(str(title), 13)) for title, _ in panels]
    side_by_side = 70 + sum(widths) + 24 * (len(panels) - 1) <= PHONE_WIDTH
    return mask_facets(frame, x_title=x_title, y_title=y_title, mask_title=mask_title,
                       panel_order=[p for p, _ in panels], order=unique_labels(list(labels)),
                       columns=len(panels) if side_by_side else 1)


# ------------------------------------------------------------------ one row of weights
def row_frame(weights, hidden, labels: Sequence[str], hidden_title: str) -> pd.DataFrame:
    w = as_numpy(np.asarray(weights, dtype=np.float64).reshape(1, -1))[0]
    h = np.asarray(hidden, dtype=bool).reshape(-1)
    return pd.DataFrame({"pos": np.arange(len(w)), "label": unique_labels(list(labels)), "value": w,
                         "exact": np.char.mod("%.8g", w), "visible": ~h,
                         "status": np.where(h, hidden_title, "")})


@chart_kind(fill=("order",))
def row_bars_chart(frame, *, value_title: str, label_title: str, height: int = 200, order=()) -> alt.LayerChart:
    """The weights of one query as bars; hidden keys drawn as a grey "×" at exactly 0."""
    tooltip = [alt.Tooltip("label:N", title=label_title), alt.Tooltip("exact:N", title=value_title),
               alt.Tooltip("status:N", title=" ")]
    base = alt.Chart(frame).encode(
        x=alt.X("label:N", sort=order, title=label_title,
                axis=alt.Axis(labelAngle=-45, labelOverlap=False, labelFlush=False,
                              labelExpr=thin_labels("x", label_spacing(["xx"], upright=False)))))
    bars = base.mark_bar().encode(
        y=alt.Y("value:Q", title=value_title, scale=alt.Scale(domain=[0, 1])), color=_visible_colour(),
        tooltip=tooltip)
    cross = base.transform_filter("!datum.visible").mark_text(text="×", color="#666666", fontSize=14, dy=-8).encode(
        y="value:Q", tooltip=tooltip)
    return alt.layer(bars, cross).properties(height=height)


def row_bars(weights, hidden, labels: Sequence[str], *, value_title: str, label_title: str,
             hidden_title: str) -> Spec:
    frame = row_frame(weights, hidden, labels, hidden_title)
    return row_bars_chart(frame, value_title=value_title, label_title=label_title, order=list(frame["label"]))

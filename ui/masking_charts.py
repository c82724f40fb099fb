"""Charts of the masking page: the padded batch and boolean masks as grids.

Pure functions (no Streamlit calls); every title and label is passed in already translated.
Visible cells are blue, hidden ones grey with a "×", so a mask reads without a colour legend.
"""
from __future__ import annotations

from collections.abc import Sequence

import altair as alt
import numpy as np
import pandas as pd

from .charts import MASKED_GREY, as_numpy, unique_labels

VISIBLE_BLUE = "#4c78a8"
MAX_TOKEN_CHARS = 8


def _short(token: str) -> str:
    return token if len(token) <= MAX_TOKEN_CHARS else token[:MAX_TOKEN_CHARS - 1] + "…"


def batch_frame(tokens: Sequence[Sequence[str]], keep, row_names: Sequence[str]) -> pd.DataFrame:
    """One row per (sentence, position): the token, and whether the padding mask keeps it."""
    keep = as_numpy(keep).astype(bool)
    b, n = keep.shape
    return pd.DataFrame({
        "sentence": np.repeat(list(row_names), n),
        "row": np.repeat(np.arange(b), n),
        "pos": np.tile(np.arange(n), b),
        "token": [tok for row in tokens for tok in row],
        "cell_text": [_short(tok) for row in tokens for tok in row],
        "mask": keep.ravel().astype(int),
        "visible": keep.ravel(),
    })


def batch_chart(tokens: Sequence[Sequence[str]], keep, *, row_names: Sequence[str], title: str,
                x_title: str, y_title: str, mask_title: str, token_title: str,
                selected: int | None = None) -> alt.Chart:
    """The padded batch as a (b, n) grid: real tokens blue, [PAD] grey; the selected sentence outlined."""
    frame = batch_frame(tokens, keep, row_names)
    frame["selected"] = frame["row"] == (-1 if selected is None else selected)
    base = alt.Chart(frame).encode(
        x=alt.X("pos:O", title=x_title, axis=alt.Axis(orient="top", labelAngle=0)),
        y=alt.Y("sentence:N", sort=list(row_names), title=y_title),
    )
    tooltip = [alt.Tooltip("sentence:N", title=y_title), alt.Tooltip("pos:O", title=x_title),
               alt.Tooltip("token:N", title=token_title), alt.Tooltip("mask:Q", title=mask_title)]
    rect = base.mark_rect(strokeWidth=2).encode(
        color=alt.when(alt.datum.visible).then(alt.value(VISIBLE_BLUE)).otherwise(alt.value(MASKED_GREY)),
        stroke=alt.when(alt.datum.selected).then(alt.value("#e66101")).otherwise(alt.value("white")),
        tooltip=tooltip)
    text = base.mark_text(fontSize=11).encode(
        text="cell_text:N",
        color=alt.when(alt.datum.visible).then(alt.value("white")).otherwise(alt.value("#555555")),
        tooltip=tooltip)
    return alt.layer(rect, text).properties(title=title, height=max(90, 32 * len(row_names)))


def mask_frame(mask, labels: Sequence[str]) -> pd.DataFrame:
    m = as_numpy(mask).astype(bool)
    names = unique_labels(list(labels))
    n_q, n_k = m.shape
    qi, ki = np.meshgrid(np.arange(n_q), np.arange(n_k), indexing="ij")
    return pd.DataFrame({"query_pos": qi.ravel(), "key_pos": ki.ravel(),
                         "query": np.repeat(names[:n_q], n_k), "key": np.tile(names[:n_k], n_q),
                         "visible": m.ravel(), "mask": m.ravel().astype(int)})


def mask_grid(mask, labels: Sequence[str], *, title: str, x_title: str, y_title: str,
              mask_title: str, cell: int = 24) -> alt.Chart:
    """One boolean mask (queries x keys): True = visible (blue), False = hidden (grey ×)."""
    frame = mask_frame(mask, labels)
    order = list(dict.fromkeys(frame["key"]))
    base = alt.Chart(frame).encode(
        x=alt.X("key:N", sort=order, title=x_title,
                axis=alt.Axis(orient="top", labelAngle=-45, labelLimit=70)),
        y=alt.Y("query:N", sort=list(dict.fromkeys(frame["query"])), title=y_title,
                axis=alt.Axis(labelLimit=70)),
    )
    tooltip = [alt.Tooltip("query:N", title=y_title), alt.Tooltip("key:N", title=x_title),
               alt.Tooltip("mask:Q", title=mask_title)]
    rect = base.mark_rect(stroke="white", strokeWidth=1).encode(
        color=alt.when(alt.datum.visible).then(alt.value(VISIBLE_BLUE)).otherwise(alt.value(MASKED_GREY)),
        tooltip=tooltip)
    text = base.transform_filter(~alt.datum.visible).mark_text(text="×", color="#666666", fontSize=11)
    n = frame["query_pos"].nunique()
    return alt.layer(rect, text).properties(title=title, width=cell * frame["key_pos"].nunique(),
                                            height=cell * n)


def mask_panels(panels: Sequence[tuple[str, object]], labels: Sequence[str], *, x_title: str,
                y_title: str, mask_title: str) -> alt.HConcatChart:
    """Masks side by side (e.g. padding, look-ahead, their AND) as one chart."""
    charts = [mask_grid(m, labels, title=title, x_title=x_title, y_title=y_title if i == 0 else "",
                        mask_title=mask_title) for i, (title, m) in enumerate(panels)]
    return alt.hconcat(*charts, spacing=18).resolve_scale(color="independent")

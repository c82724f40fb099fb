"""Charts of the masking page: the padded batch, boolean masks, and one row of weights.

Pure functions (no Streamlit calls); every title and label is passed in already translated.
Visible cells are blue, hidden ones grey with a "×", so a mask reads without a colour legend.

These are small grids drawn on every rerun, so they are written as plain Vega-Lite specs
(``(data, spec)`` for ``st.vega_lite_chart``) rather than Altair objects: building and
validating an Altair chart costs tens of milliseconds, a dict costs almost nothing.
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from .charts import MASKED_GREY, as_numpy, unique_labels

VISIBLE_BLUE = "#4c78a8"
HIGHLIGHT = "#e66101"
MAX_TOKEN_CHARS = 8


def _short(token: str) -> str:
    return token if len(token) <= MAX_TOKEN_CHARS else token[:MAX_TOKEN_CHARS - 1] + "…"


def _visible_colour() -> dict:
    return {"condition": {"test": "datum.visible", "value": VISIBLE_BLUE}, "value": MASKED_GREY}


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
        "cell_text": [_short(tok) for row in tokens for tok in row],
        "mask": keep.ravel().astype(int),
        "visible": keep.ravel(),
        "selected": rows == (-1 if selected is None else selected),
    })


def batch_chart(tokens: Sequence[Sequence[str]], keep, *, row_names: Sequence[str], title: str,
                x_title: str, y_title: str, mask_title: str, token_title: str,
                selected: int | None = None) -> tuple[pd.DataFrame, dict]:
    """The padded batch as a (b, n) grid: real tokens blue, [PAD] grey; the selected sentence outlined."""
    frame = batch_frame(tokens, keep, row_names, selected)
    tooltip = [{"field": "sentence", "type": "nominal", "title": y_title},
               {"field": "pos", "type": "ordinal", "title": x_title},
               {"field": "token", "type": "nominal", "title": token_title},
               {"field": "mask", "type": "quantitative", "title": mask_title}]
    spec = {
        "title": title,
        "height": {"step": 28},                      # one row per sentence, whatever the title takes
        "encoding": {
            "x": {"field": "pos", "type": "ordinal", "title": x_title,
                  "axis": {"orient": "top", "labelAngle": 0}},
            "y": {"field": "sentence", "type": "nominal", "sort": list(row_names), "title": y_title},
        },
        "layer": [
            {"mark": {"type": "rect", "strokeWidth": 2},
             "encoding": {"color": _visible_colour(), "tooltip": tooltip,
                          "stroke": {"condition": {"test": "datum.selected", "value": HIGHLIGHT},
                                     "value": "white"}}},
            {"mark": {"type": "text", "fontSize": 11},
             "encoding": {"text": {"field": "cell_text", "type": "nominal"}, "tooltip": tooltip,
                          "color": {"condition": {"test": "datum.visible", "value": "white"},
                                    "value": "#555555"}}},
        ],
    }
    return frame, spec


# ------------------------------------------------------------------ boolean masks side by side
def mask_frame(mask, labels: Sequence[str], panel: str = "") -> pd.DataFrame:
    m = as_numpy(mask).astype(bool)
    names = unique_labels(list(labels))
    n_q, n_k = m.shape
    qi, ki = np.meshgrid(np.arange(n_q), np.arange(n_k), indexing="ij")
    return pd.DataFrame({"panel": panel, "query_pos": qi.ravel(), "key_pos": ki.ravel(),
                         "query": np.repeat(names[:n_q], n_k), "key": np.tile(names[:n_k], n_q),
                         "visible": m.ravel(), "mask": m.ravel().astype(int)})


def mask_panels(panels: Sequence[tuple[str, object]], labels: Sequence[str], *, x_title: str,
                y_title: str, mask_title: str, cell: int = 22) -> tuple[pd.DataFrame, dict]:
    """Masks side by side (e.g. padding, look-ahead, their AND), one facet per mask."""
    frame = pd.concat([mask_frame(m, labels, title) for title, m in panels], ignore_index=True)
    order = unique_labels(list(labels))
    tooltip = [{"field": "query", "type": "nominal", "title": y_title},
               {"field": "key", "type": "nominal", "title": x_title},
               {"field": "mask", "type": "quantitative", "title": mask_title}]
    spec = {
        "facet": {"column": {"field": "panel", "type": "nominal", "sort": [p for p, _ in panels],
                             "title": None, "header": {"labelFontSize": 13, "labelFontWeight": "bold",
                                                       "labelOrient": "top"}}},
        "spacing": 24,
        "spec": {
            "width": {"step": cell}, "height": {"step": cell},
            "encoding": {
                "x": {"field": "key", "type": "nominal", "sort": order, "title": x_title,
                      "axis": {"orient": "bottom", "labelAngle": -45, "labelLimit": 70}},
                "y": {"field": "query", "type": "nominal", "sort": order, "title": y_title,
                      "axis": {"labelLimit": 70}},
            },
            "layer": [
                {"mark": {"type": "rect", "stroke": "white", "strokeWidth": 1},
                 "encoding": {"color": _visible_colour(), "tooltip": tooltip}},
                {"transform": [{"filter": "!datum.visible"}],
                 "mark": {"type": "text", "text": "×", "color": "#666666", "fontSize": 11}},
            ],
        },
    }
    return frame, spec


# ------------------------------------------------------------------ one row of weights
def row_bars(weights, hidden, labels: Sequence[str], *, value_title: str, label_title: str,
             hidden_title: str, height: int = 200) -> tuple[pd.DataFrame, dict]:
    """The weights of one query as bars; hidden keys drawn as a grey "×" at exactly 0."""
    w = as_numpy(np.asarray(weights, dtype=np.float64).reshape(1, -1))[0]
    h = np.asarray(hidden, dtype=bool).reshape(-1)
    frame = pd.DataFrame({"pos": np.arange(len(w)), "label": unique_labels(list(labels)), "value": w,
                          "exact": np.char.mod("%.8g", w), "visible": ~h,
                          "status": np.where(h, hidden_title, "")})
    tooltip = [{"field": "label", "type": "nominal", "title": label_title},
               {"field": "exact", "type": "nominal", "title": value_title},
               {"field": "status", "type": "nominal", "title": " "}]
    spec = {
        "height": height,
        "encoding": {"x": {"field": "label", "type": "nominal", "sort": list(frame["label"]),
                           "title": label_title, "axis": {"labelAngle": -45, "labelOverlap": True}}},
        "layer": [
            {"mark": {"type": "bar"},
             "encoding": {"y": {"field": "value", "type": "quantitative", "title": value_title,
                                "scale": {"domain": [0, 1]}},
                          "color": _visible_colour(), "tooltip": tooltip}},
            {"transform": [{"filter": "!datum.visible"}],
             "mark": {"type": "text", "text": "×", "color": "#666666", "fontSize": 14, "dy": -8},
             "encoding": {"y": {"field": "value", "type": "quantitative"}, "tooltip": tooltip}},
        ],
    }
    return frame, spec

"""Charts of the GQA page: which query heads read which K/V head, the trained models' quality against the cache
each keeps, and the cache per token of MHA, GQA, MQA and MLA."""
from __future__ import annotations

from typing import Sequence

import altair as alt
import numpy as np
import pandas as pd

from .charts import FIT_X, chart_kind

QUERY_ROW, KV_ROW = 1.0, 0.0
ACCENT, BASE = "#e66101", "#3b528b"


def sharing_frame(kv_of: Sequence[int], query_label: str, kv_label: str) -> pd.DataFrame:
    """One row per query head: its position, the position of the K/V head it reads (centred under its group),
    and labels (``query_label`` / ``kv_label`` hold ``{i}``)."""
    kv_of = np.asarray(kv_of, int)
    h, h_kv = len(kv_of), int(kv_of.max()) + 1
    group = h // h_kv
    return pd.DataFrame({"qx": np.arange(h, dtype=float), "kvx": kv_of * group + (group - 1) / 2,
                         "q_row": QUERY_ROW, "kv_row": KV_ROW,
                         "query": [query_label.format(i=i + 1) for i in range(h)],
                         "kv": [kv_label.format(i=g + 1) for g in kv_of],
                         "odd": (kv_of % 2).astype(bool),
                         "first": np.arange(h) % group == 0})          # one K/V mark and label per group


@chart_kind(fill=("title",))
def sharing_picture(frame, *, query_title: str, kv_title: str, labels: bool, title: str | None = None) -> alt.Chart:
    """Query heads on the top row, K/V heads on the bottom row, a line from each query head to the K/V head it
    reads; neighbouring groups alternate colours."""
    color = alt.when(alt.datum.odd).then(alt.value(ACCENT)).otherwise(alt.value(BASE))
    x = alt.X("qx:Q", axis=None, scale=alt.Scale(padding=14, nice=False))
    names = f"datum.value == {QUERY_ROW:g} ? '{query_title}' : datum.value == {KV_ROW:g} ? '{kv_title}' : ''"
    axis = alt.Axis(values=[KV_ROW, QUERY_ROW], labelExpr=names, grid=False, domain=False, ticks=False,
                    labelFontSize=12, labelPadding=6)
    y = alt.Y("q_row:Q", title=None, scale=alt.Scale(domain=[-0.45, 1.45]), axis=axis)
    y_kv = alt.Y("kv_row:Q", title=None, scale=alt.Scale(domain=[-0.45, 1.45]), axis=axis)
    x_kv = alt.X("kvx:Q", axis=None, scale=alt.Scale(padding=14, nice=False))
    tips = [alt.Tooltip("query:N", title=query_title), alt.Tooltip("kv:N", title=kv_title)]
    base = alt.Chart(frame)
    rules = base.mark_rule(strokeWidth=2, opacity=0.7).encode(x=x, x2="kvx:Q", y=y, y2="kv_row:Q", color=color,
                                                             tooltip=tips)
    queries = base.mark_circle(size=110, opacity=1).encode(x=x, y=y, color=color, tooltip=tips)
    firsts = base.transform_filter(alt.datum.first)
    kvs = firsts.mark_square(size=260, opacity=1).encode(x=x_kv, y=y_kv, color=color, tooltip=tips)
    layers = [rules, queries, kvs]
    if labels:
        layers.append(base.mark_text(dy=-13, fontSize=10).encode(x=x, y=y, text="query:N"))
        layers.append(firsts.mark_text(dy=17, fontSize=10).encode(x=x_kv, y=y_kv, text="kv:N"))
    chart = alt.layer(*layers).properties(height=170, autosize=FIT_X)
    return chart.properties(title=title) if title else chart


def quality_frame(labels: Sequence[str], cache_bytes: Sequence[int], values: Sequence[float],
                  half_widths: Sequence[float]) -> pd.DataFrame:
    """One row per trained model: cache bytes per token, the value and its 95% interval."""
    v, hw = np.asarray(values, float), np.asarray(half_widths, float)
    return pd.DataFrame({"model": list(labels), "bytes": np.asarray(cache_bytes, int), "value": v,
                         "lo": v - hw, "hi": v + hw, "exact": [f"{a:.4f} ± {b:.4f}" for a, b in zip(v, hw)]})


@chart_kind(fill=("title", "domain"))
def quality_points(frame, *, x_title: str, y_title: str, model_title: str, domain=None,
                   title: str | None = None) -> alt.Chart:
    """The recorded value of each model (point) with its 95% interval (bar) against the cache it keeps."""
    x = alt.X("bytes:Q", title=x_title, scale=alt.Scale(type="log", base=2, padding=24, nice=False),
              axis=alt.Axis(format="d", tickCount=4))
    y = alt.Y("value:Q", title=y_title, scale=alt.Scale(domain=domain, zero=False) if domain
              else alt.Scale(zero=False))
    tips = [alt.Tooltip("model:N", title=model_title), alt.Tooltip("bytes:Q", title=x_title),
            alt.Tooltip("exact:N", title=y_title)]
    base = alt.Chart(frame)
    bars = base.mark_rule(strokeWidth=2, color=BASE).encode(x=x, y=alt.Y("lo:Q", title=y_title), y2="hi:Q",
                                                            tooltip=tips)
    points = base.mark_point(filled=True, size=80, color=ACCENT).encode(x=x, y=y, tooltip=tips)
    names = base.mark_text(dy=-14, fontSize=11).encode(x=x, y="hi:Q", text="model:N")
    chart = alt.layer(bars, points, names).properties(height=240, autosize=FIT_X)
    return chart.properties(title=title) if title else chart


def sizes_frame(variants: Sequence[str], per_layer: Sequence[int], formulas: Sequence[str],
                chosen: str) -> pd.DataFrame:
    return pd.DataFrame({"variant": list(variants), "numbers": np.asarray(per_layer, int), "floor": 1,
                         "formula": list(formulas), "chosen": [v == chosen for v in variants]})


@chart_kind(fill=("order", "title"))
def cache_bars(frame, *, x_title: str, y_title: str, formula_title: str, order=(),
               title: str | None = None) -> alt.Chart:
    """Numbers cached per token and layer of each variant on a log scale (MHA is 128 times MQA); the bars start
    at 1 (a log scale has no 0) and carry their value on the right."""
    base = alt.Chart(frame).encode(
        y=alt.Y("variant:N", sort=order, title=y_title),
        x=alt.X("numbers:Q", title=x_title, scale=alt.Scale(type="log", domain=[1, 400000])),
        tooltip=[alt.Tooltip("variant:N", title=y_title), alt.Tooltip("numbers:Q", title=x_title, format=","),
                 alt.Tooltip("formula:N", title=formula_title)])
    bars = base.mark_bar().encode(
        x2="floor:Q", color=alt.when(alt.datum.chosen).then(alt.value(ACCENT)).otherwise(alt.value(BASE)))
    text = base.mark_text(align="left", dx=4, fontSize=11).encode(text=alt.Text("numbers:Q", format=","))
    chart = (bars + text).properties(height=160, autosize=FIT_X)
    return chart.properties(title=title) if title else chart

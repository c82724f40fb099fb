"""Charts of the attention-analysis page: the tutorial's analyser next to the corrected one.

A frame builder (pure), a chart kind (``ui.charts.chart_kind``) and the function the page calls; every
title and label is passed in already translated. The heatmaps are ``ui.charts.heatmap``'s, the heads of
one sentence and the query/key plane ``ui.multihead_charts``'.
"""
from __future__ import annotations

from collections.abc import Sequence

import altair as alt
import numpy as np
import pandas as pd

from .charts import Spec, chart_kind

VERSION_COLOURS = ("#e66101", "#3b528b")     # the tutorial's numbers orange, the corrected ones blue


def compare_frame(values: Sequence, versions: Sequence[str], layers: Sequence[str]) -> pd.DataFrame:
    """Long form of ``values[v][layer]``: one row per (version, layer)."""
    rows = []
    for v, (name, per_layer) in enumerate(zip(versions, values)):
        for i, (layer, x) in enumerate(zip(layers, np.asarray(per_layer, dtype=np.float64))):
            rows.append({"version_pos": v, "version": name, "layer_pos": i, "layer": layer, "value": float(x),
                         "exact": f"{x:.8g}"})
    return pd.DataFrame(rows)


@chart_kind(fill=("title", "versions", "layers"))
def compare_chart(frame, *, layer_title: str, value_title: str, version_title: str, domain=None,
                  versions=(), layers=(), title: str = "", width: int = 300, height: int = 240) -> alt.LayerChart:
    """For every layer, one bar per version of a statistic (the tutorial's and the corrected one),
    numbers on the bars so that small differences can be read. No legend (Streamlit would take its
    room from the plot): the page's caption names the colours."""
    y = alt.Y("value:Q", title=value_title, scale=alt.Scale(domain=domain) if domain else alt.Undefined)
    colour = alt.Color("version:N", title=version_title, sort=versions,
                       scale=alt.Scale(domain=versions, range=list(VERSION_COLOURS)), legend=None)
    base = alt.Chart(frame).encode(
        x=alt.X("layer:N", sort=layers, title=layer_title, axis=alt.Axis(labelAngle=0)),
        xOffset=alt.XOffset("version:N", sort=versions),
        y=y,
        tooltip=[alt.Tooltip("version:N", title=version_title), alt.Tooltip("layer:N", title=layer_title),
                 alt.Tooltip("exact:N", title=value_title)],
    )
    bars = base.mark_bar().encode(color=colour)
    text = base.mark_text(dy=-6, fontSize=10).encode(text=alt.Text("value:Q", format=".3f"))
    return alt.layer(bars, text).properties(title=title, width=width, height=height)


def compare_bars(values: Sequence, versions: Sequence[str], layers: Sequence[str], *, title: str,
                 layer_title: str, value_title: str, version_title: str,
                 domain: tuple[float, float] | None = None) -> Spec:
    """The tutorial's and the corrected statistic of every layer side by side."""
    return compare_chart(compare_frame(values, versions, layers), layer_title=layer_title, value_title=value_title,
                         version_title=version_title, domain=None if domain is None else [float(d) for d in domain],
                         versions=list(versions), layers=list(layers), title=title)

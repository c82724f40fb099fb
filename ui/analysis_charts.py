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

from .charts import WEIGHT_SCHEME, Spec, chart_kind
from .multihead_charts import panels_frame

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


# --- every head of one sentence --------------------------------------------------------------------------

@chart_kind(fill=("key_order", "query_order", "panel_order", "panel_size"))
def heads_grid_chart(frame, *, columns: int, x_title: str, y_title: str, value_title: str, panel_title: str,
                     key_order=(), query_order=(), panel_order=(), panel_size: int = 130) -> alt.FacetChart:
    """One small heatmap per head (``multihead_charts.panels_frame``'s frame), 0..1 colours, in ``columns``
    columns. Sized for a phone as well as a projector: two columns of ``panel_size`` px fit 358 px, the key
    labels stand vertical (one font height apart, never hidden for overlap: the page quotes tokens), the colour
    legend sits below."""
    axis_x = alt.Axis(labelAngle=-90, labelFontSize=9, labelLimit=60, labelOverlap=False)
    axis_y = alt.Axis(labelFontSize=9, labelLimit=60, labelOverlap=False)
    tooltip = [alt.Tooltip("panel:N", title=panel_title), alt.Tooltip("query:N", title=y_title),
               alt.Tooltip("key:N", title=x_title), alt.Tooltip("exact:N", title=value_title)]
    base = alt.Chart(frame).mark_rect().encode(
        x=alt.X("key:N", sort=key_order, title=x_title, axis=axis_x),
        y=alt.Y("query:N", sort=query_order, title=y_title, axis=axis_y),
        color=alt.Color("value:Q", title=value_title, scale=alt.Scale(domain=[0, 1], scheme=WEIGHT_SCHEME),
                        legend=alt.Legend(orient="bottom", gradientLength=200)),
        tooltip=tooltip,
    ).properties(width=panel_size, height=panel_size)
    return base.facet(
        facet=alt.Facet("panel:N", sort=panel_order, title=None,
                        header=alt.Header(labelFontSize=11, labelFontWeight="bold", labelLimit=panel_size + 20)),
        columns=max(1, columns), spacing=8)


def heads_grid(weights, tokens: Sequence[str], *, titles: Sequence[str], x_title: str, y_title: str,
               value_title: str, panel_title: str, columns: int = 2) -> Spec:
    """Every head's (n, n) weights (``weights``: (panels, n, n)) as ``heads_grid_chart``; panels of 11 px a token,
    at least 130 px (a vertical label 9 px high needs 11 px)."""
    frame, _ = panels_frame(weights, tokens, tokens, titles)
    return heads_grid_chart(frame, columns=columns, x_title=x_title, y_title=y_title, value_title=value_title,
                            panel_title=panel_title, key_order=list(dict.fromkeys(frame["key"])),
                            query_order=list(dict.fromkeys(frame["query"])),
                            panel_order=list(dict.fromkeys(frame["panel"])), panel_size=max(130, 11 * len(tokens)))

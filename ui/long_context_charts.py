"""Charts of the long-context page: accuracy against length, RoPE wavelengths per dimension pair before and after
scaling, the first-layer logit of the query with the topic against distance, and accuracy by position."""
from __future__ import annotations

from typing import Sequence

import altair as alt
import numpy as np
import pandas as pd

from .charts import FIT_X, chart_kind

# one colour per curve, far apart in hue and lightness (Dark2-like, with the app's blue and orange first)
SERIES_COLORS = ("#3b528b", "#e66101", "#1b9e77", "#7570b3", "#e7298a", "#666666", "#a6761d", "#66a61e")
RULE_COLOR = "#444444"


def lines_frame(x: Sequence[float], series: dict[str, Sequence[float | None]], rules: Sequence[float] = ()
                ) -> pd.DataFrame:
    """Long form: x, y, series, part ("line" or "rule"); a None y leaves a gap (no point). ``rules``: x positions
    of vertical rules (e.g. the training length). Compact for the browser (less to send on every redraw): x and y
    float32 (the tooltip formats y), series and part categorical (sent once per chart, not once per row); built from
    numpy arrays in one go (a frame per series and a concat cost more than the chart's data)."""
    xs = np.asarray(x, np.float32)
    cols, ys, codes = [], [], []
    for i, values in enumerate(series.values()):
        y = np.array([np.nan if v is None else v for v in values], np.float32)
        keep = ~np.isnan(y)
        cols.append(xs[keep])
        ys.append(y[keep])
        codes.append(np.full(int(keep.sum()), i, np.int8))
    r = np.asarray(rules, np.float32)
    cols.append(r)
    ys.append(np.full(len(r), np.nan, np.float32))
    codes.append(np.full(len(r), len(series), np.int8))
    code = np.concatenate(codes)
    return pd.DataFrame({"x": np.concatenate(cols), "y": np.concatenate(ys),
                         "series": pd.Categorical.from_codes(code, categories=[*series, ""]),
                         "part": pd.Categorical.from_codes((code == len(series)).astype(np.int8),
                                                           categories=["line", "rule"])})


@chart_kind(fill=("series", "domain", "title", "height"))
def lines_chart(frame, *, x_title: str, y_title: str, series_title: str, log_x: bool, log_y: bool,
                points: bool, series=(), domain=None, height: int = 280, title: str | None = None) -> alt.Chart:
    """One line per series against x, optional log axes, dashed vertical rules (``part == "rule"``)."""
    x = alt.X("x:Q", title=x_title, scale=alt.Scale(type="log", base=2) if log_x else alt.Undefined)
    y_scale = alt.Scale(type="log") if log_y else (alt.Scale(domain=domain) if domain else alt.Undefined)
    base = alt.Chart(frame)
    colour = alt.Color("series:N", title=series_title, sort=series,
                       scale=alt.Scale(domain=series, range=list(SERIES_COLORS)),
                       legend=alt.Legend(orient="bottom", columns=1, labelLimit=260))
    line = base.transform_filter(alt.datum.part == "line").mark_line(point=points).encode(
        x=x, y=alt.Y("y:Q", title=y_title, scale=y_scale), color=colour,
        tooltip=[alt.Tooltip("series:N", title=series_title), alt.Tooltip("x:Q", title=x_title),
                 alt.Tooltip("y:Q", title=y_title, format=".4f")])
    rule = base.transform_filter(alt.datum.part == "rule").mark_rule(color=RULE_COLOR, strokeDash=[4, 3]).encode(x=x)
    chart = alt.layer(line, rule).properties(height=height, autosize=FIT_X)
    return chart.properties(title=title) if title else chart


def pairs_frame(pairs: Sequence[int], methods: Sequence[str], wavelengths: Sequence[float],
                limits: dict[str, float]) -> pd.DataFrame:
    """Long form of the wavelength chart: pair, method, wavelength, exact, part ("point" or "limit"); ``limits``
    names horizontal rules (label -> tokens), e.g. the training length and the evaluation length."""
    w = np.asarray(wavelengths, float)
    points = pd.DataFrame({"pair": np.asarray(pairs, int), "method": list(methods), "wavelength": w,
                           "exact": np.char.mod("%.1f", w), "part": "point"})
    rules = pd.DataFrame({"pair": 0, "method": list(limits), "wavelength": np.asarray(list(limits.values()), float),
                          "exact": [f"{v:g}" for v in limits.values()], "part": "limit"})
    return pd.concat([points, rules], ignore_index=True)


@chart_kind(fill=("methods", "title"))
def wavelength_chart(frame, *, x_title: str, y_title: str, method_title: str, methods=(),
                     title: str | None = None) -> alt.Chart:
    """Wavelength 2 pi / theta_i' per dimension pair (log scale), one line per method; labelled rules at the
    lengths in ``part == "limit"``."""
    base = alt.Chart(frame)
    y = alt.Y("wavelength:Q", title=y_title, scale=alt.Scale(type="log"))
    colour = alt.Color("method:N", title=method_title, sort=methods,
                       scale=alt.Scale(domain=methods, range=list(SERIES_COLORS)),
                       legend=alt.Legend(orient="bottom", columns=1, labelLimit=260))
    line = base.transform_filter(alt.datum.part == "point").mark_line(point=True).encode(
        x=alt.X("pair:O", title=x_title, axis=alt.Axis(labelAngle=0)), y=y, color=colour,
        tooltip=[alt.Tooltip("method:N", title=method_title), alt.Tooltip("pair:O", title=x_title),
                 alt.Tooltip("exact:N", title=y_title)])
    limits = base.transform_filter(alt.datum.part == "limit")
    rule = limits.mark_rule(color=RULE_COLOR, strokeDash=[4, 3]).encode(y=y)
    text = limits.mark_text(align="left", dx=4, dy=-6, color=RULE_COLOR).encode(
        y=y, x=alt.value(0), text="method:N")
    chart = alt.layer(line, rule, text).properties(height=300, autosize=FIT_X)
    return chart.properties(title=title) if title else chart

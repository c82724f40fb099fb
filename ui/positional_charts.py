"""Charts of the positional-encoding page: frame builders (pure) and ``ui.charts.chart_kind`` builders.

Every title and label is passed in already translated. Heatmaps come from ``ui.charts.heatmap``;
here are the line and arrow charts: a column pair of the table next to a counter bit, the
similarity of positions by offset, exact gaps on a linear axis, and the rotation of one (q, k)
dimension pair by RoPE.
"""
from __future__ import annotations

from collections.abc import Sequence

import altair as alt
import numpy as np
import pandas as pd

from . import format as fmt
from .charts import FIT_X, Spec, as_numpy, chart_kind

ORANGE, BLUE, GREY, GREEN = "#e66101", "#3b528b", "#7f7f7f", "#1b9e77"
MAX_WAVE_POINTS = 64   # curves with more positions are drawn without point markers
MAX_OFFSET_POINTS = 160


def _vec(x) -> np.ndarray:
    return as_numpy(np.asarray(x.detach().cpu().double() if hasattr(x, "detach") else x,
                               dtype=np.float64).reshape(1, -1))[0]


# ------------------------------------------------------------------ a column pair next to a counter bit
def wave_frame(sin, cos, bit, series: Sequence[str]) -> pd.DataFrame:
    """position, value, series (legend label), curve ("sin", "cos", "bit"), exact: one row per point."""
    s, c, b = _vec(sin), _vec(cos), _vec(bit)
    n = len(s)
    frame = pd.DataFrame({
        "position": np.tile(np.arange(n), 3),
        "value": np.concatenate([s, c, 2 * b - 1]),
        "series": np.repeat(list(series), n),
        "curve": np.repeat(["sin", "cos", "bit"], n),
    })
    frame["exact"] = np.char.mod("%.6g", frame["value"].to_numpy())
    return frame


@chart_kind(fill=("series", "x_domain", "title"))
def wave_lines(frame, *, x_title: str, y_title: str, points: bool, height: int = 220, series=(), x_domain=(),
               title: str = "") -> alt.LayerChart:
    """Three curves over the positions: sin and cos of one column pair, and a counter bit as +-1 steps."""
    colour = alt.Color("series:N", title=None, sort=series,
                       scale=alt.Scale(domain=series, range=[BLUE, GREEN, ORANGE]), legend=alt.Legend(orient="bottom"))
    tooltip = [alt.Tooltip("series:N", title=" "), alt.Tooltip("position:Q", title=x_title),
               alt.Tooltip("exact:N", title=y_title)]
    base = alt.Chart(frame).encode(
        x=alt.X("position:Q", title=x_title, scale=alt.Scale(domain=x_domain, nice=False)),
        y=alt.Y("value:Q", title=y_title, scale=alt.Scale(domain=[-1.1, 1.1])),
        color=colour, tooltip=tooltip)
    smooth = base.transform_filter(alt.datum.curve != "bit").mark_line(point=points)
    steps = base.transform_filter(alt.datum.curve == "bit").mark_line(
        interpolate="step-after", strokeDash=[4, 3], strokeWidth=2)
    return alt.layer(smooth, steps).properties(title=title, height=height, autosize=FIT_X)


def wave_chart(sin, cos, bit, *, series: Sequence[str], x_title: str, y_title: str, title: str) -> Spec:
    """``series`` names the three curves (legend labels) in that order."""
    frame = wave_frame(sin, cos, bit, series)
    n = len(frame) // 3
    return wave_lines(frame, x_title=x_title, y_title=y_title, points=n <= MAX_WAVE_POINTS, series=list(series),
                      x_domain=[0, max(n - 1, 1)], title=title)


# ------------------------------------------------------------------ similarity by offset
def offset_frame(curves, labels: Sequence[str]) -> pd.DataFrame:
    """``curves`` are ``labs.positional.OffsetCurve``; one row per (reference, offset)."""
    parts = []
    for curve, label in zip(curves, labels):
        dots = curve.dots.double().numpy()
        parts.append(pd.DataFrame({"offset": curve.offsets.numpy(), "dot": dots, "reference": label,
                                   "exact": np.char.mod("%.6g", dots)}))
    return pd.concat(parts, ignore_index=True)


@chart_kind(fill=("labels", "title"))
def offset_lines(frame, *, x_title: str, y_title: str, points: bool, colours: tuple, dashes: tuple,
                 height: int = 240, labels=(), title: str = "") -> alt.Chart:
    """PE[p] . PE[p + k] against the offset k, one line per reference position p."""
    colour = alt.Color("reference:N", title=None, sort=labels, scale=alt.Scale(domain=labels, range=list(colours)),
                       legend=alt.Legend(orient="bottom"))
    dash = alt.StrokeDash("reference:N", sort=labels, legend=None,
                          scale=alt.Scale(domain=labels, range=[list(d) for d in dashes]))
    return alt.Chart(frame).mark_line(point=points, strokeWidth=2).encode(
        x=alt.X("offset:Q", title=x_title), y=alt.Y("dot:Q", title=y_title), color=colour, strokeDash=dash,
        tooltip=[alt.Tooltip("reference:N", title=" "), alt.Tooltip("offset:Q", title=x_title),
                 alt.Tooltip("exact:N", title=y_title)],
    ).properties(title=title, height=height, autosize=FIT_X)


def offset_chart(curves, *, labels: Sequence[str], x_title: str, y_title: str, title: str) -> Spec:
    """Lines that lie on top of each other say: the dot product depends on the offset only."""
    frame = offset_frame(curves, labels)
    k = len(labels)
    return offset_lines(frame, x_title=x_title, y_title=y_title, points=len(frame) <= MAX_OFFSET_POINTS,
                        colours=(ORANGE, BLUE, GREEN)[:k], dashes=((1, 0), (6, 4), (2, 2))[:k], labels=list(labels),
                        title=title)


# ------------------------------------------------------------------ exact gaps on a linear axis
def gap_frame(values: Sequence[float], names: Sequence[str], highlight: int | None = None) -> pd.DataFrame:
    vals = np.asarray(values, dtype=np.float64)
    return pd.DataFrame({"pos": np.arange(len(vals)), "name": list(names), "value": vals,
                         "exact": [fmt.short(v) for v in vals],
                         "highlight": np.arange(len(vals)) == (-1 if highlight is None else highlight)})


@chart_kind(fill=("names", "x_domain", "height"))
def gap_bars_chart(frame, *, x_title: str, y_title: str, names=(), x_domain=(), height: int = 90) -> alt.LayerChart:
    """One horizontal bar per name on a LINEAR axis, the exact value printed next to each bar: a rounding-size
    gap (1e-7) has no visible bar and says so in its number; a log axis made it look like a real effect."""
    base = alt.Chart(frame).encode(
        y=alt.Y("name:N", sort=names, title=None, axis=alt.Axis(labelLimit=220)),
        x=alt.X("value:Q", title=x_title, scale=alt.Scale(domain=x_domain, nice=False),
                axis=alt.Axis(tickCount=4, format="~g")),
        tooltip=[alt.Tooltip("name:N", title=" "), alt.Tooltip("exact:N", title=y_title)])
    bars = base.mark_bar().encode(
        color=alt.when(alt.datum.highlight).then(alt.value(ORANGE)).otherwise(alt.value(BLUE)))
    text = base.mark_text(align="left", dx=4, fontSize=11).encode(text="exact:N")
    return alt.layer(bars, text).properties(height=height, autosize=FIT_X)


def gap_chart(values: Sequence[float], names: Sequence[str], *, x_title: str, y_title: str,
              highlight: int | None = None) -> Spec:
    frame = gap_frame(values, names, highlight)
    top = float(frame["value"].max())
    top = top * 1.6 if top > 0 else 1.0           # room right of the longest bar for its number
    return gap_bars_chart(frame, x_title=x_title, y_title=y_title, names=list(names), x_domain=[0.0, top],
                          height=max(90, 24 * len(frame)))


# ------------------------------------------------------------------ the rotation of one dimension pair
def rotation_frame(q_pair, k_pair, angles: dict[str, float], labels: dict[str, str]) -> pd.DataFrame:
    """One unit arrow per name of ``angles`` ("q", "k", "q_shift", "k_shift"): the pair rotated by its angle."""
    q, k = _vec(q_pair)[:2], _vec(k_pair)[:2]
    q, k = q / max(np.linalg.norm(q), 1e-12), k / max(np.linalg.norm(k), 1e-12)
    rows = []
    for name, angle in angles.items():
        v = q if name.startswith("q") else k
        c, s = np.cos(angle), np.sin(angle)
        x, y = c * v[0] - s * v[1], s * v[0] + c * v[1]
        rows.append({"name": labels[name], "x": 0.0, "y": 0.0, "x2": x, "y2": y,
                     "shifted": name.endswith("shift"), "exact": f"({x:.3f}, {y:.3f})"})
    return pd.DataFrame(rows)


@chart_kind(fill=("order",))
def rotation_arrows(frame, *, title: str, colours: tuple, dashed: tuple, height: int = 300,
                    order=()) -> alt.LayerChart:
    """Dimensions (x_0, x_1) of q and k as unit arrows; shifted ones dashed, with a diamond tip."""
    # one legend (colour and dash share the field): solid = at m and j, dashed = both shifted by s
    legend = alt.Legend(orient="bottom", columns=1, symbolType="stroke", symbolStrokeWidth=3, labelLimit=0)
    colour = alt.Color("name:N", title=None, sort=order, legend=legend,
                       scale=alt.Scale(domain=order, range=list(colours)))
    dash = alt.StrokeDash("name:N", title=None, sort=order, legend=legend,
                          scale=alt.Scale(domain=order, range=[[5, 3] if d else [1, 0] for d in dashed]))
    scale = alt.Scale(domain=[-1.15, 1.15], nice=False)
    tooltip = [alt.Tooltip("name:N", title=" "), alt.Tooltip("exact:N", title="(x₀, x₁)")]
    base = alt.Chart(frame).encode(color=colour, tooltip=tooltip)
    rule = base.mark_rule(strokeWidth=3).encode(
        x=alt.X("x:Q", scale=scale, title="x₀"), y=alt.Y("y:Q", scale=scale, title="x₁"),
        x2="x2:Q", y2="y2:Q",
        strokeDash=dash)
    tips = base.mark_point(filled=True, size=80).encode(
        x=alt.X("x2:Q", scale=scale), y=alt.Y("y2:Q", scale=scale),
        shape=alt.when(alt.datum.shifted).then(alt.value("diamond")).otherwise(alt.value("circle")))
    return alt.layer(rule, tips).properties(title=title, height=height, width=height, autosize=FIT_X)


def rotation_chart(q_pair, k_pair, angles: dict[str, float], *, labels: dict[str, str], title: str) -> Spec:
    """q and k after rotation by their positions. Only directions matter for the angle, so the pairs are
    normalised; the angle between q and k is the same before and after the shift."""
    frame = rotation_frame(q_pair, k_pair, angles, labels)
    return rotation_arrows(frame, title=title, colours=(ORANGE, BLUE, ORANGE, BLUE)[:len(angles)],
                           dashed=tuple(n.endswith("shift") for n in angles), order=[labels[n] for n in angles])

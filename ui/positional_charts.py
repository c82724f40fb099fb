"""Charts of the positional-encoding page (tensors in, ``alt.Chart`` out, no Streamlit calls).

Every title and label is passed in already translated. Heatmaps come from ``ui.charts.heatmap``;
here are the line and arrow charts: a column pair of the table next to a counter bit, the
similarity of positions by offset, and the rotation of one (q, k) dimension pair by RoPE.
"""
from __future__ import annotations

import functools
from collections.abc import Sequence

import altair as alt
import numpy as np
import pandas as pd

from .charts import FIT_X, as_numpy, respec, to_spec

ORANGE, BLUE, GREY, GREEN = "#e66101", "#3b528b", "#7f7f7f", "#1b9e77"
FLOOR = 1e-12   # log-scale floor of gap_chart: an exact 0 is drawn here
# stretch a plot to the column's width, keep its height as given (Streamlit's default "fit" squeezes it)


def _vec(x) -> np.ndarray:
    return as_numpy(np.asarray(x.detach().cpu().double() if hasattr(x, "detach") else x,
                               dtype=np.float64).reshape(1, -1))[0]


def wave_frame(sin, cos, bit, series: Sequence[str]) -> pd.DataFrame:
    """The data of ``wave_chart``: position, value, series, exact (one row per point of each curve)."""
    s, c, b = _vec(sin), _vec(cos), _vec(bit)
    n = len(s)
    frame = pd.DataFrame({
        "position": np.tile(np.arange(n), 3),
        "value": np.concatenate([s, c, 2 * b - 1]),
        "series": np.repeat(list(series), n),
    })
    frame["exact"] = np.char.mod("%.6g", frame["value"].to_numpy())
    return frame


def wave_chart(sin, cos, bit, *, series: Sequence[str], x_title: str, y_title: str, title: str,
               height: int = 220) -> alt.Chart:
    """Three curves over the positions: sin and cos of one column pair, and a counter bit as +-1 steps.

    ``series`` names the three curves (legend labels) in that order.
    """
    frame = wave_frame(sin, cos, bit, series)
    n = len(frame) // 3
    colour = alt.Color("series:N", title=None, sort=list(series),
                       scale=alt.Scale(domain=list(series), range=[BLUE, GREEN, ORANGE]),
                       legend=alt.Legend(orient="bottom"))
    tooltip = [alt.Tooltip("series:N", title=" "), alt.Tooltip("position:Q", title=x_title),
               alt.Tooltip("exact:N", title=y_title)]
    base = alt.Chart(frame).encode(
        x=alt.X("position:Q", title=x_title, scale=alt.Scale(domain=[0, max(n - 1, 1)], nice=False)),
        y=alt.Y("value:Q", title=y_title, scale=alt.Scale(domain=[-1.1, 1.1])),
        color=colour, tooltip=tooltip)
    smooth = base.transform_filter(alt.datum.series != series[2]).mark_line(point=n <= 64)
    steps = base.transform_filter(alt.datum.series == series[2]).mark_line(
        interpolate="step-after", strokeDash=[4, 3], strokeWidth=2)
    return alt.layer(smooth, steps).properties(title=title, height=height, autosize=FIT_X)


def offset_chart(curves, *, labels: Sequence[str], x_title: str, y_title: str, title: str,
                 height: int = 240) -> alt.Chart:
    """PE[p] . PE[p + k] against the offset k, one line per reference position p.

    ``curves`` are ``labs.positional.OffsetCurve``; ``labels`` name them (e.g. "p = 10").
    Lines that lie on top of each other say: the dot product depends on the offset only.
    """
    parts = []
    for curve, label in zip(curves, labels):
        offsets = curve.offsets.numpy()
        dots = curve.dots.double().numpy()
        parts.append(pd.DataFrame({"offset": offsets, "dot": dots, "reference": label,
                                   "exact": np.char.mod("%.6g", dots)}))
    frame = pd.concat(parts, ignore_index=True)
    colour = alt.Color("reference:N", title=None, sort=list(labels),
                       scale=alt.Scale(domain=list(labels), range=[ORANGE, BLUE, GREEN][:len(labels)]),
                       legend=alt.Legend(orient="bottom"))
    dash = alt.StrokeDash("reference:N", sort=list(labels), legend=None,
                          scale=alt.Scale(domain=list(labels), range=[[1, 0], [6, 4], [2, 2]][:len(labels)]))
    return alt.Chart(frame).mark_line(point=len(frame) <= 160, strokeWidth=2).encode(
        x=alt.X("offset:Q", title=x_title),
        y=alt.Y("dot:Q", title=y_title),
        color=colour, strokeDash=dash,
        tooltip=[alt.Tooltip("reference:N", title=" "), alt.Tooltip("offset:Q", title=x_title),
                 alt.Tooltip("exact:N", title=y_title)],
    ).properties(title=title, height=height, autosize=FIT_X)


def gap_chart(values: Sequence[float], names: Sequence[str], *, x_title: str, y_title: str,
              highlight: int | None = None, height: int | None = None) -> alt.Chart:
    """One horizontal bar per name on a log scale, so rounding-size gaps (1e-8) and real ones (0.2)
    share an axis; exact zeros sit on the floor 1e-12. The exact value is printed next to each bar."""
    frame, top = _gap_frame(values, names, highlight)
    base = alt.Chart(frame).encode(
        y=alt.Y("name:N", sort=list(names), title=None, axis=alt.Axis(labelLimit=220)),
        x=alt.X("shown:Q", title=x_title, scale=alt.Scale(type="log", domain=[FLOOR, top]),
                axis=alt.Axis(format="~e", tickCount=8)),
        tooltip=[alt.Tooltip("name:N", title=" "), alt.Tooltip("exact:N", title=y_title)])
    bars = base.mark_bar().encode(
        x2="floor:Q",
        color=alt.when(alt.datum.highlight).then(alt.value(ORANGE)).otherwise(alt.value(BLUE)))
    text = base.mark_text(align="left", dx=4, fontSize=11).encode(text="exact:N")
    return alt.layer(bars, text).properties(height=height or max(90, 24 * len(frame)), autosize=FIT_X)


def _gap_frame(values: Sequence[float], names: Sequence[str], highlight: int | None) -> tuple[pd.DataFrame, float]:
    vals = np.asarray(values, dtype=np.float64)
    shown = np.maximum(vals, FLOOR)
    frame = pd.DataFrame({"pos": np.arange(len(vals)), "name": list(names), "shown": shown,
                          "floor": FLOOR, "value": vals, "exact": [_short(v) for v in vals],
                          "highlight": np.arange(len(vals)) == (-1 if highlight is None else highlight)})
    return frame, max(10.0, float(shown.max()) * 10)


@functools.lru_cache(maxsize=32)
def _gap_skeleton(x_title: str, y_title: str) -> dict:
    return to_spec(gap_chart([1.0], ["·"], x_title=x_title, y_title=y_title))


def gap_spec(values: Sequence[float], names: Sequence[str], *, x_title: str, y_title: str,
             highlight: int | None = None, height: int | None = None) -> dict:
    """``to_spec(gap_chart(...))`` with the same arguments, from a cached skeleton (``ui.charts.respec``)."""
    frame, top = _gap_frame(values, names, highlight)
    return respec(_gap_skeleton(x_title, y_title), frame, sort={"name": list(names)}, domain={"x": [FLOOR, top]},
                  height=height or max(90, 24 * len(frame)))


def _short(x: float) -> str:
    return "0" if x == 0 else (f"{x:.1e}" if abs(x) < 1e-3 else f"{x:.3g}")


def _rotation_frame(q_pair, k_pair, angles: dict[str, float], labels: dict[str, str]) -> tuple[pd.DataFrame, list]:
    q, k = _vec(q_pair)[:2], _vec(k_pair)[:2]
    q, k = q / max(np.linalg.norm(q), 1e-12), k / max(np.linalg.norm(k), 1e-12)
    rows = []
    for name, angle in angles.items():
        v = q if name.startswith("q") else k
        c, s = np.cos(angle), np.sin(angle)
        x, y = c * v[0] - s * v[1], s * v[0] + c * v[1]
        rows.append({"name": labels[name], "x": 0.0, "y": 0.0, "x2": x, "y2": y,
                     "shifted": name.endswith("shift"), "exact": f"({x:.3f}, {y:.3f})"})
    return pd.DataFrame(rows), [labels[n] for n in angles]


@functools.lru_cache(maxsize=16)
def _rotation_skeleton(names: tuple, title: str, height: int) -> dict:
    angles = {n: 0.0 for n in names}
    return to_spec(rotation_chart([1.0, 0.0], [1.0, 0.0], angles, labels={n: f"@{n}" for n in names}, title=title,
                                  height=height))


def rotation_spec(q_pair, k_pair, angles: dict[str, float], *, labels: dict[str, str], title: str,
                  height: int = 300) -> dict:
    """``to_spec(rotation_chart(...))`` from a cached skeleton: new data and legend entries (``respec``)."""
    frame, order = _rotation_frame(q_pair, k_pair, angles, labels)
    return respec(_rotation_skeleton(tuple(angles), title, height), frame, sort={"name": order},
                  domain={"color": order})


def rotation_chart(q_pair, k_pair, angles: dict[str, float], *, labels: dict[str, str], title: str,
                   height: int = 300) -> alt.Chart:
    """Dimensions (x_0, x_1) of q and k as unit arrows after rotation by their positions.

    ``angles`` maps "q", "k", "q_shift", "k_shift" to rotation angles (radians); ``labels`` maps the
    same names to legend text. Only directions matter for the angle, so the pairs are normalised;
    the angle between q and k is the same before and after the shift.
    """
    frame, order = _rotation_frame(q_pair, k_pair, angles, labels)
    colour = alt.Color("name:N", title=None, sort=order, legend=alt.Legend(orient="bottom", columns=2),
                       scale=alt.Scale(domain=order, range=[ORANGE, BLUE, ORANGE, BLUE][:len(order)]))
    scale = alt.Scale(domain=[-1.15, 1.15], nice=False)
    tooltip = [alt.Tooltip("name:N", title=" "), alt.Tooltip("exact:N", title="(x₀, x₁)")]
    base = alt.Chart(frame).encode(color=colour, tooltip=tooltip)
    rule = base.mark_rule(strokeWidth=3).encode(
        x=alt.X("x:Q", scale=scale, title="x₀"), y=alt.Y("y:Q", scale=scale, title="x₁"),
        x2="x2:Q", y2="y2:Q",
        strokeDash=alt.when(alt.datum.shifted).then(alt.value([5, 3])).otherwise(alt.value([1, 0])))
    tips = base.mark_point(filled=True, size=80).encode(
        x=alt.X("x2:Q", scale=scale), y=alt.Y("y2:Q", scale=scale),
        shape=alt.when(alt.datum.shifted).then(alt.value("diamond")).otherwise(alt.value("circle")))
    return alt.layer(rule, tips).properties(title=title, height=height, width=height, autosize=FIT_X)


# ------------------------------------------------------------------ specs from a skeleton (fast reruns)
def wave_respec(skeleton: dict, sin, cos, bit, *, series: Sequence[str]) -> dict:
    """``wave_chart``'s spec for new curves of the same length class (<= 64 points or more) and the same
    series names and titles, made from a finished spec of it: new data and x domain."""
    frame = wave_frame(sin, cos, bit, series)
    return respec(skeleton, frame, domain={("x", "position"): [0, max(len(frame) // 3 - 1, 1)]})


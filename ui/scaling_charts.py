"""Charts of the scaling page: score histograms, variance against d_k, saturation sweeps, temperature.

Pure functions (numbers and translated titles in, ``alt.Chart`` out; no Streamlit calls).
Every chart keeps the exact numbers in its data, so tests can decode and check them.
"""
from __future__ import annotations

import math
from collections.abc import Sequence

import altair as alt
import numpy as np
import pandas as pd

UNSCALED_COLOUR = "#e66101"   # orange / purple: a colour-blind-safe pair (PuOr ends)
SCALED_COLOUR = "#5e3c99"
THEORY_COLOUR = "#444444"
FLOOR = 1e-7                  # below this the float64 closed-form Jacobian norm is rounding noise
HIST_BINS = 41


def fmt(x: float) -> str:
    """A number as quoted on the page: 3 significant digits, scientific below 0.01."""
    x = float(x)
    if not math.isfinite(x):
        return str(x)
    if x == 0:
        return "0"
    if abs(x) >= 1000:
        return f"{x:,.0f}"
    if abs(x) >= 10:
        return f"{x:.1f}"
    if abs(x) >= 0.01:
        return f"{x:.3f}"
    return f"{x:.1e}"


def fmt_tau(tau: float) -> str:
    """0.125 -> "1/8", 2.0 -> "2": the temperatures of the slider."""
    if tau < 1:
        return f"1/{round(1 / tau)}"
    return f"{tau:g}"


def _mode_colour(labels: tuple[str, str]) -> alt.Scale:
    return alt.Scale(domain=list(labels), range=[UNSCALED_COLOUR, SCALED_COLOUR])


# --- 1. the scores grow with d_k ------------------------------------------------------------------

def histogram_frames(dots: np.ndarray, d_k: int, labels: tuple[str, str]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Pre-binned histograms (density) of raw q.k and of q.k/sqrt(d_k), and the theory densities.

    The scaled panel uses the raw bin edges divided by sqrt(d_k): the two histograms have the
    same shape, only their width differs — drawn on a shared x axis that is the point.
    """
    dots = np.asarray(dots, dtype=np.float64)
    root = math.sqrt(d_k)
    reach = max(4.0 * root, float(np.abs(dots).max()) * 1.001 if dots.size else 0.0)
    edges = np.linspace(-reach, reach, HIST_BINS + 1)
    counts, _ = np.histogram(dots, bins=edges)
    bars, lines = [], []
    for scaled, label, factor in ((False, labels[0], 1.0), (True, labels[1], root)):
        e = edges / factor
        width = e[1] - e[0]
        values = dots / factor
        bars.append(pd.DataFrame({
            "panel": label, "scaled": scaled, "bin_start": e[:-1], "bin_end": e[1:], "count": counts,
            "density": counts / (len(values) * width), "variance": float(values.var(ddof=1)),
        }))
        sigma = root / factor
        x = np.linspace(-reach / factor, reach / factor, 121)
        lines.append(pd.DataFrame({"panel": label, "scaled": scaled, "x": x,
                                   "density": np.exp(-0.5 * (x / sigma) ** 2) / (sigma * math.sqrt(2 * math.pi))}))
    return pd.concat(bars, ignore_index=True), pd.concat(lines, ignore_index=True)


def histogram_chart(dots: np.ndarray, d_k: int, *, panel_labels: tuple[str, str],
                    panel_titles: tuple[str, str], x_title: str, y_title: str,
                    count_title: str) -> alt.VConcatChart:
    """Raw q.k (top) and q.k/sqrt(d_k) (bottom) on one shared x axis, theory N(0, sigma^2) dashed."""
    bars, lines = histogram_frames(dots, d_k, panel_labels)
    panels = []
    for label, title, colour in zip(panel_labels, panel_titles, (UNSCALED_COLOUR, SCALED_COLOUR)):
        hist = alt.Chart(bars[bars["panel"] == label]).mark_bar(color=colour, opacity=0.75).encode(
            x=alt.X("bin_start:Q", title=x_title), x2="bin_end:Q",
            y=alt.Y("density:Q", title=y_title),
            tooltip=[alt.Tooltip("bin_start:Q", format=".3g"), alt.Tooltip("bin_end:Q", format=".3g"),
                     alt.Tooltip("count:Q", title=count_title), alt.Tooltip("density:Q", format=".3g")])
        theory = alt.Chart(lines[lines["panel"] == label]).mark_line(
            color=THEORY_COLOUR, strokeDash=[5, 3]).encode(x="x:Q", y="density:Q")
        panels.append(alt.layer(hist, theory).properties(title=title, height=130))
    return alt.vconcat(*panels).resolve_scale(x="shared", y="independent")


def variance_frame(d_ks: Sequence[int], var_raw: Sequence[float], var_scaled: Sequence[float],
                   labels: tuple[str, str, str, str]) -> pd.DataFrame:
    """Long form: d_k, series label, scaled flag, kind ("measured" / "theory"), value."""
    d = np.asarray(d_ks, dtype=np.float64)
    raw_lbl, scaled_lbl, theory_raw_lbl, theory_scaled_lbl = labels
    parts = [
        pd.DataFrame({"d_k": d, "series": raw_lbl, "scaled": False, "kind": "measured",
                      "value": np.asarray(var_raw, dtype=np.float64)}),
        pd.DataFrame({"d_k": d, "series": scaled_lbl, "scaled": True, "kind": "measured",
                      "value": np.asarray(var_scaled, dtype=np.float64)}),
        pd.DataFrame({"d_k": d, "series": theory_raw_lbl, "scaled": False, "kind": "theory", "value": d}),
        pd.DataFrame({"d_k": d, "series": theory_scaled_lbl, "scaled": True, "kind": "theory",
                      "value": np.ones_like(d)}),
    ]
    return pd.concat(parts, ignore_index=True)


def variance_chart(frame: pd.DataFrame, current_d_k: int, *, title: str, x_title: str, y_title: str,
                   legend_title: str) -> alt.LayerChart:
    """Measured variance of q.k and q.k/sqrt(d_k) against d_k (log-log), theory lines dashed."""
    series = list(dict.fromkeys(frame["series"]))
    colour = alt.Color("series:N", title=legend_title, sort=series,
                       scale=alt.Scale(domain=series, range=[UNSCALED_COLOUR, SCALED_COLOUR,
                                                             UNSCALED_COLOUR, SCALED_COLOUR]),
                       legend=alt.Legend(orient="bottom", columns=2))
    x = alt.X("d_k:Q", title=x_title, scale=alt.Scale(type="log", base=2, domain=[1, 1024]),
              axis=alt.Axis(values=[1, 4, 16, 64, 256, 1024]))
    y = alt.Y("value:Q", title=y_title, scale=alt.Scale(type="log", base=10))
    tooltip = [alt.Tooltip("series:N", title=legend_title), alt.Tooltip("d_k:Q", title=x_title),
               alt.Tooltip("value:Q", title=y_title, format=".4g")]
    base = alt.Chart(frame).encode(x=x, y=y, color=colour, tooltip=tooltip)
    theory = base.transform_filter(alt.datum.kind == "theory").mark_line(strokeDash=[5, 3], strokeWidth=1.5)
    measured = base.transform_filter(alt.datum.kind == "measured").mark_line(point=True)
    rule = alt.Chart(pd.DataFrame({"d_k": [current_d_k]})).mark_rule(color="#888888", strokeDash=[2, 2]).encode(
        x="d_k:Q")
    return alt.layer(theory, measured, rule).properties(title=title, height=300)


# --- 2. what big scores do to softmax --------------------------------------------------------------

def strip_frame(weights: dict[tuple[int, bool], np.ndarray], key_labels: Sequence[str],
                mode_labels: tuple[str, str]) -> pd.DataFrame:
    """weights[(d_k, scaled)] = one softmax row -> long form for the small multiples."""
    rows = []
    for (d_k, scaled), row in weights.items():
        row = np.asarray(row, dtype=np.float64)
        rows.append(pd.DataFrame({"d_k": d_k, "scaled": scaled, "mode": mode_labels[int(scaled)],
                                  "key": list(key_labels), "key_pos": np.arange(len(row)), "weight": row,
                                  "is_max": np.arange(len(row)) == int(row.argmax())}))
    return pd.concat(rows, ignore_index=True)


def strip_chart(frame: pd.DataFrame, *, column_title: str, key_title: str, weight_title: str,
                mode_title: str) -> alt.FacetChart:
    """One query's softmax as bars: columns d_k = 1, 4, ..., 1024; rows unscaled / scaled."""
    modes = list(dict.fromkeys(frame["mode"]))
    keys = list(dict.fromkeys(frame["key"]))
    return alt.Chart(frame).mark_bar().encode(
        x=alt.X("key:N", sort=keys, title=None, axis=alt.Axis(labels=False, ticks=False)),
        y=alt.Y("weight:Q", title=weight_title, scale=alt.Scale(domain=[0, 1])),
        color=alt.Color("mode:N", scale=_mode_colour(tuple(modes)), legend=None),
        opacity=alt.when(alt.datum.is_max).then(alt.value(1.0)).otherwise(alt.value(0.6)),
        tooltip=[alt.Tooltip("d_k:Q", title=column_title), alt.Tooltip("mode:N", title=mode_title),
                 alt.Tooltip("key:N", title=key_title), alt.Tooltip("weight:Q", title=weight_title,
                                                                     format=".4g")],
    ).properties(width=105, height=90).facet(
        column=alt.Column("d_k:O", title=column_title, header=alt.Header(labelExpr="'d_k = ' + datum.value")),
        row=alt.Row("mode:N", sort=modes, title=None, header=alt.Header(labelAngle=0, labelAlign="left",
                                                                         labelLimit=160)),
        spacing=6,
    )


# --- 3. the gradient signal -----------------------------------------------------------------------

def sweep_frame(d_ks: Sequence[int], unscaled: dict[str, Sequence[float]], scaled: dict[str, Sequence[float]],
                mode_labels: tuple[str, str]) -> pd.DataFrame:
    """Long form of the saturation sweep: d_k, metric, scaled flag, mode label, exact value, plotted value."""
    parts = []
    for flag, stats in ((False, unscaled), (True, scaled)):
        for metric, values in stats.items():
            v = np.asarray(values, dtype=np.float64)
            parts.append(pd.DataFrame({"d_k": np.asarray(d_ks, dtype=np.int64), "metric": metric, "scaled": flag,
                                       "mode": mode_labels[int(flag)], "value": v,
                                       "plotted": np.maximum(v, FLOOR), "exact": np.char.mod("%.6g", v)}))
    return pd.concat(parts, ignore_index=True)


def sweep_chart(frame: pd.DataFrame, metric: str, current_d_k: int, *, title: str, x_title: str,
                y_title: str, mode_title: str, y_domain: tuple[float, float] | None = None) -> alt.LayerChart:
    """One diagnostic against d_k, scaled vs unscaled, log axes, marker at the current d_k."""
    data = frame[frame["metric"] == metric]
    modes = list(dict.fromkeys(data["mode"]))
    x = alt.X("d_k:Q", title=x_title, scale=alt.Scale(type="log", base=2, domain=[1, 1024]),
              axis=alt.Axis(values=[1, 4, 16, 64, 256, 1024]))
    y = alt.Y("plotted:Q", title=y_title,
              scale=alt.Scale(type="log", domain=list(y_domain) if y_domain else alt.Undefined))
    colour = alt.Color("mode:N", title=mode_title, scale=_mode_colour(tuple(modes)),
                       legend=alt.Legend(orient="bottom", direction="vertical"))
    tooltip = [alt.Tooltip("mode:N", title=mode_title), alt.Tooltip("d_k:Q", title=x_title),
               alt.Tooltip("exact:N", title=y_title)]
    base = alt.Chart(data).encode(x=x, y=y, color=colour, tooltip=tooltip)
    lines = base.mark_line(point=alt.OverlayMarkDef(size=18))
    now = base.transform_filter(alt.datum.d_k == current_d_k).mark_point(size=140, filled=True,
                                                                         stroke="black", strokeWidth=1)
    rule = alt.Chart(pd.DataFrame({"d_k": [current_d_k]})).mark_rule(color="#888888", strokeDash=[2, 2]).encode(
        x="d_k:Q")
    return alt.layer(lines, rule, now).properties(title=title, height=260)


# --- 4. temperature -------------------------------------------------------------------------------

def temperature_frame(taus: np.ndarray, unscaled: np.ndarray, scaled: np.ndarray,
                      mode_labels: tuple[str, str]) -> pd.DataFrame:
    taus = np.asarray(taus, dtype=np.float64)
    return pd.concat([
        pd.DataFrame({"tau": taus, "scaled": flag, "mode": mode_labels[int(flag)],
                      "max_weight": np.asarray(v, dtype=np.float64)})
        for flag, v in ((False, unscaled), (True, scaled))], ignore_index=True)


def temperature_chart(frame: pd.DataFrame, current_tau: float, n_keys: int, *, title: str, x_title: str,
                      y_title: str, mode_title: str) -> alt.LayerChart:
    """Max weight of one query against tau (log x): sharp (1) to flat (1/n); scaled = unscaled shifted."""
    modes = list(dict.fromkeys(frame["mode"]))
    x = alt.X("tau:Q", title=x_title, scale=alt.Scale(type="log", base=2),
              axis=alt.Axis(values=[2.0 ** i for i in range(-6, 11, 2)], format="~g"))
    y = alt.Y("max_weight:Q", title=y_title, scale=alt.Scale(domain=[0, 1]))
    colour = alt.Color("mode:N", title=mode_title, scale=_mode_colour(tuple(modes)),
                       legend=alt.Legend(orient="bottom", direction="vertical"))
    lines = alt.Chart(frame).mark_line(strokeWidth=2.5).encode(
        x=x, y=y, color=colour,
        tooltip=[alt.Tooltip("mode:N", title=mode_title), alt.Tooltip("tau:Q", title=x_title, format=".3g"),
                 alt.Tooltip("max_weight:Q", title=y_title, format=".4g")])
    rule = alt.Chart(pd.DataFrame({"tau": [current_tau]})).mark_rule(color="#888888", strokeDash=[2, 2]).encode(
        x="tau:Q")
    flat = alt.Chart(pd.DataFrame({"max_weight": [1.0 / n_keys]})).mark_rule(
        color=THEORY_COLOUR, strokeDash=[1, 3]).encode(y="max_weight:Q")
    return alt.layer(lines, rule, flat).properties(title=title, height=260)

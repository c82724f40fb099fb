"""Charts of the scaling page: score histograms, variance against d_k, saturation sweeps, temperature.

Pure functions, no Streamlit calls. Each ``*_frame`` builds the long-form data of one chart
(exact numbers kept, so tests can decode and check them); each ``*_chart`` is a ``ui.charts.chart_kind``
that takes that one frame plus translated titles. Anything that changes with the controls (the current
d_k, tau, the strongest key) is a column of the frame, so every spec here depends on the language and
the options only: built once, then only new data per rerun.
"""
from __future__ import annotations

import math
from collections.abc import Sequence

import altair as alt
import numpy as np
import pandas as pd

from .charts import FIT_X, chart_kind

UNSCALED_COLOUR = "#e66101"   # orange / purple: a colour-blind-safe pair (PuOr ends)
SCALED_COLOUR = "#5e3c99"
THEORY_COLOUR = "#444444"
NOW_COLOUR = "#888888"
FLOOR = 1e-7                  # below this the float64 closed-form Jacobian norm is rounding noise
HIST_BINS = 41
LOG2_TICKS = [1, 4, 16, 64, 256, 1024]


# --- formatting -----------------------------------------------------------------------------------

def fmt_short(x: float) -> str:
    """Square roots and ratios: 8, 11.3, 3.5, 1,800."""
    x = float(x)
    if abs(x) >= 10:
        return f"{x:,.0f}" if abs(x) >= 100 else f"{x:.1f}".removesuffix(".0")
    return f"{x:.2f}".rstrip("0").rstrip(".")


def fmt_tau(tau: float) -> str:
    """0.125 -> "1/8", 2.0 -> "2": the temperatures of the slider."""
    if tau < 1:
        return f"1/{round(1 / tau)}"
    return f"{tau:g}"


def _mode_colour(labels: Sequence[str]) -> alt.Scale:
    return alt.Scale(domain=list(labels), range=[UNSCALED_COLOUR, SCALED_COLOUR])


def _log_d_k(title: str) -> alt.X:
    return alt.X("d_k:Q", title=title, scale=alt.Scale(type="log", base=2, domain=[1, 1024]),
                 axis=alt.Axis(values=LOG2_TICKS))


# --- 1. the scores grow with d_k ------------------------------------------------------------------

def histogram_frame(dots: np.ndarray, d_k: int, notes: tuple[str, str]) -> dict[str, pd.DataFrame]:
    """Density histograms of raw q.k (scaled=False) and q.k / sqrt(d_k) (scaled=True): three datasets.

    "data" (the bars): scaled, bin_start, bin_end, count, density, variance; "theory": scaled, x, density of N(0, d_k)
    resp. N(0, 1); "note": scaled, the text ``notes[scaled]`` (already holding the measured variance).
    Each layer of the chart reads its own dataset (no filter over the rows of the others: Vega evaluates a
    filter per row in its interpreter). The scaled histogram uses the raw bin edges divided by sqrt(d_k):
    same shape, narrower — on a shared x axis, that is the point. ``variance`` is the sample variance
    (ddof=1) of the panel's values.
    """
    dots = np.asarray(dots, dtype=np.float64)
    root = math.sqrt(d_k)
    reach = max(4.0 * root, float(np.abs(dots).max()) * 1.001 if dots.size else 0.0)
    edges = np.linspace(-reach, reach, HIST_BINS + 1)
    counts, _ = np.histogram(dots, bins=edges)
    x = np.linspace(-reach, reach, 61)          # 4 px apart on the 240 px panel: a smooth curve, half the marks
    bars, theory = [], []
    for scaled, factor in ((False, 1.0), (True, root)):
        e, xs, sigma = edges / factor, x / factor, root / factor
        var = float((dots / factor).var(ddof=1)) if dots.size > 1 else float("nan")
        bars.append(pd.DataFrame({
            "scaled": np.full(HIST_BINS, scaled), "bin_start": e[:-1], "bin_end": e[1:], "count": counts,
            "density": counts / (max(len(dots), 1) * (e[1] - e[0])), "variance": np.full(HIST_BINS, var)}))
        theory.append(pd.DataFrame({
            "scaled": np.full(len(xs), scaled), "x": xs,
            "density": np.exp(-0.5 * (xs / sigma) ** 2) / (sigma * math.sqrt(2 * math.pi))}))
    return {"data": pd.concat(bars, ignore_index=True), "theory": pd.concat(theory, ignore_index=True),
            "note": pd.DataFrame({"scaled": [False, True], "note": list(notes)})}


@chart_kind()
def histogram_chart(data: dict, *, panel_titles: tuple[str, str], x_title: str, y_title: str,
                    count_title: str) -> alt.VConcatChart:
    """Raw q.k (top) and q.k / sqrt(d_k) (bottom) on one shared x axis, theory density dashed."""
    panels = []
    for scaled, title, colour in ((False, panel_titles[0], UNSCALED_COLOUR),
                                  (True, panel_titles[1], SCALED_COLOUR)):
        mine = alt.datum.scaled == scaled
        # aria=False: no screen-reader label per bar (82 of them, each built per rerun); the tooltip stays
        hist = alt.Chart(data["data"]).mark_rect(color=colour, opacity=0.75, stroke="white", strokeWidth=0.5,
                                                 aria=False).encode(
            x=alt.X("bin_start:Q", title=x_title), x2="bin_end:Q",
            y=alt.Y("density:Q", title=y_title), y2=alt.datum(0),
            tooltip=[alt.Tooltip("bin_start:Q", format=".3g"), alt.Tooltip("bin_end:Q", format=".3g"),
                     alt.Tooltip("count:Q", title=count_title), alt.Tooltip("density:Q", format=".3g")],
        ).transform_filter(mine)
        theory = alt.Chart(data["theory"]).mark_line(color=THEORY_COLOUR, strokeDash=[5, 3]).encode(
            x="x:Q", y="density:Q").transform_filter(mine)
        note = alt.Chart(data["note"]).mark_text(align="left", baseline="top", dx=4, dy=4, fontSize=12,
                                                 color=colour, fontWeight="bold").encode(
            text="note:N", x=alt.value(0), y=alt.value(0),
        ).transform_filter(mine)
        # 240 px panels: with the y axis the chart fits a phone's 358 px (concatenated charts do not stretch)
        panels.append(alt.layer(hist, theory, note).properties(title=title, height=130, width=240))
    return alt.vconcat(*panels).resolve_scale(x="shared", y="independent")


def variance_frame(d_ks: Sequence[int], var_raw: Sequence[float], var_scaled: Sequence[float],
                   current_d_k: int, labels: tuple[str, str, str, str]) -> pd.DataFrame:
    """Long form: d_k, series label, scaled flag, kind ("measured" / "theory"), value, is_now."""
    d = np.asarray(d_ks, dtype=np.float64)
    n = len(d)
    return pd.DataFrame({
        "d_k": np.tile(d, 4),
        "series": np.repeat(np.array(labels, dtype=object), n),
        "scaled": np.tile(np.repeat([False, True], n), 2),
        "kind": np.repeat(np.array(["measured", "theory"], dtype=object), 2 * n),
        "value": np.concatenate([np.asarray(var_raw, dtype=np.float64),
                                 np.asarray(var_scaled, dtype=np.float64), d, np.ones(n)]),
        "is_now": np.tile(d == current_d_k, 4),
    })


@chart_kind()
def variance_chart(frame: pd.DataFrame, *, series: tuple[str, ...], title: str, x_title: str, y_title: str,
                   legend_title: str) -> alt.LayerChart:
    """Measured variance of q.k and q.k / sqrt(d_k) against d_k (log-log), theory lines dashed."""
    series = list(series)
    colour = alt.Color("series:N", title=legend_title, sort=series,
                       scale=alt.Scale(domain=series, range=[UNSCALED_COLOUR, SCALED_COLOUR,
                                                             UNSCALED_COLOUR, SCALED_COLOUR]),
                       legend=alt.Legend(orient="bottom", columns=2))
    y = alt.Y("value:Q", title=y_title, scale=alt.Scale(type="log", base=10))
    tooltip = [alt.Tooltip("series:N", title=legend_title), alt.Tooltip("d_k:Q", title=x_title),
               alt.Tooltip("value:Q", title=y_title, format=".4g")]
    base = alt.Chart().encode(x=_log_d_k(x_title), y=y, color=colour, tooltip=tooltip)
    theory = base.transform_filter(alt.datum.kind == "theory").mark_line(strokeDash=[5, 3], strokeWidth=1.5)
    measured = base.transform_filter(alt.datum.kind == "measured").mark_line(point=True)
    rule = alt.Chart().mark_rule(color=NOW_COLOUR, strokeDash=[2, 2]).encode(x="d_k:Q").transform_filter(
        alt.datum.is_now & (alt.datum.kind == "theory") & ~alt.datum.scaled)
    now = base.transform_filter(alt.datum.is_now & (alt.datum.kind == "measured")).mark_point(
        size=120, filled=True, stroke="black", strokeWidth=1)
    return alt.layer(theory, measured, rule, now, data=frame).properties(title=title, height=300, autosize=FIT_X)


# --- 2. what big scores do to softmax --------------------------------------------------------------

def row_frame(row: np.ndarray, key_labels: Sequence[str]) -> pd.DataFrame:
    """One softmax row as bars: key, weight, exact text, is_max."""
    row = np.asarray(row, dtype=np.float64)
    return pd.DataFrame({"key": list(key_labels), "weight": row, "exact": np.char.mod("%.8g", row),
                         "is_max": np.arange(len(row)) == int(row.argmax())})


@chart_kind()
def row_chart(frame: pd.DataFrame, *, keys: tuple[str, ...], key_title: str, weight_title: str) -> alt.Chart:
    keys = list(keys)
    return alt.Chart(frame).mark_bar().encode(
        x=alt.X("key:N", sort=keys, title=key_title, axis=alt.Axis(labelAngle=0)),
        y=alt.Y("weight:Q", title=weight_title, scale=alt.Scale(domain=[0, 1])),
        color=alt.when(alt.datum.is_max).then(alt.value("#e66101")).otherwise(alt.value("#3b528b")),
        tooltip=[alt.Tooltip("key:N", title=key_title), alt.Tooltip("exact:N", title=weight_title)],
    ).properties(height=250, autosize=FIT_X)


def strip_frame(weights: np.ndarray, d_ks: Sequence[int], key_labels: Sequence[str],
                mode_labels: tuple[str, str]) -> pd.DataFrame:
    """weights (2, len(d_ks), n_k): one query's softmax rows, [unscaled, scaled] x d_k -> long form."""
    w = np.asarray(weights, dtype=np.float64)
    n_m, n_d, n_k = w.shape
    flat = w.reshape(-1)
    is_max = (np.arange(n_k)[None, None, :] == w.argmax(axis=-1)[..., None]).reshape(-1)
    return pd.DataFrame({
        "d_k": np.tile(np.repeat(np.asarray(d_ks, dtype=np.int64), n_k), n_m),
        "scaled": np.repeat([False, True][:n_m], n_d * n_k),
        "mode": np.repeat(np.array(mode_labels[:n_m], dtype=object), n_d * n_k),
        "key": np.tile(np.array(key_labels, dtype=object), n_m * n_d),
        "weight": flat, "exact": np.char.mod("%.6g", flat).astype(object), "is_max": is_max,
    })


@chart_kind()
def strip_chart(frame: pd.DataFrame, *, modes: tuple[str, str], keys: tuple[str, ...], column_title: str,
                key_title: str, weight_title: str, mode_title: str) -> alt.FacetChart:
    """One query's softmax as bars: rows d_k = 1, 4, ..., 1024; columns unscaled / scaled (short labels)."""
    modes, keys = list(modes), list(keys)
    return alt.Chart(frame).mark_bar(aria=False).encode(      # 192 bars: no screen-reader label each
        x=alt.X("key:N", sort=keys, title=None, axis=alt.Axis(labels=False, ticks=False)),
        # no y title per row (the page's heading and the tooltip say "weight"): the rows stay narrow
        y=alt.Y("weight:Q", title=None, scale=alt.Scale(domain=[0, 1]), axis=alt.Axis(tickCount=2)),
        color=alt.Color("mode:N", scale=_mode_colour(modes), legend=None),
        opacity=alt.when(alt.datum.is_max).then(alt.value(1.0)).otherwise(alt.value(0.45)),
        tooltip=[alt.Tooltip("d_k:Q", title=column_title), alt.Tooltip("mode:N", title=mode_title),
                 alt.Tooltip("key:N", title=key_title), alt.Tooltip("exact:N", title=weight_title)],
    ).properties(width=104, height=60).facet(
        # d_k down the rows, the two modes side by side: 2 x 104 px panels, the y axis and the row labels fit a
        # phone's 358 px (six d_k columns side by side needed 748 px); 13 px labels, read from a room
        row=alt.Row("d_k:O", title=None, header=alt.Header(labelExpr="'d_k = ' + datum.value", labelAngle=0,
                                                            labelAlign="left", labelOrient="right", labelPadding=6,
                                                            labelFontSize=13)),
        column=alt.Column("mode:N", sort=modes, title=None, header=alt.Header(labelLimit=104, labelFontSize=13)),
        spacing=6,
    )


# --- 3. the gradient signal -----------------------------------------------------------------------

def sweep_frame(d_ks: Sequence[int], unscaled, scaled, current_d_k: int, mode_labels: tuple[str, str]) -> pd.DataFrame:
    """Long form of the saturation sweep: d_k, metric, scaled flag, mode label, exact value, plotted value.

    ``unscaled``, ``scaled``: ``labs.scaling.SaturationStats`` (or any metric name -> values mapping)."""
    d = np.asarray(d_ks, dtype=np.int64)
    unscaled, scaled = (dict(x._asdict()) if hasattr(x, "_asdict") else dict(x) for x in (unscaled, scaled))
    metrics = list(unscaled)
    v = np.concatenate([np.asarray(stats[m], dtype=np.float64)
                        for stats in (unscaled, scaled) for m in metrics])
    n, k = len(d), len(metrics)
    return pd.DataFrame({
        "d_k": np.tile(d, 2 * k),
        "metric": np.tile(np.repeat(np.array(metrics, dtype=object), n), 2),
        "scaled": np.repeat([False, True], k * n),
        "mode": np.repeat(np.array(mode_labels, dtype=object), k * n),
        "value": v, "plotted": np.maximum(v, FLOOR), "exact": np.char.mod("%.6g", v).astype(object),
        "is_now": np.tile(d == current_d_k, 2 * k),
    })


@chart_kind()
def sweep_chart(frame: pd.DataFrame, *, metric: str, modes: tuple[str, str], title: str, x_title: str, y_title: str,
                mode_title: str, y_domain: tuple[float, float] | None = None) -> alt.LayerChart:
    """One diagnostic against d_k, scaled vs unscaled, log axes, marker at the current d_k."""
    modes = list(modes)
    y = alt.Y("plotted:Q", title=y_title,
              scale=alt.Scale(type="log", domain=list(y_domain) if y_domain else alt.Undefined))
    colour = alt.Color("mode:N", title=None, scale=_mode_colour(modes),
                       legend=alt.Legend(orient="top", direction="vertical", labelLimit=260))
    tooltip = [alt.Tooltip("mode:N", title=mode_title), alt.Tooltip("d_k:Q", title=x_title),
               alt.Tooltip("exact:N", title=y_title)]
    base = alt.Chart().encode(x=_log_d_k(x_title), y=y, color=colour, tooltip=tooltip).transform_filter(
        alt.datum.metric == metric)
    lines = base.mark_line(point=alt.OverlayMarkDef(size=18, aria=False))
    now = base.transform_filter(alt.datum.is_now).mark_point(size=140, filled=True, stroke="black",
                                                            strokeWidth=1)
    rule = alt.Chart().mark_rule(color=NOW_COLOUR, strokeDash=[2, 2]).encode(x="d_k:Q").transform_filter(
        (alt.datum.metric == metric) & alt.datum.is_now & ~alt.datum.scaled)
    return alt.layer(lines, rule, now, data=frame).properties(title=title, height=260, autosize=FIT_X)


# --- 4. temperature -------------------------------------------------------------------------------

def temperature_frame(taus: Sequence[float], curves: np.ndarray, current_tau: float,
                      mode_labels: tuple[str, str]) -> pd.DataFrame:
    """curves (2, len(taus)): max weight of one query against tau, [unscaled, scaled]."""
    taus = np.asarray(taus, dtype=np.float64)
    m = len(taus)
    return pd.DataFrame({
        "tau": np.tile(taus, 2), "scaled": np.repeat([False, True], m),
        "mode": np.repeat(np.array(mode_labels, dtype=object), m),
        "max_weight": np.asarray(curves, dtype=np.float64).reshape(-1),
        "is_now": np.tile(np.isclose(taus, current_tau, rtol=1e-9, atol=0), 2),
    })


@chart_kind()
def temperature_chart(frame: pd.DataFrame, *, n_keys: int, modes: tuple[str, str], x_title: str, y_title: str,
                      mode_title: str) -> alt.LayerChart:
    """Max weight of one query against tau (log x): sharp (1) to flat (1/n); scaled = unscaled shifted."""
    modes = list(modes)
    x = alt.X("tau:Q", title=x_title, scale=alt.Scale(type="log", base=2),
              axis=alt.Axis(values=[2.0 ** i for i in range(-6, 11, 2)],
                            labelExpr="datum.value < 1 ? '1/' + format(1 / datum.value, 'd') "
                                      ": format(datum.value, 'd')"))
    y = alt.Y("max_weight:Q", title=y_title, scale=alt.Scale(domain=[0, 1]))
    colour = alt.Color("mode:N", title=mode_title, scale=_mode_colour(modes),
                       legend=alt.Legend(orient="bottom", direction="vertical"))
    tooltip = [alt.Tooltip("mode:N", title=mode_title), alt.Tooltip("tau:Q", title=x_title, format=".3g"),
               alt.Tooltip("max_weight:Q", title=y_title, format=".4g")]
    base = alt.Chart().encode(x=x, y=y, color=colour, tooltip=tooltip)
    lines = base.mark_line(strokeWidth=2.5)
    now = base.transform_filter(alt.datum.is_now).mark_point(size=120, filled=True, stroke="black",
                                                            strokeWidth=1)
    rule = alt.Chart().mark_rule(color=NOW_COLOUR, strokeDash=[2, 2]).encode(x="tau:Q").transform_filter(
        alt.datum.is_now & ~alt.datum.scaled)
    flat = alt.Chart().transform_aggregate(rows="count()").mark_rule(
        color=THEORY_COLOUR, strokeDash=[1, 3]).encode(y=alt.datum(1.0 / n_keys))
    return alt.layer(lines, rule, now, flat, data=frame).properties(height=260, autosize=FIT_X)

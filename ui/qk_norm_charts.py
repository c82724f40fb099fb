"""Charts of the QK-norm page: a measure over the training steps (loss, largest logit, entropy) for the runs
without and with QK-norm, the final loss against the learning rate, and a softmax saturating."""
from __future__ import annotations

from typing import Sequence

import altair as alt
import numpy as np
import pandas as pd

from .charts import FIT_X, chart_kind

RUN_COLORS = ("#e66101", "#3b528b", "#b2abd2", "#fdb863")   # without QK-norm, with it, then kept live runs
SAT_COLORS = ("#3b528b", "#e66101")                          # the largest weight, the Jacobian's norm


def step_frame(series: Sequence[tuple[str, str, Sequence[int], Sequence[float]]]) -> pd.DataFrame:
    """Long form of (run label, layer label, steps, values) series: step, value, run, layer. Compact for the
    browser (less to send on every redraw): value float32 (the tooltip formats it), run and layer categorical (sent once
    per chart, not once per row); built from numpy arrays in one go."""
    runs = list(dict.fromkeys(run for run, _, _, _ in series))
    layers = list(dict.fromkeys(layer for _, layer, _, _ in series))
    lengths = [len(values) for _, _, _, values in series]

    def codes(labels: list[str], which: int) -> np.ndarray:
        return np.repeat(np.array([labels.index(s[which]) for s in series], np.int8), lengths)

    def joined(which: int, dtype) -> np.ndarray:
        return np.concatenate([np.asarray(s[which], dtype) for s in series]) if series else np.array([], dtype)

    return pd.DataFrame({"step": joined(2, np.int32), "value": joined(3, np.float32),
                         "run": pd.Categorical.from_codes(codes(runs, 0), categories=runs),
                         "layer": pd.Categorical.from_codes(codes(layers, 1), categories=layers)})


@chart_kind(fill=("runs", "title"))
def step_lines(frame, *, x_title: str, y_title: str, run_title: str, layer_title: str, runs=(),
               log_y: bool = False, layers: bool = True, height: int = 220, title: str | None = None) -> alt.Chart:
    """A measure against the training step: colour = run, dash = layer (when ``layers``), log y on request."""
    y_scale = alt.Scale(type="log") if log_y else alt.Scale(zero=True)
    enc = dict(
        x=alt.X("step:Q", title=x_title),
        y=alt.Y("value:Q", title=y_title, scale=y_scale),
        color=alt.Color("run:N", title=run_title, scale=alt.Scale(domain=runs, range=list(RUN_COLORS)),
                        legend=alt.Legend(orient="bottom", direction="vertical", labelLimit=220)),
        tooltip=[alt.Tooltip("run:N", title=run_title), alt.Tooltip("step:Q", title=x_title),
                 alt.Tooltip("value:Q", title=y_title, format=".4~g")],
    )
    if layers:
        enc["strokeDash"] = alt.StrokeDash("layer:N", title=layer_title,
                                           legend=alt.Legend(orient="bottom", direction="vertical"))
        enc["detail"] = "layer:N"
        enc["tooltip"] = enc["tooltip"] + [alt.Tooltip("layer:N", title=layer_title)]
    chart = alt.Chart(frame).mark_line(strokeWidth=2).encode(**enc).properties(height=height, autosize=FIT_X)
    return chart.properties(title=title) if title else chart


def lr_frame(points: Sequence[tuple[str, float, int, float]]) -> pd.DataFrame:
    """(run label, learning rate, seed, final loss) -> long form with the mean over seeds per (run, rate)."""
    frame = pd.DataFrame(points, columns=["run", "lr", "seed", "loss"])
    frame["mean"] = frame.groupby(["run", "lr"])["loss"].transform("mean")
    frame["exact"] = [f"{v:.3f}" for v in frame["loss"]]
    frame["lr_label"] = [f"{v:g}" for v in frame["lr"]]
    return frame


@chart_kind(fill=("runs", "chance", "title"))
def lr_sweep(frame, *, x_title: str, y_title: str, run_title: str, seed_title: str, runs=(), chance: float = 0.0,
             title: str | None = None) -> alt.Chart:
    """Final loss against the learning rate (log x): a dot per seed, a line through the mean of the seeds,
    a dashed rule at the loss of a model that learned nothing."""
    color = alt.Color("run:N", title=run_title, scale=alt.Scale(domain=runs, range=list(RUN_COLORS)),
                      legend=alt.Legend(orient="bottom", direction="vertical"))
    x = alt.X("lr:Q", title=x_title, scale=alt.Scale(type="log"), axis=alt.Axis(format="~g"))
    base = alt.Chart(frame)
    line = base.mark_line(strokeWidth=2).encode(x=x, y=alt.Y("mean:Q", title=y_title), color=color)
    dots = base.mark_point(filled=True, size=45, opacity=0.8).encode(
        x=x, y="loss:Q", color=color,
        tooltip=[alt.Tooltip("run:N", title=run_title), alt.Tooltip("lr_label:N", title=x_title),
                 alt.Tooltip("seed:Q", title=seed_title), alt.Tooltip("exact:N", title=y_title)])
    rule = alt.Chart(pd.DataFrame({"chance": [0]})).mark_rule(strokeDash=[4, 4], color="#888").encode(
        y=alt.datum(chance))
    chart = (line + dots + rule).properties(height=260, autosize=FIT_X)
    return chart.properties(title=title) if title else chart


def saturation_frame(scales: Sequence[float], top: Sequence[float], norm: Sequence[float],
                     names: Sequence[str]) -> pd.DataFrame:
    """Long form: scale, value, quantity (``names`` = labels of the largest weight and the Jacobian's norm)."""
    n = len(scales)
    values = np.concatenate([np.asarray(top, float), np.asarray(norm, float)])
    return pd.DataFrame({"scale": np.tile(np.asarray(scales, float), 2), "value": values,
                         "exact": [f"{v:.3g}" for v in values], "quantity": np.repeat(np.asarray(names), n)})


@chart_kind(fill=("names", "title"))
def saturation_lines(frame, *, x_title: str, y_title: str, quantity_title: str, names=(),
                     title: str | None = None) -> alt.Chart:
    """The largest softmax weight and the norm of the softmax Jacobian as the logits are scaled (log x)."""
    base = alt.Chart(frame).encode(
        x=alt.X("scale:Q", title=x_title, scale=alt.Scale(type="log", base=2)),
        y=alt.Y("value:Q", title=y_title, scale=alt.Scale(domain=[0, 1])),
        color=alt.Color("quantity:N", title=quantity_title, scale=alt.Scale(domain=names, range=list(SAT_COLORS)),
                        legend=alt.Legend(orient="bottom", direction="vertical")),
        tooltip=[alt.Tooltip("quantity:N", title=quantity_title), alt.Tooltip("scale:Q", title=x_title),
                 alt.Tooltip("exact:N", title=y_title)],
    )
    chart = (base.mark_line() + base.mark_point(filled=True, size=45)).properties(height=240, autosize=FIT_X)
    return chart.properties(title=title) if title else chart

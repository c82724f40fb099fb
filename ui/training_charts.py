"""Charts of the training-live page: frame builders (pure), chart kinds (``ui.charts.chart_kind``) and the
functions the page calls (numbers in, finished specs out, no Streamlit calls).

The enlarged alignment snapshot comes from ``ui.charts.heatmap``; here are the loss curves of the
runs kept in the session, every snapshot of one run as small multiples, and the learning-rate
schedule next to the tutorial's. Titles and labels are passed in already translated.
"""
from __future__ import annotations

from collections.abc import Sequence

import altair as alt
import numpy as np
import pandas as pd

from attention_core.labs.training import smooth

from .charts import FIT_X, WEIGHT_SCHEME, Spec, chart_kind

ORANGE, BLUE = "#e66101", "#3b528b"
RUN_COLOURS = ["#e66101", "#3b528b", "#1b9e77", "#7570b3", "#a6761d", "#666666"]
SMOOTH = 10


def loss_frame(runs: Sequence[tuple[str, Sequence[float]]], window: int = SMOOTH) -> pd.DataFrame:
    """One row per (run, step): the loss of that step and its trailing mean over ``window`` steps."""
    parts = []
    for name, losses in runs:
        x = np.asarray(losses, dtype=np.float64)
        parts.append(pd.DataFrame({"run": name, "step": np.arange(1, len(x) + 1), "loss": x,
                                   "smooth": smooth(x, window) if len(x) else x}))
    if not parts:
        return pd.DataFrame({"run": [], "step": [], "loss": [], "smooth": []})
    return pd.concat(parts, ignore_index=True)


@chart_kind(fill=("names", "colours", "steps", "title"))
def loss_chart(frame, *, x_title: str, y_title: str, smooth_title: str, names=(), colours=(), steps=(1, 2),
               title: str | None = None, height: int = 240) -> alt.LayerChart:
    """Loss against step: each step thin and light, the trailing mean bold, one colour per run;
    ``steps`` the x axis' [first, last] step."""
    colour = alt.Color("run:N", title=None, sort=names, scale=alt.Scale(domain=names, range=colours),
                       legend=alt.Legend(orient="bottom", labelLimit=400))
    x = alt.X("step:Q", title=x_title, scale=alt.Scale(domain=steps, nice=False))
    tooltip = [alt.Tooltip("run:N", title=" "), alt.Tooltip("step:Q", title=x_title),
               alt.Tooltip("loss:Q", title=y_title, format=".4f"),
               alt.Tooltip("smooth:Q", title=smooth_title, format=".4f")]
    raw = alt.Chart().mark_line(strokeWidth=1, opacity=0.35).encode(
        x=x, y=alt.Y("loss:Q", title=y_title, scale=alt.Scale(zero=True)), color=colour, tooltip=tooltip)
    mean = alt.Chart().mark_line(strokeWidth=2.5).encode(x=x, y="smooth:Q", color=colour, tooltip=tooltip)
    chart = alt.layer(raw, mean, data=frame).properties(height=height, autosize=FIT_X)
    return chart.properties(title=title) if title else chart


def loss_curves(runs: Sequence[tuple[str, Sequence[float]]], *, title: str, x_title: str, y_title: str,
                smooth_title: str, max_step: int | None = None) -> Spec:
    """The loss curves of ``runs`` ((name, losses) each) on an x axis up to ``max_step`` (default: the longest)."""
    frame = loss_frame(runs)
    names = list(dict.fromkeys(frame["run"]))
    last = max_step or (int(frame["step"].max()) if len(frame) else 1)
    return loss_chart(frame, x_title=x_title, y_title=y_title, smooth_title=smooth_title, names=names,
                      colours=RUN_COLOURS[:max(len(names), 1)], steps=[1, max(last, 2)], title=title)


def snapshots_frame(snapshots: Sequence[tuple[int, str, np.ndarray]], source: str | Sequence[str], label: str,
                    row_labels: Sequence[str] | None = None) -> pd.DataFrame:
    """Long form of every snapshot's alignment: (step, output row, input column, weight).

    ``label`` is a format string with {step} and {out} for the panel titles. ``source``: the input's
    characters (a string) or tokens; ``row_labels``: the rows' names when they are not the output's
    characters (e.g. the heads of an encoder, with the attention from one token in each row)."""
    parts = []
    for step, output, w in snapshots:
        w = np.asarray(w, dtype=np.float64)
        r, c = np.meshgrid(np.arange(w.shape[0]), np.arange(w.shape[1]), indexing="ij")
        parts.append(pd.DataFrame({"step": step, "panel": label.format(step=step, out=output or "—"),
                                   "row": r.ravel(), "col": c.ravel(), "weight": w.ravel(),
                                   "out_char": np.repeat(list(output) if row_labels is None else list(row_labels),
                                                         w.shape[1]) if w.size else [],
                                   "in_char": np.tile([" " if ch == " " else ch for ch in source], w.shape[0])}))
    if not parts:
        return pd.DataFrame({"step": [], "panel": [], "row": [], "col": [], "weight": [], "out_char": [],
                             "in_char": []})
    return pd.concat(parts, ignore_index=True)


@chart_kind(fill=("order", "width", "height"))
def snapshots_chart(frame, *, weight_title: str, x_title: str, y_title: str, columns: int = 4, order=(),
                    width: int = 220, height: int = 168) -> alt.FacetChart:
    """Every snapshot as a small heatmap (rows: output position, columns: input position), panels in
    ``order``, so the alignment can be seen forming; 0..1 colour scale as everywhere."""
    base = alt.Chart(frame).mark_rect().encode(
        x=alt.X("col:O", title=x_title, axis=alt.Axis(labels=False, ticks=False)),
        y=alt.Y("row:O", title=y_title, axis=alt.Axis(labels=False, ticks=False)),
        color=alt.Color("weight:Q", title=weight_title,
                        scale=alt.Scale(domain=[0, 1], scheme=WEIGHT_SCHEME, clamp=True)),
        tooltip=[alt.Tooltip("out_char:N", title=y_title), alt.Tooltip("in_char:N", title=x_title),
                 alt.Tooltip("weight:Q", title=weight_title, format=".3f")],
    ).properties(width=width, height=height)
    return base.facet(facet=alt.Facet("panel:N", sort=order, title=None,
                                      header=alt.Header(labelFontSize=11, labelLimit=220)),
                      columns=columns).resolve_scale(y="independent")


def snapshots(snaps: Sequence[tuple[int, str, np.ndarray]], source: str | Sequence[str], *, label: str,
              weight_title: str, x_title: str, y_title: str, row_labels: Sequence[str] | None = None) -> Spec:
    """Every snapshot of one run as small multiples, in the order they were taken."""
    frame = snapshots_frame(snaps, source, label, row_labels)
    n_in = max(len(source), 1)
    cell = max(4, min(14, 220 // n_in))
    return snapshots_chart(frame, weight_title=weight_title, x_title=x_title, y_title=y_title,
                           order=list(dict.fromkeys(frame.sort_values("step")["panel"])), width=cell * n_in,
                           height=cell * 12)


def schedule_frame(ours: Sequence[float], tutorial: Sequence[float], names: Sequence[str]) -> pd.DataFrame:
    n = len(ours)
    return pd.DataFrame({"step": np.tile(np.arange(1, n + 1), 2), "factor": np.concatenate([ours, tutorial]),
                         "schedule": np.repeat(list(names), n)})


@chart_kind(fill=("names", "title"))
def schedule_chart(frame, *, x_title: str, y_title: str, names=(), title: str | None = None,
                   height: int = 200) -> alt.Chart:
    """Learning-rate multiplier per step: this trainer's warm-up + cosine against the tutorial's."""
    return alt.Chart(frame).mark_line(strokeWidth=2).encode(
        x=alt.X("step:Q", title=x_title),
        y=alt.Y("factor:Q", title=y_title, scale=alt.Scale(domain=[0, 1.05])),
        color=alt.Color("schedule:N", title=None, sort=names, scale=alt.Scale(domain=names, range=[ORANGE, BLUE]),
                        legend=alt.Legend(orient="bottom", direction="vertical", labelLimit=0)),   # a phone: a row each
        tooltip=[alt.Tooltip("schedule:N", title=" "), alt.Tooltip("step:Q", title=x_title),
                 alt.Tooltip("factor:Q", title=y_title, format=".5f")],
    ).properties(title=title, height=height, autosize=FIT_X)


def schedules(ours: Sequence[float], tutorial: Sequence[float], *, names: tuple[str, str], title: str,
              x_title: str, y_title: str) -> Spec:
    return schedule_chart(schedule_frame(ours, tutorial, names), x_title=x_title, y_title=y_title,
                          names=list(names), title=title)

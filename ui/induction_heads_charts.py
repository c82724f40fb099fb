"""Charts of the induction-heads page: curves over training steps (losses of the two halves, the heads' scores) with
the phase change marked. The heads' patterns use ``ui.multihead_charts.small_multiples``."""
from __future__ import annotations

from collections.abc import Sequence

import altair as alt
import numpy as np
import pandas as pd

from .charts import FIT_X, chart_kind

COLOURS = ("#e66101", "#3b528b", "#5ec962", "#8c8c8c")


def curves_frame(steps: Sequence[int], series: Sequence[tuple[str, Sequence[float]]],
                 phase: int | None = None) -> dict[str, pd.DataFrame]:
    """Long form: one row per (series, step) in "lines"; "rule" holds the phase-change step (no row if none)."""
    steps = np.asarray(steps, dtype=int)
    names = [name for name, _ in series]
    values = np.concatenate([np.asarray(v, dtype=float) for _, v in series]) if series else np.zeros(0)
    lines = pd.DataFrame({"step": np.tile(steps, len(names)), "value": values,
                          "exact": np.char.mod("%.3f", values),
                          "series": np.repeat(np.asarray(names, dtype=object), len(steps))})
    rule = pd.DataFrame({"step": [] if phase is None else [int(phase)]}, dtype=int)
    return {"lines": lines, "rule": rule}


@chart_kind(fill=("names", "colours", "title", "max_step"))
def curves_chart(data, *, x_title: str, y_title: str, series_title: str, rule_title: str, names=(), colours=(),
                 max_step: int = 1, title: str | None = None) -> alt.LayerChart:
    """Lines over training steps, one colour per series, a dashed vertical rule at the phase change."""
    x = alt.X("step:Q", title=x_title, scale=alt.Scale(domain=[0, max_step], nice=False))
    lines = alt.Chart(data["lines"]).mark_line(point=alt.OverlayMarkDef(size=18)).encode(
        x=x, y=alt.Y("value:Q", title=y_title),
        color=alt.Color("series:N", title=series_title, scale=alt.Scale(domain=names, range=colours),
                        legend=alt.Legend(orient="bottom", direction="vertical", labelLimit=320)),
        tooltip=[alt.Tooltip("series:N", title=series_title), alt.Tooltip("step:Q", title=x_title),
                 alt.Tooltip("exact:N", title=y_title)])
    rule = alt.Chart(data["rule"]).mark_rule(strokeDash=[6, 4], color="#444444").encode(
        x=alt.X("step:Q"), tooltip=[alt.Tooltip("step:Q", title=rule_title)])
    chart = alt.layer(lines, rule).properties(height=240, autosize=FIT_X)
    return chart.properties(title=title) if title else chart


def curves(steps: Sequence[int], series: Sequence[tuple[str, Sequence[float]]], *, phase: int | None,
           title: str, x_title: str, y_title: str, series_title: str, rule_title: str, max_step: int):
    names = [name for name, _ in series]
    return curves_chart(curves_frame(steps, series, phase), x_title=x_title, y_title=y_title,
                        series_title=series_title, rule_title=rule_title, names=names,
                        colours=list(COLOURS[:len(names)]), max_step=max(1, int(max_step)), title=title)

"""Charts of the KV-cache page: which K/V rows each forward pass computes or reuses, and the time per token."""
from __future__ import annotations

from typing import Sequence

import altair as alt
import numpy as np
import pandas as pd

from .charts import FIT_X, chart_kind

STATUS_COLORS = ("#3b528b", "#e66101", "#eeeeee")     # reused from the cache, computed now, not in the sequence yet
METHOD_COLORS = ("#e66101", "#3b528b")                # without the cache, with it


def grid_frame(steps: Sequence[tuple[int, int]], total: int, step_labels: Sequence[str],
               statuses: Sequence[str]) -> pd.DataFrame:
    """One row per (forward pass, token position): ``steps`` holds (rows read from the cache, rows computed) of
    each pass; ``statuses`` names reused / computed / not yet, in that order."""
    cached = np.array([s[0] for s in steps])[:, None]
    computed = np.array([s[1] for s in steps])[:, None]
    pos = np.arange(total)[None, :]
    code = np.where(pos < cached, 0, np.where(pos < cached + computed, 1, 2))      # (passes, total)
    passes, positions = np.meshgrid(np.arange(len(steps)), np.arange(total), indexing="ij")
    return pd.DataFrame({"pass": np.asarray(step_labels)[passes.ravel()], "position": positions.ravel(),
                         "status": np.asarray(statuses)[code.ravel()]})


@chart_kind(fill=("order", "statuses", "title", "height"))
def cache_grid(frame, *, x_title: str, y_title: str, status_title: str, order=(), statuses=(),
               height: int = 300, title: str | None = None) -> alt.Chart:
    """Rows: forward passes (prefill, then one per new token); columns: token positions; colour: what happened
    to that position's key and value in that pass."""
    chart = alt.Chart(frame).mark_rect(stroke="white", strokeWidth=1).encode(
        x=alt.X("position:O", title=x_title, axis=alt.Axis(labelAngle=0, labelOverlap=True)),
        y=alt.Y("pass:N", sort=order, title=y_title),
        color=alt.Color("status:N", title=status_title,
                        scale=alt.Scale(domain=statuses, range=list(STATUS_COLORS)),
                        legend=alt.Legend(orient="bottom", direction="vertical")),   # fits a 390 px phone
        tooltip=[alt.Tooltip("pass:N", title=y_title), alt.Tooltip("position:O", title=x_title),
                 alt.Tooltip("status:N", title=status_title)],
    ).properties(height=height, autosize=FIT_X)
    return chart.properties(title=title) if title else chart


def timing_frame(contexts: Sequence[int], plain_s: Sequence[float], cached_s: Sequence[float],
                 methods: Sequence[str]) -> pd.DataFrame:
    """Long form: context, milliseconds per token, method (``methods`` = labels without / with the cache)."""
    n = len(contexts)
    ms = np.concatenate([np.asarray(plain_s, float), np.asarray(cached_s, float)]) * 1e3
    return pd.DataFrame({"context": np.tile(np.asarray(contexts, int), 2), "ms": ms,
                         "exact": np.char.mod("%.3f", ms), "method": np.repeat(np.asarray(methods), n)})


@chart_kind(fill=("methods", "title"))
def timing_lines(frame, *, x_title: str, y_title: str, method_title: str, methods=(),
                 title: str | None = None) -> alt.Chart:
    """Milliseconds per generated token against the context length, both axes logarithmic."""
    base = alt.Chart(frame).encode(
        x=alt.X("context:Q", title=x_title, scale=alt.Scale(type="log", base=2)),
        y=alt.Y("ms:Q", title=y_title, scale=alt.Scale(type="log")),
        color=alt.Color("method:N", title=method_title, scale=alt.Scale(domain=methods, range=list(METHOD_COLORS)),
                        legend=alt.Legend(orient="bottom")),
        tooltip=[alt.Tooltip("method:N", title=method_title), alt.Tooltip("context:Q", title=x_title),
                 alt.Tooltip("exact:N", title=y_title)],
    )
    chart = (base.mark_line() + base.mark_point(filled=True, size=50)).properties(height=260, autosize=FIT_X)
    return chart.properties(title=title) if title else chart

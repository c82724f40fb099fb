"""Charts of the sliding-window and attention-sink page: the receptive field of stacked windows (which input each
output reaches after how many layers), and the next-token loss of each streaming method along a long input."""
from __future__ import annotations

from typing import Sequence

import altair as alt
import numpy as np
import pandas as pd

from .charts import FIT_X, chart_kind

REACH_COLORS = ("#fde725", "#5ec962", "#21918c", "#3b528b", "#440154", "#e66101")   # 1 .. 6 layers (viridis)
NEVER_COLOR = "#eeeeee"
METHOD_COLORS = ("#7f7f7f", "#e66101", "#3b528b", "#b2abd2", "#5ec962")    # dense, window, sinks, original, recompute


def reach_frame(first_layer: np.ndarray, layer_labels: Sequence[str], never: str) -> pd.DataFrame:
    """One row per (output i, input j): the fewest layers after which j reaches i (``layer_labels[l-1]``), or
    ``never`` within the layers shown (0). Positions int16, labels dictionary-encoded: a small rerun payload."""
    n = first_layer.shape[0]
    code = np.where(first_layer.ravel() > 0, first_layer.ravel() - 1, len(layer_labels))
    return _grid_frame(n, code, list(layer_labels) + [never])


def _grid_frame(n: int, code: np.ndarray, labels: Sequence[str]) -> pd.DataFrame:
    i, j = np.meshgrid(np.arange(n, dtype=np.int16), np.arange(n, dtype=np.int16), indexing="ij")
    return pd.DataFrame({"output": i.ravel(), "input": j.ravel(),
                         "reach": pd.Categorical.from_codes(code.ravel(), categories=list(labels))})


@chart_kind(fill=("levels", "colors", "height", "title"))
def reach_grid(frame, *, x_title: str, y_title: str, reach_title: str, levels=(), colors=(), height: int = 300,
               title: str | None = None) -> alt.Chart:
    """Rows: outputs of the last layer; columns: inputs; colour: after how many layers the input first reaches
    the output (grey: not within the layers stacked)."""
    chart = alt.Chart(frame).mark_rect(stroke="white", strokeWidth=0.3).encode(
        x=alt.X("input:O", title=x_title, axis=alt.Axis(labelAngle=0, labelOverlap=True, orient="top")),
        y=alt.Y("output:O", title=y_title, axis=alt.Axis(labelOverlap=True)),
        color=alt.Color("reach:N", title=reach_title, scale=alt.Scale(domain=levels, range=colors),
                        legend=alt.Legend(orient="bottom", direction="vertical", labelLimit=0)),
        tooltip=[alt.Tooltip("output:O", title=y_title), alt.Tooltip("input:O", title=x_title),
                 alt.Tooltip("reach:N", title=reach_title)],
    ).properties(height=height, autosize=FIT_X)
    return chart.properties(title=title) if title else chart


def loss_frame(by_bin: dict, methods: Sequence[str], labels: Sequence[str], bin_size: int) -> pd.DataFrame:
    """Long form: position (start of each block of ``bin_size`` tokens), mean loss (float32), method label."""
    values = np.asarray([by_bin[m] for m in methods], dtype=np.float32)          # (methods, blocks)
    blocks = values.shape[1]
    return pd.DataFrame({"position": np.tile(np.arange(blocks, dtype=np.int32) * bin_size, len(methods)),
                         "loss": values.ravel(),
                         "method": pd.Categorical.from_codes(np.repeat(np.arange(len(methods)), blocks),
                                                             categories=list(labels))})


@chart_kind(fill=("methods", "colors", "train_len", "title"))
def loss_lines(frame, *, x_title: str, y_title: str, method_title: str, rule_title: str, methods=(), colors=(),
               train_len: int = 64, title: str | None = None) -> alt.Chart:
    """Mean next-token loss per block of positions, one line per streaming method; a dashed rule at the
    training length."""
    base = alt.Chart(frame).encode(
        x=alt.X("position:Q", title=x_title),
        y=alt.Y("loss:Q", title=y_title, scale=alt.Scale(zero=False)),
        color=alt.Color("method:N", title=method_title, scale=alt.Scale(domain=methods, range=colors),
                        legend=alt.Legend(orient="bottom", direction="vertical", labelLimit=0)),
        tooltip=[alt.Tooltip("method:N", title=method_title), alt.Tooltip("position:Q", title=x_title),
                 alt.Tooltip("loss:Q", title=y_title, format=".4f")],
    )
    rule = alt.Chart(frame).mark_rule(strokeDash=[4, 4], color="#555").encode(   # one rule, drawn once per row
        x=alt.datum(train_len, type="quantitative"), tooltip=alt.value(rule_title))
    chart = (base.mark_line() + base.mark_point(filled=True, size=30) + rule).properties(height=280,
                                                                                         autosize=FIT_X)
    return chart.properties(title=title) if title else chart


def method_frame(losses: dict, methods: Sequence[str], labels: Sequence[str], highlight: str) -> pd.DataFrame:
    values = np.array([float(losses[m]) for m in methods])
    return pd.DataFrame({"method": list(labels), "loss": values, "exact": np.char.mod("%.4f", values),
                         "highlight": [m == highlight for m in methods]})


@chart_kind(fill=("order", "title"))
def method_bars(frame, *, x_title: str, y_title: str, order=(), title: str | None = None) -> alt.Chart:
    """One horizontal bar per streaming method (labels on the left, never cut), the mean loss as its length."""
    chart = alt.Chart(frame).mark_bar().encode(
        y=alt.Y("method:N", sort=order, title=None, axis=alt.Axis(labelLimit=0)),
        x=alt.X("loss:Q", title=x_title),
        color=alt.when(alt.datum.highlight).then(alt.value("#e66101")).otherwise(alt.value("#3b528b")),
        tooltip=[alt.Tooltip("method:N", title=y_title), alt.Tooltip("exact:N", title=x_title)],
    ).properties(height=180, autosize=FIT_X)
    return chart.properties(title=title) if title else chart


def mask_frame(n: int, window: int, sinks: int, labels: Sequence[str]) -> pd.DataFrame:
    """One row per (query i, key j): ``labels`` = (seen in the window, seen as a sink, hidden)."""
    i, j = np.meshgrid(np.arange(n), np.arange(n), indexing="ij")
    code = np.where(j > i, 2, np.where(i - j < window, 0, np.where(j < sinks, 1, 2)))
    return _grid_frame(n, code, labels)

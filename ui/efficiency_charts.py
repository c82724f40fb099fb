"""Charts and tables of the efficiency page: error against the knob, recorded scaling, flash tiles.

Pure functions, no Streamlit calls; every title and label arrives translated. Each ``*_frame`` builds
the long-form data of one chart (exact numbers kept, so the tests decode and check them) and each
``*_chart`` takes that frame and returns an ``alt.Chart``. Whatever changes with the controls is a
column of the frame, never baked into the spec, so ``skeleton`` can serialise the spec once (building
and validating an Altair chart costs far more than the maths here) and ``filled`` swaps the data in.
"""
from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence

import altair as alt
import numpy as np
import pandas as pd

from .charts import MASKED_GREY, as_numpy, unique_labels

DATASET = "main"
ERROR_COLOUR = "#5e3c99"      # purple / orange: a colour-blind-safe pair
TV_COLOUR = "#1b7837"
COST_COLOUR = "#e66101"
NOW_COLOUR = "#555555"
# recorded methods, one colour each (Tableau 10 is distinguishable for the common colour-vision deficiencies
# when paired with the dashes below for the O(n^2) ones)
METHOD_COLOURS = {"full": "#4c78a8", "linear": "#f58518", "performer": "#54a24b", "linformer": "#b279a2",
                  "window": "#e45756", "flash": "#72b7b2", "sparse_masked": "#9d755d",
                  "torch_sdpa": "#555555"}
# drawn dashed in the recorded scaling charts: the methods whose time grows like n^2 (flash saves memory, not time)
QUADRATIC_TIME = ("full", "flash", "sparse_masked", "torch_sdpa")
# done, current, to do, skipped, hidden
STATUS_COLOURS = ("#3b528b", "#e66101", "#d9d9d9", MASKED_GREY, "#f7f7f7")


# --- one spec, new data each rerun ------------------------------------------------------------------

def skeleton(chart: alt.TopLevelMixin) -> str:
    """The chart's Vega-Lite spec as JSON, its one dataset renamed "main" (``filled`` replaces the data)."""
    spec = chart.to_dict()
    datasets = spec.pop("datasets", {})
    if len(datasets) != 1:
        raise ValueError(f"a skeleton needs exactly one dataset, the chart has {len(datasets)}")
    view = spec.get("config", {}).get("view", {})
    for key in ("continuousWidth", "continuousHeight"):
        view.pop(key, None)
    if "config" in spec and not view:
        spec["config"].pop("view", None)
        if not spec["config"]:
            del spec["config"]
    if not any(k in spec for k in ("facet", "vconcat", "hconcat", "concat")):
        spec.setdefault("autosize", {"type": "fit-x", "contains": "padding"})
    (name,) = datasets
    return json.dumps(spec).replace(json.dumps(name), json.dumps(DATASET))


def filled(skeleton_json: str, frame: pd.DataFrame) -> dict:
    """A Vega-Lite spec dict for ``st.vega_lite_chart``: the skeleton with ``frame`` as its data."""
    spec = json.loads(skeleton_json)
    spec["datasets"] = {DATASET: frame}
    return spec


def fmt(x: float) -> str:
    """A number as quoted on the page: 3 significant digits, scientific when small."""
    x = float(x)
    if not math.isfinite(x):
        return "∞" if x > 0 else ("−∞" if x < 0 else "NaN")
    if x == 0:
        return "0"
    if abs(x) >= 1000:
        return f"{x:,.0f}"
    if abs(x) >= 0.01:
        return f"{x:.3g}"
    return f"{x:.1e}"


# --- error against the knob -------------------------------------------------------------------------

def knob_frame(sweep: Mapping[str, Sequence[float]], *, current: float | None, this_error: float | None,
               names: Mapping[str, str]) -> pd.DataFrame:
    """Long form: kind "err" (mean, lo, hi over seeds), "tv", "cost", "now" (a rule at the current knob)
    and "dot" (this run's error). ``names``: translated series names for err, tv, cost, dot."""
    x = list(sweep["value"])
    parts = [pd.DataFrame({"x": x, "y": sweep["mean"], "lo": sweep["lo"], "hi": sweep["hi"], "kind": "err",
                           "series": names["err"]}),
             pd.DataFrame({"x": x, "y": sweep["tv"], "lo": np.nan, "hi": np.nan, "kind": "tv",
                           "series": names["tv"]}),
             pd.DataFrame({"x": x, "y": sweep["cost"], "lo": np.nan, "hi": np.nan, "kind": "cost",
                           "series": names["cost"]})]
    if current is not None:
        parts.append(pd.DataFrame({"x": [current], "y": [np.nan], "lo": np.nan, "hi": np.nan, "kind": "now",
                                   "series": ""}))
        if this_error is not None:
            parts.append(pd.DataFrame({"x": [current], "y": [this_error], "lo": np.nan, "hi": np.nan,
                                       "kind": "dot", "series": names["dot"]}))
    frame = pd.concat(parts, ignore_index=True)
    frame["exact"] = [fmt(v) if pd.notna(v) else "" for v in frame["y"]]
    return frame


def knob_chart(frame: pd.DataFrame, *, title: str, x_title: str, error_title: str, cost_title: str,
               series_title: str, names: Mapping[str, str], log_x: bool) -> alt.LayerChart:
    """Error (left axis: mean over seeds with a min-max band, and misplaced attention mass) and cost
    (right axis: multiply-adds relative to exact attention) against the knob; a rule at the current value."""
    scale_x = alt.Scale(type="log", base=2) if log_x else alt.Scale(zero=False)
    x = alt.X("x:Q", title=x_title, scale=scale_x, axis=alt.Axis(tickMinStep=1, format="d"))
    colours = alt.Scale(domain=[names["err"], names["tv"], names["dot"], names["cost"]],
                        range=[ERROR_COLOUR, TV_COLOUR, "black", COST_COLOUR])
    colour = alt.Color("series:N", title=series_title, scale=colours,
                       legend=alt.Legend(orient="bottom", columns=2, labelLimit=260))
    tooltip = [alt.Tooltip("series:N", title=series_title), alt.Tooltip("x:Q", title=x_title),
               alt.Tooltip("exact:N", title=error_title)]
    base = alt.Chart(frame)
    band = base.transform_filter(alt.datum.kind == "err").mark_area(opacity=0.18, color=ERROR_COLOUR).encode(
        x=x, y=alt.Y("lo:Q", title=error_title), y2="hi:Q")
    lines = base.transform_filter((alt.datum.kind == "err") | (alt.datum.kind == "tv")).mark_line(
        point=True).encode(x=x, y=alt.Y("y:Q", title=error_title), color=colour, tooltip=tooltip,
                           strokeDash=alt.StrokeDash("series:N", legend=None,
                                                     scale=alt.Scale(domain=[names["err"], names["tv"]],
                                                                     range=[[1, 0], [5, 3]])))
    rule = base.transform_filter(alt.datum.kind == "now").mark_rule(
        color=NOW_COLOUR, strokeDash=[2, 2]).encode(x=x)
    dot = base.transform_filter(alt.datum.kind == "dot").mark_point(
        size=110, filled=True, shape="diamond").encode(
        x=x, y=alt.Y("y:Q", title=error_title), color=colour, tooltip=tooltip)
    cost = base.transform_filter(alt.datum.kind == "cost").mark_line(strokeDash=[2, 2], point=True).encode(
        x=x, y=alt.Y("y:Q", title=cost_title, scale=alt.Scale(type="log"),
                     axis=alt.Axis(orient="right", titleColor=COST_COLOUR)),
        color=colour, tooltip=tooltip)
    return alt.layer(alt.layer(band, lines, rule, dot), cost).resolve_scale(y="independent").properties(
        title=title, height=300)


# --- one query row, two methods ---------------------------------------------------------------------

def pair_frame(first, second, labels: Sequence[str], names: tuple[str, str]) -> pd.DataFrame:
    """Two vectors over the same labels (e.g. a row of exact vs approximate weights), long form."""
    a, b = (as_numpy(np.asarray(x, dtype=np.float64).reshape(1, -1))[0] for x in (first, second))
    lab = unique_labels(list(labels))
    n = len(a)
    both = np.concatenate([a, b])
    return pd.DataFrame({"pos": np.tile(np.arange(n), 2), "label": lab * 2,
                         "series": [names[0]] * n + [names[1]] * n,
                         "value": both, "exact": [f"{v:.6g}" for v in both]})


def pair_chart(frame: pd.DataFrame, labels: Sequence[str], *, title: str, label_title: str, value_title: str,
               series_title: str, names: tuple[str, str], domain: tuple[float, float] | None = None
               ) -> alt.Chart:
    """Grouped bars: for each label, the first series next to the second."""
    order = unique_labels(list(labels))
    y = alt.Y("value:Q", title=value_title, scale=alt.Scale(domain=list(domain)) if domain else alt.Undefined)
    return alt.Chart(frame).mark_bar().encode(
        x=alt.X("label:N", sort=order, title=label_title, axis=alt.Axis(labelAngle=-45, labelOverlap=True)),
        xOffset=alt.XOffset("series:N", sort=list(names)),
        y=y,
        color=alt.Color("series:N", title=series_title, sort=list(names),
                        scale=alt.Scale(domain=list(names), range=["#3b528b", COST_COLOUR]),
                        legend=alt.Legend(orient="bottom")),
        tooltip=[alt.Tooltip("label:N", title=label_title), alt.Tooltip("series:N", title=series_title),
                 alt.Tooltip("exact:N", title=value_title)],
    ).properties(title=title, height=230)


def bars_frame(values, labels: Sequence[str]) -> pd.DataFrame:
    """Exactly the data ``ui.charts.bars`` builds (a test checks it), so its spec can be refilled."""
    vals = np.asarray(values, dtype=np.float64).reshape(-1)
    return pd.DataFrame({"pos": np.arange(len(vals)), "label": unique_labels(list(labels)), "value": vals,
                         "exact": np.char.mod("%.8g", vals), "highlight": np.zeros(len(vals), dtype=bool)})


# --- the recorded benchmark -------------------------------------------------------------------------

def scaling_frame(doc: Mapping, names: Mapping[str, str], slope_label: str) -> pd.DataFrame:
    """One row per measured (method, n) of ``assets/bench/efficient.json``: time (ms), peak extra memory
    (MiB), the fitted slopes of that method, and its legend labels ``slope_label.format(name=, slope=)``
    with the time slope (label_time) and the memory slope (label_memory)."""
    slopes = doc["slopes"]
    rows = []
    for r in doc["results"]:
        if not r.get("time_s") or r["method"] not in names:
            continue
        s = slopes.get(r["method"], {})
        t, m = s.get("time_slope"), s.get("memory_slope")
        mem = r.get("peak_extra_bytes")
        rows.append({"method": r["method"], "n": r["n"], "time_ms": 1e3 * r["time_s"],
                     "memory_mib": mem / 2 ** 20 if mem else np.nan,
                     "time_slope": t, "memory_slope": m,
                     "label_time": slope_label.format(name=names[r["method"]], slope=fmt_slope(t)),
                     "label_memory": slope_label.format(name=names[r["method"]], slope=fmt_slope(m))})
    frame = pd.DataFrame(rows)
    frame["time_exact"] = [f"{v:.4g} ms" for v in frame["time_ms"]]
    frame["memory_exact"] = [f"{v:.4g} MiB" if pd.notna(v) else "—" for v in frame["memory_mib"]]
    return frame


def fmt_slope(s: float | None) -> str:
    return "—" if s is None else f"{s:.2f}"


def scaling_chart(frame: pd.DataFrame, *, y: str, title: str, x_title: str, y_title: str, method_title: str,
                  order: Sequence[str]) -> alt.Chart:
    """Log-log lines of ``y`` ("time_ms" or "memory_mib") against n, one per method; the legend carries
    the fitted slope; O(n^2) methods (theory) are dashed."""
    label = "label_time" if y == "time_ms" else "label_memory"
    rank = {m: i for i, m in enumerate(order)}
    ordered = frame.sort_values("method", key=lambda col: col.map(rank), kind="stable")
    labels = list(dict.fromkeys(ordered[label]))
    methods = list(dict.fromkeys(ordered["method"]))
    colours = [METHOD_COLOURS.get(m, "#999999") for m in methods]
    exact = "time_exact" if y == "time_ms" else "memory_exact"
    positive = f"isValid(datum.{y}) && datum.{y} > 0"        # log scale: drop the missing / zero memory
    return alt.Chart(frame).transform_filter(positive).mark_line(point=True).encode(
        x=alt.X("n:Q", title=x_title, scale=alt.Scale(type="log", base=2),
                axis=alt.Axis(values=sorted(set(int(v) for v in frame["n"])), format="d")),
        y=alt.Y(f"{y}:Q", title=y_title, scale=alt.Scale(type="log")),
        color=alt.Color(f"{label}:N", title=method_title, sort=labels,
                        scale=alt.Scale(domain=labels, range=colours),
                        legend=alt.Legend(orient="bottom", columns=2, labelLimit=320)),
        strokeDash=alt.condition(alt.FieldOneOfPredicate("method", list(QUADRATIC_TIME)),
                                 alt.value([5, 3]), alt.value([1, 0])),
        tooltip=[alt.Tooltip(f"{label}:N", title=method_title), alt.Tooltip("n:Q", title=x_title),
                 alt.Tooltip(f"{exact}:N", title=y_title)],
    ).properties(title=title, height=340)


def live_frame(results: Sequence[Mapping], names: Mapping[str, str]) -> pd.DataFrame:
    """The learner's own timings: method, n, time in ms, speed-up against full at the same n."""
    full = {r["n"]: r["time_s"] for r in results if r["method"] == "full"}
    rows = [{"method": r["method"], "n": r["n"], "time_ms": 1e3 * r["time_s"],
             "speedup": full[r["n"]] / r["time_s"] if r["n"] in full and r["time_s"] > 0 else np.nan,
             "label": names.get(r["method"], r["method"])} for r in results]
    frame = pd.DataFrame(rows)
    frame["time_exact"] = [f"{v:.4g} ms" for v in frame["time_ms"]]
    return frame


def live_chart(frame: pd.DataFrame, *, title: str, x_title: str, y_title: str, method_title: str,
               order: Sequence[str], names: Mapping[str, str]) -> alt.Chart:
    labels = [names[m] for m in order]
    return alt.Chart(frame).mark_line(point=True).encode(
        x=alt.X("n:Q", title=x_title, scale=alt.Scale(type="log", base=2),
                axis=alt.Axis(values=sorted(set(int(v) for v in frame["n"])), format="d")),
        y=alt.Y("time_ms:Q", title=y_title, scale=alt.Scale(type="log")),
        color=alt.Color("label:N", title=method_title, sort=labels,
                        scale=alt.Scale(domain=labels, range=[METHOD_COLOURS.get(m, "#999") for m in order]),
                        legend=alt.Legend(orient="bottom", columns=3)),
        tooltip=[alt.Tooltip("label:N", title=method_title), alt.Tooltip("n:Q", title=x_title),
                 alt.Tooltip("time_exact:N", title=y_title)],
    ).properties(title=title, height=300)


# --- flash attention tiles --------------------------------------------------------------------------

def tile_frame(status, row_labels: Sequence[str], col_labels: Sequence[str], status_names: Sequence[str],
               block_q: int, block_k: int, tile_text: str) -> pd.DataFrame:
    """One row per score cell: its status code (0 done, 1 current, 2 to do, 3 skipped, 4 hidden), the
    status name, its tile (``tile_text.format(a=, b=)``, 1-based blocks) and a checkerboard parity."""
    codes = np.asarray(status, dtype=np.int64)
    n_q, n_k = codes.shape
    qi, ki = np.meshgrid(np.arange(n_q), np.arange(n_k), indexing="ij")
    qb, kb = qi // block_q, ki // block_k
    return pd.DataFrame({
        "query_pos": qi.ravel(), "key_pos": ki.ravel(),
        "query": np.repeat(unique_labels(list(row_labels)), n_k),
        "key": np.tile(unique_labels(list(col_labels)), n_q),
        "code": codes.ravel(), "status": [status_names[c] for c in codes.ravel()],
        "tile": [tile_text.format(a=a + 1, b=b + 1) for a, b in zip(qb.ravel(), kb.ravel())],
        "odd": ((qb + kb) % 2 == 1).ravel(),
    })


def tile_chart(frame: pd.DataFrame, row_labels: Sequence[str], col_labels: Sequence[str], *, title: str,
               x_title: str, y_title: str, status_title: str, status_names: Sequence[str],
               tile_title: str) -> alt.LayerChart:
    """The n_q x n_k score matrix as flash attention visits it: finished tiles blue, the current one orange,
    tiles still to do light grey, tiles skipped above the causal diagonal grey with a cross."""
    rows, cols = unique_labels(list(row_labels)), unique_labels(list(col_labels))
    base = alt.Chart(frame).encode(
        x=alt.X("key:N", sort=cols, title=x_title,
                axis=alt.Axis(orient="top", labelAngle=-45, labelLimit=80)),
        y=alt.Y("query:N", sort=rows, title=y_title, axis=alt.Axis(labelLimit=80)))
    tooltip = [alt.Tooltip("query:N", title=y_title), alt.Tooltip("key:N", title=x_title),
               alt.Tooltip("tile:N", title=tile_title), alt.Tooltip("status:N", title=status_title)]
    rect = base.mark_rect(stroke="white", strokeWidth=0.6).encode(
        color=alt.Color("status:N", title=status_title, scale=alt.Scale(domain=list(status_names),
                                                                        range=list(STATUS_COLOURS)),
                        legend=alt.Legend(orient="bottom", columns=3, labelLimit=220)),
        opacity=alt.condition(alt.datum.odd, alt.value(0.78), alt.value(1.0)),
        tooltip=tooltip)
    cross = base.transform_filter(alt.datum.code == 3).mark_text(text="×", color="#666666", fontSize=10)
    n = len(rows)
    cell = 26 if n <= 16 else max(8, 540 // n)
    return alt.layer(rect, cross).properties(title=title, height=max(160, cell * n + 60))


def flash_table(step, labels: Sequence[str], columns: Mapping[str, str]) -> pd.DataFrame:
    """The rows of the current query block: running max before / in this tile / after, the rescale factor
    exp(m_old - m_new), and the running sum before and after (numbers as text: -inf stays readable)."""
    rows = range(step.tile.q_start, step.tile.q_end)
    lab = unique_labels(list(labels))

    def txt(values):
        return [fmt(float(v)) for v in values]

    return pd.DataFrame({
        columns["query"]: [lab[i] for i in rows],
        columns["m_old"]: txt(step.m_old), columns["tile_max"]: txt(step.tile_max),
        columns["m_new"]: txt(step.tile.row_max[0, 0]), columns["rescale"]: txt(step.tile.rescale[0, 0]),
        columns["l_old"]: txt(step.l_old), columns["l_new"]: txt(step.tile.row_sum[0, 0]),
    })

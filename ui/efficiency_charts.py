"""Charts, tables and sentences of the efficiency page: error against the knob, recorded scaling, flash tiles.

Each ``*_frame`` builds the long-form data of one chart (exact numbers kept, so the tests decode and check
them); each ``*_chart`` is a chart kind (``ui.charts.chart_kind``): an Altair builder of that frame, built
once per static shape (options, titles in the current language) and filled per rerun (axis orders, colour
lists, heights); the small public functions (``knob``, ``pair``, ``scaling``, ``live``, ``tiles``) make the
frame and return the finished spec. The tables (``complexity_table``, ``lra_table``, ``live_table``,
``precision_table``, ``flash_table``) are the DataFrames the page shows, their headers translated here; the
``*_notes`` functions write the "what to notice" and pitfall sentences that quote the numbers on screen.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import NamedTuple

import altair as alt
import numpy as np
import pandas as pd

from attention_core.labs import efficiency_bench as bench
from attention_core.labs import seed_bugs

from . import format as fmt
from .charts import Spec, as_numpy, attention_heatmap, bars, chart_kind, unique_labels
from .i18n import t

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
# done, current, to do, skipped, hidden: the three greys differ in lightness (L* about 95, 48, 76) so they are
# told apart without colour vision; skipped tiles also carry a white "×"
STATUS_COLOURS = ("#3b528b", "#e66101", "#f0f0f0", "#737373", "#bdbdbd")
FIT_X = alt.AutoSizeParams(type="fit-x", contains="padding")


def thin(channel: str, spacing: float) -> str:
    """Vega ``labelExpr``: keep every k-th label of a band axis so labels ``spacing`` px apart never overlap (all of
    them while the cells are wide enough: a sentence of up to ~20 tokens keeps every label at 390 px)."""
    step = f"max(1, ceil({spacing:g} / max(bandwidth('{channel}'), 0.01)))"
    return f"indexof(domain('{channel}'), datum.value) % {step} === 0 ? datum.label : ''"


def mib(n_bytes: float) -> float:
    return n_bytes / 2 ** 20


# one approximation a row (a phone is 358 px wide); the thin space: KaTeX's last column overhangs its box by 2 px
FORMULA = (r"\begin{gathered}\underbrace{\operatorname{softmax}\Big(\tfrac{QK^\top}{\sqrt{d}}\Big)V}_{O(n^2 d)}"
           r"\;\approx\;\frac{\phi(Q)\,\big(\phi(K)^\top V\big)}{\phi(Q)\,\phi(K)^\top\mathbf 1}\\ "
           r"\text{or}\;\;\operatorname{softmax}\Big(\tfrac{Q\,(EK)^\top}{\sqrt d}\Big)FV\\ "
           r"\text{or}\;\;\operatorname{softmax}\Big(\tfrac{QK^\top}{\sqrt d}+M_{\text{pattern}}\Big)V"
           r"\end{gathered}\,")


def formula() -> str:
    """The page's formula (exact attention against the three families of shortcuts), words translated."""
    return (FORMULA.replace(r"\text{or}", r"\text{%s}" % t("efficiency.formula_or"))
            .replace(r"\text{pattern}", r"\text{%s}" % t("efficiency.formula_pattern")))


def checkpoint_formula() -> str:
    """What gradient checkpointing keeps for the backward pass: L layers' activations -> L inputs + one layer."""
    return (r"\begin{gathered}\text{%s} \approx L \cdot A_{\text{layer}}\\ \longrightarrow\;\;"
            r"L \cdot \underbrace{b\,n\,d}_{\text{%s}} + A_{\text{layer}}\end{gathered}\,"
            % (t("efficiency.tips_ck_saved"), t("efficiency.tips_ck_input")))


# --- error against the knob -------------------------------------------------------------------------

def knob_frame(sweep, *, current: float | None, this_error: float | None,
               names: Mapping[str, str]) -> pd.DataFrame:
    """Long form of a ``KnobSweep``: kind "err" (mean, lo, hi over seeds), "tv", "cost", "now" (a rule at the
    current knob) and "dot" (this run's error). ``names``: translated series names for err, tv, cost, dot."""
    k = len(sweep.value)
    now = [] if current is None else [("now", "", np.nan)] + ([] if this_error is None else [("dot", names["dot"],
                                                                                             this_error)])
    rest = np.full(2 * k + len(now), np.nan)                     # lo, hi: the band of the error only
    frame = pd.DataFrame({
        "x": np.concatenate([np.tile(np.asarray(sweep.value, dtype=float), 3), [current] * len(now)]),
        "y": np.concatenate([sweep.mean, sweep.tv, sweep.cost, [v for *_, v in now]]).astype(float),
        "lo": np.concatenate([sweep.lo, rest]), "hi": np.concatenate([sweep.hi, rest]),
        "kind": [kind for kind in ("err", "tv", "cost") for _ in range(k)] + [kind for kind, *_ in now],
        "series": [names[kind] for kind in ("err", "tv", "cost") for _ in range(k)] + [name for _, name, _ in now]})
    frame["exact"] = [fmt.short(v) if pd.notna(v) else "" for v in frame["y"]]
    return frame


DOT_COLOUR = "#808080"   # a mid grey: at least 3:1 against the light theme's white and the dark theme's background


@chart_kind(fill=("title",))
def knob_chart(frame, *, title: str, x_title: str, error_title: str, cost_title: str, series_title: str,
               names: Mapping[str, str], log_x: bool) -> alt.LayerChart:
    """Error (left axis: mean over seeds with a min-max band, and misplaced attention mass) and cost
    (right axis: multiply-adds relative to exact attention) against the knob; a rule at the current value."""
    scale_x = alt.Scale(type="log", base=2) if log_x else alt.Scale(zero=False)
    x = alt.X("x:Q", title=x_title, scale=scale_x, axis=alt.Axis(tickMinStep=1, format="d"))
    colours = alt.Scale(domain=[names["err"], names["tv"], names["dot"], names["cost"]],
                        range=[ERROR_COLOUR, TV_COLOUR, DOT_COLOUR, COST_COLOUR])
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
        title=title, height=300, autosize=FIT_X)


def knob(sweep, *, current: float | None, this_error: float | None, knob_title: str, title: str,
         log_x: bool) -> Spec:
    names = {s: t(f"efficiency.series_{s}") for s in ("err", "tv", "cost", "dot")}
    frame = knob_frame(sweep, current=current, this_error=this_error, names=names)
    return knob_chart(frame, title=title, x_title=knob_title, error_title=t("efficiency.err_axis"),
                      cost_title=t("efficiency.cost_axis"), series_title=t("efficiency.series"), names=names,
                      log_x=log_x)


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


@chart_kind(fill=("order", "title", "domain", "height"))
def pair_chart(frame, *, order, title: str, label_title: str, value_title: str, series_title: str,
               names: tuple[str, str], domain=None, height: int = 230) -> alt.Chart:
    """Grouped horizontal bars: for each label (a row, never hidden: the page quotes the query's keys), the first
    series above the second."""
    x = alt.X("value:Q", title=value_title, scale=alt.Scale(domain=domain) if domain else alt.Undefined)
    return alt.Chart(frame).mark_bar().encode(
        y=alt.Y("label:N", sort=order, title=label_title, axis=alt.Axis(labelOverlap=False, labelLimit=100)),
        yOffset=alt.YOffset("series:N", sort=list(names)),
        x=x,
        color=alt.Color("series:N", title=series_title, sort=list(names),
                        scale=alt.Scale(domain=list(names), range=["#3b528b", COST_COLOUR]),
                        legend=alt.Legend(orient="bottom")),
        tooltip=[alt.Tooltip("label:N", title=label_title), alt.Tooltip("series:N", title=series_title),
                 alt.Tooltip("exact:N", title=value_title)],
    ).properties(title=title, height=height, autosize=FIT_X)


def pair(first, second, labels: Sequence[str], names: tuple[str, str], *, title: str, label_title: str,
         value_title: str, domain: tuple[float, float] | None = None) -> Spec:
    return pair_chart(pair_frame(first, second, labels, names), order=unique_labels(list(labels)), title=title,
                      label_title=label_title, value_title=value_title, series_title=t("efficiency.series"),
                      names=tuple(names), domain=None if domain is None else [float(d) for d in domain],
                      height=max(120, 16 * len(labels)))


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
        ts, ms = s.get("time_slope"), s.get("memory_slope")
        mem = r.get("peak_extra_bytes")
        rows.append({"method": r["method"], "n": r["n"], "time_ms": 1e3 * r["time_s"],
                     "memory_mib": mib(mem) if mem else np.nan, "time_slope": ts, "memory_slope": ms,
                     "label_time": slope_label.format(name=names[r["method"]], slope=fmt_slope(ts)),
                     "label_memory": slope_label.format(name=names[r["method"]], slope=fmt_slope(ms))})
    frame = pd.DataFrame(rows)
    frame["time_exact"] = [f"{v:.4g} ms" for v in frame["time_ms"]]
    frame["memory_exact"] = [f"{v:.4g} MiB" if pd.notna(v) else "—" for v in frame["memory_mib"]]
    return frame


def fmt_slope(s: float | None) -> str:
    return "—" if s is None else fmt.fixed(s)


@chart_kind(fill=("labels", "colours", "ticks", "title"))
def scaling_chart(frame, *, y: str, label: str, exact: str, title: str, x_title: str, y_title: str,
                  method_title: str, labels, colours, ticks, legend_columns: int = 1) -> alt.Chart:
    """Log-log lines of ``y`` against n, one per method (legend ``label``, in the order ``labels``); O(n^2)
    methods (theory) are dashed. Rows without a positive ``y`` (a missing memory) are left out."""
    return alt.Chart(frame).transform_filter(f"isValid(datum.{y}) && datum.{y} > 0").mark_line(point=True).encode(
        x=alt.X("n:Q", title=x_title, scale=alt.Scale(type="log", base=2), axis=alt.Axis(values=ticks, format="d")),
        y=alt.Y(f"{y}:Q", title=y_title, scale=alt.Scale(type="log")),
        color=alt.Color(f"{label}:N", title=method_title, sort=labels, scale=alt.Scale(domain=labels, range=colours),
                        legend=alt.Legend(orient="bottom", columns=legend_columns, labelLimit=0)),
        strokeDash=alt.condition(alt.FieldOneOfPredicate("method", list(QUADRATIC_TIME)),
                                 alt.value([5, 3]), alt.value([1, 0])),
        tooltip=[alt.Tooltip(f"{label}:N", title=method_title), alt.Tooltip("n:Q", title=x_title),
                 alt.Tooltip(f"{exact}:N", title=y_title)],
    ).properties(title=title, height=340, autosize=FIT_X)


def _legend(frame: pd.DataFrame, label: str, order: Sequence[str]) -> tuple[list, list, list]:
    """Legend labels and colours in the order of ``order`` (methods), and the measured n as axis ticks."""
    rank = {m: i for i, m in enumerate(order)}
    ordered = frame.sort_values("method", key=lambda col: col.map(rank), kind="stable")
    methods = list(dict.fromkeys(ordered["method"]))
    return (list(dict.fromkeys(ordered[label])), [METHOD_COLOURS.get(m, "#999999") for m in methods],
            sorted({int(v) for v in frame["n"]}))


def scaling(frame: pd.DataFrame, *, y: str, title: str, y_title: str, order: Sequence[str]) -> Spec:
    """``y`` = "time_ms" or "memory_mib" of ``scaling_frame``; the legend carries the fitted slope."""
    label, exact = ("label_time", "time_exact") if y == "time_ms" else ("label_memory", "memory_exact")
    labels, colours, ticks = _legend(frame, label, order)
    return scaling_chart(frame, y=y, label=label, exact=exact, title=title, x_title=t("efficiency.n_axis"),
                         y_title=y_title, method_title=t("efficiency.method"), labels=labels, colours=colours,
                         ticks=ticks)


def live_frame(results: Sequence[Mapping], names: Mapping[str, str]) -> pd.DataFrame:
    """The learner's own timings: method, n, time in ms, speed-up against full at the same n."""
    full = {r["n"]: r["time_s"] for r in results if r["method"] == "full"}
    rows = [{"method": r["method"], "n": r["n"], "time_ms": 1e3 * r["time_s"],
             "speedup": full[r["n"]] / r["time_s"] if r["n"] in full and r["time_s"] > 0 else np.nan,
             "label": names.get(r["method"], r["method"])} for r in results]
    frame = pd.DataFrame(rows)
    frame["time_exact"] = [f"{v:.4g} ms" for v in frame["time_ms"]]
    return frame


def live(frame: pd.DataFrame, order: Sequence[str]) -> Spec:
    labels, colours, ticks = _legend(frame, "label", order)
    return scaling_chart(frame, y="time_ms", label="label", exact="time_exact", title=t("efficiency.live_chart"),
                         x_title=t("efficiency.n_axis"), y_title=t("efficiency.rec_time_y"),
                         method_title=t("efficiency.method"), labels=labels, colours=colours, ticks=ticks)


def recorded(doc: Mapping, order: Sequence[str]) -> dict[str, Spec]:
    """The recorded run's two log-log charts, time and peak extra memory against n, by chart key."""
    frame = scaling_frame(doc, {m: t(f"efficiency.rs_{m}") for m in order}, t("efficiency.slope_label"))
    return {f"rec_{y}": scaling(frame, y=y, title=t(f"efficiency.{title}"), y_title=t(f"efficiency.{title}_y"),
                                order=order) for y, title in (("time_ms", "rec_time"), ("memory_mib", "rec_mem"))}


def recorded_caption(doc: Mapping) -> str:
    m = doc["machine"]
    return t("efficiency.rec_caption", cpu=m["cpu"], cores=m["logical_cores"], torch=m["torch"],
             threads=m.get("torch_threads", 1), d=doc["settings"]["d"], mm=round(doc["wall_s"] / 60))


class RnnCharts(NamedTuple):
    """Step i of ``labs.efficiency.RnnView``: the state S_i (heatmap, rows φ features, columns v dimensions),
    the normaliser z_i (bars) and the output y_i computed both ways (pairs); fixed colour domains over all i."""

    state: Spec
    z: Spec
    y: Spec
    features: list[str]
    dims: list[str]


def rnn_charts(view, i: int) -> RnnCharts:
    S = view.S[i - 1]
    bound = round(float(np.abs(view.S).max()) or 1.0, 6)
    feat, dims = [f"φ{j + 1}" for j in range(S.shape[0])], [f"v{j + 1}" for j in range(S.shape[1])]
    state = attention_heatmap(S, feat, dims, title=t("efficiency.rnn_S", i=i), kind="scores", domain=(-bound, bound),
                              selectable=False, x_title=t("efficiency.rnn_v"), y_title=t("efficiency.rnn_phi"),
                              value_title=t("common.value"), show_numbers=False)
    z = bars(view.z[i - 1], feat, value_title=t("common.value"), label_title=t("efficiency.rnn_phi"),
             domain=(0.0, round(float(view.z.max()) or 1.0, 6)), title=t("efficiency.rnn_z", i=i), fit_x=True)
    y = pair(view.y_rnn[i - 1], view.y_par[i - 1], dims, (t("efficiency.series_rnn"), t("efficiency.series_parallel")),
             title=t("efficiency.rnn_y", i=i), label_title=t("efficiency.rnn_v"), value_title=t("common.value"))
    return RnnCharts(state, z, y, feat, dims)


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


@chart_kind(fill=("rows", "cols", "title", "height"))
def tile_chart(frame, *, rows, cols, title: str, x_title: str, y_title: str, status_title: str,
               status_names: Sequence[str], tile_title: str, height: int) -> alt.LayerChart:
    """The n_q x n_k score matrix as flash attention visits it: finished tiles blue, the current one orange,
    tiles still to do light grey, tiles skipped above the causal diagonal grey with a cross."""
    base = alt.Chart(frame).encode(
        # every label that fits, the others thinned evenly (never hidden at random: the page quotes tokens)
        x=alt.X("key:N", sort=cols, title=x_title, axis=alt.Axis(orient="top", labelAngle=-45, labelLimit=80,
                                                                 labelOverlap=False, labelExpr=thin("x", 17))),
        y=alt.Y("query:N", sort=rows, title=y_title, axis=alt.Axis(labelLimit=80, labelOverlap=False,
                                                                   labelExpr=thin("y", 12))))
    tooltip = [alt.Tooltip("query:N", title=y_title), alt.Tooltip("key:N", title=x_title),
               alt.Tooltip("tile:N", title=tile_title), alt.Tooltip("status:N", title=status_title)]
    rect = base.mark_rect(stroke="white", strokeWidth=0.6).encode(
        color=alt.Color("status:N", title=status_title,
                        scale=alt.Scale(domain=list(status_names), range=list(STATUS_COLOURS)),
                        legend=alt.Legend(orient="bottom", columns=1, labelLimit=0)),    # a row each: never cut
        opacity=alt.condition(alt.datum.odd, alt.value(0.78), alt.value(1.0)),
        tooltip=tooltip)
    cross = base.transform_filter(alt.datum.code == 3).mark_text(text="×", color="white", fontSize=10)
    return alt.layer(rect, cross).properties(title=title, height=height, autosize=FIT_X)


def tiles(status, labels: Sequence[str], block_q: int, block_k: int) -> Spec:
    names = [t(f"efficiency.st_{s}") for s in ("done", "current", "todo", "skipped", "hidden")]
    frame = tile_frame(status, labels, labels, names, block_q, block_k, t("efficiency.tile_text"))
    order, n = unique_labels(list(labels)), len(labels)
    cell = 26 if n <= 16 else max(8, 540 // n)
    return tile_chart(frame, rows=order, cols=order, title=t("efficiency.tile_chart"),
                      x_title=t("efficiency.keys_values"), y_title=t("common.query"),
                      status_title=t("efficiency.status"), status_names=names, tile_title=t("efficiency.tile_word"),
                      height=max(160, cell * n + 60))


# --- tables -------------------------------------------------------------------------------------------

def flash_table(step, labels: Sequence[str]) -> pd.DataFrame:
    """The rows of the current query block: running max before / in this tile / after, the rescale factor
    exp(m_old - m_new), and the running sum before and after (numbers as text: -inf stays readable)."""
    lab = unique_labels(list(labels))
    columns = {c: t(f"efficiency.fc_{c}") for c in ("query", "m_old", "tile_max", "m_new", "rescale", "l_old", "l_new")}
    values = {"m_old": step.m_old, "tile_max": step.tile_max, "m_new": step.tile.row_max[0, 0],
              "rescale": step.tile.rescale[0, 0], "l_old": step.l_old, "l_new": step.tile.row_sum[0, 0]}
    table = {columns["query"]: lab[step.tile.q_start:step.tile.q_end]}
    table.update({columns[c]: [fmt.short(float(v)) for v in vals] for c, vals in values.items()})
    return pd.DataFrame(table)


COMPLEXITY_ROWS = (("standard", "full"), ("linear", "linear"), ("sparse", "window"), ("sparse_dense", "sparse_masked"),
                   ("linformer", "linformer"), ("performer", "performer"), ("flash", "flash"))


def complexity_table(doc: dict, sizes: bench.QuotedSizes) -> pd.DataFrame:
    """The first tutorial's table (section 8.4), every column of it (variant, time, space, core idea, use case),
    with what we measured beside each row: the fitted slopes,
    the speed-up against full at the largest n, the peak extra memory at ``sizes.memory`` (or the largest
    n measured below it)."""
    by = bench.by_method(doc)
    out = []
    for row, method in COMPLEXITY_ROWS:
        s = doc["slopes"][method]
        big = by.get((method, sizes.top))
        speed = by[("full", sizes.top)]["time_s"] / big["time_s"] if big else None
        mem = max((r for (m, n), r in by.items() if m == method and n <= (sizes.memory or n)
                   and r.get("peak_extra_bytes")), key=lambda r: r["n"], default=None)
        out.append({
            t("efficiency.col_variant"): t(f"efficiency.cx_{row}"),
            t("efficiency.col_time"): t(f"efficiency.cx_{row}_time"),
            t("efficiency.col_space"): t(f"efficiency.cx_{row}_space"),
            t("efficiency.col_idea"): t(f"efficiency.cx_{row}_idea"),
            t("efficiency.col_use"): t(f"efficiency.cx_{row}_use"),
            t("efficiency.col_measured"): t(f"efficiency.r_{method}"),
            t("efficiency.col_tslope"): fmt_slope(s["time_slope"]),
            t("efficiency.col_mslope"): fmt_slope(s["memory_slope"]),
            t("efficiency.col_speed", n=sizes.top): "—" if speed is None else f"{speed:.3g}×",
            t("efficiency.col_mem"): "—" if mem is None else f"{mib(mem['peak_extra_bytes']):.3g} MiB (n = {mem['n']})",
        })
    return pd.DataFrame(out).set_index(t("efficiency.col_variant"))


def lra_table(doc: dict, lra_rows: Sequence[Mapping], names: Mapping[str, str], sizes: Sequence[int]) -> pd.DataFrame:
    """Our speed and memory ratios against full beside the Long Range Arena paper's (Table 2), per size."""
    ours = {(r["method"], r["n"]): r for r in bench.measured_ratios(doc, sizes)}
    lra = {(r["model"], r["seq_len"]): r for r in lra_rows}
    out = []
    for method, model in names.items():
        for n in sizes:
            ref, base, mine = lra.get((model, n)), lra.get(("Transformer", n)), ours.get((method, n))
            out.append({
                t("efficiency.lra_method"): f"{t(f'efficiency.r_{method}')} ↔ {model}",
                "n": n,
                t("efficiency.lra_speed_paper"): None if ref is None else ref["speed_ratio"],
                t("efficiency.lra_speed_ours"): None if mine is None else round(mine["speed_ratio"], 2),
                t("efficiency.lra_mem_paper"): None if ref is None or base is None else
                round(ref["peak_memory_gb"] / base["peak_memory_gb"], 3),
                t("efficiency.lra_mem_ours"): None if mine is None or mine["memory_ratio"] is None else
                round(mine["memory_ratio"], 3),
            })
    return pd.DataFrame(out)


def live_table(frame: pd.DataFrame, doc: dict, methods: Sequence[str], n: int) -> pd.DataFrame:
    """The learner's speed-up against full at ``n`` beside the recorded one (None where not recorded)."""
    by = bench.by_method(doc)
    rows = []
    for method in methods:
        mine = frame[(frame["method"] == method) & (frame["n"] == n)]["speedup"].iloc[0]
        rec = by[("full", n)]["time_s"] / by[(method, n)]["time_s"] if {("full", n), (method, n)} <= by.keys() else None
        rows.append({t("efficiency.method"): t(f"efficiency.r_{method}"),
                     t("efficiency.live_yours"): round(float(mine), 2),
                     t("efficiency.live_recorded"): None if rec is None else round(float(rec), 2)})
    return pd.DataFrame(rows)


def precision_table(rows) -> pd.DataFrame:
    """``labs.efficiency.precision_table``'s rows as the page shows them."""
    return pd.DataFrame([{t("efficiency.tips_mp_c_recipe"): t(f"efficiency.tips_mp_r_{r.recipe}"),
                          t("efficiency.tips_mp_c_bytes"): r.bytes_per_number,
                          t("efficiency.tips_mp_c_eps"): f"{r.eps:.1e}",
                          t("efficiency.tips_mp_c_max"): f"{r.max_value:.3g}",
                          t("efficiency.tips_mp_c_werr"): f"{r.weight_error:.1e}",
                          t("efficiency.tips_mp_c_oerr"): f"{r.output_error:.1e}"} for r in rows])


# --- the sentences that quote the numbers on screen ("what to notice", pitfall demos) -------------------

def approx_notes(variant: str, knobs, view, labels: Sequence[str], d: int) -> list[str]:
    """What to notice about one variant's ``labs.efficiency.VariantView``; ``labels``: unique, Markdown-escaped."""
    n, err, tv, cost = len(labels), fmt.short(view.rel_error), fmt.pct(view.row_tv.mean(), 1), fmt.short(view.cost)
    items = []
    if variant in ("softmax", "flash"):
        items.append(t(f"efficiency.notice_{variant}", err=err, rep=fmt.short(view.reproduce), cost=cost))
    elif variant == "linear":
        items.append(t("efficiency.notice_linear", err=err, tv=tv, cost=cost, n=n, d=d))
    elif variant == "performer":
        items.append(t("efficiency.notice_performer", m=knobs.m, err=err, tv=tv, cost=cost, n=n))
    elif variant == "linformer":
        items.append(t(f"efficiency.notice_linformer_{knobs.proj}", k=knobs.k, n=n, err=err, tv=tv))
    else:
        mask = view.mask
        items.append(t("efficiency.notice_sparse", v=int(mask.sum()), total=n * n, share=fmt.pct(mask.mean(), 1),
                       err=err, tv=tv))
        dead = [x for x, row in zip(labels, mask) if not row.any()]
        if dead:
            items.append(t("efficiency.notice_dead", rows=", ".join(dead)))
    if variant not in ("softmax", "flash"):
        items.append(t("efficiency.notice_reproduce", rep=fmt.short(view.reproduce)))
        if view.cost > 1:
            items.append(t("efficiency.notice_costly", cost=cost, n=n))
    return items


def cost_notes(doc: dict, sizes: bench.QuotedSizes) -> list[str]:
    """What to notice in the recorded run, at the sizes ``bench.quoted_sizes`` found in it."""
    by, s = bench.by_method(doc), doc["slopes"]
    slope = {m: fmt_slope(s[m]["time_slope"]) for m in s}
    full, lin = by[("full", sizes.top)], by[("linear", sizes.top)]
    f8, fl8 = by[("full", sizes.memory)], by[("flash", sizes.memory)]
    return [
        t("efficiency.notice_slopes", full=slope["full"], lin=slope["linear"], perf=slope["performer"],
          lf=slope["linformer"], win=slope["window"]),
        t("efficiency.notice_speedup", n=sizes.top, full=f"{full['time_s']:.2f}", lin=f"{1e3 * lin['time_s']:.1f}",
          x=f"{full['time_s'] / lin['time_s']:.0f}"),
        t("efficiency.notice_flash_mem", n=sizes.memory, full=f"{mib(f8['peak_extra_bytes']):.0f}",
          flash=f"{mib(fl8['peak_extra_bytes']):.1f}", ratio=f"{f8['peak_extra_bytes'] / fl8['peak_extra_bytes']:.0f}",
          diff=f"{fl8['max_abs_diff_vs_exact']:.1e}", ft=f"{fl8['time_s']:.2f}", fft=f"{f8['time_s']:.2f}",
          fs=slope["flash"]),
        t("efficiency.notice_masked", n=sizes.masked, slope=slope["sparse_masked"],
          t4=f"{1e3 * by[('sparse_masked', sizes.masked)]['time_s']:.0f}",
          w4=f"{1e3 * by[('window', sizes.masked)]['time_s']:.0f}"),
    ]


def rnn_notes(view, i: int) -> list[str]:
    """What to notice after step ``i`` of ``labs.efficiency.RnnView``: the same outputs, a fixed-size state."""
    n, (d, dv) = len(view.y_rnn), view.S.shape[1:]
    future = float(np.abs(view.w[i - 1, i:]).max()) if i < n else 0.0
    return [
        t("efficiency.notice_rnn_equal", i=i, par=f"{float(np.abs(view.y_rnn[:i] - view.y_par[:i]).max()):.1e}",
          w=f"{float(np.abs(view.y_rnn[:i] - view.wv[:i]).max()):.1e}"),
        t("efficiency.notice_rnn_state", state=d * dv + d, i=i, cache=2 * i * d, per=2 * d,
          cross=(d * dv + d) // (2 * d) + 1),
        t("efficiency.notice_rnn_future", i=i, later=n - i, zero=f"{future:.1g}"),
    ]


def size(n_bytes: float) -> str:
    """Bytes as MiB from 1 MiB up, else KiB (what a checkpointed small encoder keeps is a few KiB)."""
    return f"{n_bytes / 2 ** 20:.2f} MiB" if n_bytes >= 2 ** 20 else f"{n_bytes / 2 ** 10:.1f} KiB"


def checkpoint_notes(r, layers: int) -> list[str]:
    """What to notice in a ``labs.efficiency.CheckpointReport``."""
    return [
        t("efficiency.tips_ck_notice_saved", plain=size(r.plain_bytes), events=r.plain_count, layers=layers,
          layer=size(r.layer_bytes), ckpt=size(r.ckpt_bytes), ck_events=r.ckpt_count,
          ratio=f"{r.plain_bytes / r.ckpt_bytes:.0f}"),
        t("efficiency.tips_ck_notice_peak", peak=size(r.ckpt_bytes + r.layer_bytes), plain=size(r.plain_bytes)),
        t("efficiency.tips_ck_notice_compute", a=r.plain_forwards, b=r.ckpt_forwards, diff=f"{r.grad_max_diff:.1e}"),
    ]


def precision_notes(rows, gain: float, top: float) -> list[str]:
    """What to notice in ``labs.efficiency.precision_table``'s rows; ``top`` = the largest |score|."""
    by = {r.recipe: r for r in rows}
    bf, f32 = by["bfloat16"].output_error, by["float32"].output_error
    return [
        t("efficiency.tips_mp_notice_bf16", bf=f"{bf:.1e}", f32=f"{f32:.1e}", x=f"{bf / max(f32, 1e-300):,.0f}"),
        t("efficiency.tips_mp_notice_mixed", mixed=f"{by['bf16_inputs'].output_error:.1e}", bf=f"{bf:.1e}"),
        t("efficiency.tips_mp_notice_gain", top=f"{top:.1f}", gain=f"{gain:g}", eps=f"{by['bfloat16'].eps:.1e}",
          f16=f"{by['float16'].output_error:.1e}"),
    ]


def underflow_note(u) -> str:
    return t("efficiency.tips_pit_now", g=f"{u.value:g}", f16=f"{u.float16:g}", bf16=f"{u.bfloat16:.3g}",
             scaled=f"{u.scaled:.3g}")


def code_text(error: str) -> str:
    """An error message quoted inside Markdown (backticks would open a code span)."""
    return error.replace("`", "'")


def second_tutorial_notes(n: int, block: int, chunks, example: Sequence[int], branch) -> list[str]:
    """The second tutorial's ``chunk(n // block)`` sizes (or its error) and its global branch (``GlobalBranch``)."""
    if isinstance(chunks, str):
        first = t("efficiency.pit2_now_error", n=n, block=block, err=code_text(chunks))
    else:
        first = t("efficiency.pit2_now", n=n, block=block, k=n // block, sizes=", ".join(map(str, chunks)))
    return [first,
            t("efficiency.pit2_example", sizes=", ".join(map(str, example)), k=len(example),
              wrong=sum(c != 32 for c in example)),
            t("efficiency.pit2_global", gq=branch.global_q, gw=branch.global_weights, gc=branch.global_context,
              lo=branch.local_output, err=code_text(branch.error or "—"), used=f"{branch.scale_used:.2f}",
              right=f"{branch.scale_right:.2f}")]


def flash_space_note(doc: dict, sizes: Sequence[int]) -> str:
    """Flash's peak extra memory against full's at ``sizes``, and its fitted slopes."""
    by, s = bench.by_method(doc), doc["slopes"]["flash"]
    rows = t("efficiency.pit3_sep").join(
        t("efficiency.pit3_row", n=n, a=f"{mib(by[('flash', n)]['peak_extra_bytes']):.1f}",
          b=f"{mib(by[('full', n)]['peak_extra_bytes']):,.0f}") for n in sizes)
    return t("efficiency.pit3_numbers", slope=fmt_slope(s["memory_slope"]), tslope=fmt_slope(s["time_slope"]),
             rows=rows)


def linear_mask_notes(r: seed_bugs.LinearMaskDemo) -> list[str]:
    """``seed_bugs.linear_mask_demo``: the tutorial's mask on linear attention, and its error at n != m."""
    out = [t("efficiency.pit_lin_now", n=r.n, theirs=f"{r.theirs_first:.3f}", ours=f"{r.ours_first:.1e}",
             all=f"{r.theirs_all:.3f}")]
    if r.cross_error:
        out.append(t("efficiency.pit_lin_cross", n=r.n, m=2 * r.n, err=code_text(r.cross_error)))
    return out


def block_mask_notes(r: dict, n: int, block: int) -> list[str]:
    """``seed_bugs.block_mask_demo``: the tutorial's block-local layer with a padding and a causal mask."""
    return [t("efficiency.pit_bm_ok", what=t(f"efficiency.pit_bm_{name}"), n=n, block=block) if r[name] is None else
            t("efficiency.pit_bm_now", what=t(f"efficiency.pit_bm_{name}"), n=n, block=block, err=code_text(r[name]))
            for name in ("padding", "causal")]


def token_span(labels: Sequence[str], start: int, end: int) -> str:
    return labels[start] if end - start == 1 else f"{labels[start]} … {labels[end - 1]}"


def flash_step_notes(view, step_no: int, total: int, block_q: int, block_k: int,
                     labels: Sequence[str]) -> tuple[str, list[str]]:
    """A ``labs.efficiency.FlashStepView`` in words: which tile (above the table), then what it changed.
    ``labels``: unique and Markdown-escaped."""
    step, tile = view.step, view.step.tile
    lab, qa = labels, tile.q_start // block_q + 1
    where = t("efficiency.step_skipped" if tile.skipped else "efficiency.step_now", i=step_no, total=total, a=qa,
              b=tile.k_start // block_k + 1, q0=tile.q_start, q1=tile.q_end - 1, k0=tile.k_start, k1=tile.k_end - 1,
              qs=token_span(lab, tile.q_start, tile.q_end), ks=token_span(lab, tile.k_start, tile.k_end))
    if tile.skipped:
        return where, []
    alpha = tile.rescale[0, 0].numpy()
    had_state = np.isfinite(step.m_old.numpy())              # rows that had seen a key before this tile
    after = [t("efficiency.step_partial", k1=tile.k_end - 1, diff=fmt.short(view.partial_vs_final))]
    if had_state.any():
        after.append(t("efficiency.step_rescaled", shrunk=int((had_state & (alpha < 1)).sum()),
                       rows=int(had_state.sum()), amin=fmt.short(float(alpha[had_state].min()))))
    else:
        after.append(t("efficiency.step_first", a=qa))
    return where, after


def flash_notes(run, n: int, memory, causal: bool) -> list[str]:
    """What to notice about a ``labs.efficiency.FlashRun``; ``memory``: ``flash_extra_floats``'s FlashMemory."""
    total = len(run.trace)
    items = [t("efficiency.notice_tile_memory", tile=memory.tile, acc=memory.acc, stats=memory.stats,
               full=memory.full_matrix, n=n),
             t("efficiency.notice_flash_exact", diff=f"{run.max_diff:.1e}", total=total)]
    if causal:
        items.append(t("efficiency.notice_skipped", skipped=sum(tl.skipped for tl in run.trace), total=total))
    return items


def flash_final(run, *, at_last_tile: bool) -> str:
    """A ``labs.efficiency.FlashRun``'s output against exact attention and torch's (a preview before the end)."""
    key = "efficiency.flash_final" if at_last_tile else "efficiency.flash_final_preview"
    return t(key, total=len(run.trace), diff=f"{run.max_diff:.2e}", torch=f"{run.max_diff_torch:.2e}")


def approx_metrics(view, n: int) -> list[tuple[str, str, str]]:
    """(label, value, help) of the four metrics above one variant's row chart."""
    last = ((t("efficiency.m_pairs"), f"{int(view.mask.sum())} / {n * n}", t("efficiency.m_pairs_help"))
            if view.mask is not None else
            (t("efficiency.m_reproduce"), fmt.short(view.reproduce), t("efficiency.m_reproduce_help")))
    return [(t("efficiency.m_error"), fmt.short(view.rel_error), t("efficiency.m_error_help")),
            (t("efficiency.m_tv"), fmt.pct(view.row_tv.mean(), 1), t("efficiency.m_tv_help")),
            (t("efficiency.m_cost"), f"{fmt.short(view.cost)}×", t("efficiency.m_cost_help")), last]


def metric_table(items: list[tuple[str, str, str]]) -> tuple[str, str]:
    """(label, value, help) items as one Markdown table (a header of labels, a row of values) and the help of
    every column for the table's tooltip: one element to re-send on a rerun instead of a block and a metric each
    (the redraw budget, docs/performance.md). A "|" in a label (max |W·V − output|) is escaped: it would end the cell.
    The tooltip's icon needs a paragraph after the table (Streamlit puts none after a table): a line that says what it
    holds."""
    cell = lambda text: str(text).replace("|", "\\|")        # noqa: E731
    head = "| " + " | ".join(cell(label) for label, _, _ in items) + " |"
    rule = "|" + " --- |" * len(items)
    row = "| " + " | ".join(f"**{cell(value)}**" for _, value, _ in items) + " |"
    helps = "\n\n".join(f"**{label}**: {text}" for label, _, text in items if text)
    table = "\n".join((head, rule, row))
    return (f"{table}\n\n{t('efficiency.m_help_line')}" if helps else table), helps


def checkpoint_metrics(r) -> list[tuple[str, str, None]]:
    """(label, value, help) of a ``labs.efficiency.CheckpointReport``."""
    return [(t("efficiency.tips_ck_m_plain"), size(r.plain_bytes), None),
            (t("efficiency.tips_ck_m_ckpt"), size(r.ckpt_bytes), None),
            (t("efficiency.tips_ck_m_forwards"), f"{r.plain_forwards} → {r.ckpt_forwards}", None),
            (t("efficiency.tips_ck_m_grad"), f"{r.grad_max_diff:.1e}", None)]


def first_tutorial_note(n: int, same: bool, nan) -> str:
    """The first tutorial's loop mask (equal to ours?) and its NaN patch (``NanPatch``) on this input."""
    return t("efficiency.pit1_now", n=n, same=t("efficiency.yes") if same else t("efficiency.no"),
             nan=nan.nan_patched, empty=nan.empty_rows)


def mask_timing_note(timing) -> str:
    """``labs.efficiency.time_mask_builders``' MaskTimes: the loop mask against the vectorised one."""
    return t("efficiency.pit1_timing", loops=f"{1e3 * timing.loops:.1f}", vec=f"{1e3 * timing.vectorised:.3f}",
             x=f"{timing.loops / timing.vectorised:.0f}")

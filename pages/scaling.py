"""Scaling and softmax saturation: why q.k is divided by sqrt(d_k), measured — and temperature,
the general knob of which that division is one setting (tau = sqrt(d_k))."""
from __future__ import annotations

import math

import numpy as np
import streamlit as st
import torch

from attention_core import scaling_lab as sl
from attention_core.diagnostics import softmax_jacobian_norm
from attention_core.functional import masked_softmax
from ui import anatomy
from ui import scaling_charts as sc
from ui.charts import heatmap, heatmap_frame, matrix_csv
from ui.controls import seed as seed_control
from ui.i18n import lesson, t, tl

NS = "scaling"
N_Q, N_K = 256, 16       # the sweep: 256 random queries, each over 16 keys
N_SHOW = 8               # queries drawn in the heatmap (the first 8 of the 256)
N_PAIRS = 2048           # independent (q, k) pairs per d_k for the histogram and the variance
D_MODEL, HEADS = 512, 8  # the "which d?" pitfall: the original Transformer's sizes
TAU_GRID = tuple(2.0 ** np.linspace(-6, 10, 97))   # holds every slider temperature
Q_LABELS = tuple(f"q{i + 1}" for i in range(N_SHOW))
K_LABELS = tuple(f"k{j + 1}" for j in range(N_K))


# ------------------------------------------------------------------ cached computations (plain params)
@st.cache_data(max_entries=8, show_spinner=False)
def variance_data(seed: int) -> dict:
    v = sl.variance_sweep(seed, sl.D_K_STEPS, N_PAIRS)
    return {"dots": v.dots.numpy(), "var_raw": v.var_raw.numpy(), "var_scaled": v.var_scaled.numpy()}


@st.cache_data(max_entries=8, show_spinner=False)
def sweep_scores(seed: int) -> np.ndarray:
    """Raw q.k of the same nested queries and keys at every d_k of the sweep: (n_d, N_Q, N_K)."""
    return sl.sweep_scores(seed, sl.SWEEP_D_K, N_Q, N_K).numpy()


@st.cache_data(max_entries=32, show_spinner=False)
def saturation_data(seed: int, tau: float) -> dict:
    sweep = sl.saturation_curves(torch.from_numpy(sweep_scores(seed)), sl.SWEEP_D_K, tau)
    return {mode: {name: getattr(stats, name).numpy() for name in stats._fields}
            for mode, stats in (("unscaled", sweep.unscaled), ("scaled", sweep.scaled))}


def scores_at(seed: int, d_k: int) -> torch.Tensor:
    return torch.from_numpy(sweep_scores(seed)[sl.SWEEP_D_K.index(d_k)])     # (N_Q, N_K)


# ------------------------------------------------------------------ charts: Altair once, then only new data
@st.cache_data(max_entries=256, show_spinner=False)
def _skeleton(kind: str, options: tuple, _build) -> str:
    return sc.skeleton(_build())     # runs only on a cache miss (new language / new option)


def draw(kind: str, builder, frame, key: str, on_select: str = "ignore", **options):
    """Build the chart with Altair once per (kind, options); later reruns only swap the data in."""
    skeleton = _skeleton(kind, tuple(sorted(options.items())), lambda: builder(frame, **options))
    return st.vega_lite_chart(sc.filled(skeleton, frame), width="stretch", key=key, on_select=on_select)


def _heatmap(weights, row: int, **titles):
    return heatmap(weights, list(Q_LABELS), list(K_LABELS), kind="weights", selected_row=row, **titles)


def draw_weights(weights: torch.Tensor, row: int, key: str, file_name: str) -> int | None:
    """The attention heatmap (ui.charts.heatmap) with its CSV; returns the clicked query row."""
    frame, _ = heatmap_frame(weights, Q_LABELS, K_LABELS)
    event = draw("heatmap", lambda _, **kw: _heatmap(weights, **kw), frame, key, on_select="rerun", row=row,
                 x_title=t("scaling.axis_key"), y_title=t("scaling.axis_query"),
                 value_title=t("scaling.axis_weight"))
    st.download_button(t("common.download_csv"), matrix_csv(weights, Q_LABELS, K_LABELS),
                       file_name=file_name, mime="text/csv", key=f"{key}_csv",
                       icon=":material/download:", type="tertiary")
    try:
        points = event.selection.get("row") or []
    except AttributeError:
        return None
    picked = [int(p["query_pos"]) for p in points if isinstance(p, dict) and "query_pos" in p]
    return picked[0] if picked else None


# ------------------------------------------------------------------ page
anatomy.header(NS)
anatomy.intuition(NS)
anatomy.formula(r"\operatorname{Attention}(Q,K,V)=\operatorname{softmax}\!\left(\frac{QK^\top}"
                r"{\sqrt{d_k}\;\tau}\right)V,\qquad \operatorname{Var}(q\cdot k)"
                r"=\sum_{i=1}^{d_k}\operatorname{Var}(q_i k_i)=d_k",
                t("scaling.formula_caption"))

c_dk, c_scale, c_tau, c_seed = st.columns([3, 1.4, 2.4, 1.2], vertical_alignment="center")
with c_dk:
    d_k = int(st.select_slider(t("scaling.ctl_dk"), options=list(sl.D_K_STEPS), value=64, key="dk",
                               bind="query-params", help=t("scaling.ctl_dk_help")))
with c_scale:
    scaled = bool(st.toggle(t("scaling.ctl_scale"), value=True, key="scale", bind="query-params",
                            help=t("scaling.ctl_scale_help")))
with c_tau:
    tau = float(st.select_slider(t("scaling.ctl_tau"), options=list(sl.TEMPERATURES), value=1.0,
                                 format_func=sc.fmt_tau, key="tau", bind="query-params",
                                 help=t("scaling.ctl_tau_help")))
with c_seed:
    seed = seed_control("seed")

modes = (t("scaling.mode_unscaled"), t("scaling.mode_scaled"))
mode_now = t("scaling.mode_now_scaled") if scaled else t("scaling.mode_now_unscaled")
tau_txt = sc.fmt_tau(tau)
root = math.sqrt(d_k)

# ------------------------------------------------------------------ 1. the scores grow with d_k
st.header(t("scaling.sec_variance"))
st.markdown(lesson("scaling/variance"))
var = variance_data(seed)
i_step = sl.D_K_STEPS.index(d_k)
var_raw, var_scaled = float(var["var_raw"][i_step]), float(var["var_scaled"][i_step])
left, right = st.columns(2)
with left:
    notes = (t("scaling.hist_note_raw", var=sc.fmt(var_raw), dk=d_k),
             t("scaling.hist_note_scaled", var=sc.fmt(var_scaled)))
    draw("hist", sc.histogram_chart, sc.histogram_frame(var["dots"][i_step], d_k, notes), "hist",
         panel_titles=(t("scaling.panel_raw"), t("scaling.panel_scaled")), x_title=t("scaling.hist_x"),
         y_title=t("scaling.hist_y"), count_title=t("scaling.hist_count"))
    st.caption(t("scaling.hist_caption", n=N_PAIRS, dk=d_k))
with right:
    series = (t("scaling.series_raw"), t("scaling.series_scaled"), t("scaling.series_theory_raw"),
              t("scaling.series_theory_scaled"))
    frame = sc.variance_frame(sl.D_K_STEPS, var["var_raw"], var["var_scaled"], d_k, series)
    draw("var", sc.variance_chart, frame, "var", title=t("scaling.var_title", n=N_PAIRS),
         x_title=t("scaling.var_x"), y_title=t("scaling.var_y"), legend_title=t("scaling.var_legend"))

# ------------------------------------------------------------------ 2. what big scores do to softmax
st.header(t("scaling.sec_softmax"))
st.markdown(lesson("scaling/softmax"))
scores = scores_at(seed, d_k)                                            # (N_Q, N_K) raw q.k
weights = masked_softmax(scores[:N_SHOW] * sl.score_scale(d_k, scaled, tau))   # (N_SHOW, N_K)
row = int(st.session_state.get("scaling_row", 0))
left, right = st.columns([1.3, 1])
with left:
    st.markdown(f"**{t('scaling.heat_title', mode=mode_now, dk=d_k, tau=tau_txt)}**")
    picked = draw_weights(weights, row, key="w", file_name=f"weights_dk{d_k}_tau{tau:g}.csv")
    if picked is not None and 0 <= picked < N_SHOW and picked != row:
        row = st.session_state["scaling_row"] = picked
    st.caption(t("scaling.heat_caption"))
with right:
    st.markdown(f"**{t('scaling.bars_title', q=Q_LABELS[row], mode=mode_now)}**")
    draw("row", sc.row_chart, sc.row_frame(weights[row].numpy(), K_LABELS), "bars",
         key_title=t("scaling.axis_key"), weight_title=t("scaling.axis_weight"))
strip = {}
for d in sl.STRIP_D_K:
    raw_row = scores_at(seed, d)[row]
    for flag in (False, True):
        strip[(d, flag)] = masked_softmax(raw_row * sl.score_scale(d, flag, tau)).numpy()
st.markdown(f"**{t('scaling.strip_title', q=Q_LABELS[row], tau=tau_txt)}**")
draw("strip", sc.strip_chart, sc.strip_frame(strip, K_LABELS, modes), "strip",
     column_title=t("scaling.strip_column"), key_title=t("scaling.axis_key"),
     weight_title=t("scaling.axis_weight"), mode_title=t("scaling.mode_title"))

# ------------------------------------------------------------------ 3. the gradient signal
st.header(t("scaling.sec_gradient"))
st.markdown(lesson("scaling/gradient"))
sat = saturation_data(seed, tau)
sweep = sc.sweep_frame(sl.SWEEP_D_K, sat["unscaled"], sat["scaled"], d_k, modes)
metrics = (("max_weight", "metric_max_weight", (1.0 / N_K * 0.9, 1.0)),
           ("entropy", "metric_entropy", None),
           ("jacobian_norm", "metric_jacobian", None))
for col, (metric, label, domain) in zip(st.columns(3), metrics):
    with col:
        draw("sweep", sc.sweep_chart, sweep, f"sweep_{metric}", metric=metric, title=t(f"scaling.{label}"),
             x_title="d_k", y_title=t(f"scaling.{label}"), mode_title=t("scaling.mode_title"),
             y_domain=domain)
st.caption(t("scaling.sweep_caption", n=N_Q, k=N_K, tau=tau_txt, dk=d_k))
if (sweep["value"] < sc.FLOOR).any():
    st.caption(t("scaling.floor_caption", floor=f"{sc.FLOOR:.0e}"))
i_sw = sl.SWEEP_D_K.index(d_k)
now = sat["scaled" if scaled else "unscaled"]
if now["jacobian_norm"][i_sw] < sc.FLOOR:
    anatomy.problem("scaling.warn_saturated", floor=f"{sc.FLOOR:.0e}")
if now["max_weight"][i_sw] < 1.25 / N_K:
    anatomy.problem("scaling.warn_flat", tau=tau_txt, mw=sc.fmt(now["max_weight"][i_sw]), k=N_K,
                    flat=sc.fmt(1 / N_K))

# ------------------------------------------------------------------ 4. temperature
st.header(t("scaling.sec_temperature"))
st.markdown(lesson("scaling/temperature"))
taus = torch.tensor(TAU_GRID, dtype=torch.float64)
curve_raw = sl.temperature_curve(scores[row], taus).numpy()
curve_scaled = sl.temperature_curve(scores[row] / root, taus).numpy()
left, right = st.columns([2, 1])
with left:
    st.markdown(f"**{t('scaling.tau_title', q=Q_LABELS[row], dk=d_k)}**")
    frame = sc.temperature_frame(TAU_GRID, curve_raw, curve_scaled, tau, modes)
    draw("temp", sc.temperature_chart, frame, "temp", n_keys=N_K, x_title=t("scaling.tau_x"),
         y_title=t("scaling.tau_y"), mode_title=t("scaling.mode_title"))
with right:
    st.caption(t("scaling.tau_caption", k=N_K, tau=tau_txt, sqrt=sc.fmt_short(root)))

# ------------------------------------------------------------------ what to notice
un, sd = sat["unscaled"], sat["scaled"]
jac_raw, jac_scaled = float(un["jacobian_norm"][i_sw]), float(sd["jacobian_norm"][i_sw])
if jac_raw < jac_scaled / 1.5:
    ratio = (sc.fmt_short(jac_scaled / jac_raw) if jac_raw >= sc.FLOOR
             else f"> {sc.fmt_short(jac_scaled / sc.FLOOR)}")
    gradient = t("scaling.notice_gradient_ratio", jac_raw=sc.fmt(jac_raw), jac_scaled=sc.fmt(jac_scaled),
                 dk=d_k, ratio=ratio, jac_first=sc.fmt(un["jacobian_norm"][0]),
                 jac_last=sc.fmt(un["jacobian_norm"][-1]), jac_min=sc.fmt(sd["jacobian_norm"].min()),
                 jac_max=sc.fmt(sd["jacobian_norm"].max()))
else:
    gradient = t("scaling.notice_gradient_same", dk=d_k, jac_raw=sc.fmt(jac_raw),
                 jac_scaled=sc.fmt(jac_scaled), jac_last=sc.fmt(un["jacobian_norm"][-1]),
                 jac_scaled_last=sc.fmt(sd["jacobian_norm"][-1]))
anatomy.notice([
    t("scaling.notice_variance", dk=d_k, var_raw=sc.fmt(var_raw), sqrt=sc.fmt_short(root),
      var_scaled=sc.fmt(var_scaled)),
    t("scaling.notice_saturation", n=N_Q, k=N_K, mw_raw=sc.fmt(un["max_weight"][i_sw]),
      ent_raw=sc.fmt(un["entropy"][i_sw]), mw_scaled=sc.fmt(sd["max_weight"][i_sw]),
      ent_scaled=sc.fmt(sd["entropy"][i_sw]), flat_mw=sc.fmt(1 / N_K), flat_ent=sc.fmt(math.log(N_K))),
    gradient,
    t("scaling.notice_temperature", q=Q_LABELS[row], mw_now=sc.fmt(weights[row].max()), mode=mode_now,
      tau=tau_txt, sqrt=sc.fmt_short(root)),
])

# ------------------------------------------------------------------ exercises
anatomy.exercise("ex_var", t("scaling.ex1_question"), tl("scaling.ex1_options"), 2,
                 t("scaling.ex1_explanation", measured=sc.fmt(var["var_raw"][sl.D_K_STEPS.index(256)])))
anatomy.exercise("ex_tau", t("scaling.ex2_question"), tl("scaling.ex2_options"), 1,
                 t("scaling.ex2_explanation"))


# ------------------------------------------------------------------ pitfall
def pitfall_demo() -> None:
    scale_raw, scale_scaled = sl.score_scale(d_k, False, tau), sl.score_scale(d_k, True, tau)
    st.markdown(t("scaling.pitfall_live", dk=d_k, tau=tau_txt, n=N_Q,
                  nan16_raw=sl.overflow_rows(scores, scale_raw, torch.float16),
                  nan32_raw=sl.overflow_rows(scores, scale_raw, torch.float32),
                  nan16_scaled=sl.overflow_rows(scores, scale_scaled, torch.float16),
                  nan32_scaled=sl.overflow_rows(scores, scale_scaled, torch.float32)))
    head = scores_at(seed, D_MODEL // HEADS)                             # one head: d_k = 64
    per_head = sl.saturation_stats(masked_softmax(head / math.sqrt(D_MODEL // HEADS)))
    per_model = sl.saturation_stats(masked_softmax(head / math.sqrt(D_MODEL)))
    st.markdown(t("scaling.pitfall_which_d", mw_dk=sc.fmt(per_head.max_weight),
                  mw_dmodel=sc.fmt(per_model.max_weight)))
    st.code(t("scaling.pitfall_code"), language="python")


anatomy.pitfall(t("scaling.pitfall_title"), t("scaling.pitfall_body"), demo=pitfall_demo)

anatomy.show_code(sl.sample_qk, sl.sweep_scores, sl.variance_sweep, sl.score_scale, masked_softmax,
                  sl.saturation_curves, sl.saturation_stats, softmax_jacobian_norm, sl.temperature_curve,
                  sl.naive_softmax, sl.overflow_rows)

"""Scaling and softmax saturation: why q.k is divided by sqrt(d_k), measured — and temperature,
the general knob of which that division is one setting (tau = sqrt(d_k))."""
from __future__ import annotations

import math

import numpy as np
import streamlit as st
import torch

from attention_core.diagnostics import softmax_jacobian_norm
from attention_core.functional import masked_softmax
from attention_core.labs import scaling as sl
from ui import anatomy
from ui import scaling_charts as sc
from ui.cache import MB, cache_data, shared_arrays
from ui.charts import heatmap, heatmap_frame, to_spec
from ui.controls import keep_row, kept_row
from ui.controls import seed as seed_control
from ui.i18n import current_lang, lesson, t, tl

NS = "scaling"
N_Q, N_K = 256, 16       # the sweep: 256 random queries, each over 16 keys
N_SHOW = 8               # queries drawn in the heatmap (the first 8 of the 256)
N_PAIRS = 2048           # independent (q, k) pairs per d_k for the histogram and the variance
D_MODEL, HEADS = 512, 8  # the "which d?" pitfall: the original Transformer's sizes
TAU_GRID = tuple(2.0 ** np.linspace(-6, 10, 97))   # holds every slider temperature
Q_LABELS = tuple(f"q{i + 1}" for i in range(N_SHOW))
K_LABELS = tuple(f"k{j + 1}" for j in range(N_K))


# ------------------------------------------------------------------ computations, cached on plain params
@cache_data(max_entries=8, max_bytes=8 * MB)
def sweep_scores(seed: int) -> np.ndarray:
    """Raw q.k of the same nested queries and keys at every d_k of the sweep: (n_d, N_Q, N_K)."""
    return sl.sweep_scores(seed, sl.SWEEP_D_K, N_Q, N_K).numpy()


@cache_data(max_entries=8, max_bytes=8 * MB)
def variance_data(seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """q.k of N_PAIRS independent pairs at every slider d_k, and their measured variances."""
    v = sl.variance_sweep(seed, sl.D_K_STEPS, N_PAIRS)
    return v.dots.numpy(), v.var_raw.numpy(), v.var_scaled.numpy()


@cache_data(max_entries=64, max_bytes=8 * MB)
def variance_view(seed: int, d_k: int, notes: tuple[str, str], series: tuple[str, ...]) -> dict:
    dots, var_raw, var_scaled = variance_data(seed)
    i = sl.D_K_STEPS.index(d_k)
    return {"var_raw": float(var_raw[i]), "var_scaled": float(var_scaled[i]),
            "var_256": float(var_raw[sl.D_K_STEPS.index(256)]),
            "hist": sc.histogram_frame(dots[i], d_k, (notes[0].format(var=sc.fmt(var_raw[i])),
                                                      notes[1].format(var=sc.fmt(var_scaled[i])))),
            "var": sc.variance_frame(sl.D_K_STEPS, var_raw, var_scaled, d_k, series)}


@cache_data(max_entries=128, max_bytes=8 * MB)
def softmax_view(seed: int, d_k: int, tau: float, scaled: bool, row: int, modes: tuple[str, str]) -> dict:
    """The heatmap, the clicked row, the same row as d_k grows, and its temperature curve."""
    all_scores = torch.from_numpy(sweep_scores(seed))                  # (n_d, N_Q, N_K)
    scores = all_scores[sl.SWEEP_D_K.index(d_k)]                       # (N_Q, N_K) raw q.k
    weights = masked_softmax(scores[:N_SHOW] * sl.score_scale(d_k, scaled, tau))   # (N_SHOW, N_K)
    strip_rows = all_scores[[sl.SWEEP_D_K.index(d) for d in sl.STRIP_D_K], row]    # (6, N_K)
    strip_scale = torch.tensor([[sl.score_scale(d, flag, tau) for d in sl.STRIP_D_K]
                                for flag in (False, True)], dtype=scores.dtype)  # (2, 6)
    strip = masked_softmax(strip_rows * strip_scale[..., None])                  # (2, 6, N_K)
    raw_row = scores[row]
    curves = sl.temperature_curve(torch.stack([raw_row, raw_row / math.sqrt(d_k)]),
                                  torch.tensor(TAU_GRID, dtype=scores.dtype))   # (2, len(TAU_GRID))
    w = weights.numpy()
    return {"weights": w, "heat": heatmap_frame(w, Q_LABELS, K_LABELS)[0],
            "row": sc.row_frame(w[row], K_LABELS), "mw_now": float(w[row].max()),
            "strip": sc.strip_frame(strip.numpy(), sl.STRIP_D_K, K_LABELS, modes),
            "temp": sc.temperature_frame(TAU_GRID, curves.numpy(), tau, modes)}


@cache_data(max_entries=128, max_bytes=8 * MB)
def gradient_view(seed: int, d_k: int, tau: float, modes: tuple[str, str]) -> dict:
    sweep = sl.saturation_curves(torch.from_numpy(sweep_scores(seed)), sl.SWEEP_D_K, tau)
    stats = {mode: {name: getattr(s, name).numpy() for name in s._fields}
             for mode, s in (("unscaled", sweep.unscaled), ("scaled", sweep.scaled))}
    return {**stats, "frame": sc.sweep_frame(sl.SWEEP_D_K, stats["unscaled"], stats["scaled"], d_k, modes)}


@cache_data(max_entries=128, max_bytes=1 * MB)
def overflow_counts(seed: int, d_k: int, tau: float) -> dict:
    """Rows the naive exp(s)/sum exp(s) turns into NaN, in float16 and float32, without / with scaling."""
    scores = torch.from_numpy(sweep_scores(seed)[sl.SWEEP_D_K.index(d_k)])
    return {f"nan{bits}_{name}": sl.overflow_rows(scores, sl.score_scale(d_k, flag, tau), dtype)
            for bits, dtype in ((16, torch.float16), (32, torch.float32))
            for name, flag in (("raw", False), ("scaled", True))}


@cache_data(max_entries=8, max_bytes=1 * MB)
def which_d(seed: int) -> tuple[float, float]:
    """A typical query's max weight in one head (d_k = 64) scaled by 1/sqrt(d_k) vs 1/sqrt(d_model)."""
    head = torch.from_numpy(sweep_scores(seed)[sl.SWEEP_D_K.index(D_MODEL // HEADS)])
    per_head = sl.saturation_stats(masked_softmax(head / math.sqrt(D_MODEL // HEADS)))
    per_model = sl.saturation_stats(masked_softmax(head / math.sqrt(D_MODEL)))
    return float(per_head.max_weight), float(per_model.max_weight)


# ------------------------------------------------------------------ charts: Altair once, then only new data
@shared_arrays(max_entries=128, max_bytes=4 * MB)
def skeleton(cache_id: tuple, _build) -> dict:
    return to_spec(_build())     # runs only on a cache miss (new language / new option)


def spec(name: str, builder, frame, **options) -> dict:
    """The spec of ``builder(frame, **options)`` with this rerun's ``frame`` as its data. The charts here
    keep every data-dependent thing in the frame, so the spec is built once per (language, options)."""
    built = skeleton((name, current_lang(), *sorted(options.items())), lambda: builder(frame, **options))
    return {**built, "datasets": {"data": frame}}


def weights_heatmap(frame, **options):
    """ui.charts.heatmap of the frame's weights (its spec does not depend on them: the size is fixed)."""
    weights = frame["value"].to_numpy().reshape(N_SHOW, N_K)
    return heatmap(weights, list(Q_LABELS), list(K_LABELS), kind="weights", **options).properties(
        autosize=sc.FIT_X)


# ------------------------------------------------------------------ page
anatomy.header(NS)
anatomy.intuition(NS)
anatomy.formula(r"\operatorname{Attention}(Q,K,V)=\operatorname{softmax}\!\left(\frac{QK^\top}"
                r"{\sqrt{d_k}\;\tau}\right)V,\qquad \operatorname{Var}(q\cdot k)"
                r"=\sum_{i=1}^{d_k}\operatorname{Var}(q_i k_i)=d_k",
                t("scaling.formula_caption"))

c_dk, c_scale, c_tau, c_seed = st.columns([3, 1.9, 2.4, 1.2], vertical_alignment="center")
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
root = sc.fmt_short(math.sqrt(d_k))

# ------------------------------------------------------------------ 1. the scores grow with d_k
st.header(t("scaling.sec_variance"))
st.markdown(lesson("scaling/variance"))
var = variance_view(seed, d_k, (t("scaling.hist_note_raw", var="{var}", dk=d_k),
                                t("scaling.hist_note_scaled", var="{var}")),
                    (t("scaling.series_raw"), t("scaling.series_scaled"), t("scaling.series_theory_raw"),
                     t("scaling.series_theory_scaled")))
left, right = st.columns(2)
with left:
    anatomy.show_chart(spec("hist", sc.histogram_chart, var["hist"],
                            panel_titles=(t("scaling.panel_raw"), t("scaling.panel_scaled")),
                            x_title=t("scaling.hist_x"), y_title=t("scaling.hist_y"),
                            count_title=t("scaling.hist_count")), key="hist")
    st.caption(t("scaling.hist_caption", n=N_PAIRS, dk=d_k))
with right:
    anatomy.show_chart(spec("var", sc.variance_chart, var["var"], title=t("scaling.var_title"),
                            x_title=t("scaling.var_x"), y_title=t("scaling.var_y"),
                            legend_title=t("scaling.var_legend")), key="var")
    st.caption(t("scaling.var_caption", n=N_PAIRS))

# ------------------------------------------------------------------ 2. what big scores do to softmax
st.header(t("scaling.sec_softmax"))
st.markdown(lesson("scaling/softmax"))
row = kept_row("row", N_SHOW) or 0
left, right = st.columns([1.7, 1])
with left:
    st.markdown(f"**{t('scaling.heat_title', mode=mode_now, dk=d_k, tau=tau_txt)}**")
    view = softmax_view(seed, d_k, tau, scaled, row, modes)
    picked = anatomy.show_matrix(
        spec("heatmap", weights_heatmap, view["heat"],
             selected_row=row, x_title=t("scaling.axis_key"), y_title=t("scaling.axis_query"),
             value_title=t("scaling.axis_weight")),
        view["weights"], Q_LABELS, K_LABELS, key="w", file_name=f"weights_dk{d_k}_tau{tau:g}.csv")
    if picked is not None and 0 <= picked < N_SHOW and picked != row:
        row = keep_row("row", picked, N_SHOW, row)
    st.caption(t("scaling.heat_caption"))
soft = softmax_view(seed, d_k, tau, scaled, row, modes)
with right:
    st.markdown(f"**{t('scaling.bars_title', q=Q_LABELS[row], mode=mode_now)}**")
    anatomy.show_chart(spec("row", sc.row_chart, soft["row"], key_title=t("scaling.axis_key"),
                            weight_title=t("scaling.axis_weight")), key="bars")
st.markdown(f"**{t('scaling.strip_title', q=Q_LABELS[row], tau=tau_txt)}**")
anatomy.show_chart(spec("strip", sc.strip_chart, soft["strip"], column_title=t("scaling.strip_column"),
                        key_title=t("scaling.axis_key"), weight_title=t("scaling.axis_weight"),
                        mode_title=t("scaling.mode_title")), key="strip")

# ------------------------------------------------------------------ 3. the gradient signal
st.header(t("scaling.sec_gradient"))
st.markdown(lesson("scaling/gradient"))
grad = gradient_view(seed, d_k, tau, modes)
metrics = (("max_weight", "metric_max_weight", (1.0 / N_K * 0.9, 1.0)),
           ("entropy", "metric_entropy", None),
           ("jacobian_norm", "metric_jacobian", None))
for col, (metric, label, domain) in zip(st.columns(3), metrics):
    with col:
        anatomy.show_chart(spec("sweep", sc.sweep_chart, grad["frame"], metric=metric,
                                title=t(f"scaling.{label}"), x_title="d_k", y_title=t(f"scaling.{label}"),
                                mode_title=t("scaling.mode_title"), y_domain=domain), key=f"sweep_{metric}")
st.caption(t("scaling.sweep_caption", n=N_Q, k=N_K, tau=tau_txt, dk=d_k))
if (grad["frame"]["value"] < sc.FLOOR).any():
    st.caption(t("scaling.floor_caption", floor=f"{sc.FLOOR:.0e}"))
i = sl.SWEEP_D_K.index(d_k)
un, sd = grad["unscaled"], grad["scaled"]
now = sd if scaled else un
if now["jacobian_norm"][i] < sc.FLOOR:
    anatomy.problem("scaling.warn_saturated", floor=f"{sc.FLOOR:.0e}")
if now["max_weight"][i] < 1.25 / N_K:
    anatomy.problem("scaling.warn_flat", tau=tau_txt, mw=sc.fmt(now["max_weight"][i]), k=N_K,
                    flat=sc.fmt(1 / N_K))

# ------------------------------------------------------------------ 4. temperature
st.header(t("scaling.sec_temperature"))
st.markdown(lesson("scaling/temperature"))
left, right = st.columns([2, 1])
with left:
    st.markdown(f"**{t('scaling.tau_title', q=Q_LABELS[row], dk=d_k)}**")
    anatomy.show_chart(spec("temp", sc.temperature_chart, soft["temp"], n_keys=N_K, x_title=t("scaling.tau_x"),
                            y_title=t("scaling.tau_y"), mode_title=t("scaling.mode_title")), key="temp")
with right:
    st.caption(t("scaling.tau_caption", k=N_K, tau=tau_txt, sqrt=root))

# ------------------------------------------------------------------ what to notice
jac_raw, jac_scaled = float(un["jacobian_norm"][i]), float(sd["jacobian_norm"][i])
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
    t("scaling.notice_variance", dk=d_k, var_raw=sc.fmt(var["var_raw"]), sqrt=root,
      var_scaled=sc.fmt(var["var_scaled"])),
    t("scaling.notice_saturation", n=N_Q, k=N_K, mw_raw=sc.fmt(un["max_weight"][i]),
      ent_raw=sc.fmt(un["entropy"][i]), mw_scaled=sc.fmt(sd["max_weight"][i]),
      ent_scaled=sc.fmt(sd["entropy"][i]), flat_mw=sc.fmt(1 / N_K), flat_ent=sc.fmt(math.log(N_K))),
    gradient,
    t("scaling.notice_temperature", q=Q_LABELS[row], mw_now=sc.fmt(soft["mw_now"]), mode=mode_now,
      tau=tau_txt, sqrt=root),
])

# ------------------------------------------------------------------ exercises
anatomy.exercise("ex_var", t("scaling.ex1_question"), tl("scaling.ex1_options"), 2,
                 t("scaling.ex1_explanation", measured=sc.fmt(var["var_256"])))
anatomy.exercise("ex_tau", t("scaling.ex2_question"), tl("scaling.ex2_options"), 1,
                 t("scaling.ex2_explanation"))


# ------------------------------------------------------------------ pitfall
def pitfall_demo() -> None:
    st.markdown(t("scaling.pitfall_live", dk=d_k, tau=tau_txt, n=N_Q, **overflow_counts(seed, d_k, tau)))
    mw_dk, mw_dmodel = which_d(seed)
    st.markdown(t("scaling.pitfall_which_d", mw_dk=sc.fmt(mw_dk), mw_dmodel=sc.fmt(mw_dmodel)))
    st.code(t("scaling.pitfall_code"), language="python")


anatomy.pitfall(t("scaling.pitfall_title"), t("scaling.pitfall_body"), demo=pitfall_demo)

anatomy.show_code(sl.sample_qk, sl.sweep_scores, sl.variance_sweep, sl.score_scale, masked_softmax,
                  sl.saturation_curves, sl.saturation_stats, softmax_jacobian_norm, sl.temperature_curve,
                  sl.naive_softmax, sl.overflow_rows)

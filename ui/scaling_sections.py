"""The scaling page's sections: the settings and their controls, the computations cached on plain parameters, the
slots the seeded fragment fills (``Slots``), and each section's fixed text and seeded evidence (the variance of q.k,
softmax of growing scores, the gradient signal, temperature) with the pitfall's demo."""
from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
import streamlit as st
import torch
from streamlit.delta_generator import DeltaGenerator

from attention_core.labs import scaling as sl
from serving.cache import MB, cache_data
from ui import anatomy, controls
from ui import format as fmt
from ui import scaling_charts as sc
from ui.charts import attention_heatmap
from ui.i18n import lesson, t, tl

N_Q, N_K = 256, 16       # the sweep: 256 random queries, each over 16 keys
N_SHOW = 8               # queries drawn in the heatmap (the first 8 of the 256)
N_PAIRS = 1024           # independent (q, k) pairs per d_k for the histogram and the variance
D_MODEL, HEADS = 512, 8  # the "which d?" pitfall: the original Transformer's sizes
SWEEP_SEED = 0           # the gradient sweep's one fixed sample: a median over N_Q queries hardly moves with the
                         # sample, so the seed does not redraw its three charts (said in its caption; the redraw budget)
TAU_GRID = tuple(2.0 ** np.linspace(-6, 10, 97))   # holds every slider temperature
Q_LABELS = tuple(f"q{i + 1}" for i in range(N_SHOW))
K_LABELS = tuple(f"k{j + 1}" for j in range(N_K))

class Settings(NamedTuple):
    d_k: int
    scaled: bool
    tau: float
    seed: int

    @property
    def tau_text(self) -> str:
        return sc.fmt_tau(self.tau)

    @property
    def mode_now(self) -> str:
        return t("scaling.mode_now_scaled") if self.scaled else t("scaling.mode_now_unscaled")


# ------------------------------------------------------------------ computations, cached on plain params
@cache_data(max_entries=8, max_bytes=8 * MB)
def sweep_scores(seed: int) -> torch.Tensor:
    """Raw q.k of the same nested queries and keys at every d_k of the sweep: (n_d, N_Q, N_K)."""
    return sl.sweep_scores(seed, sl.SWEEP_D_K, N_Q, N_K)


@cache_data(max_entries=8, max_bytes=8 * MB)
def variance_sweep(seed: int) -> sl.VarianceSweep:
    """q.k of N_PAIRS independent pairs at every slider d_k, and their measured variances."""
    return sl.variance_sweep(seed, sl.D_K_STEPS, N_PAIRS)


@cache_data(max_entries=128, max_bytes=8 * MB)
def softmax_view(seed: int, d_k: int, tau: float, scaled: bool, row: int) -> sl.SoftmaxView:
    return sl.softmax_view(sweep_scores(seed), d_k, tau, scaled, row, N_SHOW, torch.tensor(TAU_GRID))


@cache_data(max_entries=128, max_bytes=8 * MB)
def saturation(seed: int, tau: float) -> sl.SaturationSweep:
    return sl.saturation_curves(sweep_scores(seed), sl.SWEEP_D_K, tau)


@cache_data(max_entries=128, max_bytes=1 * MB)
def overflow_counts(seed: int, d_k: int, tau: float) -> sl.OverflowCounts:
    return sl.overflow_counts(sweep_scores(seed)[sl.SWEEP_D_K.index(d_k)], d_k, tau)


@cache_data(max_entries=8, max_bytes=1 * MB)
def which_d(seed: int) -> tuple[float, float]:
    """A typical query's max weight in one head (d_k = 64) scaled by 1/sqrt(d_k) vs 1/sqrt(d_model)."""
    head = sweep_scores(seed)[sl.SWEEP_D_K.index(D_MODEL // HEADS)]
    return (sl.typical_max_weight(head, 1 / math.sqrt(D_MODEL // HEADS)),
            sl.typical_max_weight(head, 1 / math.sqrt(D_MODEL)))


def mode_labels() -> tuple[str, str]:
    return t("scaling.mode_unscaled"), t("scaling.mode_scaled")


# ------------------------------------------------------------------ the controls
def read_settings() -> tuple[int, bool, float]:
    """d_k, scaled or not, temperature: one row (the seed sits under it, in the fragment it redraws)."""
    c_dk, c_scale, c_tau = st.columns([3, 1.9, 2.4], vertical_alignment="center")
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
    return d_k, scaled, tau


def seed_control() -> int:
    """The seed of every sample on the page (a narrow box: it needs 4 digits)."""
    return controls.seed(width=160)


# ------------------------------------------------------------------ where the seeded parts go
class Slots(NamedTuple):
    """Containers the controls fragment leaves between the page's fixed text (headings, lessons, the temperature
    question, the pitfall, captions that do not depend on the seed); the seeded fragment fills them. A fragment may
    write into containers made outside it, widgets included, and its writes are replaced in place on each of its
    reruns (Streamlit >= 1.67): a seed press re-sends only these, not the text around them (the redraw budget)."""
    ex_var: DeltaGenerator | None     # the exercise's explanation, once revealed (it quotes the measured variance)
    hist: DeltaGenerator
    var: DeltaGenerator
    var_notice: DeltaGenerator
    heat: DeltaGenerator
    bars: DeltaGenerator              # the clicked row's bars, and under them the same row as d_k grows (the strip)
    temperature: DeltaGenerator
    temperature_notice: DeltaGenerator
    pitfall_demo: DeltaGenerator | None


# ------------------------------------------------------------------ 1. the scores grow with d_k
def variance_evidence_text(d_k: int) -> tuple[DeltaGenerator, DeltaGenerator, DeltaGenerator]:
    st.markdown(lesson("scaling/variance"))
    left, right = st.columns(2)
    with left:
        hist = st.container()
        st.caption(t("scaling.hist_caption", n=N_PAIRS, dk=d_k))
    with right:
        var = st.container()
        st.caption(t("scaling.var_caption", n=N_PAIRS))
    anatomy.notice_heading()
    return hist, var, st.container()


def variance_question() -> DeltaGenerator | None:
    """The section opens with its question (drawn with the fixed text: a seed press does not re-send it); the
    derivation, histogram and variance curve answer it below. Returns the slot of its explanation once revealed."""
    st.header(t("scaling.sec_variance"))
    return anatomy.exercise("ex_var", t("scaling.ex1_question"), tl("scaling.ex1_options"), 2, None)


def variance_explanation(var: sl.VarianceSweep, slots: Slots) -> None:
    """The revealed explanation quotes this seed's measured variance at d_k = 256."""
    if slots.ex_var is not None:
        with slots.ex_var:
            st.markdown(t("scaling.ex1_explanation", measured=fmt.sig(var.var_raw[sl.D_K_STEPS.index(256)])))


def variance_evidence(cfg: Settings, var: sl.VarianceSweep, slots: Slots) -> None:
    i = sl.D_K_STEPS.index(cfg.d_k)
    notes = (t("scaling.hist_note_raw", var=fmt.sig(var.var_raw[i]), dk=cfg.d_k),
             t("scaling.hist_note_scaled", var=fmt.sig(var.var_scaled[i])))
    series = (t("scaling.series_raw"), t("scaling.series_scaled"), t("scaling.series_theory_raw"),
              t("scaling.series_theory_scaled"))
    with slots.hist:
        anatomy.show_chart(sc.histogram_chart(sc.histogram_frame(var.dots[i].numpy(), cfg.d_k, notes),
                                              panel_titles=(t("scaling.panel_raw"), t("scaling.panel_scaled")),
                                              x_title=t("scaling.hist_x"), y_title=t("scaling.hist_y"),
                                              count_title=t("scaling.hist_count")), key="hist",
                           width="content")      # two stacked 240 px panels (stretched, they overflowed a phone)
    with slots.var:
        frame = sc.variance_frame(sl.D_K_STEPS, var.var_raw.numpy(), var.var_scaled.numpy(), cfg.d_k, series)
        anatomy.show_chart(sc.variance_chart(frame, series=series, title=t("scaling.var_title"),
                                             x_title=t("scaling.var_x"), y_title=t("scaling.var_y"),
                                             legend_title=t("scaling.var_legend")), key="var")
    with slots.var_notice:
        anatomy.notice_items([t("scaling.notice_variance", dk=cfg.d_k, var_raw=fmt.sig(var.var_raw[i]),
                                  sqrt=sc.fmt_short(math.sqrt(cfg.d_k)), var_scaled=fmt.sig(var.var_scaled[i]))])


# ------------------------------------------------------------------ 2. what big scores do to softmax
def softmax_text(d_k: int, scaled: bool, tau: float) -> tuple[DeltaGenerator, DeltaGenerator]:
    """The section's fixed text (the heatmap's title follows d_k, scaling and tau, not the seed); returns the
    slots of the heatmap and of the clicked row (its bars, then the strip under them)."""
    st.markdown(f"## {t('scaling.sec_softmax')}\n\n{lesson('scaling/softmax')}")     # one element, not two
    mode = t("scaling.mode_now_scaled") if scaled else t("scaling.mode_now_unscaled")
    left, right = st.columns([1.7, 1])
    with left:
        st.markdown(f"**{t('scaling.heat_title', mode=mode, dk=d_k, tau=sc.fmt_tau(tau))}**")
        heat = st.container()
        st.caption(t("scaling.heat_caption"))
    with right:
        bars = st.container()
    return heat, bars


def softmax_section(cfg: Settings, slots: Slots) -> tuple[int, sl.SoftmaxView]:
    """The heatmap of the first queries; the clicked row as bars and as d_k grows. Returns (row, view)."""
    row = controls.kept_row("row", N_SHOW) or 0
    with slots.heat:
        weights = softmax_view(cfg.seed, cfg.d_k, cfg.tau, cfg.scaled, row).weights.numpy()
        picked = anatomy.show_matrix(
            attention_heatmap(weights, Q_LABELS, K_LABELS, selected_row=row, x_title=t("scaling.axis_key"),
                              y_title=t("scaling.axis_query"), value_title=t("scaling.axis_weight")),
            weights, Q_LABELS, K_LABELS, key="w", file_name=f"weights_dk{cfg.d_k}_tau{cfg.tau:g}.csv")
        if picked is not None and 0 <= picked < N_SHOW and picked != row:
            row = controls.keep_row("row", picked, N_SHOW, row)
    view = softmax_view(cfg.seed, cfg.d_k, cfg.tau, cfg.scaled, row)
    with slots.bars:
        st.markdown(f"**{t('scaling.bars_title', q=Q_LABELS[row], mode=cfg.mode_now)}**")
        anatomy.show_chart(sc.row_chart(sc.row_frame(view.weights[row].numpy(), K_LABELS), keys=K_LABELS,
                                        key_title=t("scaling.axis_key"), weight_title=t("scaling.axis_weight")),
                           key="bars")
        st.markdown(f"**{t('scaling.strip_title', q=Q_LABELS[row], tau=cfg.tau_text)}**")
        short = (t("scaling.mode_short_unscaled"), t("scaling.mode_short_scaled"))     # column titles of 112 px
        strip = sc.strip_frame(view.strip.numpy(), sl.STRIP_D_K, K_LABELS, short)
        anatomy.show_chart(sc.strip_chart(strip, modes=short, keys=K_LABELS,
                                          column_title=t("scaling.strip_column"), key_title=t("scaling.axis_key"),
                                          weight_title=t("scaling.axis_weight"), mode_title=t("scaling.mode_title")),
                           key="strip")
    return row, view


# ------------------------------------------------------------------ 3. the gradient signal
METRICS = (("max_weight", "metric_max_weight", (1.0 / N_K * 0.9, 1.0)),
           ("entropy", "metric_entropy", None),
           ("jacobian_norm", "metric_jacobian", None))


def gradient_section(d_k: int, scaled: bool, tau: float) -> None:
    """Max weight, entropy and gradient signal of a typical query against d_k: medians over N_Q queries of one
    fixed sample (``SWEEP_SEED``), so the section follows d_k, scaling and tau but not the seed."""
    cfg = Settings(d_k, scaled, tau, SWEEP_SEED)
    st.markdown(f"## {t('scaling.sec_gradient')}\n\n{lesson('scaling/gradient')}")
    sweep = saturation(cfg.seed, cfg.tau)
    frame = sc.sweep_frame(sl.SWEEP_D_K, sweep.unscaled, sweep.scaled, cfg.d_k, mode_labels())
    for col, (metric, label, domain) in zip(st.columns(3), METRICS):
        with col:
            mine = frame[frame["metric"] == metric].reset_index(drop=True)     # each chart ships its own rows
            anatomy.show_chart(sc.sweep_chart(mine, metric=metric, modes=mode_labels(),
                                              title=t(f"scaling.{label}"), x_title="d_k",
                                              y_title=t(f"scaling.{label}"), mode_title=t("scaling.mode_title"),
                                              y_domain=domain), key=f"sweep_{metric}")
    st.caption(t("scaling.sweep_caption", n=N_Q, k=N_K, tau=sc.fmt_tau(tau), dk=d_k))
    gradient_notes(cfg, sweep, frame)


def gradient_notes(cfg: Settings, sweep: sl.SaturationSweep, frame) -> None:
    """Under the caption: the floor note and the warnings when they apply, then the notice."""
    if (frame["value"] < sc.FLOOR).any():
        st.caption(t("scaling.floor_caption", floor=f"{sc.FLOOR:.0e}"))
    i = sl.SWEEP_D_K.index(cfg.d_k)
    now = sweep.scaled if cfg.scaled else sweep.unscaled
    if now.jacobian_norm[i] < sc.FLOOR:
        anatomy.problem("scaling.warn_saturated", floor=f"{sc.FLOOR:.0e}")
    if now.max_weight[i] < 1.25 / N_K:
        anatomy.problem("scaling.warn_flat", tau=cfg.tau_text, mw=fmt.sig(now.max_weight[i]), k=N_K,
                        flat=fmt.sig(1 / N_K))
    un, sd = sweep.unscaled, sweep.scaled
    anatomy.notice([
        t("scaling.notice_saturation", n=N_Q, k=N_K, mw_raw=fmt.sig(un.max_weight[i]),
          ent_raw=fmt.sig(un.entropy[i]), mw_scaled=fmt.sig(sd.max_weight[i]),
          ent_scaled=fmt.sig(sd.entropy[i]), flat_mw=fmt.sig(1 / N_K), flat_ent=fmt.sig(math.log(N_K))),
        gradient_notice(cfg, un, sd),
    ])


def gradient_notice(cfg: Settings, un: sl.SaturationStats, sd: sl.SaturationStats) -> str:
    i = sl.SWEEP_D_K.index(cfg.d_k)
    jac_raw, jac_scaled = float(un.jacobian_norm[i]), float(sd.jacobian_norm[i])
    if jac_raw < jac_scaled / 1.5:
        ratio = (sc.fmt_short(jac_scaled / jac_raw) if jac_raw >= sc.FLOOR
                 else f"> {sc.fmt_short(jac_scaled / sc.FLOOR)}")
        return t("scaling.notice_gradient_ratio", jac_raw=fmt.sig(jac_raw), jac_scaled=fmt.sig(jac_scaled),
                 dk=cfg.d_k, ratio=ratio, jac_first=fmt.sig(un.jacobian_norm[0]),
                 jac_last=fmt.sig(un.jacobian_norm[-1]), jac_min=fmt.sig(sd.jacobian_norm.min()),
                 jac_max=fmt.sig(sd.jacobian_norm.max()))
    return t("scaling.notice_gradient_same", dk=cfg.d_k, jac_raw=fmt.sig(jac_raw), jac_scaled=fmt.sig(jac_scaled),
             jac_last=fmt.sig(un.jacobian_norm[-1]), jac_scaled_last=fmt.sig(sd.jacobian_norm[-1]))


# ------------------------------------------------------------------ 4. temperature
def temperature_question() -> None:
    st.header(t("scaling.sec_temperature"))
    anatomy.exercise("ex_tau", t("scaling.ex2_question"), tl("scaling.ex2_options"), 1,
                     t("scaling.ex2_explanation"))


def temperature_text(d_k: int, tau: float) -> tuple[DeltaGenerator, DeltaGenerator]:
    """The lesson, the caption under the chart and the notice's heading; returns the slots of the chart (under
    its title, which names the clicked query) and of the notice's list."""
    st.markdown(lesson("scaling/temperature"))
    chart = st.container()
    st.caption(t("scaling.tau_caption", k=N_K, tau=sc.fmt_tau(tau), sqrt=sc.fmt_short(math.sqrt(d_k))))
    anatomy.notice_heading()
    return chart, st.container()


def temperature_evidence(cfg: Settings, row: int, view: sl.SoftmaxView, slots: Slots) -> None:
    # the chart's title names the clicked query: a markdown line in the seeded fragment, the chart under it
    with slots.temperature:
        st.markdown(f"**{t('scaling.tau_title', q=Q_LABELS[row], dk=cfg.d_k)}**")
        frame = sc.temperature_frame(TAU_GRID, view.curves.numpy(), cfg.tau, mode_labels())
        anatomy.show_chart(sc.temperature_chart(frame, n_keys=N_K, modes=mode_labels(), x_title=t("scaling.tau_x"),
                                                y_title=t("scaling.tau_y"), mode_title=t("scaling.mode_title")),
                           key="temp")
    with slots.temperature_notice:
        anatomy.notice_items([t("scaling.notice_temperature", q=Q_LABELS[row],
                                mw_now=fmt.sig(view.weights[row].max()), mode=cfg.mode_now, tau=cfg.tau_text,
                                sqrt=sc.fmt_short(math.sqrt(cfg.d_k)))])


# ------------------------------------------------------------------ pitfall
def pitfall_demo(cfg: Settings) -> None:
    counts = overflow_counts(cfg.seed, cfg.d_k, cfg.tau)
    st.markdown(t("scaling.pitfall_live", dk=cfg.d_k, tau=cfg.tau_text, n=N_Q, **counts._asdict()))
    mw_dk, mw_dmodel = which_d(cfg.seed)
    st.markdown(t("scaling.pitfall_which_d", mw_dk=fmt.sig(mw_dk), mw_dmodel=fmt.sig(mw_dmodel)))
    st.code(t("scaling.pitfall_code"), language="python")

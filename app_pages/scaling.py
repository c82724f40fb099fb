"""Scaling and softmax saturation: why q.k is divided by sqrt(d_k), measured — and temperature,
the general knob of which that division is one setting (tau = sqrt(d_k))."""
from __future__ import annotations

import streamlit as st
from streamlit.delta_generator import DeltaGenerator

from attention_core.diagnostics import softmax_jacobian_norm
from attention_core.functional import masked_softmax
from attention_core.labs import scaling as sl
from ui import anatomy, presenter
from ui import scaling_sections as sec
from ui.i18n import t

NS = "scaling"
# lines that fit a phone; the variance of q·k is the first question's answer: derived after it, not stated here
FORMULA = (r"\begin{aligned}&\operatorname{Attention}(Q,K,V)\\ &\qquad=\operatorname{softmax}\!\left(\frac{QK^\top}"
           r"{\sqrt{d_k}\;\tau}\right)V\end{aligned}\,")


# ------------------------------------------------------------------ the page
def lesson_body(steps: presenter.Lesson) -> None:
    """The controls and everything they drive, as a fragment: a control change reruns (and redraws) only this,
    not the router, the header, the intuition and the formula (the redraw budget). It draws the text that does not
    depend on the seed and leaves slots (``sec.Slots``) between it; the seed and what it drives are a fragment
    nested in it that fills those slots, so a new seed re-sends neither the other controls nor that text."""
    with steps.step("controls", keep=True):
        d_k, scaled, tau = sec.read_settings()
    with steps.step("seed", keep=True):
        seed_box = st.container()
    with steps.step("1. question: the variance of q.k"):
        ex_var = sec.variance_question()
    with steps.step("1. evidence: histogram and variance against d_k",
                    shows=(sl.sample_qk, sl.sweep_scores, sl.variance_sweep)):
        hist, var, var_notice = sec.variance_evidence_text(d_k)
    with steps.step("2. softmax of growing scores", shows=(sl.score_scale, masked_softmax, sl.softmax_view)):
        heat, bars = sec.softmax_text(d_k, scaled, tau)
    with steps.step("3. the gradient signal", shows=(sl.saturation_curves, sl.saturation_stats,
                                                     softmax_jacobian_norm)):
        sec.gradient_section(d_k, scaled, tau)
    with steps.step("4. question: temperature"):
        sec.temperature_question()
    with steps.step("4. evidence: max weight against tau", shows=(sl.temperature_curve,)):
        temperature, temperature_notice = sec.temperature_text(d_k, tau)
    demo: list[DeltaGenerator] = []
    with steps.step("pitfall"):
        anatomy.pitfall(t("scaling.pitfall_title"), t("scaling.pitfall_body"), key="pitx",   # only when open
                        demo=lambda: demo.append(st.container()), shows=(sl.naive_softmax, sl.overflow_rows))
    slots = sec.Slots(ex_var, hist, var, var_notice, heat, bars, temperature, temperature_notice,
                      demo[0] if demo else None)
    with seed_box:
        seeded_body(d_k, scaled, tau, slots)


@st.fragment
def seeded_body(d_k: int, scaled: bool, tau: float, slots: sec.Slots) -> None:
    """The seed (drawn here, under the controls) and everything it drives, written into ``slots``. The slots are
    filled cheapest first, not in page order: the browser draws the softmax charts while the server still draws
    the 2 x 1024 x 1024 normal samples of the variance sweep (the page reads the same either way)."""
    settings = sec.Settings(d_k, scaled, tau, sec.seed_control())
    clicked, soft = sec.softmax_section(settings, slots)
    sec.temperature_evidence(settings, clicked, soft, slots)
    variance = sec.variance_sweep(settings.seed)
    sec.variance_explanation(variance, slots)
    sec.variance_evidence(settings, variance, slots)
    if slots.pitfall_demo is not None:
        with slots.pitfall_demo:
            sec.pitfall_demo(settings)


anatomy.header(NS)
steps = presenter.Lesson(NS)          # presenter mode (?present=1): one step at a time
with steps.step("intuition"):
    anatomy.intuition(NS)
    anatomy.formula(FORMULA, t("scaling.formula_caption"))
steps.part(lesson_body, steps)
steps.end()

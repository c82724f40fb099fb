"""Efficient attention: what each approximation does to the weights, what it buys (measured), flash
attention tile by tile, causal linear attention as an RNN, and the first tutorial's other performance tips
(section 10.2: gradient checkpointing and mixed precision, measured).

Section 8 of the first tutorial (linear attention, strided sparse attention, the complexity table
with Linformer, Performer and Flash Attention) and the second tutorial's block-local + global
``SparseAttention``, with their bugs fixed and shown in the pitfall boxes.
"""
from __future__ import annotations

import streamlit as st

from attention_core.labs import efficiency as lab
from ui import anatomy, presenter
from ui import efficiency_charts as ec
from ui import efficiency_sections as sec
from ui.i18n import lesson, t

NS = "efficiency"


def tips_section() -> None:
    with steps.step("tips_lesson"):
        st.markdown(lesson("efficiency/tips"))
    steps.part(sec.checkpointing_section, steps)
    steps.part(sec.precision_section, steps)
    with steps.step("tips_pitfall"):
        anatomy.pitfall(t("efficiency.tips_pit_title"), t("efficiency.tips_pit_body"), t("efficiency.tips_pit_code"),
                        demo=lambda: st.markdown(ec.underflow_note(lab.underflow())), shows=(lab.underflow,))


# ------------------------------------------------------------------ the page
anatomy.header(NS)
steps = presenter.Lesson(NS)           # presenter mode (?present=1): one step at a time; a tab's steps when open
with steps.step("intuition"):
    anatomy.intuition(NS)
    anatomy.formula(ec.formula(), t("efficiency.formula_caption"))
with steps.step("inputs", keep=True):
    inputs, labels = sec.read_inputs()
tabs = steps.tabs([t(f"efficiency.tab_{x}") for x in ("approx", "cost", "flash", "rnn", "tips")], lazy=True,
                  key="tab", bind="query-params")
if tabs[0].open is not False:
    with tabs[0]:
        if inputs is None:
            st.caption(t("efficiency.need_input"))
        else:
            sec.approximations_section(steps, inputs, labels)
        with steps.step("approx_pitfalls"):
            sec.sparse_pitfalls(inputs)
if tabs[1].open:
    with tabs[1]:
        sec.cost_section(steps)
if inputs is not None and tabs[2].open:
    with tabs[2]:
        sec.flash_section(steps, inputs, labels)
if inputs is not None and tabs[3].open:
    with tabs[3]:
        sec.rnn_section(steps, inputs, labels)
if tabs[4].open:
    with tabs[4]:
        tips_section()
steps.end()                            # "Show the code": what each step declared it ran

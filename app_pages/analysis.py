"""Attention analysis: the second tutorial's AttentionAnalyzer, corrected, run on the trained "it" model.

Order: entropy and sparsity of every head over a batch (exact entropy, padding left out, the
threshold as a control) -> the multi-head page's pattern classifier on the trained heads -> one
sentence: every head, the query/key geometry of one head, attention rollout across the layers and its
caveat -> the tutorial's analyser on the same batch (the +1e-8 and the padded rows).
"""
from __future__ import annotations

import streamlit as st

from attention_core import analysis
from attention_core.labs import analysis as lab
from ui import analysis_sections as sec
from ui import anatomy, models, presenter
from ui.i18n import current_lang, lesson, t

NS = "analysis"
TABS = ("stats", "patterns", "sentence")   # the page's tabs, in lesson order; only the open one runs
# one definition a row: a phone (358 px) shows it without scrolling sideways
FORMULA = (r"\begin{gathered}H(\text{row}) = -\sum_j p_j \log p_j \quad(0\log 0 = 0)\\[4pt]"
           r"\text{sparsity}_\tau(\text{row}) = \frac{1}{n}\,\#\{j : p_j < \tau\}\\[4pt]"
           r"R = \hat A_L\cdots\hat A_1\\[4pt]"
           r"\hat A_\ell = \mathrm{rownorm}\Big(\frac{1}{h}\sum_i A_\ell^{(i)} + I\Big)\end{gathered}\,")


# ------------------------------------------------------------------ the page

def stats_tab(choice: lab.Batch) -> None:
    """Entropy and sparsity over the batch: the question, the two heatmaps, what to notice, the tutorial's analyser."""
    with steps.step("question"):
        sec.sparsity_exercise(choice)
    with steps.step("entropy and sparsity", shows=(lab.head_stats, analysis.head_entropy, analysis.head_sparsity)):
        sec.stats_section(choice)
        facts = sec.stats_facts(choice)
        anatomy.notice([t(f"{NS}.notice_{k}", **facts) for k in ("entropy", "sparsity")])
    with steps.step("pitfall", shows=(lab.seed_analyzer_stats,)):
        sec.seed_pitfall(choice)


def patterns_tab(choice: lab.Batch) -> None:
    """The classifier's patterns over the batch (the only tab that classifies every head of every sentence)."""
    with steps.step("patterns question"):
        sec.patterns_question()
    with steps.step("patterns", shows=(lab.sentence_labels, analysis.classify_heads)):
        pats = sec.patterns(choice.b, choice.seed, choice.mix)
        sec.patterns_section(pats, choice)
        anatomy.notice([t(f"{NS}.notice_patterns", **sec.pattern_facts(pats))])


def sentence_tab(choice: lab.Batch) -> None:
    """One sentence: every head, the query/key geometry of one head, rollout."""
    with steps.step("one sentence", shows=(analysis.classify_heads,)):
        st.subheader(t(f"{NS}.sentence_heading"))
        idx = sec.sentence_choice(choice.b, choice.seed, choice.mix)
        sec.heads_section(choice.seed, choice.mix, idx)
    with steps.step("geometry", shows=(lab.head_qk, analysis.qk_geometry)):
        st.subheader(t(f"{NS}.geometry_heading"))
        st.markdown(lesson(f"{NS}/geometry"))
        # the default head: the one whose attention from "it" most often prefers the referent over the batch
        layer, head, query = sec.head_and_query(sec.sentence(choice.seed, choice.mix, idx),
                                                int(sec.agreement(choice.b, choice.seed, choice.mix).argmax()))
        facts = sec.quoted(sec.sentence_facts(choice, idx, layer, head, query))
        left, right = st.columns([3, 2])
        with left:                # the title above the chart: Vega drew it outside a content-width chart's box
            st.markdown(f"**{t(f'{NS}.geo_title', head=sec.head_label(layer, head), q=facts['q'])}**")   # q: escaped
            anatomy.show_chart(sec.geometry_chart(choice.seed, choice.mix, idx, layer, head, query, current_lang()),
                               key="an_geo", width="content")
        with right:
            st.markdown(t(f"{NS}.geo_caption", **facts))
    with steps.step("rollout", shows=(analysis.attention_rollout,)):
        sec.rollout_section(choice.seed, choice.mix, idx)
        anatomy.notice([t(f"{NS}.notice_rollout", **facts)])


anatomy.header(NS)
steps = presenter.Lesson(NS)
with steps.step("intuition and formula"):
    anatomy.intuition(NS)
    st.markdown(lesson(f"{NS}/analyser"))
    anatomy.formula(FORMULA.replace(r"\text{row}", r"\text{%s}" % t(f"{NS}.formula_row")).replace(
        r"\text{sparsity}", r"\text{%s}" % t(f"{NS}.formula_sparsity")), t(f"{NS}.formula_caption"))
if models.unavailable("pronoun"):
    st.stop()


def batch_fragment() -> None:
    """The batch's controls and the tabs they drive, as a fragment (``Lesson.part``): a new seed, batch, τ or tab
    reruns and redraws only this part, not the title, the intuition and the formula. In presenter mode another tab
    reruns the whole page, so its lesson starts at its first step (``presenter.Lesson``)."""
    with steps.step("controls", keep=True):
        choice = sec.batch_controls()
    # lazy tabs: only the open tab computes and draws; a new seed redraws that tab's charts only
    tabs = steps.tabs([t(f"{NS}.tab_{k}") for k in TABS], lazy=True, key="tab", bind="query-params")
    for tab, body in zip(tabs, (stats_tab, patterns_tab, sentence_tab)):
        if tab.open or (tab.open is None and body is stats_tab):        # None: no state yet (the first tab)
            with tab:
                body(choice)


steps.part(batch_fragment)
steps.end()

"""Masking: pad a batch, hide the future in a decoder, draw your own mask — and meet the NaN,
float16 and mixed-convention traps of the tutorials, live. The sections' bodies are in ui/masking_sections.py."""
from __future__ import annotations

import streamlit as st

from attention_core.functional import masked_softmax, scaled_dot_product_attention
from attention_core.labs import masking as ml
from attention_core.masks import causal_mask, padding_mask
from ui import anatomy, presenter
from ui import masking_sections as sec
from ui.i18n import t

NS = "masking"
FORMULA = (r"\begin{{aligned}}&\operatorname{{Attention}}(Q,K,V)\\ &\qquad=\operatorname{{softmax}}\!\Big("
           r"\frac{{QK^{{\top}}}}{{\sqrt{{d_k}}}}+M\Big)V\\ &M_{{ij}}=\begin{{cases}}0 & \text{{{visible}}}\\ -\infty & "
           r"\text{{{hidden}}}\end{{cases}}\end{{aligned}}\,")          # lines that fit a phone
# the demos of the first two pitfalls look for a fully masked row of the decoder and compare the naive softmax
# and each fill value with the safe one
FULLY_MASKED = (causal_mask, ml.pitfall_naive_masked_softmax, ml.masked_fill_outcome)


# ------------------------------------------------------------------ the page
def lesson_body(steps: presenter.Lesson) -> None:
    """The controls and everything they drive (tabs, pitfalls), as a fragment (``Lesson.part``): a control change
    reruns (and redraws) only this, not the router, the header, the intuition and the formula.
    The seed and what it drives are a fragment nested in it (``seeded``)."""
    with steps.step("controls", keep=True):
        left, right = st.columns([3, 2])
        with left:
            sentences = sec.read_batch()
        with right:
            side = sec.side_control()
            s = sec.pick_sentence(sentences) if sentences else 0
    if sentences:
        steps.part(seeded, steps, tuple(tuple(x) for x in sentences), side, s)


def seeded(steps: presenter.Lesson, sentences: sec.Batch, side: str, s: int) -> None:
    """The seed, the tabs and the pitfalls (nested fragment: a new seed or tab redraws only this). In presenter
    mode a new tab reruns the whole page, whose step bar then starts that tab at its first step (``Lesson.part``)."""
    with steps.step("seed", keep=True):
        seed = sec.seed_control()
    run = sec.attend(sentences, side, seed)                                 # keep: (b, 1, 1, n)
    presenter.shows(ml.attend_batch, ml.pad_batch, ml.batch_mask, ml.key_padding_mask, padding_mask, masked_softmax,
                    scaled_dot_product_attention)

    tab_pad, tab_causal, tab_custom = steps.tabs(
        [t("masking.tab_padding"), t("masking.tab_causal"), t("masking.tab_custom")], lazy=True, key="tab",
        bind="query-params")
    if tab_pad.open is not False:
        with tab_pad:
            with steps.step("padding: the batch and its mask"):
                sec.padding_section(run.batch, run.keep, s)
            with steps.step("padding: scores and weights; what to notice", shows=(ml.padding_facts,)):
                sec.padding_weights(run, s)
    if tab_causal.open:
        with tab_causal:
            with steps.step("causal: which layer uses which mask"):
                sec.causal_intro()
            with steps.step("question: a query with no visible key"):
                sec.question()
            with steps.step("causal: the masks and the weights; what to notice", shows=(causal_mask,)):
                sec.causal_section(sentences, side, seed, s)
    if tab_custom.open:
        with tab_custom:
            with steps.step("your own mask"):
                custom_code = sec.custom_section(sentences[s], s)
            with steps.step("your mask's weights; what to notice", shows=(ml.pitfall_naive_masked_softmax,)):
                sec.custom_weights(sentences[s], custom_code, seed)

    # the live demos of the first two pitfalls are drawn only while their expanders are open (?nanx=true,
    # ?fp16x=true); the third has its own (?mixx=true)
    with steps.step("pitfall: NaN from a fully masked row"):
        anatomy.pitfall(t("masking.pit_nan_title"), t("masking.pit_nan_body"), t("masking.pit_nan_code"),
                        demo=lambda: sec.nan_demo(sentences, seed), key="nanx", shows=FULLY_MASKED)
    with steps.step("pitfall: -1e9 in float16"):
        anatomy.pitfall(t("masking.pit_fp16_title"), t("masking.pit_fp16_body"), t("masking.pit_fp16_code"),
                        demo=lambda: sec.fp16_demo(sentences, seed), key="fp16x", shows=FULLY_MASKED)
    with steps.step("pitfall: two mask conventions"):
        anatomy.pitfall(t("masking.pit_conv_title"), t("masking.pit_conv_body", i=s + 1), None,
                        demo=lambda: sec.convention_demo(sentences, side, seed, s))   # declares what its run ran


anatomy.header(NS)
steps = presenter.Lesson(NS)          # presenter mode (?present=1): one step at a time, steps inside the tabs too
with steps.step("intuition"):
    anatomy.intuition(NS)
    anatomy.formula(FORMULA.format(visible=t("masking.formula_visible"), hidden=t("masking.formula_hidden")),
                    t("masking.formula_caption"))
steps.part(lesson_body, steps)
steps.end()          # and "Show the code": what the steps, the open tab and the open demos declared

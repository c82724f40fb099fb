"""Attention that resolves "it": a small trained Transformer reads a template sentence and names
the noun "it"/"它" refers to, as a word read from the pronoun's final vector.

First tutorial, section 5.2 ("The animal didn't cross the street because it was too tired": self-
attention relates "it" to every word). Order: the model and what it is not -> the sentence (picked
from the grammar's word lists or typed) -> the question (how often does the resolving head prefer the
referent on held-out sentences?) -> the answer -> attention from "it" in every layer and head, the
resolving head marked, next to the same sentence with the other adjective -> one head in full -> fresh
sentences of a seed: which head points at the referent, and how often (with what to notice: one
st.fragment, so a new seed redraws only them: docs/performance.md) -> why the readout matters.
"""
from __future__ import annotations

import streamlit as st

from attention_core.labs import pronoun as lab
from attention_core.models import pronoun as resolver
from ui import anatomy, models, presenter
from ui import pronoun_sections as sec
from ui.i18n import lesson, t

NS = "pronoun"
# one equation a row: a phone (358 px) shows it without scrolling sideways
FORMULA = (r"\begin{gathered}a^{(\ell,i)}_{\text{it},j}=\mathrm{softmax}_j\Big(\frac{q^{(\ell,i)}_{\text{it}}\cdot "
           r"k^{(\ell,i)}_j}{\sqrt{d_k}}\Big)\\ h=W_{\text{read}}\,x^{(L)}_{\text{it}}\\ "
           r"P(w)=\mathrm{softmax}_w\big(h\cdot E_w+b_w\big)\end{gathered}\,")


# ---------------------------------------------------------------------------------------------
# the page
# ---------------------------------------------------------------------------------------------

def fresh_fragment(steps: presenter.Lesson, sentence: dict, best: lab.ResolvingHead) -> None:
    """The fresh sentences and what to notice (which quotes them), as a fragment (``Lesson.part``): a new seed or
    number of sentences reruns and redraws only this part of the page; ``sentence``: the facts of the sentence
    above."""
    with steps.step("fresh sentences"):
        figures = sec.fresh_section(best)
    with steps.step("notice"):
        sec.what_to_notice({**sentence, **sec.fresh_facts(figures, best)})


anatomy.header(NS)
steps = presenter.Lesson(NS)
with steps.step("intuition"):
    anatomy.intuition(NS)
if models.unavailable("pronoun"):
    st.stop()
try:
    # the checkpoint, looked up once per run and passed to the sections (each lookup stats the file and hashes a
    # cache key: ~0.3 ms, and the labels of a run ask ~20 times)
    lm = models.shipped_model("pronoun")
    # the encoder head that prefers the referent most often, chosen at training time on held-out sentences of
    # ``models.recipes.EVAL_SEED`` (the checkpoint's meta), with its figures there
    best = lab.resolving_head(lm.meta)
    sec.heldout_facts(lm, best)                         # the exercise's figures: the same evaluation
except (ValueError, TypeError, KeyError, IndexError) as err:   # a readable checkpoint whose meta lacks the evaluation
    anatomy.problem(f"{NS}.err_no_model", detail=anatomy.md_escape(str(err)))
    st.stop()
with steps.step("model and formula"):
    sec.model_card(lm)
    st.markdown(lesson(f"{NS}/tutorial"))
    anatomy.formula(FORMULA, t(f"{NS}.formula_caption", V=len(lm.src_vocab)))
with steps.step("controls", keep=True):
    source, example = sec.sentence_section()
    if example is not None:
        other = sec.contrast_choice(example)
if example is not None:
    result, result2 = sec.run(example), sec.run(other)
    facts = sec.sentence_facts(example, result, other, result2, best)
    with steps.step("question"):
        sec.agreement_exercise(lm, best)
    with steps.step("answers", shows=(resolver.PronounResolver.forward, resolver.resolve, lab.build_example,
                                      lab.flipped, lab.pronoun_rows, lab.fresh_figures)):
        sec.answers_section(example, result, other, result2, lm)
    with steps.step("from it"):
        drilled = sec.from_it_section(example, result, other, result2, best)
    with steps.step("flip"):
        sec.flip_section(example, result, other, result2, best)
    with steps.step("one head"):
        sec.one_head_section(example, result, drilled, best)
    steps.part(fresh_fragment, steps, facts, best)
    with steps.step("pitfall"):
        sec.readout_pitfall(facts, lm)
steps.end()          # and "Show the code": what the steps declared

"""The bottleneck: a Seq2Seq model without attention must squeeze the whole input into one fixed-size
context vector ("a small note to remember a whole book"); with attention the decoder looks back.

First tutorial, sections 1.2 and 2 (Encoder / Decoder, the information bottleneck). Order: the question ->
accuracy against input length (recorded curves of the shipped models) -> the learner's own digit string
through both models, with the alignment -> the diagram of what the decoder sees -> accuracy by output
position -> what to notice -> the padding pitfall. The length, the seed and what they drive are one st.fragment
that writes into slots left in each section after its static heading and lesson: a new seed, length or step
re-sends only what changes (the redraw budget, docs/performance.md); the own-string toggle and a typed string rerun the
page. The sections' bodies are in ui/bottleneck_sections.py.
"""
from __future__ import annotations

import streamlit as st

from attention_core.labs import bottleneck as lab
from attention_core.models import seq2seq
from ui import anatomy, models, presenter
from ui import bottleneck_sections as sec
from ui.i18n import lesson as lesson_text
from ui.i18n import t

NS = "bottleneck"
# short rows (a phone is 358 px wide); the thin space at the end: KaTeX's last column overhangs its box by 2 px
FORMULA = (r"\begin{aligned}"
           r"&\text{without attention:}\\ &\quad c = h_n,\quad s_0 = c\\ "
           r"&\quad s_t = \mathrm{LSTM}(y_{t-1},\, s_{t-1})\\[6pt]"
           r"&\text{with attention:}\\ &\quad c_t = \sum_{j=1}^{n} \alpha_{tj}\, h_j,\quad "
           r"\alpha_{tj} = \mathrm{softmax}_j(e_{tj})\\ "
           r"&\quad e_{tj} = v^{\top}\tanh(W_q s_{t-1} + W_k h_j)\\ "
           r"&\quad s_t = \mathrm{LSTM}([y_{t-1}; c_t],\, s_{t-1})"
           r"\end{aligned}\,")
# the code each run of a string through a model runs: the encoder, the decoder's step, the greedy decoding
DECODE = (seq2seq.Encoder.forward, seq2seq.Decoder.step, seq2seq.AttentionDecoder.step, seq2seq.Seq2Seq.greedy_decode)


@st.fragment
def example_fragment(slots: sec.Slots, typed: str | None, rev: dict | None) -> None:
    """The length and the seed, and what the digit string drives, as a fragment (the redraw budget): a new length, seed
    or step or the check button reruns only this, and re-sends only what it writes into the sections' slots (the
    length and seed in the controls' row, the answers, the step slider and the diagrams, the check button and its
    results) and its own body (the notices' list); the headings, lessons and hints around them are not re-sent.
    ``typed``: the learner's own (valid) digits, typed outside (a typed string reruns the page)."""
    digits = typed if typed is not None else sec.generated_digits(slots.controls)
    res = sec.answers(digits)
    presenter.shows(*DECODE)                  # both models on the string
    with slots.answers:
        marked = sec.answers_section(digits, res)
    with slots.diagram:
        sec.diagram_section(digits, res)
    with slots.check:
        checked = sec.check_section(digits)
    sec.notices(digits, res, marked, rev, checked)


# ------------------------------------------------------------------ the page
anatomy.header(NS)
lesson = presenter.Lesson(NS)          # presenter mode (?present=1) shows one step at a time
with lesson.step("intuition"):
    anatomy.intuition(NS)
    st.markdown(lesson_text(f"{NS}/why"))
    anatomy.formula(FORMULA.replace(r"\text{without attention:}", r"\text{%s}" % t(f"{NS}.formula_without"))
                    .replace(r"\text{with attention:}", r"\text{%s}" % t(f"{NS}.formula_with")),
                    t(f"{NS}.formula_caption"))

if not models.unavailable(*sec.MODELS.values()):
    # the question's numbers: the model without attention on fresh strings (``reverse_check``)
    with lesson.step("question", shows=(seq2seq.Encoder.forward, seq2seq.Decoder.step, seq2seq.Seq2Seq.greedy_decode,
                                        lab.reverse_check)):   # the question before the curves, tapes and positions
        sec.facts()
        nums, best = sec.exercise_numbers()
        anatomy.exercise("bn_ex", t(f"{NS}.ex_question"), [t(f"{NS}.ex_a"), t(f"{NS}.ex_b"), t(f"{NS}.ex_c"),
                                                           t(f"{NS}.ex_d")], best, t(f"{NS}.ex_explain", **nums))
    with lesson.step("curves"):
        rev = sec.curves_section()
    with lesson.step("example", keep=True):   # the heading and the controls' row (the fragment draws length and seed)
        st.header(t(f"{NS}.example_title"))
        chosen = sec.example_controls()
    if chosen is not None:
        with lesson.step("answers"):
            answers_slot = st.container()
        with lesson.step("diagram"):
            st.markdown(f"## {t(f'{NS}.arch_title')}\n\n{lesson_text(f'{NS}/architecture')}")
            diagram_slot = st.container()
        with lesson.step("check"):
            st.subheader(t(f"{NS}.check_title"))
            st.caption(t(f"{NS}.check_hint"))
            check_slot = st.container()
        with lesson.step("notice"):
            anatomy.notice_heading()
            example_fragment(sec.Slots(chosen.row, answers_slot, diagram_slot, check_slot), chosen.typed, rev)
    with lesson.step("pitfall"):              # the demo runs both models, alone and batched the tutorial's way
        anatomy.pitfall(t(f"{NS}.pit_title"), t(f"{NS}.pit_body"), code=t(f"{NS}.pit_code"), demo=sec.pitfall_demo,
                        shows=DECODE)
lesson.end()          # and "Show the code": what the steps, the example and the demo declared, in that order

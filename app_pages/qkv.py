"""Query, Key, Value: attention as a weighted average chosen by similarity.

First tutorial, sections 3-5 and pitfall 3 of section 10; the second tutorial's first section.
Four steps, one tab each: kernel regression (attention pooling with no learning) -> the library
(keys, values, a query you steer) -> a sentence's Q, K, V step by step -> the three similarity
functions side by side. The sections' bodies are in ui/qkv_sections.py.
"""
import numpy as np
import streamlit as st

from attention_core.functional import masked_softmax
from attention_core.labs import qkv as lab
from attention_core.labs import seed_bugs
from attention_core.modules import AdditiveAttention
from ui import anatomy, controls, i18n, presenter, qkv_state
from ui import format as fmt
from ui import qkv_sections as sec
from ui.anatomy import exercise, formula, md_escape, problem
from ui.charts import unique_labels
from ui.i18n import t

NS = "qkv"
TABS = ("tab_kernel", "tab_library", "tab_tokens", "tab_similarity")
NORM_DEMO, ADD_DEMO = "qkv_norm_demo", "qkv_add_demo"   # the pitfalls' demos, drawn only while open (?key=true)


def tab_intro(lesson: presenter.Lesson, name: str, latex: str | None = None, caption: str = "") -> None:
    """A tab's first step: its lesson (assets/lessons/<lang>/qkv/<name>.md) and its formula."""
    with lesson.step(f"{name}: intro"):
        st.markdown(i18n.lesson(f"qkv/{name}"))
        if latex:
            formula(latex, caption)


# --- tab 1: Nadaraya-Watson kernel regression ------------------------------------------------------------------

def kernel_tab(lesson: presenter.Lesson) -> None:
    # The data sliders are the kept block; the question comes next, drawn outside the fragment of the seed (a seed
    # press does not re-send it); the evidence step is that fragment: the seed and query row, then what they drive.
    with lesson.step("kernel: controls", keep=True):
        data = sec.kernel_data_controls()
    with lesson.step("kernel: question"):
        why = exercise("qkv_ex_kernel", t("qkv.k_ex_q"), [t("qkv.k_ex_a0"), t("qkv.k_ex_a1"), t("qkv.k_ex_a2")], 1,
                       None)           # the explanation quotes the sample's mean: the fragment writes it in ``why``
    with lesson.step("kernel: evidence", shows=(lab.nadaraya_watson, lab.gaussian_kernel_scores, masked_softmax)):
        kernel_seeded(why, *data)


@st.fragment
def kernel_seeded(why, h: float, n_train: int, noise: float) -> None:
    """The seed and the query, and what they drive, as a fragment inside the tab's: the seed, the query or a click on
    the heatmap rerun (and re-send) only this, not the bandwidth / points / noise sliders nor the question above
    (the redraw budget). ``why``: the revealed exercise's explanation slot (None before), filled with this sample's
    mean."""
    chosen = sec.kernel_query_controls(h, n_train, noise)
    if why is not None:
        with why:
            st.markdown(t("qkv.k_ex_why", mean=fmt.fixed(float(np.mean(chosen.run.y)))))
    sec.kernel_evidence(chosen)


# --- tab 2: the library ----------------------------------------------------------------------------------------

def library_tab(lesson: presenter.Lesson) -> None:
    with lesson.step("library: controls", keep=True):
        edited = qkv_state.book_table(sec.LIMIT)
        query = sec.query_sliders()
        books = qkv_state.read_books(edited, sec.LIMIT, sec.MAX_BOOKS)
    if books is None:
        return
    r = lab.library_attention(query, books.keys, books.values)
    presenter.shows(lab.library_attention, qkv_state.parse_number_table)      # and the table it read (``read_books``)
    best = int(np.argmax(r.weights.numpy()))
    with lesson.step("library: question"):
        exercise("qkv_ex_library", t("qkv.l_ex_q", book=md_escape(books.titles[best])),
                 [t("qkv.l_ex_a0"), t("qkv.l_ex_a1"), t("qkv.l_ex_a2")], 2, t("qkv.l_ex_why"))
    with lesson.step("library: evidence"):
        sec.library_evidence(books, query, r)


# --- tab 3: a sentence, step by step ---------------------------------------------------------------------------

def tokens_tab(lesson: presenter.Lesson) -> None:
    with lesson.step("sentence: controls", keep=True):
        chosen = sec.tokens_controls()          # the step-through and its pitfalls (``lab.sentence_lesson``)
    if chosen is None:
        return
    with lesson.step("sentence: question"):
        exercise("qkv_ex_tokens", t("qkv.t_ex_q"), [t("qkv.t_ex_a0"), t("qkv.t_ex_a1"), t("qkv.t_ex_a2")], 0,
                 t("qkv.t_ex_why"))
    with lesson.step("sentence: evidence", shows=(lab.qkv_step_through, lab.neuron_view, lab.normalisation_pitfalls)):
        sec.tokens_evidence(chosen)
    with lesson.step("pitfall: normalisation"):
        anatomy.pitfall(t("qkv.p_title"), t("qkv.p_body"), t("qkv.p_code"),     # the demo: drawn only while open
                        demo=lambda: sec.normalisation_demo(chosen), key=NORM_DEMO)


# --- tab 4: additive, dot, scaled dot --------------------------------------------------------------------------

def similarity_tab(lesson: presenter.Lesson) -> None:
    with lesson.step("similarity: controls", keep=True):
        tokens, d_k, hidden, seed = sec.sentence_controls("qkv.s_d_k", sec.CMP_DIMS, 64, "cdk", "qkv.s_hidden",
                                                          sec.DIMS, 16, "hid")
        if tokens is not None and len(tokens) == 1:
            problem("qkv.t_one_token")
    if tokens is None:
        return
    # the three functions and the additive pairing the pitfall quotes, computed together (``lab.similarity_lesson``)
    res = sec.similarity_lesson(tuple(tokens), sec.CMP_D_MODEL, d_k, hidden, seed)
    with lesson.step("similarity: question"):
        exercise("qkv_ex_similarity", t("qkv.s_ex_q"), [t("qkv.s_ex_a0"), t("qkv.s_ex_a1"), t("qkv.s_ex_a2")], 0,
                 t("qkv.s_ex_why"))
    with lesson.step("similarity: evidence", shows=(lab.compare_similarities, AdditiveAttention.scores,
                                                    seed_bugs.tutorial_additive_scores,
                                                    seed_bugs.additive_pairing_demo)):
        sec.similarity_evidence(res, unique_labels(tokens), d_k, hidden)
    with lesson.step("pitfall: additive pairing"):
        anatomy.pitfall(t("qkv.p_add_title"), t("qkv.p_add_body"), t("qkv.p_add_code"),
                        demo=lambda: sec.additive_pitfall_demo(res.pairing, len(tokens)), key=ADD_DEMO)


# --- the page --------------------------------------------------------------------------------------------------

anatomy.header(NS)
lesson = presenter.Lesson(NS)          # presenter mode (?present=1): one step at a time; the tabs hold theirs
with lesson.step("intuition"):
    anatomy.intuition(NS)
with lesson.step("where attention comes from"):
    sec.origin_section()
with lesson.step("formula"):
    formula(r"\begin{aligned}&\operatorname{Attention}\big(q, (k_1, v_1), \dots, (k_n, v_n)\big)\\ &\qquad= "
            r"\sum_{i=1}^{n} \underbrace{\operatorname{softmax}_i\big(a(q, k_i)\big)}_{\alpha_i}\; v_i\end{aligned}\,",
            t("qkv.formula_caption"))
tabs = lesson.tabs(controls.tab_labels(NS, TABS), lazy=True, key="tab", bind="query-params")


# per tab: its lesson (static, outside the fragment) and its body (whose steps declare the code they run)
TAB_PARTS = (
    (("kernel", r"\begin{aligned}f(x) &= \sum_{i=1}^{n} \alpha(x, x_i)\; y_i\\ \alpha(x, x_i) &= "
                r"\operatorname{softmax}_i\!\Big(-\frac{(x - x_i)^2}{2h^2}\Big)\end{aligned}\,",
      "qkv.k_formula_caption"), kernel_tab),
    (("library", r"\begin{gathered}s_i = q \cdot k_i, \qquad \alpha_i = \operatorname{softmax}_i(s)"
                 r"\\ o = \sum_i \alpha_i\, v_i\end{gathered}\,", "qkv.l_formula_caption"),
     library_tab),
    (("tokens", None, None), tokens_tab),
    (("similarity", None, None), similarity_tab),
)
for tab, ((name, latex, caption), body) in zip(tabs, TAB_PARTS):
    if tab.open or tab.open is None:          # lazy: only the open tab runs
        with tab:
            tab_intro(lesson, name, latex, t(caption) if caption else "")
            lesson.part(body, lesson)          # its controls and what they drive, a fragment (only it reruns)
lesson.end()          # and "Show the code": what the open tab's steps declared

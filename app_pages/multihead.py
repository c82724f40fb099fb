"""Multi-head attention: cut d_model into h heads, let each attend on its own, concatenate, project.

First tutorial, section 6 (MultiHeadAttention, split_heads, the divisibility assert of section 10)
and section 7 (visualize_attention, which averages heads silently; the pattern table of 7.3).
Order: the shapes of one forward pass and the parameter count -> every head (click to enlarge)
-> how much heads differ and what averaging hides -> the pattern gallery and the classifier ->
the query/key geometry of one head.
"""
import streamlit as st

from attention_core.analysis import classify_heads, head_similarity
from attention_core.labs import multihead as lab
from attention_core.modules import MultiHeadAttention
from ui import anatomy, controls, presenter
from ui import multihead_charts as mc
from ui import multihead_sections as sec
from ui.charts import ROW_SELECTION
from ui.i18n import t

NS = "multihead"
FORMULA = (r"\begin{gathered}"    # short rows, each centred on its own: it fits a phone's column
           r"\;\mathrm{MultiHead}(X)=\;\\"
           r"\;\mathrm{Concat}(\mathrm{head}_1,\dots,\mathrm{head}_h)\,W^O\;\\[4pt]"
           r"\;\mathrm{head}_i=\mathrm{softmax}\!\Big(\frac{XW_i^Q\,(XW_i^K)^{\top}}{\sqrt{d_k}}\Big)\;\\"
           r"\;\cdot\,XW_i^V,\qquad d_k=d_{\mathrm{model}}/h\;"
           r"\end{gathered}\;")
TABS = ("tab_heads", "tab_shapes", "tab_compare", "tab_gallery", "tab_geometry")


# ---------------------------------------------------------------------------------------------
# the page
# ---------------------------------------------------------------------------------------------

def open_tabs() -> list[tuple]:
    """The five tabs; only the open one runs (lazy). Returns (tab, section) for the tabs to draw."""
    tabs = lesson.tabs(controls.tab_labels(NS, TABS), lazy=True, key="tab", bind="query-params")
    bodies = (sec.heads_section, sec.shapes_section, sec.compare_section, sec.gallery_section, sec.geometry_section)
    return [(tab, body) for tab, body in zip(tabs, bodies) if tab.open or tab.open is None]


def lesson_body(lesson: presenter.Lesson) -> None:
    """The controls and everything they drive, as a fragment: a control change reruns (and redraws) only this,
    not the router, the header, the intuition and the formula (the redraw budget). The seed and what it drives (the
    open tab's body, the notice's list) are a fragment nested in it that writes into the open tab and into the
    notice's step, both drawn here: a new seed re-sends neither the controls, the question, the tab bar, the
    pitfalls nor the code (``Lesson.part``)."""
    with lesson.step("controls", keep=True):
        tokens = controls.sentence("text")
        d_model, num_heads, mode = sec.model_controls()
        ok = sec.sizes_ok(tokens, d_model, num_heads)
        if ok:
            picked = sec.pick_head_and_query(tokens, num_heads)
    if ok:
        with lesson.step("question"):                 # asked before the tabs and the notice that answer it
            sec.parameter_exercise(d_model, num_heads)
        with lesson.step("evidence", shows=(MultiHeadAttention, lab.build_mha,
                                            lab.structured_mha if mode == "structured" else lab.random_mha,
                                            lab.model_input, lab.trace_mha, lab.parameter_count, classify_heads,
                                            head_similarity)):
            seed_row = st.container()                 # the seed, above the tab bar it redraws
            drawn = open_tabs()
        with lesson.step("notice"):
            anatomy.notice_heading()
            notice = st.container()
        with lesson.step("pitfall: averaging"):
            sec.averaging_pitfall()
        with seed_row:
            weights_body(drawn, notice, tokens, d_model, num_heads, mode, picked)
    with lesson.step("pitfall: divisibility"):
        anatomy.pitfall(t(f"{NS}.pit_div_title"), t(f"{NS}.pit_div_body"), code=t(f"{NS}.pit_div_code"))


@st.fragment
def weights_body(drawn: list[tuple], notice, tokens: list[str], d_model: int, num_heads: int, mode: str,
                 picked: tuple[int, int]) -> None:
    """The seed, the forward pass it seeds and what is drawn from it, into the open tab and the notice (nested
    fragment; its presenter steps are the containers it writes into). A new click on the head grid or on a row
    of the big heatmap sets the head / query pickers, which sit outside this fragment: it reruns the page, as
    every click did before."""
    if sec.new_click("mh_grid", mc.HEAD_SELECTION, "head") or sec.new_click("mh_big", ROW_SELECTION, "query_pos"):
        st.rerun(scope="app")
    seed = sec.seed_control()
    result = sec.heads_lesson(tuple(tokens), d_model, num_heads, seed, mode)
    view = sec.View(tokens, d_model, num_heads, seed, mode, *picked)
    for tab, body in drawn:
        with tab:
            body(result, view)
    with notice:
        sec.what_to_notice(result, view, lab.averaging_facts(result, view.head, view.query))


anatomy.header(NS)
lesson = presenter.Lesson(NS)          # presenter mode (?present=1): one step at a time
with lesson.step("intuition"):
    anatomy.intuition(NS)
    anatomy.formula(FORMULA, t(f"{NS}.formula_caption"))
lesson.part(lesson_body, lesson)
lesson.end()

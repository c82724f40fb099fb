"""Positional encoding: attention sees a set, not a sequence, until positions are added.

The sinusoidal table and its binary-counter analogy, similarity by offset, the shuffle test,
and learned vs sinusoidal vs rotary encodings (first tutorial 6.3, second tutorial's
``PositionalEncoding``), with the tutorials' odd-d_model and sqrt(d_model) pitfalls.
The sections' bodies are in ui/positional_sections.py.
"""
from __future__ import annotations

import streamlit as st

from attention_core.positional import rotary_embedding, sinusoidal_encoding
from ui import anatomy, presenter
from ui import positional_sections as sec
from ui.i18n import t

NS = "positional"


def pair_and_offset(view: sec.TableView) -> None:
    """The column pair (its own control: a change reruns only this part, ``steps.part``) and the offset section."""
    with steps.step("a column pair against a counter bit"):
        pair, bit = sec.counter_section(view)
    with steps.step("similarity by offset; what to notice"):
        sec.offset_section(view, pair, bit)


# ------------------------------------------------------------------ the page
anatomy.header(NS)
steps = presenter.Lesson(NS)          # presenter mode (?present=1): one step at a time, steps inside the tabs too
with steps.step("intuition"):
    anatomy.intuition(NS)
    anatomy.formula(r"\begin{aligned}PE_{(pos,\,2i)} &= \sin\big(pos / \mathrm{base}^{2i/d_{model}}\big)\;\\"
                    r"PE_{(pos,\,2i+1)} &= \cos\big(pos / \mathrm{base}^{2i/d_{model}}\big)\;\end{aligned}\;",
                    t("positional.formula_caption"))
tab_table, tab_shuffle, tab_compare = steps.tabs(
    [t("positional.table_title"), t("positional.shuffle_title"), t("positional.compare_title")], key="tab",
    bind="query-params")
with tab_table:                 # every tab runs: the table's d and base and the shuffle test's seed are used later
    with steps.step("the sinusoidal table", shows=(sinusoidal_encoding,)):
        table_view = sec.table_section()
    steps.part(pair_and_offset, table_view)
with tab_shuffle:               # the question opens the tab; the test that answers it follows
    with steps.step("question: swap two words without positions"):
        question = st.container()          # filled below: the explanation quotes the gap measured by the test
    with steps.step("the shuffle test"):
        seed, shuffled = sec.shuffle_section()        # declares the test's code when a sentence was tested
    if shuffled is not None:
        with steps.step("what to notice: the gaps"):
            sec.shuffle_notice(shuffled)
    with question:
        anatomy.exercise("pos_ex", t("positional.ex_question"),
                         [t("positional.ex_a"), t("positional.ex_b"), t("positional.ex_c")], 0,
                         t("positional.ex_explain", gap=sec.sci(shuffled.gaps["none"]) if shuffled else "0"))
with tab_compare:
    with steps.step("three encodings: similarity of positions"):
        grids = sec.compare_grids(table_view.base, seed)
    with steps.step("rotary, live; what to notice", shows=(rotary_embedding,)):
        sec.rotary_section(table_view.base, seed, grids)
with steps.step("pitfall: odd d_model"):
    anatomy.pitfall(t("positional.pit_odd_title"), t("positional.pit_odd_body"),
                    code=t("positional.pit_odd_code"), demo=lambda: sec.odd_d_demo(table_view.d))
with steps.step("pitfall: the sqrt(d_model) factor"):
    anatomy.pitfall(t("positional.pit_scale_title"), t("positional.pit_scale_body", d=table_view.d),
                    code=t("positional.pit_scale_code"), demo=lambda: sec.scale_demo(table_view.d))
steps.end()          # and "Show the code": what the steps and sections declared

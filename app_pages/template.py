"""TEMPLATE: copy this file to start a concept page (README, "Adding a concept page").

Not in the navigation; tests/pages/test_template.py keeps it working. One small idea (self-attention weights on a
typed sentence, with a temperature) shows every part of the page anatomy (docs/architecture.md) once: header,
intuition, formula, URL-bound controls, the question BEFORE the evidence, a chart, what to notice (quoting the numbers
on screen), a pitfall, the code that ran (declared by the step that runs it). A page is composition only, at most 350 lines (ui/<key>_sections.py):
- maths: the library (attention_core) or the page's lab, attention_core/labs/<key>.py (no Streamlit there);
- drawing: ui.charts (attention_heatmap, or a @chart_kind in ui/<key>_charts.py), shown with ui.anatomy;
- words: assets/i18n/{en,zh}/<key>.toml (both languages; tests/test_i18n.py checks parity).
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np
import streamlit as st

from attention_core.functional import scaled_dot_product_attention
from attention_core.text import embed_tokens
from serving.cache import MB, cache_data
from ui import anatomy, controls, presenter
from ui.charts import attention_heatmap
from ui.format import fixed, pct
from ui.i18n import t

NS = "template"          # the page key: app_pages/<key>.py, assets/i18n/*/<key>.toml, tests/pages/test_<key>.py
D_MODEL = 16
TEMPERATURES = (0.25, 0.5, 1.0, 2.0, 4.0)


class Inputs(NamedTuple):        # what the controls chose: a named type, never a bare tuple read by position
    tokens: tuple[str, ...]
    temperature: float
    seed: int


# ------------------------------------------------------------------ computation: cached on plain arguments
def self_attention_weights(tokens: tuple[str, ...], temperature: float, seed: int) -> np.ndarray:
    """The weights of softmax(X X^T / (sqrt(d) * tau)) over the sentence's (seeded) embeddings X."""
    x = embed_tokens(list(tokens), D_MODEL, seed=seed)[None, None]          # (1, 1, n, d)
    out = scaled_dot_product_attention(x, x, x, scale=1.0 / (D_MODEL ** 0.5 * temperature))
    return out.weights[0, 0].numpy()

cached_weights = cache_data(max_entries=64, max_bytes=1 * MB)(self_attention_weights)   # keyed on plain arguments


# ------------------------------------------------------------------ sections, in lesson order
def controls_section() -> Inputs | None:
    left, mid, right = st.columns([4, 2, 1])
    with left:
        tokens = controls.sentence(max_tokens=16)          # bound to ?text=; bad text gets a message
    with mid:
        temperature = st.select_slider(t(f"{NS}.ctl_tau"), options=TEMPERATURES, value=1.0, key="tau",
                                       bind="query-params")
    with right:
        seed = controls.seed()
    return None if tokens is None else Inputs(tuple(tokens), float(temperature), seed)


def question_section() -> None:                  # the question comes before the chart that answers it
    anatomy.exercise(f"{NS}_ex", t(f"{NS}.ex_question"), [t(f"{NS}.ex_a"), t(f"{NS}.ex_b"), t(f"{NS}.ex_c")],
                     answer=1, explanation=t(f"{NS}.ex_explain"))


def evidence_section(inputs: Inputs) -> np.ndarray:
    weights = cached_weights(*inputs)
    spec = attention_heatmap(weights, inputs.tokens, title=t(f"{NS}.chart_title", tau=fixed(inputs.temperature)))
    anatomy.show_matrix(spec, weights, inputs.tokens, key=f"{NS}_weights", file_name=f"{NS}_weights.csv")
    return weights


def notice_section(inputs: Inputs, weights: np.ndarray) -> None:
    diagonal = float(np.mean(np.diag(weights)))
    on_diagonal = int(np.sum(weights.argmax(axis=1) == np.arange(len(weights))))
    anatomy.notice([t(f"{NS}.notice_diag", diag=pct(diagonal, 1), tau=fixed(inputs.temperature)),
                    t(f"{NS}.notice_argmax", k=on_diagonal, n=len(weights)),
                    t(f"{NS}.notice_rows", n=len(weights))])


# ------------------------------------------------------------------ the page
anatomy.header(NS)
lesson = presenter.Lesson(NS)          # presenter mode (?present=1) shows one step at a time
with lesson.step("intuition"):
    anatomy.intuition(NS)
    anatomy.formula(r"\operatorname{softmax}\!\Big(\frac{XX^\top}{\sqrt{d}\,\tau}\Big)", t(f"{NS}.formula_caption"))
with lesson.step("controls", keep=True):
    chosen = controls_section()
if chosen is not None:
    with lesson.step("question"):
        question_section()
    with lesson.step("evidence", shows=(self_attention_weights, scaled_dot_product_attention)):
        shown = evidence_section(chosen)
        notice_section(chosen, shown)
with lesson.step("pitfall"):
    anatomy.pitfall(t(f"{NS}.pit_title"), t(f"{NS}.pit_body"), code=t(f"{NS}.pit_code"))
lesson.end()          # and "Show the code": what the steps declared (``shows``) in the order they ran

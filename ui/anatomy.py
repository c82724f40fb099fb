"""The parts every concept page is built from (DESIGN.md, "Page anatomy").

A page reads like the lesson: header -> intuition -> formula -> controls -> charts ->
what to notice -> exercise -> pitfall -> show the code. Texts come from the page's
i18n namespace, so each part exists in both languages.
"""
from __future__ import annotations

import functools
import inspect
import re
from typing import Callable, Sequence

import streamlit as st

from . import url_guard
from .cache import MB, ByteBudgetCache, FrozenDict, key_of_values, nbytes
from .charts import matrix_csv, to_spec
from .i18n import current_lang, t

_MD_SPECIAL = re.compile(r"([\\`*_{}\[\]()#+\-.!|<>~$])")


def md_escape(text: str) -> str:
    """User text made inert for st.markdown: no Markdown, no HTML, no LaTeX."""
    return _MD_SPECIAL.sub(r"\\\1", str(text))


def header(ns: str) -> None:
    """1. Title and the one-line learning objective."""
    st.title(t(f"{ns}.title"))
    st.markdown(f"**{t('common.objective')}** {t(f'{ns}.objective')}")
    url_guard.slot()   # where a link value this page cannot use is named (ui.url_guard)


def intuition(ns: str) -> None:
    """2. The analogy of the tutorials, two or three sentences."""
    st.info(t(f"{ns}.intuition"), icon=":material/lightbulb:")


def formula(latex: str, caption: str | None = None) -> None:
    """3. The formula, symbols named as the controls name them."""
    st.latex(latex)
    if caption:
        st.caption(caption)


# finished Vega-Lite specs shared by all sessions of the server, LRU within a byte budget (ui.cache); a
# heatmap of 64 x 64 tokens with its data is ~1.5 MB, a skeleton a few KB
SPECS = ByteBudgetCache("ui.anatomy.cached_spec", 12 * MB)


def _build_spec(build: Callable):
    # read-only at the top level (a page copies it before changing it: show_chart, ui.charts.respec); the nested
    # parts stay plain dicts and lists, because Streamlit patches them in place when it draws (a null legend
    # title becomes " ", the same for every session)
    spec = to_spec(build())
    spec = FrozenDict(spec) if isinstance(spec, dict) else spec
    return spec, spec, nbytes(spec)


def cached_spec(cache_id: tuple, build: Callable) -> dict | None:
    """``to_spec(build())``, built once per ``cache_id`` and language and shared by every session.

    ``cache_id``: a name for the chart and every plain value it depends on (the builder itself is not
    hashed). Use it for specs a page reuses (e.g. a skeleton for ``ui.charts.respec``); to draw a
    chart, ``show_chart(build, cache=...)`` does the same. The spec's top level is read-only (a FrozenDict):
    copy it (``dict(spec)``, ``copy.deepcopy``) to change it."""
    return SPECS.get_or_compute(key_of_values((current_lang(), *cache_id)), lambda: _build_spec(build))[0]


def show_chart(chart, *, key: str | None = None, select: bool = False, cache: tuple | None = None,
               width: str = "stretch"):
    """Draw a chart; with ``select`` return the selection event (``on_select="rerun"``).

    ``chart`` is an Altair chart, a Vega-Lite dict, or — with ``cache`` — a function that
    builds the chart: ``cache`` is a tuple of the plain values the chart depends on, and the
    finished spec is then built once per (key, language, cache) and reused on later reruns.
    ``width``: "stretch" (the column's width) or "content" (the chart's own pixel width: small
    multiples, diagrams). Use this instead of st.altair_chart: it also skips Altair's per-rerun
    schema validation (see ui.charts.to_spec; the builders are validated by the tests).
    """
    if cache is not None:
        spec = cached_spec((key, *cache), chart)
        if spec is None:
            chart = chart()
    else:
        if callable(chart) and not hasattr(chart, "to_dict"):
            chart = chart()
        spec = to_spec(chart)
    if spec is not None:
        spec = dict(spec)  # Streamlit pops "datasets" from the dict it is given: keep the cached one whole
        draw, what = st.vega_lite_chart, spec
    else:
        draw, what = st.altair_chart, chart
    if select:
        return draw(what, width=width, on_select="rerun", key=key)
    draw(what, width=width, key=key)
    return None


def show_matrix(chart, matrix, row_labels: Sequence[str], col_labels: Sequence[str] | None = None, *,
                key: str, selectable: bool = True, file_name: str = "matrix.csv",
                cache: tuple | None = None) -> int | None:
    """5. Draw a heatmap (ui.charts.heatmap / heatmap_spec, or a builder with ``cache`` as in show_chart)
    with a CSV download; return the clicked query row."""
    if selectable:
        picked = _selected_query(show_chart(chart, key=key, select=True, cache=cache))
    else:
        picked = show_chart(chart, key=key, cache=cache)
    st.download_button(t("common.download_csv"), lambda: matrix_csv(matrix, row_labels, col_labels),
                       file_name=file_name, mime="text/csv", key=f"{key}_csv",
                       icon=":material/download:", type="tertiary")
    return picked


def _selected_query(event) -> int | None:
    try:
        points = event.selection.get("row") or []
    except AttributeError:
        return None
    for point in points:
        if isinstance(point, dict) and "query_pos" in point:
            return int(point["query_pos"])
    return None


def notice(items: Sequence[str]) -> None:
    """6. What to notice: observations quoting the numbers now on screen."""
    st.subheader(t("common.notice"))
    st.markdown("\n".join(f"- {item}" for item in items))


def exercise(key: str, question: str, options: Sequence[str], answer: int, explanation: str) -> None:
    """7. Predict, then reveal, with feedback on the learner's guess."""
    with st.container(border=True):
        st.markdown(f"**{t('common.exercise')}** {question}")
        guess = st.radio(t("common.your_prediction"), list(range(len(options))),
                         format_func=lambda i: options[i], index=None, key=f"{key}_guess")
        if st.button(t("common.reveal"), key=f"{key}_reveal", disabled=guess is None):
            st.session_state[f"{key}_revealed"] = guess
        revealed = st.session_state.get(f"{key}_revealed")
        if revealed is not None and revealed == guess:
            if guess == answer:
                st.success(t("common.correct"), icon=":material/check_circle:")
            else:
                st.error(t("common.not_quite", answer=options[answer]), icon=":material/cancel:")
            st.markdown(explanation)
        elif guess is None:
            st.caption(t("common.predict_first"))


def pitfall(title: str, body: str, code: str | None = None, demo: Callable[[], None] | None = None) -> None:
    """8. A pitfall from the tutorials, with the buggy code and, where possible, a live demo."""
    with st.container(border=True):
        st.markdown(f":warning: **{t('common.pitfall_heading', title=title)}**")
        st.markdown(body)
        if code:
            st.code(code, language="python")
        if demo is not None:
            demo()


@functools.cache
def _source(obj) -> str:
    return inspect.getsource(obj)


def show_code(*objects) -> None:
    """9. The attention_core source that produced the picture (the very functions that ran)."""
    with st.expander(t("common.show_code"), icon=":material/code:"):
        for obj in objects:
            st.caption(f"`{obj.__module__}.{obj.__qualname__}`")
            st.code(_source(obj), language="python")


def problem(key: str, **fields) -> None:
    """A clear message in the learner's language instead of a traceback."""
    st.warning(t(key, **fields), icon=":material/info:")

"""The parts every concept page is built from (docs/architecture.md, "Page anatomy").

A page reads like the lesson: header -> intuition -> formula -> controls -> question -> evidence
(charts) -> what to notice -> pitfall -> show the code. Texts come from the page's
i18n namespace, so each part exists in both languages.
"""
from __future__ import annotations

from typing import Callable, Sequence

import streamlit as st
from streamlit.delta_generator import DeltaGenerator

from serving import url_guard

from . import a11y, poll
from .charts import matrix_csv
from .code_view import _source, show_code  # noqa: F401 - 9. "Show the code"
from .format import md_escape  # noqa: F401 - re-exported: pages escape user text through anatomy
from .i18n import label_notices, t
from .presenter import active as presenting
from .presenter import shows as declare_shown


def header(ns: str) -> None:
    """1. Title and the one-line learning objective."""
    st.title(t(f"{ns}.title"))
    label_notices(ns, "common", "nav")     # a label file of this page that cannot be read is named here
    st.markdown(f"**{t('common.objective')}** {t(f'{ns}.objective')}")
    url_guard.slot()   # where a link value this page cannot use is named (serving.url_guard)


def intuition(ns: str) -> None:
    """2. The analogy of the tutorials, two or three sentences, beside the page's picture (``ui.pictures``): the
    first screen shows attention. The picture's spec is marked ``usermeta.picture``: it illustrates, it is not the
    evidence of a question (tests/test_lesson_order.py leaves it out)."""
    from .pictures import picture

    spec = picture(ns)
    if spec is None:
        st.info(t(f"{ns}.intuition"), icon=":material/lightbulb:")
        return
    text, figure = st.columns([3, 2], vertical_alignment="center")
    text.info(t(f"{ns}.intuition"), icon=":material/lightbulb:")
    with figure.container(key=f"picture_{ns}"):     # the key's class (st-key-picture_<ns>) marks it in the page
        show_chart({**spec, "usermeta": {**spec["usermeta"], "picture": True}}, key=f"picture_{ns}_chart")


def formula(latex: str, caption: str | None = None) -> None:
    """3. The formula, symbols named as the controls name them."""
    st.latex(latex)
    if caption:
        st.caption(caption)


def show_chart(spec: dict, *, key: str | None = None, select: bool = False, width: str = "stretch"):
    """Draw a finished chart spec (from a ``ui.charts`` chart kind); with ``select`` return the selection event
    (``on_select="rerun"``). ``width``: "stretch" (the column's width) or "content" (the chart's own pixel
    width: small multiples, diagrams, square planes)."""
    if not isinstance(spec, dict) or "usermeta" not in spec:
        raise TypeError("show_chart draws the spec of a ui.charts chart kind "
                        "(README: 'One way to build and draw a chart')")
    spec = dict(spec)  # Streamlit pops "datasets" from the dict it is given
    if select:
        return st.vega_lite_chart(spec, width=width, on_select="rerun", key=key)
    st.vega_lite_chart(spec, width=width, key=key)
    return None


def show_matrix(spec: dict, matrix, row_labels: Sequence[str], col_labels: Sequence[str] | None = None, *,
                key: str, selectable: bool = True, file_name: str = "matrix.csv") -> int | None:
    """6. Draw a heatmap (``ui.charts.heatmap`` / ``attention_heatmap``) with a CSV download of the full matrix;
    return the clicked query row."""
    spec = a11y.with_csv_note(spec)
    if selectable:
        picked = _selected_query(show_chart(spec, key=key, select=True))
    else:
        picked = show_chart(spec, key=key)
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
    """7. What to notice: observations quoting the numbers now on screen."""
    notice_heading()
    notice_items(items)


def notice_heading() -> None:
    """The heading of ``notice``. A page whose list depends on a seed draws it with the fixed text and
    ``notice_items`` from the seed's fragment: one message fewer per seed press (the redraw budget,
    docs/performance.md)."""
    st.subheader(t("common.notice"))


def notice_items(items: Sequence[str]) -> None:
    """The list of ``notice``, one markdown."""
    st.markdown("\n".join(f"- {item}" for item in items))


def exercise(key: str, question: str, options: Sequence[str], answer: int,
             explanation: str | None) -> DeltaGenerator | None:
    """5. Predict, then reveal (before the evidence that answers it), with feedback on the learner's guess.

    ``explanation=None``: the explanation quotes numbers that a nested fragment computes (a seed's sample); the
    exercise is then drawn outside that fragment and returns the empty container its explanation goes in once the
    answer is revealed (None before), which the fragment fills on each of its reruns. A seed press then re-sends
    one markdown, not the whole exercise (the redraw budget, docs/performance.md).

    Next to "Reveal", "Ask the class" opens a live poll of the question (``ui.poll``)."""
    with st.container(border=True):
        st.markdown(f"**{t('common.exercise')}** {question}")
        guess = st.radio(t("common.your_prediction"), list(range(len(options))),
                         format_func=lambda i: options[i], index=None, key=f"{key}_guess")
        with st.container(horizontal=True):
            if st.button(t("common.reveal"), key=f"{key}_reveal", disabled=guess is None):
                st.session_state[f"{key}_revealed"] = guess
            poll.ask_button(key, question, options, answer)     # the teacher's live poll of this question
        revealed = st.session_state.get(f"{key}_revealed")
        if revealed is not None and revealed == guess:
            if guess == answer:
                st.success(t("common.correct"), icon=":material/check_circle:")
            else:
                st.error(t("common.not_quite", answer=options[answer]), icon=":material/cancel:")
            if explanation is None:
                return st.container()
            st.markdown(explanation)
        elif guess is None:
            st.caption(t("common.predict_first"))
    return None


def folded(title: str | None = None):
    """What a teacher tells rather than shows: in presenter mode an expander (``title``, or "The explanation"),
    so the step's chart stays on the step's first screen; otherwise a plain container."""
    if presenting():
        return st.expander(title or t("common.explanation"), icon=":material/menu_book:")
    return st.container()


def explanation(text: str, title: str | None = None) -> None:
    """A lesson passage (markdown), ``folded`` in presenter mode."""
    with folded(title):
        st.markdown(text)


def pitfall(title: str, body: str, code: str | None = None, demo: Callable[[], None] | None = None, *,
            key: str | None = None, shows: Sequence = ()) -> bool:
    """8. A pitfall from the tutorials, with the buggy code and, where possible, a live demo. With ``key`` the
    demo sits in an expander ("Run it: watch it go wrong") that computes and draws it only while open
    (``?<key>=true`` opens it), so a rerun of the page does not redraw it (the redraw budget). ``shows``: the
    library code the demo runs, declared to the lesson's "Show the code" only when the demo ran. Returns whether
    the demo ran."""
    # in presenter mode the demo comes first and the code is folded under it: the step's chart on its first screen
    folded = bool(code) and presenting()
    with st.container(border=True):
        st.markdown(f":warning: **{t('common.pitfall_heading', title=title)}**\n\n{body}")
        if code and not folded:
            st.code(code, language="python")
        ran = _pitfall_demo(demo, key)
        if ran:
            declare_shown(*shows)
        if folded:
            with st.expander(t("common.pitfall_code"), icon=":material/code:"):
                st.code(code, language="python")
        return ran


def _pitfall_demo(demo: Callable[[], None] | None, key: str | None) -> bool:
    if demo is None:
        return False
    if key is None:
        demo()
        return True
    box = st.expander(t("common.pitfall_demo"), icon=":material/play_arrow:", key=key, on_change="rerun",
                      bind="query-params")
    if box.open:
        with box:
            demo()
        return True
    return False


def problem(key: str, **fields) -> None:
    """A clear message in the learner's language instead of a traceback."""
    st.warning(t(key, **fields), icon=":material/info:")

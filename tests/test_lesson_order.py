"""The question comes before the answer (docs/architecture.md, page anatomy 5): on every page, in every
section that poses an exercise (each tab, or the page outside tabs), no chart, metric or "What to notice" list is
drawn before the exercise. A teacher can pose the question without scrolling past its answer."""
import pytest

from tests.apptest_util import exceptions
from tests.sweep import walk
from ui.i18n import catalog
from ui.registry import available_pages

PAGES = [p.key for p in available_pages() if p.key not in ("home", "glossary", "summary", "teach")]


def sections(at) -> dict[str, list[tuple[str, str]]]:
    """Each tab's elements in drawing order (``main`` for what lies outside any tab) as (kind, text)."""
    out: dict[str, list[tuple[str, str]]] = {}

    def walk(node, where: str) -> None:
        kind = getattr(node, "type", None)
        if kind == "tab":
            where = f"{where} › {node.label}"
        elif kind in ("vega_lite_chart", "arrow_vega_lite_chart") and '"picture": true' in node.proto.spec:
            pass                   # the intuition's picture (ui.pictures) illustrates the page, it answers nothing
        elif kind:
            key = getattr(node, "key", None) or ""
            value = getattr(node, "value", "")
            text = key if kind == "radio" else (value if isinstance(value, str) else "")   # a table's value is data
            out.setdefault(where, []).append((kind, text))
        for child in getattr(node, "children", {}).values():
            walk(child, where)

    walk(at.main, "main")
    return out


def misplaced(at, lang: str) -> list[str]:
    notice = catalog(lang)["common.notice"]
    problems = []
    for where, items in sections(at).items():
        asks = [i for i, (kind, text) in enumerate(items) if kind == "radio" and text.endswith("_guess")]
        if not asks:
            continue
        evidence = [(i, kind, text) for i, (kind, text) in enumerate(items)
                    if kind in ("vega_lite_chart", "arrow_vega_lite_chart", "metric")
                    or (kind == "subheader" and text == notice)]
        before = [f"{kind} {text[:40]!r}".strip() for i, kind, text in evidence if i < asks[0]]
        if before:
            problems.append(f"{where}: the exercise comes after {', '.join(before)}")
    return problems


@pytest.mark.parametrize("lang", ["en", "zh"])
@pytest.mark.parametrize("key", PAGES)
def test_the_question_comes_before_its_evidence(key, lang):
    """Each tab is opened in turn (a page's tabs run only when open): the shared walk of tests/sweep.py."""
    problems: list[str] = []
    for run in walk(key, lang):
        assert run.errors == [], f"{key} ({lang}, {run.where}) raised: {run.errors}"
        problems += [p for p in misplaced(run.at, lang) if p not in problems]
    assert problems == []


def test_the_check_sees_an_answer_drawn_above_its_question():
    """The check itself: a notice and a chart drawn before an exercise are reported, after it they are not."""
    from streamlit.testing.v1 import AppTest

    def script(first: str = "evidence"):
        import streamlit as st

        from ui import anatomy
        from ui.charts import bars

        def evidence():
            anatomy.notice(["the answer is 0.63"])
            anatomy.show_chart(bars([0.2, 0.8], ["a", "b"]), key="c")

        if st.query_params.get("first") == "evidence":
            evidence()
        anatomy.exercise("q", "What is it?", ["0.63", "0.5"], 0, "because")
        if st.query_params.get("first") != "evidence":
            evidence()

    for first, expect in (("evidence", 1), ("question", 0)):
        at = AppTest.from_function(script, default_timeout=60)
        at.query_params["first"] = first
        at.run()
        assert exceptions(at) == []
        assert len(misplaced(at, "en")) == expect

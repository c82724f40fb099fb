"""Nothing drawn above a question gives its answer away (the room predicts first): every exercise declares the
phrases and numbers that would tell its answer (``assets/i18n/{lang}/tells.toml``: ``[<page>] <exercise key> =
[...]``, each language its own), and none of them may appear in what a learner reads before the question: the
page's navigation blurb, title, objective, intuition, formulas and their captions, controls and their defaults,
and everything else drawn before it in its tab (or outside the tabs). Checked on every page in both languages, on
the page's first run (the defaults a link opens with) and in each tab in turn.

A tell is matched case-insensitively on text made plain (Markdown and LaTeX markup and spacing removed); a tell
that is a number does not match inside a longer number ("4" is not found in "0.4" or "48")."""
from __future__ import annotations

import re

import pytest

from tests.apptest_util import exceptions
from tests.sweep import walk
from ui.i18n import catalog
from ui.registry import available_pages

PAGES = [p.key for p in available_pages() if p.key not in ("home", "glossary", "summary")]
TEXT_KINDS = ("title", "header", "subheader", "markdown", "caption", "info", "warning", "error", "success",
              "latex", "text", "code", "metric", "table", "dataframe")


def plain(text: str) -> str:
    """Text as read: no Markdown emphasis, no LaTeX commands or braces, single spaces, lower case."""
    text = re.sub(r"\\(?:mathrm|text|operatorname|mathbf|boldsymbol|left|right|big|Big)\b", "", str(text))
    text = re.sub(r"\\,|\\;|\\!|\\quad", " ", text)
    text = text.replace("\\sqrt", "√").replace("\\tau", "τ").replace("\\cdot", "·").replace("\\times", "×")
    text = re.sub(r"[*_`{}$\\]", "", text)
    text = re.sub(r"\s*([=×·+−/])\s*", r"\1", text)          # "τ = 16" reads as "τ=16"
    return re.sub(r"\s+", " ", text).strip().lower()


def found(tell: str, text: str) -> bool:
    tell = plain(tell)
    if re.fullmatch(r"[\d.,]+", tell):          # a number: not a piece of a longer number
        return re.search(rf"(?<![\d.,]){re.escape(tell)}(?![\d]|[.,]\d)", text) is not None
    return tell in text


def _element_text(node, kind: str) -> str:
    if kind == "metric":
        return f"{getattr(node, 'label', '')} {getattr(node, 'value', '')}"
    if kind in ("table", "dataframe"):
        try:
            return node.value.to_string()
        except AttributeError:
            return ""
    if kind in ("radio", "selectbox", "select_slider", "slider", "number_input", "text_area", "text_input",
                "segmented_control", "button_group", "pills", "toggle", "checkbox", "multiselect"):
        label = getattr(node, "label", "") or ""
        try:
            value = node.value
        except Exception:
            value = ""
        return f"{label} {value if isinstance(value, (str, int, float, list, tuple)) else ''}"
    value = getattr(node, "value", "")
    return value if isinstance(value, str) else ""


def drawn(at) -> list[tuple[str, str, str, str]]:
    """Every element of the run in drawing order as (tab path, kind, key, text); ``main`` is outside any tab."""
    out: list[tuple[str, str, str, str]] = []

    def walk(node, where: str) -> None:
        kind = getattr(node, "type", None)
        if kind == "tab":
            where = f"{where} › {node.label}"
        elif kind:
            out.append((where, kind, getattr(node, "key", None) or "", _element_text(node, kind)))
        for child in getattr(node, "children", {}).values():
            walk(child, where)

    walk(at.main, "main")
    return out


def spoilers(at, page: str, lang: str, missing: set[str]) -> list[str]:
    """Each question's tells found in what is drawn above it (its own question text excepted)."""
    words = catalog(lang)
    blurb = plain(words.get(f"nav.{page}_blurb", ""))
    items = drawn(at)
    problems = []
    for i, (where, kind, key, _) in enumerate(items):
        if kind != "radio" or not key.endswith("_guess"):
            continue
        name = key[: -len("_guess")]
        tells = words.get(f"tells.{page}.{name}")
        if not tells:
            missing.add(name)
            continue
        # above the question: the blurb, then what lies outside the tabs or in this tab's path before it
        # (the question's own text, the markdown just before its radio, is the question)
        above = [text for w, _, _, text in items[: max(i - 1, 0)] if where == w or where.startswith(w + " › ")]
        text = plain(" \n ".join([blurb, *above]))
        for tell in tells:
            if found(tell, text):
                at_ = text.find(plain(tell))
                problems.append(f"{where}: {name}'s tell {tell!r} is drawn above the question "
                                f"(…{text[max(at_ - 60, 0):at_ + 60]}…)")
    return problems


def page_spoilers(key: str, lang: str) -> tuple[list[str], set[str]]:
    """Over the shared walk of the page (tests/sweep.py): its default URL, then each other tab opened."""
    missing: set[str] = set()
    problems: list[str] = []
    for run in walk(key, lang):
        assert run.errors == [], f"{key} ({lang}, {run.where}) raised: {run.errors}"
        problems += [p for p in spoilers(run.at, key, lang, missing) if p not in problems]
    return problems, missing


@pytest.mark.parametrize("lang", ["en", "zh"])
@pytest.mark.parametrize("key", PAGES)
def test_nothing_above_a_question_gives_its_answer_away(key, lang):
    problems, missing = page_spoilers(key, lang)
    assert not missing, f"exercises without tells in assets/i18n/{lang}/tells.toml [{key}]: {sorted(missing)}"
    assert problems == [], "\n".join(problems)


def test_every_declared_tell_is_a_non_empty_list_of_a_page():
    for lang in ("en", "zh"):
        tells = {k: v for k, v in catalog(lang).items() if k.startswith("tells.")}
        assert tells, "no tells declared"
        for key, value in tells.items():
            assert key.split(".")[1] in PAGES, key
            assert isinstance(value, list) and value and all(str(v).strip() for v in value), key


def test_the_check_sees_a_tell_drawn_above_its_question(monkeypatch):
    """The check itself: a tell in a caption above the question is reported, the same caption after it is not,
    a number tell is not found inside a longer number, and an undeclared exercise is reported missing."""
    from streamlit.testing.v1 import AppTest

    def script():
        import streamlit as st

        from ui import anatomy

        if st.query_params.get("first") == "tell":
            st.caption("Var(q·k) = d_k, and 0.25 is not it")
        anatomy.exercise("plant_ex", "What is the variance?", ["1", "d_k"], 1, "because")
        anatomy.exercise("other_ex", "And this?", ["a", "b"], 0, "because")
        st.caption("Var(q·k) = d_k")

    real = catalog

    def planted(lang):
        return {**real(lang), "tells.plant.plant_ex": ["var(q·k) = d_k", "25"]}

    monkeypatch.setitem(globals(), "catalog", planted)
    for first, expect in (("tell", 1), ("question", 0)):
        at = AppTest.from_function(script, default_timeout=60)
        at.query_params["first"] = first
        at.run()
        assert exceptions(at) == []
        missing: set[str] = set()
        assert len(spoilers(at, "plant", "en", missing)) == expect
        assert missing == {"other_ex"}
    assert found("4", plain("smaller than MHA: 4 ×")) and not found("4", plain("0.4 and 48"))

"""Glossary: every term of the app in both languages, searchable, each linked to the page that teaches it.

The terms live in one file, assets/glossary.toml; the Chinese pages and lessons use its Chinese terms
(tests/test_zh_text.py checks that no rejected variant appears). The search box is bound to the URL
(``?q=``), so a link can open one term; what the learner types is only compared, never rendered as HTML.
"""
from __future__ import annotations

import unicodedata

import streamlit as st

from ui import anatomy
from ui.anatomy import md_escape
from ui.i18n import Unreadable, current_lang, glossary, t
from ui.registry import available_pages

NS = "glossary"
MAX_QUERY = 100
FILE, COMMAND = "assets/glossary.toml", "git checkout -- assets/glossary.toml"


def terms() -> tuple[dict, ...] | None:
    """The entries of assets/glossary.toml, in file order (the order of the pages); None, with the learner's
    message naming the file, if it is missing or damaged."""
    try:
        return glossary()
    except FileNotFoundError:
        anatomy.problem("common.file_missing", file=FILE, command=COMMAND)
    except Unreadable as err:
        anatomy.problem("common.file_damaged", file=FILE, command=COMMAND, detail=err.why.text())
    return None


def fold(text: str) -> str:
    """Case- and width-insensitive form for matching (full-width Latin letters fold to ASCII)."""
    return unicodedata.normalize("NFKC", text).casefold().strip()


def matches(term: dict, query: str) -> bool:
    """True if the folded query is part of the term or its definition, in either language."""
    q = fold(query)
    return not q or any(q in fold(term[field]) for field in ("en", "zh", "def_en", "def_zh"))


@st.fragment
def search_and_terms() -> None:
    """The search box and the terms it finds, as a fragment: typing reruns (and redraws) only this, not the page
    (the redraw budget, docs/performance.md)."""
    query = st.text_input(t(f"{NS}.search"), key="q", bind="query-params", max_chars=MAX_QUERY,
                          help=t(f"{NS}.search_help"))
    lang = current_lang()
    other = "zh" if lang == "en" else "en"
    pages = {spec.key: spec for spec in available_pages()}
    entries = terms()
    if entries is None:
        return
    shown = [term for term in entries if matches(term, query or "")]

    if not shown:
        anatomy.problem(f"{NS}.none", q=md_escape(query))
    elif query and query.strip():
        st.caption(t(f"{NS}.count", n=len(shown), total=len(entries)))
    else:
        st.caption(t(f"{NS}.count_all", total=len(entries)))

    for term in shown:
        with st.container(border=True):
            word, meaning, link = st.columns([3, 6, 3], vertical_alignment="center")
            word.markdown(f"**{term[lang]}**")
            word.caption(t(f"{NS}.other", lang=t(f"{NS}.lang_{other}"), term=term[other]))
            meaning.markdown(term[f"def_{lang}"])
            spec = pages.get(term["page"])
            if spec is not None:
                link.page_link(spec.file, label=t(f"nav.{spec.key}"), icon=spec.icon, help=t(f"{NS}.teaches"))


anatomy.header(NS)
search_and_terms()

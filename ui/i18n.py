"""Every word a learner reads, in both languages.

Labels live in ``assets/i18n/{lang}/{namespace}.toml`` and are addressed as
``"namespace.key"`` (nested tables give dotted keys); lesson prose lives in
``assets/lessons/{lang}/{name}.md``. The language comes from ``?lang=``, else the
browser locale (``st.context.locale``), else English; the switch sits in the router.
"""
from __future__ import annotations

import functools
import pathlib
import re
import string
import tomllib

import streamlit as st

ASSETS = pathlib.Path(__file__).resolve().parent.parent / "assets"
LANGS = ("en", "zh")
LANG_NAMES = {"en": "English", "zh": "中文"}
DEFAULT_LANG = "en"


def _flatten(table: dict, prefix: str = "") -> dict[str, object]:
    flat: dict[str, object] = {}
    for key, value in table.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            flat.update(_flatten(value, name + "."))
        else:
            flat[name] = value
    return flat


@functools.cache
def catalog(lang: str) -> dict[str, object]:
    """All labels of one language, keyed "namespace.key" (cached for the process)."""
    flat: dict[str, object] = {}
    for path in sorted((ASSETS / "i18n" / lang).glob("*.toml")):
        with path.open("rb") as fh:
            flat.update(_flatten(tomllib.load(fh), path.stem + "."))
    return flat


# a line break between two CJK characters is a soft wrap: Markdown would render it as a space
_CJK = "\u3000-\u303f\u4e00-\u9fff\uff00-\uffef"
_CJK_SOFT_WRAP = re.compile(rf"([{_CJK}][*_`]*)\n[ \t]*([*_`]*[{_CJK}])")


@functools.cache
def lesson_text(lang: str, name: str) -> str:
    text = (ASSETS / "lessons" / lang / f"{name}.md").read_text(encoding="utf-8")
    return _CJK_SOFT_WRAP.sub(r"\1\2", text)


def lesson_names(lang: str) -> set[str]:
    return {p.relative_to(ASSETS / "lessons" / lang).with_suffix("").as_posix()
            for p in (ASSETS / "lessons" / lang).rglob("*.md")}


def placeholders(text: str) -> set[str]:
    """The ``{name}`` fields of a format string (used to check both languages agree)."""
    return {field for _, field, _, _ in string.Formatter().parse(text) if field}


def locale_lang(locale: str | None) -> str:
    """Map a browser locale such as "zh-CN" or "en-GB" to one of LANGS."""
    if locale and locale.lower().startswith("zh"):
        return "zh"
    return DEFAULT_LANG


def current_lang() -> str:
    lang = st.session_state.get("lang")
    return lang if lang in LANGS else DEFAULT_LANG


# a test sets this to a set to record every (language, key) that t() and tl() look up (tests/test_i18n_keys.py)
looked_up: set[tuple[str, str]] | None = None


def t(key: str, **fields) -> str:
    """The label ``key`` in the current language, formatted with ``fields``."""
    if looked_up is not None:
        looked_up.add((current_lang(), key))
    value = catalog(current_lang()).get(key)
    if value is None:  # a missing key is a bug the i18n test catches; never crash a page
        value = catalog(DEFAULT_LANG).get(key, key)
    return str(value).format(**fields) if fields else str(value)


def tl(key: str) -> list:
    """A list-valued label (e.g. the bullet points of a lesson section)."""
    if looked_up is not None:
        looked_up.add((current_lang(), key))
    value = catalog(current_lang()).get(key)
    return list(value) if isinstance(value, list) else []


def lesson(name: str) -> str:
    return lesson_text(current_lang(), name)


def resolve_lang() -> str:
    """The language of this run: ?lang=, else the session's choice, else the browser locale."""
    asked = st.query_params.get("lang")
    if asked in LANGS:
        lang = asked
    elif st.session_state.get("lang") in LANGS:
        lang = st.session_state["lang"]
    else:
        try:
            lang = locale_lang(st.context.locale)
        except Exception:  # no browser context (e.g. bare script run)
            lang = DEFAULT_LANG
    st.session_state["lang"] = lang
    if st.query_params.get("lang") != lang:
        st.query_params["lang"] = lang  # the URL always says which language it shows
    return lang


def _switch_language() -> None:
    chosen = st.session_state.get("_lang_switch")
    if chosen in LANGS:
        st.session_state["lang"] = chosen
        st.query_params["lang"] = chosen


def language_switch() -> str:
    """The 中文 / English switch of the router; returns the language of this run."""
    lang = resolve_lang()
    st.session_state["_lang_switch"] = lang
    st.sidebar.segmented_control(
        "Language / 语言",
        options=list(LANGS),
        format_func=LANG_NAMES.get,
        key="_lang_switch",
        on_change=_switch_language,
        selection_mode="single",
    )
    return lang

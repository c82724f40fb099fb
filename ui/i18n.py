"""Every word a learner reads, in both languages.

Labels live in ``assets/i18n/{lang}/{namespace}.toml`` and are addressed as
``"namespace.key"`` (nested tables give dotted keys); lesson prose lives in
``assets/lessons/{lang}/{name}.md``. The language comes from ``?lang=``, else the
browser locale (``st.context.locale``), else English; the switch sits in the router.

A damaged or missing text file affects only what it holds: a label file that cannot be read is replaced by the
other language's copy (``catalog``) and the pages that use it say so (``label_notices``); a lesson file likewise
(``lesson``); the glossary page says its file is damaged (``glossary``). Why a file cannot be used is a ``Why``,
words-free, said in the learner's language when shown.
"""
from __future__ import annotations

import functools
import json
import pathlib
import pickle
import re
import string
import tomllib
from typing import NamedTuple

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


def other_lang(lang: str) -> str:
    return "zh" if lang == "en" else "en"


# ---------------------------------------------------------------- why a shipped file cannot be used

class Why(NamedTuple):
    """Why a shipped file cannot be used, in no language: the label ``common.why_<code>`` filled with ``facts``
    (names, numbers and shapes read from the file or expected by the code). ``note`` is the reader's own English
    words (a parser's message), added as code on English pages only: a Chinese page gives the translated reason
    alone."""
    code: str
    facts: tuple[tuple[str, object], ...] = ()
    note: str = ""

    def text(self, lang: str | None = None) -> str:
        """The reason in ``lang`` (default: the learner's), Markdown-safe (facts and note as inline code)."""
        lang = lang or current_lang()
        template = str(catalog(lang).get(f"common.why_{self.code}") or catalog(lang).get("common.why_unreadable",
                                                                                            self.code))
        try:
            text = template.format(**{k: _fact(v) for k, v in self.facts})
        except (KeyError, IndexError, ValueError):        # a fact the label does not name: the label alone
            text = template.split("{")[0].rstrip(" (（")
        if self.note and lang == "en":
            text = f"{text}: {_fact(self.note, 120)}"
        return text


class Unreadable(ValueError):
    """A text file is there but cannot be used; ``why`` says why."""

    def __init__(self, why: Why):
        super().__init__(why.text("en"))
        self.why = why



def _fact(value: object, limit: int = 60) -> str:
    """A value read from a file, shown as inline code: no Markdown, HTML or LaTeX in it renders, and backticks
    and line breaks cannot end it."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return str(value)
    text = " ".join(str(value).replace("`", "'").split())
    return f"`{text if len(text) <= limit else text[:limit - 1] + '…'}`"


def _clean(text: str, path: pathlib.Path | None) -> str:
    """One line of a reader's message, without the server's paths."""
    text = str(text)
    if path is not None:
        text = text.replace(str(path), path.name)
    text = text.replace(str(ASSETS.parent), "…")
    text = re.split(r"(?<=\.)\s|\n", text, maxsplit=1)[0].strip().rstrip(".")
    return text if len(text) <= 120 else text[:119] + "…"


def why_of(err: BaseException, path: pathlib.Path | None = None) -> Why:
    """Why reading ``path`` raised ``err``: a missing-file reason, an empty or cut-short file, a folder in its
    place, a file of another format, or (for a reader's own complaint) its words as an English-only note.
    Understands attention_core.models.recipes.DamagedFile (its ``code`` and ``facts``, or the reader's error)."""
    code, facts = getattr(err, "code", None), getattr(err, "facts", None)
    if isinstance(code, str) and code and isinstance(facts, dict):
        return Why(code, tuple(facts.items()))
    if isinstance(err, Unreadable):
        return err.why
    if isinstance(getattr(err, "error", None), BaseException):      # DamagedFile around the reader's exception
        err = err.error
    try:
        if path is not None and path.is_file() and path.stat().st_size == 0:
            return Why("empty")
    except OSError:
        pass
    message = str(err)
    if isinstance(err, FileNotFoundError):
        return Why("missing")
    if isinstance(err, IsADirectoryError):
        return Why("folder")
    if isinstance(err, EOFError):
        return Why("truncated")
    if isinstance(err, UnicodeDecodeError):
        return Why("encoding")
    if isinstance(err, json.JSONDecodeError):
        return Why("json", (("line", err.lineno),))
    if isinstance(err, tomllib.TOMLDecodeError):
        at = re.search(r"at line (\d+)", message)
        return Why("toml", (("line", int(at.group(1))),)) if at else Why("toml_end")
    if isinstance(err, pickle.UnpicklingError) or "magic number" in message:
        return Why("not_checkpoint")
    if "zip archive" in message or "central directory" in message:
        return Why("truncated")
    if isinstance(err, (ValueError, KeyError, TypeError, IndexError)):
        return Why("content", note=_clean(message, path))
    return Why("unreadable", note=_clean(f"{type(err).__name__}: {message}".rstrip(": "), path))


# ---------------------------------------------------------------- labels

def _label_file(lang: str, namespace: str) -> str:
    """Where a label file lives in the repository (never the server's path)."""
    return f"assets/i18n/{lang}/{namespace}.toml"


@functools.cache
def _namespace(lang: str, namespace: str) -> dict[str, object] | Why:
    """The labels of one file, or why it cannot be read."""
    path = ASSETS / "i18n" / lang / f"{namespace}.toml"
    try:
        with path.open("rb") as fh:
            return _flatten(tomllib.load(fh), namespace + ".")
    except Exception as err:         # missing, a folder, not UTF-8, not TOML: only this file's labels are lost
        return why_of(err, path)


@functools.cache
def _namespaces() -> tuple[str, ...]:
    """Every label file's name, in either language."""
    return tuple(sorted({p.stem for lang in LANGS for p in (ASSETS / "i18n" / lang).glob("*.toml")}))


@functools.cache
def catalog(lang: str) -> dict[str, object]:
    """All labels of one language, keyed "namespace.key" (cached for the process). The labels of a file of
    ``lang`` that is missing or damaged are the other language's (``damaged_labels`` names the file)."""
    flat: dict[str, object] = {}
    for namespace in _namespaces():
        got = _namespace(lang, namespace)
        if isinstance(got, Why):
            got = _namespace(other_lang(lang), namespace)
        if isinstance(got, dict):
            flat.update(got)
    return flat


def damaged_labels(lang: str) -> dict[str, Why]:
    """namespace -> why its file of ``lang`` cannot be read (missing or damaged)."""
    return {ns: got for ns in _namespaces() if isinstance(got := _namespace(lang, ns), Why)}


def reload() -> None:
    """Read every label, lesson and glossary file again (after ``ASSETS`` moves, e.g. in a test)."""
    for cached in (_namespace, _namespaces, catalog, lesson_text, _glossary):
        cached.cache_clear()


def label_notices(*namespaces: str) -> None:
    """On a page that uses these label files (its own, "common", "nav"): one message per file of the learner's
    language that is missing or damaged, naming it; the page goes on with the other language's labels."""
    lang = current_lang()
    broken = damaged_labels(lang)
    for ns in dict.fromkeys(namespaces):
        why = broken.get(ns)
        if why is None:
            continue
        file, other = _label_file(lang, ns), other_lang(lang)
        if isinstance(_namespace(other, ns), Why):
            key = "common.labels_lost"
        else:
            key = "common.labels_missing" if why.code == "missing" else "common.labels_damaged"
        st.warning(t(key, file=file, detail=why.text(lang), other=t(f"common.lang_name_{other}"),
                     command=f"git checkout -- {file}"), icon=":material/info:")


# a line break between two CJK characters is a soft wrap: Markdown would render it as a space
_CJK = "\u3000-\u303f\u4e00-\u9fff\uff00-\uffef"
_CJK_SOFT_WRAP = re.compile(rf"([{_CJK}][*_`]*)\n[ \t]*([*_`]*[{_CJK}])")


@functools.cache
def lesson_text(lang: str, name: str) -> str:
    """The lesson ``name`` of ``lang`` as written; raises OSError or UnicodeDecodeError if it cannot be read."""
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
    lang = current_lang()
    if looked_up is not None:
        looked_up.add((lang, key))
    value = catalog(lang).get(key)
    if value is None:  # a missing key is a bug the i18n test catches; never crash a page
        value = catalog(other_lang(lang)).get(key, key)
    return str(value).format(**fields) if fields else str(value)


def tl(key: str) -> list:
    """A list-valued label (e.g. the bullet points of a lesson section)."""
    if looked_up is not None:
        looked_up.add((current_lang(), key))
    value = catalog(current_lang()).get(key)
    return list(value) if isinstance(value, list) else []


def lesson(name: str) -> str:
    """The lesson ``name`` in the learner's language. If its file is missing or damaged: the other language's,
    under a message naming the file; if that one cannot be read either, the message alone."""
    lang = current_lang()
    try:
        return lesson_text(lang, name)
    except (OSError, ValueError) as err:     # missing, a folder, not UTF-8: only this lesson is lost
        why = why_of(err, ASSETS / "lessons" / lang / f"{name}.md")
    file, other = f"assets/lessons/{lang}/{name}.md", other_lang(lang)
    fields = dict(file=file, detail=why.text(lang), other=t(f"common.lang_name_{other}"),
                  command=f"git checkout -- {file}")
    try:
        text = lesson_text(other, name)
    except (OSError, ValueError):
        return f":material/info: *{t('common.lesson_lost', **fields)}*"
    key = "common.lesson_missing" if why.code == "missing" else "common.lesson_damaged"
    return f":material/info: *{t(key, **fields)}*\n\n{text}"


# ---------------------------------------------------------------- the glossary

GLOSSARY_FILE = "glossary.toml"                  # in ASSETS
GLOSSARY_FIELDS = ("en", "zh", "def_en", "def_zh", "page")


@functools.cache
def _glossary() -> tuple[dict, ...] | Why:
    path = ASSETS / GLOSSARY_FILE
    try:
        with path.open("rb") as fh:
            doc = tomllib.load(fh)
    except Exception as err:                     # missing, a folder, not UTF-8, not TOML
        return why_of(err, path)
    entries = doc.get("term")
    if not isinstance(entries, list) or not entries:
        return Why("fields", (("fields", "[[term]]"),))
    for n, entry in enumerate(entries, 1):
        lacking = [f for f in GLOSSARY_FIELDS if not isinstance(entry, dict) or not isinstance(entry.get(f), str)]
        if lacking:
            return Why("entry", (("n", n), ("fields", ", ".join(lacking))))
    return tuple(entries)


def glossary() -> tuple[dict, ...]:
    """The entries of assets/glossary.toml, in file order (the order of the pages); raises FileNotFoundError or
    Unreadable (with its Why) if the file is missing or cannot be used."""
    got = _glossary()
    if isinstance(got, Why):
        if got.code == "missing":
            raise FileNotFoundError(f"assets/{GLOSSARY_FILE}")
        raise Unreadable(got)
    return got


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

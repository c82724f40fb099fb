"""A poll's question and options in every language: the catalog labels they were made from, found again.

A page calls ``anatomy.exercise(key, t("masking.ex_question"), [t("masking.ex_opt0"), ...], ...)``: the exercise
receives text in the teacher's language. A student may read the other one, so the room stores a *reference*
per text: the catalog key (and the item of a list label) whose template produced it, and the values filled into
its ``{fields}``, found by matching the text against the templates of the teacher's language (``reference``).
Each session then writes the text in its own language from that language's template (``render``). A field value
that is itself a label (a word the page translated) is translated too. Text no template produced (none today:
tests/test_poll.py checks every exercise of every page) keeps the teacher's wording.
"""
from __future__ import annotations

import functools
import re
import string

from .i18n import LANGS, catalog

MAX_FIELD_CHARS = 400
_FORMATTER = string.Formatter()


def _entries(lang: str):
    """(key, item, template) of every text label of ``lang`` (list labels item by item)."""
    for key, value in catalog(lang).items():
        if isinstance(value, str):
            yield key, None, value
        elif isinstance(value, list):
            for i, item in enumerate(value):
                if isinstance(item, str):
                    yield key, i, item


@functools.cache
def _literals(lang: str) -> dict[str, tuple[str, int | None]]:
    """Text -> (key, item) of labels without fields (t() returns them as written)."""
    out: dict[str, tuple[str, int | None]] = {}
    for key, item, text in _entries(lang):
        out.setdefault(text, (key, item))
    return out


def _parse(template: str):
    try:
        return list(_FORMATTER.parse(template))
    except ValueError:
        return None


@functools.cache
def _patterns(lang: str) -> list[tuple[re.Pattern, int, str, int | None]]:
    """(regex, literal length, key, item) of every label with fields, most literal text first."""
    out = []
    for key, item, template in _entries(lang):
        parts = _parse(template)
        if not parts or not any(name for _, name, _, _ in parts):
            continue
        regex, seen, literal = [], set(), 0
        for text, name, _spec, _conv in parts:
            regex.append(re.escape(text))
            literal += len(text)
            if name is None:
                continue
            if not name.isidentifier():           # {0}, {a.b}, {a[0]}: not a field t() fills by name
                regex = None
                break
            regex.append(f"(?P={name})" if name in seen else f"(?P<{name}>.+?)")
            seen.add(name)
        if regex is not None and literal >= 3:
            out.append((re.compile("".join(regex), re.S), literal, key, item))
    out.sort(key=lambda p: -p[1])
    return out


def reference(text: str, lang: str, prefer: str = "") -> dict:
    """What the room stores for a text shown in ``lang``: {"key", "item", "fields", "text"}; key None when no
    label produced it. ``prefer``: a namespace tried first ("masking."), where two labels would fit."""
    text = str(text)
    ref = {"key": None, "item": None, "fields": {}, "text": text[:MAX_FIELD_CHARS * 4]}
    found = _literals(lang).get(text)
    if found:
        ref["key"], ref["item"] = found
        return ref
    best = None
    for pattern, literal, key, item in _patterns(lang):
        if best is not None and literal < best[0]:
            break
        m = pattern.fullmatch(text)
        if m and (best is None or (key.startswith(prefer) and prefer and not best[1].startswith(prefer))):
            best = (literal, key, item, m.groupdict())
    if best is not None:
        _, ref["key"], ref["item"], fields = best
        ref["fields"] = {name: _field(value, lang) for name, value in fields.items()}
    return ref


def _field(value: str, lang: str):
    """A field's value: a label of ``lang`` becomes {"key", "item"} (translated when shown), anything else is kept
    as written (numbers the page formatted, a token)."""
    value = value[:MAX_FIELD_CHARS]
    found = _literals(lang).get(value)
    if found and len(value) > 1 and any(ch.isalpha() for ch in value):
        return {"key": found[0], "item": found[1]}
    return value


def _label(key: str, item: int | None, lang: str) -> str | None:
    value = catalog(lang).get(key)
    if item is not None:
        value = value[item] if isinstance(value, list) and 0 <= item < len(value) else None
    return value if isinstance(value, str) else None


def render(ref: dict, lang: str) -> str:
    """The text of a reference in ``lang`` (the teacher's wording when it has no label, or a field is missing)."""
    fallback = str(ref.get("text", ""))
    key = ref.get("key")
    if not isinstance(key, str) or lang not in LANGS:
        return fallback
    template = _label(key, ref.get("item"), lang)
    if template is None:
        return fallback
    fields = ref.get("fields") or {}
    if not fields:
        return template
    parts = _parse(template)
    if parts is None:
        return fallback
    out = []
    for text, name, _spec, _conv in parts:
        out.append(text)
        if name is None:
            continue
        value = fields.get(name)
        if isinstance(value, dict):
            value = _label(str(value.get("key")), value.get("item"), lang)
        if not isinstance(value, str):
            return fallback
        out.append(value)
    return "".join(out)

"""Controls shared by pages, bound to the URL so a teacher can share an exact setup."""
from __future__ import annotations

from collections.abc import Sequence

import streamlit as st

from attention_core.text import tokenize
from serving import url_guard

from .anatomy import problem
from .i18n import LANGS, catalog, t

MAX_CHARS = 2000
MAX_TOKENS = 64


def sentence(key: str = "text", default: str | None = None, *, max_tokens: int = MAX_TOKENS,
             min_tokens: int = 1, label: str | None = None) -> list[str] | None:
    """A text box whose content becomes tokens; None (after a message) when unusable.

    Empty text, too few tokens and very long text get a message in the learner's
    language; long text is cut to ``max_tokens`` tokens with a note.
    """
    text = st.text_input(label or t("common.sentence"), value=default or t("common.default_sentence"),
                         key=key, bind="query-params", max_chars=MAX_CHARS)
    tokens = tokenize(text)
    if not tokens:
        problem("common.err_empty")
        return None
    if len(tokens) < min_tokens:
        problem("common.err_too_few", n=len(tokens), min=min_tokens)
        return None
    if len(tokens) > max_tokens:
        problem("common.warn_truncated", n=len(tokens), max=max_tokens)
        tokens = tokens[:max_tokens]
    return tokens


def seed(key: str = "seed", width: int | str = "stretch") -> int:
    """The URL-bound random seed (0-9999); ``width`` in px for a narrow box beside other controls."""
    return int(st.number_input(t("common.seed"), min_value=0, max_value=9999, value=0, step=1,
                               key=key, bind="query-params", width=width))


def kept_row(name: str, n: int) -> int | None:
    """The heatmap row the learner clicked earlier, kept in the URL as ``?name=i`` (None if absent or not
    one of the ``n`` rows now shown)."""
    try:
        row = int(st.query_params.get(name, ""))
    except ValueError:
        return None
    return row if 0 <= row < n else None


def keep_row(name: str, picked: int | None, n: int, default: int) -> int:
    """Keep a click on a heatmap row in the URL (``?name=i``) so a shared link shows the same row, and return
    the row to explain: this click, else the one in the URL, else ``default``."""
    if picked is not None and 0 <= picked < n:
        st.query_params[name] = str(picked)
        return picked
    row = kept_row(name, n)
    return default if row is None else row


def cap_selection(key: str, max_selections: int) -> None:
    """Call before the ``st.multiselect(key=key, max_selections=...)`` it guards: a selection longer than the
    widget allows (a forged client message or session state; Streamlit itself cuts a link's list) is cut to
    its first ``max_selections`` entries with a message, where Streamlit would raise
    StreamlitSelectionCountExceedsMaxError."""
    chosen = st.session_state.get(key)
    if isinstance(chosen, (list, tuple)) and len(chosen) > max_selections:
        st.session_state[key] = list(chosen)[:max_selections]
        problem("common.err_too_many", n=len(chosen), max=max_selections)


def tab_labels(ns: str, names: Sequence[str], key: str = "tab") -> list[str]:
    """Tab labels (they are the URL value); a tab named in the other language (URL or session) stays open."""
    labels = [t(f"{ns}.{name}") for name in names]
    current = st.session_state.get(key) or st.query_params.get(key)
    if current is not None and current not in labels:
        for lang in LANGS:
            other = [str(catalog(lang).get(f"{ns}.{name}")) for name in names]
            if current in other:
                st.session_state[key] = labels[other.index(current)]
                url_guard.adopted(key)
                break
    return labels


def adopt_click(chart_key: str, selection: str, field: str, widget_key: str, valid) -> None:
    """A click on a chart becomes the value of a URL-bound select box (set before the box is drawn).

    The chart keeps its last selection across reruns; only a new click overrides the box, so the
    box can still be changed by hand afterwards."""
    try:
        points = st.session_state[chart_key]["selection"][selection] or []
    except (KeyError, TypeError):
        points = []
    points = points if isinstance(points, list) else [points]
    picked = next((int(p[field]) for p in points if isinstance(p, dict) and field in p), None)
    memo = f"_{chart_key}_adopted"
    if picked is None:
        st.session_state.pop(memo, None)
    elif picked != st.session_state.get(memo):
        st.session_state[memo] = picked
        if picked in valid:
            st.session_state[widget_key] = picked

"""The alignment page: one date in every supported form, and checking a model's answer against the
typed input; where each part of an answer reads in the alignment.

First tutorial, section 4.1 (Bahdanau attention), on the shipped date model (``models.seq2seq``).
"""
from __future__ import annotations

import datetime as _dt
from collections.abc import Sequence

import numpy as np

from ..models.tasks import DATE_FORMATS, DATE_MAX, DATE_MIN, normalize_date_text

# ------------------------------------------------------------------------------------------------
# Dates: one date in every supported form, and checking an answer against the input
# ------------------------------------------------------------------------------------------------


class _Pick:
    """A stand-in for ``random.Random`` that makes a format's optional variant always (or never)
    happen: the renderers only call ``random()`` (e.g. 零 instead of 〇, 星期天 instead of 星期日)."""

    def __init__(self, value: float):
        self.value = value

    def random(self) -> float:
        return self.value


def date_forms(date: _dt.date, formats: Sequence[str] | None = None) -> list[tuple[str, str]]:
    """(format id, normalised text) of ``date`` in each format (all of them by default)."""
    chosen = [f for f in DATE_FORMATS if formats is None or f.id in formats]
    return [(f.id, normalize_date_text(f.render(date, _Pick(0.99)))) for f in chosen]


def parse_iso(text: str) -> _dt.date | None:
    """A model's answer as a date, or None if it is not a real "YYYY-MM-DD" date in the task's range."""
    if len(text) != 10:
        return None
    try:
        d = _dt.date.fromisoformat(text)
    except ValueError:
        return None
    return d if DATE_MIN <= d <= DATE_MAX else None


def matching_form(text: str, answer: str) -> str | None:
    """The id of the format in which the date ``answer`` (ISO) is written exactly as ``text``.

    None when ``answer`` is not a date or no supported form of it reads as ``text``: either the
    model is wrong or the input is not one of the supported forms. Every variant of a format is
    tried (〇 and 零, 星期日 and 星期天)."""
    d = parse_iso(answer)
    if d is None:
        return None
    typed = normalize_date_text(text)
    for f in DATE_FORMATS:
        for pick in (0.0, 0.99):
            if normalize_date_text(f.render(d, _Pick(pick))) == typed:
                return f.id
    return None


def part_focus(alignment, parts: dict[str, Sequence[int]]) -> dict[str, tuple[list[int], float]]:
    """Where each part of an answer reads: for each named group of output rows (e.g. the year digits
    0-3 of "YYYY-MM-DD"), the input positions that are some row's largest weight (sorted, distinct)
    and the mean of those rows' largest weights."""
    w = np.asarray(alignment, dtype=np.float64)
    out = {}
    for name, rows in parts.items():
        rows = [r for r in rows if r < w.shape[0]]
        if not rows:
            out[name] = ([], float("nan"))
            continue
        out[name] = (sorted(set(int(j) for j in w[rows].argmax(-1))), float(w[rows].max(-1).mean()))
    return out

"""The alignment page: one date in every supported form, and checking a model's answer against the
typed input; where each part of an answer reads in the alignment.

First tutorial, section 4.1 (Bahdanau attention), on the shipped date model (``models.seq2seq``).
"""
from __future__ import annotations

import datetime as _dt
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np
import torch

from ..models.recipes import LoadedModel
from ..models.seq2seq import decode_as_tutorial, translate, translate_one
from ..models.tasks import DATE_FORMATS, DATE_MAX, DATE_MIN, normalize_date_text, unknown_chars

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


# ------------------------------------------------------------------------------------------------
# The date model on the learner's input, on several forms, and batched the tutorial's way
# ------------------------------------------------------------------------------------------------

class DateCheck(NamedTuple):
    """Typed text, normalised (``normalize_date_text``), and ``problem``: None (read ``text``), "empty",
    "long" (more than the allowed characters) or "unknown" (``bad``: characters the model never saw)."""

    text: str
    bad: list[str]
    problem: str | None


def check_date_text(typed: str, max_len: int) -> DateCheck:
    text = normalize_date_text(typed)
    bad = unknown_chars(text) if 0 < len(text) <= max_len else []
    problem = "empty" if not text else ("long" if len(text) > max_len else ("unknown" if bad else None))
    return DateCheck(text, bad, problem)


class DateReading(NamedTuple):
    """The attention model's answer to one date and its alignment (len(output), len(text)); the
    model without attention's answer (None without that model); the form the answer is confirmed in."""

    output: str
    weights: np.ndarray
    plain: str | None
    form: str | None


def read_date(model: LoadedModel, plain: LoadedModel | None, text: str, max_len: int) -> DateReading:
    r = translate_one(model.model, text, model.src_vocab, model.tgt_vocab, max_len)
    other = None if plain is None else translate_one(plain.model, text, plain.src_vocab, plain.tgt_vocab,
                                                     max_len).output
    return DateReading(r.output, r.alignment.numpy(), other, matching_form(text, r.output))


class FormReading(NamedTuple):
    """One date written in ``form`` (as ``text``), the answer and its alignment."""

    form: str
    text: str
    output: str
    weights: np.ndarray


def read_forms(model: LoadedModel, date: _dt.date, forms: Sequence[str], max_len: int) -> list[FormReading]:
    """``date`` written in each of ``forms``, through the model in one batch."""
    texts = date_forms(date, forms)
    with torch.inference_mode():
        outs = translate(model.model, [s for _, s in texts], model.src_vocab, model.tgt_vocab, max_len=max_len)
    return [FormReading(f, s, o.output, o.alignment.numpy()) for (f, s), o in zip(texts, outs)]


class BatchedDate(NamedTuple):
    """The answer when batched with a longer date the tutorial's way, and the mean attention on pads."""

    output: str
    pad: float


def batched_as_tutorial(model: LoadedModel, text: str, partner: str, max_len: int) -> BatchedDate:
    r = decode_as_tutorial(model.model, [text, partner], model.src_vocab, model.tgt_vocab, max_len)[0]
    return BatchedDate(r.output, float(r.alignment[:, len(text):].sum(-1).mean()) if len(r.output) else 0.0)

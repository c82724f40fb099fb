"""Glue of the bottleneck, alignment and training-live pages, over ``seq2seq`` and ``tasks``.

Nothing new is learned here: these helpers run the shipped Seq2Seq models the way the pages need
(per-character marks, accuracy by output position, one date in every supported form, the
tutorial's batching without packing or mask) and return plain Python / numpy values.
First tutorial, sections 1.2 and 2 (the fixed context vector) and 4.1 (Bahdanau attention).
"""
from __future__ import annotations

import datetime as _dt
import random
import unicodedata
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np
import torch

from .seq2seq import Seq2Seq, Translation, encode_sources, translate
from .tasks import (
    DATE_FORMATS,
    DATE_MAX,
    DATE_MIN,
    REVERSE_VOCAB,
    Vocab,
    make_reverse_example,
    normalize_date_text,
)

# ------------------------------------------------------------------------------------------------
# Marking an answer character by character
# ------------------------------------------------------------------------------------------------


class CharMark(NamedTuple):
    """Position ``i`` of an answer: what should be there, what the model wrote (None = nothing)."""

    expected: str | None
    got: str | None

    @property
    def ok(self) -> bool:
        return self.expected is not None and self.expected == self.got


def compare_chars(output: str, target: str) -> list[CharMark]:
    """Position-by-position marks over max(len(output), len(target)) positions: a missing character
    (output too short) and an extra one (output too long) are both wrong."""
    n = max(len(output), len(target))
    return [CharMark(target[i] if i < len(target) else None, output[i] if i < len(output) else None)
            for i in range(n)]


def char_accuracy(output: str, target: str) -> float:
    """Share of positions marked right by ``compare_chars`` (the evaluation's per-character accuracy)."""
    marks = compare_chars(output, target)
    return sum(m.ok for m in marks) / max(len(marks), 1)


# ------------------------------------------------------------------------------------------------
# Reversal: a batch of fresh examples at one length
# ------------------------------------------------------------------------------------------------


class LengthCheck(NamedTuple):
    length: int
    n: int
    exact: float                # share of answers exactly right
    char: float                 # mean per-character accuracy
    by_position: np.ndarray     # (length,) share right at each output position


def reverse_check(model: Seq2Seq, length: int, n: int = 100, seed: int = 0,
                  vocab: Vocab = REVERSE_VOCAB) -> LengthCheck:
    """``n`` fresh digit strings of ``length`` (from ``random.Random(seed)``), reversed by ``model``."""
    rng = random.Random(seed)
    pairs = [make_reverse_example(rng, length) for _ in range(n)]
    with torch.inference_mode():
        outs = translate(model, [s for s, _ in pairs], vocab, vocab, max_len=length + 5)
    right = np.array([[m.ok for m in compare_chars(o.output, t)[:length]] for o, (_, t) in zip(outs, pairs)])
    exact = float(np.mean([o.output == t for o, (_, t) in zip(outs, pairs)]))
    char = float(np.mean([char_accuracy(o.output, t) for o, (_, t) in zip(outs, pairs)]))
    return LengthCheck(length, n, exact, char, right.mean(0))


def random_digits(length: int, seed: int) -> str:
    """The digit string the pages generate for (length, seed): ``make_reverse_example``'s source."""
    return make_reverse_example(random.Random(seed), length)[0]


def clean_digits(text: str) -> tuple[str, list[str]]:
    """Typed text -> (digits, characters that are not digits). Full-width digits count (NFKC);
    white space is ignored."""
    text = "".join(unicodedata.normalize("NFKC", text).split())
    bad: list[str] = []
    for c in text:
        if not ("0" <= c <= "9") and c not in bad:
            bad.append(c)
    return ("" if bad else text), bad


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


def translate_one(model: Seq2Seq, text: str, src_vocab: Vocab, tgt_vocab: Vocab, max_len: int) -> Translation:
    """``seq2seq.translate`` of one source, without autograd bookkeeping."""
    with torch.inference_mode():
        return translate(model, [text], src_vocab, tgt_vocab, max_len=max_len)[0]


# ------------------------------------------------------------------------------------------------
# The tutorial's batching: pads run through the LSTM and attention sees them
# ------------------------------------------------------------------------------------------------


def decode_as_tutorial(model: Seq2Seq, texts: Sequence[str], src_vocab: Vocab, tgt_vocab: Vocab,
                       max_len: int) -> list[Translation]:
    """Greedy decoding of a padded batch as the tutorial's ``Encoder`` would run it.

    The tutorial's encoder takes no lengths: every sequence of the batch is padded to the longest,
    the LSTM reads the pads too, its final state (the context vector) is the one after the pads,
    and attention has no mask, so it can put weight on <pad>. Here: every length is set to the
    padded length, which gives exactly that. Each alignment keeps all padded columns.
    """
    src, lengths = encode_sources(texts, src_vocab)
    full = torch.full_like(lengths, src.size(1))
    with torch.inference_mode():
        toks, weights = model.greedy_decode(src, full, max_len)
    out = []
    for i, text in enumerate(texts):
        keep = []
        for t, tok in enumerate(toks[i].tolist()):
            if tok == tgt_vocab.eos_id:
                break
            if tok not in (tgt_vocab.pad_id, tgt_vocab.sos_id):
                keep.append(t)
        symbols = tgt_vocab.decode(toks[i, keep].tolist(), stop_at_eos=False)
        align = weights[i, keep].clone() if weights is not None else None
        out.append(Translation("".join(symbols), align, text))
    return out


# ------------------------------------------------------------------------------------------------
# Training live
# ------------------------------------------------------------------------------------------------


def smooth(values: Sequence[float], window: int) -> np.ndarray:
    """Trailing moving average: element i is the mean of values[max(0, i - window + 1) .. i]."""
    x = np.asarray(values, dtype=np.float64)
    if window < 1:
        raise ValueError(f"window must be >= 1, got {window}")
    if x.size == 0:
        return x
    c = np.concatenate([[0.0], np.cumsum(x)])
    i = np.arange(1, x.size + 1)
    lo = np.maximum(0, i - window)
    return (c[i] - c[lo]) / (i - lo)

"""The bottleneck page: marking an answer character by character, reversal of fresh digit strings
at one length (accuracy by output position), and typed digits cleaned.

Nothing new is learned here: these helpers run the shipped Seq2Seq models (``models.seq2seq``,
``models.tasks``) the way the page needs and return plain Python / numpy values.
First tutorial, sections 1.2 and 2 (the fixed context vector).
"""
from __future__ import annotations

import random
import unicodedata
from typing import NamedTuple

import numpy as np
import torch

from ..models.seq2seq import Seq2Seq, translate
from ..models.tasks import REVERSE_VOCAB, Vocab, make_reverse_example

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

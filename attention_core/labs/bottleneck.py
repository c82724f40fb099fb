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

from ..models.seq2seq import Seq2Seq, decode_as_tutorial, translate
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


# ------------------------------------------------------------------------------------------------
# One digit string through both models; the tutorial's batching
# ------------------------------------------------------------------------------------------------

class Answers(NamedTuple):
    """Both models' answers to one digit string, and the attention model's alignment
    (len(attention), len(digits)): row i = where output character i read."""

    no_attention: str
    attention: str
    alignment: np.ndarray


def answers(plain: Seq2Seq, attentive: Seq2Seq, digits: str, vocab: Vocab = REVERSE_VOCAB) -> Answers:
    with torch.inference_mode():
        (bare,), (looked,) = (translate(m, [digits], vocab, vocab, max_len=len(digits) + 5) for m in (plain, attentive))
    return Answers(bare.output, looked.output, looked.alignment.numpy())


class BatchedAnswer(NamedTuple):
    """A short string's answer alone and batched with a long one the tutorial's way (pads seen by the
    encoder and the attention); pad_mass: mean attention on the pads (None without attention)."""

    alone: str
    batched: str
    pad_mass: float | None


def batched_as_tutorial(model: Seq2Seq, short: str, long: str, vocab: Vocab = REVERSE_VOCAB) -> BatchedAnswer:
    with torch.inference_mode():
        alone = translate(model, [short], vocab, vocab, max_len=len(short) + 5)[0]
    padded = decode_as_tutorial(model, [short, long], vocab, vocab, len(long) + 5)[0]
    pad_mass = None if padded.alignment is None else float(padded.alignment[:, len(short):].sum(-1).mean())
    return BatchedAnswer(alone.output, padded.output, pad_mass)


class DigitsCheck(NamedTuple):
    """Typed digits, cleaned (``clean_digits``), and ``problem``: None (run ``digits``), "chars" (``bad``
    lists the characters that are not digits), "empty" or "long" (more digits than allowed)."""

    digits: str
    bad: list[str]
    problem: str | None


def check_digits(text: str, max_len: int) -> DigitsCheck:
    digits, bad = clean_digits(text)
    problem = "chars" if bad else ("empty" if not digits else ("long" if len(digits) > max_len else None))
    return DigitsCheck(digits, bad, problem)

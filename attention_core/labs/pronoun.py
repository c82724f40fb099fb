"""Glue for the "it" page (the analysis page reads the same sentences): sentences built from the
grammar's word lists, the adjective flip, fresh batches, what the trained heads do from the pronoun.
The analysis page's own statistics are in ``labs.analysis``.

The model is ``models.pronoun.PronounResolver`` (section 5.2 of the first tutorial: "The animal didn't
cross the street because it was too tired"): an encoder whose answer is read, as a word, from the
pronoun's final vector, so the only attention in it is the encoder's own. The statistics are those
of ``analysis`` (entropy, sparsity, head patterns). Nothing here trains: it reads a trained model.
"""
from __future__ import annotations

import random
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np
import torch

from ..models.pronoun import PronounResolver, Resolution, make_pronoun_batch
from ..models.tasks import (
    PRONOUN_LANGS,
    PRONOUN_TOKEN,
    PronounExample,
    PronounTemplate,
    Vocab,
    make_pronoun_example,
    pronoun_template,
)

# --------------------------------------------------------------------------------------------------
# sentences from the grammar
# --------------------------------------------------------------------------------------------------


def _k(lang: str) -> int:
    if lang not in PRONOUN_LANGS:
        raise ValueError(f"lang must be one of {PRONOUN_LANGS}, got {lang!r}")
    return 0 if lang == "en" else 1


def adjective_ids(template: PronounTemplate | str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """English ids of the adjectives that make "it" the first noun, and those that make it the second."""
    t = pronoun_template(template) if isinstance(template, str) else template
    return tuple(a[0] for a in t.adj_first), tuple(a[0] for a in t.adj_second)


def word(template: PronounTemplate | str, slot: str, word_id: str, lang: str) -> str:
    """The ``lang`` word of ``word_id`` (its English form) in a slot "A", "B" or "ADJ" of the template."""
    t = pronoun_template(template) if isinstance(template, str) else template
    groups = {"A": t.nouns_a, "B": t.nouns_b, "ADJ": t.adj_first + t.adj_second}[slot]
    for pair in groups:
        if pair[0] == word_id:
            return pair[_k(lang)]
    raise ValueError(f"{word_id!r} cannot fill slot {slot} of template {t.id!r}")


def build_example(template: str, lang: str, a: str, b: str, adjective: str) -> PronounExample:
    """The sentence of ``template`` in ``lang`` with nouns ``a``, ``b`` and ``adjective`` (English ids,
    e.g. ("cross", "zh", "animal", "street", "tired") -> 动物没有过马路，因为它太累了。). The label
    follows from the adjective: 0 ("it" = the first noun) for the template's first group."""
    t = pronoun_template(template)
    if a == b:
        raise ValueError("the two nouns must differ, else “it” has no single answer")
    first, _ = adjective_ids(t)
    fill = {"A": word(t, "A", a, lang), "B": word(t, "B", b, lang), "ADJ": word(t, "ADJ", adjective, lang)}
    slots = t.tokens(lang)
    tokens = tuple(fill.get(s, s) for s in slots)
    return PronounExample(tokens, lang, t.id, (slots.index("A"), slots.index("B")),
                          tokens.index(PRONOUN_TOKEN[lang]), fill["ADJ"], 0 if adjective in first else 1)


def example_ids(example: PronounExample) -> tuple[str, str, str]:
    """(first noun, second noun, adjective) of a sentence as English ids (inverse of build_example)."""
    t = pronoun_template(example.template)
    k = _k(example.lang)
    a, b = (example.tokens[i] for i in example.nouns)
    find = lambda w, group: next(p[0] for p in group if p[k] == w)  # noqa: E731
    return find(a, t.nouns_a), find(b, t.nouns_b), find(example.adjective, t.adj_first + t.adj_second)


def flipped(example: PronounExample, adjective: str | None = None) -> PronounExample:
    """The same sentence with an adjective of the other group (``adjective``, an English id, or the
    other group's first): the referent flips, nothing else changes."""
    first, second = adjective_ids(example.template)
    other = second if example.label == 0 else first
    adjective = other[0] if adjective is None else adjective
    if adjective not in other:
        raise ValueError(f"{adjective!r} does not flip the referent of {example.template!r}; choose from {other}")
    a, b, _ = example_ids(example)
    return build_example(example.template, example.lang, a, b, adjective)


def fresh_examples(seed: int, n: int, langs: Sequence[str] = PRONOUN_LANGS,
                   split: str | None = "heldout") -> list[PronounExample]:
    """``n`` random sentences from ``seed``, languages taking turns. ``split="heldout"`` (default):
    only noun pairs the shipped model never saw in training (``tasks.is_heldout_pair``)."""
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    rng = random.Random(seed)
    return [make_pronoun_example(rng, lang=langs[i % len(langs)], split=split) for i in range(n)]


# --------------------------------------------------------------------------------------------------
# what the heads do from the pronoun, over a batch
# --------------------------------------------------------------------------------------------------

class PronounProfile(NamedTuple):
    """Mean attention from "it"/"它" over a batch, per encoder layer and head (L, h), on the referent,
    on the other noun and on the adjective (the clue); ``correct`` (b,) whether the model's answer is
    right."""

    referent: torch.Tensor
    other: torch.Tensor
    adjective: torch.Tensor
    correct: torch.Tensor

    @property
    def accuracy(self) -> float:
        return float(self.correct.float().mean())


class PronounRows(NamedTuple):
    """One forward pass over a batch, kept per sentence so that any prefix can be averaged later:
    the padded encoder weights (L x (b, h, n, n)) and lengths (b,); from "it", per sentence, layer
    and head (b, L, h), the weight on the referent, the other noun and the adjective, and whether the
    referent got more than the other noun (``agree``); ``correct`` (b,) whether the answer (the more
    probable of the two nouns' words) is right."""

    weights: list[torch.Tensor]
    lengths: torch.Tensor
    referent: torch.Tensor
    other: torch.Tensor
    adjective: torch.Tensor
    agree: torch.Tensor
    correct: torch.Tensor


@torch.no_grad()
def pronoun_rows(model: PronounResolver, examples: Sequence[PronounExample], vocab: Vocab,
                 n: int | None = None) -> PronounRows:
    """One forward pass over ``examples`` padded to ``n`` tokens (default: the longest): per sentence, the
    encoder weights and the attention from the pronoun on the referent, the other noun and the adjective.
    A sentence's weights do not depend on the other sentences of the batch (only real keys are attended),
    so chunks padded to the same ``n`` concatenate into the run over all of them."""
    batch = make_pronoun_batch(examples, vocab, n)
    out = model(batch.tokens, batch.lengths, batch.pronoun, batch.nouns)
    rows = torch.arange(len(examples))
    right = batch.nouns[rows, batch.labels]
    wrong = batch.nouns[rows, 1 - batch.labels]
    adj = torch.tensor([e.tokens.index(e.adjective) for e in examples])
    from_it = torch.stack([w[rows, :, batch.pronoun, :] for w in out.weights], 1)     # (b, L, h, n)
    at = lambda pos: from_it[rows, :, :, pos]                                         # noqa: E731
    return PronounRows(list(out.weights), batch.lengths, at(right), at(wrong), at(adj), at(right) > at(wrong),
                       out.logits.argmax(-1) == batch.labels)


def profile_of(rows: PronounRows) -> PronounProfile:
    """The batch means of ``pronoun_rows`` (slice the rows first for a prefix of the batch)."""
    return PronounProfile(rows.referent.mean(0), rows.other.mean(0), rows.adjective.mean(0), rows.correct)


def prefix_rows(rows: PronounRows | Sequence[PronounRows], b: int) -> PronounRows:
    """The per-sentence fields of the first ``b`` sentences of one run or of runs over consecutive
    chunks (``weights`` and ``lengths`` are left empty: padding differs between chunks)."""
    rows = [rows] if isinstance(rows, PronounRows) else list(rows)
    fields = {f: torch.cat([getattr(r, f) for r in rows])[:b] for f in PronounRows._fields[2:]}
    return PronounRows([], torch.empty(0, dtype=torch.long), **fields)


@torch.no_grad()
def pronoun_profile(model: PronounResolver, examples: Sequence[PronounExample], vocab: Vocab) -> PronounProfile:
    return profile_of(pronoun_rows(model, examples, vocab))


# --------------------------------------------------------------------------------------------------
# what the page shows: the model's numbers as plain arrays
# --------------------------------------------------------------------------------------------------

class Reading(NamedTuple):
    """``models.pronoun.resolve`` on one sentence, as numbers: the answer (0/1), its word and probability,
    the most probable word of the whole vocabulary, and the encoder's attention from the pronoun
    (L, h, n) and in full (L, h, n, n)."""

    answer: int
    token: str
    prob: float
    top_token: str
    top_prob: float
    from_it: np.ndarray
    weights: np.ndarray

    def from_it_rows(self) -> np.ndarray:
        """(L*h, n): the rows from the pronoun, every head, layer-major."""
        return self.from_it.reshape(-1, self.from_it.shape[-1])


def reading(r: Resolution) -> Reading:
    return Reading(r.answer, r.token, float(r.probs[r.answer]), r.top_token, float(r.top_prob),
                   r.from_pronoun.numpy(), np.stack([w.numpy() for w in r.weights]))


class FreshFigures(NamedTuple):
    """Over ``n`` fresh sentences, per layer and head (L, h): the fraction in which "it" weighs the referent
    over the other noun (``agreement``) and its mean weights on the referent, the other noun and the
    adjective; ``accuracy`` of the model's answers."""

    agreement: np.ndarray
    referent: np.ndarray
    other: np.ndarray
    adjective: np.ndarray
    accuracy: float
    n: int

    def table(self) -> np.ndarray:
        """(L*h, 4): per head, the four measures side by side."""
        return np.column_stack([m.reshape(-1) for m in (self.agreement, self.referent, self.other, self.adjective)])


def fresh_figures(rows: PronounRows) -> FreshFigures:
    """The figures of ``prefix_rows`` of fresh sentences, averaged sentence by sentence."""
    prof = profile_of(rows)
    return FreshFigures(rows.agree.float().mean(0).numpy(), prof.referent.numpy(), prof.other.numpy(),
                        prof.adjective.numpy(), prof.accuracy, len(rows.agree))


class ResolvingHead(NamedTuple):
    """The encoder head that prefers the referent most often, chosen at training time on ``n`` held-out
    sentences (the checkpoint's ``meta["eval"]``): how often, and its mean weights on the two nouns."""

    layer: int
    head: int
    fraction: float
    n: int
    referent: float
    other: float


def resolving_head(meta: dict) -> ResolvingHead:
    """Read from a checkpoint's meta; KeyError / TypeError / ValueError if its evaluation is missing."""
    ev = meta["eval"]
    layer, head = ev["best_encoder_head"]
    return ResolvingHead(int(layer), int(head), float(ev["best_encoder_head_fraction"]), 2 * int(ev["n_per_lang"]),
                         float(ev["best_head_referent_weight"]), float(ev["best_head_other_weight"]))

"""The attention-analysis page: what the trained heads of ``models.pronoun.PronounResolver`` do,
per head and per sentence, and the second tutorial's ``AttentionAnalyzer`` corrected.

The analyser of the second tutorial runs the model on a padded batch and computes, per layer::

    _, attention_weights = self.model(batch[0])          # mask left at its default, None
    attn_flat = attn.view(-1, attn.size(-1))
    entropy = -torch.sum(attn_flat * torch.log(attn_flat + 1e-8), dim=-1).mean()
    sparsity = (attn < 0.1).float().mean()

It never passes a mask, so the model attends to the padding: every query, real or padded, gives the
padded keys real weight. ``seed_weights`` runs the encoder that way (``encoder(tokens)``, no mask) and
``seed_analyzer_stats`` applies the tutorial's formulas to those weights; ``pad_key_weight`` measures the
weight that real tokens put on padding. ``head_stats`` is the corrected version: the model run with its
padding mask, exact entropy (0 log 0 = 0, no +1e-8), one number per head rather than per layer, and the
padded query rows and key columns left out.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import numpy as np
import torch

from ..analysis import PATTERNS, attention_rollout, classify_heads, head_entropy, head_sparsity
from ..functional import masked_softmax, scaled_dot_scores
from ..masks import padding_mask
from ..models.pronoun import PronounResolver, make_pronoun_batch
from ..models.tasks import PRONOUN_LANGS, PRONOUN_TEMPLATES, PronounExample, Vocab, pronoun_text
from .pronoun import PronounRows, profile_of

# every sentence of the grammar fits in this many tokens: batches padded to it concatenate
PAD = max(len(tpl.tokens(lang)) for tpl in PRONOUN_TEMPLATES for lang in PRONOUN_LANGS)

# --------------------------------------------------------------------------------------------------
# per-sentence weights without padding
# --------------------------------------------------------------------------------------------------

@torch.no_grad()
def batch_weights(model: PronounResolver, examples: Sequence[PronounExample], vocab: Vocab
                  ) -> tuple[list[torch.Tensor], torch.Tensor]:
    """One padded forward pass: encoder weights per layer (b, h, n, n) and the lengths (b,)."""
    batch = make_pronoun_batch(examples, vocab)
    out = model(batch.tokens, batch.lengths, batch.pronoun, batch.nouns)
    return out.weights, batch.lengths


def unpadded(weights: Sequence[torch.Tensor], lengths: torch.Tensor) -> list[list[torch.Tensor]]:
    """Per sentence, its (h, len, len) weights of every layer: the padded rows and columns cut off."""
    return [[w[i, :, :m, :m] for w in weights] for i, m in enumerate(lengths.tolist())]


class HeadStats(NamedTuple):
    """Per layer and head (L, h): mean entropy (nats, or / log n if normalised) and mean sparsity over
    every real query row of the batch; ``rows`` the number of rows averaged per head."""

    entropy: torch.Tensor
    sparsity: torch.Tensor
    rows: int


def head_stats(weights: Sequence[torch.Tensor], lengths: torch.Tensor, threshold: float = 0.1,
               normalize: bool = False) -> HeadStats:
    """The analyser corrected: ``analysis.head_entropy`` and ``head_sparsity`` on each group of
    sentences of one length (sliced to that length, so neither padded rows nor padded keys enter),
    combined as a mean over all real rows (each group weighted by its number of rows)."""
    total_e = total_s = None
    rows = 0
    for m in sorted(set(lengths.tolist())):
        idx = (lengths == m).nonzero().squeeze(1)
        group = [w[idx][:, :, :m, :m] for w in weights]                     # L x (b_g, h, m, m)
        count = len(idx) * m
        e = head_entropy(group, normalize=normalize) * count
        s = head_sparsity(group, threshold) * count
        total_e = e if total_e is None else total_e + e
        total_s = s if total_s is None else total_s + s
        rows += count
    return HeadStats(total_e / rows, total_s / rows, rows)


class SeedStats(NamedTuple):
    """The second tutorial's numbers, one per layer (L,): entropy with +1e-8 over every row of the
    padded batch (padded query rows included), sparsity over every entry (padded keys included)."""

    entropy: torch.Tensor
    sparsity: torch.Tensor
    rows: int


@torch.no_grad()
def seed_weights(model: PronounResolver, examples: Sequence[PronounExample], vocab: Vocab,
                 n: int | None = None) -> tuple[list[torch.Tensor], torch.Tensor]:
    """The encoder weights per layer (b, h, n, n) as the tutorial's analyser gets them, and the lengths (b,):
    the batch padded to ``n`` tokens (default: its longest sentence, as a data loader pads) and run with
    ``mask=None`` (``self.model(batch[0])``), so every query attends to the padded keys too."""
    batch = make_pronoun_batch(examples, vocab, n)
    return list(model.encoder(batch.tokens).weights), batch.lengths


def pad_key_weight(weights: Sequence[torch.Tensor], lengths: torch.Tensor) -> torch.Tensor:
    """(L, b): per layer and sentence, the mean over the sentence's real query rows (and the heads) of the
    total weight those rows put on padded keys (positions >= length). 0 for a model run with its padding
    mask; with ``seed_weights`` it is what the tutorial's analyser lets padding take."""
    n = weights[0].size(-1)
    real = torch.arange(n) < lengths[:, None]                                  # (b, n): real positions
    out = []
    for w in weights:                                                          # (b, h, n, n)
        on_pad = (w * (~real)[:, None, None, :]).sum(-1)                       # (b, h, n): per query row
        rows = real[:, None, :].expand_as(on_pad)
        out.append((on_pad * rows).sum((1, 2)) / rows.sum((1, 2)))
    return torch.stack(out)


def seed_analyzer_stats(weights: Sequence[torch.Tensor], threshold: float = 0.1) -> SeedStats:
    """``AttentionAnalyzer.analyze_attention_distribution`` of the second tutorial, verbatim per layer. Give it
    the weights the tutorial's call produces (``seed_weights``: no mask) to reproduce its numbers."""
    ent, spa = [], []
    for attn in weights:
        attn_flat = attn.reshape(-1, attn.size(-1))
        entropy = -torch.sum(attn_flat * torch.log(attn_flat + 1e-8), dim=-1)
        ent.append(entropy.mean())
        spa.append((attn < threshold).float().mean())
    return SeedStats(torch.stack(ent), torch.stack(spa), int(weights[0][..., 0].numel()))


def sentence_labels(weights: Sequence[torch.Tensor], lengths: torch.Tensor) -> torch.Tensor:
    """(b, L, h): the index in PATTERNS of the label ``analysis.classify_heads`` (the multi-head page's
    classifier) gives each head on each sentence, every sentence classified without its padding."""
    L, h = len(weights), weights[0].size(1)
    out = torch.zeros(len(lengths), L, h, dtype=torch.long)
    for m in sorted(set(lengths.tolist())):                    # one classifier call per length and layer
        idx = (lengths == m).nonzero().squeeze(1)
        for layer, w in enumerate(weights):
            group = w[idx][:, :, :m, :m].reshape(-1, m, m)    # (b_g * h, m, m): sentence-major
            labels = torch.tensor([PATTERNS.index(lab) for lab, _ in classify_heads(group)])
            out[idx, layer] = labels.view(len(idx), h)
    return out


def count_labels(labels: torch.Tensor) -> torch.Tensor:
    """(L, h, len(PATTERNS)) from per-sentence labels (b, L, h): for each head, in how many sentences
    it got each pattern."""
    return torch.nn.functional.one_hot(labels, len(PATTERNS)).sum(0)


def label_counts(weights: Sequence[torch.Tensor], lengths: torch.Tensor) -> torch.Tensor:
    """(L, h, len(PATTERNS)): for each head, in how many sentences ``analysis.classify_heads`` (the
    multi-head page's classifier) gave each pattern, every sentence classified without its padding."""
    return count_labels(sentence_labels(weights, lengths))


# --------------------------------------------------------------------------------------------------
# queries and keys of one trained head
# --------------------------------------------------------------------------------------------------

class HeadQK(NamedTuple):
    """For one sentence and one layer: q, k (h, n, d_k) of every head and its weights (h, n, n)."""

    q: torch.Tensor
    k: torch.Tensor
    weights: torch.Tensor


@torch.no_grad()
def head_qk(model: PronounResolver, example: PronounExample, vocab: Vocab, layer: int) -> HeadQK:
    """The queries and keys that layer ``layer`` of the encoder forms for ``example``: its attention
    input (the layer's input, or norm1 of it in a pre-LN layer) through W_query / W_key, split into
    heads. softmax(q k^T / sqrt(d_k)) gives back the weights the model used."""
    enc = model.encoder
    if not 0 <= layer < len(enc.layers):
        raise ValueError(f"layer must lie in [0, {len(enc.layers)}), got {layer}")
    tokens = torch.tensor([vocab.encode(example.tokens)])
    mask = padding_mask(torch.tensor([len(example.tokens)]), tokens.size(1))
    trace = enc.trace(tokens, mask).layers[layer]
    x = trace["norm1"] if trace.norm_first else trace["input"]                # what the MHA read
    mha = enc.layers[layer].self_attn
    q, k = mha.split_heads(mha.W_query(x))[0], mha.split_heads(mha.W_key(x))[0]   # (h, n, d_k)
    return HeadQK(q, k, masked_softmax(scaled_dot_scores(q, k)))


# --------------------------------------------------------------------------------------------------
# what the page shows, as numbers
# --------------------------------------------------------------------------------------------------

class Batch(NamedTuple):
    """A batch as the analysis page's learner chose it: size, seed, threshold τ, language mix ("both", "en",
    "zh"), entropy normalised by log n or not."""

    b: int
    seed: int
    tau: float
    mix: str
    normalize: bool


class BatchStats(NamedTuple):
    """Everything the page says about a batch's entropy and sparsity: per head (L, h) the corrected
    statistics (``head_stats``), per layer (L,) the tutorial's (``seed_analyzer_stats`` on the unmasked run)
    and the exact ones in nats with padding left out (``exact_*``, to compare with the tutorial's), the real
    lengths, the padded length, the share of real rows that a head attending evenly would count all sparse,
    and per layer (L,) the weight real tokens put on padding in the unmasked run: the mean over every real
    query row of the batch (``pad_weight``) and the largest sentence mean (``pad_weight_max``)."""

    entropy: np.ndarray
    sparsity: np.ndarray
    rows: int
    seed_entropy: np.ndarray
    seed_sparsity: np.ndarray
    seed_rows: int
    exact_entropy: np.ndarray
    exact_sparsity: np.ndarray
    lengths: np.ndarray
    n_pad: int
    uniform_rows: float
    pad_weight: np.ndarray
    pad_weight_max: np.ndarray


def batch_stats(weights: Sequence[torch.Tensor], lengths: torch.Tensor, tau: float, normalize: bool,
                unmasked: Sequence[torch.Tensor]) -> BatchStats:
    """``weights``: the model run with its padding mask; ``unmasked``: the same batch, padded the same way, run
    as the tutorial's analyser runs it (``seed_weights``: no mask)."""
    ours = head_stats(weights, lengths, tau, normalize)
    seed = seed_analyzer_stats(unmasked, tau)
    pad = pad_key_weight(unmasked, lengths)                                    # (L, b)
    share = lengths.double() / lengths.sum()
    exact = head_stats(weights, lengths, tau)          # nats, for the comparison with the tutorial
    n = lengths.double()
    # a head that attends evenly: every weight of a row is 1/n, so the row is all "sparse" iff 1/n < tau
    uniform = float((n * (1.0 / n < tau).double()).sum() / n.sum())
    return BatchStats(ours.entropy.numpy(), ours.sparsity.numpy(), ours.rows, seed.entropy.numpy(),
                      seed.sparsity.numpy(), seed.rows, exact.entropy.numpy().mean(1), exact.sparsity.numpy().mean(1),
                      lengths.numpy(), int(weights[0].size(-1)), uniform, (pad.double() * share).sum(1).numpy(),
                      pad.max(1).values.numpy())


class BatchPatterns(NamedTuple):
    """Per head (L, h): in how many sentences the classifier gave each pattern (L, h, len(PATTERNS)), the
    mean weight from "it" on the adjective, and the fraction of sentences in which "it" weighs the
    referent over the other noun."""

    counts: np.ndarray
    adjective: np.ndarray
    agree: np.ndarray


def batch_patterns(labels: torch.Tensor, rows: PronounRows) -> BatchPatterns:
    """From per-sentence labels (b, L, h) (``sentence_labels``) and the same sentences' ``pronoun_rows``."""
    return BatchPatterns(count_labels(labels).numpy(), profile_of(rows).adjective.numpy(),
                         rows.agree.float().mean(0).numpy())


class SentenceView(NamedTuple):
    """One sentence run alone (no padding): its tokens and text, the pronoun's position, every head's
    weights, queries and keys (L, h, n, n) / (L, h, n, d_k), the classifier's label of every head, and
    the cumulative attention rollout (L, n, n)."""

    tokens: list
    text: str
    pronoun: int
    weights: np.ndarray
    q: np.ndarray
    k: np.ndarray
    labels: list
    rollout: np.ndarray

    @property
    def n(self) -> int:
        return len(self.tokens)

    def flow(self, which: str) -> np.ndarray:
        """(n, n): attention rollout through every layer ("rollout"), or the last layer's heads averaged."""
        return self.rollout[-1] if which == "rollout" else self.weights[-1].mean(0)


@torch.no_grad()
def sentence_view(model: PronounResolver, example: PronounExample, vocab: Vocab) -> SentenceView:
    qks = [head_qk(model, example, vocab, layer) for layer in range(len(model.encoder.layers))]
    w = [qk.weights for qk in qks]                                                  # L x (h, n, n)
    return SentenceView(list(example.tokens), pronoun_text(example.tokens, example.lang), example.pronoun,
                        torch.stack(w).numpy(), torch.stack([qk.q for qk in qks]).numpy(),
                        torch.stack([qk.k for qk in qks]).numpy(),
                        [[label for label, _ in classify_heads(x)] for x in w],
                        attention_rollout(w, cumulative=True).numpy())


# the first tutorial's pattern table (section 7.3), row by row, against the classifier's patterns
SEED_PATTERNS = (("diagonal", ("diagonal", "previous", "next")), ("vertical", ("vertical",)),
                 ("horizontal", ("broad",)), ("block", ("block",)), ("sparse", ("broad",)))


def pattern_shares(counts: np.ndarray) -> dict[str, float]:
    """Share of all (head, sentence) labels of the batch that fall on each classifier pattern."""
    total = max(float(counts.sum()), 1.0)
    return {p: float(counts[..., k].sum()) / total for k, p in enumerate(PATTERNS)}


# --------------------------------------------------------------------------------------------------
# what the notices quote
# --------------------------------------------------------------------------------------------------

class StatsSummary(NamedTuple):
    """The entropy and sparsity notices' numbers: the heads (layer, head) of lowest and highest entropy and
    their values, the entropy of even attention over the batch's mean length (1 when normalised), and the
    range of the heads' sparsity."""

    lo: tuple[int, int]
    lo_entropy: float
    hi: tuple[int, int]
    hi_entropy: float
    mean_length: float
    uniform_entropy: float
    sparsity_min: float
    sparsity_max: float


def stats_summary(s: BatchStats, normalize: bool) -> StatsSummary:
    h = s.entropy.shape[1]
    lo, hi = int(s.entropy.argmin()), int(s.entropy.argmax())
    n_mean = float(np.mean(s.lengths))
    return StatsSummary(divmod(lo, h), float(s.entropy.reshape(-1)[lo]), divmod(hi, h),
                        float(s.entropy.reshape(-1)[hi]), n_mean, 1.0 if normalize else float(np.log(n_mean)),
                        float(s.sparsity.min()), float(s.sparsity.max()))


class PatternSummary(NamedTuple):
    """The patterns notice's numbers: the pattern given most often (its index in ``PATTERNS``) and its share of
    all labels, how many heads are labelled broad most often, and the heads (layer, head) that weigh the
    adjective most and that prefer the referent most often, with those values."""

    top: int
    top_share: float
    n_broad: int
    n_heads: int
    adjective_head: tuple[int, int]
    adjective_weight: float
    referent_head: tuple[int, int]
    referent_fraction: float


def pattern_summary(p: BatchPatterns) -> PatternSummary:
    L, h, _ = p.counts.shape
    counts = p.counts.reshape(L * h, -1)
    top = counts.sum(0)
    return PatternSummary(int(top.argmax()), float(top.max() / max(top.sum(), 1)),
                          int((counts.argmax(1) == PATTERNS.index("broad")).sum()), L * h,
                          divmod(int(p.adjective.argmax()), h), float(p.adjective.max()),
                          divmod(int(p.agree.argmax()), h), float(p.agree.max()))


class SentenceSummary(NamedTuple):
    """For one head's query row of a sentence: the key it weighs most and that weight; that key's rank among the
    keys by distance to the query in the drawn q/k plane (1: the nearest) and the nearest key; the share of
    variance the plane keeps; rollout's strongest other token from the query, its weight and the query's own;
    the last layer's heads averaged: its strongest token and weight."""

    key: int
    weight: float
    rank: int
    nearest: int
    plane_variance: float
    rollout_key: int
    rollout_weight: float
    rollout_self: float
    last_key: int
    last_weight: float


def sentence_summary(s: SentenceView, g, layer: int, head: int, query: int) -> SentenceSummary:
    """``g``: the head's ``analysis.qk_geometry`` (queries and keys in one plane)."""
    row = s.weights[layer, head, query]
    dist = np.linalg.norm(g.keys.numpy() - g.queries.numpy()[query], axis=1)
    key = int(row.argmax())
    roll, last = s.rollout[-1][query], s.weights[-1].mean(0)[query]
    others = np.where(np.arange(len(roll)) == query, -1.0, roll)       # rollout's strongest *other* token
    return SentenceSummary(key, float(row[key]), int((dist < dist[key]).sum()) + 1, int(dist.argmin()),
                           float(g.explained_variance_ratio.sum()), int(others.argmax()), float(others.max()),
                           float(roll[query]), int(last.argmax()), float(last.max()))

"""A small Transformer encoder that resolves "it" / "它" by saying the noun's word.

Section 5.2 of the first tutorial: in "The animal didn't cross the street because it was too
tired", self-attention lets "it" relate to every word. Here a 2-layer, 4-head post-LN encoder
(``attention_core.transformer.TransformerEncoder``) reads a template sentence, and the answer is
read from the pronoun's final vector alone, as a word of the vocabulary:

    h = W_read x_it^L,    logits_w = h . E_w + b_w   for every word w,    P(w) = softmax_w(logits)

where E is the encoder's own input embedding table (tied, Press and Wolf 2017). Training is plain
cross-entropy towards the referent's word ("animal", "street", "动物" ...). There is no pointer and
no extra attention row: the only attention in the model is the encoder's, and nothing tells any head
where to look. The answer of ``resolve`` is the more probable of the sentence's two nouns under that
vocabulary softmax; it also reports the most probable word overall.

Why this readout: to name the referent, "it"'s final vector must *contain* that noun, and in this
encoder the only way one token's vector takes in another token is attention. Trained this way the
encoder's last-layer heads learn, unsupervised, to look from "it" at the referent: the fraction of
held-out sentences in which each head weighs the referent more than the other noun is measured by
``referent_agreement`` and stored in the checkpoint's meta (``attention_core.models.recipes``). An earlier
version answered with a learned pointer over token positions: 100% right, but only the pointer
pointed — by construction — while the encoder's heads preferred the referent in about half of the
sentences, a coin toss. And a readout that only compares the two nouns (logit_c = <h, E[noun_c]>,
softmax over two) can be solved as well by attending to the *other* noun and subtracting it
(``scripts/pronoun_readout_ablation.py``). What attention learns depends on the objective, and a
weight on a word is not an explanation by itself (Jain and Wallace 2019).

This is a small model trained on templates (``attention_core.models.tasks``), not a language model.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import nn

from ..masks import padding_mask
from ..transformer import TransformerEncoder
from .tasks import PronounExample, Vocab


@dataclass
class PronounConfig:
    vocab_size: int
    d_model: int = 64
    num_layers: int = 2
    num_heads: int = 4
    d_ff: int = 128
    dropout: float = 0.0
    max_len: int = 32
    norm_first: bool = False

    def to_dict(self) -> dict:
        return asdict(self)


class PronounOutput(NamedTuple):
    logits: torch.Tensor          # (b, 2): the vocabulary logits of the first and second noun's word
    vocab_logits: torch.Tensor    # (b, V): the readout's logits over every word
    weights: list[torch.Tensor]   # encoder attention per layer, (b, h, n, n)


class PronounBatch(NamedTuple):
    tokens: torch.Tensor          # (b, n) ids, <pad> = 0
    lengths: torch.Tensor         # (b,)
    pronoun: torch.Tensor         # (b,) position of it / 它
    nouns: torch.Tensor           # (b, 2) positions of the first and second noun
    labels: torch.Tensor          # (b,) 0 or 1


class PronounResolver(nn.Module):
    """Encoder (L layers x h heads) -> the pronoun's final vector -> W_read -> tied vocabulary readout."""

    def __init__(self, config: PronounConfig):
        super().__init__()
        self.config = config
        c = config
        self.encoder = TransformerEncoder(c.vocab_size, c.d_model, c.num_layers, c.num_heads, c.d_ff,
                                          c.dropout, c.max_len, norm_first=c.norm_first)
        self.W_read = nn.Linear(c.d_model, c.d_model)               # "it"'s vector -> a word vector
        self.read_bias = nn.Parameter(torch.zeros(c.vocab_size))    # one bias per word

    def forward(self, tokens: torch.Tensor, lengths: torch.Tensor, pronoun: torch.Tensor,
                nouns: torch.Tensor) -> PronounOutput:
        b, n = tokens.shape
        mask = padding_mask(lengths, n, device=tokens.device)                # (b, 1, 1, n)
        x, weights = self.encoder(tokens, mask)                              # (b, n, d)
        rows = torch.arange(b, device=tokens.device)
        h = self.W_read(x[rows, pronoun])                                    # (b, d)
        vocab_logits = h @ self.encoder.embedding.weight.t() + self.read_bias   # (b, V), E tied
        logits = vocab_logits.gather(1, tokens.gather(1, nouns))             # (b, 2)
        return PronounOutput(logits, vocab_logits, list(weights))


def make_pronoun_batch(examples: Sequence[PronounExample], vocab: Vocab, n: int | None = None) -> PronounBatch:
    """Token ids padded to ``n`` (default: the longest sentence), with lengths, pronoun and noun positions."""
    n = max(len(e.tokens) for e in examples) if n is None else n
    tokens = torch.zeros(len(examples), n, dtype=torch.long)
    for i, e in enumerate(examples):
        tokens[i, :len(e.tokens)] = torch.tensor(vocab.encode(e.tokens))
    return PronounBatch(
        tokens,
        torch.tensor([len(e.tokens) for e in examples]),
        torch.tensor([e.pronoun for e in examples]),
        torch.tensor([e.nouns for e in examples]),
        torch.tensor([e.label for e in examples]),
    )


def referent_ids(batch: PronounBatch) -> torch.Tensor:
    """(b,) the vocabulary id of each sentence's referent word."""
    return batch.tokens.gather(1, batch.nouns.gather(1, batch.labels.unsqueeze(1))).squeeze(1)


def pronoun_loss(model: PronounResolver, batch: PronounBatch) -> torch.Tensor:
    """Cross-entropy of the vocabulary readout, the target being the referent's word."""
    out = model(batch.tokens, batch.lengths, batch.pronoun, batch.nouns)
    return F.cross_entropy(out.vocab_logits, referent_ids(batch))


class Resolution(NamedTuple):
    """The model's answer for one sentence."""

    answer: int                    # 0 = first noun, 1 = second noun: the more probable of the two words
    token: str                     # that noun's word
    probs: torch.Tensor            # (2,) the two nouns' probabilities under the vocabulary softmax
    top_token: str                 # the most probable word of the whole vocabulary
    top_prob: float                # its probability
    vocab_probs: torch.Tensor      # (V,) the vocabulary softmax
    from_pronoun: torch.Tensor     # (layers, heads, n): encoder attention from the pronoun
    weights: list[torch.Tensor]    # encoder attention per layer, (heads, n, n)


@torch.no_grad()
def resolve(model: PronounResolver, example: PronounExample, vocab: Vocab) -> Resolution:
    """Run the model on one parsed sentence (``tasks.parse_pronoun_sentence(...).example``)."""
    batch = make_pronoun_batch([example], vocab)
    out = model(batch.tokens, batch.lengths, batch.pronoun, batch.nouns)
    vocab_probs = out.vocab_logits[0].softmax(-1)                            # (V,)
    probs = vocab_probs[batch.tokens[0, list(example.nouns)]]                # (2,)
    answer = int(probs.argmax())
    top = int(vocab_probs.argmax())
    weights = [w[0] for w in out.weights]
    from_pronoun = torch.stack([w[:, example.pronoun, :] for w in weights])  # (L, h, n)
    return Resolution(answer, example.tokens[example.nouns[answer]], probs, vocab.itos[top],
                      float(vocab_probs[top]), vocab_probs, from_pronoun, weights)


class Agreement(NamedTuple):
    """Per encoder layer and head (layers, heads), over a batch of sentences, from the pronoun:
    ``encoder`` the fraction of sentences in which the head weighs the referent more than the other
    noun; ``referent`` and ``other`` its mean weight on the referent and on the other noun."""

    encoder: torch.Tensor
    referent: torch.Tensor
    other: torch.Tensor


@torch.no_grad()
def referent_agreement(model: PronounResolver, examples: Sequence[PronounExample], vocab: Vocab) -> Agreement:
    batch = make_pronoun_batch(examples, vocab)
    out = model(batch.tokens, batch.lengths, batch.pronoun, batch.nouns)
    rows = torch.arange(len(examples))
    right = batch.nouns[rows, batch.labels]
    wrong = batch.nouns[rows, 1 - batch.labels]
    fractions, on_right, on_wrong = [], [], []
    for w in out.weights:                                       # (b, h, n, n)
        from_it = w[rows, :, batch.pronoun, :]                  # (b, h, n)
        r, o = from_it[rows, :, right], from_it[rows, :, wrong]  # (b, h)
        fractions.append((r > o).float().mean(0))
        on_right.append(r.mean(0))
        on_wrong.append(o.mean(0))
    return Agreement(torch.stack(fractions), torch.stack(on_right), torch.stack(on_wrong))

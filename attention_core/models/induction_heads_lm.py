"""Induction heads: a 2-layer attention-only decoder learns to copy from context.

The data (Olsson et al. 2022, "In-context Learning and Induction Heads"; Elhage et al. 2021, "A Mathematical
Framework for Transformer Circuits"): a beginning-of-sequence token, ``half`` random symbols r_1 .. r_half, then the
same symbols again::

    <sos> r_1 r_2 ... r_half r_1 r_2 ... r_half

The next token of the first half cannot be known (the loss there stays near log V, V symbols); in the repeated half
it can, by a two-head circuit: a *previous-token head* in layer 1 writes "the token before me was r_{k-1}" into
position k, and an *induction head* in layer 2 at the second r_{k-1} looks for the position whose previous token is
r_{k-1} -- position k, holding r_k -- and copies r_k into the prediction. ``half`` changes from batch to batch, so no
head can solve the task by looking a fixed distance back.

Measured per head (``scores``), on fresh sequences:
  previous-token score  mean attention from position i to position i - 1,
  induction score       mean attention from a token of the repeated half to the token right after its earlier
                        occurrence (input position i >= half + 1 attends to i - half + 1),
and the next-token loss on the first half and on the repeated half (``half_losses``); ``ablate_heads`` zeroes
heads' outputs to show which heads the copying needs.
"""
from __future__ import annotations

import contextlib
import math
import random
from collections.abc import Iterable, Iterator
from typing import NamedTuple

import torch
import torch.nn.functional as F

from ..decoder import DecoderLM
from .lm import LMBatch, LMTask, register

SYMBOLS = tuple("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789αβ")   # 64 symbols
HALVES = (6, 20)            # training: each batch draws its half length from this range (inclusive)
EVAL_HALF = 12              # the scores and losses are measured on sequences of this half length
EVAL_SEQUENCES = 128
EVAL_SEED = 777_014         # never used by a training run
TASK_NAME, RECIPE_NAME = "induction", "induction_heads"
CONFIG = dict(d_model=64, num_layers=2, num_heads=4, d_ff=0, position="rope", max_len=2 * HALVES[1])
FIRST_WEIGHT = 0.1          # the training loss weighs the first half's positions 0.1, the repeated half's 1
RECIPE = dict(steps=400, batch_size=32, lr=1e-2, warmup_steps=20, seed=0, config=CONFIG)


# ------------------------------------------------------------------ the data
def repeated_tokens(rng: random.Random, batch: int, half: int, vocab_size: int | None = None) -> torch.Tensor:
    """(batch, 2 * half + 1) token ids: <sos>, ``half`` symbols drawn uniformly (with replacement), the same again."""
    first = 4                                                  # ids 0..3 are the Vocab's specials; <sos> is 1
    last = first + len(SYMBOLS) if vocab_size is None else vocab_size
    rows = []
    for _ in range(batch):
        r = [rng.randrange(first, last) for _ in range(half)]
        rows.append([1] + r + r)
    return torch.tensor(rows, dtype=torch.long)


def as_batch(tokens: torch.Tensor, first_weight: float = 1.0) -> LMBatch:
    """Next-token prediction over the whole sequence: inputs tokens[:, :-1], targets tokens[:, 1:]; the loss weighs
    the first half's positions ``first_weight`` and the repeated half's 1."""
    ids, targets = tokens[:, :-1], tokens[:, 1:]
    weight = torch.ones(ids.shape)
    weight[:, positions((tokens.size(1) - 1) // 2)[0]] = first_weight
    return LMBatch(ids, targets, weight)


def make_batch(rng: random.Random, batch_size: int) -> LMBatch:
    """A training batch: one half length per batch (no padding), drawn from HALVES. The first half's next tokens
    are pure chance, so its positions weigh only FIRST_WEIGHT in the loss: the few seconds of training go to
    what can be learned (with weight 1 the phase change comes about twice as late, measured on seeds 1 and 3)."""
    return as_batch(repeated_tokens(rng, batch_size, rng.randint(*HALVES)), FIRST_WEIGHT)


def eval_tokens(half: int = EVAL_HALF, sequences: int = EVAL_SEQUENCES, seed: int = EVAL_SEED) -> torch.Tensor:
    return repeated_tokens(random.Random(seed), sequences, half)


def positions(half: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Input positions (0-based) whose next token is random (the first half: <sos> .. r_half, which is followed
    by a fresh r_1) and those whose next token is a repeat (the second r_1 .. r_{half-1})."""
    return torch.arange(0, half + 1), torch.arange(half + 1, 2 * half)


# ------------------------------------------------------------------ what is measured
def previous_token_scores(weights: torch.Tensor) -> torch.Tensor:
    """weights (b, h, n, n) -> (h,): the mean attention from position i to i - 1, over i = 1 .. n-1 and the batch."""
    n = weights.size(-1)
    i = torch.arange(1, n)
    return weights[..., i, i - 1].mean(dim=(0, -1))


def induction_scores(weights: torch.Tensor, half: int) -> torch.Tensor:
    """weights (b, h, 2 half, 2 half) -> (h,): the mean attention from each token of the repeated half to the
    token right after its earlier occurrence (input position i, i = half+1 .. 2 half-1, holds r_{i-half}; its
    first occurrence sits at i - half, the token after it at i - half + 1)."""
    _, i = positions(half)
    return weights[..., i, i - half + 1].mean(dim=(0, -1))


class Measures(NamedTuple):
    first_loss: float            # mean next-token loss on the first half (nats)
    repeated_loss: float         # ... on the repeated half
    previous: torch.Tensor       # (layers, heads) previous-token scores
    induction: torch.Tensor      # (layers, heads) induction scores
    weights: tuple               # per layer (b, h, n, n): the attention of this forward


def half_losses(logits: torch.Tensor, targets: torch.Tensor, half: int) -> tuple[float, float]:
    """Mean next-token cross-entropy over the first-half and the repeated-half positions."""
    nll = F.cross_entropy(logits.flatten(0, 1), targets.flatten(), reduction="none").view_as(targets)
    first, repeated = positions(half)
    return float(nll[:, first].mean()), float(nll[:, repeated].mean())


@torch.no_grad()
def measure(model: DecoderLM, tokens: torch.Tensor) -> Measures:
    """Losses and per-head scores of ``model`` on ``tokens`` (b, 2 half + 1) from ``repeated_tokens``."""
    half = (tokens.size(1) - 1) // 2
    batch = as_batch(tokens)
    was_training = model.training
    model.eval()
    out = model(batch.ids)
    model.train(was_training)
    first, repeated = half_losses(out.logits, batch.targets, half)
    prev = torch.stack([previous_token_scores(w) for w in out.weights])
    ind = torch.stack([induction_scores(w, half) for w in out.weights])
    return Measures(first, repeated, prev, ind, out.weights)


@contextlib.contextmanager
def ablate_heads(model: DecoderLM, heads: Iterable[tuple[int, int]]) -> Iterator[DecoderLM]:
    """Inside the block, the heads (layer, head) (0-based) of ``model`` contribute nothing: their slice of the
    concatenated head outputs is zeroed before W_O (a forward pre-hook, removed on exit)."""
    by_layer: dict[int, list[int]] = {}
    for layer, head in heads:
        by_layer.setdefault(layer, []).append(head)
    hooks = []
    layers = model.attention_layers()
    for layer, hs in by_layer.items():
        attn = layers[layer]

        def zero(module, args, hs=hs, d=attn.d_head):
            (x,) = args
            x = x.clone()
            for h in hs:
                x[..., h * d:(h + 1) * d] = 0.0
            return (x,)

        hooks.append(attn.W_output.register_forward_pre_hook(zero))
    try:
        yield model
    finally:
        for hook in hooks:
            hook.remove()


def best_heads(m: Measures) -> tuple[int, int]:
    """(the layer-1 head with the highest previous-token score, the layer-2 head with the highest induction score)."""
    return int(m.previous[0].argmax()), int(m.induction[-1].argmax())


SCORE_THRESHOLD = 0.5       # a head with a score above this counts as a previous-token / an induction head


def ablation_rows(base: Measures) -> dict[str, list[tuple[int, int]]]:
    """The heads (layer, head) each row of ``ablation`` removes, chosen from the unablated measures ``base``."""
    prev_head, ind_head = best_heads(base)
    return {"none": [], "previous": [(0, prev_head)],
            "all_previous": [(0, h) for h in range(base.previous.size(1)) if base.previous[0, h] > SCORE_THRESHOLD],
            "induction": [(1, ind_head)],
            "all_induction": [(1, h) for h in range(base.induction.size(1)) if base.induction[1, h] > SCORE_THRESHOLD],
            "control": [(0, int(base.previous[0].argmin()))]}


def ablation(model: DecoderLM, tokens: torch.Tensor) -> dict:
    """The losses and the best induction head's score with nothing removed and with each of: the best
    previous-token head of layer 1, every layer-1 head scoring above SCORE_THRESHOLD, the best induction head of
    layer 2, every layer-2 head scoring above it, and (the control) the layer-1 head of the lowest previous-token
    score. Each row names the removed heads as (layer, head), 0-based."""
    base = measure(model, tokens)
    ind_head = best_heads(base)[1]
    out = {}
    for name, heads in ablation_rows(base).items():
        with ablate_heads(model, heads):
            m = measure(model, tokens)
        out[name] = {"heads": [list(x) for x in heads], "first_loss": m.first_loss, "repeated_loss": m.repeated_loss,
                     "induction": float(m.induction[1, ind_head])}
    return out


def evaluate(model: DecoderLM) -> dict:
    """What the trained model does on fresh sequences (EVAL_SEED, half = EVAL_HALF): losses of both halves, the
    per-head scores, the best heads and the ablation."""
    tokens = eval_tokens()
    m = measure(model, tokens)
    prev_head, ind_head = best_heads(m)
    return {"half": EVAL_HALF, "sequences": EVAL_SEQUENCES, "chance_loss": math.log(len(SYMBOLS)),
            "first_loss": m.first_loss, "repeated_loss": m.repeated_loss,
            "previous": m.previous.tolist(), "induction": m.induction.tolist(),
            "best_previous": [0, prev_head], "best_previous_score": float(m.previous[0, prev_head]),
            "best_induction": [1, ind_head], "best_induction_score": float(m.induction[1, ind_head]),
            "ablation": ablation(model, tokens)}


TASK = register(LMTask(TASK_NAME, SYMBOLS, make_batch, evaluate,
                       "<sos>, half random symbols, the same symbols again: copy from context"),
                recipes={RECIPE_NAME: RECIPE})

"""The models of the "Positions at long range" page: trained at length L, evaluated at 2L and 4L.

The task needs a near token and a far one. A sequence of n tokens starts with a topic token (one of
``TOPICS``). Then comes a stream of digits with a local rule: each digit is the sum, modulo 10, of the two
digits before it (the first two are random). At random places a query token ``?`` interrupts the stream; its
target is the topic, which sits at position 0: as far back as the query's own position. So the model must look
one and two tokens back (near: the digit rule) and all the way back to the start (far: the topic). The loss
counts the query positions (far) and the digits whose two predecessors are digits (near); the digit after a
``?`` and the token after the last digit before a ``?`` are unpredictable and not counted.

With RoPE, the score of a query with the topic carries the rotation of their distance m * theta_i in every
dimension pair i: distances beyond L give angles that training never produced. Every model trains at
``TRAIN_LEN`` = L = 64 and is evaluated on ``EVAL_LENGTHS`` (up to 4L) with sequences from ``EVAL_SEED``; the
RoPE model is also evaluated with each RoPE scaling of ``positional.rope_scaled_frequencies`` applied at
evaluation time (no fine-tuning): linear position interpolation, NTK-aware, YaRN (with its attention factor),
at the scale s = n / L of each length.

    python -m attention_core.models longctx_rope     # and longctx_alibi, longctx_nope, longctx_learned
"""
from __future__ import annotations

import random
from collections.abc import Sequence
from typing import NamedTuple

import torch
import torch.nn.functional as F

from ..decoder import DecoderLM
from ..positional import rope_scaled_frequencies, yarn_attention_factor
from .lm import LMBatch, LMTask, register

TRAIN_LEN = 64                                  # L: every training sequence has this many tokens
EVAL_LENGTHS = (32, 64, 96, 128, 192, 256)      # up to 4L
EVAL_SEED = 777_014                             # never used by a training run
EVAL_SEQUENCES = 256                            # per length
TOPICS = tuple("ABCDEFGH")
DIGITS = tuple("0123456789")
QUERY = "?"
QUERY_RATE = 0.125                              # chance that a position (from 3 on) holds a query
SCALINGS = ("none", "linear", "ntk", "yarn")    # RoPE as trained, PI, NTK-aware, YaRN
POSITION_EDGES = (0, 32, 64, 128, 192, 256)     # position buckets (for a query: its distance to the topic)
MAX_LEN = 4 * TRAIN_LEN                         # learned positions: the table has 4L rows, only the first L train
_T0, _D0 = 4, 4 + len(TOPICS)                   # ids 0..3 are the vocabulary's specials
_Q = _D0 + len(DIGITS)


class Kinds:
    """What each position's target is (``recall_batch(...)`` returns them as ``kind``)."""
    NONE, NEAR, FAR = 0, 1, 2


def topic_sequences(rng: random.Random, batch_size: int, n: int = TRAIN_LEN) -> tuple[torch.Tensor, torch.Tensor]:
    """ids (b, n+1) of ``batch_size`` sequences (one more token than the model reads: the last target) and the
    kind of each of the first n positions' targets (b, n): Kinds.FAR at a query, NEAR at a digit continuing the
    rule, NONE elsewhere."""
    if n < 4:
        raise ValueError(f"n must be >= 4, got {n}")
    ids, kinds = [], []
    for _ in range(batch_size):
        topic = rng.randrange(len(TOPICS))
        seq, digits = [_T0 + topic], []
        for pos in range(1, n + 1):
            if pos >= 3 and rng.random() < QUERY_RATE and seq[-1] != _Q:
                seq.append(_Q)
                continue
            d = rng.randrange(10) if len(digits) < 2 else (digits[-1] + digits[-2]) % 10
            digits.append(d)
            seq.append(_D0 + d)
        kind = []
        for pos in range(n):                       # the target of position pos is seq[pos + 1]
            nxt, cur, prev = seq[pos + 1], seq[pos], seq[pos - 1] if pos else _Q
            if cur == _Q:
                kind.append(Kinds.FAR)
            elif nxt != _Q and cur >= _D0 and prev >= _D0 and prev != _Q:
                kind.append(Kinds.NEAR)
            else:
                kind.append(Kinds.NONE)
        ids.append(seq)
        kinds.append(kind)
    return torch.tensor(ids), torch.tensor(kinds)


def recall_batch(rng: random.Random, batch_size: int, n: int = TRAIN_LEN) -> LMBatch:
    """``batch_size`` sequences of ``n`` tokens (ids of ``TASK.vocab``); targets: the topic at every query, the
    next token elsewhere; weight 1 where the target is predictable (near or far), 0 elsewhere."""
    ids, kinds = topic_sequences(rng, batch_size, n)
    targets = ids[:, 1:].clone()
    far = kinds == Kinds.FAR
    targets[far] = ids[:, :1].expand_as(targets)[far]              # a query's target is the topic
    return LMBatch(ids[:, :-1], targets, (kinds != Kinds.NONE).float())


def set_rope_scaling(model: DecoderLM, method: str, scale: float, original_len: int = TRAIN_LEN) -> None:
    """Make every attention layer of a RoPE ``model`` use the frequencies of ``method`` (one of ``SCALINGS``)
    at context scale s = ``scale``; YaRN also scales the logits by its attention factor squared (it multiplies
    q and k). ``method="none"`` restores plain RoPE. Evaluation-time only: no weight changes."""
    for layer in model.attention_layers():
        if method == "none":
            layer.rope_frequencies, layer.logit_scale = None, 1.0
            continue
        layer.rope_frequencies = rope_scaled_frequencies(layer.d_head, method, scale, base=layer.rope_base,
                                                         original_len=original_len)
        layer.logit_scale = yarn_attention_factor(scale) ** 2 if method == "yarn" else 1.0


class Scores(NamedTuple):
    loss: torch.Tensor       # (b, n) next-token loss in nats
    right: torch.Tensor      # (b, n) bool: the argmax is the target
    kind: torch.Tensor       # (b, n) Kinds of each target


@torch.no_grad()
def scores(model: DecoderLM, n: int, *, sequences: int = EVAL_SEQUENCES, seed: int = EVAL_SEED,
           chunk: int = 32) -> Scores:
    """Loss and correctness at every position of ``sequences`` fixed sequences of length n (seeded by ``seed``
    and n). The model is put in eval mode; its RoPE frequencies are whatever they are set to."""
    model.eval()
    batch = recall_batch(random.Random(f"{seed}-{n}"), sequences, n)
    ids, kinds = topic_sequences(random.Random(f"{seed}-{n}"), sequences, n)   # the same draws: the kinds
    losses, right = [], []
    for s in range(0, sequences, chunk):
        logits = model(batch.ids[s:s + chunk]).logits                  # (c, n, V)
        target = batch.targets[s:s + chunk]
        losses.append(F.cross_entropy(logits.flatten(0, 1), target.flatten(), reduction="none").view_as(target))
        right.append(logits.argmax(-1) == target)
    return Scores(torch.cat(losses), torch.cat(right), kinds)


def summary(sc: Scores, kind: int) -> tuple[float, float]:
    """(accuracy, mean loss) over the positions of one kind."""
    sel = sc.kind == kind
    return round(sc.right[sel].float().mean().item(), 5), round(sc.loss[sel].mean().item(), 5)


def by_position(sc: Scores, kind: int, edges: Sequence[int] = POSITION_EDGES) -> list[float | None]:
    """Accuracy of one kind in each position bucket [edges[i], edges[i+1]); None where a bucket is empty."""
    pos = torch.arange(sc.kind.size(1))[None, :].expand_as(sc.kind)
    out = []
    for lo, hi in zip(edges[:-1], edges[1:]):
        sel = (sc.kind == kind) & (pos >= lo) & (pos < hi)
        out.append(round(sc.right[sel].float().mean().item(), 5) if sel.any() else None)
    return out


def evaluate_model(model: DecoderLM, lengths: Sequence[int] = EVAL_LENGTHS, *,
                   sequences: int = EVAL_SEQUENCES) -> dict:
    """Near and far accuracy and loss at each length, as trained and (a RoPE model) with each RoPE scaling at
    s = n/L beyond L; accuracy by position bucket at the longest length. Plain numbers for ``meta["eval"]``."""
    position = model.config.position
    methods = SCALINGS if position == "rope" else ("none",)
    out: dict = {"train_len": TRAIN_LEN, "lengths": list(lengths), "sequences": sequences, "seed": EVAL_SEED,
                 "position_edges": list(POSITION_EDGES), "methods": {}}
    try:
        for method in methods:
            rows: dict = {f"{k}_{m}": [] for k in ("near", "far") for m in ("accuracy", "loss")}
            for n in lengths:
                if position == "learned" and n > model.config.max_len:
                    for v in rows.values():
                        v.append(None)
                    continue
                if position == "rope":
                    set_rope_scaling(model, method if n > TRAIN_LEN else "none", max(1.0, n / TRAIN_LEN))
                sc = scores(model, n, sequences=sequences)
                for name, kind in (("near", Kinds.NEAR), ("far", Kinds.FAR)):
                    acc, loss = summary(sc, kind)
                    rows[f"{name}_accuracy"].append(acc)
                    rows[f"{name}_loss"].append(loss)
                if n == max(lengths):
                    rows["near_by_position"] = by_position(sc, Kinds.NEAR)
                    rows["far_by_position"] = by_position(sc, Kinds.FAR)
            out["methods"][method] = rows
    finally:
        if position == "rope":
            set_rope_scaling(model, "none", 1.0)
    return out


TASK = register(
    LMTask("long_context_topic", TOPICS + DIGITS + (QUERY,), recall_batch, evaluate_model,
           description="a topic token, then digits each the sum of the two before (mod 10) with queries '?' "
                       "whose answer is the topic; trained at 64 tokens, evaluated up to 256"),
    recipes={
        f"longctx_{name}": dict(steps=600, batch_size=32, lr=3e-3, warmup_steps=50, seed=seed,
                                    config=dict(d_model=64, num_layers=2, num_heads=4, d_ff=128,
                                                position=position, max_len=MAX_LEN))
        for seed, name, position in ((41, "rope", "rope"), (42, "alibi", "alibi"), (43, "nope", "none"),
                                     (44, "learned", "learned"))
    },
)

"""Positions at long range: what ALiBi and the RoPE scalings change, and what a model trained at L does at 4L.

The maths is the library's (``attention_core.positional``): ``alibi_slopes`` / ``alibi_bias``, and the RoPE
frequencies theta_i = base^(-2i/d) with their scalings (``rope_scaled_frequencies``: linear position
interpolation, NTK-aware, YaRN). This module turns them into what the page draws:

- ``frequency_rows``: per dimension pair i and method, the frequency theta_i', its wavelength 2 pi / theta_i'
  (tokens per full turn) and how much of the circle the pair covers: at the training length L with plain RoPE
  (what training showed) and at s * L with the method (what the longer input needs). A pair whose wavelength is
  shorter than L turned full circles in training, so any position only repeats angles it saw; a pair with a
  longer wavelength saw only an arc, and positions beyond L carry it to angles it never saw.
- ``topic_logits``: the exact first-layer attention logit of a query "?" with the topic token at distance m,
  per head, for m = 1 .. 4L: in the first layer the inputs are the token embeddings themselves, so q and k do
  not depend on the rest of the sequence, and the logit is q . R(m theta') k * scale.
- ``live_positions``: the shipped model's accuracy by position on a few fresh sequences, for one method and
  length (the recorded figures in the checkpoints use 256 sequences per length).
"""
from __future__ import annotations

import copy
import math
import random
from typing import NamedTuple

import numpy as np
import torch

from ..decoder import DecoderLM
from ..models import long_context_lm as lm
from ..positional import (
    alibi_bias,
    alibi_slopes,
    rope_scaled_frequencies,
    rotary_embedding,
    rotary_frequencies,
    yarn_attention_factor,
)

METHODS = lm.SCALINGS                       # "none" (RoPE as trained), "linear" (PI), "ntk", "yarn"
TRAIN_LEN = lm.TRAIN_LEN


class FrequencyRow(NamedTuple):
    pair: int               # dimension pair i (dimensions 2i, 2i+1 of a head)
    method: str
    theta: float            # theta_i' (radians per token)
    wavelength: float       # 2 pi / theta_i' (tokens per full turn)
    seen_turns: float       # (L - 1) theta_i / 2 pi: turns covered by the positions of training (plain RoPE)
    needed_turns: float     # (s L - 1) theta_i' / 2 pi: turns the positions of the longer input need


def frequencies(d_head: int, method: str, scale: float, base: float = 10000.0,
                train_len: int = TRAIN_LEN) -> torch.Tensor:
    """theta_i' (d_head/2,) float64 of one method at scale s (plain RoPE at s = 1 whatever the method)."""
    return rope_scaled_frequencies(d_head, method if scale > 1 else "none", max(scale, 1.0), base=base,
                                   original_len=train_len)


def frequency_rows(d_head: int, scale: float, base: float = 10000.0, train_len: int = TRAIN_LEN
                   ) -> list[FrequencyRow]:
    """One row per (method, pair): see the module docstring."""
    theta0 = rotary_frequencies(d_head, base)
    longest = scale * train_len - 1
    rows = []
    for method in METHODS:
        theta = frequencies(d_head, method, scale, base, train_len)
        for i in range(d_head // 2):
            rows.append(FrequencyRow(i, method, float(theta[i]), float(2 * math.pi / theta[i]),
                                     float((train_len - 1) * theta0[i] / (2 * math.pi)),
                                     float(longest * theta[i] / (2 * math.pi))))
    return rows


def reach(row: FrequencyRow, train_len: int = TRAIN_LEN) -> float:
    """The position whose angle (in plain RoPE) pair ``row.pair`` reaches at the longest input with the method:
    beyond ``train_len`` the angle is one training never produced (unless the pair turned full circles)."""
    return row.needed_turns / row.seen_turns * (train_len - 1)


def unseen_pairs(rows: list[FrequencyRow], method: str, train_len: int = TRAIN_LEN) -> list[int]:
    """Pairs of ``method`` whose longer input needs angles training never produced: training covered less than a
    full turn, and the input reaches the angle of a position beyond the training length."""
    return [r.pair for r in rows if r.method == method and r.seen_turns < 1 and reach(r, train_len) > train_len]


class AlibiPicture(NamedTuple):
    slopes: np.ndarray      # (h,) m_h
    bias: np.ndarray        # (h, n, n): -m_h |i - j|, -inf above the diagonal (a decoder)


def alibi_picture(n: int, num_heads: int) -> AlibiPicture:
    """The slopes and the causal ALiBi bias of ``num_heads`` heads over n tokens (float64)."""
    bias = alibi_bias(n, num_heads, dtype=torch.float64)
    causal = torch.ones(n, n, dtype=torch.bool).tril()
    return AlibiPicture(alibi_slopes(num_heads).numpy(), bias.masked_fill(~causal, float("-inf")).numpy())


def alibi_reach(num_heads: int, drop: float = math.log(10)) -> np.ndarray:
    """Per head, the distance at which the bias has taken ``drop`` off a logit (default ln 10: a key that far
    gets 10 times less weight than the same key adjacent): drop / m_h tokens."""
    return drop / alibi_slopes(num_heads).numpy()


@torch.no_grad()
def topic_logits(model: DecoderLM, method: str, scale: float, max_distance: int) -> np.ndarray:
    """First-layer logits (h, max_distance) of the query "?" with a topic token m = 1 .. max_distance tokens
    before it, averaged over the topics, with the frequencies (and YaRN's logit factor) of ``method`` at scale s.
    Exact for the first layer: its q and k are functions of the token alone (embedding -> LayerNorm ->
    W_query / W_key), and with RoPE their dot product depends only on the distance."""
    vocab = lm.TASK.vocab
    block = model.blocks[0]
    attn = block.attn
    topics = torch.tensor([vocab.stoi[c] for c in lm.TOPICS])
    query = torch.tensor([vocab.stoi[lm.QUERY]])
    x_q, x_k = block.ln1(model.embed(query)), block.ln1(model.embed(topics))            # (1, d), (T, d)
    q = attn.W_query(x_q).view(1, attn.num_heads, attn.d_head).transpose(0, 1)            # (h, 1, d_head)
    rep = attn.num_heads // attn.num_kv_heads
    k = attn.W_key(x_k).view(len(topics), attn.num_kv_heads, attn.d_head).transpose(0, 1)
    k = k.repeat_interleave(rep, dim=0)                                                  # (h, T, d_head)
    theta = frequencies(attn.d_head, method, scale, attn.rope_base)
    factor = yarn_attention_factor(scale) ** 2 if method == "yarn" and scale > 1 else 1.0
    m = torch.arange(1, max_distance + 1)
    qr = rotary_embedding(q.expand(-1, len(m), -1), m, frequencies=theta)               # query at position m
    kr = rotary_embedding(k, torch.zeros(len(topics), dtype=torch.long), frequencies=theta)   # topic at 0
    logits = qr @ kr.transpose(-2, -1) * (factor / math.sqrt(attn.d_head))               # (h, m, T)
    return logits.mean(-1).numpy()


class LivePositions(NamedTuple):
    edges: tuple[int, ...]           # position buckets [edges[i], edges[i+1])
    near: list[float | None]         # accuracy of the digit rule per bucket
    far: list[float | None]          # accuracy of the topic recall per bucket
    near_all: float
    far_all: float
    sequences: int


def scaled_copy(model: DecoderLM, method: str, scale: float) -> DecoderLM:
    """A copy of a RoPE ``model`` with ``method``'s frequencies at scale s (the shipped model is shared, so it
    is never changed in place)."""
    twin = copy.deepcopy(model)
    lm.set_rope_scaling(twin, method if scale > 1 else "none", max(scale, 1.0))
    return twin


def live_positions(model: DecoderLM, method: str, n: int, *, sequences: int = 16, seed: int = 0,
                   bucket: int = 32, chunk: int = 4) -> LivePositions:
    """Accuracy by position of ``model`` on ``sequences`` fresh sequences of n tokens (seed ``seed``), the RoPE
    scaling ``method`` at s = n / L (ignored for a model without RoPE). The model reads ``chunk`` sequences at a
    time: the same figures, and the (chunk, heads, n, n) scores stay small enough for the CPU's cache (at n = 256
    one batch of 16 takes about 130 ms of CPU, four of 4 about 75)."""
    if model.config.position == "rope":
        model = scaled_copy(model, method, n / TRAIN_LEN)
    sc = lm.scores(model, n, sequences=sequences, seed=seed, chunk=chunk)
    edges = tuple(range(0, n, bucket)) + (n,)
    return LivePositions(edges, lm.by_position(sc, lm.Kinds.NEAR, edges), lm.by_position(sc, lm.Kinds.FAR, edges),
                         lm.summary(sc, lm.Kinds.NEAR)[0], lm.summary(sc, lm.Kinds.FAR)[0], sequences)


def fresh_sequence(n: int, seed: int = 0) -> list[str]:
    """One task sequence of n tokens as symbols (for the page's example)."""
    batch = lm.recall_batch(random.Random(f"page-{seed}"), 1, n)
    return [lm.TASK.vocab.itos[i] for i in batch.ids[0].tolist()]

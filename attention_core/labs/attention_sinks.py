"""Sliding windows and attention sinks: the page's computations (no Streamlit, no pandas).

- The receptive field of stacked window layers, computed by composing the masks: after l layers, output i
  depends on input j exactly when (M^l)_ij > 0 for the boolean window mask M (a path i -> k -> ... -> j of
  visible steps). With window W, the farthest input the last output reaches goes back l x (W - 1) tokens.
- The trained model (``attention_core.models.attention_sinks_lm``, recipe ``sinks_lm``): one head's weights on
  a held-out crop, and a small streaming case computed live (the recorded one is in the checkpoint's meta).
"""
from __future__ import annotations

import random
from typing import NamedTuple

import numpy as np
import torch

from ..masks import sliding_window_mask
from ..models import attention_sinks_lm as sinks_lm

RECIPE = "sinks_lm"


# ------------------------------------------------------------------ receptive field of stacked windows
class ReceptiveField(NamedTuple):
    reach: np.ndarray          # (layers, n, n) bool: output i after l+1 layers depends on input j
    first_layer: np.ndarray    # (n, n) int: the fewest layers after which j reaches i (0 = never, within layers)
    farthest: list[int]        # per layer: how many tokens back the last output reaches (i - smallest j)


def receptive_field(n: int, window: int, layers: int, sinks: int = 0) -> ReceptiveField:
    """Compose the window mask layer by layer as boolean matrix products: reach_l = M @ reach_{l-1}."""
    m = sliding_window_mask(n, window, sinks=sinks).to(torch.int64)
    reach, r = [], torch.eye(n, dtype=torch.int64)
    for _ in range(layers):
        r = ((m @ r) > 0).to(torch.int64)                    # a path through one more layer
        reach.append(r.bool())
    stack = torch.stack(reach)                              # (layers, n, n)
    first = torch.where(stack.any(0), stack.int().argmax(0) + 1, 0)
    last = stack[:, n - 1]                                  # (layers, n): what the last output reaches
    farthest = [int(n - 1 - row.nonzero().min()) for row in last]
    return ReceptiveField(stack.numpy(), first.numpy(), farthest)


def span_rule(window: int, layers: int) -> int:
    """How far back the rule says L stacked windows of W reach: L x (W - 1) tokens (W - 1 per layer)."""
    return layers * (window - 1)


# ------------------------------------------------------------------ the trained model
def heldout_tokens(seed: int, length: int = sinks_lm.TRAIN_LEN) -> list[str]:
    """A held-out crop of the stream (seeds offset from every training and evaluation seed)."""
    return sinks_lm.stream(random.Random(900_000 + seed), length)


class HeadView(NamedTuple):
    tokens: list[str]
    weights: np.ndarray        # (layers, heads, n, n) float32
    first_share: np.ndarray    # (layers, heads): mean weight on token 0 for queries >= SHARE_FROM
    value_ratio: np.ndarray    # (layers, heads): |v of token 0| / mean |v| of the others (what a sink writes)


@torch.no_grad()
def head_view(model, seed: int, length: int = sinks_lm.TRAIN_LEN) -> HeadView:
    """Every layer's and head's attention on one held-out crop, the first token's share of it, and how large the
    first token's value vector is next to the others'."""
    tokens = heldout_tokens(seed, length)
    ids = torch.tensor([sinks_lm.encode(tokens)])
    out = model.eval()(ids)
    weights = torch.stack([w[0] for w in out.weights])                        # (layers, h, n, n)
    start = min(sinks_lm.SHARE_FROM, length - 1)
    share = weights[:, :, start:, 0].mean(-1)
    ratios, x = [], model.embed(ids)
    for block in model.blocks:                                                # the values each layer reads
        attn = block.attn
        v = attn.split_heads(attn.W_value(block.ln1(x)), attn.num_kv_heads)[0]  # (h_kv, n, d)
        norms = v.norm(dim=-1)
        ratios.append(norms[:, 0] / norms[:, 1:].mean(-1))
        x = block(x).output
    return HeadView(tokens, weights.numpy(), share.numpy(), torch.stack(ratios).numpy())


class StreamCase(NamedTuple):
    length: int
    cache: int
    losses: dict               # method -> mean next-token loss over the crop
    by_bin: dict               # method -> mean loss per block of ``bin`` positions
    bin: int


@torch.no_grad()
def stream_case(model, seed: int, length: int, cache: int, bin_size: int = 32) -> StreamCase:
    """One held-out crop of ``length`` tokens streamed by every method with a cache of ``cache`` tokens."""
    ids = torch.tensor([sinks_lm.encode(heldout_tokens(seed, length + 1))])
    x, y = ids[:, :-1], ids[:, 1:]
    losses, by_bin = {}, {}
    for method in sinks_lm.STREAM_METHODS:
        nll = sinks_lm.nll(sinks_lm.stream_logits(model, x, method, cache=cache), y)[0]
        losses[method] = float(nll.mean())
        by_bin[method] = nll[:length // bin_size * bin_size].view(-1, bin_size).mean(1).tolist()
    return StreamCase(length, cache, losses, by_bin, bin_size)


def softmax_row(scores) -> np.ndarray:
    """softmax of one row of scores (float64): the weights of a query that must sum to 1."""
    s = np.asarray(scores, dtype=np.float64)
    e = np.exp(s - s.max())
    return e / e.sum()

"""Scores, the safe softmax and the reference scaled dot-product attention.

Shapes follow ``torch.nn.functional.scaled_dot_product_attention``:
q (..., n_q, d_k), k (..., n_k, d_k), v (..., n_k, d_v); usually (batch, heads, seq, dim).
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from .types import AttentionOutput


def dot_scores(q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    """Dot-product similarity Q K^T: (..., n_q, d) x (..., n_k, d) -> (..., n_q, n_k)."""
    return q @ k.transpose(-2, -1)


def default_scale(d_k: int) -> float:
    """1 / sqrt(d_k), the scale of Vaswani et al. (2017)."""
    return 1.0 / math.sqrt(d_k)


def scaled_dot_scores(q: torch.Tensor, k: torch.Tensor, scale: float | None = None) -> torch.Tensor:
    """Q K^T * scale, with scale = 1/sqrt(d_k) unless given."""
    scale = default_scale(q.size(-1)) if scale is None else scale
    return dot_scores(q, k) * scale


def apply_mask(scores: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
    """Hidden positions become -inf (boolean mask, True = visible); a float mask is added."""
    if mask is None:
        return scores
    if mask.dtype == torch.bool:
        return scores.masked_fill(~mask, float("-inf"))
    return scores + mask


def masked_softmax(scores: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
    """Softmax over the last axis that ignores hidden keys.

    A row whose keys are all hidden gets all-zero weights instead of NaN
    (``softmax`` of a row of -inf is 0/0). Hidden keys weigh exactly 0.
    """
    scores = apply_mask(scores, mask)
    row_max = scores.amax(dim=-1, keepdim=True)
    # a fully hidden row has max -inf: shift by 0 instead, every exp is then 0
    row_max = torch.where(torch.isfinite(row_max), row_max, torch.zeros_like(row_max))
    e = torch.exp(scores - row_max)
    total = e.sum(dim=-1, keepdim=True)
    return e / torch.where(total > 0, total, torch.ones_like(total))


def scaled_dot_product_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    mask: torch.Tensor | None = None,
    *,
    scale: float | None = None,
    dropout_p: float = 0.0,
) -> AttentionOutput:
    """softmax(Q K^T * scale, masked) V — the reference every other method is checked against.

    Returns the weights too (after dropout, i.e. those actually multiplied with V).
    Equal to ``torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask,
    scale=scale)`` except that a query with no visible key gives zeros, not NaN.
    """
    weights = masked_softmax(scaled_dot_scores(q, k, scale), mask)
    if dropout_p > 0.0:
        weights = F.dropout(weights, p=dropout_p, training=True)
    return AttentionOutput(weights @ v, weights)


def grouped_query_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    mask: torch.Tensor | None = None,
    *,
    scale: float | None = None,
) -> AttentionOutput:
    """Grouped-query attention (GQA, Ainslie et al. 2023): several query heads share one K/V head.

    q (b, h_q, n_q, d), k (b, h_kv, n_k, d), v (b, h_kv, n_k, d_v), h_kv dividing h_q.
    Query head i reads K/V head ``i // (h_q // h_kv)`` (the grouping of torch's
    ``scaled_dot_product_attention(..., enable_gqa=True)``). h_kv = h_q is multi-head
    attention, h_kv = 1 is multi-query attention (Shazeer 2019). Only the h_kv K/V heads are
    cached at inference: the cache shrinks by h_q / h_kv.

    ``mask`` broadcasts against (b, h_q, n_q, n_k): boolean (True = may attend) or float
    (added to the scores, e.g. an ALiBi bias with -inf where hidden). Returns
    ``AttentionOutput(output (b, h_q, n_q, d_v), weights (b, h_q, n_q, n_k))``.
    """
    if q.dim() < 3 or k.dim() != q.dim() or v.dim() != q.dim():
        raise ValueError(f"q, k, v need the same number (>= 3) of dimensions (..., heads, seq, dim), "
                         f"got {tuple(q.shape)}, {tuple(k.shape)}, {tuple(v.shape)}")
    h_q, h_kv = q.size(-3), k.size(-3)
    if v.size(-3) != h_kv:
        raise ValueError(f"k and v must have the same number of heads, got {h_kv} and {v.size(-3)}")
    if h_kv < 1 or h_q % h_kv != 0:
        raise ValueError(f"the number of query heads ({h_q}) must be a multiple of the number of "
                         f"key/value heads ({h_kv}): each K/V head serves h_q / h_kv query heads; "
                         f"{h_q} / {h_kv} = {h_q / max(h_kv, 1):g}")
    group = h_q // h_kv
    k = k.repeat_interleave(group, dim=-3)      # (b, h_q, n_k, d): K/V head j copied to heads j*g .. j*g+g-1
    v = v.repeat_interleave(group, dim=-3)      # (b, h_q, n_k, d_v)
    return scaled_dot_product_attention(q, k, v, mask, scale=scale)

"""Numbers that describe a softmax distribution (rows of attention weights)."""
from __future__ import annotations

import torch


def attention_entropy(weights: torch.Tensor) -> torch.Tensor:
    """Shannon entropy in nats of each row, with 0 log 0 = 0. Shape weights.shape[:-1].

    0 for a one-hot row, log(n) for a uniform row over n keys.
    """
    logs = torch.where(weights > 0, torch.log(weights.clamp_min(torch.finfo(weights.dtype).tiny)),
                       torch.zeros_like(weights))
    return -(weights * logs).sum(dim=-1)


def max_weight(weights: torch.Tensor) -> torch.Tensor:
    """Largest weight of each row: 1/n when flat, 1 when saturated."""
    return weights.amax(dim=-1)


def _exclusive_sum(x: torch.Tensor) -> torch.Tensor:
    """sum_{j != i} x_j for every i, from prefix and suffix sums (no "total - x_i" cancellation)."""
    zero = torch.zeros_like(x[..., :1])
    before = torch.cat([zero, torch.cumsum(x, dim=-1)[..., :-1]], dim=-1)
    after = torch.cat([torch.cumsum(x.flip(-1), dim=-1).flip(-1)[..., 1:], zero], dim=-1)
    return before + after


def softmax_jacobian_norm(weights: torch.Tensor) -> torch.Tensor:
    """Frobenius norm of d softmax(s) / d s for each row p = softmax(s).

    J = diag(p) - p p^T, so ||J||_F^2 = sum_i p_i^2 (1 - p_i)^2 + sum_{i != j} p_i^2 p_j^2, computed
    in O(n) without an n x n matrix and without cancellation (1 - p_i is the sum of the other
    weights), so it stays accurate for saturated rows. It tends to 0 as the row saturates: the
    gradient that reaches the scores vanishes — why scores are divided by sqrt(d_k).
    """
    sq = weights ** 2
    return (sq * (_exclusive_sum(weights) ** 2 + _exclusive_sum(sq))).sum(dim=-1).sqrt()


def sparsity(weights: torch.Tensor, threshold: float = 0.1) -> torch.Tensor:
    """Fraction of weights below ``threshold`` in each row (the second tutorial's analyser)."""
    return (weights < threshold).to(weights.dtype).mean(dim=-1)

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


def softmax_jacobian_norm(weights: torch.Tensor) -> torch.Tensor:
    """Frobenius norm of d softmax(s) / d s for each row p = softmax(s).

    J = diag(p) - p p^T, so ||J||_F^2 = sum p^2 - 2 sum p^3 + (sum p^2)^2 (closed form,
    no n x n matrix). It tends to 0 as the row saturates: the gradient that reaches the
    scores vanishes — why scores are divided by sqrt(d_k).
    """
    s2 = (weights ** 2).sum(dim=-1)
    s3 = (weights ** 3).sum(dim=-1)
    return (s2 - 2 * s3 + s2 ** 2).clamp_min(0).sqrt()


def sparsity(weights: torch.Tensor, threshold: float = 0.1) -> torch.Tensor:
    """Fraction of weights below ``threshold`` in each row (the second tutorial's analyser)."""
    return (weights < threshold).to(weights.dtype).mean(dim=-1)

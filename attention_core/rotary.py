"""Rotary position embedding (RoPE): Su et al. (2021), "RoFormer: Enhanced Transformer with
Rotary Position Embedding".

Each pair of dimensions (x_{2i}, x_{2i+1}) of a query or key at position m is rotated by the
angle m * theta_i, theta_i = base^(-2i/d) (the frequencies of the sinusoidal table):

    [x'_{2i}  ]   [cos m theta_i  -sin m theta_i] [x_{2i}  ]
    [x'_{2i+1}] = [sin m theta_i   cos m theta_i] [x_{2i+1}]

A rotation keeps the norm, and R(m)^T R(n) = R(n - m), so
<R(m) q, R(n) k> = <q, R(n - m) k>: the score depends on the positions only through the offset
n - m. Pairs are interleaved as in the paper (GPT-NeoX / LLaMA code pairs dimension i with
i + d/2 instead: the same idea with the dimensions permuted).
"""
from __future__ import annotations

import torch


def rotary_frequencies(d: int, base: float = 10000.0) -> torch.Tensor:
    """theta_i = base^(-2i/d) for i = 0 .. d/2 - 1, float64, shape (d/2,)."""
    if d < 2 or d % 2:
        raise ValueError(f"rotary embedding needs an even dimension, got d={d}")
    return base ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)


def rotary_angles(positions: torch.Tensor, d: int, base: float = 10000.0) -> torch.Tensor:
    """m * theta_i for every position: positions (..., n) -> angles (..., n, d/2), float64."""
    return positions.to(torch.float64).unsqueeze(-1) * rotary_frequencies(d, base)


def rotary_embedding(x: torch.Tensor, positions: torch.Tensor | None = None,
                     base: float = 10000.0) -> torch.Tensor:
    """Rotate x (..., n, d) by its positions (default 0 .. n-1; any shape broadcasting to (..., n)).

    Positions may be floats or negative. Returns a tensor of x's shape and dtype.
    """
    n, d = x.shape[-2], x.shape[-1]
    if positions is None:
        positions = torch.arange(n, device=x.device)
    angles = rotary_angles(torch.as_tensor(positions, device=x.device), d, base)   # (..., n, d/2)
    cos, sin = angles.cos().to(x.dtype), angles.sin().to(x.dtype)
    x1, x2 = x[..., 0::2], x[..., 1::2]                                            # (..., n, d/2)
    out = torch.stack((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1)          # (..., n, d/2, 2)
    return out.flatten(-2)                                                         # (..., n, d)


def apply_rotary(q: torch.Tensor, k: torch.Tensor, positions: torch.Tensor | None = None,
                 base: float = 10000.0, k_positions: torch.Tensor | None = None
                 ) -> tuple[torch.Tensor, torch.Tensor]:
    """Rotate queries and keys (..., n, d) before the dot product; values are left alone.

    ``positions`` apply to q (and to k unless ``k_positions`` is given, e.g. for a cache).
    """
    k_positions = positions if k_positions is None else k_positions
    return rotary_embedding(q, positions, base), rotary_embedding(k, k_positions, base)


def rotary_matrix(position: float, d: int, base: float = 10000.0) -> torch.Tensor:
    """The (d, d) block-diagonal rotation R(m) (float64) for the page's "show the matrix"."""
    angles = rotary_angles(torch.tensor([position]), d, base)[0]                  # (d/2,)
    r = torch.zeros(d, d, dtype=torch.float64)
    i = torch.arange(0, d, 2)
    r[i, i], r[i, i + 1] = angles.cos(), -angles.sin()
    r[i + 1, i], r[i + 1, i + 1] = angles.sin(), angles.cos()
    return r

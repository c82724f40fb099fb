"""Positional encodings: the sinusoidal table, a learned table, rotary embeddings (RoPE).

Rotary position embedding (RoPE): Su et al. (2021), "RoFormer: Enhanced Transformer with
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
from torch import nn


def sinusoidal_encoding(n: int, d: int, base: float = 10000.0) -> torch.Tensor:
    """The sinusoidal table of Vaswani et al. (2017), shape (n, d).

    PE[pos, 2i] = sin(pos / base^(2i/d)),  PE[pos, 2i+1] = cos(pos / base^(2i/d)).
    Works for odd d too (the tutorials' ``pe[:, 1::2] = cos(...)`` fails there).
    """
    if n < 0 or d < 1:
        raise ValueError(f"need n >= 0 and d >= 1, got n={n}, d={d}")
    pos = torch.arange(n, dtype=torch.float64).unsqueeze(1)            # (n, 1)
    two_i = torch.arange(0, d, 2, dtype=torch.float64)                  # (ceil(d/2),)
    angle = pos / base ** (two_i / d)                                   # (n, ceil(d/2))
    pe = torch.zeros(n, d, dtype=torch.float64)
    pe[:, 0::2] = torch.sin(angle)
    pe[:, 1::2] = torch.cos(angle[:, : d // 2])
    return pe.to(torch.float32)


class LearnedPositionalEmbedding(nn.Module):
    """A trainable table P (max_len, d_model), one row per position (BERT, GPT-2).

    forward(n) -> P[:n], shape (n, d_model). Unlike the sinusoidal table it cannot go beyond
    max_len and knows nothing of relative offsets until trained. Initialised N(0, 0.02^2) (GPT-2).
    """

    def __init__(self, max_len: int, d_model: int):
        super().__init__()
        self.max_len = max_len
        self.weight = nn.Parameter(torch.randn(max_len, d_model) * 0.02)

    def forward(self, n: int) -> torch.Tensor:
        if n > self.max_len:
            raise ValueError(f"sequence length {n} exceeds max_len {self.max_len} of the learned table")
        return self.weight[:n]


def learned_positional_embedding(max_len: int, d_model: int) -> LearnedPositionalEmbedding:
    """A fresh ``LearnedPositionalEmbedding`` (seeded by the caller's ``torch.manual_seed``)."""
    return LearnedPositionalEmbedding(max_len, d_model)


# --------------------------------------------------------------------------------------------------
# Rotary position embedding (RoPE)
# --------------------------------------------------------------------------------------------------

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

"""Positional encodings."""
from __future__ import annotations

import torch


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

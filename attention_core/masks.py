"""Boolean attention masks, built without Python loops over positions.

Convention (that of ``torch.nn.functional.scaled_dot_product_attention``):
``True`` where a query MAY attend to a key. Masks are ``(n_q, n_k)`` unless
stated and broadcast against scores of shape ``(..., n_q, n_k)``.

The tutorials build masks the other way round (``mask == 0`` means hidden) and
with nested ``for`` loops; both are shown as pitfalls on the masking page.
"""
from __future__ import annotations

from typing import Iterable, Sequence

import torch


def _positions(n_q: int, n_k: int, device=None) -> tuple[torch.Tensor, torch.Tensor]:
    """Row (query) and column (key) indices as broadcastable (n_q, 1), (1, n_k)."""
    if n_q < 0 or n_k < 0:
        raise ValueError(f"sequence lengths must be >= 0, got n_q={n_q}, n_k={n_k}")
    i = torch.arange(n_q, device=device).unsqueeze(1)
    j = torch.arange(n_k, device=device).unsqueeze(0)
    return i, j


def causal_mask(n_q: int, n_k: int | None = None, *, device=None) -> torch.Tensor:
    """Look-ahead mask of a decoder: key j visible to query i iff j <= i.

    Top-left aligned, like ``is_causal=True`` in torch: with n_q < n_k the last
    keys stay hidden from every query. Shape (n_q, n_k).
    """
    n_k = n_q if n_k is None else n_k
    i, j = _positions(n_q, n_k, device)
    return j <= i


def padding_mask(lengths: Sequence[int] | torch.Tensor, n: int, *, device=None) -> torch.Tensor:
    """Key-padding mask of shape (b, 1, 1, n): True for key j < lengths[b]."""
    lengths = torch.as_tensor(lengths, device=device).reshape(-1)
    if (lengths < 0).any() or (lengths > n).any():
        raise ValueError(f"every length must lie in [0, {n}], got {lengths.tolist()}")
    j = torch.arange(n, device=device)
    return (j.unsqueeze(0) < lengths.unsqueeze(1))[:, None, None, :]


def local_mask(n: int, window: int, *, device=None) -> torch.Tensor:
    """Sliding window: |i - j| <= window. Shape (n, n)."""
    if window < 0:
        raise ValueError(f"window must be >= 0, got {window}")
    i, j = _positions(n, n, device)
    return (i - j).abs() <= window


def strided_mask(n: int, stride: int, window: int, *, device=None) -> torch.Tensor:
    """The first tutorial's strided pattern: |i - j| <= window or j % stride == 0."""
    if stride < 1:
        raise ValueError(f"stride must be >= 1, got {stride}")
    _, j = _positions(n, n, device)
    return local_mask(n, window, device=device) | (j % stride == 0)


def block_mask(n: int, block: int, *, device=None) -> torch.Tensor:
    """Block-diagonal (block-local) pattern: i // block == j // block, for any n.

    The last block is simply shorter when ``block`` does not divide ``n``
    (the second tutorial's ``chunk(seq_len // block_size)`` gets this wrong).
    """
    if block < 1:
        raise ValueError(f"block must be >= 1, got {block}")
    i, j = _positions(n, n, device)
    return (i // block) == (j // block)


def global_tokens_mask(n: int, idx: Iterable[int] | torch.Tensor, *, device=None) -> torch.Tensor:
    """Global tokens: the rows and the columns listed in ``idx`` are fully visible.

    Combine with a local pattern by ``|`` (Longformer / BigBird style).
    """
    idx = torch.as_tensor(list(idx) if not isinstance(idx, torch.Tensor) else idx,
                          dtype=torch.long, device=device).reshape(-1)
    if idx.numel() and ((idx < 0).any() or (idx >= n).any()):
        raise ValueError(f"global token indices must lie in [0, {n}), got {idx.tolist()}")
    is_global = torch.zeros(n, dtype=torch.bool, device=device)
    is_global[idx] = True
    return is_global.unsqueeze(1) | is_global.unsqueeze(0)


def sliding_window_mask(n: int, window: int, *, sinks: int = 0, device=None) -> torch.Tensor:
    """Causal sliding window with attention sinks: True where j <= i and (i - j < window or j < sinks).

    Each query sees itself and the ``window - 1`` keys before it (Mistral's sliding window,
    Jiang et al. 2023), plus the first ``sinks`` tokens, which StreamingLLM (Xiao et al. 2023)
    keeps because softmax parks much of its weight there. ``window >= n`` (and no sinks) is
    ``causal_mask(n)``. Shape (n, n).
    """
    if window < 1:
        raise ValueError(f"window must be >= 1 (a query always sees itself), got {window}")
    if sinks < 0:
        raise ValueError(f"sinks must be >= 0, got {sinks}")
    i, j = _positions(n, n, device)
    return (j <= i) & ((i - j < window) | (j < sinks))

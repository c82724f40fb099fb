"""The masking page's custom mask as widget and URL state: the compact "110-111-011" text kept in
the URL, and the checkbox grid's edits applied to it. The attention itself is ``attention_core.labs.masking``.
"""
from __future__ import annotations

from collections.abc import Sequence

import torch

from attention_core.labs.masking import custom_attention

ROW_SEP = "-"


def encode_mask(mask: torch.Tensor) -> str:
    """(n, n) boolean -> "110-111-011": one run of 0/1 per query row (compact, URL-safe)."""
    return ROW_SEP.join("".join("1" if v else "0" for v in row) for row in mask.tolist())


def decode_mask(text: str, n: int, fallback: torch.Tensor | None = None) -> tuple[torch.Tensor, bool]:
    """Parse ``encode_mask`` text into an (n, n) mask; returns (mask, exact).

    Rows or columns beyond ``n`` are dropped and missing cells are taken from ``fallback``
    (all visible by default); ``exact`` is False when that happened. Raises ValueError on a
    character other than 0, 1, the row separator or spaces.
    """
    base = torch.ones(n, n, dtype=torch.bool) if fallback is None else fallback.clone().bool()
    text = (text or "").replace(" ", "")
    if set(text) - {"0", "1", ROW_SEP}:
        raise ValueError(f"a mask is written with 0, 1 and {ROW_SEP!r} only")
    rows = text.split(ROW_SEP) if text else []
    exact = len(rows) == n and all(len(r) == n for r in rows)
    for i, row in enumerate(rows[:n]):
        for j, ch in enumerate(row[:n]):
            base[i, j] = ch == "1"
    return base, exact


def apply_edits(code: str, labels: Sequence[str], edited_rows: dict) -> str:
    """Apply a checkbox grid's edits ({row: {column label: bool}}) to a mask written as text."""
    n = len(labels)
    mask, _ = decode_mask(code, n)
    names = list(labels)
    for r, changes in edited_rows.items():
        for col, value in changes.items():
            if col in names and 0 <= int(r) < n:
                mask[int(r), names.index(col)] = bool(value)
    return encode_mask(mask)


def attend_mask_text(tokens: Sequence[str], code: str, seed: int = 0, d_k: int = 8):
    """``labs.masking.custom_attention`` under a mask written as ``encode_mask`` text.

    Returns ``labs.masking.CustomAttention`` (mask, stages, the tutorials' naive weights for comparison).
    """
    mask, _ = decode_mask(code, len(tokens))
    return custom_attention(tokens, mask, seed, d_k)

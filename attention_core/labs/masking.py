"""Masking, run on a small batch: padding, the decoder's look-ahead mask, custom masks, and the
tutorials' masking pitfalls reproduced on purpose.

Both tutorials mask with ``scores.masked_fill(mask == 0, float('-inf'))`` (or
``-1e9``) followed by ``softmax``. That line is right for most rows and wrong in three ways this
module makes visible:

1. a query whose keys are all hidden gets ``softmax([-inf, ..., -inf]) = 0/0 = NaN``
   (``pitfall_naive_masked_softmax``; the fix is ``functional.masked_softmax``);
2. ``-1e9`` does not exist in float16 (largest magnitude 65504): ``masked_fill`` on fp16 scores
   raises, and ``-1e9`` cast to fp16 becomes ``-inf`` (``masked_fill_outcome``);
3. masks come in two conventions — the tutorials' ``mask == 0`` means hidden (0/1 integers),
   torch SDPA's boolean ``True`` means visible and its float masks are *added* to the scores —
   and mixing them up fails loudly or, worse, silently (``convention_mixups``).

Masks follow the library convention (``masks.py``): boolean, ``True`` where a query may attend.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import torch
import torch.nn.functional as F

from ..functional import apply_mask, masked_softmax, scaled_dot_product_attention, scaled_dot_scores
from ..masks import causal_mask, local_mask, padding_mask
from ..text import embed_tokens, projection

PAD = "[PAD]"


# ------------------------------------------------------------------ padding a batch
class PaddedBatch(NamedTuple):
    tokens: list[list[str]]  # b rows of n tokens, PAD-filled
    lengths: list[int]       # real tokens per sentence
    side: str                # "right" (pads after the words) or "left" (pads before)

    @property
    def n(self) -> int:
        return len(self.tokens[0]) if self.tokens else 0


def pad_batch(sentences: Sequence[Sequence[str]], *, side: str = "right", pad: str = PAD) -> PaddedBatch:
    """Pad token lists to the longest one so the batch becomes one (b, n) tensor of tokens."""
    if side not in ("right", "left"):
        raise ValueError(f"side must be 'right' or 'left', got {side!r}")
    lengths = [len(s) for s in sentences]
    n = max(lengths, default=0)
    rows = [list(s) + [pad] * (n - len(s)) if side == "right" else [pad] * (n - len(s)) + list(s)
            for s in sentences]
    return PaddedBatch(rows, lengths, side)


def key_padding_mask(lengths: Sequence[int], n: int, *, side: str = "right") -> torch.Tensor:
    """(b, 1, 1, n), True on real tokens. Left padding is the right-padding mask read backwards."""
    keep = padding_mask(lengths, n)
    return keep.flip(-1) if side == "left" else keep


def batch_mask(lengths: Sequence[int], n: int, *, side: str = "right", causal: bool = False) -> torch.Tensor:
    """The mask a layer uses: encoder = key padding only; decoder = key padding AND look-ahead.

    Shape (b, 1, 1, n) for the encoder (broadcast over queries), (b, 1, n, n) for the decoder.
    """
    keep = key_padding_mask(lengths, n, side=side)
    return keep & causal_mask(n) if causal else keep


def batch_qkv(batch: PaddedBatch, d_k: int = 8, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Q, K, V of shape (b, 1, n, d_k) for the padded batch (one head, seeded projections).

    PAD embeds to the zero vector, like ``nn.Embedding(..., padding_idx=...)``: its key is 0 and
    its score with any query is exactly 0 — not -inf, so without a mask it still gets weight.
    """
    rows = []
    for toks in batch.tokens:
        x = embed_tokens(toks, d_k, seed)                       # (n, d_k)
        is_pad = torch.tensor([t == PAD for t in toks], dtype=torch.bool).unsqueeze(-1)
        rows.append(x.masked_fill(is_pad, 0.0))
    x = torch.stack(rows).unsqueeze(1)                          # (b, 1, n, d_k)
    w_q, w_k, w_v = (projection(d_k, d_k, seed, name) for name in ("W_Q", "W_K", "W_V"))
    return x @ w_q, x @ w_k, x @ w_v


class MaskedStages(NamedTuple):
    scores: torch.Tensor         # Q K^T / sqrt(d_k), before masking      (b, h, n_q, n_k)
    masked_scores: torch.Tensor  # hidden cells set to -inf
    weights: torch.Tensor        # safe softmax: rows sum to 1, hidden keys exactly 0
    output: torch.Tensor         # weights @ V                            (b, h, n_q, d_v)


def masked_attention_stages(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                            mask: torch.Tensor | None) -> MaskedStages:
    """Every stage of masked attention, from the library's own functions."""
    scores = scaled_dot_scores(q, k)
    output, weights = scaled_dot_product_attention(q, k, v, mask)
    return MaskedStages(scores, apply_mask(scores, mask), weights, output)


# ------------------------------------------------------------------ pitfall 1: NaN from a fully masked row
def pitfall_naive_masked_softmax(scores: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """PITFALL — the tutorials' masking, kept here on purpose to show where it breaks.

    ``mask`` in the tutorials' convention (0 = hidden; a boolean True = visible works too).
    A row with no visible key becomes softmax of all -inf = 0/0 = NaN, and the NaN spreads
    through ``weights @ V`` to the loss. Use ``functional.masked_softmax`` instead.
    """
    return torch.softmax(scores.masked_fill(mask == 0, float("-inf")), dim=-1)


# ------------------------------------------------------------------ pitfall 2: -1e9 in float16
FILLS = {"-inf": float("-inf"), "-1e9": -1e9}  # plus "finfo.min" = torch.finfo(dtype).min
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def fill_value(name: str, dtype: torch.dtype) -> float:
    """The number a masking line writes: -inf, -1e9, or the most negative finite value of dtype."""
    return torch.finfo(dtype).min if name == "finfo.min" else FILLS[name]


def stored_as(value: float, dtype: torch.dtype) -> float:
    """What ``value`` becomes once stored in ``dtype`` (-1e9 in float16 is -inf)."""
    return float(torch.tensor(value, dtype=torch.float64).to(dtype))


class FillOutcome(NamedTuple):
    fill: str
    dtype: str
    value: float                  # the fill value as written
    stored: float                 # as it is stored in dtype
    weights: torch.Tensor | None  # softmax rows in dtype (None when masked_fill raised)
    error: str | None             # the RuntimeError of masked_fill, if any


def masked_fill_outcome(scores: torch.Tensor, mask: torch.Tensor, fill: str, dtype: str) -> FillOutcome:
    """The tutorials' ``masked_fill(mask == 0, fill)`` + softmax with scores held in ``dtype``.

    float16 + -1e9 raises (the value cannot be represented); -inf gives NaN on a fully masked
    row; finfo(dtype).min never overflows but spreads a fully masked row uniformly over the
    hidden keys (still not zero — only the safe softmax gives zeros).
    """
    dt = DTYPES[dtype]
    value = fill_value(fill, dt)
    s = scores.to(dt)
    try:
        filled = s.masked_fill(mask == 0, value)
    except RuntimeError as exc:  # "value cannot be converted to type c10::Half without overflow"
        return FillOutcome(fill, dtype, value, stored_as(value, dt), None, str(exc).splitlines()[0])
    return FillOutcome(fill, dtype, value, stored_as(value, dt), torch.softmax(filled, dim=-1), None)


def fill_then_cast(scores: torch.Tensor, mask: torch.Tensor, fill: str, dtype: str) -> torch.Tensor:
    """The usual 'fix' of that error: fill in float32, then cast (as autocast does) -> -1e9 becomes -inf."""
    dt = DTYPES[dtype]
    filled = scores.float().masked_fill(mask == 0, fill_value(fill, dt))
    return torch.softmax(filled.to(dt), dim=-1)


# ------------------------------------------------------------------ pitfall 3: two conventions mixed up
MIXUPS = ("correct", "float01", "inverted")


def convention_mixups(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                      keep: torch.Tensor) -> dict[str, torch.Tensor]:
    """The weights SDPA computes when the tutorials' mask is handed over in three ways.

    correct:  a boolean mask, True = visible (SDPA's convention) -> padded keys weigh 0.
    float01:  the tutorials' 0/1 mask as float (the usual 'fix' when an int mask is refused):
              SDPA ADDS a float mask to the scores -> +1 on real keys, nothing hidden.
    inverted: a "where is padding" mask (True = PAD, as in nn.MultiheadAttention's
              key_padding_mask) passed as SDPA's mask -> only the padding is visible.
    Same semantics as ``torch.nn.functional.scaled_dot_product_attention`` (the tests check).
    """
    keep = keep.bool()
    masks = {"correct": keep, "float01": keep.to(q.dtype), "inverted": ~keep}
    return {name: scaled_dot_product_attention(q, k, v, m).weights for name, m in masks.items()}


def int_mask_error(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, keep: torch.Tensor) -> str | None:
    """torch SDPA refuses the tutorials' integer 0/1 mask outright; return its message (None if accepted)."""
    try:
        F.scaled_dot_product_attention(q, k, v, attn_mask=keep.long())
    except RuntimeError as exc:
        return str(exc).splitlines()[0]
    return None



# ------------------------------------------------------------------ the page's computations, end to end
class QKV(NamedTuple):
    q: torch.Tensor              # (b, 1, n, d_k)
    k: torch.Tensor
    v: torch.Tensor


class BatchAttention(NamedTuple):
    batch: PaddedBatch
    keep: torch.Tensor           # the mask used: (b, 1, 1, n) encoder, (b, 1, n, n) decoder
    qkv: QKV
    stages: MaskedStages


def attend_batch(sentences: Sequence[Sequence[str]], side: str = "right", seed: int = 0, causal: bool = False,
                 d_k: int = 8) -> BatchAttention:
    """Pad the batch, build its mask (encoder: padding; decoder: padding AND look-ahead), attend."""
    batch = pad_batch(sentences, side=side)
    keep = batch_mask(batch.lengths, batch.n, side=side, causal=causal)
    q, k, v = batch_qkv(batch, d_k, seed)
    return BatchAttention(batch, keep, QKV(q, k, v), masked_attention_stages(q, k, v, keep))


class PaddingFacts(NamedTuple):
    """What the padding notice quotes, for sentence ``s`` of a batch and one of its query rows."""
    pads: int                    # [PAD] tokens of the sentence
    sum_error: float             # largest |row sum - 1| of its weights
    pad_max: float               # largest weight on one of its padded keys (exactly 0)
    batch_pad_max: float         # largest weight on any padded key of the batch
    share_unmasked: float        # what the row would give the padded keys without the mask
    pad_score: float             # largest |score| of the row's padded keys (their vectors are zeros)


def padding_facts(run: BatchAttention, s: int, row: int) -> PaddingFacts:
    """The padding mask at work in ``run`` (an encoder batch): sentence ``s``, query ``row``."""
    key_keep = run.keep[:, 0, 0]                                            # (b, n)
    n = run.batch.n
    scores, weights = run.stages.scores[s, 0], run.stages.weights[s, 0]     # (n, n)
    hidden = ~key_keep[s]                                                   # (n,) padded keys
    all_pad = ~key_keep.unsqueeze(1).expand(-1, n, -1)                      # (b, n, n)
    pads = int(hidden.sum())
    return PaddingFacts(
        pads=pads,
        sum_error=float((weights.sum(-1) - 1).abs().max()),
        pad_max=float(weights[:, hidden].max()) if pads else 0.0,
        batch_pad_max=float(run.stages.weights[:, 0][all_pad].max()) if all_pad.any() else 0.0,
        share_unmasked=float(masked_softmax(scores[row])[hidden].sum()) if pads else 0.0,
        pad_score=float(scores[row][hidden].abs().max()) if pads else 0.0)


class CustomAttention(NamedTuple):
    mask: torch.Tensor           # (n, n), True = visible
    stages: MaskedStages
    naive: torch.Tensor          # the tutorials' softmax of the same scores (NaN on a row with no key)


def custom_attention(tokens: Sequence[str], mask: torch.Tensor, seed: int = 0, d_k: int = 8) -> CustomAttention:
    """Attention of one sentence under a custom (n, n) mask (``ui.masking_state.decode_mask`` reads
    the page's mask text), with the tutorials' naive weights for comparison."""
    q, k, v = batch_qkv(pad_batch([tokens]), d_k, seed)
    out = masked_attention_stages(q, k, v, mask)
    return CustomAttention(mask, out, pitfall_naive_masked_softmax(out.scores, mask))


PRESETS = ("all", "causal", "window", "none")


def preset_mask(name: str, n: int) -> torch.Tensor:
    """Starting points for a custom mask: all visible, causal, a ±1 window, all hidden."""
    if name == "all":
        return torch.ones(n, n, dtype=torch.bool)
    if name == "causal":
        return causal_mask(n)
    if name == "window":
        return local_mask(n, 1)
    if name == "none":
        return torch.zeros(n, n, dtype=torch.bool)
    raise ValueError(f"unknown preset {name!r}")


def default_custom_mask(n: int) -> torch.Tensor:
    """A ±1 window with the third query switched off entirely: the safe softmax's zero row, on sight."""
    m = local_mask(n, 1)
    if n >= 3:
        m[2] = False
    return m


class FillCell(NamedTuple):
    """One cell of the fp16 table: a fill value in a dtype, on a row with no visible key."""
    stored: float                # the fill value as stored in the dtype
    status: str                  # "error" (masked_fill raised), "nan", "zero" or "uniform"
    weight: float | None         # the first weight of the row (None after an error)
    error: str | None            # masked_fill's message


class FullyMaskedDemo(NamedTuple):
    sentence: int                # the sentence whose first query sees nothing
    by_hand: bool                # True: no row was fully masked, so the row was hidden by hand
    tokens: list[str]
    naive: list[float]           # the tutorials' weights of the row: all NaN
    safe: list[float]            # masked_softmax's weights of the row: all 0
    nan: int                     # NaN weights in the whole batch with the tutorials' softmax
    naive_sum: float             # sum of the batch's outputs with those weights (NaN)
    safe_sum: float              # and with the safe ones
    zeros: int                   # rows of zeros the safe softmax gives
    fills: dict                  # (fill, dtype) -> FillCell
    cast: float                  # -1e9 filled in float32 then cast to float16: the row's first weight


def fully_masked_demo(sentences: Sequence[Sequence[str]], seed: int = 0, d_k: int = 8) -> FullyMaskedDemo:
    """Pitfalls 1 and 2 on a row with no visible key, as plain numbers.

    The row: the first query of the shortest sentence, left-padded, in a decoder — a [PAD] that
    sees nothing (or, when every sentence has the same length, a row hidden by hand: by_hand).
    """
    batch, keep, (q, k, v), stages = attend_batch(sentences, "left", seed, True, d_k)
    s = min(range(len(batch.lengths)), key=lambda i: batch.lengths[i])
    row_mask = keep[s, 0, 0].clone()
    by_hand = bool(row_mask.any())
    row_mask[:] = False
    scores = stages.scores[s, 0, 0]
    all_naive = pitfall_naive_masked_softmax(stages.scores, keep)
    fills = {}
    for fill in ("-inf", "-1e9", "finfo.min"):
        for dtype in DTYPES:
            out = masked_fill_outcome(scores, row_mask, fill, dtype)
            w = None if out.error else out.weights.float()
            status = ("error" if out.error else "nan" if torch.isnan(w).any()
                      else "zero" if bool((w == 0).all()) else "uniform")
            fills[fill, dtype] = FillCell(out.stored, status, None if w is None else float(w[0]), out.error)
    return FullyMaskedDemo(
        sentence=s, by_hand=by_hand, tokens=batch.tokens[s],
        naive=pitfall_naive_masked_softmax(scores, row_mask).tolist(), safe=masked_softmax(scores, row_mask).tolist(),
        nan=int(torch.isnan(all_naive).sum()), naive_sum=float((all_naive @ v).sum()),
        safe_sum=float(stages.output.sum()), zeros=int((stages.weights.sum(-1) == 0).sum()),
        fills=fills, cast=float(fill_then_cast(scores, row_mask, "-1e9", "float16")[0]))

"""Why attention divides by sqrt(d_k): the variance of q.k, softmax saturation, temperature.

Vaswani et al. (2017), footnote 4: if the entries of q and k are independent with mean 0
and variance 1, then q.k = sum_i q_i k_i has mean 0 and variance d_k. Large scores push the
softmax into saturation (one weight near 1, the rest near 0), where its Jacobian — the
gradient that reaches the scores — vanishes. The first tutorial (seeds/000, section 4.2 and
pitfall 1 of section 10) states this; here it is measured.

Every score below is ``q.k * scale`` with scale = 1 / (tau * sqrt(d_k)) when scaled and
1 / tau when not: dividing by sqrt(d_k) *is* a softmax temperature tau = sqrt(d_k).
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from typing import NamedTuple

import torch

from ..diagnostics import attention_entropy, max_weight, softmax_jacobian_norm
from ..functional import dot_scores, masked_softmax

D_K_MAX = 1024
D_K_STEPS = tuple(2 ** i for i in range(11))              # 1, 2, 4, ..., 1024: the slider
SWEEP_D_K = tuple(sorted({round(2 ** (i / 2)) for i in range(21)}))  # ~sqrt(2) steps, holds D_K_STEPS
TEMPERATURES = tuple(2.0 ** i for i in range(-3, 6))      # 0.125 ... 32 = sqrt(1024)
STRIP_D_K = (1, 4, 16, 64, 256, 1024)                     # sqrt(d_k) = 1, 2, 4, 8, 16, 32


def check_d_k(d_k: int) -> int:
    if not 1 <= int(d_k) <= D_K_MAX:
        raise ValueError(f"d_k must be between 1 and {D_K_MAX}, got {d_k}")
    return int(d_k)


def sample_qk(n_q: int, n_k: int, d_k: int, seed: int, *,
              dtype: torch.dtype = torch.float64) -> tuple[torch.Tensor, torch.Tensor]:
    """Random queries (n_q, d_k) and keys (n_k, d_k), entries i.i.d. N(0, 1).

    Nested in d_k: the vectors are drawn with D_K_MAX entries and cut to their first d_k,
    so growing d_k adds dimensions to the *same* queries and keys (a row's scores change
    smoothly as d_k grows instead of being redrawn).
    """
    d_k = check_d_k(d_k)
    g = torch.Generator().manual_seed(int(seed))
    q = torch.randn(n_q, D_K_MAX, generator=g)   # drawn in float32 (fast), then cast
    k = torch.randn(n_k, D_K_MAX, generator=g)
    return q[:, :d_k].to(dtype), k[:, :d_k].to(dtype)


def score_scale(d_k: int, scaled: bool = True, temperature: float = 1.0) -> float:
    """The factor applied to q.k: 1 / (tau sqrt(d_k)) when scaled, 1 / tau when not."""
    if temperature <= 0:
        raise ValueError(f"temperature must be > 0, got {temperature}")
    return 1.0 / (temperature * (math.sqrt(check_d_k(d_k)) if scaled else 1.0))


def attention_weights(q: torch.Tensor, k: torch.Tensor, scale: float) -> torch.Tensor:
    """softmax(q k^T * scale) over the keys: (n_q, d_k), (n_k, d_k) -> (n_q, n_k)."""
    return masked_softmax(dot_scores(q, k) * scale)


class VarianceSweep(NamedTuple):
    """Raw dot products of independent (q, k) pairs, per d_k, and their measured variance."""
    d_k: tuple[int, ...]
    dots: torch.Tensor        # (len(d_k), n_pairs) raw q.k
    var_raw: torch.Tensor     # (len(d_k),) sample variance of q.k        (theory: d_k)
    var_scaled: torch.Tensor  # (len(d_k),) sample variance of q.k/sqrt(d_k)  (theory: 1)


def variance_sweep(seed: int, d_ks: Sequence[int] = D_K_STEPS, n_pairs: int = 2048) -> VarianceSweep:
    """Measure Var(q.k) for n_pairs independent pairs at every d_k in ``d_ks``.

    The pairs are nested in d_k like ``sample_qk``: q.k at d_k is the running sum of the
    first d_k products q_i k_i (one cumulative sum serves every d_k).
    """
    d_ks = tuple(check_d_k(d) for d in d_ks)
    g = torch.Generator().manual_seed(int(seed) + 1)       # independent of sample_qk's stream
    width = max(d_ks)
    q = torch.randn(n_pairs, width, generator=g)            # float32: fast, exact enough for a variance
    k = torch.randn(n_pairs, width, generator=g)
    running = (q * k).cumsum(dim=-1)                         # (n_pairs, width): q.k over the first j+1 dims
    dots = running[:, [d - 1 for d in d_ks]].T.double()     # (len(d_ks), n_pairs)
    var_raw = dots.var(dim=-1)
    scale = torch.tensor([math.sqrt(d) for d in d_ks], dtype=dots.dtype)
    var_scaled = (dots / scale[:, None]).var(dim=-1)
    return VarianceSweep(d_ks, dots, var_raw, var_scaled)


class SaturationStats(NamedTuple):
    """Row diagnostics of softmax weights: the median over the rows (queries), i.e. a typical query."""
    max_weight: torch.Tensor      # 1/n_k when flat, 1 when saturated
    entropy: torch.Tensor         # nats: log(n_k) when flat, 0 when saturated
    jacobian_norm: torch.Tensor   # ||d softmax / d scores||_F: the gradient signal, 0 when saturated


def _median_rows(x: torch.Tensor) -> torch.Tensor:
    return x.median(dim=-1).values   # lower middle value for an even count; deterministic


def saturation_stats(weights: torch.Tensor) -> SaturationStats:
    """Median over rows of max weight, entropy and softmax Jacobian norm. weights (..., n_q, n_k) -> (...)."""
    return SaturationStats(_median_rows(max_weight(weights)), _median_rows(attention_entropy(weights)),
                           _median_rows(softmax_jacobian_norm(weights)))


class SaturationSweep(NamedTuple):
    d_k: tuple[int, ...]
    unscaled: SaturationStats     # each field (len(d_k),)
    scaled: SaturationStats


def sweep_scores(seed: int, d_ks: Sequence[int] = SWEEP_D_K, n_q: int = 256,
                 n_k: int = 16) -> torch.Tensor:
    """Raw scores q.k of the same nested queries and keys at every d_k: (len(d_ks), n_q, n_k), float64."""
    d_ks = tuple(check_d_k(d) for d in d_ks)
    q, k = sample_qk(n_q, n_k, max(d_ks), seed)
    return torch.stack([dot_scores(q[:, :d], k[:, :d]) for d in d_ks])


def saturation_curves(scores: torch.Tensor, d_ks: Sequence[int], temperature: float = 1.0) -> SaturationSweep:
    """Max weight, entropy and Jacobian norm of softmax(q.k * scale) against d_k, both ways.

    scores (len(d_ks), n_q, n_k): the raw q.k at each d_k (``sweep_scores``). Use float64
    so that the small Jacobian norms of saturated rows are still resolved (down to ~1e-7:
    the closed form of ``softmax_jacobian_norm`` cancels below that).
    """
    d_ks = tuple(check_d_k(d) for d in d_ks)
    stats = {}
    for scaled in (False, True):
        scale = torch.tensor([score_scale(d, scaled, temperature) for d in d_ks], dtype=scores.dtype)
        stats[scaled] = saturation_stats(masked_softmax(scores * scale[:, None, None]))
    return SaturationSweep(d_ks, stats[False], stats[True])


def saturation_sweep(seed: int, temperature: float = 1.0, d_ks: Sequence[int] = SWEEP_D_K,
                     n_q: int = 256, n_k: int = 16) -> SaturationSweep:
    """``saturation_curves`` of the same nested random queries and keys at every d_k."""
    return saturation_curves(sweep_scores(seed, d_ks, n_q, n_k), d_ks, temperature)


def temperature_curve(scores: torch.Tensor, temperatures: torch.Tensor) -> torch.Tensor:
    """Max weight of softmax(scores / tau) for each tau: (..., n_k), (m,) -> (..., m).

    Sharp (1) as tau -> 0, flat (1/n_k) as tau -> inf.
    """
    return max_weight(masked_softmax(scores[..., None, :] / temperatures[:, None]))


def naive_softmax(scores: torch.Tensor) -> torch.Tensor:
    """exp(s) / sum exp(s) WITHOUT subtracting the row max — the textbook formula.

    Only for the pitfall demo: exp overflows to inf for s > 88.7 in float32 (s > 11.1 in
    float16) and inf / inf = NaN. ``masked_softmax`` shifts by the max and never overflows.
    """
    e = torch.exp(scores)
    return e / e.sum(dim=-1, keepdim=True)


def overflow_rows(scores: torch.Tensor, scale: float, dtype: torch.dtype = torch.float16) -> int:
    """How many rows of ``scores * scale`` the naive softmax turns into NaN in ``dtype`` (pitfall 1)."""
    return int(torch.isnan(naive_softmax((scores * scale).to(dtype))).any(dim=-1).sum())


# ------------------------------------------------------------------ the page's computations, end to end
class SoftmaxView(NamedTuple):
    """One setting of the controls, seen through one query (``row``)."""
    weights: torch.Tensor     # (n_show, n_k) softmax of the first n_show queries
    strip: torch.Tensor       # (2, len(STRIP_D_K), n_k) the row at growing d_k, [unscaled, scaled]
    curves: torch.Tensor      # (2, len(temperatures)) the row's max weight against tau, [raw, / sqrt(d_k)]


def softmax_view(all_scores: torch.Tensor, d_k: int, temperature: float, scaled: bool, row: int, n_show: int,
                 temperatures: torch.Tensor) -> SoftmaxView:
    """The heatmap, the clicked row as d_k grows, and its temperature curve.

    all_scores (len(SWEEP_D_K), n_q, n_k): the raw q.k of ``sweep_scores``."""
    scores = all_scores[SWEEP_D_K.index(d_k)]                                       # (n_q, n_k) raw q.k
    weights = masked_softmax(scores[:n_show] * score_scale(d_k, scaled, temperature))
    strip_rows = all_scores[[SWEEP_D_K.index(d) for d in STRIP_D_K], row]           # (6, n_k)
    strip_scale = torch.tensor([[score_scale(d, flag, temperature) for d in STRIP_D_K]
                                for flag in (False, True)], dtype=scores.dtype)     # (2, 6)
    strip = masked_softmax(strip_rows * strip_scale[..., None])                     # (2, 6, n_k)
    raw_row = scores[row]
    curves = temperature_curve(torch.stack([raw_row, raw_row / math.sqrt(d_k)]), temperatures.to(scores.dtype))
    return SoftmaxView(weights, strip, curves)


class OverflowCounts(NamedTuple):
    """Rows the naive exp(s) / sum exp(s) turns into NaN, per dtype, without / with 1/sqrt(d_k)."""
    nan16_raw: int
    nan16_scaled: int
    nan32_raw: int
    nan32_scaled: int


def overflow_counts(scores: torch.Tensor, d_k: int, temperature: float = 1.0) -> OverflowCounts:
    return OverflowCounts(*(overflow_rows(scores, score_scale(d_k, flag, temperature), dtype)
                            for dtype in (torch.float16, torch.float32) for flag in (False, True)))


def typical_max_weight(scores: torch.Tensor, scale: float) -> float:
    """A typical query's (the median row's) max weight of softmax(scores * scale): the "which d?" pitfall."""
    return float(saturation_stats(masked_softmax(scores * scale)).max_weight)

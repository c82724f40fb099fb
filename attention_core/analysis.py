"""Reading trained attention: per-head statistics, head similarity, the pattern gallery,
attention rollout, and a 2-D view of query/key geometry.

Sources: the second tutorial's ``AttentionAnalyzer`` (entropy and sparsity per layer) and the
first tutorial's pattern table (section 7.3: diagonal, vertical stripes on special tokens, blocks,
broad). Rollout: Abnar & Zuidema (2020), "Quantifying Attention Flow in Transformers".
Head patterns: Clark et al. (2019), "What Does BERT Look At?".

Weights are row-stochastic tensors (..., n_q, n_k), e.g. (batch, heads, n, n) per layer.
"""
from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from typing import NamedTuple

import torch

from .diagnostics import attention_entropy, sparsity
from .masks import block_mask

# ---------------------------------------------------------------------------------------------
# per-head statistics (the second tutorial's AttentionAnalyzer, corrected)
# ---------------------------------------------------------------------------------------------


def _as_layers(weights) -> torch.Tensor:
    """A (b, h, n, n) tensor, an (h, n, n) tensor, or a list of per-layer (b, h, n, n) tensors ->
    (L, b, h, n, n) with L = 1 for a single tensor."""
    if isinstance(weights, (list, tuple)):
        return torch.stack([_as_layers(w)[0] for w in weights])
    if weights.dim() == 3:
        return weights[None, None]
    if weights.dim() == 4:
        return weights[None]
    if weights.dim() == 5:
        return weights
    raise ValueError(f"expected (h, n, n), (b, h, n, n) or a list of those, got shape {tuple(weights.shape)}")


def _summarise(per_row: torch.Tensor, live: torch.Tensor, single: bool) -> torch.Tensor:
    # per_row, live: (L, b, h, n_q) -> mean over batch and live queries -> (L, h)
    live = live.to(per_row.dtype)
    out = (per_row * live).sum(dim=(1, 3)) / live.sum(dim=(1, 3)).clamp_min(1)
    return out[0] if single else out


def head_entropy(weights, normalize: bool = False) -> torch.Tensor:
    """Mean attention entropy (nats) of each head, over batch and queries.

    ``weights``: (h, n, n) or (b, h, n, n) -> (h,); a list of per-layer (b, h, n, n) -> (L, h).
    Rows that are all zero (queries with no visible key) are left out of the mean.
    ``normalize=True`` divides by log(n_k) (1 = uniform, 0 = one-hot).

    Exact (0 log 0 = 0, via ``diagnostics.attention_entropy``). The tutorial's
    ``-sum(p * log(p + 1e-8))`` is biased low by about n * 1e-8 and mixes in padded rows.
    """
    single = not isinstance(weights, (list, tuple))
    w = _as_layers(weights)
    ent = attention_entropy(w)                               # (L, b, h, n_q)
    if normalize:
        ent = ent / math.log(max(w.size(-1), 2))
    return _summarise(ent, w.sum(-1) > 0, single)


def head_sparsity(weights, threshold: float = 0.1) -> torch.Tensor:
    """Mean fraction of weights below ``threshold`` per row, for each head (shapes as head_entropy).

    The tutorial's ``(attn < 0.1).float().mean()`` over the whole tensor; note that with n > 10
    keys even a uniform row is "sparse" by this measure (every weight is 1/n < 0.1).
    """
    single = not isinstance(weights, (list, tuple))
    w = _as_layers(weights)
    return _summarise(sparsity(w, threshold), w.sum(-1) > 0, single)


# ---------------------------------------------------------------------------------------------
# Jensen-Shannon distance between rows, and between heads
# ---------------------------------------------------------------------------------------------


def _kl2(p: torch.Tensor, m: torch.Tensor) -> torch.Tensor:
    # sum p log2(p / m) with 0 log 0 = 0 (p > 0 implies m > 0 here)
    ratio = torch.where(p > 0, p / torch.where(m > 0, m, torch.ones_like(m)), torch.ones_like(p))
    return (p * torch.log2(ratio)).sum(dim=-1)


def js_distance(p: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    """Jensen-Shannon distance (base 2) between distributions along the last axis.

    sqrt( KL(p || m) / 2 + KL(q || m) / 2 ),  m = (p + q) / 2.  In [0, 1], symmetric, 0 iff p == q,
    1 for disjoint supports; a metric (Endres & Schindelin 2003). Broadcasts p against q.
    Rows are used as given (not re-normalised), as attention rows already sum to 1.
    Computed in float64: the square root magnifies rounding near 0 (a float32 divergence of
    1e-8 would read as a distance of 1e-4); returned in the inputs' dtype.
    """
    dtype = torch.promote_types(p.dtype, q.dtype)
    p, q = torch.broadcast_tensors(p.to(torch.float64), q.to(torch.float64))
    m = (p + q) / 2
    js = (_kl2(p, m) + _kl2(q, m)) / 2
    return js.clamp(0.0, 1.0).sqrt().to(dtype)


def head_similarity(weights: torch.Tensor) -> torch.Tensor:
    """(h, n, n) [or (b, h, n, n)] -> (h, h): mean JS distance between the heads' rows.

    Entry (i, j) averages js_distance(head_i[q], head_j[q]) over queries q (and the batch):
    0 on the diagonal and for heads that attend identically, 1 for heads that never look at
    the same keys. (A distance: small = similar.)
    """
    if weights.dim() == 3:
        weights = weights[None]
    if weights.dim() != 4:
        raise ValueError(f"expected (h, n, n) or (b, h, n, n), got shape {tuple(weights.shape)}")
    bsz, h, n, _ = weights.shape
    rows = max(1, min(h, _CHUNK // max(1, bsz * h * n * n)))  # heads i per chunk: temporaries stay ~8 MB
    b = weights[:, None]                                     # (b, 1, h, n, n)
    return torch.cat([js_distance(weights[:, i:i + rows, None], b).mean(dim=(0, 3))   # (rows, h)
                      for i in range(0, h, rows)])


# ---------------------------------------------------------------------------------------------
# the pattern gallery (first tutorial, section 7.3; Clark et al. 2019)
# ---------------------------------------------------------------------------------------------

PATTERNS = ("diagonal", "previous", "next", "vertical", "block", "broad")


def _shift_template(n: int, offset: int) -> torch.Tensor:
    # row i attends i + offset, or itself when that falls outside the sequence
    i = torch.arange(n)
    j = i + offset
    j = torch.where((j >= 0) & (j < n), j, i)
    t = torch.zeros(n, n)
    t[i, j] = 1.0
    return t


def _template(name: str, n: int, index: int = 0, block: int | None = None) -> torch.Tensor:
    if name == "diagonal":
        return torch.eye(n)
    if name == "previous":
        return _shift_template(n, -1)
    if name == "next":
        return _shift_template(n, +1)
    if name == "vertical":
        if not 0 <= index < n:
            raise ValueError(f"index must lie in [0, {n}), got {index}")
        t = torch.zeros(n, n)
        t[:, index] = 1.0
        return t
    if name == "block":
        block = default_block(n) if block is None else block
        b = block_mask(n, block).float()
        return b / b.sum(-1, keepdim=True)
    if name == "broad":
        return torch.full((n, n), 1.0 / n)
    raise ValueError(f"pattern must be one of {PATTERNS}, got {name!r}")


def default_block(n: int) -> int:
    """Block (phrase) size of the gallery's block pattern: about a third of the sentence, >= 2."""
    return max(2, math.ceil(n / 3))


def synthetic_pattern(name: str, n: int, *, index: int = 0, block: int | None = None,
                      noise: float = 0.0, seed: int = 0) -> torch.Tensor:
    """A row-stochastic (n, n) example of a head pattern.

    diagonal: each token attends to itself.  previous / next: to the token before / after (the
    first / last token, which has none, attends to itself).  vertical: every token attends to
    token ``index`` (a [CLS], first token or punctuation mark).  block: uniform inside aligned
    blocks of ``block`` tokens (phrase-level; the last block is shorter when block does not
    divide n).  broad: uniform over all tokens.

    ``noise`` in [0, 1] mixes in random rows: (1 - noise) * template + noise * softmax(N(0, 1)),
    reproducible through ``seed``.
    """
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    if not 0.0 <= noise <= 1.0:
        raise ValueError(f"noise must lie in [0, 1], got {noise}")
    t = _template(name, n, index, block)
    if noise > 0:
        g = torch.Generator().manual_seed(seed)
        rand = torch.softmax(torch.randn(n, n, generator=g), dim=-1)
        t = (1 - noise) * t + noise * rand
    return t


def _candidates(name: str, n: int) -> list[torch.Tensor]:
    # a head's stripe or phrase length is unknown: try every position / block size
    if name == "vertical":
        return [_template("vertical", n, index=j) for j in range(n)]
    if name == "block":
        return [_template("block", n, block=s) for s in range(2, max(2, n - 1) + 1)]
    return [_template(name, n)]


_CACHED_N = 64         # template stacks kept for n <= 64 (at most 8: <= 17 MB in float32)
_CHUNK = 1 << 18       # elements of the largest temporary of the classifier (1 MB in float32)


def _all_candidates(n: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Every template for length n, float32 (C, n, n) with C = 2n + 2, and the pattern index of each (C,)."""
    return _cached_candidates(n) if n <= _CACHED_N else _build_candidates(n)


def _build_candidates(n: int) -> tuple[torch.Tensor, torch.Tensor]:
    temps, owner = [], []
    for k, name in enumerate(PATTERNS):
        c = _candidates(name, n)
        temps += c
        owner += [k] * len(c)
    return torch.stack(temps).to(torch.float32), torch.tensor(owner)


_cached_candidates = functools.lru_cache(maxsize=8)(_build_candidates)

_LN2 = math.log(2.0)


def _js_bits_rows(p: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    """JS divergence (base 2) between the rows of p and q (broadcast; float32), summed in float64.

    With s = p + q and d = (p - q) / s per entry, JS = sum_i s_i f(d_i) / (4 ln 2), where
    f(d) = (1 + d) ln(1 + d) + (1 - d) ln(1 - d) >= 0 (0 ln 0 = 0 at d = +-1: disjoint entries). Unlike
    JS = H(m) - (H(p) + H(q)) / 2, whose cancellation in float32 leaves ~1e-6 of rounding (read as a distance
    of ~1e-3 after the square root), the rounding here is ~eps * s |d| per entry, and so at most
    ~eps * sqrt(sum s) / 2 ~ 1e-7 on the distance sqrt(JS) (Cauchy-Schwarz)."""
    s = p + q
    d = torch.sub(p, q).div_(s).nan_to_num_(0.0)             # 0 / 0 (both zero) -> 0; in place: fewer buffers
    f = torch.special.xlog1py(1 + d, d)
    f += torch.special.xlog1py(1 - d, d.neg_())
    return f.mul_(s).sum(dim=-1, dtype=torch.float64) / (4 * _LN2)


def _scores_batch(weights: torch.Tensor) -> torch.Tensor:
    """(h, n, n) -> (h, len(PATTERNS)) scores, all heads and templates, float64.

    Computed in float32, in chunks of heads x templates of at most ``_CHUNK`` elements (memory stays a few
    MB whatever h and n: 32 heads x 130 templates x 64 x 64 at once was 136 MB per float64 temporary);
    distances agree with the float64 definition to ~1e-7."""
    w = weights.detach().to(torch.float32).cpu()
    h, n = w.shape[0], w.shape[-1]
    total = w.sum(-1, keepdim=True)
    live = (total > 0).squeeze(-1).to(torch.float64)                           # (h, n)
    w = w / torch.where(total > 0, total, torch.ones_like(total))
    temps, owner = _all_candidates(n)                                          # (C, n, n), (C,)
    c_all = temps.shape[0]
    per_head = max(1, c_all * n * n)
    hc = max(1, min(h, _CHUNK // per_head))                                    # heads per chunk
    cc = c_all if hc > 1 else max(1, min(c_all, _CHUNK // max(1, n * n)))            # templates per chunk
    n_live = live.sum(-1, keepdim=True)                                        # (h, 1)
    mean_d = torch.empty(h, c_all, dtype=torch.float64)
    for h0 in range(0, h, hc):
        wh = w[h0:h0 + hc, None]                                               # (hc, 1, n, n)
        lv = live[h0:h0 + hc, None]                                            # (hc, 1, n)
        for c0 in range(0, c_all, cc):
            js = _js_bits_rows(wh, temps[None, c0:c0 + cc])                   # (hc, cc, n)
            d = js.clamp(0.0, 1.0).sqrt()
            mean_d[h0:h0 + hc, c0:c0 + cc] = (d * lv).sum(-1) / n_live[h0:h0 + hc].clamp_min(1)
    mean_d = torch.where(n_live > 0, mean_d, torch.ones_like(mean_d))
    best = torch.full((h, len(PATTERNS)), float("inf"), dtype=torch.float64)
    best = best.scatter_reduce(1, owner.expand(h, -1), mean_d, reduce="amin")  # min per pattern
    return 1.0 - best


def pattern_scores(weights: torch.Tensor) -> dict[str, float]:
    """Score of an (n, n) head against every pattern: 1 - mean JS distance of its rows to the
    pattern's rows (1 = identical, 0 = disjoint supports). "vertical" takes its best column,
    "block" its best block size. All-zero rows (queries with nothing visible) are ignored."""
    if weights.dim() != 2 or weights.size(0) != weights.size(1):
        raise ValueError(f"expected one head's (n, n) weights, got shape {tuple(weights.shape)}")
    return dict(zip(PATTERNS, _scores_batch(weights[None])[0].tolist()))


def _label(scores: dict[str, float]) -> str:
    return max(PATTERNS, key=lambda k: (scores[k], -PATTERNS.index(k)))


def classify_head(weights: torch.Tensor) -> tuple[str, dict[str, float]]:
    """(best pattern, scores of every pattern) for one head's (n, n) weights.

    Ties go to the earlier entry of ``PATTERNS``. For n <= 2 patterns coincide (e.g. "previous"
    equals "vertical" on token 0), so labels of very short sentences are ambiguous.
    """
    scores = pattern_scores(weights)
    return _label(scores), scores


def classify_heads(weights: torch.Tensor) -> list[tuple[str, dict[str, float]]]:
    """``classify_head`` for each head of (h, n, n) weights (take one batch element first)."""
    if weights.dim() != 3 or weights.size(1) != weights.size(2):
        raise ValueError(f"expected (h, n, n), got shape {tuple(weights.shape)}")
    out = []
    for row in _scores_batch(weights).tolist():
        scores = dict(zip(PATTERNS, row))
        out.append((_label(scores), scores))
    return out


# ---------------------------------------------------------------------------------------------
# attention rollout (Abnar & Zuidema 2020)
# ---------------------------------------------------------------------------------------------


def attention_rollout(weights_per_layer: Sequence[torch.Tensor], add_residual: bool = True,
                      cumulative: bool = False) -> torch.Tensor:
    """How much each input token flows into each position after all layers.

    Per layer: average the heads, A = mean_h W; with ``add_residual`` add the identity for the
    skip connection and renormalise rows, A = (A + I) / rowsum; then multiply the layers in
    order, R = A_L ... A_2 A_1. Inputs (b, h, n, n) or (h, n, n) per layer -> (b, n, n) or (n, n);
    ``cumulative=True`` returns every partial product stacked on a new first axis (L, ...).

    Caveats: it ignores the FFNs, LayerNorms and values (a linear-mixing assumption), and
    averaging heads hides what single heads do; it is a visualisation, not an attribution.
    """
    if len(weights_per_layer) == 0:
        raise ValueError("need at least one layer")
    out, rollout = [], None
    for w in weights_per_layer:
        a = w.mean(dim=-3)                                           # (..., n, n)
        if add_residual:
            a = a + torch.eye(a.size(-1), dtype=a.dtype, device=a.device)
        total = a.sum(-1, keepdim=True)
        a = a / torch.where(total > 0, total, torch.ones_like(total))
        rollout = a if rollout is None else a @ rollout
        out.append(rollout)
    return torch.stack(out) if cumulative else rollout


# ---------------------------------------------------------------------------------------------
# query / key geometry
# ---------------------------------------------------------------------------------------------


class PCA2D(NamedTuple):
    """coords (n, 2); explained_variance_ratio (2,); components (2, d) rows; mean (d,)."""

    coords: torch.Tensor
    explained_variance_ratio: torch.Tensor
    components: torch.Tensor
    mean: torch.Tensor


def pca_2d(x: torch.Tensor) -> PCA2D:
    """Project rows of x (n, d) onto their two principal directions (SVD of the centred data).

    Signs are fixed (each component's largest-magnitude loading is positive), so the picture
    does not flip between reruns. With d < 2 or rank < 2 the missing axis is zero.
    """
    if x.dim() != 2:
        raise ValueError(f"expected (n, d), got shape {tuple(x.shape)}")
    x = x.detach().to(torch.float32)
    n, d = x.shape
    mean = x.mean(0) if n else torch.zeros(d)
    xc = x - mean
    _, s, vh = torch.linalg.svd(xc, full_matrices=False)           # vh (k, d), k = min(n, d)
    comps = torch.zeros(2, d)
    k = min(2, vh.size(0))
    comps[:k] = vh[:k]
    # deterministic signs
    idx = comps.abs().argmax(dim=1)
    sign = torch.sign(comps[torch.arange(2), idx])
    comps = comps * torch.where(sign == 0, torch.ones_like(sign), sign)[:, None]
    var = s ** 2
    total = var.sum()
    ratio = torch.zeros(2)
    if total > 0:
        ratio[:k] = var[:k] / total
    return PCA2D(xc @ comps.T, ratio, comps, mean)


class QKGeometry(NamedTuple):
    """queries (n_q, 2) and keys (n_k, 2) in one shared plane; values (n_k, 2) in their own
    plane (None if not given); scores (n_q, n_k) the exact scaled dot products in full d_k;
    explained_variance_ratio of the shared q/k plane."""

    queries: torch.Tensor
    keys: torch.Tensor
    values: torch.Tensor | None
    scores: torch.Tensor
    explained_variance_ratio: torch.Tensor


def qk_geometry(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor | None = None) -> QKGeometry:
    """Queries (n_q, d_k) and keys (n_k, d_k) of ONE head projected into one shared 2-D space:
    the PCA is fitted on their concatenation, so distances and directions between a query and a
    key are comparable (two separate PCAs would put them in unrelated planes).

    Caveat: the weights come from dot products in all d_k dimensions; the plane keeps only the
    directions of largest spread (see explained_variance_ratio), and centring moves the origin.
    Values live in another space: they get their own PCA.
    """
    if q.dim() != 2 or k.dim() != 2 or q.size(-1) != k.size(-1):
        raise ValueError(f"expected q (n_q, d) and k (n_k, d), got {tuple(q.shape)} and {tuple(k.shape)}")
    p = pca_2d(torch.cat([q, k]))
    nq = q.size(0)
    vals = pca_2d(v).coords if v is not None else None
    scores = (q @ k.T).detach() / math.sqrt(q.size(-1))
    return QKGeometry(p.coords[:nq], p.coords[nq:], vals, scores, p.explained_variance_ratio)

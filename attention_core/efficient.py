"""Efficient attention: linear, Performer, Linformer, sparse patterns and flash attention.

Section 8 of the first tutorial lists the variants (with a complexity table); the second
tutorial builds a block-local + global ``SparseAttention`` layer. Here each idea is one
small function returning ``AttentionOutput(output, weights)``, shapes (batch, heads, seq, dim):

- ``linear_attention``   Katharopoulos et al. 2020, "Transformers are RNNs": phi(x) = elu(x) + 1,
                          softmax(QK^T)V ~ phi(Q) (phi(K)^T V) / phi(Q) sum_j phi(k_j). O(n).
- ``performer_attention`` Choromanski et al. 2021, "Rethinking Attention with Performers":
                          FAVOR+ positive orthogonal random features, unbiased for exp(q.k/sqrt d).
- ``linformer_attention`` Wang et al. 2020, "Linformer": project keys/values along the sequence,
                          K' = E K, V' = F V with E, F (k_proj, n), then exact softmax. O(n k).
- ``sparse_attention``    exact attention restricted to a pattern (strided: the first tutorial's fixed
                          columns, not Child et al. 2019's relative causal one; block-local + global
                          tokens, in place of the second tutorial's pooled-query layer;
                          Longformer, Beltagy et al. 2020; BigBird, Zaheer et al. 2020), and
                          ``sliding_window_attention``, a genuinely O(n w) banded implementation.
- ``flash_attention``     Dao et al. 2022: tiles of Q meet tiles of K/V, online softmax (running
                          max m, running sum l, rescaled accumulator); exact, never forms n x n.

Methods that never form the n x n weight matrix return ``weights=None``;
``effective_weights(method, q, k, **params)`` materialises the matrix each one implies (small n
only) so it can be drawn next to exact softmax, and ``effective_weights(...) @ v`` equals the
method's output.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch.nn.functional import pad

from . import masks
from .functional import (
    default_scale,
    masked_softmax,
    scaled_dot_product_attention,
    scaled_dot_scores,
)
from .types import AttentionOutput

__all__ = [
    "FlashAttentionOutput",
    "FlashTile",
    "LinearAttentionStates",
    "bigbird_mask",
    "block_local_global_mask",
    "effective_weights",
    "elu_feature_map",
    "favor_features",
    "flash_attention",
    "linear_attention",
    "linear_attention_states",
    "linear_attention_weights",
    "linformer_attention",
    "linformer_attention_weights",
    "longformer_mask",
    "orthogonal_random_features",
    "performer_attention",
    "performer_attention_weights",
    "relative_error",
    "sliding_window_attention",
    "sparse_attention",
    "strided_sparse_mask",
]


def relative_error(approx: torch.Tensor, exact: torch.Tensor) -> float:
    """||approx - exact||_F / ||exact||_F (0 when both are zero, inf if only exact is)."""
    num = torch.linalg.vector_norm((approx - exact).double()).item()
    den = torch.linalg.vector_norm(exact.double()).item()
    if den == 0.0:
        return 0.0 if num == 0.0 else math.inf
    return num / den


def _safe_div(num: torch.Tensor, den: torch.Tensor) -> torch.Tensor:
    """num / den where den > 0, else 0 (a query that sees no key gets a zero output)."""
    return torch.where(den > 0, num / torch.where(den > 0, den, torch.ones_like(den)), torch.zeros_like(num))


def _key_mask(mask: torch.Tensor | None, n_k: int) -> torch.Tensor | None:
    """A key-padding mask (True = real key) as a (..., n_k, 1) column that multiplies phi(K).

    Accepts (b, 1, 1, n_k) as built by ``masks.padding_mask``, (b, n_k) or (n_k,). A mask that
    differs between queries (..., n_q>1, n_k) cannot be folded into the kernel sums: use
    ``causal=True`` for the look-ahead mask, or ``sparse_attention`` for general patterns.
    """
    if mask is None:
        return None
    if mask.dtype != torch.bool:
        raise TypeError("the key-padding mask must be boolean (True = real key)")
    if mask.size(-1) != n_k:
        raise ValueError(f"key-padding mask has {mask.size(-1)} keys, expected {n_k}")
    if mask.dim() == 1:                      # (n_k,)
        return mask.unsqueeze(-1)
    if mask.dim() == 2:                      # (b, n_k) -> (b, 1, n_k, 1)
        return mask[:, None, :, None]
    if mask.size(-2) != 1:
        raise ValueError("linear-time attention takes a key-padding mask (..., 1, n_k), not a per-query mask")
    return mask.transpose(-2, -1)            # (..., 1, n_k) -> (..., n_k, 1)


# ----------------------------------------------------------------------------------------------
# Linear attention (Katharopoulos et al. 2020)

def elu_feature_map(x: torch.Tensor) -> torch.Tensor:
    """phi(x) = elu(x) + 1 > 0, the feature map of "Transformers are RNNs".

    Written as x + 1 for x > 0 and exp(x) otherwise (the same function): ``elu(x) + 1`` computes
    expm1(x) + 1, which rounds to exactly 0 in float32 already for x < -17; exp(x) stays > 0 down
    to about -87. Below that a feature is 0, and a query whose features are 0 wherever every
    key's are non-zero gets a zero row (never NaN).
    """
    return torch.where(x > 0, x + 1.0, torch.exp(torch.clamp(x, max=0.0)))


def _linear_features(q, k, mask):
    phi_q, phi_k = elu_feature_map(q), elu_feature_map(k)   # (b, h, n_q, d), (b, h, n_k, d)
    km = _key_mask(mask, k.size(-2))
    if km is not None:
        phi_k = phi_k * km                                   # padded keys leave both sums
    return phi_q, phi_k


def linear_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *, causal: bool = False,
                     mask: torch.Tensor | None = None) -> AttentionOutput:
    """Linear attention: out_i = phi(q_i)^T S / phi(q_i)^T z with phi = elu + 1.

    Non-causal: S = sum_j phi(k_j) v_j^T (d x d_v) and z = sum_j phi(k_j) are formed once, so the
    cost is O(n d d_v) instead of O(n^2 d) -- the reassociation (phi(Q) phi(K)^T) V = phi(Q)(phi(K)^T V).
    Causal: S_i, z_i are prefix sums over j <= i (``cumsum``), the RNN of the paper's title
    (see ``linear_attention_states`` for the explicit recurrence); needs n_q == n_k.
    ``mask``: optional key-padding mask, True = real key, shape (b, 1, 1, n_k) or (b, n_k).
    Unlike the tutorial there is no ``+ 1e-6`` in the normaliser: it is > 0 whenever a key is
    visible, and a query with no visible key gets zeros. Weights: None (never formed).
    """
    phi_q, phi_k = _linear_features(q, k, mask)
    if not causal:
        kv = phi_k.transpose(-2, -1) @ v                     # (b, h, d, d_v)
        z = phi_k.sum(dim=-2).unsqueeze(-1)                  # (b, h, d, 1)
        return AttentionOutput(_safe_div(phi_q @ kv, phi_q @ z), None)
    if q.size(-2) != k.size(-2):
        raise ValueError(f"causal linear attention needs n_q == n_k, got {q.size(-2)} and {k.size(-2)}")
    s = torch.cumsum(phi_k.unsqueeze(-1) * v.unsqueeze(-2), dim=-3)   # (b, h, n, d, d_v): S_i
    z = torch.cumsum(phi_k, dim=-2)                                    # (b, h, n, d):      z_i
    num = (phi_q.unsqueeze(-2) @ s).squeeze(-2)                        # (b, h, n, d_v)
    den = (phi_q * z).sum(dim=-1, keepdim=True)                        # (b, h, n, 1)
    return AttentionOutput(_safe_div(num, den), None)


def linear_attention_weights(q: torch.Tensor, k: torch.Tensor, *, causal: bool = False,
                             mask: torch.Tensor | None = None) -> torch.Tensor:
    """The n_q x n_k matrix linear attention implies: A_ij = phi(q_i).phi(k_j) / sum_j' (same).

    O(n^2): for drawing only. ``A @ v`` equals ``linear_attention(q, k, v, ...)``.
    """
    phi_q, phi_k = _linear_features(q, k, mask)
    a = phi_q @ phi_k.transpose(-2, -1)                      # (b, h, n_q, n_k), all >= 0
    if causal:
        a = a * masks.causal_mask(q.size(-2), k.size(-2), device=q.device)
    return _safe_div(a, a.sum(dim=-1, keepdim=True))


@dataclass
class LinearAttentionStates:
    """Causal linear attention unrolled as an RNN, one entry per step i.

    S:      (..., n, d, d_v)  S_i = S_{i-1} + phi(k_i) v_i^T
    z:      (..., n, d)       z_i = z_{i-1} + phi(k_i)
    output: (..., n, d_v)     y_i = phi(q_i)^T S_i / phi(q_i)^T z_i
    """

    S: torch.Tensor
    z: torch.Tensor
    output: torch.Tensor


def linear_attention_states(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *,
                            mask: torch.Tensor | None = None) -> LinearAttentionStates:
    """Run causal linear attention step by step, as the recurrent network it is.

    A Python loop over positions, on purpose: it is the recurrence written as in the paper
    (constant-size state, O(1) per generated token) for the "attention as an RNN" view and as
    an oracle for the ``cumsum`` version. Small n only.
    """
    phi_q, phi_k = _linear_features(q, k, mask)
    n = q.size(-2)
    S = phi_k.new_zeros(*phi_k.shape[:-2], phi_k.size(-1), v.size(-1))   # (b, h, d, d_v)
    z = phi_k.new_zeros(*phi_k.shape[:-2], phi_k.size(-1))               # (b, h, d)
    Ss, zs, ys = [], [], []
    for i in range(n):
        S = S + phi_k[..., i, :, None] * v[..., i, None, :]
        z = z + phi_k[..., i, :]
        num = (phi_q[..., i, None, :] @ S).squeeze(-2)                     # (b, h, d_v)
        den = (phi_q[..., i, :] * z).sum(dim=-1, keepdim=True)             # (b, h, 1)
        Ss.append(S), zs.append(z), ys.append(_safe_div(num, den))
    if n == 0:
        return LinearAttentionStates(S.unsqueeze(-3)[..., :0, :, :], z.unsqueeze(-2)[..., :0, :],
                                     v.new_zeros(*v.shape[:-2], 0, v.size(-1)))
    return LinearAttentionStates(torch.stack(Ss, dim=-3), torch.stack(zs, dim=-2), torch.stack(ys, dim=-2))


# ----------------------------------------------------------------------------------------------
# Performer / FAVOR+ (Choromanski et al. 2021)

def orthogonal_random_features(m: int, d: int, generator: torch.Generator | None = None, *,
                               dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """Projection W (m, d) for FAVOR+: blocks of d mutually orthogonal rows.

    Each block is the Q of a QR decomposition of a d x d Gaussian matrix (sign-corrected so it is
    Haar-distributed); rows are then rescaled by independent chi_d norms (norms of d-dim Gaussian
    vectors) so each row has the length distribution of an i.i.d. Gaussian row, which keeps the
    kernel estimate unbiased while orthogonality lowers its variance. m need not be a multiple of d.
    """
    if m < 1 or d < 1:
        raise ValueError(f"m and d must be >= 1, got m={m}, d={d}")
    blocks = []
    for _ in range(math.ceil(m / d)):
        g = torch.randn(d, d, generator=generator, dtype=torch.float64)
        qm, r = torch.linalg.qr(g)
        qm = qm * torch.sign(torch.diagonal(r)).unsqueeze(0)  # Haar: fix the sign ambiguity of QR
        blocks.append(qm.T)                                   # rows orthonormal
    w = torch.cat(blocks, dim=0)[:m]                          # (m, d)
    norms = torch.randn(m, d, generator=generator, dtype=torch.float64).norm(dim=1, keepdim=True)
    return (w * norms).to(dtype)


def favor_features(x: torch.Tensor, projection: torch.Tensor, *, stabilize: str | None = None,
                   scale: float | None = None) -> torch.Tensor:
    """Positive random features phi(x) = exp(w.x' - |x'|^2 / 2) / sqrt(m), x' = x * scale^(1/2).

    With the default scale 1/sqrt(d) (x' = x d^(-1/4)), E[phi(q).phi(k)] = exp(q.k / sqrt(d)),
    the unnormalised softmax kernel. ``stabilize``: subtract a maximum inside the exp so it
    cannot overflow: "row" (per query, over features) or "global" (over all keys and features of
    a (batch, head)); both constants cancel in the attention normaliser. None: raw features.
    """
    scale = default_scale(x.size(-1)) if scale is None else scale
    x = x * math.sqrt(scale)
    wx = x @ projection.to(x.dtype).T                         # (..., n, m)
    logits = wx - 0.5 * (x * x).sum(dim=-1, keepdim=True)
    if stabilize == "row":
        logits = logits - logits.amax(dim=-1, keepdim=True)
    elif stabilize == "global":
        logits = logits - logits.amax(dim=(-2, -1), keepdim=True)
    elif stabilize is not None:
        raise ValueError(f"stabilize must be None, 'row' or 'global', got {stabilize!r}")
    return torch.exp(logits) / math.sqrt(projection.size(0))


def _performer_features(q, k, projection, mask, scale):
    phi_q = favor_features(q, projection, stabilize="row", scale=scale)       # (b, h, n_q, m)
    phi_k = favor_features(k, projection, stabilize="global", scale=scale)    # (b, h, n_k, m)
    km = _key_mask(mask, k.size(-2))
    if km is not None:
        phi_k = phi_k * km
    return phi_q, phi_k


def performer_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, projection: torch.Tensor, *,
                        mask: torch.Tensor | None = None, scale: float | None = None) -> AttentionOutput:
    """FAVOR+ attention: softmax(q.k scale) V approximated by phi(Q)(phi(K)^T V) / phi(Q) sum_j phi(k_j).

    ``projection``: (m, d) from ``orthogonal_random_features``; passed in so that a figure, a test
    or a layer can keep it fixed. More features m -> smaller error, cost O(n m d). ``mask``: key
    padding (b, 1, 1, n_k) or (b, n_k). Weights: None (never formed).
    Pitfall: the estimator's variance grows like exp(|q|^2 + |k|^2) (scaled), so FAVOR+ wants
    moderate norms; with huge ones (|x|^2 / sqrt(d) in the hundreds) a query's features and every
    key's can underflow on disjoint features, and that query then gets a zero output, not NaN.
    """
    phi_q, phi_k = _performer_features(q, k, projection, mask, scale)
    kv = phi_k.transpose(-2, -1) @ v                           # (b, h, m, d_v)
    z = phi_k.sum(dim=-2).unsqueeze(-1)                        # (b, h, m, 1)
    return AttentionOutput(_safe_div(phi_q @ kv, phi_q @ z), None)


def performer_attention_weights(q: torch.Tensor, k: torch.Tensor, projection: torch.Tensor, *,
                                mask: torch.Tensor | None = None, scale: float | None = None) -> torch.Tensor:
    """The n_q x n_k matrix FAVOR+ implies (rows sum to 1, all >= 0). O(n^2): for drawing."""
    phi_q, phi_k = _performer_features(q, k, projection, mask, scale)
    a = phi_q @ phi_k.transpose(-2, -1)
    return _safe_div(a, a.sum(dim=-1, keepdim=True))


# ----------------------------------------------------------------------------------------------
# Linformer (Wang et al. 2020)

def _check_projections(k, E, Fp):
    n = k.size(-2)
    for name, p in (("E", E), ("F", Fp)):
        if p.dim() != 2 or p.size(1) != n:
            raise ValueError(f"{name} must have shape (k_proj, n) = (k_proj, {n}), got {tuple(p.shape)}")
    if E.size(0) != Fp.size(0):
        raise ValueError(f"E and F must share k_proj, got {E.size(0)} and {Fp.size(0)}")


def linformer_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, E: torch.Tensor, F: torch.Tensor,
                        *, scale: float | None = None) -> AttentionOutput:
    """Linformer: K' = E K, V' = F V (E, F of shape (k_proj, n)), then exact softmax over k_proj columns.

    Self-attention is approximately low rank, so n keys are compressed to k_proj mixtures;
    cost O(n k_proj d). Weights: the (..., n_q, k_proj) softmax over the *projected* keys -- what the
    method actually forms; ``linformer_attention_weights`` gives the implied n_q x n matrix.
    """
    _check_projections(k, E, F)
    k_proj = E.to(k.dtype) @ k                                 # (b, h, k_proj, d)
    v_proj = F.to(v.dtype) @ v                                 # (b, h, k_proj, d_v)
    return scaled_dot_product_attention(q, k_proj, v_proj, scale=scale)


def linformer_attention_weights(q: torch.Tensor, k: torch.Tensor, E: torch.Tensor, F: torch.Tensor, *,
                                scale: float | None = None) -> torch.Tensor:
    """The implied n_q x n matrix P F (P: softmax over projected keys), so that (P F) V = P (F V).

    Rows sum to sum_r P_ir (F 1)_r, which is 1 only if every row of F sums to 1.
    """
    _check_projections(k, E, F)
    p = masked_softmax(scaled_dot_scores(q, E.to(k.dtype) @ k, scale))     # (b, h, n_q, k_proj)
    return p @ F.to(q.dtype)


# ----------------------------------------------------------------------------------------------
# Sparse attention: exact attention on a pattern

def sparse_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor, *,
                     scale: float | None = None) -> AttentionOutput:
    """Exact softmax attention where only the pattern ``mask`` (True = may attend) is visible.

    This is how the tutorials do it and how LRA benchmarked Sparse Transformer and Longformer: a
    dense masked matrix, so it still costs O(n^2) time and memory. It teaches the *pattern*;
    ``sliding_window_attention`` shows a genuinely O(n w) implementation of the local one.
    """
    return scaled_dot_product_attention(q, k, v, mask, scale=scale)


def strided_sparse_mask(n: int, stride: int = 4, window: int = 2, *, device=None) -> torch.Tensor:
    """The first tutorial's strided pattern: local window |i - j| <= window, plus every stride-th column.

    Same pattern as the tutorial's ``create_sparse_mask`` (window 2, stride 4), built without loops.
    """
    return masks.strided_mask(n, stride, window, device=device)


def block_local_global_mask(n: int, block: int, global_idx=(0,), *, device=None) -> torch.Tensor:
    """Block-local attention + global tokens (Longformer / BigBird style), in place of the second tutorial's
    SparseAttention, a different mechanism: its "global" branch is one pooled query (the mean of the
    queries) whose context is added to every position; it has no global tokens.

    Query i sees every key of its own block (i // block == j // block); the tokens in
    ``global_idx`` see and are seen by everyone. Works for any n: the last block is just shorter.
    What the tutorial's code got wrong:
    - ``chunk(seq_len // block_size)``: when block_size does not divide n the chunks are not of
      size block_size (n=100, block 32 gives 3 chunks of 34, 34, 32), and when n < block_size it
      asks for chunk(0) and raises;
    - its "global" branch averages the queries into one d_model-wide vector (sqrt(d_model) is the
      right scale for it: q and k are never split into heads), multiplies the weights with the raw
      (b, n, d_model) value and adds that to the per-head output (b, h, n, d_k): ``expand_as`` only
      succeeds with one head and one sequence in the batch;
    - it masks with ``masked_fill(mask == 0, -1e9)`` inside every block with the full-size mask
      (a shape mismatch) and -1e9 overflows to -inf in fp16; here hidden means -inf in a safe
      softmax, and a fully hidden row gives zeros instead of NaN.
    As a mask, the pattern is exact attention on a well-defined set of (query, key) pairs.
    """
    return masks.block_mask(n, block, device=device) | masks.global_tokens_mask(n, global_idx, device=device)


def longformer_mask(n: int, window: int, global_idx=(0,), *, device=None) -> torch.Tensor:
    """Longformer (Beltagy et al. 2020): sliding window |i - j| <= window + global tokens (e.g. [CLS])."""
    return masks.local_mask(n, window, device=device) | masks.global_tokens_mask(n, global_idx, device=device)


def bigbird_mask(n: int, window: int, global_idx=(0,), num_random: int = 2,
                 generator: torch.Generator | None = None, *, device=None) -> torch.Tensor:
    """BigBird (Zaheer et al. 2020): window + global tokens + ``num_random`` random keys per query.

    Token-level random keys (the paper draws random *blocks* for hardware efficiency; the graph
    idea -- short paths between any two tokens -- is the same). Pass a seeded ``generator`` to
    get the same pattern again.
    """
    mask = longformer_mask(n, window, global_idx, device=device)
    r = min(max(num_random, 0), n)
    if r > 0:
        scores = torch.rand(n, n, generator=generator).to(device)        # (n, n): random ranks
        idx = scores.topk(r, dim=-1).indices                              # (n, r) distinct keys per row
        mask = mask | torch.zeros_like(mask).scatter_(-1, idx, True)
    return mask


def sliding_window_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, window: int, *,
                             block: int | None = None, scale: float | None = None) -> AttentionOutput:
    """Exact attention with the local pattern |i - j| <= window, in O(n w) time and memory.

    Queries are cut into blocks of ``block`` rows (default max(window, 16)); block b only meets
    keys [b*block - window, (b+1)*block + window), gathered as a strided view (``unfold``), so the
    scores tensor is (n/block) x block x (block + 2 window) instead of n x n. Equal to
    ``sparse_attention(q, k, v, masks.local_mask(n, window))``. Weights: None (never formed).
    """
    n, d = q.size(-2), q.size(-1)
    if k.size(-2) != n:
        raise ValueError(f"sliding-window attention needs n_q == n_k, got {n} and {k.size(-2)}")
    if window < 0:
        raise ValueError(f"window must be >= 0, got {window}")
    scale = default_scale(d) if scale is None else scale
    bs = max(window, 16) if block is None else block
    nb = math.ceil(n / bs) if n else 0
    span = bs + 2 * window                                    # keys one query block can see
    pad_q = nb * bs - n
    qb = pad(q, (0, 0, 0, pad_q)).unflatten(-2, (nb, bs))                   # (b, h, nb, bs, d)
    kp = pad(k, (0, 0, window, pad_q + window))                             # (b, h, nb*bs + 2w, d)
    vp = pad(v, (0, 0, window, pad_q + window))
    kb = kp.unfold(-2, span, bs)                                              # (b, h, nb, d, span)
    vb = vp.unfold(-2, span, bs).transpose(-2, -1)                            # (b, h, nb, span, d_v)
    scores = (qb @ kb) * scale                                                # (b, h, nb, bs, span)
    i = torch.arange(nb * bs, device=q.device).view(nb, bs, 1)                # query position
    j = torch.arange(span, device=q.device).view(1, 1, span) + \
        torch.arange(nb, device=q.device).view(nb, 1, 1) * bs - window        # key position
    visible = ((i - j).abs() <= window) & (j >= 0) & (j < n)                  # (nb, bs, span)
    out = masked_softmax(scores, visible) @ vb                                # (b, h, nb, bs, d_v)
    return AttentionOutput(out.flatten(-3, -2)[..., :n, :], None)


# ----------------------------------------------------------------------------------------------
# Flash attention (Dao et al. 2022): tiles + online softmax

@dataclass
class FlashTile:
    """One step of flash attention: query rows [q_start, q_end) met keys [k_start, k_end).

    row_max, row_sum: (..., q_end - q_start) running max m and running sum l of every query row
    *after* this tile; rescale: exp(m_old - m_new), the factor the old sum and accumulator were
    multiplied by; skipped: the tile lies entirely above the causal diagonal and was not computed.
    """

    q_start: int
    q_end: int
    k_start: int
    k_end: int
    skipped: bool
    row_max: torch.Tensor
    row_sum: torch.Tensor
    rescale: torch.Tensor


class FlashAttentionOutput(AttentionOutput):
    """What ``flash_attention`` returns: unpacks as ``(output, weights)`` with weights None,
    like every AttentionOutput, and carries ``.trace``: a list of FlashTile (None unless trace=True).
    """

    trace: list[FlashTile] | None


def flash_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *, block_q: int = 64,
                    block_k: int = 64, causal: bool = False, scale: float | None = None,
                    trace: bool = False) -> FlashAttentionOutput:
    """Exact softmax attention computed tile by tile, never forming the n_q x n_k matrix.

    For each block of block_q queries keep, per row, the running max m, the running sum
    l = sum_j exp(s_ij - m) and an accumulator acc = sum_j exp(s_ij - m) v_j. A new tile of block_k
    keys with scores s: m' = max(m, rowmax s); l = exp(m - m') l + rowsum exp(s - m');
    acc = exp(m - m') acc + exp(s - m') V_tile. At the end out = acc / l. Extra memory is
    O(block_q (block_k + d)) per step instead of O(n^2). ``causal``: top-left aligned like
    torch's ``is_causal`` (key j visible to query i iff j <= i); tiles entirely above the diagonal
    are skipped. A query with no visible key (only possible with n_k == 0) gets zeros.
    ``trace=True``: ``result.trace`` lists a FlashTile per (query block, key block) for the
    step-through; the result still unpacks as ``out, w = flash_attention(...)`` (w is None).
    """
    if block_q < 1 or block_k < 1:
        raise ValueError(f"block sizes must be >= 1, got block_q={block_q}, block_k={block_k}")
    n_q, n_k = q.size(-2), k.size(-2)
    scale = default_scale(q.size(-1)) if scale is None else scale
    batch = torch.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
    out = q.new_zeros(*batch, n_q, v.size(-1))
    tiles: list[FlashTile] | None = [] if trace else None
    for qs in range(0, n_q, block_q):
        qe = min(qs + block_q, n_q)
        qb = q[..., qs:qe, :] * scale                                  # (b, h, bq, d)
        m = q.new_full((*batch, qe - qs), float("-inf"))              # running max
        lsum = q.new_zeros((*batch, qe - qs))                         # running sum l
        acc = q.new_zeros((*batch, qe - qs, v.size(-1)))              # unnormalised output
        for ks in range(0, n_k, block_k):
            ke = min(ks + block_k, n_k)
            if causal and ks > qe - 1:                                 # every key after every query
                if tiles is not None:
                    tiles.append(FlashTile(qs, qe, ks, ke, True, m.clone(), lsum.clone(), torch.ones_like(lsum)))
                continue
            s = qb @ k[..., ks:ke, :].transpose(-2, -1)                # (b, h, bq, bk)
            if causal and ke - 1 > qs:                                 # tile crosses the diagonal
                i = torch.arange(qs, qe, device=q.device)[:, None]
                hidden = torch.arange(ks, ke, device=q.device) > i     # key j after query i
                s = s.masked_fill(hidden, float("-inf"))
            m_new = torch.maximum(m, s.amax(dim=-1))
            m_safe = torch.where(torch.isfinite(m_new), m_new, torch.zeros_like(m_new))
            p = torch.exp(s - m_safe.unsqueeze(-1))                    # hidden keys: exp(-inf) = 0
            alpha = torch.exp(m - m_safe)                              # rescale old state; 0 at start
            lsum = alpha * lsum + p.sum(dim=-1)
            acc = alpha.unsqueeze(-1) * acc + p @ v[..., ks:ke, :]
            m = m_new
            if tiles is not None:
                tiles.append(FlashTile(qs, qe, ks, ke, False, m.clone(), lsum.clone(), alpha.clone()))
        out[..., qs:qe, :] = _safe_div(acc, lsum.unsqueeze(-1))
    result = FlashAttentionOutput(out, None)
    result.trace = tiles
    return result


# ----------------------------------------------------------------------------------------------
# The matrix each method implies

def effective_weights(method: str, q: torch.Tensor, k: torch.Tensor, **params) -> torch.Tensor:
    """Materialise the (..., n_q, n_k) weight matrix a method implies, for small n (O(n^2)).

    ``effective_weights(method, q, k, **params) @ v`` equals the method's output. Methods and params:
    "softmax"/"flash" (causal=False, scale=None; flash is exact, so its matrix is softmax's),
    "linear" (causal=False, mask=None), "performer" (projection, mask=None, scale=None),
    "linformer" (E, F, scale=None), "sparse" (mask, scale=None),
    "sliding_window" (window, scale=None).
    """
    if method in ("softmax", "exact", "flash"):
        causal, scale = params.pop("causal", False), params.pop("scale", None)
        _no_more(method, params)
        mask = masks.causal_mask(q.size(-2), k.size(-2), device=q.device) if causal else None
        return masked_softmax(scaled_dot_scores(q, k, scale), mask)
    if method == "linear":
        return linear_attention_weights(q, k, **params)
    if method == "performer":
        return performer_attention_weights(q, k, **params)
    if method == "linformer":
        return linformer_attention_weights(q, k, **params)
    if method == "sparse":
        mask, scale = params.pop("mask"), params.pop("scale", None)
        _no_more(method, params)
        return masked_softmax(scaled_dot_scores(q, k, scale), mask)
    if method == "sliding_window":
        window, scale = params.pop("window"), params.pop("scale", None)
        _no_more(method, params)
        return effective_weights("sparse", q, k, mask=masks.local_mask(q.size(-2), window, device=q.device),
                                 scale=scale)
    raise ValueError(f"unknown method {method!r}; expected softmax, flash, linear, performer, linformer, "
                     "sparse or sliding_window")


def _no_more(method, params):
    if params:
        raise TypeError(f"unexpected parameters for {method!r}: {sorted(params)}")

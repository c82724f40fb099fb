"""The efficiency page's glue: one set of inputs, every variant on it, and the numbers the page quotes.

The methods themselves live in ``efficient`` (linear, Performer, Linformer, sparse patterns, flash);
this module only puts them side by side on the same small inputs so that their *effective weights*
(the n x n matrix each one implies) can be drawn next to exact softmax, sweeps the knob that trades
error for cost, and reproduces the tutorials' buggy code for the pitfall boxes:

- first tutorial, section 8.3: ``SparseAttention.create_sparse_mask`` fills the mask with two nested
  Python loops and patches NaN with ``masked_fill(torch.isnan(...), 0)``;
- second tutorial: ``SparseAttention.block_local_attention`` cuts the sequence with
  ``chunk(seq_len // block_size)`` and its global branch mixes d_model-wide and per-head shapes.

Performance tips of the first tutorial (section 10.2), measured on a CPU.

Gradient checkpointing: autograd keeps, for the backward pass, the tensors each operation saves
(inputs of matmuls, softmax outputs, dropout masks ...). ``torch.utils.checkpoint`` keeps only the
input of a checkpointed block and recomputes the block's forward during backward: less memory,
more compute. ``checkpoint`` below writes that rule out with the same two autograd hooks torch's own
non-reentrant version uses (``torch.utils.checkpoint`` is its oracle in the tests; it also imports torch's
compiler, about 70 MB of a server's memory). The memory is measured exactly with
``torch.autograd.graph.saved_tensors_hooks`` (the bytes of every distinct storage autograd saves), which is
deterministic, unlike the RSS.

Mixed precision: bfloat16 / float16 halve the bytes of every tensor but round more coarsely. The
error of attention in each recipe is measured against a float64 oracle.
"""
from __future__ import annotations

import math
import statistics
import time
from dataclasses import dataclass, field
from typing import NamedTuple, Sequence

import numpy as np
import torch

from .. import efficient as eff
from ..functional import masked_softmax, scaled_dot_product_attention, scaled_dot_scores
from ..masks import causal_mask
from ..text import embed_tokens, projection
from ..transformer import TransformerEncoder
from . import seeded

D = 16        # head dimension of the lab: small enough to draw S (d x d), big enough for FAVOR+
VARIANTS = ("softmax", "linear", "performer", "linformer", "strided", "block_global", "longformer",
            "bigbird", "flash")
SPARSE = ("strided", "block_global", "longformer", "bigbird")
# the knob that trades error for cost, per variant (None: no knob)
KNOB = {"softmax": None, "linear": None, "performer": "m", "linformer": "k", "strided": "stride",
        "block_global": "block", "longformer": "window", "bigbird": "window", "flash": "block"}
FEATURES = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512)     # Performer m on the page (log steps)
# One seed drives every random part of a run; each part draws from its own stream (seed + offset), so that
# e.g. the Performer features do not change when the learner switches the Linformer projection, and no
# stream repeats the one that drew the random inputs (offset 0).
FEATURES_STREAM = 3       # Performer: orthogonal random features
PROJECTION_STREAM = 7     # Linformer: the untrained Gaussian E, F
RANDOM_KEYS_STREAM = 11   # BigBird: the random keys of each query


@dataclass(frozen=True)
class Knobs:
    """Every setting of every variant (only those of the chosen variant matter)."""

    m: int = 16               # Performer: random features
    k: int = 4                # Linformer: projected length k_proj
    proj: str = "pool"        # Linformer: "pool" (segment means) or "gauss" (N(0, 1/k), as initialised)
    stride: int = 4           # strided: every stride-th key ...
    window: int = 2           # ... plus |i - j| <= window (also Longformer / BigBird window)
    block: int = 4            # block-local (+ global), and flash's block_q = block_k
    n_global: int = 1         # global tokens: the first n_global positions
    n_random: int = 2         # BigBird: random keys per query
    seed: int = 0             # random features / projections / random keys

    def with_knob(self, variant: str, value: int) -> "Knobs":
        name = KNOB[variant]
        return self if name is None else Knobs(**{**self.__dict__, name: int(value)})

    def for_sweep(self, variant: str) -> "Knobs":
        """These settings with the swept knob and the seed at their defaults: what a sweep over the knob and
        several seeds depends on (so moving the knob or the seed does not redo the sweep)."""
        name = KNOB[variant]
        drop = ("seed",) if name is None else ("seed", name)
        return Knobs(**{k: v for k, v in self.__dict__.items() if k not in drop})


@dataclass
class VariantRun:
    """One variant on one input: its implied weights, its own output, and how far both are from exact."""

    variant: str
    weights: torch.Tensor                 # (n, n) effective weights: weights @ v == output
    output: torch.Tensor                  # (n, d_v) computed by the method itself
    exact_weights: torch.Tensor           # (n, n) softmax(q k^T / sqrt d)
    exact_output: torch.Tensor            # (n, d_v)
    mask: torch.Tensor | None = None      # (n, n) sparsity pattern (True = computed), sparse variants only
    params: dict = field(default_factory=dict)   # what was passed to the method (projection, E, F, mask...)
    code: tuple = ()                      # the functions that computed it, in reading order

    @property
    def rel_error(self) -> float:
        return eff.relative_error(self.output, self.exact_output)

    @property
    def row_tv(self) -> torch.Tensor:
        """Per query: total-variation distance 1/2 sum_j |w_ij - a_ij| = attention mass put elsewhere."""
        return 0.5 * (self.weights - self.exact_weights).abs().sum(-1)


# ----------------------------------------------------------------------------------------------- inputs

class LabInputs(NamedTuple):
    """What the page's controls chose: the learner's tokens (None: ``n`` random tokens), the seed, the gain."""

    tokens: tuple[str, ...] | None
    n: int
    seed: int
    gain: float = 1.0

    def qkv(self):
        return lab_inputs(self.tokens, self.n, self.seed, gain=self.gain)


def lab_inputs(tokens: Sequence[str] | None, n: int, seed: int, d: int = D, gain: float = 1.0):
    """(q, k, v), each (1, 1, n, d): from the learner's tokens (seeded embeddings x W_Q, x W_K, x W_V)
    or, with ``tokens=None``, i.i.d. N(0, 1) entries of ``n`` random tokens. ``gain`` multiplies q and k
    (so the scores by gain^2): larger gain, sharper attention."""
    if tokens is not None:
        x = embed_tokens(list(tokens), d, seed)                              # (n, d)
        q, k, v = (x @ projection(d, d, seed, name) for name in ("W_Q", "W_K", "W_V"))
    else:
        g = torch.Generator().manual_seed(seed)
        q, k, v = (torch.randn(n, d, generator=g) for _ in range(3))
    return (q * gain)[None, None], (k * gain)[None, None], v[None, None]


def pooling_projection(k_proj: int, n: int) -> torch.Tensor:
    """(k_proj, n): row r averages the r-th of k_proj contiguous segments (sizes differ by at most 1).

    A fixed Linformer projection with rows >= 0 summing to 1, so the implied n x n matrix is still a
    distribution per query; with k_proj = n it is the identity and Linformer equals exact attention.
    """
    if not 1 <= k_proj <= n:
        raise ValueError(f"k_proj must lie in [1, n] = [1, {n}], got {k_proj}")
    seg = torch.arange(n) * k_proj // n                                      # segment of each position
    onehot = (seg.unsqueeze(0) == torch.arange(k_proj).unsqueeze(1)).float() # (k_proj, n)
    return onehot / onehot.sum(-1, keepdim=True)


def linformer_projections(kind: str, k_proj: int, n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """E, F of shape (k_proj, n): "pool" (the same segment means) or "gauss" (N(0, 1/k_proj), the
    paper's random initialisation -- before training, so far from exact)."""
    if kind == "pool":
        p = pooling_projection(k_proj, n)
        return p, p
    if kind == "gauss":
        g = torch.Generator().manual_seed(seed + PROJECTION_STREAM)
        return (torch.randn(k_proj, n, generator=g) / math.sqrt(k_proj),
                torch.randn(k_proj, n, generator=g) / math.sqrt(k_proj))
    raise ValueError(f"unknown Linformer projection {kind!r}; expected 'pool' or 'gauss'")


SPARSE_BUILDERS = {"strided": eff.strided_sparse_mask, "block_global": eff.block_local_global_mask,
                   "longformer": eff.longformer_mask, "bigbird": eff.bigbird_mask}


def sparse_pattern(variant: str, n: int, knobs: Knobs) -> torch.Tensor:
    """The (n, n) boolean pattern of a sparse variant, built by the ``efficient`` mask builders."""
    glob = tuple(range(min(knobs.n_global, n)))
    if variant == "strided":
        return eff.strided_sparse_mask(n, knobs.stride, knobs.window)
    if variant == "block_global":
        return eff.block_local_global_mask(n, knobs.block, glob)
    if variant == "longformer":
        return eff.longformer_mask(n, knobs.window, glob)
    if variant == "bigbird":
        g = torch.Generator().manual_seed(knobs.seed + RANDOM_KEYS_STREAM)
        return eff.bigbird_mask(n, knobs.window, glob, knobs.n_random, g)
    raise ValueError(f"{variant!r} is not a sparse variant")


# ----------------------------------------------------------------------------------------------- one run

def run_variant(variant: str, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, knobs: Knobs) -> VariantRun:
    """Run ``variant`` on (1, 1, n, d) inputs; every weight matrix comes from ``efficient.effective_weights``
    and every output from the method itself, so ``run.weights @ v == run.output`` is a real check.
    ``run.code`` names the functions of ``efficient`` this variant called (what "show the code" prints)."""
    n = q.size(-2)
    exact = scaled_dot_product_attention(q, k, v)
    mask, params = None, {}
    if variant == "softmax":
        out, code = exact.output, (scaled_dot_product_attention,)
        w = eff.effective_weights("softmax", q, k)
    elif variant == "linear":
        out = eff.linear_attention(q, k, v).output
        w = eff.effective_weights("linear", q, k)
        code = (eff.linear_attention, eff.linear_attention_weights, eff.elu_feature_map)
    elif variant == "performer":
        g = torch.Generator().manual_seed(knobs.seed + FEATURES_STREAM)
        params = {"projection": eff.orthogonal_random_features(knobs.m, q.size(-1), g)}
        out = eff.performer_attention(q, k, v, **params).output
        w = eff.effective_weights("performer", q, k, **params)
        code = (eff.orthogonal_random_features, eff.favor_features, eff.performer_attention)
    elif variant == "linformer":
        E, F = linformer_projections(knobs.proj, min(knobs.k, n), n, knobs.seed)
        params = {"E": E, "F": F}
        out = eff.linformer_attention(q, k, v, E, F).output
        w = eff.effective_weights("linformer", q, k, **params)
        code = (pooling_projection, eff.linformer_attention, eff.linformer_attention_weights)
    elif variant in SPARSE:
        mask = sparse_pattern(variant, n, knobs)
        params = {"mask": mask}
        out = eff.sparse_attention(q, k, v, mask).output
        w = eff.effective_weights("sparse", q, k, mask=mask)
        code = (SPARSE_BUILDERS[variant], eff.sparse_attention)
    elif variant == "flash":
        out = eff.flash_attention(q, k, v, block_q=knobs.block, block_k=knobs.block).output
        w = eff.effective_weights("flash", q, k)
        code = (eff.flash_attention,)
    else:
        raise ValueError(f"unknown variant {variant!r}; expected one of {VARIANTS}")
    return VariantRun(variant, w[0, 0], out[0, 0], exact.weights[0, 0], exact.output[0, 0], mask, params,
                      (run_variant, eff.effective_weights, *code, eff.relative_error))


def multiply_adds(variant: str, n: int, d: int, knobs: Knobs, mask: torch.Tensor | None = None) -> int:
    """Multiply-adds of one head (d_v = d) as an efficient implementation would do them.

    exact / flash: n^2 d for QK^T and n^2 d for the weighted sum; linear: n d^2 for K^T V and n d^2 for
    Q (K^T V); Performer: 2 n m d for the two feature maps + 2 n m d; Linformer: 2 k n d for E K and
    F V + 2 n k d; sparse: 2 d per visible (query, key) pair. Softmax and the exps are not counted.
    """
    if variant in ("softmax", "flash"):
        return 2 * n * n * d
    if variant == "linear":
        return 2 * n * d * d
    if variant == "performer":
        return 4 * n * knobs.m * d
    if variant == "linformer":
        return 4 * n * min(knobs.k, n) * d
    if variant in SPARSE:
        pairs = int(mask.sum()) if mask is not None else int(sparse_pattern(variant, n, knobs).sum())
        return 2 * pairs * d
    raise ValueError(f"unknown variant {variant!r}")


def knob_values(variant: str, n: int, max_points: int = 16) -> list[int]:
    """The values of the variant's knob that the error-vs-knob sweep visits for n tokens (at most
    ``max_points``: every value when they fit, else a geometric spread that keeps both ends)."""
    name = KNOB[variant]
    if name is None:
        return []
    if name == "m":
        return list(FEATURES)
    lo, hi = (0, n - 1) if name == "window" else (1, n)
    if hi - lo + 1 <= max_points:
        return list(range(lo, hi + 1))
    steps = torch.logspace(0, math.log10(hi - lo + 1), max_points, dtype=torch.float64).round().long()
    return sorted({lo + int(x) - 1 for x in steps.tolist()})


class KnobSweep(NamedTuple):
    """Error and cost against a variant's knob (lists over the knob values; empty without a knob)."""

    value: list[float]      # the knob values visited
    mean: list[float]       # relative output error, mean over the seeds
    lo: list[float]         # ... min and max over the seeds
    hi: list[float]
    tv: list[float]         # misplaced attention mass (row_tv averaged over queries), mean over the seeds
    cost: list[float]       # multiply-adds relative to exact attention


def knob_sweep(variant: str, tokens: Sequence[str] | None, n: int, knobs: Knobs, seeds: Sequence[int],
               values: Sequence[int] | None = None, gain: float = 1.0) -> KnobSweep:
    """Relative output error against exact attention for every knob value, over several seeds.

    Each seed s draws new inputs (``lab_inputs(tokens, n, s, gain=gain)``) and new random parts (features,
    projections, random keys), so the mean is over both. Returns the knob values, mean / min / max
    error, the mean misplaced attention mass (``row_tv`` averaged over queries) and the multiply-adds
    relative to exact attention (mean over seeds).
    """
    values = knob_values(variant, n) if values is None else list(values)
    errs = torch.zeros(len(seeds), len(values), dtype=torch.float64)
    cost = torch.zeros(len(seeds), len(values), dtype=torch.float64)
    tv = torch.zeros(len(seeds), len(values), dtype=torch.float64)
    for a, s in enumerate(seeds):
        q, k, v = lab_inputs(tokens, n, s, gain=gain)
        for b, value in enumerate(values):
            kn = Knobs(**{**knobs.__dict__, "seed": s}).with_knob(variant, value)
            run = run_variant(variant, q, k, v, kn)
            errs[a, b] = run.rel_error
            tv[a, b] = run.row_tv.mean().item()
            cost[a, b] = multiply_adds(variant, n, q.size(-1), kn, run.mask) / (2 * n * n * q.size(-1))
    return KnobSweep([float(x) for x in values], errs.mean(0).tolist(), errs.min(0).values.tolist(),
                     errs.max(0).values.tolist(), tv.mean(0).tolist(), cost.mean(0).tolist())


class VariantView(NamedTuple):
    """What the page draws and quotes of one variant on one input (numpy, so it caches and pickles)."""

    weights: np.ndarray          # (n, n) effective weights of the method
    exact: np.ndarray            # (n, n) exact softmax weights
    rel_error: float             # relative output error against exact attention
    row_tv: np.ndarray           # (n,) misplaced attention mass per query
    mask: np.ndarray | None      # (n, n) sparsity pattern (True = computed), sparse variants only
    cost: float                  # multiply-adds relative to exact attention
    reproduce: float             # max |weights @ v - the method's own output|
    code: tuple                  # the functions that ran (VariantRun.code)


def variant_view(inputs: LabInputs, variant: str, knobs: Knobs) -> VariantView:
    q, k, v = inputs.qkv()
    run = run_variant(variant, q, k, v, knobs)
    n, d = q.size(-2), q.size(-1)
    return VariantView(run.weights.numpy(), run.exact_weights.numpy(), run.rel_error, run.row_tv.numpy(),
                       None if run.mask is None else run.mask.numpy(),
                       multiply_adds(variant, n, d, knobs, run.mask) / (2 * n * n * d),
                       float((run.weights @ v[0, 0] - run.output).abs().max()),
                       (lab_inputs, *run.code, multiply_adds))


# ----------------------------------------------------------------------------------------------- flash

@dataclass
class FlashStep:
    """Tile ``index`` of a flash trace with the state before it, for the step-through table."""

    tile: eff.FlashTile
    index: int
    m_old: torch.Tensor           # (bq,) running max before the tile (-inf at a row's first tile)
    l_old: torch.Tensor           # (bq,) running sum before the tile
    tile_max: torch.Tensor        # (bq,) max score of this tile per row (-inf if all hidden / skipped)
    partial: torch.Tensor         # (bq, d_v) acc / l after the tile: exact attention over keys < k_end


def flash_step(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, trace: list, index: int, *,
               causal: bool = False) -> FlashStep:
    """The state around tile ``index`` of ``flash_attention(..., trace=True).trace`` for (1, 1, n, d) inputs.

    ``partial`` is computed independently (masked softmax over the keys seen so far), which is what the
    running (m, l, acc) must equal after the tile: the online softmax is exact at every step.
    """
    tile = trace[index]
    prev = next((trace[j] for j in range(index - 1, -1, -1) if trace[j].q_start == tile.q_start), None)
    bq = tile.q_end - tile.q_start
    m_old = prev.row_max[0, 0] if prev is not None else torch.full((bq,), float("-inf"))
    l_old = prev.row_sum[0, 0] if prev is not None else torch.zeros(bq)
    rows = slice(tile.q_start, tile.q_end)
    s = scaled_dot_scores(q[0, 0, rows], k[0, 0, tile.k_start:tile.k_end])            # (bq, bk)
    i = torch.arange(tile.q_start, tile.q_end)[:, None]
    j = torch.arange(tile.k_start, tile.k_end)[None, :]
    if causal:
        s = s.masked_fill(j > i, float("-inf"))
    tile_max = torch.full((bq,), float("-inf")) if tile.skipped else s.amax(-1)
    n_k = k.size(-2)
    seen = torch.arange(n_k)[None, :] < tile.k_end                                     # (1, n_k)
    if causal:
        seen = seen & causal_mask(q.size(-2), n_k)[rows]
    all_scores = scaled_dot_scores(q[0, 0, rows], k[0, 0])                             # (bq, n_k)
    partial = masked_softmax(all_scores, seen) @ v[0, 0]
    return FlashStep(tile, index, m_old, l_old, tile_max, partial)


def tile_status(n_q: int, n_k: int, trace: list, index: int, *, causal: bool = False) -> torch.Tensor:
    """(n_q, n_k) integer code of every score cell at step ``index``: 0 done, 1 current tile, 2 still to do,
    3 in a skipped tile (causal, never computed), 4 hidden by the causal mask inside a computed tile."""
    status = torch.full((n_q, n_k), 2, dtype=torch.long)
    for j, tile in enumerate(trace):
        code = 3 if tile.skipped else (0 if j < index else 1 if j == index else 2)
        status[tile.q_start:tile.q_end, tile.k_start:tile.k_end] = code
    if causal:
        hidden = ~causal_mask(n_q, n_k) & (status != 3)
        status[hidden & (status != 2)] = 4
    return status


class FlashRun(NamedTuple):
    """Flash attention with its trace on the lab inputs, and how far its output is from exact and from torch."""

    trace: list                  # FlashTile per (query block, key block), in the order visited
    max_diff: float              # max |flash - exact| (attention_core's reference)
    max_diff_torch: float        # max |flash - torch SDPA|
    exact: np.ndarray            # (n, d_v) exact output


def flash_run(inputs: LabInputs, block_q: int, block_k: int, causal: bool) -> FlashRun:
    q, k, v = inputs.qkv()
    res = eff.flash_attention(q, k, v, block_q=block_q, block_k=block_k, causal=causal, trace=True)
    exact = scaled_dot_product_attention(q, k, v, causal_mask(q.size(-2)) if causal else None)
    torch_ref = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)
    return FlashRun(res.trace, float((res.output - exact.output).abs().max()),
                    float((res.output - torch_ref).abs().max()), exact.output[0, 0].numpy())


class FlashStepView(NamedTuple):
    step: FlashStep
    status: np.ndarray           # (n, n) tile_status codes
    partial_vs_final: float      # max |output after this tile - final output| over the block's rows
    last_of_block: bool          # the query block has no tile after this one


def flash_step_view(inputs: LabInputs, flash: FlashRun, index: int, causal: bool) -> FlashStepView:
    q, k, v = inputs.qkv()
    step = flash_step(q, k, v, flash.trace, index, causal=causal)
    exact_rows = flash.exact[step.tile.q_start:step.tile.q_end]
    last_of_block = all(tl.q_start != step.tile.q_start for tl in flash.trace[index + 1:])
    return FlashStepView(step, tile_status(inputs.n, inputs.n, flash.trace, index, causal=causal).numpy(),
                         float(np.abs(step.partial.numpy() - exact_rows).max()), last_of_block)


class RnnView(NamedTuple):
    """Causal linear attention run as an RNN, step by step, next to the parallel form (numpy, one head)."""

    S: np.ndarray        # (n, d, d_v) state after each step: sum_j<=i phi(k_j) v_j^T
    z: np.ndarray        # (n, d) normaliser after each step: sum_j<=i phi(k_j)
    y_rnn: np.ndarray    # (n, d_v) outputs of the recurrence
    y_par: np.ndarray    # (n, d_v) outputs of the parallel (prefix-sum) form
    w: np.ndarray        # (n, n) effective causal weights
    wv: np.ndarray       # (n, d_v) w @ v


def rnn_view(inputs: LabInputs) -> RnnView:
    q, k, v = inputs.qkv()
    states = eff.linear_attention_states(q, k, v)
    parallel = eff.linear_attention(q, k, v, causal=True).output
    w = eff.effective_weights("linear", q, k, causal=True)
    return RnnView(states.S[0, 0].numpy(), states.z[0, 0].numpy(), states.output[0, 0].numpy(),
                   parallel[0, 0].numpy(), w[0, 0].numpy(), (w @ v)[0, 0].numpy())


# -------------------------------------------------------------------------------------- the tutorials' code

def tutorial_strided_mask_loops(n: int, stride: int = 4) -> torch.Tensor:
    """First tutorial, ``SparseAttention.create_sparse_mask``, verbatim: O(n^2) Python-level assignments."""
    mask = torch.zeros(n, n)
    for i in range(n):
        for j in range(max(0, i - 2), min(n, i + 3)):
            mask[i, j] = 1
        for j in range(0, n, stride):
            mask[i, j] = 1
    return mask


class MaskTimes(NamedTuple):
    loops: float          # median seconds of the tutorial's loop mask
    vectorised: float     # ... and of ``strided_sparse_mask`` (the same pattern)


def time_mask_builders(n: int, stride: int = 4, repeats: int = 3) -> MaskTimes:
    """Median seconds of the tutorial's loop mask and of ``strided_sparse_mask`` (the same pattern)."""
    out = []
    for build in (lambda: tutorial_strided_mask_loops(n, stride), lambda: eff.strided_sparse_mask(n, stride, 2)):
        times = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            build()
            times.append(time.perf_counter() - t0)
        out.append(statistics.median(times))
    return MaskTimes(*out)


class NanPatch(NamedTuple):
    nan_patched: int      # NaNs the tutorial's softmax makes (and masked_fill then hides)
    empty_rows: int       # query rows with no visible key (where they come from)
    safe_nan: int         # NaNs of a safe ``masked_softmax`` (0)


def tutorial_nan_patch(q: torch.Tensor, k: torch.Tensor, mask: torch.Tensor) -> NanPatch:
    """The first tutorial's softmax + ``masked_fill(torch.isnan(w), 0)`` on a pattern: how many NaNs it
    patches (rows with no visible key) and how many a safe ``masked_softmax`` would have produced (0)."""
    scores = scaled_dot_scores(q, k).masked_fill(~mask, float("-inf"))
    naive = torch.softmax(scores, dim=-1)
    safe = masked_softmax(scaled_dot_scores(q, k), mask)
    return NanPatch(int(torch.isnan(naive).sum()), int((~mask.any(-1)).sum()), int(torch.isnan(safe).sum()))


def tutorial_chunks(n: int, block: int) -> list[int] | str:
    """The sizes ``x.chunk(n // block, dim=2)`` really produces (second tutorial), or the error it raises."""
    x = torch.zeros(1, 1, n, 1)
    try:
        return [c.size(2) for c in x.chunk(n // block, dim=2)]
    except RuntimeError as err:
        return str(err).splitlines()[0]


class GlobalBranch(NamedTuple):
    """Shapes of the second tutorial's global branch as it runs, and the error it meets (None: no error)."""

    global_q: tuple               # (b, 1, d_model) mean of the queries
    global_weights: tuple         # (b, 1, n)
    global_context: tuple         # (b, 1, d_model)
    local_output: tuple           # (b, heads, n, d_k)
    expanded: tuple | None        # context.expand_as(local_output), where it works
    error: str | None
    scale_used: float             # sqrt(d_model), as written
    scale_right: float            # sqrt(d_k), per head


def tutorial_global_branch(n: int, d_model: int = 16, heads: int = 2, batch: int = 2) -> GlobalBranch:
    """Shapes of the second tutorial's global branch, run as written; the error it meets, if any.

    global_q: (b, 1, d_model) mean of the queries; weights (b, 1, n) scaled by sqrt(d_model);
    context = weights @ value (b, 1, d_model); then ``context.expand_as(local_output)`` with
    local_output (b, heads, n, d_k): only works by accident (batch 1, one head).
    """
    d_k = d_model // heads
    query = torch.zeros(batch, n, d_model)
    global_q = query.mean(dim=1, keepdim=True)                          # (b, 1, d_model)
    global_k = torch.zeros(batch, n, d_model)
    weights = torch.softmax(global_q @ global_k.transpose(-2, -1) / math.sqrt(d_model), dim=-1)  # (b, 1, n)
    context = weights @ query                                           # (b, 1, d_model)
    local = torch.zeros(batch, heads, n, d_k)
    expanded, error = None, None
    try:
        expanded = tuple(context.expand_as(local).shape)
    except RuntimeError as err:
        error = str(err).splitlines()[0]
    return GlobalBranch(tuple(global_q.shape), tuple(weights.shape), tuple(context.shape), tuple(local.shape),
                        expanded, error, math.sqrt(d_model), math.sqrt(d_k))


def loop_mask_matches(n: int, stride: int = 4) -> bool:
    """The tutorial's loop mask equals ``efficient.strided_sparse_mask(n, stride, 2)``, cell for cell."""
    return bool(torch.equal(tutorial_strided_mask_loops(n, stride).bool(), eff.strided_sparse_mask(n, stride, 2)))


class Underflow(NamedTuple):
    value: float       # a small number, e.g. a gradient
    float16: float     # the same in float16 (flushed to 0 below ~6e-8)
    bfloat16: float    # in bfloat16 (float32's range, coarser)
    scaled: float      # float16 after loss scaling by ``scale`` and unscaling


def underflow(value: float = 1e-8, scale: float = 65536.0) -> Underflow:
    """What float16 and bfloat16 keep of a tiny value, and what loss scaling rescues (the fp16 pitfall)."""
    x = torch.tensor(value)
    return Underflow(value, float(x.half()), float(x.bfloat16()), float((x * scale).half()) / scale)


# ----------------------------------------------------------------------------------------------- live timing

LIVE_SIZES = (128, 256, 512, 1024)
LIVE_METHODS = ("full", "linear", "performer", "linformer", "window", "flash")
LIVE_RUNS = len(LIVE_SIZES) * len(LIVE_METHODS)


def time_method(method: str, n: int, repeats: int = 5, d: int = 64, seed: int = 0) -> float:
    """Median wall seconds of one call of a benchmark method (``efficiency_bench``'s exact settings) at (1, 1, n, d)."""
    from .efficiency_bench import _make_call

    g = torch.Generator().manual_seed(seed)
    q, k, v = (torch.randn(1, 1, n, d, generator=g) for _ in range(3))
    call = _make_call(method, q, k, v, seed)
    call()                                                       # warm-up, not counted
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        call()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def live_timings(sizes: Sequence[int] = LIVE_SIZES, methods: Sequence[str] = LIVE_METHODS):
    """Time every method at every size (``time_method``), yielding after each: (done, total, results so far)."""
    jobs = [(m, n) for n in sizes for m in methods]
    results = []
    for method, n in jobs:
        results.append({"method": method, "n": n, "time_s": time_method(method, n)})
        yield len(results), len(jobs), results


def linear_mask_input(inputs: LabInputs | None) -> torch.Tensor:
    """The input of the tutorial's linear-attention layer in its pitfall: the tokens' queries (1, n, D), or
    12 seeded random vectors when there are no tokens."""
    if inputs is None:
        return torch.randn(1, 12, D, generator=torch.Generator().manual_seed(0))
    return inputs.qkv()[0][0]


class FlashMemory(NamedTuple):
    """Floats flash attention keeps besides Q, K, V and the output, against the n x n matrix it never forms."""

    tile: int             # one block_q x block_k tile of scores / probabilities
    acc: int              # the block_q x d accumulator
    stats: int            # running max m and sum l of the rows in flight
    full_matrix: int      # n x n


def flash_extra_floats(n: int, d: int, block_q: int, block_k: int) -> FlashMemory:
    """Floats flash attention keeps besides Q, K, V and the output (n x d), against the n x n matrix.

    Per row: running max m and sum l (2 n for the rows in flight, here one query block at a time: 2 block_q);
    per step: one block_q x block_k tile of scores/probabilities and a block_q x d accumulator.
    """
    return FlashMemory(block_q * block_k, block_q * d, 2 * block_q, n * n)


# --------------------------------------------------------------------------------------------------
# Performance tips: gradient checkpointing and mixed precision
# --------------------------------------------------------------------------------------------------

VOCAB = 64


class SavedTensors(NamedTuple):
    bytes: int      # distinct storages saved for backward (a tensor saved twice counts once)
    count: int      # save events (how many times autograd asked to keep a tensor)


def saved_tensor_bytes(fn) -> tuple[object, SavedTensors]:
    """Run ``fn()`` and measure what autograd saves for the backward pass: (result, SavedTensors)."""
    storages: dict[tuple[int, int], int] = {}
    events = 0

    def pack(x: torch.Tensor) -> torch.Tensor:
        nonlocal events
        events += 1
        s = x.untyped_storage()
        storages[(s.data_ptr(), s.nbytes())] = s.nbytes()
        return x

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda x: x):
        out = fn()
    return out, SavedTensors(sum(storages.values()), events)


class _KeepInput(torch.autograd.Function):
    """The identity, saving its input for backward: the one tensor a checkpointed block keeps."""

    @staticmethod
    def forward(ctx, x: torch.Tensor) -> torch.Tensor:
        ctx.save_for_backward(x)
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> torch.Tensor:
        return grad


def checkpoint(block, x: torch.Tensor) -> torch.Tensor:
    """``block(x)``, keeping for backward only ``x``: each tensor that ``block``'s operations save is dropped at
    once (the pack hook keeps its position instead), and when backward first asks for one, ``block`` runs again
    on the kept input, in the same precision, and hands out the tensors that run saved, in the same order."""
    kept = _KeepInput.apply(x)
    recomputed: list[torch.Tensor] = []
    dropped = 0
    autocast = torch.is_autocast_enabled("cpu"), torch.get_autocast_dtype("cpu")

    def drop(_tensor: torch.Tensor) -> int:
        nonlocal dropped
        dropped += 1
        return dropped - 1

    def keep(tensor: torch.Tensor) -> int:
        recomputed.append(tensor.detach())
        return len(recomputed) - 1

    def recompute(position: int) -> torch.Tensor:
        if not recomputed:
            (inp,) = kept.grad_fn.saved_tensors
            inp = inp.detach().requires_grad_(x.requires_grad)
            with torch.enable_grad(), torch.autocast("cpu", dtype=autocast[1], enabled=autocast[0]), \
                    torch.autograd.graph.saved_tensors_hooks(keep, recomputed.__getitem__):
                block(inp)
        return recomputed[position]

    with torch.autograd.graph.saved_tensors_hooks(drop, recompute):
        return block(kept)


def make_encoder(num_layers: int, d_model: int = 64, num_heads: int = 4, d_ff: int = 256,
                 seed: int = 0) -> TransformerEncoder:
    """A small post-LN encoder (dropout 0, so the two runs below compute the same numbers)."""
    with seeded(seed):
        return TransformerEncoder(VOCAB, d_model, num_layers, num_heads, d_ff, dropout=0.0)


def run_encoder(model: TransformerEncoder, x: torch.Tensor, *, use_checkpoint: bool) -> torch.Tensor:
    """The encoder's layers on embeddings ``x`` (b, n, d), each layer checkpointed or not."""
    h = model._prepare(x)
    for layer in model.layers:
        if use_checkpoint:
            h = checkpoint(lambda z, layer=layer: layer(z).output, h)
        else:
            h = layer(h).output
    return h


class CheckpointReport(NamedTuple):
    plain_bytes: int            # saved for backward, no checkpointing
    ckpt_bytes: int             # saved for backward, every layer checkpointed
    layer_bytes: int            # one layer's saved tensors (recomputed, one layer at a time, in backward)
    plain_forwards: int         # layer forward calls during forward + backward
    ckpt_forwards: int
    grad_max_diff: float        # max |grad_plain - grad_ckpt| over the input and every parameter
    plain_count: int            # save events
    ckpt_count: int


def checkpoint_report(n: int, num_layers: int, *, batch: int = 1, d_model: int = 64, seed: int = 0,
                      autocast: bool = False) -> CheckpointReport:
    """Saved-tensor bytes and layer forward calls of the encoder with and without checkpointing.

    ``autocast``: run under ``torch.autocast("cpu", dtype=torch.bfloat16)`` (mixed precision)."""
    model = make_encoder(num_layers, d_model, seed=seed)
    calls = [0]
    hooks = [layer.register_forward_pre_hook(lambda *_: calls.__setitem__(0, calls[0] + 1))
             for layer in model.layers]
    g = torch.Generator().manual_seed(seed)
    tokens = torch.randint(0, VOCAB, (batch, n), generator=g)
    results = []
    for use in (False, True):
        model.zero_grad(set_to_none=True)
        x = model.embed(tokens).detach().requires_grad_(True)
        calls[0] = 0
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
            out, saved = saved_tensor_bytes(lambda: run_encoder(model, x, use_checkpoint=use))
        # a fixed, position-dependent loss so every gradient is non-trivial
        weights = torch.linspace(-1.0, 1.0, out.numel(), dtype=torch.float32).view_as(out)
        (out.float() * weights).sum().backward()
        grads = [x.grad.clone()] + [p.grad.clone() for p in model.parameters() if p.grad is not None]
        results.append((saved, calls[0], grads))
    for h in hooks:
        h.remove()
    one = make_encoder(1, d_model, seed=seed)
    x1 = one.embed(tokens).detach().requires_grad_(True)
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
        _, layer_saved = saved_tensor_bytes(lambda: one.layers[0](x1).output)
    diff = max(float((a - b).abs().max()) for a, b in zip(results[0][2], results[1][2]))
    (plain, plain_calls, _), (ckpt, ckpt_calls, _) = results
    return CheckpointReport(plain.bytes, ckpt.bytes, layer_saved.bytes, plain_calls, ckpt_calls, diff,
                            plain.count, ckpt.count)


# ------------------------------------------------------------------ mixed precision
RECIPES = ("float32", "bfloat16", "bf16_inputs", "float16")


def attention_in(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, recipe: str) -> torch.Tensor:
    """softmax(QK^T/sqrt d) V computed in a precision recipe; returns (output, weights) as float64.

    "float32" / "bfloat16" / "float16": every tensor and every operation in that type.
    "bf16_inputs": Q, K, V stored in bfloat16 (half the bytes), everything computed in float32 —
    what autocast does for softmax, which it keeps in float32."""
    if recipe == "bf16_inputs":
        q, k, v = (x.to(torch.bfloat16).to(torch.float32) for x in (q, k, v))
    else:
        dtype = getattr(torch, recipe)
        q, k, v = (x.to(dtype) for x in (q, k, v))
    out, w = scaled_dot_product_attention(q, k, v)
    return out.double(), w.double()


class PrecisionRow(NamedTuple):
    recipe: str
    bytes_per_number: int
    weight_error: float      # max |w - w_oracle|
    output_error: float      # max |out - out_oracle|
    eps: float               # machine epsilon of the storage type
    max_value: float         # largest finite number of the storage type


def precision_inputs(n: int, d: int, gain: float, seed: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Float64 q, k (scaled by ``gain``: larger scores, sharper softmax) and v, shape (1, 1, n, d)."""
    g = torch.Generator().manual_seed(seed)
    q, k, v = (torch.randn(1, 1, n, d, generator=g, dtype=torch.float64) for _ in range(3))
    return q * gain, k * gain, v


def precision_table(n: int, d: int, gain: float, seed: int) -> list[PrecisionRow]:
    """Error of each recipe against the float64 oracle on the same inputs."""
    q, k, v = precision_inputs(n, d, gain, seed)
    ref_out, ref_w = scaled_dot_product_attention(q, k, v)
    rows = []
    for recipe in RECIPES:
        out, w = attention_in(q, k, v, recipe)
        store = torch.bfloat16 if recipe == "bf16_inputs" else getattr(torch, recipe)
        info = torch.finfo(store)
        rows.append(PrecisionRow(recipe, info.bits // 8, float((w - ref_w).abs().max()),
                                 float((out - ref_out).abs().max()), float(info.eps), float(info.max)))
    return rows


def largest_score(n: int, d: int, gain: float, seed: int) -> float:
    """max |QK^T / sqrt(d)| of the precision inputs (what the softmax exponentiates)."""
    q, k, _ = precision_inputs(n, d, gain, seed)
    return float((q @ k.transpose(-2, -1) / d ** 0.5).abs().max())


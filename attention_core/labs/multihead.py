"""The multi-head attention page's lab: one forward pass with every intermediate tensor, the
parameter count of one big head vs h small ones, the head-divisibility pitfall, and hand-built
("structured") heads that attend to a chosen position so the pattern gallery has something to find.

Sources: the first tutorial, section 6 (MultiHeadAttention with split_heads, the assert
``d_model % num_heads == 0``) and section 7.3 (the pattern table); Vaswani et al. (2017), 3.2.2.
Planted positional heads: the sinusoidal code makes "position i + o" a rotation of "position i"
(Vaswani et al. 2017, 3.5), so a head whose W_Q rotates and whose W_K copies the code scores
q_i . k_j = beta * sum_f cos(w_f (i + o - j)), largest at j = i + o. Trained models learn such heads
(Clark et al. 2019, "What Does BERT Look At?"); here they are built by hand.
"""
from __future__ import annotations

import functools
import math
import zlib
from typing import NamedTuple

import numpy as np
import torch

from ..analysis import PATTERNS, classify_heads, head_similarity
from ..functional import masked_softmax, scaled_dot_scores
from ..modules import HeadDivisibilityError, MultiHeadAttention
from ..positional import sinusoidal_encoding
from ..text import embed_tokens

MODES = ("structured", "random")
# what the structured heads are built to do, in order; more heads cycle through the list
RECIPES = ("previous", "first", "self", "next", "broad", "local", "previous_2", "random")
_OFFSETS = {"previous": -1, "self": 0, "next": 1, "local": 0, "previous_2": -2}
DESIGN_LENGTH = 64      # planted heads are tuned for sentences up to this many tokens
_SELECT_BETA = 20.0     # sharpness used to rank frequency sets
_MAX_BETA = 60.0        # cap on the score scale of a planted head
_TARGET_GAP = 5.0       # beta * margin: the best rival position gets about e^-5 of the peak's weight
_LOCAL_NEIGHBOUR = 0.6  # "local" head: a neighbour gets 0.6 of the weight of the token itself


# ---------------------------------------------------------------------------------------------
# the input: word embedding and position code side by side
# ---------------------------------------------------------------------------------------------


def position_dims(d_model: int) -> int:
    """How many of the d_model dimensions carry the position code: an even number, about half."""
    if d_model < 2:
        return 0
    return min(d_model - 1, 2 * math.ceil(d_model / 4)) // 2 * 2


def model_input(tokens: list[str], d_model: int, seed: int = 0) -> torch.Tensor:
    """x (1, n, d_model) = [word embedding (d_model - p dims) ; sinusoidal position code (p dims)].

    Words and positions sit in separate dimensions (not added) so that a head can read the
    position without the word getting in the way; p = position_dims(d_model).
    """
    p = position_dims(d_model)
    words = embed_tokens(tokens, d_model - p, seed)                            # (n, d_model - p)
    pos = sinusoidal_encoding(len(tokens), p) if p else torch.zeros(len(tokens), 0)
    return torch.cat([words, pos], dim=-1)[None]                               # (1, n, d_model)


# ---------------------------------------------------------------------------------------------
# seeded weights
# ---------------------------------------------------------------------------------------------


def _generator(seed: int, name: str) -> torch.Generator:
    return torch.Generator().manual_seed(zlib.crc32(f"mha\x00{name}\x00{seed}".encode("utf-8")))


def random_mha(d_model: int, num_heads: int, seed: int = 0) -> MultiHeadAttention:
    """A MultiHeadAttention with reproducible random weights (N(0, 1/d_model)) and zero biases,
    like an untrained model. Raises HeadDivisibilityError when num_heads does not divide d_model."""
    mha = MultiHeadAttention(d_model, num_heads)
    with torch.no_grad():
        for name in ("W_query", "W_key", "W_value", "W_output"):
            lin = getattr(mha, name)
            w = torch.randn(d_model, d_model, generator=_generator(seed, name))
            lin.weight.copy_(w / math.sqrt(d_model))
            lin.bias.zero_()
    return mha.eval()


# ---------------------------------------------------------------------------------------------
# planted ("structured") heads
# ---------------------------------------------------------------------------------------------


def _kernel(omegas: np.ndarray, deltas: np.ndarray) -> np.ndarray:
    # K(delta) = sum_f cos(w_f delta), the score profile of a planted head over offsets
    return np.cos(np.outer(deltas, omegas)).sum(axis=1) if len(omegas) else np.zeros(len(deltas))


@functools.lru_cache(maxsize=256)
def _frequencies(p: int, n_pairs: int, one_sided: bool) -> tuple[tuple[int, ...], float]:
    """Greedily pick n_pairs of the p/2 sinusoidal frequencies whose kernel has its peak at offset 0
    and the lowest rivals over |offset| < DESIGN_LENGTH; returns (pair indices, margin K(0) - max rival)."""
    omegas = 1.0 / 10000.0 ** (np.arange(0, p, 2) / p)
    if one_sided:
        deltas = np.arange(1, DESIGN_LENGTH)
    else:
        deltas = np.array([d for d in range(-DESIGN_LENGTH + 1, DESIGN_LENGTH) if d != 0])
    cos = np.cos(np.outer(deltas, omegas))                     # (D, F): each frequency's profile
    chosen: list[int] = []
    profile = np.zeros(len(deltas))                            # K of the chosen set, (D,)
    for _ in range(min(n_pairs, len(omegas))):
        gap = len(chosen) + 1 - (profile[:, None] + cos)       # (D, F): K(0) - K(delta) with each candidate
        rivals = np.log(np.exp(-_SELECT_BETA * gap).sum(axis=0))
        rivals[chosen] = np.inf
        best = int(np.argmin(rivals))
        chosen.append(best)
        profile += cos[:, best]
    margin = float(len(chosen) - _kernel(omegas[chosen], deltas).max()) if chosen else 0.0
    return tuple(chosen), margin


def planted_recipes(num_heads: int, d_k: int, p: int = 2) -> list[str]:
    """What each structured head is built to do (p = dimensions of the position code). Offset heads
    need a (sin, cos) pair, so with d_k = 1 only "first" and "broad" can be built; without a position
    code only "broad". Heads that cannot be built are left "random"."""
    names = [RECIPES[i % len(RECIPES)] for i in range(num_heads)]
    possible = set(RECIPES) if d_k >= 2 else {"first", "broad", "random"}
    if p < 2:
        possible = {"broad", "random"}
    return [r if r in possible else "random" for r in names]


def structured_mha(d_model: int, num_heads: int, seed: int = 0) -> tuple[MultiHeadAttention, list[str]]:
    """A MultiHeadAttention whose W_Q, W_K (and b_Q) are built by hand, head by head, for the input
    of ``model_input``; W_V and W_O stay random (seeded). Returns (module, recipe of each head).

    Recipes (``RECIPES``): "previous" / "next" / "previous_2" attend to the token at offset -1 / +1 /
    -2, "self" to itself, "local" to itself and its neighbours, "first" to token 0 (a constant query
    from the bias), "broad" to every token equally (W_Q = W_K = 0), "random" is left random.
    A head reads d_k / 2 frequency pairs of the position code: the smaller d_k, the blurrier it is.
    """
    mha = random_mha(d_model, num_heads, seed)
    d_k = mha.d_k
    p = position_dims(d_model)
    c = d_model - p                                        # first position dimension
    recipes = planted_recipes(num_heads, d_k, p)
    two_sided, margin = _frequencies(p, d_k // 2, False)
    one_sided, margin_1 = _frequencies(p, max(d_k // 2, 1), True)
    omegas = 1.0 / 10000.0 ** (np.arange(0, p, 2) / p)
    with torch.no_grad():
        wq, wk, bq = mha.W_query.weight, mha.W_key.weight, mha.W_query.bias
        for h, recipe in enumerate(recipes):
            if recipe == "random":
                continue
            rows = slice(h * d_k, (h + 1) * d_k)
            wq[rows] = 0.0
            wk[rows] = 0.0
            bq[rows] = 0.0
            if recipe == "broad":
                continue
            if recipe == "first":
                # q = (0, s) per pair, k_j = s (sin wj, cos wj): score = beta sum_f cos(w_f j), peak at j = 0
                beta = min(_MAX_BETA, _TARGET_GAP / max(margin_1, 1e-12))
                s = math.sqrt(beta * math.sqrt(d_k))
                for pair, f in enumerate(one_sided):
                    r = h * d_k + 2 * pair
                    if 2 * pair + 1 < d_k:             # a (sin, cos) pair of this head's dims
                        wk[r, c + 2 * f], wk[r + 1, c + 2 * f + 1] = s, s
                        bq[r + 1] = s
                    else:                              # d_k = 1: the cos dimension only
                        wk[r, c + 2 * f + 1] = s
                        bq[r] = s
                continue
            offset = _OFFSETS[recipe]
            if recipe == "local":
                gap1 = len(two_sided) - _kernel(omegas[list(two_sided)], np.array([1]))[0]
                beta = -math.log(_LOCAL_NEIGHBOUR) / max(gap1, 1e-12)
            else:
                beta = min(_MAX_BETA, _TARGET_GAP / max(margin, 1e-12))
            s = math.sqrt(beta * math.sqrt(d_k))
            for pair, f in enumerate(two_sided):
                r, b = h * d_k + 2 * pair, omegas[f] * offset
                cb, sb = math.cos(b), math.sin(b)
                # k_j = s (sin w j, cos w j);  q_i = s R(w o) (sin w i, cos w i) = s (sin w(i+o), cos w(i+o))
                wk[r, c + 2 * f], wk[r + 1, c + 2 * f + 1] = s, s
                wq[r, c + 2 * f], wq[r, c + 2 * f + 1] = s * cb, s * sb
                wq[r + 1, c + 2 * f], wq[r + 1, c + 2 * f + 1] = -s * sb, s * cb
    return mha, recipes


def build_mha(mode: str, d_model: int, num_heads: int, seed: int = 0) -> tuple[MultiHeadAttention, list[str]]:
    """("structured" | "random", ...) -> (module, recipe per head); random heads are all "random"."""
    if mode == "structured":
        return structured_mha(d_model, num_heads, seed)
    if mode == "random":
        return random_mha(d_model, num_heads, seed), ["random"] * num_heads
    raise ValueError(f"mode must be one of {MODES}, got {mode!r}")


# ---------------------------------------------------------------------------------------------
# one forward pass, every step kept
# ---------------------------------------------------------------------------------------------


class MHATrace(NamedTuple):
    """Every tensor of MultiHeadAttention.forward, in order (self-attention, b = batch):

    x (b, n, d_model) -> q_proj, k_proj, v_proj = x W_Q, x W_K, x W_V (b, n, d_model)
    -> q, k, v = split_heads(...) (b, h, n, d_k) -> scores = q k^T / sqrt(d_k) (b, h, n, n)
    -> weights = softmax(scores) (b, h, n, n) -> heads = weights v (b, h, n, d_k)
    -> concat = merge_heads(heads) (b, n, d_model) -> output = concat W_O (b, n, d_model)
    """

    x: torch.Tensor
    q_proj: torch.Tensor
    k_proj: torch.Tensor
    v_proj: torch.Tensor
    q: torch.Tensor
    k: torch.Tensor
    v: torch.Tensor
    scores: torch.Tensor
    weights: torch.Tensor
    heads: torch.Tensor
    concat: torch.Tensor
    output: torch.Tensor


@torch.no_grad()
def trace_mha(mha: MultiHeadAttention, x: torch.Tensor, mask: torch.Tensor | None = None) -> MHATrace:
    """Run ``mha`` on x step by step with its own split_heads / merge_heads; output == mha(x).output."""
    q_proj, k_proj, v_proj = mha.W_query(x), mha.W_key(x), mha.W_value(x)    # (b, n, d_model)
    q, k, v = mha.split_heads(q_proj), mha.split_heads(k_proj), mha.split_heads(v_proj)  # (b, h, n, d_k)
    if mask is not None and mask.dim() == 3:
        mask = mask.unsqueeze(1)                                              # (b, 1, n, n)
    scores = scaled_dot_scores(q, k)                                          # (b, h, n, n)
    weights = masked_softmax(scores, mask)                                    # (b, h, n, n)
    heads = weights @ v                                                       # (b, h, n, d_k)
    concat = mha.merge_heads(heads)                                           # (b, n, d_model)
    return MHATrace(x, q_proj, k_proj, v_proj, q, k, v, scores, weights, heads, concat, mha.W_output(concat))


# ---------------------------------------------------------------------------------------------
# parameters, and the divisibility pitfall
# ---------------------------------------------------------------------------------------------


class ParameterCount(NamedTuple):
    """Parameters of MultiHeadAttention(d_model, num_heads): per_head = one head's W_i^Q, W_i^K,
    W_i^V (d_model x d_k each, plus biases); qkv = num_heads * per_head; output = W_O; total."""

    d_k: int
    per_head: int
    qkv: int
    output: int
    total: int


def parameter_count(d_model: int, num_heads: int, bias: bool = True) -> ParameterCount:
    """Closed form: h heads of size d_k = d_model / h have exactly as many parameters as one head of
    size d_model, because h * (d_model * d_k) = d_model * d_model."""
    if num_heads < 1 or d_model % num_heads:
        raise HeadDivisibilityError(d_model, num_heads)
    d_k = d_model // num_heads
    per_head = 3 * (d_model * d_k + (d_k if bias else 0))
    output = d_model * d_model + (d_model if bias else 0)
    return ParameterCount(d_k, per_head, num_heads * per_head, output, num_heads * per_head + output)


def nearest_head_counts(d_model: int, num_heads: int, max_heads: int | None = None) -> list[int]:
    """The divisors of d_model closest to num_heads from below and above (up to max_heads)."""
    limit = d_model if max_heads is None else min(d_model, max_heads)
    divisors = [h for h in range(1, limit + 1) if d_model % h == 0]
    below = [h for h in divisors if h < num_heads]
    above = [h for h in divisors if h > num_heads]
    return ([below[-1]] if below else []) + ([above[0]] if above else [])


def nearest_d_models(d_model: int, num_heads: int, min_d: int = 1, max_d: int | None = None) -> list[int]:
    """The multiples of num_heads closest to d_model from below and above (within [min_d, max_d])."""
    lo = d_model // num_heads * num_heads
    hi = lo + num_heads
    out = [v for v in (lo,) if v >= max(min_d, num_heads) and v != d_model]
    if max_d is None or hi <= max_d:
        out.append(hi)
    return out


# ---------------------------------------------------------------------------------------------
# what the page shows: one forward pass with the analysis of its heads
# ---------------------------------------------------------------------------------------------


class HeadsLesson(NamedTuple):
    """One forward pass of the page's model (numpy, batch element 0) and what the page says about it."""

    weights: np.ndarray            # (h, n, n)
    q: np.ndarray                  # (h, n, d_k) per-head queries, keys and values
    k: np.ndarray
    v: np.ndarray
    q_proj: np.ndarray             # (n, d_model) x W_Q before the split
    shapes: dict                   # step name (MHATrace field, "view") -> shape
    recipes: list                  # the planted recipe of every head ("random" if none)
    labels: list                   # the gallery pattern each head is classified as
    pattern_scores: np.ndarray     # (h, len(PATTERNS)) the classifier's scores
    js: np.ndarray                 # (h, h) Jensen-Shannon distance between heads
    average: np.ndarray            # (n, n) the heads averaged (what visualize_attention shows)
    params: dict                   # 1 and h -> ParameterCount
    module_params: dict            # 1 and h -> MultiHeadAttention(d_model, heads).parameter_count()
    position_dims: int


def heads_lesson(tokens: tuple[str, ...], d_model: int, num_heads: int, seed: int, mode: str) -> HeadsLesson:
    """One forward pass with every step, the classifier, head similarity, and the parameter counts."""
    mha, recipes = build_mha(mode, d_model, num_heads, seed)
    tr = trace_mha(mha, model_input(list(tokens), d_model, seed))
    w = tr.weights[0]                                                          # (h, n, n)
    classes = classify_heads(w)
    n, d_k = len(tokens), d_model // num_heads
    shapes = {name: tuple(getattr(tr, name).shape) for name in ("x", "q_proj", "q", "scores", "weights", "heads",
                                                                "concat", "output")}
    shapes["view"] = (1, n, num_heads, d_k)                                    # q_proj.view(b, n, h, d_k)
    return HeadsLesson(
        w.numpy(), tr.q[0].numpy(), tr.k[0].numpy(), tr.v[0].numpy(), tr.q_proj[0].numpy(), shapes, recipes,
        [label for label, _ in classes], np.array([[s[p] for p in PATTERNS] for _, s in classes]),
        head_similarity(w).numpy(), w.mean(0).numpy(), {h: parameter_count(d_model, h) for h in (1, num_heads)},
        {h: MultiHeadAttention(d_model, h).parameter_count() for h in (1, num_heads)}, position_dims(d_model))


class HeadPair(NamedTuple):
    a: int                         # 1-based head numbers
    b: int
    distance: float


class AveragingFacts(NamedTuple):
    """What averaging the heads hides, for one head and one query (the notice and the pitfall quote it)."""

    key: int                       # the key the head attends to most
    w_head: float                  # its weight in that head
    w_avg: float                   # its weight in the average of the heads
    avg_max: float                 # mean largest weight of a row of the average
    head_max: float                # the same for the sharpest head
    nearest: HeadPair | None       # the two most similar heads (None with one head)
    farthest: HeadPair | None


def averaging_facts(r: HeadsLesson, head: int, query: int) -> AveragingFacts:
    w, js = r.weights, r.js
    key = int(w[head, query].argmax())
    pairs = [None, None]
    if len(w) > 1:
        for i, off in enumerate((js + np.diag(np.full(len(w), np.inf)), -(js - np.diag(np.full(len(w), np.inf))))):
            a, b = np.unravel_index(np.argmin(off), off.shape)
            pairs[i] = HeadPair(int(a) + 1, int(b) + 1, float(js[a, b]))
    return AveragingFacts(key, float(w[head, query, key]), float(r.average[query, key]),
                          float(r.average.max(-1).mean()), float(w.max(-1).mean(-1).max()), *pairs)

"""Positional encoding, run: the ideas of the first tutorial's section 6.3 and the second's
``PositionalEncoding``, with the experiments of the positional page.

1. The binary-counter analogy (Kazemnejad 2019, "Transformer Architecture: The Positional
   Encoding"): bit b of a counter flips every 2^b steps; column pair i of the sinusoidal table
   turns with angular frequency omega_i = base^(-2i/d), i.e. period 2 pi / omega_i positions.
2. Similarity by offset: PE[m] . PE[n] = sum_i cos((m - n) omega_i) for even d -- it depends
   on the offset m - n only (an odd d adds one sin.sin term that breaks this slightly).
3. The shuffle test: self-attention without positions is permutation-equivariant
   (attend(P x) = P attend(x)); adding a sinusoidal or learned table, or rotating q and k by
   their positions (RoPE), breaks it.
4. Learned vs sinusoidal vs rotary: the position-by-position similarity of each, and how far it
   is from depending on the offset alone ("Toeplitz gap": the largest spread along a diagonal).
5. Two pitfalls of the tutorials: ``pe[:, 1::2] = cos(...)`` fails for odd d_model, and the
   relative size of token embeddings and positions after ``embedding(x) * sqrt(d_model)``.

torch + numpy only. Attention, the sinusoidal table, RoPE and the learned table come from
``functional``, ``modules`` and ``positional`` (sinusoidal, learned and rotary in one module).
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from typing import NamedTuple

import torch

from ..functional import scaled_dot_product_attention
from ..modules import SelfAttention
from ..positional import LearnedPositionalEmbedding, apply_rotary, rotary_embedding, sinusoidal_encoding
from ..text import embed_tokens
from ..types import AttentionOutput
from . import seeded

ENCODINGS = ("none", "sinusoidal", "learned", "rotary")

# ---------------------------------------------------------------------------------------------
# 1. frequencies, periods, and the binary counter
# ---------------------------------------------------------------------------------------------


def frequencies(d: int, base: float = 10000.0) -> torch.Tensor:
    """omega_i = base^(-2i/d) for the ceil(d/2) column pairs of the table, float64."""
    if d < 1:
        raise ValueError(f"d must be >= 1, got {d}")
    return base ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)


def periods(d: int, base: float = 10000.0) -> torch.Tensor:
    """How many positions column pair i takes to go round once: 2 pi / omega_i."""
    return 2 * math.pi / frequencies(d, base)


def bits_for(n: int) -> int:
    """Bits a counter needs to count the positions 0 .. n-1 (at least 1)."""
    return max(1, (max(n, 1) - 1).bit_length())


def binary_counter(n: int, n_bits: int | None = None) -> torch.Tensor:
    """(n, n_bits) float: bit b of position p in column b, least significant (fastest) first."""
    n_bits = bits_for(n) if n_bits is None else n_bits
    pos = torch.arange(n).unsqueeze(1)                                  # (n, 1)
    return ((pos >> torch.arange(n_bits)) & 1).to(torch.float32)        # (n, n_bits)


def closest_bit(period: float) -> int:
    """The counter bit whose period 2^(b+1) is closest (in ratio) to ``period``."""
    return max(0, round(math.log2(max(period, 1.0))) - 1)


class EncodingTable(NamedTuple):
    pe: torch.Tensor          # (n, d) the sinusoidal table
    bits: torch.Tensor        # (n, n_bits) the binary counter of the positions
    periods: torch.Tensor     # (ceil(d/2),) positions per turn of each column pair


def encoding_table(n: int, d: int, base: float = 10000.0) -> EncodingTable:
    """The table, the counter it is compared with, and the period of each column pair."""
    return EncodingTable(sinusoidal_encoding(n, d, base), binary_counter(n), periods(d, base))


# ---------------------------------------------------------------------------------------------
# 2. similarity by offset
# ---------------------------------------------------------------------------------------------


def relative_dot(offsets: torch.Tensor, d: int, base: float = 10000.0) -> torch.Tensor:
    """Closed form of PE[m] . PE[m + k] = sum_i cos(k omega_i) for EVEN d, any m; float64."""
    if d % 2:
        raise ValueError("the closed form holds for even d only")
    return torch.cos(offsets.to(torch.float64).unsqueeze(-1) * frequencies(d, base)).sum(-1)


class OffsetCurve(NamedTuple):
    """For one reference position p: the offsets k = n - p of every position n, and PE[p] . PE[n]."""

    reference: int
    offsets: torch.Tensor   # (n,) long
    dots: torch.Tensor      # (n,) float64


def offset_curves(pe: torch.Tensor, references: Sequence[int]) -> list[OffsetCurve]:
    """PE[p] . PE[n] against n - p for each reference p (positions of the table ``pe`` (n, d))."""
    pe = pe.to(torch.float64)
    n = pe.size(0)
    gram = pe @ pe.T                                                    # (n, n)
    return [OffsetCurve(p, torch.arange(n) - p, gram[p]) for p in references]


def curve_gap(a: OffsetCurve, b: OffsetCurve) -> float:
    """Largest |difference| between two offset curves where both have the offset (0 if none)."""
    common, ia, ib = _common_offsets(a.offsets, b.offsets)
    if common == 0:
        return 0.0
    return float((a.dots[ia] - b.dots[ib]).abs().max())


def _common_offsets(x: torch.Tensor, y: torch.Tensor) -> tuple[int, torch.Tensor, torch.Tensor]:
    lo, hi = max(int(x[0]), int(y[0])), min(int(x[-1]), int(y[-1]))
    if hi < lo:
        return 0, x[:0], y[:0]
    k = torch.arange(lo, hi + 1)
    return len(k), k - int(x[0]), k - int(y[0])


# ---------------------------------------------------------------------------------------------
# 3. the shuffle test
# ---------------------------------------------------------------------------------------------


def shuffle_permutation(n: int, seed: int = 0) -> torch.Tensor:
    """A seeded random order of 0 .. n-1 that moves something whenever n > 1.

    ``shuffled[i] = original[perm[i]]``.
    """
    g = torch.Generator().manual_seed(seed)
    perm = torch.randperm(n, generator=g)
    if n > 1 and torch.equal(perm, torch.arange(n)):
        perm = perm.roll(1)                                             # never the identity
    return perm


def position_table(encoding: str, n: int, d: int, seed: int = 0, max_len: int = 128) -> torch.Tensor | None:
    """The (n, d) table added to the embeddings: sinusoidal, learned (untrained, seeded), else None.

    The learned table is ``LearnedPositionalEmbedding(max_len, d)`` as initialised under
    ``torch.manual_seed(seed)`` (N(0, 0.02^2), BERT's range; GPT-2's `wpe` uses std 0.01): what a model starts training from.
    """
    if encoding not in ENCODINGS:
        raise ValueError(f"encoding must be one of {ENCODINGS}, got {encoding!r}")
    if encoding == "sinusoidal":
        return sinusoidal_encoding(n, d)
    if encoding == "learned":
        with seeded(seed):
            table = LearnedPositionalEmbedding(max_len, d)
        with torch.no_grad():
            return table(n).clone()
    return None


def make_self_attention(d: int, seed: int = 0, gain: float = 1.0) -> SelfAttention:
    """The tutorial's single-head SelfAttention with seeded weights (the caller's RNG untouched).

    ``gain`` multiplies W_Q and W_K after nn.Linear's default init: scores grow by gain^2, so an
    untrained layer's weights are visibly uneven (gain 1: every weight of a 13-word row is ~1/13).
    """
    with seeded(seed):
        attn = SelfAttention(d).eval()
    with torch.no_grad():
        for lin in (attn.W_query, attn.W_key):
            lin.weight.mul_(gain)
            lin.bias.mul_(gain)
    return attn


def attend_with_positions(x: torch.Tensor, attn: SelfAttention, encoding: str,
                          table: torch.Tensor | None = None) -> AttentionOutput:
    """Self-attention over x (n, d) with positions injected the ``encoding`` way; unbatched result.

    none: attn(x);  sinusoidal / learned: attn(x + table);  rotary: q, k of attn rotated by
    their positions before the dot product (values untouched), as in RoFormer.
    """
    if encoding in ("sinusoidal", "learned"):
        if table is None:
            raise ValueError(f"{encoding} needs its position table")
        x = x + table
    if encoding == "rotary":
        q, k, v = attn.W_query(x), attn.W_key(x), attn.W_value(x)     # (n, d) each
        q, k = apply_rotary(q, k)
        out, w = scaled_dot_product_attention(q, k, v)
    else:
        out, w = attn(x.unsqueeze(0))
        out, w = out[0], w[0]
    return AttentionOutput(out, w)


class ShuffleResult(NamedTuple):
    """perm: shuffled[i] = original[perm[i]]; original / shuffled: AttentionOutput of each order
    (output (n, d), weights (n, n)); gap (n,): max_j |shuffled.output[i, j] - original.output[perm[i], j]|,
    zero (up to rounding) exactly when attention is permutation-equivariant."""

    perm: torch.Tensor
    original: AttentionOutput
    shuffled: AttentionOutput
    gap: torch.Tensor


def shuffle_test(tokens: Sequence[str], d: int, encoding: str, seed: int = 0,
                 shuffle_seed: int = 0, gain: float = 1.0) -> ShuffleResult:
    """Run the same self-attention on a sentence and on its shuffled copy; compare the outputs.

    Token embeddings are ``embed_tokens(tokens, d, seed)`` (a word keeps its vector wherever it
    goes); positions stay 0 .. n-1, so shuffling moves words to other positions. ``gain``: see
    ``make_self_attention``.
    """
    n = len(tokens)
    if n == 0:
        raise ValueError("need at least one token")
    if encoding == "rotary" and d % 2:
        raise ValueError(f"rotary embedding needs an even dimension, got d={d}")
    perm = shuffle_permutation(n, shuffle_seed)
    x = embed_tokens(list(tokens), d, seed)                             # (n, d)
    attn = make_self_attention(d, seed, gain)
    table = position_table(encoding, n, d, seed, max_len=max(n, 128))
    with torch.no_grad():
        original = attend_with_positions(x, attn, encoding, table)
        shuffled = attend_with_positions(x[perm], attn, encoding, table)
    gap = (shuffled.output - original.output[perm]).abs().amax(-1)    # (n,)
    return ShuffleResult(perm, original, shuffled, gap)


# ---------------------------------------------------------------------------------------------
# 4. learned vs sinusoidal vs rotary: similarity of positions, and "depends on the offset only"
# ---------------------------------------------------------------------------------------------


def cosine_grid(table: torch.Tensor) -> torch.Tensor:
    """(n, n) cosine similarity of the rows of a position table, float64."""
    t = table.to(torch.float64)
    t = t / t.norm(dim=-1, keepdim=True).clamp_min(1e-12)
    return t @ t.T


def random_qk(d: int, seed: int = 0, match: float = 0.8) -> tuple[torch.Tensor, torch.Tensor]:
    """A seeded query q ~ N(0, I) and a key k = match * q + sqrt(1 - match^2) * noise (float64, (d,)).

    With ``match`` near 1 the key is one the query looks for (cosine ~ match at the same
    position), so a score grid peaks at offset 0; ``match=0`` gives an unrelated key.
    """
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(d, generator=g, dtype=torch.float64)
    noise = torch.randn(d, generator=g, dtype=torch.float64)
    return q, match * q + (1 - match ** 2) ** 0.5 * noise


def rotary_score_grid(q: torch.Tensor, k: torch.Tensor, n: int, base: float = 10000.0) -> torch.Tensor:
    """S[m, j] = <R(m) q, R(j) k> for the SAME q and k placed at every position m, j < n: (n, n)."""
    d = q.size(-1)
    rq = rotary_embedding(q.expand(n, d), base=base)                    # (n, d) q at 0 .. n-1
    rk = rotary_embedding(k.expand(n, d), base=base)
    return rq @ rk.T


def rotary_score(q: torch.Tensor, k: torch.Tensor, m: float, j: float, base: float = 10000.0) -> float:
    """<R(m) q, R(j) k>: q at position m, k at position j (positions may be large or negative)."""
    rq = rotary_embedding(q.unsqueeze(0), torch.tensor([m]), base)[0]
    rk = rotary_embedding(k.unsqueeze(0), torch.tensor([j]), base)[0]
    return float(rq @ rk)


def additive_score(q: torch.Tensor, k: torch.Tensor, m: int, j: int) -> float:
    """The same q, k with the sinusoidal table ADDED instead: <q + PE[m], k + PE[j]> (float64)."""
    pe = sinusoidal_encoding(max(m, j) + 1, q.size(-1)).to(torch.float64)
    return float((q + pe[m]) @ (k + pe[j]))


def additive_score_grid(q: torch.Tensor, k: torch.Tensor, n: int) -> torch.Tensor:
    """S[m, j] = <q + PE[m], k + PE[j]>: the x . p cross terms depend on m and j, not on m - j."""
    pe = sinusoidal_encoding(n, q.size(-1)).to(torch.float64)
    return (q + pe) @ (k + pe).T


def toeplitz_gap(grid: torch.Tensor) -> float:
    """max over diagonals (fixed m - j) of (max - min): 0 iff the grid depends on m - j only."""
    n_r, n_c = grid.shape
    gap = 0.0
    for off in range(-(n_r - 1), n_c):
        diag = torch.diagonal(grid, off)
        if diag.numel() > 1:
            gap = max(gap, float(diag.max() - diag.min()))
    return gap


class SimilarityGrid(NamedTuple):
    similarity: torch.Tensor  # (n, n) position-by-position similarity
    toeplitz_gap: float       # how far it is from depending on the offset alone


GRIDS = ("sinusoidal", "learned", "rotary", "added")


def similarity_grids(n: int, d: int, base: float = 10000.0, seed: int = 0) -> dict[str, SimilarityGrid]:
    """The four grids compared side by side: cosine similarity of sinusoidal / learned positions, and the
    score of one (q, k) pair moved to positions (m, n) by RoPE or by added sinusoidal positions (each
    divided by |q| |k|)."""
    q, k = random_qk(d, seed)
    norm = q.norm() * k.norm()
    grids = {
        "sinusoidal": cosine_grid(sinusoidal_encoding(n, d, base)),
        "learned": cosine_grid(position_table("learned", n, d, seed)),
        "rotary": rotary_score_grid(q, k, n, base) / norm,
        "added": additive_score_grid(q, k, n) / norm,
    }
    return {name: SimilarityGrid(g, toeplitz_gap(g)) for name, g in grids.items()}


# ---------------------------------------------------------------------------------------------
# 5. the tutorials' pitfalls
# ---------------------------------------------------------------------------------------------


def tutorial_positional_encoding(max_len: int, d_model: int) -> torch.Tensor:
    """The tutorials' table, verbatim (second tutorial's ``PositionalEncoding.__init__``).

    For odd d_model, ``pe[:, 1::2]`` has d_model // 2 columns but the cos term has
    ceil(d_model / 2): the assignment raises a RuntimeError. ``sinusoidal_encoding`` handles it.
    """
    position = torch.arange(max_len).unsqueeze(1)
    div_term = torch.exp(torch.arange(0, d_model, 2) * -(math.log(10000.0) / d_model))
    pe = torch.zeros(max_len, d_model)
    pe[:, 0::2] = torch.sin(position * div_term)  # 偶数位置
    pe[:, 1::2] = torch.cos(position * div_term)  # 奇数位置
    return pe


def tutorial_error(max_len: int, d_model: int) -> str | None:
    """The error the tutorial's table raises for this d_model, or None if it works."""
    try:
        tutorial_positional_encoding(max_len, d_model)
    except RuntimeError as err:
        return str(err).strip().splitlines()[0]
    return None


EMBEDDING_RECIPES = ("default_init", "small_init", "no_scale", "scale_after")


class ScaleCheck(NamedTuple):
    """Mean row norms of the token part and of the position part of what the first layer sees,
    and their ratio (position / token)."""

    token_norm: float
    position_norm: float
    ratio: float


def embedding_scale(recipe: str, d_model: int, n: int = 32, seed: int = 0) -> ScaleCheck:
    """How loud the positions are next to the tokens, for four recipes of building the input.

    default_init: E ~ N(0, 1) (nn.Embedding's default init kept), x = E * sqrt(d) + PE
    small_init:  E ~ N(0, 1/d),                      x = E * sqrt(d) + PE   (Vaswani et al.; the second
                 tutorial's _initialize_parameters: normal_(std=d_model ** -0.5))
    no_scale:    E ~ N(0, 1),                        x = E + PE
    scale_after: E ~ N(0, 1),                        x = (E + PE) * sqrt(d)  (PE scaled too)
    """
    if recipe not in EMBEDDING_RECIPES:
        raise ValueError(f"recipe must be one of {EMBEDDING_RECIPES}, got {recipe!r}")
    g = torch.Generator().manual_seed(seed)
    e = torch.randn(n, d_model, generator=g, dtype=torch.float64)
    if recipe == "small_init":
        e = e / math.sqrt(d_model)
    pe = sinusoidal_encoding(n, d_model).to(torch.float64)
    s = math.sqrt(d_model)
    token, position = {"default_init": (e * s, pe), "small_init": (e * s, pe), "no_scale": (e, pe),
                       "scale_after": (e * s, pe * s)}[recipe]
    tn, pn = float(token.norm(dim=-1).mean()), float(position.norm(dim=-1).mean())
    return ScaleCheck(tn, pn, pn / tn)

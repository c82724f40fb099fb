"""Positional encodings: the sinusoidal table, a learned table, rotary embeddings (RoPE).

Rotary position embedding (RoPE): Su et al. (2021), "RoFormer: Enhanced Transformer with
Rotary Position Embedding".

Each pair of dimensions (x_{2i}, x_{2i+1}) of a query or key at position m is rotated by the
angle m * theta_i, theta_i = base^(-2i/d) (the frequencies of the sinusoidal table):

    [x'_{2i}  ]   [cos m theta_i  -sin m theta_i] [x_{2i}  ]
    [x'_{2i+1}] = [sin m theta_i   cos m theta_i] [x_{2i+1}]

A rotation keeps the norm, and R(m)^T R(n) = R(n - m), so
<R(m) q, R(n) k> = <q, R(n - m) k>: the score depends on the positions only through the offset
n - m. Pairs are interleaved as in the paper (GPT-NeoX / LLaMA code pairs dimension i with
i + d/2 instead: the same idea with the dimensions permuted).
"""
from __future__ import annotations

import math

import torch
from torch import nn


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


class LearnedPositionalEmbedding(nn.Module):
    """A trainable table P (max_len, d_model), one row per position (BERT, GPT-2).

    forward(n) -> P[:n], shape (n, d_model). Unlike the sinusoidal table it cannot go beyond
    max_len and knows nothing of relative offsets until trained. Initialised N(0, 0.02^2) (BERT's initializer
    range; OpenAI's GPT-2 code draws its position table `wpe` with std 0.01).
    """

    def __init__(self, max_len: int, d_model: int):
        super().__init__()
        self.max_len = max_len
        self.weight = nn.Parameter(torch.randn(max_len, d_model) * 0.02)

    def forward(self, n: int) -> torch.Tensor:
        if n > self.max_len:
            raise ValueError(f"sequence length {n} exceeds max_len {self.max_len} of the learned table")
        return self.weight[:n]


def learned_positional_embedding(max_len: int, d_model: int) -> LearnedPositionalEmbedding:
    """A fresh ``LearnedPositionalEmbedding`` (seeded by the caller's ``torch.manual_seed``)."""
    return LearnedPositionalEmbedding(max_len, d_model)


# --------------------------------------------------------------------------------------------------
# Rotary position embedding (RoPE)
# --------------------------------------------------------------------------------------------------

def rotary_frequencies(d: int, base: float = 10000.0) -> torch.Tensor:
    """theta_i = base^(-2i/d) for i = 0 .. d/2 - 1, float64, shape (d/2,)."""
    if d < 2 or d % 2:
        raise ValueError(f"rotary embedding needs an even dimension, got d={d}")
    return base ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)


def rotary_angles(positions: torch.Tensor, d: int, base: float = 10000.0, *,
                  frequencies: torch.Tensor | None = None) -> torch.Tensor:
    """m * theta_i for every position: positions (..., n) -> angles (..., n, d/2), float64.

    ``frequencies`` (d/2,) replaces theta_i = base^(-2i/d), e.g. by a scaled RoPE below.
    """
    theta = rotary_frequencies(d, base) if frequencies is None else frequencies.to(torch.float64)
    if theta.shape != (d // 2,):
        raise ValueError(f"need d/2 = {d // 2} frequencies, got shape {tuple(theta.shape)}")
    return positions.to(torch.float64).unsqueeze(-1) * theta


def rotary_embedding(x: torch.Tensor, positions: torch.Tensor | None = None,
                     base: float = 10000.0, *, frequencies: torch.Tensor | None = None) -> torch.Tensor:
    """Rotate x (..., n, d) by its positions (default 0 .. n-1; any shape broadcasting to (..., n)).

    Positions may be floats or negative. Returns a tensor of x's shape and dtype.
    ``frequencies`` (d/2,) replaces base^(-2i/d) (scaled RoPE: ``rope_scaled_frequencies``).
    """
    n, d = x.shape[-2], x.shape[-1]
    if positions is None:
        positions = torch.arange(n, device=x.device)
    angles = rotary_angles(torch.as_tensor(positions, device=x.device), d, base,
                           frequencies=frequencies)                                # (..., n, d/2)
    cos, sin = angles.cos().to(x.dtype), angles.sin().to(x.dtype)
    x1, x2 = x[..., 0::2], x[..., 1::2]                                            # (..., n, d/2)
    out = torch.stack((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1)          # (..., n, d/2, 2)
    return out.flatten(-2)                                                         # (..., n, d)


def apply_rotary(q: torch.Tensor, k: torch.Tensor, positions: torch.Tensor | None = None,
                 base: float = 10000.0, k_positions: torch.Tensor | None = None
                 ) -> tuple[torch.Tensor, torch.Tensor]:
    """Rotate queries and keys (..., n, d) before the dot product; values are left alone.

    ``positions`` apply to q (and to k unless ``k_positions`` is given, e.g. for a cache).
    """
    k_positions = positions if k_positions is None else k_positions
    return rotary_embedding(q, positions, base), rotary_embedding(k, k_positions, base)


def rotary_matrix(position: float, d: int, base: float = 10000.0) -> torch.Tensor:
    """The (d, d) block-diagonal rotation R(m) (float64) for the page's "show the matrix"."""
    angles = rotary_angles(torch.tensor([position]), d, base)[0]                  # (d/2,)
    r = torch.zeros(d, d, dtype=torch.float64)
    i = torch.arange(0, d, 2)
    r[i, i], r[i, i + 1] = angles.cos(), -angles.sin()
    r[i + 1, i], r[i + 1, i + 1] = angles.sin(), angles.cos()
    return r


# --------------------------------------------------------------------------------------------------
# Long context: RoPE scaling (position interpolation, NTK-aware, YaRN)
# --------------------------------------------------------------------------------------------------
# A model trained on L positions has only seen angles m * theta_i with m < L. To run it on s * L
# positions, each method changes the frequencies theta_i so that the angles stay (mostly) in the
# range seen in training. Every function returns the new theta_i, float64, shape (d/2,); feed it to
# ``rotary_angles`` / ``rotary_embedding(..., frequencies=...)``. At s = 1 each gives back theta_i.

def _check_scale(scale: float) -> None:
    if not scale > 0:
        raise ValueError(f"the context scale factor s must be > 0, got {scale}")


def rope_linear_frequencies(d: int, scale: float, base: float = 10000.0) -> torch.Tensor:
    """Linear position interpolation (PI; Chen et al. 2023, "Extending Context Window of Large
    Language Models via Positional Interpolation"):

        f'(x, m) = f(x, m L / L') = f(x, m / s),   s = L' / L,

    i.e. every position is divided by s, which is the same as every frequency: theta_i' = theta_i / s.
    All dimensions are squeezed alike, so neighbouring tokens become s times harder to tell apart.
    """
    _check_scale(scale)
    return rotary_frequencies(d, base) / scale


def rope_ntk_base(d: int, scale: float, base: float = 10000.0) -> float:
    """The NTK-aware base (bloc97 2023; Eq. (16) of the YaRN paper): b' = b * s^(d / (d - 2)).

    Chosen so that the lowest frequency theta_{d/2-1} = b^(-(d-2)/d) is divided by exactly s
    (interpolated like PI) while theta_0 = 1, the highest, is left unchanged.
    """
    _check_scale(scale)
    if d <= 2:
        raise ValueError(f"the NTK-aware base change needs d > 2, got d={d}")
    return base * scale ** (d / (d - 2))


def rope_ntk_frequencies(d: int, scale: float, base: float = 10000.0) -> torch.Tensor:
    """NTK-aware scaled RoPE: theta_i' = b'^(-2i/d) with b' = b * s^(d/(d-2)) (``rope_ntk_base``).

    High frequencies are barely changed (extrapolated), low frequencies interpolated by up to s.
    """
    return rotary_frequencies(d, rope_ntk_base(d, scale, base))


def yarn_ramp(r: torch.Tensor, alpha: float = 1.0, beta: float = 32.0) -> torch.Tensor:
    """The ramp gamma(r) of YaRN (Peng et al. 2023, Eq. (18)):

        gamma(r) = 0                        if r < alpha
                   1                        if r > beta
                   (r - alpha) / (beta - alpha)  otherwise.
    """
    if not alpha < beta:
        raise ValueError(f"YaRN needs alpha < beta, got alpha={alpha}, beta={beta}")
    return ((torch.as_tensor(r, dtype=torch.float64) - alpha) / (beta - alpha)).clamp(0.0, 1.0)


def rope_yarn_frequencies(d: int, scale: float, original_len: int, base: float = 10000.0, *,
                          alpha: float = 1.0, beta: float = 32.0) -> torch.Tensor:
    """YaRN's "NTK-by-parts" frequencies (Peng et al. 2023, "YaRN: Efficient Context Window
    Extension of Large Language Models", Sec. 3.2, Eqs. (17)-(19)).

    For dimension pair i, the wavelength is lambda_i = 2 pi / theta_i and r_i = L / lambda_i is how
    many full turns it makes over the original context L (``original_len``). Then

        theta_i' = (1 - gamma(r_i)) * theta_i / s + gamma(r_i) * theta_i      (``yarn_ramp``)

    Dimensions turning more than beta times (high frequency, r > beta) are kept as they are,
    dimensions turning less than alpha times (low frequency, r < alpha) are interpolated like PI
    (theta / s), and those in between get a linear mix. alpha = 1, beta = 32 are the paper's
    values for LLaMA. (The reference code rounds the ramp's ends to whole dimensions; this is the
    paper's formula.) YaRN also scales the logits: ``yarn_attention_factor``.
    """
    _check_scale(scale)
    if original_len < 1:
        raise ValueError(f"original_len (the training context L) must be >= 1, got {original_len}")
    theta = rotary_frequencies(d, base)                       # (d/2,)
    r = original_len * theta / (2 * math.pi)                  # turns over L: L / lambda_i
    gamma = yarn_ramp(r, alpha, beta)
    return (1 - gamma) * theta / scale + gamma * theta


def yarn_attention_factor(scale: float) -> float:
    """YaRN's temperature (Eq. (22)): sqrt(1/t) = 0.1 ln(s) + 1, multiplying both q and k.

    The attention logits are thus multiplied by (0.1 ln s + 1)^2; 1 at s = 1.
    """
    _check_scale(scale)
    return 0.1 * math.log(scale) + 1.0


ROPE_SCALINGS = ("none", "linear", "ntk", "yarn")


def rope_scaled_frequencies(d: int, method: str = "none", scale: float = 1.0, *, base: float = 10000.0,
                            original_len: int | None = None) -> torch.Tensor:
    """theta_i' of one of ``ROPE_SCALINGS``: "none" (plain RoPE), "linear" (PI), "ntk", "yarn"
    (which needs ``original_len``, the training context)."""
    if method == "none":
        return rotary_frequencies(d, base)
    if method == "linear":
        return rope_linear_frequencies(d, scale, base)
    if method == "ntk":
        return rope_ntk_frequencies(d, scale, base)
    if method == "yarn":
        if original_len is None:
            raise ValueError("YaRN needs original_len, the context length the model was trained on")
        return rope_yarn_frequencies(d, scale, original_len, base)
    raise ValueError(f"unknown RoPE scaling {method!r}; choose one of {ROPE_SCALINGS}")


# --------------------------------------------------------------------------------------------------
# ALiBi: attention with linear biases
# --------------------------------------------------------------------------------------------------

def alibi_slopes(num_heads: int) -> torch.Tensor:
    """The per-head slopes m_h of ALiBi (Press et al. 2022, "Train Short, Test Long"), float64 (h,).

    For h a power of two: the geometric sequence starting at 2^(-8/h) with ratio 2^(-8/h)
    (8 heads: 1/2, 1/4, ..., 1/256). Otherwise (the paper's rule, as in its code): take the
    largest power of two p < h, use the p slopes of p heads, then every other slope of 2p heads
    (the ones falling in between) for the remaining h - p heads.
    """
    if num_heads < 1:
        raise ValueError(f"num_heads must be >= 1, got {num_heads}")

    def power_of_two(n: int) -> torch.Tensor:
        start = 2.0 ** (-8.0 / n)
        return start ** torch.arange(1, n + 1, dtype=torch.float64)

    p = 2 ** int(math.floor(math.log2(num_heads)))
    if p == num_heads:
        return power_of_two(num_heads)
    return torch.cat((power_of_two(p), alibi_slopes(2 * p)[0::2][: num_heads - p]))


def alibi_bias(n: int, num_heads: int, *, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """The ALiBi bias (num_heads, n, n): entry (h, i, j) = -m_h * |i - j|, added to the scores.

    No position embedding is added to the tokens; the bias penalises distant keys, more strongly
    in heads with a larger slope. For a decoder combine it with ``causal_mask``:
    ``bias.masked_fill(~causal_mask(n), float("-inf"))`` (a float mask is added to the scores).
    """
    if n < 0:
        raise ValueError(f"n must be >= 0, got {n}")
    pos = torch.arange(n, dtype=torch.float64)
    distance = (pos[:, None] - pos[None, :]).abs()                            # (n, n)
    return (-alibi_slopes(num_heads)[:, None, None] * distance).to(dtype)     # (h, n, n)

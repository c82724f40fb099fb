"""Causal self-attention of a decoder-only model, with a KV cache and grouped K/V heads.

Generating token by token, the keys and values of the tokens already seen never change
(a token only attends to the past), so they are kept in a ``KVCache`` instead of being
recomputed at every step: the prefill computes them for the prompt at once, each decoding
step then computes q, k, v for the single new token and appends its k, v. The outputs are
those of the full causal forward over the whole sequence.

With ``num_kv_heads < num_heads`` query heads share K/V heads (grouped-query attention;
``num_kv_heads=1`` is multi-query attention): the cache holds num_kv_heads heads, not num_heads.
Shapes: b batch, n new tokens, t tokens in the cache, h query heads, h_kv K/V heads.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import NamedTuple

import torch
from torch import nn

from .functional import default_scale, grouped_query_attention
from .modules import HeadDivisibilityError
from .positional import alibi_slopes, rotary_embedding
from .types import AttentionOutput


class KVCache:
    """The keys and values of one attention layer for every token seen so far.

    ``.k``, ``.v``: (b, h_kv, t, d_head), or None while empty; ``len(cache) == t``.
    """

    def __init__(self) -> None:
        self.k: torch.Tensor | None = None
        self.v: torch.Tensor | None = None

    def __len__(self) -> int:
        return 0 if self.k is None else self.k.size(-2)

    def append(self, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Add the new tokens' k, v (b, h_kv, n, d_head); return all of them (b, h_kv, t + n, d_head)."""
        if self.k is None:
            self.k, self.v = k, v
        else:
            self.k = torch.cat((self.k, k), dim=-2)
            self.v = torch.cat((self.v, v), dim=-2)
        return self.k, self.v

    def nbytes(self) -> int:
        """Memory held: 2 x b x h_kv x t x d_head x bytes per element."""
        return 0 if self.k is None else self.k.nbytes + self.v.nbytes

    def clear(self) -> None:
        self.k = self.v = None


class CausalSelfAttention(nn.Module):
    """Masked self-attention of a GPT-style decoder with grouped K/V heads and an optional cache.

    d_model = num_heads * d_head; ``num_kv_heads`` (default num_heads) must divide num_heads.
    Switches, all off by default:
      rope     rotate q and k by their absolute positions (RoPE) before attending,
      alibi    add the ALiBi bias -m_h |i - j| to the scores (no position embedding needed),
      qk_norm  RMS-normalise each head's q and k (learned gain) before the dot product,
      window   each token sees only the last ``window`` tokens (itself included) plus the first
               ``sinks`` tokens (the cache still keeps everything; eviction is the caller's choice).
    """

    def __init__(self, d_model: int, num_heads: int, num_kv_heads: int | None = None, *,
                 bias: bool = False, rope: bool = False, rope_base: float = 10000.0,
                 alibi: bool = False, qk_norm: bool = False,
                 window: int | None = None, sinks: int = 0):
        super().__init__()
        num_kv_heads = num_heads if num_kv_heads is None else num_kv_heads
        if num_heads < 1 or d_model % num_heads != 0:
            raise HeadDivisibilityError(d_model, num_heads)
        if num_kv_heads < 1 or num_heads % num_kv_heads != 0:
            raise ValueError(f"num_kv_heads ({num_kv_heads}) must divide num_heads ({num_heads}): each K/V "
                             f"head serves num_heads / num_kv_heads query heads; "
                             f"{num_heads} / {num_kv_heads} = {num_heads / max(num_kv_heads, 1):g}")
        self.d_model, self.num_heads, self.num_kv_heads = d_model, num_heads, num_kv_heads
        self.d_head = d_model // num_heads
        if rope and self.d_head % 2:
            raise ValueError(f"RoPE rotates pairs of dimensions: d_head = {self.d_head} must be even")
        if window is not None and window < 1:
            raise ValueError(f"window must be >= 1, got {window}")
        if sinks < 0:
            raise ValueError(f"sinks must be >= 0, got {sinks}")
        self.rope, self.rope_base, self.alibi, self.window, self.sinks = rope, rope_base, alibi, window, sinks
        kv_dim = num_kv_heads * self.d_head
        self.W_query = nn.Linear(d_model, d_model, bias=bias)
        self.W_key = nn.Linear(d_model, kv_dim, bias=bias)       # h_kv heads only: smaller K/V
        self.W_value = nn.Linear(d_model, kv_dim, bias=bias)
        self.W_output = nn.Linear(d_model, d_model, bias=bias)
        self.q_norm = nn.RMSNorm(self.d_head) if qk_norm else None
        self.k_norm = nn.RMSNorm(self.d_head) if qk_norm else None
        # Set from outside to evaluate a RoPE model beyond its training length (positional.rope_scaled_frequencies):
        # rope_frequencies (d_head/2,) replaces base^(-2i/d), logit_scale multiplies the scores (YaRN's factor^2).
        self.rope_frequencies: torch.Tensor | None = None
        self.logit_scale: float = 1.0

    def split_heads(self, x: torch.Tensor, heads: int) -> torch.Tensor:
        """(b, n, heads * d_head) -> (b, heads, n, d_head)."""
        b, n, _ = x.shape
        return x.view(b, n, heads, self.d_head).transpose(1, 2)

    def project(self, x: torch.Tensor, past: int = 0) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """q (b, h, n, d_head), k and v (b, h_kv, n, d_head) of tokens at positions past .. past+n-1,
        normalised (qk_norm) and rotated (rope) as they enter the dot product and the cache."""
        n = x.size(1)
        q = self.split_heads(self.W_query(x), self.num_heads)      # (b, h, n, d_head)
        k = self.split_heads(self.W_key(x), self.num_kv_heads)     # (b, h_kv, n, d_head)
        v = self.split_heads(self.W_value(x), self.num_kv_heads)   # (b, h_kv, n, d_head)
        if self.q_norm is not None:
            q, k = self.q_norm(q), self.k_norm(k)
        if self.rope:                                              # the new tokens sit at past .. past+n-1
            positions = torch.arange(past, past + n, device=x.device)
            q = rotary_embedding(q, positions, self.rope_base, frequencies=self.rope_frequencies)
            k = rotary_embedding(k, positions, self.rope_base, frequencies=self.rope_frequencies)
        return q, k, v

    def score_mask(self, past: int, n: int, t: int, device=None, dtype=torch.float32) -> torch.Tensor:
        """What the new tokens' rows (n, t) may see: a bool mask (causal, window, sinks), or with ALiBi a
        float mask (h, n, t) holding -m_h |i - j| where visible and -inf where hidden."""
        i = torch.arange(past, past + n, device=device)[:, None]   # query positions (n, 1)
        j = torch.arange(t, device=device)[None, :]                 # key positions (1, t)
        mask = j <= i                                              # causal
        if self.window is not None:                                # as masks.sliding_window_mask
            mask = mask & ((i - j < self.window) | (j < self.sinks))
        if self.alibi:
            slopes = alibi_slopes(self.num_heads).to(dtype).to(device)[:, None, None]
            mask = (-slopes * (i - j).abs()).masked_fill(~mask, float("-inf"))   # (h, n, t)
        return mask

    def forward(self, x: torch.Tensor, cache: KVCache | None = None) -> AttentionOutput:
        """x (b, n, d_model): the whole sequence, or with a cache only the new tokens.

        Returns output (b, n, d_model) and weights (b, h, n, t) over all t tokens seen.
        """
        past = 0 if cache is None else len(cache)                  # tokens already cached
        n = x.size(1)
        q, k, v = self.project(x, past)
        if cache is not None:
            k, v = cache.append(k, v)                              # (b, h_kv, t, d_head), t = past + n
        mask = self.score_mask(past, n, k.size(-2), x.device, q.dtype)
        scale = default_scale(self.d_head) * self.logit_scale
        out, weights = grouped_query_attention(q, k, v, mask, scale=scale)   # (b, h, n, d_head), (b, h, n, t)
        out = out.transpose(1, 2).reshape(x.size(0), n, self.d_model)   # concatenate the heads
        return AttentionOutput(self.W_output(out), weights)

    def logits(self, x: torch.Tensor) -> torch.Tensor:
        """The attention logits q.k * scale (b, h, n, n) of a full causal forward, before the mask: what
        grows during training without QK-norm (read them where the mask shows, e.g. with ``score_mask``)."""
        q, k, _ = self.project(x)
        k = k.repeat_interleave(self.num_heads // self.num_kv_heads, dim=-3)
        return q @ k.transpose(-2, -1) * (default_scale(self.d_head) * self.logit_scale)

    def kv_bytes_per_token(self, dtype: torch.dtype = torch.float32) -> int:
        """2 (k and v) x h_kv x d_head x bytes: what each token adds to this layer's cache."""
        return 2 * self.num_kv_heads * self.d_head * torch.empty(0, dtype=dtype).element_size()


# --------------------------------------------------------------------------------------------------
# A small decoder-only language model (GPT-2 / Llama block layout) built on CausalSelfAttention
# --------------------------------------------------------------------------------------------------

POSITIONS = ("rope", "alibi", "learned", "none")


@dataclass
class DecoderConfig:
    """The shape of a ``DecoderLM``. ``d_ff = 0`` leaves out the MLPs (an attention-only model);
    ``position`` is how the model knows where a token is: "rope" (rotate q, k), "alibi" (bias the
    scores), "learned" (an embedding table of ``max_len`` rows added to the tokens) or "none"."""

    vocab_size: int
    d_model: int = 64
    num_layers: int = 2
    num_heads: int = 4
    num_kv_heads: int | None = None
    d_ff: int = 256
    position: str = "rope"
    max_len: int = 256
    rope_base: float = 10000.0
    qk_norm: bool = False
    window: int | None = None
    sinks: int = 0

    def __post_init__(self) -> None:
        if self.position not in POSITIONS:
            raise ValueError(f"position must be one of {POSITIONS}, got {self.position!r}")

    def to_dict(self) -> dict:
        return asdict(self)


class DecoderBlock(nn.Module):
    """x + attn(LN(x)), then x + MLP(LN(x)) (pre-LN, as GPT-2 and Llama); no MLP when d_ff = 0."""

    def __init__(self, config: DecoderConfig):
        super().__init__()
        c = config
        self.ln1, self.ln2 = nn.LayerNorm(c.d_model), nn.LayerNorm(c.d_model)
        self.attn = CausalSelfAttention(c.d_model, c.num_heads, c.num_kv_heads, rope=c.position == "rope",
                                        rope_base=c.rope_base, alibi=c.position == "alibi", qk_norm=c.qk_norm,
                                        window=c.window, sinks=c.sinks)
        self.mlp = (nn.Sequential(nn.Linear(c.d_model, c.d_ff), nn.GELU(), nn.Linear(c.d_ff, c.d_model))
                    if c.d_ff > 0 else None)

    def forward(self, x: torch.Tensor, cache: KVCache | None = None) -> AttentionOutput:
        """Returns the block's output (b, n, d_model) and its attention weights (b, h, n, t)."""
        a = self.attn(self.ln1(x), cache)
        x = x + a.output
        if self.mlp is not None:
            x = x + self.mlp(self.ln2(x))
        return AttentionOutput(x, a.weights)


class DecoderOutput(NamedTuple):
    logits: torch.Tensor                     # (b, n, vocab_size)
    weights: tuple[torch.Tensor, ...]        # per layer (b, h, n, t)


class DecoderLM(nn.Module):
    """Token embedding (+ learned positions) -> ``num_layers`` DecoderBlocks -> LN -> logits.

    ``forward(ids)`` runs the whole sequence; ``forward(ids, caches)`` (``new_caches()``) runs only the new
    tokens, appending their keys and values, with the same logits as the full forward.
    """

    def __init__(self, config: DecoderConfig):
        super().__init__()
        self.config = config
        self.embed = nn.Embedding(config.vocab_size, config.d_model)
        self.blocks = nn.ModuleList(DecoderBlock(config) for _ in range(config.num_layers))
        self.ln_f = nn.LayerNorm(config.d_model)
        self.head = nn.Linear(config.d_model, config.vocab_size, bias=False)
        self.pos = nn.Embedding(config.max_len, config.d_model) if config.position == "learned" else None

    def new_caches(self) -> list[KVCache]:
        return [KVCache() for _ in self.blocks]

    def attention_layers(self) -> list[CausalSelfAttention]:
        return [block.attn for block in self.blocks]

    def forward(self, ids: torch.Tensor, caches: list[KVCache] | None = None) -> DecoderOutput:
        """ids (b, n) of token ids: the whole sequence, or with caches only the new tokens."""
        x = self.embed(ids)
        if self.pos is not None:
            past = 0 if caches is None else len(caches[0])
            if past + ids.size(1) > self.config.max_len:
                raise ValueError(f"learned positions stop at max_len = {self.config.max_len}; "
                                 f"got position {past + ids.size(1) - 1}")
            x = x + self.pos(torch.arange(past, past + ids.size(1), device=ids.device))
        weights = []
        for i, block in enumerate(self.blocks):
            x, w = block(x, None if caches is None else caches[i])
            weights.append(w)
        return DecoderOutput(self.head(self.ln_f(x)), tuple(weights))

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

import torch
from torch import nn

from .functional import grouped_query_attention
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

    def split_heads(self, x: torch.Tensor, heads: int) -> torch.Tensor:
        """(b, n, heads * d_head) -> (b, heads, n, d_head)."""
        b, n, _ = x.shape
        return x.view(b, n, heads, self.d_head).transpose(1, 2)

    def forward(self, x: torch.Tensor, cache: KVCache | None = None) -> AttentionOutput:
        """x (b, n, d_model): the whole sequence, or with a cache only the new tokens.

        Returns output (b, n, d_model) and weights (b, h, n, t) over all t tokens seen.
        """
        past = 0 if cache is None else len(cache)                  # tokens already cached
        n = x.size(1)
        q = self.split_heads(self.W_query(x), self.num_heads)      # (b, h, n, d_head)
        k = self.split_heads(self.W_key(x), self.num_kv_heads)     # (b, h_kv, n, d_head)
        v = self.split_heads(self.W_value(x), self.num_kv_heads)   # (b, h_kv, n, d_head)
        if self.q_norm is not None:
            q, k = self.q_norm(q), self.k_norm(k)
        if self.rope:                                              # the new tokens sit at past .. past+n-1
            positions = torch.arange(past, past + n, device=x.device)
            q = rotary_embedding(q, positions, self.rope_base)
            k = rotary_embedding(k, positions, self.rope_base)     # cached already rotated
        if cache is not None:
            k, v = cache.append(k, v)                              # (b, h_kv, t, d_head), t = past + n
        i = torch.arange(past, past + n, device=x.device)[:, None]  # query positions (n, 1)
        j = torch.arange(k.size(-2), device=x.device)[None, :]      # key positions (1, t)
        mask = j <= i                                              # causal: the new tokens' rows (n, t)
        if self.window is not None:                                # as masks.sliding_window_mask
            mask = mask & ((i - j < self.window) | (j < self.sinks))
        if self.alibi:                                             # float mask: -m_h |i - j|, -inf where hidden
            slopes = alibi_slopes(self.num_heads).to(q.dtype).to(x.device)[:, None, None]
            mask = (-slopes * (i - j).abs()).masked_fill(~mask, float("-inf"))   # (h, n, t)
        out, weights = grouped_query_attention(q, k, v, mask)     # (b, h, n, d_head), (b, h, n, t)
        out = out.transpose(1, 2).reshape(x.size(0), n, self.d_model)   # concatenate the heads
        return AttentionOutput(self.W_output(out), weights)

    def kv_bytes_per_token(self, dtype: torch.dtype = torch.float32) -> int:
        """2 (k and v) x h_kv x d_head x bytes: what each token adds to this layer's cache."""
        return 2 * self.num_kv_heads * self.d_head * torch.empty(0, dtype=dtype).element_size()

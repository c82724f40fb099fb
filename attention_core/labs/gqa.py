"""MHA -> GQA -> MQA -> MLA: which query heads share which K/V head, what each keeps in the cache per token, what
sharing costs a trained model, and why MLA's up-projections disappear at inference.

- ``kv_head_of``: the K/V head each query head reads, found by running ``grouped_query_attention`` (each K/V head
  holds a value equal to its own index, so every query head's output names the head it read);
- ``bytes_per_token``: the KV-cache formula of the KV-cache page (labs.kv_cache.kv_cache_bytes) for one token;
- ``quality_rows``: the recall models gqa_kv4 / gqa_kv2 / gqa_kv1 (models/gqa_lm.py) as evaluated when they were
  trained (their checkpoints' ``meta["eval"]``), with the cache each keeps;
- ``mla_sizes``: cache numbers per token and layer of MHA, GQA, MQA and MLA for DeepSeek-V2's published shapes;
- ``absorption``: ``latent.MultiHeadLatentAttention`` decoding token by token through the latent cache with the
  absorbed weights, against its explicit full forward (max difference) and what each cache holds;
- ``rope_on_latent_keys``: the pitfall: rotating the up-projected keys by position leaves no fixed matrix to absorb.
"""
from __future__ import annotations

import math
from typing import NamedTuple

import torch

from ..functional import grouped_query_attention
from ..latent import LatentCache, MultiHeadLatentAttention
from ..positional import rotary_embedding
from .kv_cache import kv_cache_bytes

QUERY_HEADS = (4, 8, 16, 32)
KV_HEADS = (1, 2, 4, 8, 16, 32)         # divisors of 32; for h < 32 only those <= h divide h
SIZE = {"layers": 32, "d_head": 128, "bytes": 2}     # Llama-2-7B's layers and d_head, 2-byte numbers (float16)
RECIPES = ("gqa_kv4", "gqa_kv2", "gqa_kv1")           # h = 4 query heads; 4, 2, 1 K/V heads


def divisors(h: int) -> list[int]:
    return [d for d in range(1, h + 1) if h % d == 0]


def usable_kv_heads(h: int, h_kv: int) -> int:
    """The largest divisor of h that is <= h_kv (h_kv itself when it divides h)."""
    return max(d for d in divisors(h) if d <= max(1, h_kv))


@torch.no_grad()
def kv_head_of(h: int, h_kv: int) -> list[int]:
    """For each query head, the index of the K/V head it reads, measured: one key, K/V head g's value is g."""
    q = torch.zeros(1, h, 1, 1)
    k = torch.zeros(1, h_kv, 1, 1)
    v = torch.arange(h_kv, dtype=torch.float32).view(1, h_kv, 1, 1)
    out = grouped_query_attention(q, k, v).output            # (1, h, 1, 1): the value each query head read
    return [int(round(x)) for x in out.flatten().tolist()]


def bytes_per_token(h_kv: int, layers: int = SIZE["layers"], d_head: int = SIZE["d_head"],
                    bytes_per_value: int = SIZE["bytes"]) -> int:
    """2 x layers x h_kv x d_head x bytes: the KV-cache formula for one token."""
    return kv_cache_bytes(layers, h_kv, d_head, bytes_per_value, 1)


# ------------------------------------------------------------------ the trained models' recorded evaluation
class QualityRow(NamedTuple):
    recipe: str
    num_heads: int
    num_kv_heads: int
    kv_bytes_per_token: int     # float32, all layers of the small model
    accuracy: float
    accuracy_ci95: float        # half-width of the 95% interval over held-out sequences
    loss: float
    loss_ci95: float
    sequences: int
    train_seconds: float


EVAL_KEYS = ("accuracy", "accuracy_ci95", "loss", "loss_ci95", "sequences", "num_heads", "num_kv_heads",
             "kv_bytes_per_token")


def quality_row(recipe: str, meta: dict) -> QualityRow:
    """One recorded evaluation (a checkpoint's meta); ValueError if a number the page quotes is missing."""
    ev = meta.get("eval") if isinstance(meta, dict) else None
    if not isinstance(ev, dict) or not all(isinstance(ev.get(k), (int, float)) for k in EVAL_KEYS):
        raise ValueError(f"{recipe}: meta['eval'] lacks {', '.join(EVAL_KEYS)}")
    return QualityRow(recipe, int(ev["num_heads"]), int(ev["num_kv_heads"]), int(ev["kv_bytes_per_token"]),
                      float(ev["accuracy"]), float(ev["accuracy_ci95"]), float(ev["loss"]), float(ev["loss_ci95"]),
                      int(ev["sequences"]), float(meta.get("train_seconds", float("nan"))))


class Difference(NamedTuple):
    value: float          # a - b
    half_width: float     # 95% half-width of the difference: sqrt(ci_a^2 + ci_b^2) (independent errors)

    @property
    def beyond_noise(self) -> bool:
        return abs(self.value) > self.half_width


def difference(a: float, ci_a: float, b: float, ci_b: float) -> Difference:
    return Difference(a - b, math.hypot(ci_a, ci_b))


# ------------------------------------------------------------------ MLA: what each variant caches
class MLAShape(NamedTuple):
    name: str
    layers: int         # num_hidden_layers
    heads: int          # num_attention_heads
    d_head: int         # qk_nope_head_dim (= v_head_dim)
    d_latent: int       # kv_lora_rank
    d_rope: int         # qk_rope_head_dim
    source: str


DEEPSEEK_V2 = MLAShape("DeepSeek-V2", 60, 128, 128, 512, 64,
                       "https://huggingface.co/deepseek-ai/DeepSeek-V2/blob/main/config.json")
GQA_GROUPS = 8          # a GQA comparison with 8 K/V heads (as Llama-3-8B and Mistral-7B)


class CacheSize(NamedTuple):
    variant: str        # "MHA", "GQA", "MQA", "MLA"
    per_layer: int      # numbers cached per token and layer
    formula: str        # as in DeepSeek-V2's Table 1


def mla_sizes(shape: MLAShape = DEEPSEEK_V2, groups: int = GQA_GROUPS) -> list[CacheSize]:
    """Numbers per token and layer (DeepSeek-V2 Table 1): 2 n_h d_h, 2 n_g d_h, 2 d_h, d_c + d_h^R."""
    return [CacheSize("MHA", 2 * shape.heads * shape.d_head, "2 n_h d_h"),
            CacheSize("GQA", 2 * groups * shape.d_head, "2 n_g d_h"),
            CacheSize("MQA", 2 * shape.d_head, "2 d_h"),
            CacheSize("MLA", shape.d_latent + shape.d_rope, "d_c + d_h^R")]


# ------------------------------------------------------------------ MLA: the absorbed computation, measured
DEMO = {"d_model": 64, "num_heads": 4, "d_head": 16, "d_rope": 8, "tokens": 16}
LATENTS = (4, 8, 16, 32, 64, 128)


class Absorption(NamedTuple):
    d_latent: int
    tokens: int
    max_diff: float           # absorbed, token by token from the latent cache, vs explicit full forward
    max_weight_diff: float    # the same for the attention weights of the last token
    latent_bytes: int         # what the latent cache held at the end (c and k^R), float32
    latent_per_token: int     # numbers per token: d_c + d_rope
    mha_per_token: int        # numbers per token if K and V of every head were cached: 2 h d_head


def build_mla(d_latent: int, seed: int = 0) -> MultiHeadLatentAttention:
    torch.manual_seed(seed)
    return MultiHeadLatentAttention(DEMO["d_model"], DEMO["num_heads"], d_latent, d_head=DEMO["d_head"],
                                    d_rope=DEMO["d_rope"]).eval()


@torch.no_grad()
def absorption(d_latent: int, seed: int = 0) -> Absorption:
    """Decode ``DEMO['tokens']`` tokens one at a time with ``absorbed`` and a LatentCache; compare with one
    explicit causal forward (keys and values rebuilt by W^UK, W^UV) over the whole sequence."""
    m = build_mla(d_latent, seed)
    n = DEMO["tokens"]
    x = torch.randn(1, n, DEMO["d_model"], generator=torch.Generator().manual_seed(seed + 1))
    explicit = m(x)
    cache, outs, weights = LatentCache(), [], None
    for i in range(n):
        out = m.absorbed(x[:, i:i + 1], cache)
        outs.append(out.output)
        weights = out.weights
    diff = (torch.cat(outs, 1) - explicit.output).abs().max().item()
    wdiff = (weights[0, :, 0] - explicit.weights[0, :, -1]).abs().max().item()
    return Absorption(d_latent, n, diff, wdiff, cache.nbytes(), d_latent + DEMO["d_rope"],
                      2 * DEMO["num_heads"] * DEMO["d_head"])


# ------------------------------------------------------------------ the pitfall: RoPE on the compressed keys
class RopePitfall(NamedTuple):
    tokens: int
    max_score_diff: float     # |q_i . R(W^UK c_j) - (W^UK^T q_i) . c_j|, the rotation left out of the absorption
    max_weight_diff: float    # the same in the softmax weights of the last query
    fixed_ok: float           # with the rotation only on the decoupled part: absorbed vs explicit (rounding)


@torch.no_grad()
def rope_on_latent_keys(tokens: int = 16, seed: int = 0) -> RopePitfall:
    """One head: rotating the up-projected keys k_j = R_j W^UK c_j (and queries R_i q_i) makes the score
    q_i^T R_{j-i} W^UK c_j: the matrix between the query and c_j depends on the distance, so no single matrix
    can be folded into W^Q. Absorbing W^UK anyway (dropping the rotation) changes the scores and weights."""
    g = torch.Generator().manual_seed(seed)
    d_c, d_h = 8, 16
    c = torch.randn(tokens, d_c, generator=g)
    w_uk = torch.randn(d_h, d_c, generator=g) / math.sqrt(d_c)
    q = torch.randn(tokens, d_h, generator=g)
    pos = torch.arange(tokens)
    rotated = rotary_embedding(q, pos) @ rotary_embedding(c @ w_uk.T, pos).T / math.sqrt(d_h)
    absorbed = (q @ w_uk) @ c.T / math.sqrt(d_h)
    causal = torch.ones(tokens, tokens, dtype=torch.bool).tril()
    score_diff = (rotated - absorbed)[causal].abs().max().item()
    w_right = torch.softmax(rotated[-1], -1)
    w_wrong = torch.softmax(absorbed[-1], -1)
    m = build_mla(8, seed)
    x = torch.randn(1, tokens, DEMO["d_model"], generator=g)
    ok = (m(x).output - m.absorbed(x).output).abs().max().item()
    return RopePitfall(tokens, score_diff, (w_right - w_wrong).abs().max().item(), ok)

"""Cross-attention, run: queries from one sequence, keys and values from another.

1. Decoder over encoder: the "encoder-decoder attention" sublayer of Vaswani et al. (2017), which
   the first tutorial (5.1) contrasts with self-attention: Q comes from the target sentence being
   written, K and V from the encoded source sentence; the weights form an (n_target, n_source)
   matrix -- a soft alignment, in general not square. No causal mask: the whole source is known.
   Untrained weights give arbitrary alignments, so as ``crossmodal.align_text_to_image_`` does for
   images, a stand-in for training: a small English-Chinese glossary puts every Chinese character
   at the embedding of the English word it translates (a shared meaning space, which a trained
   translation model learns), and the attention projections are identities.
2. The second tutorial's ``CrossModalAttention`` bugs, run: concatenating (b, n_t, d) text with
   a (b, 1, d) image summary fails for more than one word; one module served both directions.
3. Caption words -> the region names of ``crossmodal.synthetic_scene`` (English and Chinese).

torch + numpy only; attention is ``modules.MultiHeadAttention``.

Why self-attention connects any two positions in one step (Vaswani et al. 2017, Table 1; first
tutorial, section 5.1), measured as path lengths on the connection graph of each layer type.

The paper's measure is the path length: how many steps a signal takes from position j to position i. One
step moves information from j to i when ``connections[i, j]`` is True:

- self-attention: every pair, in one layer;
- recurrent: one time step carries the state from position t - 1 to t (and, read in both directions,
  t + 1 to t). A single RNN layer already links position 0 to position n - 1, through n - 1 time steps
  run one after another: here a step is a time step, not a layer;
- convolution with a contiguous kernel of width k: |i - j| <= (k - 1) // 2 per layer;
- restricted self-attention with a neighbourhood r: |i - j| <= r per layer.

Chaining steps multiplies the graphs, so the path length between i and j is the shortest path length in
the graph (time steps for the RNN, stacked layers for the convolution and restricted self-attention).
``path_lengths`` finds it by repeated boolean matrix products.
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np
import torch

from ..crossmodal import (
    CrossModalAttention,
    align_text_to_image_,
    grounded_features,
    identity_attention_,
    synthetic_scene,
)
from ..modules import MultiHeadAttention
from ..text import embed_tokens
from . import seeded

# ---------------------------------------------------------------------------------------------
# 1. decoder over encoder
# ---------------------------------------------------------------------------------------------

# One Chinese character -> the English word it translates (a character of a two-character word
# maps to the whole word: 动物 -> animal). Characters with no counterpart (measure words, particles:
# 只, 了, 的) are left out on purpose: they have nothing in the source to look at.
GLOSSARY: dict[str, str] = {
    "这": "the", "那": "the", "动": "animal", "物": "animal", "没": "didn't", "有": "didn't",
    "过": "cross", "马": "street", "路": "street", "街": "street", "因": "because", "为": "because",
    "它": "it", "他": "he", "她": "she", "太": "too", "累": "tired", "。": ".", "，": ",", "！": "!",
    "？": "?", "猫": "cat", "狗": "dog", "坐": "sat", "在": "on", "上": "on", "垫": "mat", "子": "mat",
    "我": "i", "你": "you", "爱": "love", "喜": "like", "欢": "like", "吃": "eat", "苹": "apple",
    "果": "apple", "水": "water", "书": "book", "读": "read", "看": "read", "是": "is", "不": "not",
    "大": "big", "小": "small", "红": "red", "蓝": "blue", "绿": "green", "黄": "yellow", "鱼": "fish",
    "鸟": "bird", "树": "tree", "家": "home", "去": "go", "来": "come", "天": "day", "今": "today",
    "学": "student", "生": "student", "老": "teacher", "师": "teacher", "好": "good", "很": "very",
    "河": "river", "桥": "bridge", "球": "ball", "快": "quickly", "跑": "ran", "和": "and",
}


def gloss(tokens: Sequence[str]) -> list[str | None]:
    """The English word each target token translates, or None (also for English tokens: lowercased)."""
    out: list[str | None] = []
    for tok in tokens:
        if tok in GLOSSARY:
            out.append(GLOSSARY[tok])
        elif tok.isascii() and any(c.isalnum() for c in tok) or tok in ".,!?":
            out.append(tok.lower())        # an English target word stands for itself
        else:
            out.append(None)
    return out


class TranslationFeatures(NamedTuple):
    """source (n_s, d): the encoder's token vectors; target (n_t, d): the decoder's; meaning (n_t,):
    the English word each target vector stands for (None: no counterpart, its own random vector)."""

    source: torch.Tensor
    target: torch.Tensor
    meaning: list[str | None]


def translation_features(source: Sequence[str], target: Sequence[str], d: int,
                         seed: int = 0) -> TranslationFeatures:
    """Source tokens get ``embed_tokens``; a target token gets the embedding of its gloss, so
    "动" and "animal" share a vector; a target token without a gloss gets an unrelated one."""
    meaning = gloss(target)
    src = embed_tokens(list(source), d, seed)                                   # (n_s, d)
    keys = [m if m is not None else f"\x00zh:{tok}" for m, tok in zip(meaning, target)]
    tgt = embed_tokens(keys, d, seed)                                           # (n_t, d)
    return TranslationFeatures(src, tgt, meaning)


class CrossAttentionResult(NamedTuple):
    """output (n_t, d): one context vector per target token; weights (h, n_t, n_s);
    q (n_t, d) from the target, k and v (n_s, d) from the source (after the projections)."""

    output: torch.Tensor
    weights: torch.Tensor
    q: torch.Tensor
    k: torch.Tensor
    v: torch.Tensor
    meaning: list[str | None]


def decoder_cross_attention(source: Sequence[str], target: Sequence[str], d_model: int = 64,
                            num_heads: int = 1, seed: int = 0, trained: bool = True,
                            sharpness: float = 1.0) -> CrossAttentionResult:
    """Target tokens (queries) attend over source tokens (keys = values): MultiHeadAttention(q=target,
    k=v=source). ``trained``: identity projections on the glossary's shared space; else the module's
    seeded random initialisation (what a model starts from)."""
    if not source or not target:
        raise ValueError("need at least one source and one target token")
    feats = translation_features(source, target, d_model, seed)
    with seeded(seed):
        mha = MultiHeadAttention(d_model, num_heads).eval()
    if trained:
        identity_attention_(mha, sharpness)
    x_t, x_s = feats.target.unsqueeze(0), feats.source.unsqueeze(0)            # (1, n, d)
    with torch.no_grad():
        out, w = mha(x_t, x_s, x_s)                               # (1, n_t, d), (1, h, n_t, n_s)
        q, k, v = mha.W_query(x_t)[0], mha.W_key(x_s)[0], mha.W_value(x_s)[0]
    return CrossAttentionResult(out[0], w[0], q, k, v, feats.meaning)


def alignment(weights: torch.Tensor) -> torch.Tensor:
    """The source position each target row weighs most: (..., n_t, n_s) -> (..., n_t) long."""
    return weights.argmax(-1)


# ---------------------------------------------------------------------------------------------
# 2. the second tutorial's CrossModalAttention, the parts that break
# ---------------------------------------------------------------------------------------------


def tutorial_gate_error(n_text: int, d: int) -> str | None:
    """Run the tutorial's fusion line ``torch.cat([text_enhanced, visual_enhanced.mean(dim=1,
    keepdim=True)], dim=-1)`` on shapes (1, n_text, d) and (1, 1, d); the error text, or None.

    torch.cat needs every size equal except on the concatenated axis: it fails whenever
    n_text > 1 (``crossmodal.CrossModalAttention`` expands the summary to (1, n_text, d) first).
    """
    text_enhanced = torch.zeros(1, n_text, d)
    visual_summary = torch.zeros(1, 1, d)
    try:
        torch.cat([text_enhanced, visual_summary], dim=-1)
    except RuntimeError as err:
        return str(err).strip().splitlines()[0]
    return None


def tutorial_parameter_counts(visual_dim: int, text_dim: int, num_heads: int) -> tuple[int, int]:
    """(parameters of the tutorial's module, of the fixed ``CrossModalAttention``): the tutorial
    had ONE cross_attn for both directions, the fix has text_to_image and image_to_text."""
    fixed = CrossModalAttention(visual_dim, text_dim, num_heads)
    one_direction = sum(p.numel() for p in fixed.text_to_image.parameters())
    total = sum(p.numel() for p in fixed.parameters())
    return total - one_direction, total


# ---------------------------------------------------------------------------------------------
# 3. caption words -> scene region names
# ---------------------------------------------------------------------------------------------

ZH_SCENE_WORDS: dict[str, str] = {
    "红": "red", "蓝": "blue", "绿": "green", "黄": "yellow", "圆": "circle", "方": "square",
    "阳": "sun", "日": "sun", "天": "sky", "空": "sky", "草": "grass", "条": "stripes", "纹": "stripes",
    "背": "background", "景": "background",
}
_EN_FORMS = {"circles": "circle", "squares": "square", "stripe": "stripes", "striped": "stripes",
             "suns": "sun", "skies": "sky"}


def scene_word(token: str) -> str:
    """The region name a caption token refers to ("Red" -> "red", "圆" -> "circle", "circles" ->
    "circle"); any other token comes back lowercased (and will match no region)."""
    if token in ZH_SCENE_WORDS:
        return ZH_SCENE_WORDS[token]
    low = token.lower()
    return _EN_FORMS.get(low, low)


# ---------------------------------------------------------------------------------------------
# 4. path lengths: self-attention connects any two positions in one step
# ---------------------------------------------------------------------------------------------

KINDS = ("self_attention", "recurrent", "convolution", "restricted")


def layer_connections(n: int, kind: str, *, kernel: int = 3, neighbourhood: int = 2) -> torch.Tensor:
    """(n, n) bool: True where one step of ``kind`` (a layer; a time step for ``recurrent``) moves
    information from key j to position i."""
    dist = (torch.arange(n)[:, None] - torch.arange(n)[None, :]).abs()
    if kind == "self_attention":
        return torch.ones(n, n, dtype=torch.bool)
    if kind == "recurrent":
        return dist <= 1
    if kind == "convolution":
        if kernel < 3:
            raise ValueError(f"kernel must be >= 3 to reach a neighbour, got {kernel}")
        return dist <= (kernel - 1) // 2
    if kind == "restricted":
        if neighbourhood < 1:
            raise ValueError(f"neighbourhood must be >= 1, got {neighbourhood}")
        return dist <= neighbourhood
    raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")


def path_lengths(connections: torch.Tensor) -> torch.Tensor:
    """(n, n) long: the path length, the fewest steps after which position i has seen position j (0 on the diagonal);
    -1 where j never reaches i. Breadth-first by repeated boolean matrix products."""
    n = connections.size(0)
    step = connections.to(torch.float32)
    reach = torch.eye(n, dtype=torch.bool)
    lengths = torch.where(reach, 0, -1)
    for layers in range(1, n):
        reach = (reach.to(torch.float32) @ step.T > 0) | reach      # (R A^T)[i, j]: j reaches i in `layers`
        lengths = torch.where(reach & (lengths < 0), layers, lengths)
        if bool(reach.all()):
            break
    return lengths


class Table1Row(NamedTuple):
    kind: str
    ops_per_layer: int         # multiply-adds per layer at this n, d (the paper's complexity, constants 1)
    sequential: int            # operations that must run one after another inside a layer
    max_path: int              # longest shortest path, measured on the graph
    steps: int                 # path length between the two chosen positions, measured on the graph


def table1(n: int, d: int, i: int, j: int, *, kernel: int = 3, neighbourhood: int = 2) -> list[Table1Row]:
    """The Transformer paper's Table 1 evaluated at n, d (complexity: n²d, n d², k n d², r n d; sequential
    operations: 1, n, 1, 1) with path lengths measured on each layer type's connection graph."""
    ops = {"self_attention": n * n * d, "recurrent": n * d * d, "convolution": kernel * n * d * d,
           "restricted": neighbourhood * n * d}
    rows = []
    for kind in KINDS:
        lengths = path_lengths(layer_connections(n, kind, kernel=kernel, neighbourhood=neighbourhood))
        rows.append(Table1Row(kind, ops[kind], n if kind == "recurrent" else 1, int(lengths.max()),
                              int(lengths[i, j])))
    return rows


def closed_form_steps(distance: int, kind: str, *, kernel: int = 3, neighbourhood: int = 2) -> int:
    """Path length (steps) to cover ``distance`` positions: 1 (any distance > 0), distance, ⌈distance / ((k-1)/2)⌉,
    ⌈distance / r⌉ — the oracle of ``path_lengths``."""
    if distance == 0:
        return 0
    reach = {"self_attention": math.inf, "recurrent": 1, "convolution": (kernel - 1) // 2,
             "restricted": neighbourhood}[kind]
    return 1 if reach == math.inf else math.ceil(distance / reach)


# ---------------------------------------------------------------------------------------------
# what the page draws (numpy)
# ---------------------------------------------------------------------------------------------


class DecoderView(NamedTuple):
    """The decoder-over-encoder weights of head 1 (n_t, n_s) and what each target token means."""

    weights: np.ndarray
    meaning: list[str | None]


def decoder_view(source: Sequence[str], target: Sequence[str], d_model: int, seed: int,
                 trained: bool) -> DecoderView:
    r = decoder_cross_attention(source, target, d_model, 1, seed=seed, trained=trained)
    return DecoderView(r.weights[0].numpy(), list(r.meaning))


class SceneView(NamedTuple):
    """Caption words over the patches of a synthetic picture through ``CrossModalAttention``.

    image (H, W, 3); weights (n_w, n_p) averaged over heads; head_weights (h, n_w, n_p); gate (n_w, d);
    coverage (n_w, n_p): the share of each patch the word names; regions: the picture's words;
    visual_shape: (patches, patch features)."""

    image: np.ndarray
    weights: np.ndarray
    head_weights: np.ndarray
    gate: np.ndarray
    coverage: np.ndarray
    regions: list[str]
    visual_shape: tuple[int, int]


def scene_view(kind: str, words: Sequence[str], patch: int, heads: int, sharpness: float, seed: int, *,
               image_size: int, text_dim: int) -> SceneView:
    """The picture ``kind`` and the caption ``words`` through a CrossModalAttention aligned to it
    (``align_text_to_image_``: a stand-in for training); the global random state is left untouched."""
    scene = synthetic_scene(kind, image_size, seed)
    with seeded(seed):
        module = CrossModalAttention(patch * patch * 3, text_dim, heads).eval()
    align_text_to_image_(module, sharpness)
    inputs = grounded_features(module, scene, [scene_word(w) for w in words], patch)
    with torch.no_grad():
        out = module(inputs.visual, inputs.text)
    return SceneView(scene.image.numpy(), out.weights[0].mean(0).numpy(), out.weights[0].numpy(),
                     out.gate[0].numpy(), inputs.coverage.numpy(), sorted(scene.regions),
                     tuple(inputs.visual.shape[1:]))

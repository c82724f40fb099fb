"""Cross-modal attention: text tokens attend to image patches and back, then a gated fusion.

Source: the second tutorial's ``CrossModalAttention`` (section "跨模态注意力应用"), corrected;
the idea of patches as tokens is that of ViT (Dosovitskiy et al. 2021), and text-to-image
cross-attention that of e.g. ViLBERT / LXMERT (co-attention in both directions).

Also: small synthetic images drawn in code (no files, no downloads) and their patches.
Image tensors are (H, W, 3) floats in [0, 1]; patches are numbered row-major.
"""
from __future__ import annotations

import math
from typing import NamedTuple

import torch
from torch import nn

from .modules import MultiHeadAttention


class CrossModalOutput(NamedTuple):
    """output (b, n_text, d_text): the fused text features;
    weights (b, h, n_text, n_patches): text -> image attention (each word over the patches);
    image_to_text_weights (b, h, n_patches, n_text);
    gate (b, n_text, d_text) in [0, 1]: share of the text path per token and channel;
    text_enhanced (b, n_text, d_text), visual_enhanced (b, n_patches, d_text);
    visual_summary (b, 1, d_text): the (masked) mean of visual_enhanced that the gate mixes in."""

    output: torch.Tensor
    weights: torch.Tensor
    image_to_text_weights: torch.Tensor
    gate: torch.Tensor
    text_enhanced: torch.Tensor
    visual_enhanced: torch.Tensor
    visual_summary: torch.Tensor


def _key_mask(mask: torch.Tensor | None) -> torch.Tensor | None:
    # (b, n_k) True = real token -> (b, 1, 1, n_k) for (b, h, n_q, n_k) scores
    if mask is None:
        return None
    if mask.dtype != torch.bool or mask.dim() != 2:
        raise ValueError("masks here are boolean (batch, n) with True for real tokens/patches")
    return mask[:, None, None, :]


class CrossModalAttention(nn.Module):
    """Text <-> image co-attention with a gated fusion (second tutorial, fixed).

        V' = visual_proj(visual)                                  (b, n_p, d)
        text_enh   = norm1(text + drop(MHA_t2i(q=text, k=v=V')))   words look at patches
        visual_enh = norm2(V'   + drop(MHA_i2t(q=V',  k=v=text)))  patches look at words
        s = masked mean of visual_enh over real patches           (b, 1, d)
        g = sigmoid(W_g [text_enh ; s expanded to n_text] + b_g)  (b, n_text, d)
        output = g * text_enh + (1 - g) * s

    Fixes to the tutorial's code:
    1. It reused ONE ``cross_attn`` module for both directions, so text->image and image->text
       shared W_Q, W_K, W_V, W_O; here each direction has its own MultiHeadAttention.
    2. The gate concatenated text (b, n_t, d) with the mean visual vector (b, 1, d): torch.cat
       needs equal sizes except on the cat axis, so it fails whenever n_t > 1; the summary is now
       expanded to (b, n_t, d) (the fusion line then broadcasts as intended).
    3. The visual mean counted padded patches; it is a masked mean over real patches.
    4. The image->text weights were thrown away; both directions are returned, with the gate.
    5. Masks: the tutorial passed ``visual_mask`` straight through with ``mask == 0`` = hidden;
       here ``visual_mask`` / ``text_mask`` are (b, n) booleans, True for real patches / tokens,
       turned into key masks of shape (b, 1, 1, n). A text query never sees a masked patch.
    6. Dropout defaults to 0 (a demo in eval mode); the residual branches get it like the
       encoder layer's sublayers.
    """

    def __init__(self, visual_dim: int, text_dim: int, num_heads: int, dropout: float = 0.0):
        super().__init__()
        self.visual_dim, self.text_dim = visual_dim, text_dim
        self.visual_proj = nn.Linear(visual_dim, text_dim)          # project to a shared width
        self.text_to_image = MultiHeadAttention(text_dim, num_heads, dropout)
        self.image_to_text = MultiHeadAttention(text_dim, num_heads, dropout)
        self.norm1 = nn.LayerNorm(text_dim)
        self.norm2 = nn.LayerNorm(text_dim)
        self.dropout = nn.Dropout(dropout)
        self.gate = nn.Sequential(nn.Linear(2 * text_dim, text_dim), nn.Sigmoid())

    def forward(self, visual_features: torch.Tensor, text_features: torch.Tensor,
                visual_mask: torch.Tensor | None = None,
                text_mask: torch.Tensor | None = None) -> CrossModalOutput:
        """visual_features (b, n_p, visual_dim), text_features (b, n_t, text_dim)."""
        v = self.visual_proj(visual_features)                                      # (b, n_p, d)
        t2i, w_t2i = self.text_to_image(text_features, v, v, mask=_key_mask(visual_mask))
        text_enh = self.norm1(text_features + self.dropout(t2i))                   # (b, n_t, d)
        i2t, w_i2t = self.image_to_text(v, text_features, text_features, mask=_key_mask(text_mask))
        visual_enh = self.norm2(v + self.dropout(i2t))                             # (b, n_p, d)

        if visual_mask is None:
            summary = visual_enh.mean(dim=1, keepdim=True)                         # (b, 1, d)
        else:
            m = visual_mask.to(visual_enh.dtype).unsqueeze(-1)                     # (b, n_p, 1)
            summary = (visual_enh * m).sum(1, keepdim=True) / m.sum(1, keepdim=True).clamp_min(1)
        summary_t = summary.expand_as(text_enh)                                    # (b, n_t, d)
        g = self.gate(torch.cat([text_enh, summary_t], dim=-1))                    # (b, n_t, d)
        out = g * text_enh + (1 - g) * summary_t
        return CrossModalOutput(out, w_t2i, w_i2t, g, text_enh, visual_enh, summary)


# ---------------------------------------------------------------------------------------------
# synthetic images and patches
# ---------------------------------------------------------------------------------------------

IMAGE_KINDS = ("circle_square", "stripes", "sun_grass", "two_circles", "checker")

RED, BLUE, GREEN, YELLOW, SKY, WHITE = (
    (0.9, 0.1, 0.1), (0.1, 0.2, 0.9), (0.1, 0.7, 0.2), (1.0, 0.85, 0.1), (0.55, 0.75, 1.0), (1.0, 1.0, 1.0))


class Scene(NamedTuple):
    """image (H, W, 3) in [0, 1]; regions: word -> (H, W) boolean mask of the pixels it names
    (e.g. "red", "circle"), to compare a word's attention with where it should look."""

    image: torch.Tensor
    regions: dict[str, torch.Tensor]


def synthetic_scene(kind: str, size: int = 32, seed: int = 0) -> Scene:
    """A small picture drawn in code, with the regions its words refer to.

    kinds: "circle_square" (red circle left, blue square right, white background),
    "stripes" (horizontal red / blue stripes), "sun_grass" (yellow sun top-left, blue sky,
    green grass below), "two_circles" (red circle top-left, blue circle bottom-right),
    "checker" (red / blue 2 x 2 checkerboard). ``seed`` jitters positions by a few pixels and
    adds faint noise, reproducibly.
    """
    if kind not in IMAGE_KINDS:
        raise ValueError(f"kind must be one of {IMAGE_KINDS}, got {kind!r}")
    if size < 4:
        raise ValueError(f"size must be >= 4, got {size}")
    g = torch.Generator().manual_seed(seed)
    jit = max(1, size // 16)
    def jitter() -> float:
        return float(torch.randint(-jit, jit + 1, (1,), generator=g))
    yy, xx = torch.meshgrid(torch.arange(size, dtype=torch.float32) + 0.5,
                            torch.arange(size, dtype=torch.float32) + 0.5, indexing="ij")
    img = torch.ones(size, size, 3)
    regions: dict[str, torch.Tensor] = {}

    def paint(mask: torch.Tensor, colour, *words: str):
        img[mask] = torch.tensor(colour)
        for w in words:
            regions[w] = regions.get(w, torch.zeros(size, size, dtype=torch.bool)) | mask

    def disc(cy, cx, r):
        return (yy - cy) ** 2 + (xx - cx) ** 2 <= r ** 2

    s = size
    if kind == "circle_square":
        paint(disc(s / 2 + jitter(), s / 4 + jitter(), s / 6), RED, "red", "circle")
        cy, cx, h = s / 2 + jitter(), 3 * s / 4 + jitter(), s / 6
        paint(((yy - cy).abs() <= h) & ((xx - cx).abs() <= h), BLUE, "blue", "square")
        regions["background"] = ~(regions["red"] | regions["blue"])
    elif kind == "stripes":
        period = max(2, s // 4)
        red = ((yy + jitter()) // (period / 2)) % 2 == 0
        paint(red, RED, "red")
        paint(~red, BLUE, "blue")
        regions["stripes"] = torch.ones(s, s, dtype=torch.bool)
    elif kind == "sun_grass":
        ground = yy >= 2 * s / 3 + jitter()
        paint(~ground, SKY, "sky", "blue")
        paint(ground, GREEN, "grass", "green")
        paint(disc(s / 4 + jitter(), s / 4 + jitter(), s / 7), YELLOW, "sun", "yellow")
        regions["sky"] &= ~regions["sun"]
        regions["blue"] &= ~regions["sun"]
    elif kind == "two_circles":
        paint(disc(s / 4 + jitter(), s / 4 + jitter(), s / 6), RED, "red", "circle")
        paint(disc(3 * s / 4 + jitter(), 3 * s / 4 + jitter(), s / 6), BLUE, "blue", "circle")
        regions["background"] = ~regions["circle"]
    else:  # checker
        red = ((yy // (s / 2)) + (xx // (s / 2))) % 2 == 0
        paint(red, RED, "red")
        paint(~red, BLUE, "blue")
    img = (img + 0.03 * torch.randn(s, s, 3, generator=g)).clamp(0.0, 1.0)
    return Scene(img, regions)


def synthetic_image(kind: str, size: int = 32, seed: int = 0) -> torch.Tensor:
    """The (size, size, 3) image of ``synthetic_scene(kind, size, seed)``, floats in [0, 1]."""
    return synthetic_scene(kind, size, seed).image


def grid_shape(height: int, width: int, patch: int) -> tuple[int, int]:
    """(rows, cols) of patches; a partial patch at the bottom / right edge counts (it is padded)."""
    if patch < 1:
        raise ValueError(f"patch must be >= 1, got {patch}")
    return math.ceil(height / patch), math.ceil(width / patch)


def patch_grid(height: int, width: int, patch: int) -> torch.Tensor:
    """(n_patches, 2) long tensor: the (row, col) of patch i in row-major order."""
    rows, cols = grid_shape(height, width, patch)
    r, c = torch.meshgrid(torch.arange(rows), torch.arange(cols), indexing="ij")
    return torch.stack([r.reshape(-1), c.reshape(-1)], dim=1)


def image_to_patches(img: torch.Tensor, patch: int, pad_value: float = 0.0) -> torch.Tensor:
    """(..., H, W, C) -> (..., n_patches, patch * patch * C), patches row-major (ViT order).

    Each patch is flattened in (y, x, channel) order. Any H, W: the image is padded with
    ``pad_value`` at the bottom and right up to a multiple of ``patch`` (the padded pixels end
    up in the last row / column of patches; ``patches_to_image`` crops them off again).
    """
    *lead, h, w, c = img.shape
    rows, cols = grid_shape(h, w, patch)
    ph, pw = rows * patch - h, cols * patch - w
    if ph or pw:
        img = torch.nn.functional.pad(img, (0, 0, 0, pw, 0, ph), value=pad_value)
    x = img.reshape(*lead, rows, patch, cols, patch, c)
    x = x.movedim(-3, -4)                                   # (..., rows, cols, patch, patch, c)
    return x.reshape(*lead, rows * cols, patch * patch * c)


def patches_to_image(patches: torch.Tensor, height: int, width: int, patch: int,
                     channels: int = 3) -> torch.Tensor:
    """Inverse of ``image_to_patches``: (..., n_patches, patch*patch*C) -> (..., H, W, C)."""
    rows, cols = grid_shape(height, width, patch)
    *lead, n, _ = patches.shape
    if n != rows * cols:
        raise ValueError(f"expected {rows * cols} patches for {height}x{width} with patch {patch}, got {n}")
    x = patches.reshape(*lead, rows, cols, patch, patch, channels).movedim(-4, -3)
    x = x.reshape(*lead, rows * patch, cols * patch, channels)
    return x[..., :height, :width, :]


def patch_coverage(region: torch.Tensor, patch: int) -> torch.Tensor:
    """Fraction of each patch covered by a boolean (H, W) region -> (n_patches,), row-major
    (padding counts as uncovered). Where a word of the scene "should" look."""
    cov = image_to_patches(region.to(torch.float32).unsqueeze(-1), patch)   # (n_patches, p*p)
    return cov.mean(-1)


def patch_weights_to_image(weights: torch.Tensor, height: int, width: int, patch: int) -> torch.Tensor:
    """One word's weights over the patches (n_patches,) -> an (H, W) map (each patch's pixels
    take its weight), to lay the attention over the picture."""
    rows, cols = grid_shape(height, width, patch)
    grid = weights.reshape(rows, cols)
    return grid.repeat_interleave(patch, 0).repeat_interleave(patch, 1)[:height, :width]


# ---------------------------------------------------------------------------------------------
# a "pretend-pretrained" setting, so an untrained module shows meaningful word -> patch attention
# ---------------------------------------------------------------------------------------------


def identity_attention_(mha: MultiHeadAttention, sharpness: float = 1.0) -> MultiHeadAttention:
    """W_Q = sharpness * I, W_K = W_V = W_O = I, zero biases, in place: per head the score is
    sharpness * <q_h, k_h> / sqrt(d_k) on the raw vectors (the "trained" stand-in of the demos)."""
    eye = torch.eye(mha.d_model)
    with torch.no_grad():
        for lin, scale in ((mha.W_query, sharpness), (mha.W_key, 1.0), (mha.W_value, 1.0),
                           (mha.W_output, 1.0)):
            lin.weight.copy_(eye * scale)
            if lin.bias is not None:
                lin.bias.zero_()
    return mha


def align_text_to_image_(module: CrossModalAttention, sharpness: float = 10.0) -> CrossModalAttention:
    """Set the text->image attention to score(t, v) = sharpness * <t, v> / sqrt(d_k) per head
    (``identity_attention_`` on ``module.text_to_image``), in place.

    A stand-in for training (as in CLIP-like models where words and patches share one space):
    with ``grounded_features`` a word's query equals the mean feature of the patches it names,
    so it attends to them. Random weights would give arbitrary pictures.
    """
    identity_attention_(module.text_to_image, sharpness)
    return module


class GroundedInputs(NamedTuple):
    """visual (1, n_patches, patch*patch*3): patches minus their mean patch;
    text (1, n_words, text_dim): each word's grounded feature; coverage (n_words, n_patches):
    the fraction of each patch the word names (all zeros for a word absent from the scene)."""

    visual: torch.Tensor
    text: torch.Tensor
    coverage: torch.Tensor


def grounded_features(module: CrossModalAttention, scene: Scene, words: list[str], patch: int) -> GroundedInputs:
    """Inputs for a demo in which words are grounded in the picture.

    Visual features are the centred patches (centring keeps the background from dominating the
    dot products); a word's feature is the coverage-weighted mean of ``module.visual_proj`` of the
    patches its region covers, zero for a word the scene does not contain (a zero query scores
    every patch equally: uniform attention). ``module.visual_dim`` must be patch * patch * 3.
    """
    patches = image_to_patches(scene.image, patch)                              # (n_p, p*p*3)
    if patches.size(-1) != module.visual_dim:
        raise ValueError(f"module.visual_dim is {module.visual_dim}, patches have {patches.size(-1)} values")
    visual = patches - patches.mean(0, keepdim=True)
    cov = torch.stack([patch_coverage(scene.regions[w], patch) if w in scene.regions
                       else torch.zeros(patches.size(0)) for w in words]) if words else \
        torch.zeros(0, patches.size(0))
    with torch.no_grad():
        v = module.visual_proj(visual)                                          # (n_p, d)
    text = (cov @ v) / cov.sum(1, keepdim=True).clamp_min(1e-12)                # (n_w, d)
    return GroundedInputs(visual[None], text[None], cov)

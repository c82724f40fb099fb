"""Cross-modal attention (second tutorial, fixed), synthetic images and patching."""
import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from attention_core.crossmodal import (
    IMAGE_KINDS,
    CrossModalAttention,
    align_text_to_image_,
    grid_shape,
    grounded_features,
    image_to_patches,
    patch_coverage,
    patch_grid,
    patch_weights_to_image,
    patches_to_image,
    synthetic_image,
    synthetic_scene,
)
from attention_core.functional import scaled_dot_product_attention


@pytest.mark.parametrize("kind", IMAGE_KINDS)
def test_synthetic_images(kind):
    img = synthetic_image(kind, size=24, seed=3)
    assert img.shape == (24, 24, 3) and img.dtype == torch.float32
    assert img.min() >= 0 and img.max() <= 1
    torch.testing.assert_close(img, synthetic_image(kind, size=24, seed=3))      # reproducible
    scene = synthetic_scene(kind, size=24, seed=3)
    assert scene.regions and all(m.shape == (24, 24) and m.dtype == torch.bool for m in scene.regions.values())
    assert all(m.any() for m in scene.regions.values())
    with pytest.raises(ValueError):
        synthetic_image("unicorn")


def test_circle_square_layout():
    scene = synthetic_scene("circle_square", size=32, seed=0)
    img, reg = scene.image, scene.regions
    xs = torch.arange(32).float()
    red_x = (reg["red"].float().sum(0) * xs).sum() / reg["red"].sum()
    blue_x = (reg["blue"].float().sum(0) * xs).sum() / reg["blue"].sum()
    assert red_x < 16 < blue_x                                                   # red left, blue right
    assert (img[reg["red"]][:, 0] > 0.7).all() and (img[reg["blue"]][:, 2] > 0.7).all()


def _patches_oracle(img, patch):
    # direct loops over the patch grid, row-major, each patch flattened (y, x, c)
    h, w, c = img.shape
    rows, cols = math.ceil(h / patch), math.ceil(w / patch)
    padded = torch.zeros(rows * patch, cols * patch, c)
    padded[:h, :w] = img
    return torch.stack([padded[r * patch:(r + 1) * patch, q * patch:(q + 1) * patch].reshape(-1)
                        for r in range(rows) for q in range(cols)])


@settings(max_examples=30, deadline=None)
@given(h=st.integers(1, 20), w=st.integers(1, 20), patch=st.integers(1, 7), seed=st.integers(0, 1000))
def test_patching_matches_loops_and_round_trips(h, w, patch, seed):
    img = torch.rand(h, w, 3, generator=torch.Generator().manual_seed(seed))
    p = image_to_patches(img, patch)
    rows, cols = grid_shape(h, w, patch)
    assert p.shape == (rows * cols, patch * patch * 3)
    torch.testing.assert_close(p, _patches_oracle(img, patch), atol=0, rtol=0)
    torch.testing.assert_close(patches_to_image(p, h, w, patch), img, atol=0, rtol=0)
    grid = patch_grid(h, w, patch)
    assert grid.shape == (rows * cols, 2)
    # row-major: patch i sits at (i // cols, i % cols)
    i = torch.arange(rows * cols)
    assert torch.equal(grid[:, 0], i // cols) and torch.equal(grid[:, 1], i % cols)


def test_patching_batch_and_coverage():
    imgs = torch.rand(2, 16, 16, 3)
    p = image_to_patches(imgs, 8)
    assert p.shape == (2, 4, 192)
    torch.testing.assert_close(p[1], image_to_patches(imgs[1], 8))
    region = torch.zeros(16, 16, dtype=torch.bool)
    region[:8, 8:] = True                    # exactly the top-right patch
    region[8:12, :8] = True                  # half of the bottom-left patch
    torch.testing.assert_close(patch_coverage(region, 8), torch.tensor([0.0, 1.0, 0.5, 0.0]))
    heat = patch_weights_to_image(torch.tensor([0.1, 0.2, 0.3, 0.4]), 15, 15, 8)
    assert heat.shape == (15, 15) and heat[0, 0] == 0.1 and heat[0, 14] == 0.2 and heat[14, 0] == 0.3
    with pytest.raises(ValueError):
        patches_to_image(p[0, :3], 16, 16, 8)


def _module(seed=0, heads=4):
    torch.manual_seed(seed)
    return CrossModalAttention(visual_dim=12, text_dim=16, num_heads=heads).eval()


def test_shapes_gate_and_row_sums():
    m = _module()
    vis, txt = torch.randn(2, 9, 12), torch.randn(2, 5, 16)       # n_text > 1: the seed's gate crashed
    o = m(vis, txt)
    assert o.output.shape == (2, 5, 16)
    assert o.weights.shape == (2, 4, 5, 9)
    assert o.image_to_text_weights.shape == (2, 4, 9, 5)
    assert o.gate.shape == (2, 5, 16) and o.visual_summary.shape == (2, 1, 16)
    assert (o.gate >= 0).all() and (o.gate <= 1).all()
    torch.testing.assert_close(o.weights.sum(-1), torch.ones(2, 4, 5))
    torch.testing.assert_close(o.image_to_text_weights.sum(-1), torch.ones(2, 4, 9))
    # the fusion formula, recomputed
    s = o.visual_enhanced.mean(1, keepdim=True)
    torch.testing.assert_close(o.visual_summary, s)
    torch.testing.assert_close(o.output, o.gate * o.text_enhanced + (1 - o.gate) * s)


def test_two_directions_have_separate_parameters():
    m = _module()
    assert m.text_to_image is not m.image_to_text
    assert not torch.equal(m.text_to_image.W_query.weight, m.image_to_text.W_query.weight)


def test_text_to_image_weights_match_reference_attention():
    m = _module(heads=2)
    vis, txt = torch.randn(1, 6, 12), torch.randn(1, 3, 16)
    o = m(vis, txt)
    a = m.text_to_image
    v = m.visual_proj(vis)
    _, w = scaled_dot_product_attention(a.split_heads(a.W_query(txt)), a.split_heads(a.W_key(v)),
                                        a.split_heads(a.W_value(v)))
    torch.testing.assert_close(o.weights, w)


def test_visual_mask():
    m = _module()
    vis, txt = torch.randn(2, 7, 12), torch.randn(2, 4, 16)
    vmask = torch.tensor([[True] * 7, [True] * 4 + [False] * 3])
    o = m(vis, txt, visual_mask=vmask)
    assert (o.weights[1, ..., 4:] == 0).all()
    torch.testing.assert_close(o.weights.sum(-1), torch.ones(2, 4, 4))
    # masked patches change nothing: replace them with garbage
    vis2 = vis.clone()
    vis2[1, 4:] = 1e3
    o2 = m(vis2, txt, visual_mask=vmask)
    torch.testing.assert_close(o2.output, o.output)
    torch.testing.assert_close(o2.weights, o.weights)
    # and the second sample equals running it alone on its real patches
    alone = m(vis[1:, :4], txt[1:])
    torch.testing.assert_close(o.output[1:], alone.output, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(o.weights[1:, ..., :4], alone.weights, atol=1e-5, rtol=1e-5)


def test_text_mask():
    m = _module()
    vis, txt = torch.randn(1, 5, 12), torch.randn(1, 4, 16)
    o = m(vis, txt, text_mask=torch.tensor([[True, True, False, False]]))
    assert (o.image_to_text_weights[..., 2:] == 0).all()
    with pytest.raises(ValueError):
        m(vis, txt, text_mask=torch.ones(1, 4))


def test_grounded_demo_attends_to_named_region():
    patch = 4
    scene = synthetic_scene("circle_square", size=32, seed=0)
    torch.manual_seed(0)
    m = align_text_to_image_(CrossModalAttention(patch * patch * 3, 32, 1).eval(), sharpness=10.0)
    words = ["red", "blue", "background", "giraffe"]
    inp = grounded_features(m, scene, words, patch)
    o = m(inp.visual, inp.text)
    w = o.weights[0, 0]                                                   # (n_words, n_patches)
    for i in range(3):
        inside = inp.coverage[i] > 0.5
        assert w[i, inside].sum() > 0.75, words[i]                       # mass on its own region
    torch.testing.assert_close(w[3], torch.full_like(w[3], 1 / w.size(1)))  # absent word: uniform

"""attention_core.labs.cross_attention against independent oracles (torch SDPA, hand-built shapes)."""
import math

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from attention_core.crossmodal import CrossModalAttention, synthetic_scene
from attention_core.labs.cross_attention import (
    GLOSSARY,
    ZH_SCENE_WORDS,
    alignment,
    decoder_cross_attention,
    gloss,
    identity_attention_,
    scene_word,
    translation_features,
    tutorial_gate_error,
    tutorial_parameter_counts,
)
from attention_core.modules import MultiHeadAttention
from attention_core.text import embed_tokens, tokenize

SRC = tokenize("The animal didn't cross the street because it was too tired.")
TGT = tokenize("这只动物没有过马路，因为它太累了。")


def test_gloss_and_shared_space():
    g = gloss(TGT)
    assert g[:4] == ["the", None, "animal", "animal"] and g[-1] == "."
    assert gloss(["Cat", "😀", "的"]) == ["cat", None, None]
    feats = translation_features(SRC, TGT, 16, seed=2)
    torch.testing.assert_close(feats.target[2], embed_tokens(["animal"], 16, 2)[0])   # 动 = animal
    torch.testing.assert_close(feats.source, embed_tokens(SRC, 16, 2))
    # a target token without a gloss matches no source word
    assert all(not torch.equal(feats.target[1], s) for s in feats.source)
    assert all(isinstance(v, str) and v == v.lower() for v in GLOSSARY.values())


@pytest.mark.parametrize("trained", [True, False])
@pytest.mark.parametrize("heads", [1, 4])
def test_weights_match_torch_sdpa(trained, heads):
    d = 32
    r = decoder_cross_attention(SRC, TGT, d, heads, seed=1, trained=trained)
    assert r.weights.shape == (heads, len(TGT), len(SRC)) and r.output.shape == (len(TGT), d)
    assert r.q.shape == (len(TGT), d) and r.k.shape == r.v.shape == (len(SRC), d)
    # oracle: torch's SDPA on the projected q, k, v split into heads, then W_O
    split = lambda x: x.view(x.size(0), heads, d // heads).transpose(0, 1)      # noqa: E731
    q, k, v = split(r.q), split(r.k), split(r.v)
    w_ref = F.softmax(q @ k.transpose(-2, -1) / math.sqrt(d // heads), dim=-1)
    torch.testing.assert_close(r.weights, w_ref, atol=1e-5, rtol=1e-5)
    heads_out = F.scaled_dot_product_attention(q, k, v)                           # (h, n_t, d_k)
    torch.testing.assert_close(r.weights.sum(-1), torch.ones(heads, len(TGT)))
    if trained:   # W_O = I: the output is the concatenation of the heads
        concat = heads_out.transpose(0, 1).reshape(len(TGT), d)
        torch.testing.assert_close(r.output, concat, atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(r.q, translation_features(SRC, TGT, d, 1).target)


def test_trained_stand_in_aligns_translations():
    r = decoder_cross_attention(SRC, TGT, 64, 1, seed=0)
    w = r.weights[0]
    best = [SRC[i].lower() for i in alignment(w).tolist()]
    present = {tok.lower() for tok in SRC}
    for j, meaning in enumerate(r.meaning):
        if meaning in present and meaning != "the":
            assert best[j] == meaning, (TGT[j], best[j])
            assert float(w[j].max()) > 0.9
    # 这 -> "the": two identical source words (The, the) share the weight exactly
    the = [i for i, tok in enumerate(SRC) if tok.lower() == "the"]
    assert abs(float(w[0, the[0]] - w[0, the[1]])) < 1e-6 and float(w[0, the].sum()) > 0.9
    # untrained: no such alignment, flatter rows
    flat = decoder_cross_attention(SRC, TGT, 64, 1, seed=0, trained=False).weights[0]
    assert float(flat.max(-1).values.mean()) < float(w.max(-1).values.mean()) - 0.3


@settings(max_examples=20, deadline=None)
@given(perm_seed=st.integers(0, 1000))
def test_permuting_the_source_permutes_the_columns(perm_seed):
    # cross-attention without positions: shuffle the source, the weight columns shuffle, outputs stay
    perm = torch.randperm(len(SRC), generator=torch.Generator().manual_seed(perm_seed))
    a = decoder_cross_attention(SRC, TGT, 32, 2, seed=3, trained=False)
    b = decoder_cross_attention([SRC[i] for i in perm], TGT, 32, 2, seed=3, trained=False)
    torch.testing.assert_close(b.weights, a.weights[..., perm], atol=1e-6, rtol=0)
    torch.testing.assert_close(b.output, a.output, atol=1e-5, rtol=1e-5)


def test_identity_attention_and_errors():
    m = identity_attention_(MultiHeadAttention(8, 2), sharpness=3.0)
    x = torch.randn(1, 4, 8)
    torch.testing.assert_close(m.W_query(x), 3 * x)
    torch.testing.assert_close(m.W_output(x), x)
    with pytest.raises(ValueError):
        decoder_cross_attention([], TGT)
    with pytest.raises(ValueError):
        decoder_cross_attention(SRC, TGT, 30, 4)                                 # heads do not divide


def test_tutorial_gate_error_and_the_fix():
    msg = tutorial_gate_error(7, 32)
    assert msg and "7" in msg
    assert tutorial_gate_error(1, 32) is None                                    # one word: no error
    # the fixed module runs with 7 words and gives a (1, 7, d) gate in [0, 1]
    m = CrossModalAttention(12, 32, 4)
    with torch.no_grad():
        out = m(torch.randn(1, 5, 12), torch.randn(1, 7, 32))
    assert out.gate.shape == (1, 7, 32) and 0 <= float(out.gate.min()) and float(out.gate.max()) <= 1


def test_parameter_counts():
    tutorial, fixed = tutorial_parameter_counts(48, 32, 4)
    mha = 4 * (32 * 32 + 32)
    assert fixed - tutorial == mha
    proj, norms, gate = 48 * 32 + 32, 2 * 2 * 32, 64 * 32 + 32
    assert tutorial == proj + mha + norms + gate


def test_scene_words():
    assert scene_word("Red") == "red" and scene_word("圆") == "circle" and scene_word("circles") == "circle"
    assert scene_word("giraffe") == "giraffe" and scene_word("的") == "的"
    regions = set()
    for kind in ("circle_square", "stripes", "sun_grass", "two_circles", "checker"):
        regions |= set(synthetic_scene(kind, 16).regions)
    assert set(ZH_SCENE_WORDS.values()) <= regions                             # every mapped word exists

"""Encoder layer / encoder: oracles against torch.nn.TransformerEncoderLayer and invariants;
rotary embedding (attention_core.positional): complex-multiplication oracle, relative-offset property."""
import math

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn

from attention_core.masks import causal_mask, padding_mask
from attention_core.modules import HeadDivisibilityError
from attention_core.positional import (
    LearnedPositionalEmbedding,
    apply_rotary,
    learned_positional_embedding,
    rotary_embedding,
    rotary_frequencies,
    rotary_matrix,
    sinusoidal_encoding,
)
from attention_core.transformer import (
    EncoderOutput,
    PositionWiseFFN,
    TransformerEncoder,
    TransformerEncoderLayer,
)

D, H, FF = 16, 4, 32


def _kpm():
    # torch convention: True = padding (ignored)
    return torch.tensor([[False] * 5, [False] * 3 + [True] * 2, [False] * 4 + [True]])


@pytest.mark.parametrize("batch_first", [True, False])
@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("activation", ["relu", "gelu"])
@pytest.mark.parametrize("use_mask", [False, True])
def test_layer_matches_torch(batch_first, norm_first, activation, use_mask):
    torch.manual_seed(1)
    ref = nn.TransformerEncoderLayer(D, H, FF, dropout=0.1, activation=activation,
                                     batch_first=batch_first, norm_first=norm_first).eval()
    mine = TransformerEncoderLayer.from_torch(ref)
    assert not mine.training and mine.norm_first == norm_first
    x = torch.randn(3, 5, D)
    kpm = _kpm() if use_mask else None
    with torch.no_grad():
        r = ref(x if batch_first else x.transpose(0, 1), src_key_padding_mask=kpm)
        r = r if batch_first else r.transpose(0, 1)
        out, w = mine(x, mask=None if kpm is None else ~kpm[:, None, None, :])
    torch.testing.assert_close(out, r, atol=1e-5, rtol=1e-5)
    assert w.shape == (3, H, 5, 5)
    torch.testing.assert_close(w.sum(-1), torch.ones(3, H, 5))
    if use_mask:
        assert (w.masked_select(kpm[:, None, None, :].expand_as(w)) == 0).all()


def test_layer_matches_torch_with_causal_src_mask_and_grad():
    # with grad enabled torch takes its slow (Python) path: a second, independent route
    torch.manual_seed(2)
    ref = nn.TransformerEncoderLayer(D, H, FF, dropout=0.0, batch_first=True, norm_first=True)
    mine = TransformerEncoderLayer.from_torch(ref)
    x = torch.randn(2, 6, D)
    torch_mask = ~causal_mask(6)                  # torch: True = NOT allowed
    r = ref(x, src_mask=torch_mask)
    out, _ = mine(x, mask=causal_mask(6))
    torch.testing.assert_close(out, r, atol=1e-5, rtol=1e-5)


def test_from_torch_rejects_tanh_gelu():
    ref = nn.TransformerEncoderLayer(D, H, FF, activation=nn.GELU(approximate="tanh"), batch_first=True)
    with pytest.raises(ValueError):
        TransformerEncoderLayer.from_torch(ref)


def test_ffn_formula():
    torch.manual_seed(3)
    for act, fn in (("relu", F.relu), ("gelu", lambda t: 0.5 * t * (1 + torch.erf(t / math.sqrt(2))))):
        ffn = PositionWiseFFN(D, FF, activation=act)
        x = torch.randn(2, 4, D)
        expect = fn(x @ ffn.linear1.weight.T + ffn.linear1.bias) @ ffn.linear2.weight.T + ffn.linear2.bias
        torch.testing.assert_close(ffn(x), expect, atol=1e-5, rtol=1e-5)
    with pytest.raises(ValueError):
        PositionWiseFFN(D, FF, activation="swish")


@pytest.mark.parametrize("norm_first", [False, True])
def test_trace_steps_are_consistent(norm_first):
    torch.manual_seed(4)
    layer = TransformerEncoderLayer(D, H, FF, norm_first=norm_first, activation="gelu")
    x = torch.randn(2, 5, D)
    t = layer.forward_trace(x)
    s = t.steps
    expected_order = (["input", "attention", "residual1", "norm1", "ffn_hidden", "ffn_output", "residual2",
                       "norm2", "output"] if not norm_first else
                      ["input", "norm1", "attention", "residual1", "norm2", "ffn_hidden", "ffn_output",
                       "residual2", "output"])
    assert t.names() == expected_order
    out, w = layer(x)
    torch.testing.assert_close(t.output, out)
    torch.testing.assert_close(t.weights, w)
    torch.testing.assert_close(s["residual1"], x + s["attention"])
    assert s["ffn_hidden"].shape == (2, 5, FF)
    ln = nn.functional.layer_norm
    if norm_first:
        torch.testing.assert_close(s["norm1"], ln(x, (D,), layer.norm1.weight, layer.norm1.bias))
        torch.testing.assert_close(s["attention"], layer.self_attn(s["norm1"])[0])
        torch.testing.assert_close(s["residual2"], s["residual1"] + s["ffn_output"])
        torch.testing.assert_close(s["ffn_output"], layer.ffn(s["norm2"]))
    else:
        torch.testing.assert_close(s["attention"], layer.self_attn(x)[0])
        torch.testing.assert_close(s["residual2"], s["norm1"] + s["ffn_output"])
        torch.testing.assert_close(s["ffn_output"], layer.ffn(s["norm1"]))
        # post-LN output is normalised: per-position mean 0, variance 1 (default affine params)
        torch.testing.assert_close(out.mean(-1), torch.zeros(2, 5), atol=1e-5, rtol=0)


def test_dropout_on_weights_train_vs_eval():
    torch.manual_seed(5)
    layer = TransformerEncoderLayer(D, H, FF, dropout=0.5)
    x = torch.randn(2, 8, D)
    layer.train()
    _, w = layer(x)
    rows = w.sum(-1)
    assert not torch.allclose(rows, torch.ones_like(rows))
    assert (w == 0).any()                               # dropped entries
    layer.eval()
    _, w = layer(x)
    torch.testing.assert_close(w.sum(-1), torch.ones(2, H, 8))


def test_head_divisibility():
    with pytest.raises(HeadDivisibilityError):
        TransformerEncoderLayer(10, 3, 16)


def _torch_stack(num_layers, norm_first, activation):
    return [nn.TransformerEncoderLayer(D, H, FF, dropout=0.0, activation=activation, batch_first=True,
                                       norm_first=norm_first).eval() for _ in range(num_layers)]


@pytest.mark.parametrize("norm_first", [False, True])
def test_encoder_matches_composition_of_torch_layers(norm_first):
    torch.manual_seed(6)
    enc = TransformerEncoder(50, d_model=D, num_layers=3, num_heads=H, d_ff=FF, norm_first=norm_first,
                             activation="gelu").eval()
    ref_layers = _torch_stack(3, norm_first, "gelu")
    enc.layers = nn.ModuleList([TransformerEncoderLayer.from_torch(r) for r in ref_layers])
    tokens = torch.randint(0, 50, (2, 7))
    lengths = torch.tensor([7, 4])
    with torch.no_grad():
        out = enc(tokens, mask=padding_mask(lengths, 7))
        x = enc.embedding(tokens) * math.sqrt(D) + sinusoidal_encoding(7, D)
        kpm = torch.arange(7)[None, :] >= lengths[:, None]
        for r in ref_layers:
            x = r(x, src_key_padding_mask=kpm)
        if norm_first:
            x = enc.final_norm(x)
    assert isinstance(out, EncoderOutput)
    assert len(out.weights) == 3 and all(w.shape == (2, H, 7, 7) for w in out.weights)
    # torch's fast path zeroes padded query rows; compare the real positions
    torch.testing.assert_close(out.output[0], x[0], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(out.output[1, :4], x[1, :4], atol=1e-5, rtol=1e-5)
    assert (enc.final_norm is not None) == norm_first


def test_forward_embeddings_and_trace_agree():
    torch.manual_seed(7)
    enc = TransformerEncoder(30, d_model=D, num_layers=2, num_heads=H, d_ff=FF, norm_first=True).eval()
    tokens = torch.randint(0, 30, (1, 6))
    a = enc(tokens)
    b = enc.forward_embeddings(enc.embed(tokens))
    torch.testing.assert_close(a.output, b.output)
    tr = enc.trace(tokens)
    torch.testing.assert_close(tr.output, a.output)
    assert len(tr.layers) == 2
    torch.testing.assert_close(tr.layers[1].weights, a.weights[1])
    torch.testing.assert_close(tr.layers[1]["input"], tr.layers[0].output)


def test_positional_none_is_permutation_equivariant_and_sinusoidal_is_not():
    torch.manual_seed(8)
    x = torch.randn(1, 6, D)
    perm = torch.tensor([3, 0, 5, 1, 4, 2])
    for positional, equivariant in (("none", True), ("sinusoidal", False), ("learned", False)):
        torch.manual_seed(9)
        enc = TransformerEncoder(10, d_model=D, num_layers=2, num_heads=H, d_ff=FF,
                                 positional=positional).eval()
        out = enc.forward_embeddings(x).output
        out_p = enc.forward_embeddings(x[:, perm]).output
        assert torch.allclose(out_p, out[:, perm], atol=1e-5) == equivariant, positional


def test_learned_positional_embedding():
    torch.manual_seed(10)
    pe = learned_positional_embedding(8, D)
    assert isinstance(pe, LearnedPositionalEmbedding)
    assert pe(5).shape == (5, D) and pe.weight.requires_grad
    with pytest.raises(ValueError):
        pe(9)
    enc = TransformerEncoder(10, d_model=D, num_heads=H, d_ff=FF, positional="learned", max_len=8)
    torch.testing.assert_close(enc.positional_table(4), enc.pos_embedding.weight[:4])
    with pytest.raises(ValueError):
        enc(torch.zeros(1, 9, dtype=torch.long))
    with pytest.raises(ValueError):
        TransformerEncoder(10, positional="rotary")


def test_encoder_train_mode_weights_show_dropout():
    torch.manual_seed(11)
    enc = TransformerEncoder(20, d_model=D, num_heads=H, d_ff=FF, dropout=0.3).train()
    w = enc(torch.randint(0, 20, (2, 9))).weights[0]
    assert not torch.allclose(w.sum(-1), torch.ones(2, H, 9))
    enc.eval()
    w = enc(torch.randint(0, 20, (2, 9))).weights[0]
    torch.testing.assert_close(w.sum(-1), torch.ones(2, H, 9))


# ---- rotary position embedding (RoFormer) ----
def _complex_oracle(x, positions, base=10000.0):
    # RoFormer's complex form: pair (x_2i, x_2i+1) as x_2i + i x_2i+1, multiply by e^{i m theta_i}
    x64 = x.to(torch.float64)
    d = x.shape[-1]
    theta = torch.tensor([base ** (-2 * i / d) for i in range(d // 2)], dtype=torch.float64)
    z = torch.complex(x64[..., 0::2], x64[..., 1::2])
    rot = torch.polar(torch.ones_like(theta), positions.to(torch.float64)[:, None] * theta)
    out = z * rot
    return torch.stack((out.real, out.imag), dim=-1).flatten(-2).to(x.dtype)


def test_matches_complex_oracle_and_matrix():
    torch.manual_seed(0)
    x = torch.randn(2, 3, 7, 8)
    pos = torch.arange(7)
    torch.testing.assert_close(rotary_embedding(x), _complex_oracle(x, pos), atol=1e-5, rtol=1e-5)
    # the explicit block-diagonal rotation matrix gives the same vector
    m = 5
    expect = rotary_matrix(m, 8) @ x[0, 0, m].to(torch.float64)
    torch.testing.assert_close(rotary_embedding(x)[0, 0, m].to(torch.float64), expect, atol=1e-5, rtol=1e-5)


def test_position_zero_is_identity_and_norms_preserved():
    torch.manual_seed(1)
    x = torch.randn(4, 6, 16)
    r = rotary_embedding(x)
    torch.testing.assert_close(r[:, 0], x[:, 0])
    torch.testing.assert_close(r.norm(dim=-1), x.norm(dim=-1), atol=1e-5, rtol=1e-5)


@settings(max_examples=40, deadline=None)
@given(m=st.integers(0, 200), n=st.integers(0, 200), shift=st.integers(-50, 500),
       half_d=st.integers(1, 16), seed=st.integers(0, 2**16))
def test_score_depends_only_on_offset(m, n, shift, half_d, seed):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(1, 2 * half_d, generator=g, dtype=torch.float64)
    k = torch.randn(1, 2 * half_d, generator=g, dtype=torch.float64)
    def score(pm, pn):
        qr, kr = apply_rotary(q, k, torch.tensor([pm]), k_positions=torch.tensor([pn]))
        return (qr * kr).sum()
    torch.testing.assert_close(score(m, n), score(m + shift, n + shift), atol=1e-9, rtol=1e-9)
    # and <R(m)q, R(n)k> = <q, R(n-m)k>
    torch.testing.assert_close(score(m, n), score(0, n - m), atol=1e-9, rtol=1e-9)


def test_float32_shift_invariance_of_score_matrix():
    torch.manual_seed(2)
    q, k = torch.randn(10, 32), torch.randn(10, 32)
    pos = torch.arange(10)
    qa, ka = apply_rotary(q, k, pos)
    qb, kb = apply_rotary(q, k, pos + 37)
    torch.testing.assert_close(qa @ ka.T, qb @ kb.T, atol=1e-4, rtol=1e-5)


def test_rejects_odd_dimension():
    assert rotary_frequencies(4).tolist() == [1.0, 0.01]
    with pytest.raises(ValueError):
        rotary_embedding(torch.randn(3, 5))

"""attention_core.labs.encoder: oracles for the encoder page's experiments."""
import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn

from attention_core.labs.encoder import (
    TutorialEncoderLayer,
    attention_dropout,
    double_residual_effect,
    encoder_for,
    final_layernorm_gap,
    residual_stream_rms,
    rms,
)
from attention_core.modules import MultiHeadAttention
from attention_core.transformer import TransformerEncoderLayer

D, H = 16, 4


def test_rms_matches_numpy():
    x = torch.randn(3, 5, 7, dtype=torch.float64)
    a = x.numpy()
    assert abs(float(rms(x)) - float((a ** 2).mean() ** 0.5)) < 1e-12
    torch.testing.assert_close(rms(x, -1), torch.from_numpy((a ** 2).mean(-1) ** 0.5))


def test_variants_share_weights_and_leave_global_rng_alone():
    state = torch.random.get_rng_state()
    post = encoder_for("post", D, H, 3, "gelu", seed=7, max_len=32)
    pre = encoder_for("pre", D, H, 3, "gelu", seed=7, max_len=32)
    assert torch.equal(state, torch.random.get_rng_state())
    sp, sq = post.state_dict(), pre.state_dict()
    assert set(sq) - set(sp) == {"final_norm.weight", "final_norm.bias"}
    for name, value in sp.items():
        assert torch.equal(value, sq[name]), name
    other = encoder_for("post", D, H, 3, "gelu", seed=8, max_len=32)
    assert not torch.equal(other.layers[0].ffn.linear1.weight, post.layers[0].ffn.linear1.weight)
    assert not post.training and pre.norm_first and not post.norm_first
    assert pre.layers[0].ffn.activation_name == "gelu" and pre.layers[0].ffn.linear1.out_features == 4 * D
    with pytest.raises(ValueError):
        encoder_for("middle", D, H, 1)


def test_residual_stream_rms_post_is_one_and_pre_grows():
    x = torch.randn(1, 10, 32)
    with torch.no_grad():
        post = encoder_for("post", 32, 4, 8, seed=0, max_len=10).trace_embeddings(x)
        pre = encoder_for("pre", 32, 4, 8, seed=0, max_len=10).trace_embeddings(x)
    r_post = residual_stream_rms(post.embeddings, [t.output for t in post.layers])
    r_pre = residual_stream_rms(pre.embeddings, [t.output for t in pre.layers])
    assert r_post.shape == (9,)
    # independent computation of the first and last entries
    assert abs(float(r_pre[0]) - float(pre.embeddings.pow(2).mean().sqrt())) < 1e-6
    assert abs(float(r_pre[-1]) - float(pre.layers[-1]["residual2"].pow(2).mean().sqrt())) < 1e-6
    torch.testing.assert_close(r_post[1:], torch.ones(8), atol=1e-4, rtol=0)
    assert float(r_pre[-1]) > 1.5 * float(r_pre[1])          # the un-normalised stream grows with depth
    assert abs(float(rms(pre.output)) - 1) < 1e-4             # the final LayerNorm brings it back


def test_final_layernorm_gap_is_tiny_on_post_ln_output_and_large_on_pre_ln():
    x = torch.randn(1, 10, 32)
    with torch.no_grad():
        post = encoder_for("post", 32, 4, 4, seed=1, max_len=10).trace_embeddings(x)
        pre = encoder_for("pre", 32, 4, 4, seed=1, max_len=10).trace_embeddings(x)
    assert float(final_layernorm_gap(post.layers[-1].output)) < 1e-4
    assert float(final_layernorm_gap(pre.layers[-1].output)) > 0.1
    y = torch.randn(4, 6) * 3 + 2
    torch.testing.assert_close(final_layernorm_gap(y), (nn.LayerNorm(6)(y) - y).abs().max().detach())


@pytest.mark.parametrize("norm_first", [False, True])
def test_attention_dropout_is_inverted_dropout_of_eval_weights(norm_first):
    torch.manual_seed(0)
    layer = TransformerEncoderLayer(D, H, 2 * D, dropout=0.1, norm_first=norm_first).train()
    x = torch.randn(1, 9, D)
    p = 0.3
    view = attention_dropout(layer, x, p, seed=3)
    # eval weights: those of the module itself on the sublayer's input, rows sum to 1
    inp = layer.norm1(x) if norm_first else x
    layer.eval()
    with torch.no_grad():
        _, ref = layer.self_attn(inp)
    torch.testing.assert_close(view.eval_weights, ref)
    torch.testing.assert_close(view.eval_weights.sum(-1), torch.ones(1, H, 9))
    # train weights: zeros where dropped, survivors scaled by 1/(1-p)
    torch.testing.assert_close(view.train_weights, view.eval_weights * view.keep / (1 - p))
    assert (~view.keep).any() and view.keep.any()
    assert not torch.allclose(view.train_weights.sum(-1), torch.ones(1, H, 9))
    # the module is left as it was, and the draw is reproducible
    assert layer.self_attn.dropout == 0.1
    layer.train()
    assert layer.self_attn.training
    again = attention_dropout(layer, x, p, seed=3)
    assert torch.equal(again.train_weights, view.train_weights)
    assert not torch.equal(attention_dropout(layer, x, p, seed=4).keep, view.keep)
    with pytest.raises(ValueError):
        attention_dropout(layer, x, 1.0)


def test_attention_dropout_row_sums_are_one_on_average():
    torch.manual_seed(1)
    layer = TransformerEncoderLayer(D, H, 2 * D).eval()
    x = torch.randn(1, 12, D)
    sums = torch.stack([attention_dropout(layer, x, 0.4, seed=s).train_weights.sum(-1) for s in range(300)])
    assert abs(float(sums.mean()) - 1) < 0.02               # E[keep / (1-p)] = 1
    assert float(sums.std()) > 0.1                          # but single draws scatter
    assert torch.equal(attention_dropout(layer, x, 0.0).train_weights, attention_dropout(layer, x, 0.0).eval_weights)


# --- the second tutorial's layer, transcribed literally as an oracle (torch modules, eval mode) ---
class SeedPositionWiseFFN(nn.Module):
    def __init__(self, d_model, d_ff, dropout=0.1):
        super().__init__()
        self.ffn = nn.Sequential(nn.Linear(d_model, d_ff), nn.GELU(), nn.Dropout(dropout),
                                 nn.Linear(d_ff, d_model), nn.Dropout(dropout))
        self.layer_norm = nn.LayerNorm(d_model)

    def forward(self, x):
        residual = x
        x = self.layer_norm(x)
        x = self.ffn(x)
        return x + residual


class SeedEncoderLayer(nn.Module):
    def __init__(self, d_model, num_heads, d_ff, dropout=0.1):
        super().__init__()
        self.mha = nn.MultiheadAttention(d_model, num_heads, dropout=dropout, batch_first=True)
        self.ffn = SeedPositionWiseFFN(d_model, d_ff, dropout)
        self.layernorm1 = nn.LayerNorm(d_model)
        self.layernorm2 = nn.LayerNorm(d_model)
        self.dropout1 = nn.Dropout(dropout)
        self.dropout2 = nn.Dropout(dropout)

    def forward(self, x):
        attn_output, _ = self.mha(x, x, x)
        out1 = self.layernorm1(x + self.dropout1(attn_output))
        ffn_output = self.dropout2(self.ffn(out1))
        return self.layernorm2(out1 + ffn_output)


def _randomise_norms(*norms):
    with torch.no_grad():
        for m in norms:
            m.weight.uniform_(0.5, 1.5)
            m.bias.uniform_(-0.3, 0.3)


def test_tutorial_layer_matches_literal_transcription_of_the_seed():
    torch.manual_seed(2)
    seed_layer = SeedEncoderLayer(D, H, 3 * D).eval()
    _randomise_norms(seed_layer.layernorm1, seed_layer.layernorm2, seed_layer.ffn.layer_norm)
    mine = TutorialEncoderLayer(D, H, 3 * D, activation="gelu").eval()
    mine.mha = MultiHeadAttention.from_torch(seed_layer.mha).eval()
    with torch.no_grad():
        for dst, src in ((mine.ffn.linear1, seed_layer.ffn.ffn[0]), (mine.ffn.linear2, seed_layer.ffn.ffn[3]),
                         (mine.ffn_norm, seed_layer.ffn.layer_norm), (mine.layernorm1, seed_layer.layernorm1),
                         (mine.layernorm2, seed_layer.layernorm2)):
            dst.weight.copy_(src.weight)
            dst.bias.copy_(src.bias)
    x = torch.randn(2, 7, D)
    with torch.no_grad():
        torch.testing.assert_close(mine(x).output, seed_layer(x), atol=1e-5, rtol=1e-5)


def test_tutorial_layer_from_layer_counts_the_skip_twice():
    torch.manual_seed(3)
    layer = TransformerEncoderLayer(D, H, 4 * D, activation="gelu").eval()
    tut = TutorialEncoderLayer.from_layer(layer).eval()
    x = torch.randn(1, 6, D)
    with torch.no_grad():
        s = layer.forward_trace(x)
        out1 = s["norm1"]
        f = layer.ffn(F.layer_norm(out1, (D,)))                     # FFN of the fresh inner LN
        expected = layer.norm2(2 * out1 + f)
        torch.testing.assert_close(tut(x).output, expected, atol=1e-5, rtol=1e-5)
        # and it is not the correct layer
        assert (tut(x).output - s["output"]).abs().max() > 1e-2


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 10_000), st.floats(0.5, 4.0))
def test_layernorm_is_scale_invariant_so_doubling_the_skip_halves_the_branch(seed, c):
    g = torch.Generator().manual_seed(seed)
    a = torch.randn(5, 12, generator=g, dtype=torch.float64)
    f = torch.randn(5, 12, generator=g, dtype=torch.float64)
    lhs = F.layer_norm(c * a + f, (12,), eps=0.0)
    rhs = F.layer_norm(a + f / c, (12,), eps=0.0)
    torch.testing.assert_close(lhs, rhs)


def test_double_residual_effect_halves_the_ffn_update_roughly():
    enc = encoder_for("post", 32, 4, 2, "gelu", seed=0, max_len=12)
    x = torch.randn(1, 12, 32)
    eff = double_residual_effect(enc.layers[0], x)
    with torch.no_grad():
        s = enc.layers[0].forward_trace(x)
    out1 = s["norm1"][0]
    torch.testing.assert_close(eff.correct_out, s["output"][0])
    torch.testing.assert_close(eff.correct_update, (s["output"][0] - out1).norm(dim=-1) / out1.norm(dim=-1))
    assert eff.correct_update.shape == (12,)
    assert bool((eff.tutorial_update < eff.correct_update).all())
    ratio = float((eff.tutorial_update / eff.correct_update).median())
    assert 0.3 < ratio < 0.8
    with pytest.raises(ValueError):
        double_residual_effect(encoder_for("pre", 32, 4, 1, seed=0).layers[0], x)

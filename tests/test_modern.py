"""Modern LLM attention: GQA, sliding windows with sinks, ALiBi, RoPE scaling, the KV cache.

Every function against an independent oracle: torch's scaled_dot_product_attention(enable_gqa=True),
explicit Python loops over the papers' formulas, the ALiBi reference code's get_slopes written out
here, and the full causal forward for the cache (hypothesis: any split of the sequence).
"""
import math

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

import attention_core as ac
from attention_core.decoder import DecoderLM

ATOL = 1e-5


def assert_close(a, b, atol=ATOL):
    err = (a - b).abs().max().item() if a.numel() else 0.0
    assert err <= atol, f"max abs error {err:.3g} > {atol}"


# ---------------------------------------------------------------- grouped-query attention
def rows_with_a_key(n_q, n_k):
    """A random boolean mask (n_q, n_k) in which every query sees at least one key (torch gives NaN otherwise)."""
    m = torch.rand(n_q, n_k) < 0.5
    m[torch.arange(n_q), torch.randint(0, n_k, (n_q,))] = True
    return m


@pytest.mark.parametrize("h_q,h_kv", [(4, 4), (4, 2), (4, 1), (6, 3), (6, 2), (8, 2)])
@pytest.mark.parametrize("kind", ["none", "causal", "random", "float"])
@pytest.mark.parametrize("scale", [None, 0.3])
def test_gqa_equals_torch_enable_gqa(h_q, h_kv, kind, scale):
    b, n_q, n_k, d, d_v = 2, 5, 7, 8, 6
    q, k, v = torch.randn(b, h_q, n_q, d), torch.randn(b, h_kv, n_k, d), torch.randn(b, h_kv, n_k, d_v)
    mask = {"none": None, "causal": ac.causal_mask(n_q, n_k),
            "random": rows_with_a_key(n_q, n_k), "float": torch.randn(h_q, n_q, n_k)}[kind]
    out, w = ac.grouped_query_attention(q, k, v, mask, scale=scale)
    ref = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=scale, enable_gqa=True)
    assert out.shape == (b, h_q, n_q, d_v) and w.shape == (b, h_q, n_q, n_k)
    assert_close(out, ref)
    assert_close(w.sum(-1), torch.ones(b, h_q, n_q))


@settings(max_examples=40, deadline=None)
@given(b=st.integers(1, 2), h_kv=st.integers(1, 4), group=st.integers(1, 4), n_q=st.integers(1, 9),
       n_k=st.integers(1, 9), d=st.integers(1, 9), seed=st.integers(0, 2**31 - 1))
def test_gqa_equals_torch_for_any_shape(b, h_kv, group, n_q, n_k, d, seed):
    g = torch.Generator().manual_seed(seed)
    h_q = h_kv * group
    q, k, v = (torch.randn(b, h, n, d, generator=g) for h, n in ((h_q, n_q), (h_kv, n_k), (h_kv, n_k)))
    mask = torch.rand(n_q, n_k, generator=g) < 0.6
    mask[:, 0] = True
    out, w = ac.grouped_query_attention(q, k, v, mask)
    assert_close(out, F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=True))
    assert not w[..., ~mask].any()                               # hidden keys weigh exactly 0


def test_gqa_query_head_i_reads_kv_head_i_over_group():
    """An explicit per-head loop: query head i against K/V head i // (h_q // h_kv)."""
    h_q, h_kv = 6, 2
    q, k, v = torch.randn(2, h_q, 4, 5), torch.randn(2, h_kv, 6, 5), torch.randn(2, h_kv, 6, 3)
    out, w = ac.grouped_query_attention(q, k, v)
    for i in range(h_q):
        j = i // (h_q // h_kv)
        ref = torch.softmax(q[:, i] @ k[:, j].transpose(-2, -1) / math.sqrt(5), dim=-1)
        assert_close(w[:, i], ref)
        assert_close(out[:, i], ref @ v[:, j])


def test_gqa_with_as_many_kv_heads_is_multi_head_attention():
    q, k, v = torch.randn(2, 4, 5, 8), torch.randn(2, 4, 5, 8), torch.randn(2, 4, 5, 8)
    mask = ac.causal_mask(5)
    ours, ref = ac.grouped_query_attention(q, k, v, mask), ac.scaled_dot_product_attention(q, k, v, mask)
    assert torch.equal(ours.output, ref.output) and torch.equal(ours.weights, ref.weights)


def test_gqa_with_one_kv_head_is_multi_query_attention():
    q, k, v = torch.randn(1, 4, 3, 8), torch.randn(1, 1, 3, 8), torch.randn(1, 1, 3, 8)
    ours = ac.grouped_query_attention(q, k, v).output
    assert_close(ours, ac.scaled_dot_product_attention(q, k.expand(1, 4, 3, 8), v.expand(1, 4, 3, 8)).output)


def test_gqa_rejects_heads_that_do_not_divide():
    q, k = torch.randn(1, 6, 3, 4), torch.randn(1, 4, 3, 4)
    with pytest.raises(ValueError, match=r"query heads \(6\) must be a multiple of .* key/value heads \(4\)"):
        ac.grouped_query_attention(q, k, k)
    with pytest.raises(ValueError, match="same number of heads"):
        ac.grouped_query_attention(q, torch.randn(1, 2, 3, 4), torch.randn(1, 3, 3, 4))
    with pytest.raises(ValueError, match="dimensions"):
        ac.grouped_query_attention(torch.randn(3, 4), torch.randn(3, 4), torch.randn(3, 4))


def test_gqa_fully_masked_rows_give_zeros_not_nan():
    q, k, v = torch.randn(1, 4, 3, 4), torch.randn(1, 2, 5, 4), torch.randn(1, 2, 5, 4)
    mask = torch.ones(3, 5, dtype=torch.bool)
    mask[1] = False
    out, w = ac.grouped_query_attention(q, k, v, mask)
    assert torch.isfinite(out).all() and torch.isfinite(w).all()
    assert not out[:, :, 1].any() and not w[:, :, 1].any()
    assert_close(w[:, :, [0, 2]].sum(-1), torch.ones(1, 4, 2))
    ref = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=True)
    assert_close(out[:, :, [0, 2]], ref[:, :, [0, 2]])


# ---------------------------------------------------------------- sliding window with sinks
def loop_mask(n, rule):
    m = torch.zeros(n, n, dtype=torch.bool)
    for i in range(n):
        for j in range(n):
            m[i, j] = rule(i, j)
    return m


@pytest.mark.parametrize("n", [1, 2, 5, 12])
def test_sliding_window_mask_matches_a_loop(n):
    for window in (1, 2, 3, 7):
        for sinks in (0, 1, 4):
            expected = loop_mask(n, lambda i, j: j <= i and (i - j < window or j < sinks))
            assert torch.equal(ac.sliding_window_mask(n, window, sinks=sinks), expected), (n, window, sinks)


def test_sliding_window_as_long_as_the_sequence_is_causal():
    for n in (1, 4, 9):
        for window in (n, n + 1, 100):
            assert torch.equal(ac.sliding_window_mask(n, window), ac.causal_mask(n))
            assert torch.equal(ac.sliding_window_mask(n, window, sinks=3), ac.causal_mask(n))
    assert torch.equal(ac.sliding_window_mask(6, 1), torch.eye(6, dtype=torch.bool))


def test_sliding_window_rejects_bad_arguments():
    with pytest.raises(ValueError, match="window must be >= 1"):
        ac.sliding_window_mask(5, 0)
    with pytest.raises(ValueError, match="window"):
        ac.sliding_window_mask(5, -3)
    with pytest.raises(ValueError, match="sinks"):
        ac.sliding_window_mask(5, 2, sinks=-1)


# ---------------------------------------------------------------- ALiBi
def reference_get_slopes(n):
    """The ALiBi authors' get_slopes (ofirpress/attention_with_linear_biases), written out independently."""
    def get_slopes_power_of_2(n):
        start = 2 ** (-2 ** -(math.log2(n) - 3))
        ratio = start
        return [start * ratio ** i for i in range(n)]

    if math.log2(n).is_integer():
        return get_slopes_power_of_2(n)
    closest_power_of_2 = 2 ** math.floor(math.log2(n))
    return (get_slopes_power_of_2(closest_power_of_2)
            + reference_get_slopes(2 * closest_power_of_2)[0::2][: n - closest_power_of_2])


def test_alibi_slopes_are_the_papers_values():
    assert ac.alibi_slopes(8).tolist() == [2.0 ** -k for k in range(1, 9)]           # 1/2 ... 1/256
    assert_close(ac.alibi_slopes(16), torch.tensor([2.0 ** (-k / 2) for k in range(1, 17)], dtype=torch.float64),
                 atol=1e-15)                                                           # 1/sqrt 2 ... 1/256
    # not a power of two: the slopes of 4 heads, then every other slope of 8 heads
    assert_close(ac.alibi_slopes(6), torch.tensor([2.0 ** -2, 2.0 ** -4, 2.0 ** -6, 2.0 ** -8, 2.0 ** -1, 2.0 ** -3],
                                                  dtype=torch.float64), atol=1e-15)
    twelve = [2.0 ** -k for k in range(1, 9)] + [2.0 ** -(k + 0.5) for k in range(0, 4)]
    assert_close(ac.alibi_slopes(12), torch.tensor(twelve, dtype=torch.float64), atol=1e-15)
    assert ac.alibi_slopes(1).tolist() == [2.0 ** -8]


@pytest.mark.parametrize("h", list(range(1, 41)) + [48, 64, 96])
def test_alibi_slopes_equal_the_reference_get_slopes(h):
    ours = ac.alibi_slopes(h)
    assert ours.shape == (h,) and len(set(ours.tolist())) == h                        # every head its own slope
    assert_close(ours, torch.tensor(reference_get_slopes(h), dtype=torch.float64), atol=1e-12)


def test_alibi_bias_is_minus_slope_times_distance():
    n, h = 6, 5
    bias, slopes = ac.alibi_bias(n, h), reference_get_slopes(h)
    assert bias.shape == (h, n, n) and bias.dtype == torch.float32
    for head in range(h):
        for i in range(n):
            for j in range(n):
                assert abs(bias[head, i, j].item() - (-slopes[head] * abs(i - j))) < 1e-6
    with pytest.raises(ValueError):
        ac.alibi_slopes(0)


def test_alibi_bias_as_a_float_mask_equals_torch():
    n, h = 7, 4
    q, k, v = torch.randn(2, h, n, 8), torch.randn(2, 2, n, 8), torch.randn(2, 2, n, 8)
    bias = ac.alibi_bias(n, h).masked_fill(~ac.causal_mask(n), float("-inf"))
    out, w = ac.grouped_query_attention(q, k, v, bias)
    assert_close(out, F.scaled_dot_product_attention(q, k, v, attn_mask=bias, enable_gqa=True))
    assert not w[..., ~ac.causal_mask(n)].any()


# ---------------------------------------------------------------- RoPE scaling
D, BASE, L = 64, 10000.0, 2048


def test_rope_scalings_at_scale_one_are_plain_rope():
    plain = ac.rotary_frequencies(D, BASE)
    for method in ac.ROPE_SCALINGS:
        assert_close(ac.rope_scaled_frequencies(D, method, 1.0, base=BASE, original_len=L), plain, atol=1e-15)
    assert ac.yarn_attention_factor(1.0) == 1.0


@pytest.mark.parametrize("s", [2.0, 4.0, 8.0])
def test_linear_interpolation_divides_positions_by_s(s):
    pos = torch.arange(0, 40, 3)
    pi = ac.rope_linear_frequencies(D, s, BASE)
    assert_close(ac.rotary_angles(pos, D, BASE, frequencies=pi), ac.rotary_angles(pos / s, D, BASE), atol=1e-9)
    x = torch.randn(2, len(pos), D)
    assert_close(ac.rotary_embedding(x, pos, BASE, frequencies=pi), ac.rotary_embedding(x, pos / s, BASE))


@pytest.mark.parametrize("s", [2.0, 4.0, 16.0])
def test_ntk_aware_base_change(s):
    b2 = ac.rope_ntk_base(D, s, BASE)
    assert b2 == pytest.approx(BASE * s ** (D / (D - 2)), rel=1e-12)
    theta = ac.rope_ntk_frequencies(D, s, BASE)
    assert_close(theta, torch.tensor([b2 ** (-2 * i / D) for i in range(D // 2)], dtype=torch.float64), atol=1e-15)
    plain = ac.rotary_frequencies(D, BASE)
    assert theta[0].item() == 1.0                                          # the highest frequency: unchanged
    assert theta[-1].item() == pytest.approx(plain[-1].item() / s, rel=1e-9)  # the lowest: interpolated by s


@pytest.mark.parametrize("s", [2.0, 8.0])
def test_yarn_ramp_per_dimension_against_the_paper(s):
    theta = ac.rotary_frequencies(D, BASE).tolist()
    yarn = ac.rope_yarn_frequencies(D, s, L, BASE)            # paper defaults alpha = 1, beta = 32
    regimes = set()
    for i, t in enumerate(theta):
        r = L / (2 * math.pi / t)                             # turns over the original context
        if r > 32:
            expected, regime = t, "kept"                      # high frequency: extrapolated, unchanged
        elif r < 1:
            expected, regime = t / s, "interpolated"          # low frequency: PI
        else:
            gamma = (r - 1) / 31
            expected, regime = (1 - gamma) * t / s + gamma * t, "ramp"
        regimes.add(regime)
        assert yarn[i].item() == pytest.approx(expected, rel=1e-12), i
    assert regimes == {"kept", "interpolated", "ramp"}        # this d, L reach all three parts
    assert ac.yarn_ramp(torch.tensor([0.0, 1.0, 16.5, 32.0, 100.0])).tolist() == [0.0, 0.0, 0.5, 1.0, 1.0]
    assert ac.yarn_attention_factor(s) == pytest.approx(0.1 * math.log(s) + 1)


def test_rope_scaling_arguments_are_checked():
    for call in (lambda: ac.rope_linear_frequencies(D, 0.0), lambda: ac.rope_ntk_base(2, 2.0),
                 lambda: ac.rope_scaled_frequencies(D, "yarn", 2.0), lambda: ac.rope_scaled_frequencies(D, "xpos"),
                 lambda: ac.rope_yarn_frequencies(D, 2.0, 0), lambda: ac.yarn_ramp(torch.ones(1), 4.0, 2.0),
                 lambda: ac.rotary_embedding(torch.randn(3, 8), frequencies=torch.ones(3))):
        with pytest.raises(ValueError):
            call()


# ---------------------------------------------------------------- KV cache and CausalSelfAttention
CONFIGS = {
    "mha": dict(num_heads=4),
    "gqa": dict(num_heads=4, num_kv_heads=2),
    "mqa": dict(num_heads=4, num_kv_heads=1),
    "rope": dict(num_heads=4, num_kv_heads=2, rope=True),
    "alibi+qk_norm": dict(num_heads=4, num_kv_heads=2, alibi=True, qk_norm=True),
    "window+sinks": dict(num_heads=4, num_kv_heads=1, window=3, sinks=2, rope=True),
}


def CausalSelfAttentionFor(config):
    return ac.CausalSelfAttention(16, **CONFIGS[config])


def split(n, cuts):
    """Chunk sizes of 0..n cut at the sorted, distinct points ``cuts``."""
    points = [0, *sorted({c for c in cuts if 0 < c < n}), n]
    return [b - a for a, b in zip(points, points[1:])]


@settings(max_examples=25, deadline=None)
@given(config=st.sampled_from(sorted(CONFIGS)), n=st.integers(1, 12), b=st.integers(1, 2),
       cuts=st.lists(st.integers(1, 11), max_size=6), seed=st.integers(0, 2**31 - 1))
def test_cached_decoding_equals_the_full_causal_forward(config, n, b, cuts, seed):
    torch.manual_seed(seed)
    attn = CausalSelfAttentionFor(config)
    x = torch.randn(b, n, 16)
    full, full_w = attn(x)
    cache, start = ac.KVCache(), 0
    assert len(cache) == 0 and cache.k is None and cache.v is None
    for size in split(n, cuts):
        out, w = attn(x[:, start:start + size], cache)
        start += size
        assert len(cache) == start                                           # the cache grows by the chunk
        assert cache.k.shape == cache.v.shape == (b, attn.num_kv_heads, start, attn.d_head)
        assert_close(out, full[:, start - size:start])
        assert w.shape == (b, attn.num_heads, size, start)
        assert_close(w, full_w[:, :, start - size:start, :start])



@pytest.mark.parametrize("config", sorted(CONFIGS))
def test_token_by_token_and_prefill_then_decode(config):
    attn, x = CausalSelfAttentionFor(config), torch.randn(2, 9, 16)
    full = attn(x).output
    for chunks in ([1] * 9, [6, 1, 1, 1]):
        cache, outs = ac.KVCache(), []
        for size in chunks:
            outs.append(attn(x[:, len(cache):len(cache) + size], cache).output)
        assert_close(torch.cat(outs, dim=1), full)
        b = 2                                               # 2 (k and v) x b x h_kv x t x d_head x 4 bytes
        assert cache.nbytes() == 2 * b * attn.num_kv_heads * 9 * attn.d_head * 4 == b * 9 * attn.kv_bytes_per_token()


def test_full_forward_sees_exactly_its_mask():
    for window, sinks, allowed in ((3, 2, ac.sliding_window_mask(8, 3, sinks=2)), (None, 0, ac.causal_mask(8))):
        attn = ac.CausalSelfAttention(16, 4, 2, window=window, sinks=sinks)
        _, w = attn(torch.randn(1, 8, 16))
        assert torch.equal(w[0] > 0, allowed.expand(4, 8, 8))                 # visible keys, and only they, weigh
        assert_close(w.sum(-1), torch.ones(1, 4, 8))


def test_with_as_many_kv_heads_it_is_a_causal_multi_head_attention():
    attn = ac.CausalSelfAttention(16, 4, bias=True)
    mha = ac.MultiHeadAttention(16, 4)
    mha.load_state_dict(attn.state_dict())                   # same names: W_query, W_key, W_value, W_output
    x = torch.randn(3, 7, 16)
    ours, ref = attn(x), mha(x, mask=ac.causal_mask(7))
    assert_close(ours.output, ref.output)
    assert_close(ours.weights, ref.weights)
    ref_torch = torch.nn.MultiheadAttention(16, 4, batch_first=True)
    with torch.no_grad():
        ref_torch.in_proj_weight.copy_(torch.cat([attn.W_query.weight, attn.W_key.weight, attn.W_value.weight]))
        ref_torch.in_proj_bias.copy_(torch.cat([attn.W_query.bias, attn.W_key.bias, attn.W_value.bias]))
        ref_torch.out_proj.weight.copy_(attn.W_output.weight)
        ref_torch.out_proj.bias.copy_(attn.W_output.bias)
    y, _ = ref_torch(x, x, x, attn_mask=~ac.causal_mask(7), need_weights=False)
    assert_close(ours.output, y)


def test_grouped_heads_against_an_explicit_per_head_oracle():
    d_model, h, h_kv, n = 24, 6, 2, 5
    attn = ac.CausalSelfAttention(d_model, h, h_kv)
    x = torch.randn(2, n, d_model)
    d_head, group = d_model // h, h // h_kv
    assert attn.W_key.weight.shape == (h_kv * d_head, d_model)               # fewer K/V parameters
    heads = []
    for i in range(h):
        j = i // group
        wq = attn.W_query.weight[i * d_head:(i + 1) * d_head]
        wk, wv = (m.weight[j * d_head:(j + 1) * d_head] for m in (attn.W_key, attn.W_value))
        scores = (x @ wq.T) @ (x @ wk.T).transpose(-2, -1) / math.sqrt(d_head)
        scores = scores.masked_fill(torch.ones(n, n).triu(1).bool(), float("-inf"))
        heads.append(torch.softmax(scores, -1) @ (x @ wv.T))
    expected = torch.cat(heads, dim=-1) @ attn.W_output.weight.T
    assert_close(attn(x).output, expected)


def test_alibi_decoder_against_the_formula():
    attn = ac.CausalSelfAttention(8, 2, alibi=True)
    x = torch.randn(1, 6, 8)
    q = attn.W_query(x).view(1, 6, 2, 4).transpose(1, 2)
    k = attn.W_key(x).view(1, 6, 2, 4).transpose(1, 2)
    slopes = reference_get_slopes(2)
    for hd in range(2):
        scores = q[0, hd] @ k[0, hd].T / 2.0
        for i in range(6):
            row = [scores[i, j] - slopes[hd] * (i - j) for j in range(i + 1)]
            expected = torch.softmax(torch.stack(row), 0)
            assert_close(attn(x).weights[0, hd, i, :i + 1], expected)


def test_head_counts_are_checked():
    with pytest.raises(ValueError, match=r"num_kv_heads \(3\) must divide num_heads \(4\)"):
        ac.CausalSelfAttention(16, 4, 3)
    with pytest.raises(ValueError, match="num_kv_heads"):
        ac.CausalSelfAttention(16, 4, 0)
    with pytest.raises(ac.HeadDivisibilityError):
        ac.CausalSelfAttention(18, 4)
    with pytest.raises(ValueError, match="even"):
        ac.CausalSelfAttention(12, 4, rope=True)
    with pytest.raises(ValueError):
        ac.CausalSelfAttention(16, 4, window=0)


# ---------------------------------------------------------------- DecoderLM: the library's small decoder-only model
@pytest.mark.parametrize("position, d_ff, kv, qk_norm, window", [("rope", 32, 2, False, None), ("alibi", 0, 1, True, None),
                                                                  ("learned", 32, 4, False, 3), ("none", 0, 2, False, 2)])
def test_decoder_lm_with_caches_equals_the_full_forward(position, d_ff, kv, qk_norm, window):
    from attention_core.decoder import DecoderConfig, DecoderLM
    torch.manual_seed(0)
    model = DecoderLM(DecoderConfig(11, 16, 2, 4, kv, d_ff=d_ff, position=position, max_len=20, qk_norm=qk_norm,
                                    window=window, sinks=1 if window else 0)).eval()
    ids = torch.randint(0, 11, (2, 9))
    with torch.no_grad():
        full = model(ids)
        caches = model.new_caches()
        parts = [model(ids[:, a:b], caches) for a, b in ((0, 4), (4, 5), (5, 9))]
    assert torch.allclose(torch.cat([p.logits for p in parts], 1), full.logits, atol=1e-5)
    assert len(full.weights) == 2 and full.weights[0].shape == (2, 4, 9, 9)
    assert torch.allclose(full.weights[1].sum(-1), torch.ones(2, 4, 9), atol=1e-5)
    assert full.weights[0].triu(1).abs().max() == 0                       # causal: nothing from the future
    if window:
        assert full.weights[0][..., 8, 1:8 - window + 1].abs().max() == 0  # outside the window, sink 0 kept
    assert len(caches[0]) == 9 and caches[0].k.shape == (2, kv, 9, 4)


def test_decoder_lm_learned_positions_refuse_past_max_len():
    from attention_core.decoder import DecoderConfig, DecoderLM
    model = DecoderLM(DecoderConfig(5, 8, 1, 2, position="learned", max_len=4))
    with pytest.raises(ValueError, match="max_len"):
        model(torch.zeros(1, 5, dtype=torch.long))
    with pytest.raises(ValueError, match="position"):
        DecoderConfig(5, position="sinusoid")


def test_attention_logits_are_what_the_softmax_reads():
    """softmax over the visible logits (the layer's own ``logits``) gives the layer's weights; a rope frequency
    override equal to the default changes nothing, and logit_scale multiplies the logits."""
    from attention_core.decoder import CausalSelfAttention
    from attention_core.positional import rotary_frequencies
    torch.manual_seed(1)
    for alibi in (False, True):
        layer = CausalSelfAttention(16, 4, 2, rope=not alibi, alibi=alibi, qk_norm=True).eval()
        x = torch.randn(2, 7, 16)
        with torch.no_grad():
            w = layer(x).weights
            logits = layer.logits(x)
            mask = layer.score_mask(0, 7, 7)
            scores = logits + mask if alibi else logits.masked_fill(~mask, float("-inf"))
            assert torch.allclose(scores.softmax(-1), w, atol=1e-6)
            if not alibi:
                layer.rope_frequencies = rotary_frequencies(4)
                assert torch.allclose(layer(x).weights, w, atol=1e-6)
                layer.logit_scale = 2.0
                assert torch.allclose(layer.logits(x), 2 * logits, atol=1e-5)


def test_a_registered_lm_task_trains_saves_and_loads_through_the_recipes(tmp_path, monkeypatch):
    """The path every Modern-attention model takes: lm.register -> recipes.train -> checkpoint -> load_model."""
    import random

    from attention_core.models import lm, recipes

    def batch(rng: random.Random, n: int) -> lm.LMBatch:          # a repeated pair: b follows a, a follows b
        start = [rng.randrange(2) for _ in range(n)]
        ids = torch.tensor([[(s + i) % 2 for i in range(9)] for s in start]) + task.vocab.stoi["a"]
        return lm.LMBatch(ids[:, :-1], ids[:, 1:], torch.ones(n, 8))

    def evaluate(model) -> dict:
        nll, right = lm.token_losses(model, batch(random.Random(5), 16))
        return {"accuracy": right.float().mean().item(), "loss": nll.mean().item()}

    task = lm.LMTask("test_alternate", ("a", "b"), batch, evaluate)
    monkeypatch.setitem(lm.LM_TASKS, task.name, task)
    recipe = recipes.Recipe("test_alternate_lm", "lm", task.name, steps=60, batch_size=16, lr=1e-2, warmup_steps=5,
                            seed=0, config=dict(d_model=16, num_layers=1, num_heads=2, d_ff=0, position="none"))
    monkeypatch.setitem(recipes.RECIPES, recipe.name, recipe)
    model, meta = recipes.train(recipe.name, models_dir=tmp_path, log_every=0)
    assert meta["eval"]["accuracy"] > 0.95 and meta["final_loss"] < 0.2
    loaded = recipes.load_model(recipe.name, tmp_path)
    assert isinstance(loaded.model, DecoderLM) and loaded.src_vocab == task.vocab and not loaded.model.training
    assert evaluate(loaded.model)["accuracy"] > 0.95
    with pytest.raises(ValueError, match="twice"):
        lm.register(lm.LMTask("test_alternate", ("a",), batch, evaluate))


def test_every_registered_lm_recipe_names_a_task_and_valid_config():
    from attention_core.decoder import DecoderConfig
    from attention_core.models import lm, recipes
    for name, r in lm.LM_RECIPES.items():
        assert r["task"] in lm.LM_TASKS and recipes.RECIPES[name].kind == "lm" and name in recipes.TASKS
        DecoderConfig(vocab_size=len(lm.LM_TASKS[r["task"]].vocab), **r["config"])

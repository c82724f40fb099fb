"""Multi-head latent attention (attention_core/latent.py) against independent oracles: the absorbed computation
equals the explicit one (with and without a cache, with and without query compression and decoupled RoPE); the
latent cache gives the outputs of the full causal forward for any split of the sequence; with W^DKV = [W_K; W_V]
and W^UK, W^UV selecting each head's rows (a factorisation that is exact once d_c >= 2 h_kv d_head) MLA is
CausalSelfAttention, for MHA, GQA and MQA alike; the cache holds (d_c + d_rope) numbers per token, as the formula
says; the weights are a causal softmax. Runtime: about 3 s."""
from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from attention_core.decoder import CausalSelfAttention
from attention_core.latent import LatentCache, MultiHeadLatentAttention
from attention_core.modules import HeadDivisibilityError


def mla(seed=0, *, d_model=24, heads=3, d_latent=10, d_head=None, d_rope=4, d_q_latent=None,
        dtype=torch.float64) -> MultiHeadLatentAttention:
    torch.manual_seed(seed)
    return MultiHeadLatentAttention(d_model, heads, d_latent, d_head=d_head, d_rope=d_rope,
                                    d_q_latent=d_q_latent).to(dtype).eval()


def causal_oracle(m: MultiHeadLatentAttention, x: torch.Tensor) -> torch.Tensor:
    """Equations (9)-(19) written out token by token with Python loops (no einsum, no mask helpers)."""
    b, n, _ = x.shape
    out = torch.zeros(b, n, m.d_model, dtype=x.dtype)
    from attention_core.positional import rotary_embedding
    for bi in range(b):
        c = x[bi] @ m.W_DKV.weight.T                                        # (n, d_c)
        cq = x[bi] if m.W_DQ is None else x[bi] @ m.W_DQ.weight.T
        pos = torch.arange(n)
        kr = rotary_embedding(x[bi] @ m.W_KR.weight.T, pos) if m.d_rope else None
        heads = []
        for i in range(m.num_heads):
            wq = m.W_Q.weight[i * m.d_head:(i + 1) * m.d_head]
            q = cq @ wq.T                                                    # (n, d_head)
            k, v = c @ m.W_UK[i].T, c @ m.W_UV[i].T
            s = q @ k.T
            if m.d_rope:
                qr = rotary_embedding(cq @ m.W_QR.weight[i * m.d_rope:(i + 1) * m.d_rope].T, pos)
                s = s + qr @ kr.T
            s = s / math.sqrt(m.d_head + m.d_rope)
            s = s.masked_fill(torch.ones(n, n, dtype=torch.bool).triu(1), float("-inf"))
            heads.append(torch.softmax(s, -1) @ v)
        out[bi] = torch.cat(heads, -1) @ m.W_O.weight.T
    return out


@pytest.mark.parametrize("kwargs", [dict(), dict(d_rope=0), dict(d_q_latent=6), dict(d_head=5, d_latent=3),
                                    dict(heads=1, d_latent=1)])
def test_explicit_and_absorbed_equal_the_written_out_equations(kwargs):
    m = mla(1, **kwargs)
    x = torch.randn(2, 7, 24, dtype=torch.float64)
    oracle = causal_oracle(m, x)
    explicit, absorbed = m(x), m.absorbed(x)
    assert (explicit.output - oracle).abs().max() < 1e-10
    assert (absorbed.output - oracle).abs().max() < 1e-10
    assert (explicit.weights - absorbed.weights).abs().max() < 1e-12
    w = explicit.weights
    assert torch.allclose(w.sum(-1), torch.ones_like(w.sum(-1))) and (w.triu(1) == 0).all()   # causal softmax


@settings(max_examples=25, deadline=None)
@given(n=st.integers(1, 9), cuts=st.lists(st.integers(1, 8), max_size=4), absorbed=st.booleans(),
       d_rope=st.sampled_from([0, 2, 6]))
def test_the_latent_cache_equals_the_full_forward_for_any_split(n, cuts, absorbed, d_rope):
    m = mla(2, d_rope=d_rope)
    x = torch.randn(1, n, 24, dtype=torch.float64)
    full = m(x).output
    bounds = sorted({0, n, *[c for c in cuts if c < n]})
    cache, outs = LatentCache(), []
    run = m.absorbed if absorbed else m
    for a, b in zip(bounds, bounds[1:]):
        out = run(x[:, a:b], cache)
        assert out.weights.shape == (1, m.num_heads, b - a, b)
        outs.append(out.output)
    assert (torch.cat(outs, 1) - full).abs().max() < 1e-10
    assert len(cache) == n and cache.c.shape == (1, n, m.d_latent) and cache.k_rope.shape == (1, n, d_rope)


@pytest.mark.parametrize("heads, kv_heads", [(4, 4), (4, 2), (4, 1), (6, 3)])
def test_with_a_factorised_latent_mla_is_standard_causal_attention(heads, kv_heads):
    """W^DKV = [W_K; W_V] (d_c = 2 h_kv d_head), W_i^UK picks the K rows of head i's K/V head i // (h / h_kv),
    W_i^UV its V rows: then k^C, v^C are exactly the K, V of CausalSelfAttention (no positions). The decoupled
    RoPE part is switched off (W^QR = W^KR = 0) and W^Q rescaled by sqrt((d_h + d_R) / d_h) for the scale of (18)."""
    torch.manual_seed(3)
    d_model, d_rope = 24, 4
    ref = CausalSelfAttention(d_model, heads, kv_heads).double().eval()
    dh = d_model // heads
    kv_dim = kv_heads * dh
    m = MultiHeadLatentAttention(d_model, heads, 2 * kv_dim, d_rope=d_rope).double().eval()
    group = heads // kv_heads
    with torch.no_grad():
        m.W_DKV.weight.copy_(torch.cat((ref.W_key.weight, ref.W_value.weight)))
        m.W_UK.zero_()
        m.W_UV.zero_()
        for i in range(heads):
            g = i // group
            m.W_UK[i, :, g * dh:(g + 1) * dh] = torch.eye(dh)
            m.W_UV[i, :, kv_dim + g * dh:kv_dim + (g + 1) * dh] = torch.eye(dh)
        m.W_Q.weight.copy_(ref.W_query.weight * math.sqrt((dh + d_rope) / dh))
        m.W_QR.weight.zero_()
        m.W_KR.weight.zero_()
        m.W_O.weight.copy_(ref.W_output.weight)
    x = torch.randn(2, 9, d_model, dtype=torch.float64)
    expected = ref(x)
    for out in (m(x), m.absorbed(x)):
        assert (out.output - expected.output).abs().max() < 1e-10
        assert (out.weights - expected.weights).abs().max() < 1e-12


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_cache_bytes_formula_equals_the_tensors_held(dtype):
    m = mla(4, d_latent=10, d_rope=4, dtype=dtype)
    cache = LatentCache()
    with torch.no_grad():
        m.absorbed(torch.randn(3, 5, 24, dtype=dtype), cache)
        m.absorbed(torch.randn(3, 2, 24, dtype=dtype), cache)
    size = torch.empty(0, dtype=dtype).element_size()
    assert cache.nbytes() == 3 * 7 * (10 + 4) * size == 3 * 7 * m.cache_bytes_per_token(dtype)
    assert cache.nbytes() == cache.c.numel() * size + cache.k_rope.numel() * size
    assert LatentCache().nbytes() == 0 and len(LatentCache()) == 0


def test_bad_shapes_are_refused_with_the_numbers():
    with pytest.raises(HeadDivisibilityError):
        MultiHeadLatentAttention(10, 3, 4)
    with pytest.raises(ValueError, match="even"):
        MultiHeadLatentAttention(12, 3, 4, d_rope=3)
    with pytest.raises(ValueError, match="d_latent"):
        MultiHeadLatentAttention(12, 3, 0)
    assert MultiHeadLatentAttention(10, 3, 4, d_head=5).d_head == 5      # an explicit d_head needs no division

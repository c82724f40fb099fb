"""Oracles and properties for attention_core.efficient (and the helpers of attention_core.labs.efficiency_bench)."""
from __future__ import annotations

import json
import math

import pytest
import torch
import torch.nn.functional as TF
from hypothesis import given, settings
from hypothesis import strategies as st

from attention_core import masks
from attention_core.efficient import (
    FlashAttentionOutput,
    bigbird_mask,
    block_local_global_mask,
    effective_weights,
    elu_feature_map,
    favor_features,
    flash_attention,
    linear_attention,
    linear_attention_states,
    linformer_attention,
    longformer_mask,
    orthogonal_random_features,
    performer_attention,
    relative_error,
    sliding_window_attention,
    sparse_attention,
    strided_sparse_mask,
)
from attention_core.functional import scaled_dot_product_attention
from attention_core.labs.efficiency_bench import fit_slope, lra_reference, measured_ratios, summarise
from attention_core.types import AttentionOutput

ATOL = 1e-5


def qkv(b=2, h=3, n_q=11, n_k=None, d=8, d_v=None, seed=0, scale=1.0):
    g = torch.Generator().manual_seed(seed)
    n_k = n_q if n_k is None else n_k
    d_v = d if d_v is None else d_v
    q = torch.randn(b, h, n_q, d, generator=g) * scale
    k = torch.randn(b, h, n_k, d, generator=g) * scale
    v = torch.randn(b, h, n_k, d_v, generator=g)
    return q, k, v


def phi(x):
    return TF.elu(x) + 1.0


# ---------------------------------------------------------------------------- linear attention

def linear_oracle_quadratic(q, k, v, causal=False, key_keep=None):
    """O(n^2): phi(Q) phi(K)^T, masked, row-normalised, times V."""
    a = phi(q) @ phi(k).transpose(-2, -1)
    if causal:
        a = a * torch.ones(q.size(-2), k.size(-2)).tril()
    if key_keep is not None:
        a = a * key_keep
    return (a / a.sum(-1, keepdim=True)) @ v


def linear_oracle_rnn(q, k, v):
    """The recurrence S_i = S_{i-1} + phi(k_i) v_i^T, z_i = z_{i-1} + phi(k_i), written out."""
    b, h, n, d = q.shape
    S = torch.zeros(b, h, d, v.size(-1))
    z = torch.zeros(b, h, d)
    ys, Ss, zs = [], [], []
    for i in range(n):
        S = S + torch.einsum("bhd,bhe->bhde", phi(k[:, :, i]), v[:, :, i])
        z = z + phi(k[:, :, i])
        ys.append(torch.einsum("bhd,bhde->bhe", phi(q[:, :, i]), S) /
                  torch.einsum("bhd,bhd->bh", phi(q[:, :, i]), z)[..., None])
        Ss.append(S), zs.append(z)
    return torch.stack(ys, 2), torch.stack(Ss, 2), torch.stack(zs, 2)


def test_linear_noncausal_equals_quadratic_materialisation():
    q, k, v = qkv(n_q=13, n_k=17, d_v=5)
    out, w = linear_attention(q, k, v)
    assert w is None
    torch.testing.assert_close(out, linear_oracle_quadratic(q, k, v), atol=ATOL, rtol=0)


def test_linear_causal_equals_rnn_recurrence_and_quadratic():
    q, k, v = qkv(n_q=19, d_v=6, seed=1)
    out, _ = linear_attention(q, k, v, causal=True)
    y_rnn, S_rnn, z_rnn = linear_oracle_rnn(q, k, v)
    torch.testing.assert_close(out, y_rnn, atol=ATOL, rtol=0)
    torch.testing.assert_close(out, linear_oracle_quadratic(q, k, v, causal=True), atol=ATOL, rtol=0)
    states = linear_attention_states(q, k, v)
    torch.testing.assert_close(states.S, S_rnn, atol=ATOL, rtol=0)
    torch.testing.assert_close(states.z, z_rnn, atol=ATOL, rtol=0)
    torch.testing.assert_close(states.output, out, atol=ATOL, rtol=0)
    # the causal first row only sees key 0: it returns v_0 exactly
    torch.testing.assert_close(out[..., 0, :], v[..., 0, :], atol=ATOL, rtol=0)


def test_linear_causal_needs_equal_lengths():
    q, k, v = qkv(n_q=4, n_k=5)
    with pytest.raises(ValueError):
        linear_attention(q, k, v, causal=True)


@pytest.mark.parametrize("layout", ["b11n", "bn"])
@pytest.mark.parametrize("causal", [False, True])
def test_linear_padding_mask_removes_padded_keys(layout, causal):
    q, k, v = qkv(b=3, n_q=9, seed=2)
    lengths = [9, 4, 1]
    pm = masks.padding_mask(lengths, 9)                       # (b, 1, 1, n)
    mask = pm if layout == "b11n" else pm[:, 0, 0, :]
    out, _ = linear_attention(q, k, v, causal=causal, mask=mask)
    for bi, L in enumerate(lengths):
        if causal:                                            # padded keys are removed, queries kept
            ref = linear_oracle_quadratic(q[bi:bi + 1], k[bi:bi + 1], v[bi:bi + 1], causal=True,
                                          key_keep=pm[bi:bi + 1].float())
        else:                                                 # same as dropping the padded keys
            ref = linear_oracle_quadratic(q[bi:bi + 1], k[bi:bi + 1, :, :L], v[bi:bi + 1, :, :L])
        torch.testing.assert_close(out[bi:bi + 1], ref, atol=ATOL, rtol=0)
    # changing padded values must not change anything
    v2 = v.clone()
    v2[1, :, 4:] = 1e3
    torch.testing.assert_close(linear_attention(q, k, v2, causal=causal, mask=mask).output, out, atol=ATOL,
                               rtol=0)


def test_linear_all_keys_padded_gives_zeros_not_nan():
    q, k, v = qkv(b=2, n_q=5)
    out, _ = linear_attention(q, k, v, mask=masks.padding_mask([0, 5], 5))
    assert torch.isfinite(out).all()
    assert (out[0] == 0).all()


def test_elu_feature_map_is_elu_plus_one_and_positive():
    x = torch.linspace(-80, 5, 1001)
    torch.testing.assert_close(elu_feature_map(x), TF.elu(x.double()).float() + 1, atol=1e-6, rtol=1e-6)
    assert (elu_feature_map(x) > 0).all()


def test_linear_rejects_per_query_mask():
    q, k, v = qkv(n_q=5)
    with pytest.raises(ValueError):
        linear_attention(q, k, v, mask=masks.causal_mask(5)[None, None])


# ---------------------------------------------------------------------------- performer

def test_orthogonal_random_features_blocks_are_orthogonal_with_chi_norms():
    d, m = 8, 20
    w = orthogonal_random_features(m, d, torch.Generator().manual_seed(0))
    assert w.shape == (m, d)
    for start in range(0, m, d):
        blk = w[start:start + d]
        gram = blk @ blk.T
        off = gram - torch.diag(torch.diagonal(gram))
        assert off.abs().max() < 1e-4                         # rows of a block are orthogonal
    # norms follow chi_d: mean over many rows ~ sqrt(2) Gamma((d+1)/2) / Gamma(d/2)
    big = orthogonal_random_features(4000, d, torch.Generator().manual_seed(1))
    expected = math.sqrt(2) * math.exp(math.lgamma((d + 1) / 2) - math.lgamma(d / 2))
    assert abs(big.norm(dim=1).mean().item() - expected) < 0.05
    # reproducible with a seeded generator
    torch.testing.assert_close(w, orthogonal_random_features(m, d, torch.Generator().manual_seed(0)))


def test_favor_kernel_is_unbiased():
    d = 8
    g = torch.Generator().manual_seed(0)
    x, y = torch.randn(4, d, generator=g) * 0.5, torch.randn(5, d, generator=g) * 0.5
    exact = torch.exp(x @ y.T / math.sqrt(d))
    draws = []
    for s in range(100):
        w = orthogonal_random_features(128, d, torch.Generator().manual_seed(100 + s))
        draws.append(favor_features(x, w) @ favor_features(y, w).T)
    mean = torch.stack(draws).mean(0)
    assert ((mean - exact).abs() / exact).max() < 0.05
    # a single small draw is clearly noisier than the average: the estimate is random, not exact
    assert ((draws[0] - exact).abs() / exact).max() > ((mean - exact).abs() / exact).max()


def test_performer_error_shrinks_with_more_features():
    q, k, v = qkv(b=1, h=2, n_q=32, d=16, scale=0.6, seed=3)
    exact = scaled_dot_product_attention(q, k, v).output
    err = {}
    for m in (16, 256, 1024):
        errs = [relative_error(performer_attention(q, k, v, orthogonal_random_features(
            m, 16, torch.Generator().manual_seed(s))).output, exact) for s in range(6)]
        err[m] = sum(errs) / len(errs)
    # Monte-Carlo error ~ 1/sqrt(m) (on outputs, the ratio estimator is noisier than that at small m)
    assert err[16] > 1.5 * err[256]
    assert err[256] > 1.1 * err[1024]
    assert err[1024] < 0.3


def test_performer_is_stable_for_large_inputs_and_respects_padding():
    q, k, v = qkv(b=2, n_q=10, d=16, scale=30.0, seed=4)
    w = orthogonal_random_features(64, 16, torch.Generator().manual_seed(0))
    out, weights = performer_attention(q, k, v, w)
    assert weights is None and torch.isfinite(out).all()
    pm = masks.padding_mask([10, 3], 10)
    out_m, _ = performer_attention(q * 0.1, k * 0.1, v, w, mask=pm)
    ref, _ = performer_attention(q[1:] * 0.1, k[1:, :, :3] * 0.1, v[1:, :, :3], w)
    torch.testing.assert_close(out_m[1:], ref, atol=ATOL, rtol=0)


# ---------------------------------------------------------------------------- linformer

def test_linformer_equals_explicit_projection_then_softmax():
    q, k, v = qkv(n_q=20, d_v=4, seed=5)
    g = torch.Generator().manual_seed(0)
    E, Fp = torch.randn(6, 20, generator=g) / 20 ** 0.5, torch.randn(6, 20, generator=g) / 20 ** 0.5
    out, w = linformer_attention(q, k, v, E, Fp)
    kp = torch.einsum("rn,bhnd->bhrd", E, k)
    vp = torch.einsum("rn,bhnd->bhrd", Fp, v)
    torch.testing.assert_close(out, TF.scaled_dot_product_attention(q, kp, vp), atol=ATOL, rtol=0)
    assert w.shape == (2, 3, 20, 6)


def test_linformer_with_identity_projection_is_exact():
    q, k, v = qkv(n_q=15, seed=6)
    eye = torch.eye(15)
    out, _ = linformer_attention(q, k, v, eye, eye)
    torch.testing.assert_close(out, TF.scaled_dot_product_attention(q, k, v), atol=ATOL, rtol=0)


def test_linformer_rejects_wrong_projection_shape():
    q, k, v = qkv(n_q=15)
    with pytest.raises(ValueError):
        linformer_attention(q, k, v, torch.randn(4, 14), torch.randn(4, 14))


# ---------------------------------------------------------------------------- sparse

def test_sparse_attention_equals_torch_sdpa_with_the_pattern():
    n = 23
    q, k, v = qkv(n_q=n, seed=7)
    mask = longformer_mask(n, 2, [0, 7])
    out, w = sparse_attention(q, k, v, mask)
    ref = TF.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    torch.testing.assert_close(out, ref, atol=ATOL, rtol=0)
    assert (w[..., ~mask] == 0).all()


def test_strided_mask_is_the_tutorial_loop():
    n, stride = 13, 4
    ref = torch.zeros(n, n, dtype=torch.bool)
    for i in range(n):                     # the first tutorial's create_sparse_mask
        for j in range(max(0, i - 2), min(n, i + 3)):
            ref[i, j] = True
        for j in range(0, n, stride):
            ref[i, j] = True
    assert torch.equal(strided_sparse_mask(n, stride, 2), ref)


@pytest.mark.parametrize("n,block", [(100, 32), (5, 32), (1, 4), (64, 16)])
def test_block_local_global_any_n(n, block):
    m = block_local_global_mask(n, block, [0])
    i, j = torch.meshgrid(torch.arange(n), torch.arange(n), indexing="ij")
    ref = (i // block == j // block) | (i == 0) | (j == 0)
    assert torch.equal(m, ref)
    q, k, v = qkv(n_q=n)
    out, _ = sparse_attention(q, k, v, m)
    assert torch.isfinite(out).all()


def test_longformer_and_bigbird_patterns():
    n = 40
    lf = longformer_mask(n, 3, [0, 5])
    assert lf[5].all() and lf[:, 5].all() and lf[20, 17] and not lf[20, 16]
    bb = bigbird_mask(n, 3, [0, 5], num_random=4, generator=torch.Generator().manual_seed(0))
    assert (bb | lf).equal(bb)                                # contains window + global
    extra = (bb & ~lf).sum(-1)
    assert (extra <= 4).all() and extra.sum() > 0             # at most num_random new keys per row
    bb2 = bigbird_mask(n, 3, [0, 5], num_random=4, generator=torch.Generator().manual_seed(0))
    assert torch.equal(bb, bb2)
    assert bigbird_mask(3, 1, [0], num_random=10).all()       # more random keys than n: everything


@settings(max_examples=30, deadline=None)
@given(n=st.integers(1, 90), window=st.integers(0, 20), block=st.one_of(st.none(), st.integers(1, 40)),
       seed=st.integers(0, 10_000))
def test_sliding_window_equals_dense_masked_attention(n, window, block, seed):
    q, k, v = qkv(b=1, h=2, n_q=n, seed=seed)
    out, w = sliding_window_attention(q, k, v, window, block=block)
    ref, _ = sparse_attention(q, k, v, masks.local_mask(n, window))
    assert w is None
    torch.testing.assert_close(out, ref, atol=ATOL, rtol=0)


# ---------------------------------------------------------------------------- flash

@settings(max_examples=30, deadline=None)
@given(n_q=st.integers(1, 300), n_k=st.integers(1, 300), block_q=st.integers(8, 128),
       block_k=st.integers(8, 128), causal=st.booleans(), seed=st.integers(0, 10_000))
def test_flash_equals_torch_sdpa(n_q, n_k, block_q, block_k, causal, seed):
    q, k, v = qkv(b=1, h=2, n_q=n_q, n_k=n_k, d=16, d_v=8, seed=seed)
    out, w = flash_attention(q, k, v, block_q=block_q, block_k=block_k, causal=causal)
    assert w is None
    ref = TF.scaled_dot_product_attention(q, k, v, is_causal=causal)
    torch.testing.assert_close(out, ref, atol=ATOL, rtol=0)


def test_flash_tiny_blocks_and_custom_scale():
    q, k, v = qkv(n_q=9, n_k=7, seed=8)
    for causal in (False, True):
        out, _ = flash_attention(q, k, v, block_q=1, block_k=1, causal=causal, scale=0.3)
        ref = TF.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=0.3)
        torch.testing.assert_close(out, ref, atol=ATOL, rtol=0)


def test_flash_trace_records_online_softmax_state():
    n_q, n_k, bq, bk = 10, 13, 4, 5
    q, k, v = qkv(b=1, h=1, n_q=n_q, n_k=n_k, seed=9)
    res = flash_attention(q, k, v, block_q=bq, block_k=bk, causal=True, trace=True)
    assert isinstance(res, FlashAttentionOutput) and isinstance(res, AttentionOutput)
    _, w = res                                                 # still unpacks as (output, weights)
    assert w is None and len(res.trace) == math.ceil(n_q / bq) * math.ceil(n_k / bk)
    scores = (q @ k.transpose(-2, -1)) / math.sqrt(q.size(-1))
    hidden = ~masks.causal_mask(n_q, n_k)
    for t in res.trace:
        assert t.skipped == (t.k_start > t.q_end - 1)           # tile entirely above the diagonal
        # after a tile, m and l are the max / sum over every key seen so far (k < k_end)
        s = scores[..., t.q_start:t.q_end, :t.k_end].masked_fill(hidden[t.q_start:t.q_end, :t.k_end],
                                                                 float("-inf"))
        m_ref = s.amax(-1)
        torch.testing.assert_close(t.row_max, m_ref)
        torch.testing.assert_close(t.row_sum, torch.exp(s - m_ref[..., None]).sum(-1), atol=ATOL, rtol=1e-5)
    assert flash_attention(q, k, v).trace is None


def test_flash_with_no_keys_gives_zeros():
    q, k, v = qkv(n_q=4, n_k=0)
    out, _ = flash_attention(q, k, v)
    assert out.shape == (2, 3, 4, 8) and (out == 0).all()


# ---------------------------------------------------------------------------- effective weights

def _methods(n, d, seed=0):
    g = torch.Generator().manual_seed(seed)
    E, Fp = torch.randn(5, n, generator=g) / n ** 0.5, torch.randn(5, n, generator=g) / n ** 0.5
    proj = orthogonal_random_features(32, d, g)
    pattern = block_local_global_mask(n, 4, [0])
    return [
        ("softmax", {}, lambda q, k, v: scaled_dot_product_attention(q, k, v).output),
        ("flash", {"causal": True}, lambda q, k, v: flash_attention(q, k, v, block_q=3, block_k=5,
                                                                     causal=True).output),
        ("linear", {}, lambda q, k, v: linear_attention(q, k, v).output),
        ("linear", {"causal": True}, lambda q, k, v: linear_attention(q, k, v, causal=True).output),
        ("performer", {"projection": proj}, lambda q, k, v: performer_attention(q, k, v, proj).output),
        ("linformer", {"E": E, "F": Fp}, lambda q, k, v: linformer_attention(q, k, v, E, Fp).output),
        ("sparse", {"mask": pattern}, lambda q, k, v: sparse_attention(q, k, v, pattern).output),
        ("sliding_window", {"window": 2}, lambda q, k, v: sliding_window_attention(q, k, v, 2).output),
    ]


def test_effective_weights_times_v_is_the_output():
    n, d = 12, 8
    q, k, v = qkv(n_q=n, d=d, seed=10, scale=0.7)
    for name, params, run in _methods(n, d):
        w = effective_weights(name, q, k, **params)
        assert w.shape == (2, 3, n, n), name
        torch.testing.assert_close(w @ v, run(q, k, v), atol=ATOL, rtol=0, msg=name)


def test_effective_weights_rejects_unknown():
    q, k, _ = qkv(n_q=3)
    with pytest.raises(ValueError):
        effective_weights("reformer", q, k)
    with pytest.raises(TypeError):
        effective_weights("softmax", q, k, window=3)


@settings(max_examples=25, deadline=None)
@given(n=st.integers(1, 24), scale=st.sampled_from([0.01, 1.0, 10.0, 100.0]), seed=st.integers(0, 10_000))
def test_properties_finite_and_rows_sum_to_one(n, scale, seed):
    d = 8
    q, k, v = qkv(b=1, h=2, n_q=n, d=d, seed=seed, scale=scale)
    for name, params, run in _methods(n, d, seed):
        out = run(q, k, v)
        assert torch.isfinite(out).all(), name
        if name == "linformer":                                 # rows of P F need not sum to 1
            continue
        w = effective_weights(name, q, k, **params)
        assert torch.isfinite(w).all() and (w >= 0).all(), name
        rows = w.sum(-1)
        if (name == "performer" and scale > 1) or (name == "linear" and scale > 10):
            # features underflow for huge inputs (FAVOR+: |x|^2 / sqrt(d) in the hundreds; elu + 1:
            # x < -87): a query can share no non-zero feature with any key, and its row is all
            # zeros (documented), never NaN
            rows = torch.where(rows == 0, torch.ones_like(rows), rows)
        torch.testing.assert_close(rows, torch.ones_like(rows), atol=1e-5, rtol=0, msg=name)


def test_relative_error():
    e = torch.tensor([3.0, 4.0])
    assert relative_error(e, e) == 0.0
    assert relative_error(torch.tensor([3.0, 4.5]), e) == pytest.approx(0.1)
    assert relative_error(torch.zeros(2), torch.zeros(2)) == 0.0


# ---------------------------------------------------------------------------- bench helpers

def test_lra_reference_and_measured_ratios(tmp_path):
    csv = tmp_path / "lra.csv"
    csv.write_text("# comment line\nmodel,seq_len,steps_per_sec,speed_ratio,peak_memory_gb\n"
                   "Transformer,1024,8.1,1.0,0.85\nPerformer,1024,9.5,1.2,0.37\n")
    rows = lra_reference(csv)
    keys = ("model", "seq_len", "steps_per_sec", "speed_ratio", "peak_memory_gb")
    assert rows == [dict(zip(keys, ("Transformer", 1024, 8.1, 1.0, 0.85))),
                    dict(zip(keys, ("Performer", 1024, 9.5, 1.2, 0.37)))]
    bench = {"results": [
        {"method": "full", "n": 1024, "time_s": 0.4, "peak_extra_bytes": 8000},
        {"method": "full", "n": 2048, "time_s": 1.6, "peak_extra_bytes": 32000},
        {"method": "linear", "n": 1024, "time_s": 0.1, "peak_extra_bytes": 1000},
        {"method": "linear", "n": 2048, "time_s": None, "peak_extra_bytes": None, "skipped": "too slow"},
        {"method": "linear", "n": 4096, "time_s": 0.3, "peak_extra_bytes": 4000},
    ]}
    path = tmp_path / "bench.json"
    path.write_text(json.dumps(bench))
    for src in (bench, path):
        r = measured_ratios(src, [1024, 2048, 4096])
        by = {(x["method"], x["n"]): x for x in r}
        assert by[("linear", 1024)]["speed_ratio"] == pytest.approx(4.0)
        assert by[("linear", 1024)]["memory_ratio"] == pytest.approx(0.125)
        assert by[("full", 2048)]["speed_ratio"] == pytest.approx(1.0)
        assert ("linear", 2048) not in by and ("linear", 4096) not in by   # no full baseline at 4096


def test_fit_slope_and_summarise_recover_power_laws():
    ns = [256, 512, 1024, 2048, 4096, 8192]
    assert fit_slope(ns, [3e-9 * n ** 2 for n in ns]) == pytest.approx(2.0)
    assert fit_slope([1, 2], [None, 5.0]) is None
    results = [{"method": "linear", "n": n, "time_s": 1e-6 * n, "wall_time_s": 2e-6 * n,
                "peak_extra_bytes": 100 * n ** 1.5} for n in ns]
    s = summarise(results)["linear"]
    assert s["fit_range"] == [1024, 8192] and s["points"] == 4
    assert s["time_slope"] == pytest.approx(1.0) and s["time_slope_ok"]
    assert s["memory_slope"] == pytest.approx(1.5) and not s["memory_slope_ok"]

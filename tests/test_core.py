"""attention_core foundations against independent oracles (torch built-ins, closed forms)."""
import math

import pytest
import torch
import torch.nn.functional as F
from hypothesis import example, given, settings
from hypothesis import strategies as st

import attention_core as ac

ATOL = 1e-5


# ---------------------------------------------------------------- masks
def loop_mask(n_q, n_k, rule):
    """The tutorials' way: nested Python loops. Used here only as an oracle."""
    m = torch.zeros(n_q, n_k, dtype=torch.bool)
    for i in range(n_q):
        for j in range(n_k):
            m[i, j] = rule(i, j)
    return m


@pytest.mark.parametrize("n_q,n_k", [(1, 1), (5, 5), (3, 7), (7, 3)])
def test_causal_mask_matches_torch_is_causal(n_q, n_k):
    m = ac.causal_mask(n_q, n_k)
    assert torch.equal(m, loop_mask(n_q, n_k, lambda i, j: j <= i))
    q, k, v = torch.randn(1, 1, n_q, 4), torch.randn(1, 1, n_k, 4), torch.randn(1, 1, n_k, 3)
    ours = ac.scaled_dot_product_attention(q, k, v, m).output
    ref = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    assert torch.allclose(ours, ref, atol=ATOL)


def test_padding_mask_shape_and_values():
    m = ac.padding_mask([3, 0, 5], 5)
    assert m.shape == (3, 1, 1, 5)
    assert m[0, 0, 0].tolist() == [True, True, True, False, False]
    assert not m[1].any() and m[2].all()
    with pytest.raises(ValueError):
        ac.padding_mask([6], 5)


@pytest.mark.parametrize("n", [1, 2, 7, 16, 33])
def test_pattern_masks_match_loop_definitions(n):
    for w in (0, 1, 3):
        assert torch.equal(ac.local_mask(n, w), loop_mask(n, n, lambda i, j: abs(i - j) <= w))
        for s in (1, 2, 4):
            assert torch.equal(ac.strided_mask(n, s, w),
                               loop_mask(n, n, lambda i, j: abs(i - j) <= w or j % s == 0))
    for b in (1, 3, 4, 40):
        assert torch.equal(ac.block_mask(n, b), loop_mask(n, n, lambda i, j: i // b == j // b))
    idx = [0, n - 1]
    assert torch.equal(ac.global_tokens_mask(n, idx), loop_mask(n, n, lambda i, j: i in idx or j in idx))


def test_mask_arguments_are_checked():
    for call in (lambda: ac.local_mask(4, -1), lambda: ac.strided_mask(4, 0, 1),
                 lambda: ac.block_mask(4, 0), lambda: ac.global_tokens_mask(4, [4])):
        with pytest.raises(ValueError):
            call()


# ---------------------------------------------------------------- scores and softmax
def test_scores():
    q, k = torch.randn(2, 3, 4, 8), torch.randn(2, 3, 6, 8)
    assert torch.allclose(ac.dot_scores(q, k), torch.einsum("bhid,bhjd->bhij", q, k), atol=ATOL)
    assert torch.allclose(ac.scaled_dot_scores(q, k), ac.dot_scores(q, k) / math.sqrt(8), atol=ATOL)
    assert torch.allclose(ac.scaled_dot_scores(q, k, scale=0.5), ac.dot_scores(q, k) * 0.5, atol=ATOL)


def test_masked_softmax_equals_softmax_without_mask():
    s = torch.randn(3, 5, 7) * 10
    assert torch.allclose(ac.masked_softmax(s), torch.softmax(s, -1), atol=1e-6)


def test_masked_softmax_fully_masked_row_is_zero_not_nan():
    s = torch.randn(2, 4)
    m = torch.tensor([[True, False, True, False], [False] * 4])
    w = ac.masked_softmax(s, m)
    assert torch.equal(w[1], torch.zeros(4))
    assert w[0, 1] == 0 and w[0, 3] == 0
    assert torch.allclose(w[0].sum(), torch.tensor(1.0))
    # the tutorials' way gives NaN on the same row
    naive = torch.softmax(s.masked_fill(~m, float("-inf")), -1)
    assert torch.isnan(naive[1]).all()


# ---------------------------------------------------------------- SDPA
@pytest.mark.parametrize("mask_kind", ["none", "bool", "causal", "padding", "float"])
@pytest.mark.parametrize("scale", [None, 0.3])
def test_sdpa_matches_torch(mask_kind, scale):
    g = torch.Generator().manual_seed(1)
    q, k = torch.randn(2, 3, 5, 8, generator=g), torch.randn(2, 3, 9, 8, generator=g)
    v = torch.randn(2, 3, 9, 4, generator=g)
    mask = {"none": None,
            "bool": torch.rand(2, 3, 5, 9, generator=g) > 0.4,
            "causal": ac.causal_mask(5, 9),
            "padding": ac.padding_mask([9, 4], 9),
            "float": torch.randn(5, 9, generator=g)}[mask_kind]
    if mask is not None and mask.dtype == torch.bool:
        mask = mask.clone()
        mask[..., 0] = True  # torch gives NaN for fully masked rows; keep every row attendable
    out, w = ac.scaled_dot_product_attention(q, k, v, mask, scale=scale)
    ref = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=scale)
    assert torch.allclose(out, ref, atol=ATOL)
    assert w.shape == (2, 3, 5, 9)
    assert torch.allclose(w @ v, out, atol=ATOL)


def test_sdpa_fully_masked_query_gives_zero_output():
    q, k, v = torch.randn(1, 1, 3, 4), torch.randn(1, 1, 3, 4), torch.randn(1, 1, 3, 2)
    m = torch.ones(3, 3, dtype=torch.bool)
    m[1] = False
    out, w = ac.scaled_dot_product_attention(q, k, v, m)
    assert torch.equal(out[0, 0, 1], torch.zeros(2)) and torch.equal(w[0, 0, 1], torch.zeros(3))
    assert torch.isfinite(out).all()


def test_sdpa_dropout_rows_no_longer_sum_to_one():
    torch.manual_seed(3)
    q, k, v = torch.randn(1, 1, 16, 4), torch.randn(1, 1, 16, 4), torch.randn(1, 1, 16, 4)
    _, w = ac.scaled_dot_product_attention(q, k, v, dropout_p=0.5)
    dropped = (w == 0).float().mean().item()
    assert 0.3 < dropped < 0.7  # about half the weights are zeroed ...
    assert not torch.allclose(w.sum(-1), torch.ones(1, 1, 16))  # ... and the survivors are scaled by 2


# ---------------------------------------------------------------- modules
@pytest.mark.parametrize("bias", [True, False])
def test_multihead_from_torch_matches(bias):
    torch.manual_seed(0)
    ref = torch.nn.MultiheadAttention(24, 4, bias=bias, batch_first=True).eval()
    mine = ac.MultiHeadAttention.from_torch(ref).eval()
    q, kv = torch.randn(2, 5, 24), torch.randn(2, 7, 24)
    allowed = torch.rand(5, 7) > 0.3
    allowed[:, 0] = True
    out, w = mine(q, kv, kv, mask=allowed)
    ref_out, ref_w = ref(q, kv, kv, attn_mask=~allowed, average_attn_weights=False)  # torch: True = blocked
    assert torch.allclose(out, ref_out, atol=ATOL)
    assert torch.allclose(w, ref_w, atol=ATOL)
    assert w.shape == (2, 4, 5, 7)
    # key padding: ours (b,1,1,n) True = real key; torch key_padding_mask True = ignore
    lengths = [7, 3]
    out, _ = mine(q, kv, kv, mask=ac.padding_mask(lengths, 7))
    ref_out, _ = ref(q, kv, kv, key_padding_mask=~ac.padding_mask(lengths, 7)[:, 0, 0])
    assert torch.allclose(out, ref_out, atol=ATOL)


def test_multihead_split_merge_roundtrip_and_param_count():
    m = ac.MultiHeadAttention(32, 8)
    x = torch.randn(3, 6, 32)
    assert m.split_heads(x).shape == (3, 8, 6, 4)
    assert torch.equal(m.merge_heads(m.split_heads(x)), x)
    one_head = ac.MultiHeadAttention(32, 1)
    assert m.parameter_count() == one_head.parameter_count() == 4 * (32 * 32 + 32)


def test_multihead_divisibility_error_is_clear():
    with pytest.raises(ac.HeadDivisibilityError) as err:
        ac.MultiHeadAttention(10, 3)
    assert err.value.d_model == 10 and err.value.num_heads == 3
    assert "divisible" in str(err.value)
    assert isinstance(err.value, ValueError)


def test_self_attention_matches_sdpa_with_d_model_scale():
    m = ac.SelfAttention(12).eval()
    x = torch.randn(2, 5, 12)
    out, w = m(x)
    ref = F.scaled_dot_product_attention(m.W_query(x), m.W_key(x), m.W_value(x))
    assert torch.allclose(out, ref, atol=ATOL) and w.shape == (2, 5, 5)


def test_additive_attention_matches_direct_formula_and_mask():
    torch.manual_seed(0)
    att = ac.AdditiveAttention(query_dim=6, key_dim=4, hidden_dim=5)
    q, keys, values = torch.randn(2, 6), torch.randn(2, 7, 4), torch.randn(2, 7, 3)
    mask = ac.padding_mask([7, 4], 7)[:, 0, 0]  # (b, n)
    ctx, w = att(q, keys, values, mask)
    # direct: e_j = v^T tanh(W_q q + W_k k_j)
    wq, wk, v = att.W_query.weight, att.W_key.weight, att.v.weight[0]
    e = torch.stack([torch.stack([v @ torch.tanh(wq @ q[b] + wk @ keys[b, j]) for j in range(7)])
                     for b in range(2)])
    e = e.masked_fill(~mask, float("-inf"))
    ref_w = torch.softmax(e, -1)
    assert torch.allclose(w, ref_w, atol=ATOL)
    assert torch.allclose(ctx, torch.einsum("bn,bnd->bd", ref_w, values), atol=ATOL)
    assert (w[1, 4:] == 0).all()
    # several queries at once
    ctx2, w2 = att(torch.randn(2, 3, 6), keys, values, mask)
    assert ctx2.shape == (2, 3, 3) and w2.shape == (2, 3, 7)


# ---------------------------------------------------------------- positions
@pytest.mark.parametrize("n,d", [(1, 1), (10, 16), (50, 7), (128, 64)])
def test_sinusoidal_encoding_closed_form(n, d):
    pe = ac.sinusoidal_encoding(n, d)
    assert pe.shape == (n, d)
    for pos in range(0, n, max(1, n // 7)):
        for i in range(d):
            angle = pos / 10000 ** ((i - i % 2) / d)
            expect = math.sin(angle) if i % 2 == 0 else math.cos(angle)
            assert abs(pe[pos, i].item() - expect) < 1e-6


def test_sinusoidal_matches_tutorial_code_for_even_d():
    n, d = 20, 16  # the first tutorial's PositionalEncoding, run as written
    pe = torch.zeros(n, d)
    position = torch.arange(0, n, dtype=torch.float).unsqueeze(1)
    div_term = torch.exp(torch.arange(0, d, 2).float() * (-torch.log(torch.tensor(10000.0)) / d))
    pe[:, 0::2] = torch.sin(position * div_term)
    pe[:, 1::2] = torch.cos(position * div_term)
    assert torch.allclose(ac.sinusoidal_encoding(n, d), pe, atol=1e-5)


# ---------------------------------------------------------------- diagnostics
def test_entropy_and_max_weight_closed_forms():
    n = 8
    uniform = torch.full((n,), 1 / n)
    onehot = torch.zeros(n)
    onehot[3] = 1
    assert abs(ac.attention_entropy(uniform).item() - math.log(n)) < 1e-6
    assert ac.attention_entropy(onehot).item() == 0
    assert ac.max_weight(uniform).item() == pytest.approx(1 / n)
    assert ac.sparsity(onehot).item() == pytest.approx((n - 1) / n)


def mp_jacobian_norm(scores) -> float:
    """Oracle in high precision (mpmath): softmax, then J = diag(p) - p p^T, then ||J||_F. A saturated row has
    its top weight within e^-gap of 1 (gap = top score minus the next): J's entries p (1 - p) need about
    gap / ln 10 + 20 digits, or the oracle itself loses them (at a fixed 60 digits it was off by 3e-9 for
    a gap of 123)."""
    import mpmath
    top = sorted((float(x) for x in scores), reverse=True)
    gap = top[0] - top[1] if len(top) > 1 else 0.0
    mpmath.mp.dps = 40 + int(gap / math.log(10))
    e = [mpmath.exp(mpmath.mpf(float(x))) for x in scores]
    total = mpmath.fsum(e)
    p = [x / total for x in e]
    return float(mpmath.sqrt(mpmath.fsum(((p[i] if i == j else 0) - p[i] * p[j]) ** 2
                                         for i in range(len(p)) for j in range(len(p)))))


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 12), st.floats(0.01, 60), st.integers(0, 2**31 - 1))
@example(4, 41.0, 165334638)            # a top weight within 3e-54 of 1: found by hypothesis in CI
def test_softmax_jacobian_norm_matches_oracles(n, temp, seed):
    s = torch.randn(n, dtype=torch.float64, generator=torch.Generator().manual_seed(seed)) * temp
    p = torch.softmax(s, -1)
    ours = ac.softmax_jacobian_norm(p).item()
    # relative agreement with a high-precision oracle, also for saturated rows (no cancellation)
    assert ours == pytest.approx(mp_jacobian_norm(s.tolist()), rel=1e-9, abs=1e-300)
    # and with autograd's Jacobian (itself computes 1 - p_i, so only absolutely close when saturated)
    jac = torch.autograd.functional.jacobian(lambda x: torch.softmax(x, -1), s)
    assert ours == pytest.approx(torch.linalg.matrix_norm(jac).item(), rel=1e-7, abs=1e-12)


def test_jacobian_vanishes_when_saturated():
    flat = ac.softmax_jacobian_norm(torch.softmax(torch.tensor([0.1, 0.0, -0.1, 0.05]), -1))
    sharp = ac.softmax_jacobian_norm(torch.softmax(torch.tensor([40.0, 0.0, -10.0, 5.0]), -1))
    assert sharp < 1e-6 < flat


# ---------------------------------------------------------------- properties
masks_and_scores = st.integers(1, 9).flatmap(lambda n_q: st.integers(1, 9).flatmap(
    lambda n_k: st.tuples(st.just(n_q), st.just(n_k),
                          st.lists(st.booleans(), min_size=n_q * n_k, max_size=n_q * n_k),
                          st.integers(0, 2**31 - 1), st.floats(0.0, 50.0))))


@settings(max_examples=80, deadline=None)
@given(masks_and_scores)
def test_properties_rows_sum_masked_zero_no_nan(args):
    n_q, n_k, bits, seed, spread = args
    g = torch.Generator().manual_seed(seed)
    mask = torch.tensor(bits).reshape(n_q, n_k)
    q, k = torch.randn(2, n_q, 4, generator=g) * spread, torch.randn(2, n_k, 4, generator=g)
    v = torch.randn(2, n_k, 3, generator=g)
    out, w = ac.scaled_dot_product_attention(q, k, v, mask)
    assert torch.isfinite(out).all() and torch.isfinite(w).all()
    assert (w[:, ~mask] == 0).all()                                   # masked keys weigh exactly 0
    visible = mask.any(-1)
    sums = w.sum(-1)
    assert torch.allclose(sums[:, visible], torch.ones_like(sums[:, visible]), atol=1e-5)
    assert (sums[:, ~visible] == 0).all()                            # no visible key -> zero row
    assert (w >= 0).all()


@settings(max_examples=30, deadline=None)
@given(st.integers(2, 10), st.integers(0, 10_000))
def test_self_attention_is_permutation_equivariant(n, seed):
    torch.manual_seed(seed)
    m = ac.MultiHeadAttention(16, 4).eval()
    x = torch.randn(1, n, 16)
    perm = torch.randperm(n)
    out, w = m(x)
    out_p, w_p = m(x[:, perm])
    assert torch.allclose(out_p, out[:, perm], atol=ATOL)
    assert torch.allclose(w_p, w[:, :, perm][:, :, :, perm], atol=ATOL)

"""Attention analysis: statistics per head, JS distance, pattern gallery, rollout, PCA."""
import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from attention_core.analysis import (
    PATTERNS,
    attention_rollout,
    classify_head,
    classify_heads,
    head_entropy,
    head_similarity,
    head_sparsity,
    js_distance,
    pca_2d,
    qk_geometry,
    synthetic_pattern,
)

try:
    from scipy.spatial.distance import jensenshannon
except ImportError:  # pragma: no cover - scipy is optional
    jensenshannon = None


def _rows(seed, shape):
    g = torch.Generator().manual_seed(seed)
    return torch.softmax(2 * torch.randn(*shape, generator=g, dtype=torch.float64), dim=-1)


# ---- head statistics ----

def test_head_entropy_and_sparsity_oracle():
    w = _rows(0, (3, 4, 6, 6)).float()                          # (b, h, n, n)
    wn = w.numpy().astype(np.float64)
    ent = -(wn * np.log(wn)).sum(-1)                             # no zeros in a softmax
    torch.testing.assert_close(head_entropy(w), torch.tensor(ent.mean(axis=(0, 2)), dtype=torch.float32))
    torch.testing.assert_close(head_entropy(w, normalize=True),
                               torch.tensor(ent.mean(axis=(0, 2)) / math.log(6), dtype=torch.float32))
    sp = (wn < 0.2).mean(axis=(0, 2, 3))
    torch.testing.assert_close(head_sparsity(w, 0.2), torch.tensor(sp, dtype=torch.float32))
    # a list of layers -> (L, h)
    layers = [w, _rows(1, (3, 4, 6, 6)).float()]
    e = head_entropy(layers)
    assert e.shape == (2, 4)
    torch.testing.assert_close(e[1], head_entropy(layers[1]))
    assert head_sparsity(layers).shape == (2, 4)
    # one head (h, n, n)
    assert head_entropy(w[0]).shape == (4,)


def test_head_entropy_extremes_and_zero_rows():
    eye = torch.eye(5).expand(2, 5, 5).clone()                  # two one-hot heads
    uni = torch.full((2, 5, 5), 0.2)
    torch.testing.assert_close(head_entropy(eye), torch.zeros(2))
    torch.testing.assert_close(head_entropy(uni), torch.full((2,), math.log(5)))
    w = uni.clone()
    w[:, 4] = 0                                                  # a query with nothing visible
    torch.testing.assert_close(head_entropy(w), torch.full((2,), math.log(5)))


# ---- Jensen-Shannon ----

def _js_numpy(p, q):
    # independent formula: JS divergence = H(m) - (H(p) + H(q)) / 2, base 2
    def h(x):
        x = x[x > 0]
        return -(x * np.log2(x)).sum()
    m = (p + q) / 2
    return math.sqrt(max(h(m) - (h(p) + h(q)) / 2, 0.0))


@settings(max_examples=40, deadline=None)
@given(n=st.integers(1, 12), seed=st.integers(0, 10_000), zeros=st.booleans())
def test_js_distance_oracle_and_properties(n, seed, zeros):
    p, q = _rows(seed, (2, n)).unbind(0)
    if zeros and n > 1:
        p = p.clone()
        p[0] = 0
        p = p / p.sum()
    d = js_distance(p, q).item()
    if jensenshannon is not None:
        assert d == pytest.approx(float(jensenshannon(p.numpy(), q.numpy(), base=2)), abs=1e-7)
    assert d == pytest.approx(_js_numpy(p.numpy(), q.numpy()), abs=1e-7)
    assert 0.0 <= d <= 1.0
    assert js_distance(q, p).item() == pytest.approx(d, abs=1e-12)
    assert js_distance(p, p).item() == 0.0


def test_js_distance_disjoint_and_batched():
    p = torch.tensor([[1.0, 0, 0], [0.5, 0.5, 0]])
    q = torch.tensor([[0.0, 0, 1], [0.5, 0.5, 0]])
    torch.testing.assert_close(js_distance(p, q), torch.tensor([1.0, 0.0]))


def test_head_similarity():
    w = torch.stack([synthetic_pattern("diagonal", 6), synthetic_pattern("diagonal", 6),
                     synthetic_pattern("vertical", 6, index=5), synthetic_pattern("broad", 6)])
    s = head_similarity(w)
    assert s.shape == (4, 4)
    torch.testing.assert_close(s, s.T)
    torch.testing.assert_close(torch.diagonal(s), torch.zeros(4))
    assert s[0, 1] == 0
    # direct oracle: mean over rows of the row-wise distance
    for i in range(4):
        for j in range(4):
            expect = np.mean([_js_numpy(w[i, r].double().numpy(), w[j, r].double().numpy()) for r in range(6)])
            assert s[i, j].item() == pytest.approx(expect, abs=1e-6)
    # diagonal vs vertical on the last token: rows disjoint except the last
    assert s[0, 2].item() == pytest.approx(5 / 6, abs=1e-6)
    assert head_similarity(w[None].expand(3, -1, -1, -1)).shape == (4, 4)


# ---- the pattern gallery ----

@pytest.mark.parametrize("n", [3, 4, 5, 7, 8, 10, 13])
def test_synthetic_patterns_are_row_stochastic_and_classified_as_themselves(n):
    for name in PATTERNS:
        kws = [{}]
        if name == "vertical":
            kws = [{"index": 0}, {"index": n - 1}, {"index": n // 2}]
        if name == "block":
            kws = [{}, {"block": 2}, {"block": max(2, n - 1)}]        # includes non-divisors of n
        for kw in kws:
            w = synthetic_pattern(name, n, **kw)
            assert w.shape == (n, n)
            torch.testing.assert_close(w.sum(-1), torch.ones(n))
            label, scores = classify_head(w)
            assert label == name, (n, name, kw, scores)
            assert scores[name] == pytest.approx(1.0, abs=1e-6)
            assert set(scores) == set(PATTERNS) and all(0 <= v <= 1 + 1e-6 for v in scores.values())


def test_noisy_patterns_mostly_classified_right():
    hits = total = 0
    for n in (6, 8, 11):
        for name in PATTERNS:
            for seed in range(4):
                for noise in (0.15, 0.3):
                    w = synthetic_pattern(name, n, noise=noise, seed=seed, index=1)
                    torch.testing.assert_close(w.sum(-1), torch.ones(n))
                    hits += classify_head(w)[0] == name
                    total += 1
    assert hits / total >= 0.9, (hits, total)


def test_classify_heads_and_validation():
    w = torch.stack([synthetic_pattern(p, 6) for p in PATTERNS])
    assert [lab for lab, _ in classify_heads(w)] == list(PATTERNS)
    noisy = torch.stack([synthetic_pattern(p, 7, noise=0.3, seed=i) for i, p in enumerate(PATTERNS)])
    for (lab, sc), head in zip(classify_heads(noisy), noisy):       # batched == one at a time
        lab1, sc1 = classify_head(head)
        assert lab == lab1 and sc == pytest.approx(sc1, abs=1e-9)
    with pytest.raises(ValueError):
        synthetic_pattern("zigzag", 5)
    with pytest.raises(ValueError):
        classify_heads(w[0])
    with pytest.raises(ValueError):
        synthetic_pattern("broad", 4, noise=1.5)


def test_classify_ignores_all_zero_rows():
    w = synthetic_pattern("previous", 6).clone()
    w[3] = 0
    assert classify_head(w)[0] == "previous"


# ---- attention rollout ----

def _rollout_direct(layers, add_residual):
    # numpy, explicit loops over layers and rows
    n = layers[0].shape[-1]
    r = np.eye(n)
    for w in layers:
        a = w.numpy().astype(np.float64).mean(axis=0)
        if add_residual:
            a = a + np.eye(n)
        for i in range(n):
            a[i] = a[i] / a[i].sum()
        r = a @ r
    return r


@pytest.mark.parametrize("add_residual", [True, False])
def test_rollout_matches_direct_and_rows_sum_to_one(add_residual):
    layers = [_rows(s, (4, 7, 7)).float() for s in range(3)]              # (h, n, n) per layer
    r = attention_rollout(layers, add_residual=add_residual)
    assert r.shape == (7, 7)
    torch.testing.assert_close(r.double(), torch.tensor(_rollout_direct(layers, add_residual)),
                               atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(r.sum(-1), torch.ones(7))
    # batched input and the cumulative stack
    batched = [torch.stack([w, w.flip(-1)]) for w in layers]               # (2, h, n, n)
    rb = attention_rollout(batched, add_residual=add_residual, cumulative=True)
    assert rb.shape == (3, 2, 7, 7)
    torch.testing.assert_close(rb[-1, 0], r)
    torch.testing.assert_close(rb[0, 0], attention_rollout(layers[:1], add_residual=add_residual))
    with pytest.raises(ValueError):
        attention_rollout([])


def test_rollout_of_identity_layers_is_identity():
    eye = torch.eye(5).expand(4, 5, 5)
    torch.testing.assert_close(attention_rollout([eye, eye]), torch.eye(5))


# ---- PCA and query/key geometry ----

def test_pca_matches_covariance_eigendecomposition():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(40, 6, generator=g) @ torch.diag(torch.tensor([5.0, 3.0, 1.0, 0.5, 0.2, 0.1]))
    p = pca_2d(x)
    xn = x.numpy().astype(np.float64)
    xc = xn - xn.mean(0)
    vals, vecs = np.linalg.eigh(np.cov(xc, rowvar=False))
    order = np.argsort(vals)[::-1]
    vals, vecs = vals[order], vecs[:, order]
    for i in range(2):
        # same direction up to sign
        assert abs(float(np.dot(p.components[i].numpy(), vecs[:, i]))) == pytest.approx(1.0, abs=1e-5)
    torch.testing.assert_close(p.explained_variance_ratio.double(), torch.tensor(vals[:2] / vals.sum()),
                               atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(p.coords.double(), torch.tensor(xc @ p.components.numpy().T.astype(np.float64)),
                               atol=1e-4, rtol=1e-5)
    # deterministic sign: largest loading positive
    assert all(c[c.abs().argmax()] > 0 for c in p.components)
    torch.testing.assert_close(p.coords.mean(0), torch.zeros(2), atol=1e-5, rtol=0)


def test_pca_degenerate_inputs():
    assert pca_2d(torch.randn(5, 1)).coords.shape == (5, 2)
    one = pca_2d(torch.randn(1, 4))
    assert one.coords.shape == (1, 2) and torch.all(one.coords == 0)
    assert torch.isfinite(pca_2d(torch.zeros(3, 4)).coords).all()


def test_qk_geometry_uses_one_shared_plane():
    g = torch.Generator().manual_seed(1)
    q, k, v = torch.randn(5, 8, generator=g), torch.randn(7, 8, generator=g), torch.randn(7, 8, generator=g)
    geo = qk_geometry(q, k, v)
    assert geo.queries.shape == (5, 2) and geo.keys.shape == (7, 2) and geo.values.shape == (7, 2)
    joint = pca_2d(torch.cat([q, k]))
    torch.testing.assert_close(torch.cat([geo.queries, geo.keys]), joint.coords)
    torch.testing.assert_close(geo.scores, q @ k.T / math.sqrt(8))
    torch.testing.assert_close(geo.values, pca_2d(v).coords)
    assert qk_geometry(q, k).values is None
    with pytest.raises(ValueError):
        qk_geometry(q, torch.randn(7, 4))


def test_pattern_scores_equal_the_js_distance_definition():
    """The classifier computes JS in float32, in chunks (bounded memory); it must agree with js_distance's float64
    KL form, and give the same labels, on random heads of every sharpness and on the exact templates (whose ties
    it keeps)."""
    from attention_core import analysis as an
    g = torch.Generator().manual_seed(0)

    def by_definition(weights):
        w = weights.to(torch.float64)
        total = w.sum(-1, keepdim=True)
        live = (total > 0).squeeze(-1).to(torch.float64)
        w = w / torch.where(total > 0, total, torch.ones_like(total))
        temps, owner = an._all_candidates(w.shape[-1])
        temps = temps.to(torch.float64)
        d = an.js_distance(w[:, None], temps[None])
        mean_d = (d * live[:, None]).sum(-1) / live.sum(-1, keepdim=True).clamp_min(1)
        best = torch.full((w.shape[0], len(an.PATTERNS)), float("inf"), dtype=torch.float64)
        return 1.0 - best.scatter_reduce(1, owner.expand(w.shape[0], -1), mean_d, reduce="amin")

    for n in (1, 2, 3, 7, 13, 24):
        heads = [torch.softmax(torch.randn(8, n, n, generator=g) / tau, -1) for tau in (0.05, 0.5, 3.0)]
        heads.append(torch.stack([an._candidates(name, n)[0] for name in an.PATTERNS]))
        for x in heads:
            fast, slow = an._scores_batch(x), by_definition(x)
            torch.testing.assert_close(fast, slow, rtol=0, atol=1e-7)
            labels = [[an._label(dict(zip(an.PATTERNS, row))) for row in s.tolist()] for s in (fast, slow)]
            assert labels[0] == labels[1]

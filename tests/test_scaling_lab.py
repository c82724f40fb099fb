"""attention_core.labs.scaling: Var(q.k) = d_k, softmax saturation and its Jacobian, temperature.

Oracles: the definition of variance for sums of independent products, torch.softmax,
torch.autograd.functional.jacobian, torch.distributions.Categorical(...).entropy().
"""
import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from attention_core.labs import scaling as sl
from attention_core.labs.scaling import (
    D_K_MAX,
    D_K_STEPS,
    STRIP_D_K,
    SWEEP_D_K,
    TEMPERATURES,
    attention_weights,
    naive_softmax,
    overflow_rows,
    sample_qk,
    saturation_curves,
    saturation_stats,
    saturation_sweep,
    score_scale,
    sweep_scores,
    temperature_curve,
    variance_sweep,
)


def _jacobian_norm_oracle(scores_row: torch.Tensor) -> float:
    jac = torch.autograd.functional.jacobian(lambda s: torch.softmax(s, dim=-1), scores_row)
    return float(torch.linalg.matrix_norm(jac))


def test_grids():
    assert D_K_STEPS == tuple(2 ** i for i in range(11)) and D_K_STEPS[-1] == D_K_MAX
    assert set(D_K_STEPS) <= set(SWEEP_D_K) and set(STRIP_D_K) <= set(D_K_STEPS)
    assert list(SWEEP_D_K) == sorted(set(SWEEP_D_K)) and SWEEP_D_K[0] == 1 and SWEEP_D_K[-1] == 1024
    assert math.sqrt(D_K_MAX) in TEMPERATURES and 1.0 in TEMPERATURES


def test_sample_qk_shapes_nesting_and_seed():
    q8, k8 = sample_qk(5, 7, 8, seed=3)
    q64, k64 = sample_qk(5, 7, 64, seed=3)
    assert q8.shape == (5, 8) and k8.shape == (7, 8) and q8.dtype == torch.float64
    torch.testing.assert_close(q64[:, :8], q8, rtol=0, atol=0)   # the same vectors gain dimensions
    torch.testing.assert_close(k64[:, :8], k8, rtol=0, atol=0)
    q_again, _ = sample_qk(5, 7, 8, seed=3)
    assert torch.equal(q_again, q8)
    assert not torch.equal(sample_qk(5, 7, 8, seed=4)[0], q8)
    for bad in (0, D_K_MAX + 1):
        with pytest.raises(ValueError):
            sample_qk(2, 2, bad, seed=0)


def test_sample_qk_unit_variance_entries():
    q, k = sample_qk(256, 256, 1024, seed=0)
    for x in (q, k):
        assert abs(float(x.mean())) < 0.01 and abs(float(x.var()) - 1) < 0.01


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_variance_of_raw_dot_product_is_d_k(seed):
    sweep = variance_sweep(seed)
    n = sweep.dots.shape[1]
    assert sweep.d_k == D_K_STEPS and sweep.dots.shape == (len(D_K_STEPS), 2048)
    for d, dots, v_raw, v_scaled in zip(sweep.d_k, sweep.dots, sweep.var_raw, sweep.var_scaled):
        # Var(q.k) = d: sum of d independent products of variance 1; kurtosis of q.k is 3 + 6/d,
        # so the sample variance has relative s.d. sqrt((2 + 6/d)/n): allow 4 of them.
        tol = 4 * math.sqrt((2 + 6 / d) / n)
        assert abs(float(v_raw) / d - 1) < tol, (d, float(v_raw))
        assert abs(float(v_scaled) - 1) < tol, (d, float(v_scaled))
        torch.testing.assert_close(v_raw, dots.var())
        torch.testing.assert_close(v_scaled, (dots / math.sqrt(d)).var())
        assert abs(float(dots.mean())) < 4 * math.sqrt(d / n)


def test_variance_sweep_nested_prefix_sums():
    # q.k at d_k = 2 minus q.k at d_k = 1 is one product q_2 k_2: variance 1 (independent of the first)
    sweep = variance_sweep(5, d_ks=(1, 2, 1024))
    step = sweep.dots[1] - sweep.dots[0]
    assert abs(float(step.var()) - 1) < 4 * math.sqrt(8 / 2048)
    assert abs(float(torch.corrcoef(torch.stack([step, sweep.dots[0]]))[0, 1])) < 0.1


def test_sweep_scores_are_dot_products_of_sample_qk():
    scores = sweep_scores(7, d_ks=(1, 16, 1024), n_q=6, n_k=5)
    q, k = sample_qk(6, 5, 1024, seed=7)
    for i, d in enumerate((1, 16, 1024)):
        torch.testing.assert_close(scores[i], q[:, :d] @ k[:, :d].T, rtol=1e-12, atol=1e-12)


def test_score_scale_and_temperature_identity():
    assert score_scale(64) == pytest.approx(1 / 8)
    assert score_scale(64, scaled=False) == 1.0
    assert score_scale(64, True, 2.0) == pytest.approx(1 / 16)
    with pytest.raises(ValueError):
        score_scale(64, True, 0.0)
    q, k = sample_qk(9, 11, 256, seed=1)
    # dividing by sqrt(d_k) IS the temperature tau = sqrt(d_k)
    torch.testing.assert_close(attention_weights(q, k, score_scale(256, False, 16.0)),
                               attention_weights(q, k, score_scale(256, True, 1.0)), rtol=0, atol=1e-15)
    torch.testing.assert_close(attention_weights(q, k, 0.125), torch.softmax(q @ k.T * 0.125, dim=-1))


@pytest.mark.parametrize("temperature", [0.25, 1.0, 8.0])
def test_saturation_curves_match_autograd_and_categorical(temperature):
    d_ks = (1, 8, 64, 1024)
    scores = sweep_scores(2, d_ks, n_q=24, n_k=10)
    sweep = saturation_curves(scores, d_ks, temperature)
    for i, d in enumerate(d_ks):
        for scaled, stats in ((False, sweep.unscaled), (True, sweep.scaled)):
            s = scores[i] / (temperature * (math.sqrt(d) if scaled else 1.0))
            p = torch.softmax(s, dim=-1)
            jac = torch.tensor([_jacobian_norm_oracle(row) for row in s], dtype=torch.float64)
            ent = torch.distributions.Categorical(probs=p).entropy()
            # median of 24 rows: torch returns the lower middle value, i.e. the 12th smallest
            assert float(stats.jacobian_norm[i]) == pytest.approx(float(jac.sort().values[11]), abs=1e-7,
                                                                  rel=1e-6)
            assert float(stats.entropy[i]) == pytest.approx(float(ent.sort().values[11]), abs=1e-9)
            assert float(stats.max_weight[i]) == pytest.approx(float(p.max(-1).values.sort().values[11]),
                                                               abs=1e-12)


def test_gradient_vanishes_without_scaling_and_not_with_it():
    sweep = saturation_sweep(0)
    last = len(sweep.d_k) - 1
    assert sweep.d_k[0] == 1 and sweep.d_k[last] == 1024
    # at d_k = 1 the two are the same computation
    torch.testing.assert_close(sweep.unscaled.jacobian_norm[0], sweep.scaled.jacobian_norm[0])
    assert float(sweep.unscaled.jacobian_norm[last]) < 1e-2 * float(sweep.scaled.jacobian_norm[last])
    assert float(sweep.unscaled.max_weight[last]) > 0.99
    # scaled: the score distribution does not depend on d_k, so neither do the diagnostics (roughly)
    flat = math.log(16)
    assert torch.all((sweep.scaled.jacobian_norm > 0.2) & (sweep.scaled.jacobian_norm < 0.4))
    assert torch.all((sweep.scaled.entropy > 0.7 * flat) & (sweep.scaled.entropy <= flat))


def test_temperature_knob():
    scores = sweep_scores(0, (64,), n_q=1, n_k=16)[0, 0]
    taus = torch.logspace(-3, 3, 25, dtype=torch.float64)
    curve = temperature_curve(scores, taus)
    assert torch.all(curve[1:] <= curve[:-1] + 1e-12)          # hotter is flatter
    assert float(curve[0]) == pytest.approx(1.0, abs=1e-9)      # tau -> 0: argmax
    assert float(curve[-1]) == pytest.approx(1 / 16, abs=1e-3)  # tau -> inf: uniform
    # the scaled curve is the unscaled curve moved by a factor sqrt(d_k) along tau
    torch.testing.assert_close(temperature_curve(scores / 8, taus), temperature_curve(scores, taus * 8))
    both = temperature_curve(torch.stack([scores, scores / 8]), taus)          # batched rows
    assert both.shape == (2, 25)
    torch.testing.assert_close(both[1], temperature_curve(scores / 8, taus))


def test_naive_softmax_overflows_but_masked_softmax_does_not():
    s = torch.tensor([[100.0, 0.0, -5.0], [1.0, 2.0, 3.0]])
    assert torch.isnan(naive_softmax(s)[0]).any()                     # exp(100) = inf in float32
    torch.testing.assert_close(naive_softmax(s)[1], torch.softmax(s[1], -1))
    assert torch.isnan(naive_softmax(torch.tensor([12.0, 0.0], dtype=torch.float16))).any()
    scores = sweep_scores(0, (1024,), n_q=64, n_k=16)[0]
    assert overflow_rows(scores, score_scale(1024, False), torch.float16) > 32
    assert overflow_rows(scores, score_scale(1024, True), torch.float16) == 0
    expected = int(torch.isnan(torch.exp(scores.half()) / torch.exp(scores.half()).sum(-1, keepdim=True))
                   .any(-1).sum())
    assert overflow_rows(scores, 1.0, torch.float16) == expected


@settings(max_examples=40, deadline=None)
@given(st.lists(st.floats(-60, 60), min_size=2, max_size=12), st.integers(1, 4))
def test_saturation_stats_property(row, n_rows):
    s = torch.tensor([row] * n_rows, dtype=torch.float64)
    p = torch.softmax(s, dim=-1)
    stats = saturation_stats(p)
    n = len(row)
    assert 1 / n - 1e-12 <= float(stats.max_weight) <= 1 + 1e-12
    assert -1e-12 <= float(stats.entropy) <= math.log(n) + 1e-9
    assert float(stats.jacobian_norm) == pytest.approx(_jacobian_norm_oracle(s[0]), abs=1e-7, rel=1e-6)


def test_softmax_view_is_softmax_of_the_scaled_scores_and_follows_the_row():
    """The page's one-call view: heatmap rows, the strip (row at d_k = 1..1024, both ways) and the temperature
    curve equal torch.softmax of the raw scores times the documented scale. Under 0.1 s."""
    scores = sl.sweep_scores(3, sl.SWEEP_D_K, 20, 6)
    taus = torch.tensor([0.5, 1.0, 4.0])
    view = sl.softmax_view(scores, 64, 2.0, True, 5, 8, taus)
    raw = scores[sl.SWEEP_D_K.index(64)]
    assert torch.allclose(view.weights, torch.softmax(raw[:8] / (2.0 * 8), -1), atol=1e-12)
    for m, scaled in enumerate((False, True)):
        for c, d in enumerate(sl.STRIP_D_K):
            expect = torch.softmax(scores[sl.SWEEP_D_K.index(d), 5] / (2.0 * (math.sqrt(d) if scaled else 1)), -1)
            assert torch.allclose(view.strip[m, c], expect, atol=1e-12)
    for m, row in enumerate((raw[5], raw[5] / 8)):
        expect = torch.stack([torch.softmax(row / tau, -1).max() for tau in taus])
        assert torch.allclose(view.curves[m], expect, atol=1e-12)
    counts = sl.overflow_counts(raw, 64)
    assert counts.nan16_raw == sl.overflow_rows(raw, 1.0, torch.float16)
    assert counts.nan32_scaled == sl.overflow_rows(raw, 1 / 8, torch.float32)

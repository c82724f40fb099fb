"""attention_core.labs.qkv against independent oracles (numpy kernels, torch SDPA, hand-written formulas)."""
import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from attention_core.diagnostics import attention_entropy
from attention_core.labs.qkv import (
    KEY_AXES,
    LIBRARY,
    VALUE_AXES,
    additive_score_bound,
    check_against_reference,
    compare_similarities,
    effective_neighbours,
    gaussian_kernel_scores,
    kernel_regression_data,
    library_arrays,
    library_attention,
    make_additive,
    nadaraya_watson,
    neuron_view,
    normalisation_pitfalls,
    qkv_step_through,
    query_grid,
    true_function,
)
from attention_core.text import tokenize
from ui.qkv_state import parse_number_table

SENTENCE = tokenize("The animal didn't cross the street because it was too tired.")


# --- kernel regression ----------------------------------------------------------------------

def _nw_oracle(xq, xt, yt, h):
    """Nadaraya-Watson with an explicit Gaussian kernel in float64: sum K y / sum K."""
    d = xq[:, None] - xt[None, :]
    kern = np.exp(-d ** 2 / (2 * h ** 2)) / (math.sqrt(2 * math.pi) * h)
    w = kern / kern.sum(axis=1, keepdims=True)
    return w @ yt, w


@pytest.mark.parametrize("h", [0.2, 0.5, 1.0, 3.0])
def test_nadaraya_watson_matches_the_explicit_kernel_average(h):
    x, y = kernel_regression_data(30, 0.5, seed=3)
    xq = query_grid(41)
    out, w = nadaraya_watson(xq, x, y, h)
    ref_out, ref_w = _nw_oracle(xq.double().numpy(), x.double().numpy(), y.double().numpy(), h)
    np.testing.assert_allclose(w.numpy(), ref_w, atol=1e-5)
    np.testing.assert_allclose(out.numpy(), ref_out, atol=1e-5)
    np.testing.assert_allclose(w.sum(-1).numpy(), 1.0, atol=1e-6)


def test_tiny_bandwidth_picks_the_nearest_point_without_nan():
    x, y = kernel_regression_data(20, 0.5, seed=1)
    xq = query_grid(41)
    out, w = nadaraya_watson(xq, x, y, 1e-3)
    assert torch.isfinite(w).all() and torch.isfinite(out).all()
    nearest = (xq[:, None] - x[None, :]).abs().argmin(dim=1)
    assert torch.equal(w.argmax(dim=1), nearest)
    np.testing.assert_allclose(out.numpy(), y[nearest].numpy(), atol=1e-4)


def test_huge_bandwidth_gives_the_mean_of_the_targets():
    x, y = kernel_regression_data(25, 0.5, seed=2)
    out, w = nadaraya_watson(query_grid(11), x, y, 1e4)
    np.testing.assert_allclose(out.numpy(), float(y.mean()), atol=1e-4)
    np.testing.assert_allclose(effective_neighbours(w).numpy(), 25.0, rtol=1e-4)


def test_kernel_scores_formula_and_bad_bandwidth():
    xq, xt = torch.tensor([0.0, 1.0]), torch.tensor([0.0, 2.0, 3.0])
    s = gaussian_kernel_scores(xq, xt, 0.5)
    assert torch.allclose(s, torch.tensor([[0.0, -8.0, -18.0], [-2.0, -2.0, -8.0]]))
    with pytest.raises(ValueError):
        gaussian_kernel_scores(xq, xt, 0.0)


def test_data_is_reproducible_sorted_and_in_range():
    a, b = kernel_regression_data(40, 0.3, seed=7), kernel_regression_data(40, 0.3, seed=7)
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])
    assert (a[0][1:] >= a[0][:-1]).all() and a[0].min() >= 0 and a[0].max() <= 5
    x, y = kernel_regression_data(40, 0.0, seed=7)
    np.testing.assert_allclose(y.numpy(), (2 * np.sin(x.numpy()) + x.numpy() ** 0.8), atol=1e-5)
    assert not torch.equal(kernel_regression_data(40, 0.3, seed=8)[0], a[0])
    assert torch.allclose(true_function(torch.tensor([0.0])), torch.tensor([0.0]))


def test_effective_neighbours_bounds():
    w = torch.tensor([[1.0, 0.0, 0.0, 0.0], [0.25, 0.25, 0.25, 0.25], [0.5, 0.5, 0.0, 0.0]])
    assert torch.allclose(effective_neighbours(w), torch.tensor([1.0, 4.0, 2.0]))


# --- the library -----------------------------------------------------------------------------

def test_library_shapes_and_defaults():
    keys, values = library_arrays()
    assert keys.shape == (len(LIBRARY), len(KEY_AXES)) and values.shape == (len(LIBRARY), len(VALUE_AXES))
    assert len({b.id for b in LIBRARY}) == len(LIBRARY)


@settings(max_examples=60, deadline=None)
@given(q=st.lists(st.floats(-3, 3), min_size=3, max_size=3),
       kv=st.lists(st.lists(st.floats(-10, 10), min_size=6, max_size=6), min_size=1, max_size=8))
def test_library_attention_matches_numpy(q, kv):
    arr = np.array(kv)
    keys, values = arr[:, :3], arr[:, 3:]
    r = library_attention(q, keys, values)
    s = keys @ np.array(q)
    e = np.exp(s - s.max())
    w = e / e.sum()
    np.testing.assert_allclose(r.scores.numpy(), s, atol=1e-9)
    np.testing.assert_allclose(r.weights.numpy(), w, atol=1e-9)
    np.testing.assert_allclose(r.output.numpy(), w @ values, atol=1e-8)
    np.testing.assert_allclose(r.contributions.sum(0).numpy(), r.output.numpy(), atol=1e-9)
    norms = np.linalg.norm(q) * np.linalg.norm(keys, axis=1)
    cos = np.where(norms > 0, s / np.where(norms > 0, norms, 1), 0.0)
    np.testing.assert_allclose(r.cosines.numpy(), cos, atol=1e-9)


def test_changing_a_value_does_not_change_the_weights():
    keys, values = library_arrays()
    a = library_attention([2, 2, 0], keys, values)
    values2 = values.copy()
    values2[0] = [100, 100, 100]
    b = library_attention([2, 2, 0], keys, values2)
    assert torch.equal(a.weights, b.weights) and not torch.equal(a.output, b.output)


def test_longer_query_sharpens_the_weights():
    keys, values = library_arrays()
    small, big = library_attention([1, 1, 0], keys, values), library_attention([2, 2, 0], keys, values)
    assert big.weights.max() > small.weights.max()
    assert big.weights.argmax() == small.weights.argmax()


def test_parse_number_table_flags_every_unusable_cell():
    rows = [[1, "2.5", None], ["abc", float("inf"), ""], [float("nan"), True, 1e9], [-3, 0, "  4 "]]
    arr, bad = parse_number_table(rows, limit=100)
    assert bad == [(0, 2), (1, 0), (1, 1), (1, 2), (2, 0), (2, 1), (2, 2)]
    np.testing.assert_array_equal(arr[3], [-3.0, 0.0, 4.0])
    assert arr[0, 1] == 2.5


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(st.floats(-100, 100, allow_nan=False), min_size=3, max_size=3), max_size=6))
def test_parse_number_table_keeps_good_numbers(rows):
    arr, bad = parse_number_table(rows, limit=100)
    assert bad == []
    np.testing.assert_array_equal(arr, np.array(rows, dtype=np.float64).reshape(len(rows), -1 if rows else 0))


# --- step-through ----------------------------------------------------------------------------

@pytest.mark.parametrize("d_model,d_k", [(32, 8), (8, 8), (4, 16)])
def test_step_through_matches_torch_sdpa(d_model, d_k):
    st_ = qkv_step_through(SENTENCE, d_model, d_k, seed=5)
    n = len(SENTENCE)
    assert st_.x.shape == (n, d_model) and st_.q.shape == (n, d_k) and st_.weights.shape == (n, n)
    ref = F.scaled_dot_product_attention(st_.q[None], st_.k[None], st_.v[None])[0]
    np.testing.assert_allclose(st_.output.numpy(), ref.numpy(), atol=1e-5)
    np.testing.assert_allclose(st_.scores.numpy(), (st_.q @ st_.k.T).numpy(), atol=1e-5)
    np.testing.assert_allclose(st_.scaled.numpy(), st_.scores.numpy() / math.sqrt(d_k), atol=1e-5)
    np.testing.assert_allclose(st_.weights.numpy(), torch.softmax(st_.scaled, -1).numpy(), atol=1e-6)
    np.testing.assert_allclose(st_.q.numpy(), (st_.x @ st_.w_q).numpy(), atol=1e-5)
    assert check_against_reference(st_) < 1e-5


def test_step_through_is_deterministic_and_repeats_equal_tokens():
    a, b = qkv_step_through(SENTENCE, 16, 4, seed=1), qkv_step_through(SENTENCE, 16, 4, seed=1)
    assert torch.equal(a.weights, b.weights)
    i, j = SENTENCE.index("The"), SENTENCE.index("the")   # case is ignored by embed_tokens
    assert torch.equal(a.weights[i], a.weights[j])
    assert not torch.equal(qkv_step_through(SENTENCE, 16, 4, seed=2).weights, a.weights)


def test_one_token_attends_to_itself_with_weight_one():
    st_ = qkv_step_through(["hi"], 8, 4)
    assert st_.weights.shape == (1, 1) and float(st_.weights[0, 0]) == pytest.approx(1.0)
    assert torch.allclose(st_.output, st_.v)


def test_neuron_view_adds_up_to_the_score():
    st_ = qkv_step_through(SENTENCE, 32, 8, seed=0)
    for i, j in [(7, 1), (0, 0), (11, 5)]:
        products, total = neuron_view(st_.q[i], st_.k[j])
        assert products.shape == (8,)
        np.testing.assert_allclose(products.numpy(), (st_.q[i] * st_.k[j]).numpy())
        assert float(total) == pytest.approx(float(st_.scores[i, j]), abs=1e-5)


def test_normalisation_pitfalls_flatten_the_weights():
    st_ = qkv_step_through(SENTENCE, 32, 8, seed=0)
    p = normalisation_pitfalls(st_)
    ref = torch.softmax(st_.scores / math.sqrt(32), -1)
    np.testing.assert_allclose(p.sqrt_d_model.numpy(), ref.numpy(), atol=1e-6)
    twice = torch.softmax(torch.softmax(st_.scaled, -1), -1)
    np.testing.assert_allclose(p.softmax_twice.numpy(), twice.numpy(), atol=1e-6)
    h = attention_entropy
    assert (h(p.sqrt_d_model) >= h(p.correct) - 1e-5).all()     # higher temperature never sharpens
    assert (h(p.softmax_twice) >= h(p.correct) - 1e-5).all()
    # weights in [0, 1] go through exp again: the largest ratio inside a row is at most e
    ratio = p.softmax_twice.max(-1).values / p.softmax_twice.min(-1).values
    assert (ratio <= math.e + 1e-4).all()
    same = normalisation_pitfalls(qkv_step_through(SENTENCE, 8, 8, seed=0))
    assert torch.allclose(same.sqrt_d_model, same.correct)          # no bug visible when d_k == d_model


# --- three similarity functions --------------------------------------------------------------

def test_compare_similarities_against_hand_written_formulas():
    st_ = qkv_step_through(SENTENCE, 16, 8, seed=0)
    res = compare_similarities(st_.q, st_.k, hidden=5, seed=3)
    m = make_additive(8, 8, 5, seed=3)
    wq, wk, v = (p.detach().double().numpy() for p in (m.W_query.weight, m.W_key.weight, m.v.weight))
    q, k = st_.q.double().numpy(), st_.k.double().numpy()
    hid = np.tanh((q @ wq.T)[:, None, :] + (k @ wk.T)[None, :, :])   # (n_q, n_k, 5)
    np.testing.assert_allclose(res["additive"].scores.numpy(), (hid @ v[0]), atol=1e-5)
    np.testing.assert_allclose(res["dot"].scores.numpy(), q @ k.T, atol=1e-4)
    np.testing.assert_allclose(res["scaled"].scores.numpy(), q @ k.T / math.sqrt(8), atol=1e-4)
    assert res["additive"].parameters == 5 * (8 + 8 + 1)
    assert res["dot"].parameters == 0 and res["scaled"].parameters == 0
    for r in res.values():
        np.testing.assert_allclose(r.weights.sum(-1).numpy(), 1.0, atol=1e-6)
    assert res["additive"].scores.abs().max() <= additive_score_bound(5, 3, 8, 8) + 1e-6


def test_make_additive_leaves_the_global_random_state_alone():
    torch.manual_seed(11)
    expected = torch.rand(3)
    torch.manual_seed(11)
    compare_similarities(torch.randn(2, 4, generator=torch.Generator().manual_seed(0)),
                         torch.randn(3, 4, generator=torch.Generator().manual_seed(1)), hidden=4)
    assert torch.equal(torch.rand(3), expected)


def test_dot_saturates_with_large_d_k_and_scaling_does_not():
    st_ = qkv_step_through(SENTENCE, 32, 512, seed=0)
    res = compare_similarities(st_.q, st_.k, hidden=16)
    assert res["dot"].weights.max(-1).values.mean() > 0.8
    assert res["scaled"].weights.max(-1).values.mean() < 0.6


def test_kernel_lesson_is_nadaraya_watson_on_its_grid():
    from attention_core.labs.qkv import kernel_lesson, query_grid

    k = kernel_lesson(30, 0.5, 2, 0.4, 41)
    x, y = kernel_regression_data(30, 0.5, 2)
    pred, w = nadaraya_watson(query_grid(41), x, y, 0.4)
    np.testing.assert_allclose(k.weights, w.numpy(), atol=1e-7)
    np.testing.assert_allclose(k.pred, pred.numpy(), atol=1e-6)
    np.testing.assert_allclose(k.neighbours, 1 / (w.numpy() ** 2).sum(-1), rtol=1e-5)
    assert k.rmse == pytest.approx(float(np.sqrt(((k.fit - k.truth) ** 2).mean())), rel=1e-5)

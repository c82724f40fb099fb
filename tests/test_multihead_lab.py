"""attention_core.labs.multihead against independent oracles: torch.nn.MultiheadAttention with copied
weights, per-head SDPA on weight slices, the closed-form parameter count vs the module's parameters,
and the planted heads' positions checked directly on their weights."""
import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn

from attention_core.analysis import classify_heads
from attention_core.labs.multihead import (
    MODES,
    RECIPES,
    build_mha,
    model_input,
    nearest_d_models,
    nearest_head_counts,
    parameter_count,
    planted_recipes,
    position_dims,
    random_mha,
    structured_mha,
    trace_mha,
)
from attention_core.modules import HeadDivisibilityError, MultiHeadAttention
from attention_core.positional import sinusoidal_encoding
from attention_core.text import tokenize

SENTENCE = tokenize("The animal didn't cross the street because it was too tired.")


def _torch_copy(mine: MultiHeadAttention) -> nn.MultiheadAttention:
    t = nn.MultiheadAttention(mine.d_model, mine.num_heads, batch_first=True)
    with torch.no_grad():
        t.in_proj_weight.copy_(torch.cat([mine.W_query.weight, mine.W_key.weight, mine.W_value.weight]))
        t.in_proj_bias.copy_(torch.cat([mine.W_query.bias, mine.W_key.bias, mine.W_value.bias]))
        t.out_proj.weight.copy_(mine.W_output.weight)
        t.out_proj.bias.copy_(mine.W_output.bias)
    return t.eval()


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("d_model,heads", [(64, 8), (32, 4), (12, 3), (16, 16), (30, 5)])
def test_trace_matches_torch_multihead_attention(mode, d_model, heads):
    mha, _ = build_mha(mode, d_model, heads, seed=3)
    x = model_input(SENTENCE, d_model, seed=3)
    tr = trace_mha(mha, x)
    ref_out, ref_w = _torch_copy(mha)(x, x, x, need_weights=True, average_attn_weights=False)
    torch.testing.assert_close(tr.weights, ref_w, atol=1e-5, rtol=1e-4)
    torch.testing.assert_close(tr.output, ref_out, atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(tr.output, mha(x).output, atol=1e-6, rtol=0)


def test_trace_shapes_and_concat_is_head_outputs_side_by_side():
    mha = random_mha(64, 8, seed=1)
    x = model_input(SENTENCE, 64)
    tr = trace_mha(mha, x)
    n = len(SENTENCE)
    assert tr.x.shape == tr.q_proj.shape == tr.concat.shape == tr.output.shape == (1, n, 64)
    assert tr.q.shape == tr.k.shape == tr.v.shape == tr.heads.shape == (1, 8, n, 8)
    assert tr.scores.shape == tr.weights.shape == (1, 8, n, n)
    torch.testing.assert_close(tr.concat, torch.cat(tr.heads.unbind(1), dim=-1))
    # head i uses the i-th block of d_k columns of the projections
    torch.testing.assert_close(tr.q[0, 3], tr.q_proj[0, :, 24:32])


@pytest.mark.parametrize("mode", MODES)
def test_each_head_is_sdpa_on_its_slice_of_the_weights(mode):
    d_model, h = 48, 6
    mha, _ = build_mha(mode, d_model, h, seed=5)
    x = model_input(SENTENCE, d_model, seed=5)[0]
    tr = trace_mha(mha, x[None])
    d_k = d_model // h
    for i in range(h):
        rows = slice(i * d_k, (i + 1) * d_k)
        q = x @ mha.W_query.weight[rows].T + mha.W_query.bias[rows]
        k = x @ mha.W_key.weight[rows].T + mha.W_key.bias[rows]
        v = x @ mha.W_value.weight[rows].T + mha.W_value.bias[rows]
        ref = torch.nn.functional.scaled_dot_product_attention(q[None], k[None], v[None])[0]
        torch.testing.assert_close(tr.heads[0, i], ref.detach(), atol=1e-5, rtol=1e-4)


@given(st.integers(1, 96), st.integers(1, 24))
@settings(max_examples=60, deadline=None)
def test_parameter_count_equals_module_and_one_big_head(d_model, heads):
    if d_model % heads:
        with pytest.raises(HeadDivisibilityError):
            parameter_count(d_model, heads)
        with pytest.raises(HeadDivisibilityError):
            MultiHeadAttention(d_model, heads)
        return
    count = parameter_count(d_model, heads)
    assert count.total == MultiHeadAttention(d_model, heads).parameter_count()
    assert count.total == MultiHeadAttention(d_model, 1).parameter_count() == 4 * (d_model ** 2 + d_model)
    assert count.per_head == 3 * (d_model * count.d_k + count.d_k) and count.qkv == heads * count.per_head
    assert parameter_count(d_model, heads, bias=False).total == 4 * d_model ** 2


@given(st.integers(1, 300), st.integers(1, 40))
@settings(max_examples=80, deadline=None)
def test_nearest_head_counts_are_the_closest_divisors(d_model, heads):
    near = nearest_head_counts(d_model, heads)
    divisors = [h for h in range(1, d_model + 1) if d_model % h == 0]
    assert all(d_model % h == 0 and h != heads for h in near)
    below = [h for h in divisors if h < heads]
    above = [h for h in divisors if h > heads]
    assert near == ([max(below)] if below else []) + ([min(above)] if above else [])
    assert all(h <= 8 for h in nearest_head_counts(d_model, heads, max_heads=8))


def test_nearest_examples():
    assert nearest_head_counts(64, 6) == [4, 8]
    assert nearest_head_counts(62, 8) == [2, 31]
    assert nearest_head_counts(62, 8, max_heads=16) == [2]
    assert nearest_d_models(62, 8) == [56, 64]
    assert nearest_d_models(250, 32, max_d=256) == [224, 256]
    assert nearest_d_models(5, 8) == [8]
    assert all(v % 7 == 0 for v in nearest_d_models(100, 7))


def test_model_input_words_and_positions_side_by_side():
    toks = ["the", "cat", "the"]
    for d in (4, 7, 64):
        x = model_input(toks, d, seed=2)
        p = position_dims(d)
        assert x.shape == (1, 3, d) and p % 2 == 0 and 0 < p < d
        torch.testing.assert_close(x[0, :, d - p:], sinusoidal_encoding(3, p))
        torch.testing.assert_close(x[0, 0, :d - p], x[0, 2, :d - p])   # same word, same embedding
        assert not torch.equal(x[0, 0], x[0, 2])                         # different positions


@pytest.mark.parametrize("n", [2, 5, 12, 40, 64])
def test_structured_heads_attend_where_they_were_built_to(n):
    toks = [f"w{i % 7}" for i in range(n)]
    mha, recipes = structured_mha(64, 8, seed=0)
    assert recipes == list(RECIPES)
    w = trace_mha(mha, model_input(toks, 64))[8][0]                     # weights (h, n, n)
    i = torch.arange(n)
    target = {
        "previous": (i - 1).clamp_min(0), "next": (i + 1).clamp_max(n - 1), "self": i,
        "first": torch.zeros(n, dtype=torch.long), "local": i,
        "previous_2": (i - 2).clamp_min(0),
    }
    for h, recipe in enumerate(recipes):          # rows 0, 1 may have no token at offset -1 / -2
        if recipe in ("broad", "random"):
            continue
        assert torch.equal(w[h].argmax(-1)[2:], target[recipe][2:]), recipe
        if recipe != "local" and n > 2:
            assert w[h, 2:].max(-1).values.min() > 0.9, recipe
    torch.testing.assert_close(w[recipes.index("broad")], torch.full((n, n), 1.0 / n))
    # the random head is exactly the random model's head
    rand = trace_mha(random_mha(64, 8, seed=0), model_input(toks, 64))[8][0]
    torch.testing.assert_close(w[recipes.index("random")], rand[recipes.index("random")])


def test_offset_heads_depend_only_on_the_offset():
    """Planted scores are translation invariant: scores[i, j] == scores[i + 1, j + 1]."""
    mha, recipes = structured_mha(32, 4, seed=1)
    s = trace_mha(mha, model_input([str(i) for i in range(30)], 32, seed=1)).scores[0]
    for h, recipe in enumerate(recipes):
        if recipe in ("previous", "self", "next"):
            torch.testing.assert_close(s[h, 1:, 1:], s[h, :-1, :-1], atol=1e-3, rtol=1e-4)


def test_classifier_recovers_the_planted_heads():
    mha, recipes = structured_mha(64, 8, seed=0)
    labels = [label for label, _ in classify_heads(trace_mha(mha, model_input(SENTENCE, 64))[8][0])]
    expect = {"previous": "previous", "next": "next", "self": "diagonal", "first": "vertical",
              "broad": "broad"}
    for recipe, label in zip(recipes, labels):
        if recipe in expect:
            assert label == expect[recipe], (recipe, label)


def test_smaller_heads_are_blurrier():
    """The low-rank bottleneck: with d_k = 2 a planted head cannot be as sharp as with d_k = 8."""
    sharp = {}
    for heads in (8, 32):
        mha, recipes = structured_mha(64, heads, seed=0)
        w = trace_mha(mha, model_input(SENTENCE, 64))[8][0]
        sharp[heads] = w[recipes.index("previous")].max(-1).values.mean().item()
    assert sharp[8] > 0.95 and sharp[32] < sharp[8] - 0.2


def test_recipes_that_do_not_fit_are_left_random():
    assert planted_recipes(4, 1) == ["random", "first", "random", "random"]
    assert planted_recipes(3, 4, p=0) == ["random", "random", "random"]
    assert planted_recipes(5, 4, p=0)[4] == "broad"
    mha, recipes = structured_mha(8, 8, seed=0)                      # d_k = 1
    w = trace_mha(mha, model_input(SENTENCE, 8))[8][0]
    assert torch.equal(w[recipes.index("first")].argmax(-1), torch.zeros(len(SENTENCE), dtype=torch.long))


def test_random_weights_reproducible_and_seeded():
    a, b, c = random_mha(16, 4, 1), random_mha(16, 4, 1), random_mha(16, 4, 2)
    assert torch.equal(a.W_query.weight, b.W_query.weight)
    assert not torch.equal(a.W_query.weight, c.W_query.weight)
    assert not torch.equal(a.W_query.weight, a.W_key.weight)
    with pytest.raises(HeadDivisibilityError):
        random_mha(10, 3)
    with pytest.raises(ValueError):
        build_mha("trained", 8, 2)


@given(st.sampled_from(MODES), st.integers(4, 64), st.integers(1, 16), st.integers(1, 64), st.integers(0, 9))
@settings(max_examples=40, deadline=None)
def test_any_valid_setting_gives_finite_stochastic_weights(mode, d_model, heads, n, seed):
    if d_model % heads:
        return
    mha, recipes = build_mha(mode, d_model, heads, seed)
    assert len(recipes) == heads
    tr = trace_mha(mha, model_input([f"t{i % 5}" for i in range(n)], d_model, seed))
    assert torch.isfinite(tr.output).all() and torch.isfinite(tr.weights).all()
    torch.testing.assert_close(tr.weights.sum(-1), torch.ones(1, heads, n), atol=1e-5, rtol=0)
    assert math.isclose(tr.scores.shape[-1], n)


def test_heads_lesson_and_averaging_facts_against_direct_computations():
    """The page's one cached computation: the weights are the module's, the average is their mean, and the
    nearest / farthest heads and the averaging facts are what a brute-force search over the JS matrix gives."""
    import numpy as np

    from attention_core.labs import multihead as lab

    tokens = tuple(tokenize("The animal didn't cross the street because it was too tired."))
    r = lab.heads_lesson(tokens, 64, 8, 0, "structured")
    mha, _ = lab.build_mha("structured", 64, 8, 0)
    _, w = mha(lab.model_input(list(tokens), 64, 0))
    np.testing.assert_allclose(r.weights, w[0].detach().numpy(), atol=1e-6)
    np.testing.assert_allclose(r.average, r.weights.mean(0), atol=1e-6)
    assert r.shapes["view"] == (1, len(tokens), 8, 8) and r.shapes["concat"] == (1, len(tokens), 64)
    assert r.params[8].total == r.module_params[8] == r.params[1].total
    head, query = 2, tokens.index("it")
    f = lab.averaging_facts(r, head, query)
    pairs = {(a, b): r.js[a, b] for a in range(8) for b in range(8) if a != b}
    near, far = min(pairs, key=pairs.get), max(pairs, key=pairs.get)
    assert (f.nearest.distance, f.farthest.distance) == pytest.approx((pairs[near], pairs[far]))
    assert f.key == int(r.weights[head, query].argmax()) and f.w_avg == pytest.approx(r.average[query, f.key])
    one = lab.heads_lesson(tokens, 64, 1, 0, "random")
    assert lab.averaging_facts(one, 0, 0).nearest is None

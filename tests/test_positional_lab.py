"""attention_core.labs.positional against independent oracles (Python ints, numpy, explicit rotations)."""
import math

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from attention_core.labs.positional import (
    EMBEDDING_RECIPES,
    ENCODINGS,
    additive_score,
    additive_score_grid,
    attend_with_positions,
    binary_counter,
    bits_for,
    closest_bit,
    cosine_grid,
    curve_gap,
    embedding_scale,
    frequencies,
    make_self_attention,
    offset_curves,
    periods,
    position_table,
    random_qk,
    relative_dot,
    rotary_score,
    rotary_score_grid,
    shuffle_permutation,
    shuffle_test,
    toeplitz_gap,
    tutorial_error,
    tutorial_positional_encoding,
)
from attention_core.positional import rotary_matrix, sinusoidal_encoding
from attention_core.text import tokenize

SENTENCE = tokenize("The animal didn't cross the street because it was too tired.")


def _pe_numpy(n, d, base=10000.0):
    # the formula of the paper, one cell at a time
    pe = np.zeros((n, d))
    for pos in range(n):
        for j in range(d):
            i2 = j - j % 2
            angle = pos / base ** (i2 / d)
            pe[pos, j] = math.sin(angle) if j % 2 == 0 else math.cos(angle)
    return pe


# --- 1. frequencies and the counter -----------------------------------------------------------

@pytest.mark.parametrize("d", [1, 2, 7, 64])
def test_frequencies_and_periods(d):
    w = frequencies(d)
    assert w.shape == (math.ceil(d / 2),)
    np.testing.assert_allclose(w.numpy(), [10000.0 ** (-2 * i / d) for i in range(math.ceil(d / 2))])
    np.testing.assert_allclose(periods(d).numpy(), 2 * math.pi / w.numpy())
    # column 2i of the table really has that period: PE[p + T, 2i] == PE[p, 2i] for integer-ish T
    pe = _pe_numpy(80, d)
    assert np.allclose(pe[:, 0], np.sin(np.arange(80) * float(w[0])))


@given(n=st.integers(1, 300))
def test_binary_counter_matches_python_bits(n):
    bits = binary_counter(n)
    assert bits.shape == (n, bits_for(n))
    for p in (0, n - 1, n // 2):
        assert [int(b) for b in bits[p]] == [(p >> b) & 1 for b in range(bits_for(n))]
        assert sum(int(b) << i for i, b in enumerate(bits[p])) == p           # it really counts
    assert 2 ** bits_for(n) >= n and (n <= 2 or 2 ** (bits_for(n) - 1) < n)


def test_counter_bit_b_flips_every_2_to_the_b():
    bits = binary_counter(64)
    for b in range(6):
        flips = (bits[1:, b] != bits[:-1, b]).nonzero().flatten() + 1
        assert torch.equal(flips, torch.arange(2 ** b, 64, 2 ** b))


def test_closest_bit():
    assert closest_bit(2.0) == 0 and closest_bit(4.0) == 1 and closest_bit(6.28) == 2
    assert closest_bit(0.5) == 0 and closest_bit(1000.0) == 9


# --- 2. similarity by offset ------------------------------------------------------------------

@pytest.mark.parametrize("d", [2, 16, 64])
def test_relative_dot_closed_form_matches_table(d):
    pe = torch.tensor(_pe_numpy(40, d))
    gram = pe @ pe.T
    for m in (0, 7, 20):
        k = torch.arange(40) - m
        torch.testing.assert_close(gram[m], relative_dot(k, d), atol=1e-9, rtol=0)
    with pytest.raises(ValueError):
        relative_dot(torch.arange(3), 5)


def test_offset_curves_coincide_for_even_d_not_for_odd():
    even = offset_curves(sinusoidal_encoding(48, 64), [5, 30])
    assert even[0].reference == 5 and int(even[0].offsets[0]) == -5
    torch.testing.assert_close(even[1].dots, (sinusoidal_encoding(48, 64).double() @
                                              sinusoidal_encoding(48, 64).double().T)[30])
    assert curve_gap(even[0], even[1]) < 1e-5                                 # float32 table
    # odd d: the lone last sin column adds sin(m w) sin(n w), which is not a function of n - m
    for d in (3, 63):
        odd = offset_curves(sinusoidal_encoding(48, d), [5, 30])
        w = float(frequencies(d)[-1])
        k = np.arange(-5, 18)                                                # offsets both curves have
        lone = np.sin(5 * w) * np.sin((5 + k) * w) - np.sin(30 * w) * np.sin((30 + k) * w)
        assert abs(curve_gap(odd[0], odd[1]) - np.abs(lone).max()) < 1e-5
    assert curve_gap(*offset_curves(sinusoidal_encoding(48, 3), [5, 30])) > 1e-3
    # no common offsets -> 0
    a = offset_curves(sinusoidal_encoding(3, 4), [0])[0]
    far = a._replace(offsets=a.offsets + 100)
    assert curve_gap(a, far) == 0.0


# --- 3. the shuffle test ------------------------------------------------------------------------

@given(n=st.integers(1, 40), seed=st.integers(0, 10_000))
def test_shuffle_permutation_is_a_permutation_and_moves(n, seed):
    p = shuffle_permutation(n, seed)
    assert sorted(p.tolist()) == list(range(n))
    if n > 1:
        assert not torch.equal(p, torch.arange(n))
    assert torch.equal(p, shuffle_permutation(n, seed))


def _attention_oracle(x, attn):
    # torch's own SDPA on the module's projections (scale 1/sqrt(d))
    q, k, v = attn.W_query(x), attn.W_key(x), attn.W_value(x)
    return torch.nn.functional.scaled_dot_product_attention(q[None], k[None], v[None])[0]


def test_attend_with_positions_matches_torch_sdpa():
    d = 16
    x = torch.randn(7, d)
    attn = make_self_attention(d, seed=3)
    with torch.no_grad():
        for enc in ("none", "sinusoidal", "learned"):
            table = position_table(enc, 7, d, seed=3)
            ref = _attention_oracle(x if table is None else x + table, attn)
            out = attend_with_positions(x, attn, enc, table)
            torch.testing.assert_close(out.output, ref, atol=1e-5, rtol=1e-5)
            torch.testing.assert_close(out.weights.sum(-1), torch.ones(7))
        # rotary: rotate q and k with explicit block matrices R(m), then torch SDPA
        q, k, v = attn.W_query(x), attn.W_key(x), attn.W_value(x)
        rq = torch.stack([rotary_matrix(m, d).float() @ q[m] for m in range(7)])
        rk = torch.stack([rotary_matrix(m, d).float() @ k[m] for m in range(7)])
        ref = torch.nn.functional.scaled_dot_product_attention(rq[None], rk[None], v[None])[0]
        torch.testing.assert_close(attend_with_positions(x, attn, "rotary").output, ref, atol=1e-5, rtol=1e-5)
    with pytest.raises(ValueError):
        attend_with_positions(x, attn, "sinusoidal", None)


def test_shuffle_test_equivariant_only_without_positions():
    gaps = {enc: shuffle_test(SENTENCE, 32, enc, seed=0, shuffle_seed=1) for enc in ENCODINGS}
    r = gaps["none"]
    assert float(r.gap.max()) < 1e-5                                          # equivariant
    # the weights permute too: W_shuffled = P W P^T
    p = r.perm
    torch.testing.assert_close(r.shuffled.weights, r.original.weights[p][:, p], atol=1e-6, rtol=0)
    assert float(gaps["sinusoidal"].gap.max()) > 0.1
    assert float(gaps["rotary"].gap.max()) > 0.1
    assert 1e-4 < float(gaps["learned"].gap.max()) < float(gaps["sinusoidal"].gap.max())  # tiny table
    # the gap is the definition, recomputed
    torch.testing.assert_close(r.gap, (r.shuffled.output - r.original.output[p]).abs().amax(-1))


def test_gain_scales_scores_by_its_square():
    x = torch.randn(6, 8)
    a1, a2 = make_self_attention(8, seed=1), make_self_attention(8, seed=1, gain=2.0)
    with torch.no_grad():
        s1 = a1.W_query(x) @ a1.W_key(x).T
        s2 = a2.W_query(x) @ a2.W_key(x).T
        torch.testing.assert_close(s2, 4 * s1, atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(a2.W_value(x), a1.W_value(x))
    sharp = shuffle_test(SENTENCE, 32, "none", gain=2.0)
    flat = shuffle_test(SENTENCE, 32, "none")
    def peak(r):
        return float(r.original.weights.max(-1).values.mean())
    assert peak(sharp) > peak(flat)
    assert float(sharp.gap.max()) < 1e-5


def test_shuffle_test_edge_cases():
    one = shuffle_test(["word"], 8, "sinusoidal")
    assert one.perm.tolist() == [0] and float(one.gap.max()) == 0.0
    with pytest.raises(ValueError):
        shuffle_test([], 8, "none")
    with pytest.raises(ValueError):
        shuffle_test(SENTENCE, 7, "rotary")
    with pytest.raises(ValueError):
        position_table("alibi", 4, 8)


def test_learned_table_is_seeded_and_small_and_leaves_global_rng_alone():
    torch.manual_seed(123)
    before = torch.random.get_rng_state()
    a, b = position_table("learned", 10, 16, seed=4), position_table("learned", 10, 16, seed=4)
    assert torch.equal(torch.random.get_rng_state(), before)
    torch.testing.assert_close(a, b)
    assert 0.005 < float(a.std()) < 0.05
    assert position_table("none", 10, 16) is None and position_table("rotary", 10, 16) is None


# --- 4. learned vs sinusoidal vs rotary ---------------------------------------------------------

def test_rotary_score_grid_depends_on_offset_only():
    q, k = random_qk(16, seed=2)
    grid = rotary_score_grid(q, k, 20)
    # oracle: explicit rotation matrices, R(m) q . R(j) k
    for m, j in ((0, 0), (3, 11), (19, 2)):
        ref = float((rotary_matrix(m, 16) @ q) @ (rotary_matrix(j, 16) @ k))
        assert abs(float(grid[m, j]) - ref) < 1e-9
        assert abs(rotary_score(q, k, m, j) - ref) < 1e-9
        assert abs(rotary_score(q, k, m + 1000, j + 1000) - ref) < 1e-7         # shift both: same score
    assert toeplitz_gap(grid) < 1e-9
    assert toeplitz_gap(additive_score_grid(q, k, 20)) > 0.5                  # adding PE is not relative
    add = additive_score_grid(q, k, 20)
    assert abs(float(add[3, 11]) - additive_score(q, k, 3, 11)) < 1e-9


def test_random_qk_match():
    q, k = random_qk(4096, seed=1, match=0.8)
    assert abs(float(q @ k / (q.norm() * k.norm())) - 0.8) < 0.03
    q0, k0 = random_qk(4096, seed=1, match=0.0)
    assert abs(float(q0 @ k0 / (q0.norm() * k0.norm()))) < 0.05
    torch.testing.assert_close(q, q0)
    # a matching key: the rotary score peaks at offset 0 (the diagonal of the grid)
    q, k = random_qk(16, seed=0)
    grid = rotary_score_grid(q, k, 24)
    assert float(grid.diagonal().min()) >= float(grid.max()) - 1e-9


def test_toeplitz_gap_oracle():
    t = torch.tensor([[1.0, 2.0, 3.0], [4.0, 1.0, 2.0], [5.0, 4.0, 1.0]])
    assert toeplitz_gap(t) == 0.0
    t[2, 1] = 7.0
    assert toeplitz_gap(t) == 3.0
    assert toeplitz_gap(torch.ones(1, 1)) == 0.0


def test_cosine_grid():
    pe = sinusoidal_encoding(12, 8)
    c = cosine_grid(pe)
    rows = pe.numpy()
    ref = np.array([[np.dot(a, b) / np.linalg.norm(a) / np.linalg.norm(b) for b in rows] for a in rows])
    np.testing.assert_allclose(c.numpy(), ref, atol=1e-6)
    assert toeplitz_gap(cosine_grid(sinusoidal_encoding(24, 16))) < 1e-5      # sinusoidal: relative
    assert toeplitz_gap(cosine_grid(position_table("learned", 24, 16))) > 0.5  # untrained table: not


# --- 5. pitfalls --------------------------------------------------------------------------------

@pytest.mark.parametrize("d", [2, 8, 64])
def test_tutorial_table_equals_ours_for_even_d(d):
    torch.testing.assert_close(tutorial_positional_encoding(30, d), sinusoidal_encoding(30, d),
                               atol=1e-5, rtol=0)
    assert tutorial_error(30, d) is None


@pytest.mark.parametrize("d", [3, 7, 63])
def test_tutorial_table_breaks_for_odd_d_ours_does_not(d):
    with pytest.raises(RuntimeError):
        tutorial_positional_encoding(30, d)
    msg = tutorial_error(30, d)
    assert msg and str(d // 2) in msg
    np.testing.assert_allclose(sinusoidal_encoding(30, d).numpy(), _pe_numpy(30, d), atol=1e-6)


def test_embedding_scale_recipes():
    d = 256
    res = {r: embedding_scale(r, d, n=64) for r in EMBEDDING_RECIPES}
    pe_norm = math.sqrt(d / 2)                                  # sin^2 + cos^2 = 1 per column pair
    assert abs(res["default_init"].position_norm - pe_norm) < 1e-6
    assert abs(res["default_init"].token_norm / d - 1) < 0.05           # sqrt(d) * sqrt(d)
    assert abs(res["default_init"].ratio - 1 / math.sqrt(2 * d)) < 0.01   # positions ~ 4% of the tokens
    assert abs(res["small_init"].ratio - math.sqrt(0.5)) < 0.05
    assert abs(res["no_scale"].ratio - res["scale_after"].ratio) < 1e-9
    assert abs(res["scale_after"].position_norm - pe_norm * math.sqrt(d)) < 1e-6
    with pytest.raises(ValueError):
        embedding_scale("other", 8)


def test_encoding_table_and_similarity_grids_are_their_parts():
    """The page's two cached computations are the documented functions, assembled (under 0.1 s)."""
    from attention_core.labs import positional as pl
    table = pl.encoding_table(10, 6, 100.0)
    assert torch.equal(table.pe, sinusoidal_encoding(10, 6, 100.0)) and table.bits.shape == (10, 4)
    assert torch.allclose(table.periods, 2 * math.pi * 100.0 ** (torch.arange(0, 6, 2, dtype=torch.float64) / 6))
    grids = pl.similarity_grids(12, 16, 1000.0, seed=3)
    assert tuple(grids) == pl.GRIDS
    q, k = pl.random_qk(16, 3)
    assert torch.allclose(grids["rotary"].similarity, pl.rotary_score_grid(q, k, 12, 1000.0) / (q.norm() * k.norm()))
    assert grids["sinusoidal"].toeplitz_gap < 1e-6 < grids["learned"].toeplitz_gap      # offset-only vs not

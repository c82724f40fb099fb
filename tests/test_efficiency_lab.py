"""Oracles for attention_core.labs.efficiency: the efficiency page's glue, checked independently."""
from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as TF

from attention_core import efficient as eff
from attention_core.labs import efficiency as el

TOKENS = ["the", "cat", "sat", "on", "the", "mat", "because", "it", "was", "warm", "."]


def oracle_weights(q, k, mask=None):
    """softmax(q k^T / sqrt d) over the visible keys, row by row with torch.softmax."""
    s = (q @ k.T) / math.sqrt(q.size(-1))
    w = torch.zeros_like(s)
    for i in range(s.size(0)):
        keep = torch.ones(s.size(1), dtype=torch.bool) if mask is None else mask[i]
        if keep.any():
            w[i, keep] = torch.softmax(s[i, keep].double(), -1).float()
    return w


def test_lab_inputs_shapes_gain_and_repeated_tokens():
    q, k, v = el.lab_inputs(TOKENS, len(TOKENS), 3)
    assert q.shape == k.shape == v.shape == (1, 1, len(TOKENS), el.D)
    assert torch.equal(q[0, 0, 0], q[0, 0, 4])                    # "the" twice: the same vector
    q2, k2, v2 = el.lab_inputs(TOKENS, len(TOKENS), 3, gain=2.0)
    assert torch.allclose(q2, 2 * q) and torch.allclose(k2, 2 * k) and torch.equal(v2, v)
    r1, r2 = el.lab_inputs(None, 7, 1), el.lab_inputs(None, 7, 1)
    assert all(torch.equal(a, b) for a, b in zip(r1, r2)) and r1[0].shape == (1, 1, 7, el.D)


@pytest.mark.parametrize("n,k", [(7, 1), (7, 3), (12, 5), (12, 12), (5, 5)])
def test_pooling_projection_segments(n, k):
    p = el.pooling_projection(k, n)
    assert p.shape == (k, n) and (p >= 0).all()
    assert torch.allclose(p.sum(-1), torch.ones(k))
    assert ((p > 0).sum(0) == 1).all()                            # every position in exactly one segment
    sizes = (p > 0).sum(-1)
    assert sizes.max() - sizes.min() <= 1
    if k == n:
        assert torch.equal(p, torch.eye(n))


def test_pooling_projection_rejects_bad_k():
    with pytest.raises(ValueError):
        el.pooling_projection(0, 5)
    with pytest.raises(ValueError):
        el.pooling_projection(6, 5)


@pytest.mark.parametrize("variant", el.VARIANTS)
def test_run_variant_weights_reproduce_the_method_output(variant):
    q, k, v = el.lab_inputs(TOKENS, len(TOKENS), 0)
    knobs = el.Knobs(m=8, k=3, stride=3, window=1, block=4, n_global=1, n_random=2)
    run = el.run_variant(variant, q, k, v, knobs)
    assert torch.allclose(run.weights @ v[0, 0], run.output, atol=1e-5)
    exact = oracle_weights(q[0, 0], k[0, 0])
    assert torch.allclose(run.exact_weights, exact, atol=1e-6)
    ref = TF.scaled_dot_product_attention(q, k, v)[0, 0]
    assert torch.allclose(run.exact_output, ref, atol=1e-5)
    assert 0.0 <= float(run.row_tv.min()) and float(run.row_tv.max()) <= 1.0 + 1e-6
    if variant in ("softmax", "flash"):
        assert run.rel_error < 1e-5
    if variant in el.SPARSE:
        assert torch.allclose(run.weights, oracle_weights(q[0, 0], k[0, 0], run.mask), atol=1e-6)
        assert (run.weights[~run.mask] == 0).all()


def test_linear_variant_against_elu_oracle():
    q, k, v = el.lab_inputs(None, 9, 2)
    run = el.run_variant("linear", q, k, v, el.Knobs())
    phi_q, phi_k = TF.elu(q[0, 0]) + 1, TF.elu(k[0, 0]) + 1
    a = phi_q @ phi_k.T
    assert torch.allclose(run.weights, a / a.sum(-1, keepdim=True), atol=1e-6)


def test_linformer_full_length_pooling_is_exact_and_gauss_is_not_a_distribution():
    q, k, v = el.lab_inputs(TOKENS, len(TOKENS), 0)
    n = len(TOKENS)
    run = el.run_variant("linformer", q, k, v, el.Knobs(k=n, proj="pool"))
    assert run.rel_error < 1e-5
    g = el.run_variant("linformer", q, k, v, el.Knobs(k=4, proj="gauss"))
    assert (g.weights < 0).any() and not torch.allclose(g.weights.sum(-1), torch.ones(n))
    with pytest.raises(ValueError):
        el.linformer_projections("nope", 2, 5, 0)


def test_sparse_patterns_match_loop_oracles():
    n, kn = 13, el.Knobs(stride=4, window=2, block=5, n_global=2, n_random=3, seed=4)
    i = torch.arange(n)[:, None]
    j = torch.arange(n)[None, :]
    glob = (i < 2) | (j < 2)
    assert torch.equal(el.sparse_pattern("strided", n, kn), el.tutorial_strided_mask_loops(n, 4).bool())
    assert torch.equal(el.sparse_pattern("block_global", n, kn), (i // 5 == j // 5) | glob)
    assert torch.equal(el.sparse_pattern("longformer", n, kn), ((i - j).abs() <= 2) | glob)
    bb = el.sparse_pattern("bigbird", n, kn)
    assert (bb >= el.sparse_pattern("longformer", n, kn)).all()
    assert torch.equal(bb, el.sparse_pattern("bigbird", n, kn))  # seeded: the same pattern again
    with pytest.raises(ValueError):
        el.sparse_pattern("linear", n, kn)


def test_multiply_adds_formulas():
    n, d, kn = 20, 16, el.Knobs(m=8, k=5)
    exact = 2 * n * n * d
    assert el.multiply_adds("softmax", n, d, kn) == exact == el.multiply_adds("flash", n, d, kn)
    assert el.multiply_adds("linear", n, d, kn) / exact == pytest.approx(d / n)
    assert el.multiply_adds("performer", n, d, kn) / exact == pytest.approx(2 * 8 / n)
    assert el.multiply_adds("linformer", n, d, kn) / exact == pytest.approx(2 * 5 / n)
    mask = el.sparse_pattern("longformer", n, el.Knobs(window=1, n_global=0))
    assert el.multiply_adds("longformer", n, d, kn, mask) == 2 * d * (3 * n - 2)


def test_knob_values():
    assert el.knob_values("softmax", 10) == [] and el.knob_values("linear", 10) == []
    assert el.knob_values("performer", 10) == list(el.FEATURES)
    assert el.knob_values("longformer", 10) == list(range(10))
    assert el.knob_values("strided", 10) == list(range(1, 11))
    big = el.knob_values("block_global", 64)
    assert len(big) <= 16 and big[0] == 1 and big[-1] == 64 and big == sorted(set(big))


def test_knob_sweep_error_falls_to_zero_as_the_pattern_covers_everything():
    sw = el.knob_sweep("longformer", TOKENS, len(TOKENS), el.Knobs(n_global=0), seeds=(0, 1))
    n = len(TOKENS)
    assert sw.value == [float(w) for w in range(n)]
    assert sw.mean[-1] < 1e-6 and sw.tv[-1] < 1e-6 and sw.cost[-1] == pytest.approx(1.0)
    assert sw.mean[0] > sw.mean[-1]
    assert all(lo <= m + 1e-12 <= hi + 2e-12 for lo, m, hi in zip(sw.lo, sw.mean, sw.hi))
    # the cost is the share of visible pairs, exactly
    offsets = (torch.arange(n)[:, None] - torch.arange(n)).abs()
    for w, c in zip(sw.value, sw.cost):
        assert c == pytest.approx(float((offsets <= w).float().mean()))


def test_performer_sweep_error_shrinks_with_m():
    sw = el.knob_sweep("performer", None, 12, el.Knobs(), seeds=(0, 1, 2), values=(2, 512), gain=0.5)
    assert sw.mean[1] < 0.5 * sw.mean[0]
    assert sw.cost == pytest.approx([2 * 2 / 12, 2 * 512 / 12])


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("bq,bk", [(4, 5), (3, 3), (1, 7)])
def test_flash_step_state_against_direct_computation(bq, bk, causal):
    n = 11
    q, k, v = el.lab_inputs(None, n, 5)
    trace = eff.flash_attention(q, k, v, block_q=bq, block_k=bk, causal=causal, trace=True).trace
    s = (q[0, 0] @ k[0, 0].T) / math.sqrt(el.D)
    if causal:
        s = s.masked_fill(torch.ones(n, n, dtype=torch.bool).triu(1), float("-inf"))
    for index, tile in enumerate(trace):
        step = el.flash_step(q, k, v, trace, index, causal=causal)
        rows = slice(tile.q_start, tile.q_end)
        seen = s[rows, :tile.k_end]
        m = seen.amax(-1)
        assert torch.allclose(tile.row_max[0, 0], m, atol=1e-6)
        finite = torch.isfinite(m)
        l_ref = torch.where(finite, torch.exp(seen - torch.where(finite, m, 0)[:, None]).sum(-1), 0)
        assert torch.allclose(tile.row_sum[0, 0], l_ref, rtol=1e-5, atol=1e-6)
        before = s[rows, :tile.k_start]
        m_old = before.amax(-1) if tile.k_start else torch.full((tile.q_end - tile.q_start,), float("-inf"))
        assert torch.equal(step.m_old, m_old) or torch.allclose(step.m_old, m_old, atol=1e-6)
        # partial output: softmax over the keys seen so far
        w = torch.softmax(seen, -1).nan_to_num(0.0)
        assert torch.allclose(step.partial, w @ v[0, 0, :tile.k_end], atol=1e-5)
        if not tile.skipped and tile.k_start == 0:
            assert (step.tile.rescale == 0).all()                 # first tile: the empty state is scaled away


def test_tile_status_codes():
    n = 7
    q, k, v = el.lab_inputs(None, n, 0)
    trace = eff.flash_attention(q, k, v, block_q=3, block_k=2, causal=True, trace=True).trace
    st = el.tile_status(n, n, trace, 1, causal=True)
    i, j = torch.arange(n)[:, None], torch.arange(n)[None, :]
    cur = st[0:3, 2:4]                                            # tile 1: rows 0-2, keys 2-3
    assert torch.equal(cur == 1, (j <= i)[0:3, 2:4]) and torch.equal(cur == 4, (j > i)[0:3, 2:4])
    done = st[0:3, 0:2]                                           # tile 0: done, or hidden above the diagonal
    assert torch.equal(done == 0, (j <= i)[0:3, 0:2]) and torch.equal(done == 4, (j > i)[0:3, 0:2])
    assert (st[0:3, 4:7] == 3).all()                              # entirely above the diagonal: skipped
    assert (st[3:, :] != 1).all() and (st[3:, :] != 0).all()


def test_tutorial_chunks_and_global_branch():
    assert el.tutorial_chunks(100, 32) == [34, 34, 32]
    assert el.tutorial_chunks(12, 4) == [4, 4, 4]
    assert el.tutorial_chunks(12, 5) == [6, 6]
    assert "greater than 0" in el.tutorial_chunks(5, 32)
    bad = el.tutorial_global_branch(10, d_model=16, heads=2, batch=2)
    assert bad.error and bad.global_context == (2, 1, 16) and bad.expanded is None
    assert bad.local_output == (2, 2, 10, 8)
    assert bad.scale_used == 4.0 and bad.scale_right == pytest.approx(math.sqrt(8))
    lucky = el.tutorial_global_branch(10, d_model=16, heads=1, batch=1)
    assert lucky.error is None and lucky.expanded == (1, 1, 10, 16)


def test_tutorial_nan_patch_counts():
    q, k, _ = el.lab_inputs(None, 6, 0)
    mask = torch.ones(6, 6, dtype=torch.bool)
    mask[2] = False                                               # one row with no visible key
    out = el.tutorial_nan_patch(q[0, 0], k[0, 0], mask)
    assert out == el.NanPatch(nan_patched=6, empty_rows=1, safe_nan=0)
    strided = eff.strided_sparse_mask(6, 4, 2)
    assert el.tutorial_nan_patch(q[0, 0], k[0, 0], strided).nan_patched == 0


def test_time_helpers_return_positive_seconds():
    t = el.time_mask_builders(24, repeats=1)
    assert t.loops > 0 and t.vectorised > 0
    assert el.time_method("linear", 128, repeats=1) > 0
    f = el.flash_extra_floats(64, 16, 8, 4)
    assert f == el.FlashMemory(tile=32, acc=128, stats=16, full_matrix=4096)


# ---------------------------------------------------------------- the recorded run: sizes come from the data
def _recorded(keep=lambda r: True, scale: int = 1) -> dict:
    import json
    from pathlib import Path
    path = Path(__file__).resolve().parent.parent / "assets/bench/efficient.json"
    doc = json.loads(path.read_text(encoding="utf-8"))
    doc["results"] = [dict(r, n=r["n"] * scale) for r in doc["results"] if keep(r)]
    return doc


def test_quoted_sizes_are_the_shipped_ones_and_follow_a_rerun_with_other_sizes():
    from attention_core.labs import efficiency_bench as bench

    shipped = bench.quoted_sizes(_recorded())
    assert shipped == bench.QuotedSizes(16384, 8192, 4096, (4096, 8192), (2048, 4096, 8192, 16384))
    doubled = bench.quoted_sizes(_recorded(scale=2))                 # a run at n = 512 ... 32768
    assert doubled.top == 32768 and doubled.memory == 8192 and doubled.doubling == (4096, 8192)
    assert doubled.masked == 4096 and doubled.memory_rows == (4096, 8192, 16384, 32768)
    quick = bench.quoted_sizes(_recorded(lambda r: r["n"] <= 2048))  # a --quick run
    assert quick.top == 2048 and quick.masked == 2048 and quick.doubling == (1024, 2048)
    a, b, ratio = bench.doubling_ratios(_recorded(lambda r: r["n"] <= 2048))
    by = bench.by_method(_recorded())
    assert (a, b) == (1024, 2048) and ratio["full"] == by[("full", 2048)]["time_s"] / by[("full", 1024)]["time_s"]


@pytest.mark.parametrize("scale,keep", [(2, 16384), (1, 2048)], ids=["512-32768", "quick"])
def test_the_cost_tab_quotes_a_rerun_with_other_sizes_without_a_key_error(scale, keep):
    """The page used to read by[("full", 16384)]: a regenerated file with other sizes raised KeyError."""
    from attention_core.labs import efficiency_bench as bench
    from ui import efficiency_charts as ec

    doc = _recorded(lambda r: r["n"] <= keep, scale)
    sizes = bench.quoted_sizes(doc)
    notes = ec.cost_notes(doc, sizes)
    assert f"At n = {sizes.top} full attention" in notes[1] and str(sizes.masked) in notes[3]
    table = ec.complexity_table(doc, sizes)
    assert f"n = {sizes.top}" in " ".join(table.columns)
    assert sizes.memory_rows and str(sizes.memory_rows[-1]) in ec.flash_space_note(doc, sizes.memory_rows)

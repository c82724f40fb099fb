"""Induction heads: the data, scores, losses and head removal against brute-force oracles; the phase-change reader on
made-up curves; what the recorded run (assets/models/induction_heads_run.json) and the shipped checkpoint
(assets/models/induction_heads.pt) do, within tolerances (never bits); a short retrain reproduces the phase change.
Runtime: about 10-25 s on the shared 2-core machine (the retrain: ~4 s of CPU)."""
from __future__ import annotations

import copy
import math
import random

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from attention_core.labs import induction_heads as lab
from attention_core.models import induction_heads_lm as ih
from attention_core.models import recipes


def random_weights(b: int, h: int, n: int, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    scores = torch.randn(b, h, n, n, generator=g).masked_fill(torch.ones(n, n).triu(1).bool(), float("-inf"))
    return scores.softmax(-1)


# ------------------------------------------------------------------ data
def test_repeated_tokens_are_sos_then_a_half_twice():
    t = ih.repeated_tokens(random.Random(3), 5, 7)
    assert t.shape == (5, 15) and (t[:, 0] == 1).all()
    assert torch.equal(t[:, 1:8], t[:, 8:])
    assert int(t[:, 1:].min()) >= 4 and int(t[:, 1:].max()) < 4 + len(ih.SYMBOLS) == len(ih.TASK.vocab)


def test_a_batch_weighs_the_first_half_less_and_varies_the_half_length():
    batch = ih.as_batch(ih.repeated_tokens(random.Random(0), 2, 5), 0.1)
    assert torch.equal(batch.ids[:, 1:], batch.targets[:, :-1])
    assert batch.weight[0].tolist() == pytest.approx([0.1] * 6 + [1.0] * 4)     # positions 0..5 random, 6..9 repeats
    rng = random.Random(1)
    halves = {(ih.make_batch(rng, 2).ids.size(1)) // 2 for _ in range(60)}
    assert min(halves) >= ih.HALVES[0] and max(halves) <= ih.HALVES[1] and len(halves) > 5


# ------------------------------------------------------------------ scores and losses (brute force)
def test_scores_equal_a_loop_over_positions():
    half, b, h = 6, 3, 2
    n = 2 * half
    w = random_weights(b, h, n)
    prev = [np.mean([float(w[x, k, i, i - 1]) for x in range(b) for i in range(1, n)]) for k in range(h)]
    # position i >= half + 1 holds r_{i-half}; its first occurrence is at i - half, the token after it at i - half + 1
    ind = [np.mean([float(w[x, k, i, i - half + 1]) for x in range(b) for i in range(half + 1, n)]) for k in range(h)]
    assert ih.previous_token_scores(w).tolist() == pytest.approx(prev, abs=1e-6)
    assert ih.induction_scores(w, half).tolist() == pytest.approx(ind, abs=1e-6)


def test_perfect_heads_score_one_and_the_token_after_holds_the_next_token():
    half = 5
    tokens = ih.repeated_tokens(random.Random(2), 1, half)
    ids = tokens[0, :-1]
    n = ids.numel()
    i = torch.arange(n)
    prev = torch.zeros(1, 1, n, n)
    prev[0, 0, i, (i - 1).clamp_min(0)] = 1
    assert float(ih.previous_token_scores(prev)) == pytest.approx(1.0)
    ind = torch.zeros(1, 1, n, n)
    rep = torch.arange(half + 1, n)
    ind[0, 0, rep, rep - half + 1] = 1
    assert float(ih.induction_scores(ind, half)) == pytest.approx(1.0)
    # the attended token is the next token: an induction head that copies what it sees predicts perfectly
    assert torch.equal(ids[rep - half + 1], tokens[0, 1:][rep])
    assert ids[rep].tolist() == ids[rep - half].tolist()            # and the query's token occurred there before


def test_half_losses_equal_per_position_cross_entropy():
    half = 4
    tokens = ih.repeated_tokens(random.Random(4), 3, half)
    batch = ih.as_batch(tokens)
    logits = torch.randn(3, 2 * half, len(ih.TASK.vocab), generator=torch.Generator().manual_seed(0))
    per = [[float(F.cross_entropy(logits[b, i][None], batch.targets[b, i][None])) for i in range(2 * half)]
           for b in range(3)]
    first = np.mean([per[b][i] for b in range(3) for i in range(half + 1)])
    rep = np.mean([per[b][i] for b in range(3) for i in range(half + 1, 2 * half)])
    assert ih.half_losses(logits, batch.targets, half) == pytest.approx((first, rep), abs=1e-5)


def test_removing_heads_equals_zeroing_their_columns_of_w_o():
    torch.manual_seed(0)
    model = lab.build(0)[0].eval()
    ids = ih.repeated_tokens(random.Random(0), 2, 6)[:, :-1]
    oracle = copy.deepcopy(model)
    d = oracle.blocks[0].attn.d_head
    with torch.no_grad():
        for layer, head in ((0, 1), (1, 0), (1, 3)):
            oracle.blocks[layer].attn.W_output.weight[:, head * d:(head + 1) * d] = 0
    plain = model(ids).logits
    with ih.ablate_heads(model, [(0, 1), (1, 0), (1, 3)]):
        cut = model(ids).logits
    assert torch.allclose(cut, oracle(ids).logits, atol=1e-5)
    assert not torch.allclose(cut, plain, atol=1e-3)
    assert torch.equal(model(ids).logits, plain)                   # the hooks are gone afterwards


def assert_same_ablation(got: dict, want: dict) -> None:
    assert list(got) == list(want)
    for name in want:
        assert got[name]["heads"] == want[name]["heads"]
        for field in ("first_loss", "repeated_loss", "induction"):
            assert got[name][field] == pytest.approx(want[name][field], abs=1e-5), (name, field)


@pytest.mark.parametrize("seed, half", [(3, 9), (0, 20), (7, 6)])
def test_the_page_s_head_removal_equals_re_running_the_model_with_the_heads_zeroed(seed, half):
    """lab.ablation (the page's, reusing the unablated layers) against ih.ablation (one full forward per row
    with ablate_heads' hooks), on the shipped model."""
    model = recipes.load_model(ih.RECIPE_NAME).model
    tokens = ih.repeated_tokens(random.Random(seed), 64, half)
    assert_same_ablation(lab.ablation(model, tokens), ih.ablation(model, tokens))


def test_head_removal_on_untrained_models_with_mlps_and_three_layers():
    """Rows that remove nothing (no head above the threshold), MLPs after attention and a third layer above the
    induction layer take the same path as a full re-run."""
    from attention_core.decoder import DecoderConfig, DecoderLM
    tokens, empty = ih.repeated_tokens(random.Random(1), 8, 7), 0
    for layers, d_ff, position in ((2, 0, "rope"), (3, 32, "learned"), (2, 16, "none")):
        torch.manual_seed(layers + d_ff)
        model = DecoderLM(DecoderConfig(vocab_size=len(ih.TASK.vocab.itos), d_model=32, num_layers=layers,
                                        num_heads=4, d_ff=d_ff, position=position, max_len=40)).eval()
        want = ih.ablation(model, tokens)
        empty += sum(not row["heads"] for row in want.values()) - 1
        assert_same_ablation(lab.ablation(model, tokens), want)
    assert empty > 0                                     # untrained: some rows find no head above the threshold


# ------------------------------------------------------------------ reading a run
def snap(step, first, rep, prev=0.1, ind=0.1):
    z = np.zeros((2, 4), dtype=np.float32)
    p, i = z.copy(), z.copy()
    p[0, 2], i[1, 1] = prev, ind
    return lab.Snapshot(step, first, rep, p, i, None)


def test_phase_change_reads_the_plateau_the_crossing_and_the_copying():
    snaps = [snap(0, 4.2, 4.2), snap(10, 4.2, 4.0, 0.15, 0.2), snap(20, 4.3, 3.5, 0.2, 0.3),
             snap(30, 4.4, 1.8, 0.6, 0.7), snap(40, 4.4, 0.6, 0.9, 0.9), snap(50, 4.3, 0.3, 0.95, 0.92)]
    p = lab.phase_change(snaps)
    # ratios 1, .95, .81, .41, .14, .07: plateau until 20, crossing of 0.5 at 30, copying (< 0.2) from 40
    assert (p.step, p.before, p.after) == (30, 20, 40)
    assert (p.loss_before, p.loss_after) == (3.5, 0.6)
    assert (p.previous_before, p.previous_after) == pytest.approx((0.2, 0.9))
    assert (p.induction_before, p.induction_after) == pytest.approx((0.3, 0.9))
    flat = lab.phase_change([snap(0, 4.2, 4.2), snap(10, 4.2, 4.1)])
    assert flat.step is None and (flat.before, flat.after) == (0, 10)


def test_a_fixed_offset_head_fakes_the_induction_score_only_at_its_length():
    d = lab.offset_head_demo(12, (8, 16))
    assert d.same_half == pytest.approx(1.0) and d.other_halves == pytest.approx(0.0)


# ------------------------------------------------------------------ what the recorded run and the shipped model do
def test_the_recorded_run_shows_the_phase_change():
    record = lab.read_run()
    snaps = lab.snapshots_of(record)
    phase = lab.phase_change(snaps)
    chance = math.log(len(ih.SYMBOLS))
    assert record["chance_loss"] == pytest.approx(chance)
    start, end = snaps[0], snaps[-1]
    assert abs(start.repeated_loss - start.first_loss) < 0.3              # step 0: both halves at chance
    assert phase.step is not None and 0 < phase.before < phase.step <= phase.after < end.step
    assert phase.after - phase.before <= 150                               # a drop within a few dozen steps
    assert phase.loss_before > 0.8 * chance and phase.loss_after < 0.2 * chance
    assert phase.induction_after - phase.induction_before > 0.4 and phase.previous_after - phase.previous_before > 0.3
    prev, ind = lab.best_scores(end)
    assert prev > 0.7 and ind > 0.7
    assert end.repeated_loss < 0.3 and end.first_loss > 0.9 * chance
    assert len(record["losses"]) == record["steps"] and end.patterns.shape == (2, 4, 16, 16)


def test_the_shipped_model_copies_and_needs_its_previous_token_heads():
    loaded = recipes.load_model(ih.RECIPE_NAME)
    e = ih.evaluate(loaded.model)
    assert e["best_previous_score"] > 0.7 and e["best_induction_score"] > 0.7
    assert e["repeated_loss"] < 0.3 and e["first_loss"] > 0.9 * e["chance_loss"]
    a = e["ablation"]
    assert a["all_previous"]["repeated_loss"] > 0.8 * e["chance_loss"]     # no previous-token head: no copying
    assert a["all_previous"]["induction"] < 0.5 * a["none"]["induction"]   # ... and layer 2 no longer finds the token
    assert a["control"]["repeated_loss"] < 3 * a["none"]["repeated_loss"] + 0.1
    assert a["all_induction"]["repeated_loss"] > 0.8 * e["chance_loss"]
    shipped = loaded.meta["eval"]                                          # measured when it was trained
    for key in ("first_loss", "repeated_loss", "best_previous_score", "best_induction_score"):
        assert e[key] == pytest.approx(shipped[key], abs=1e-3), key
    assert recipes.checkpoint_path(ih.RECIPE_NAME).stat().st_size <= 1 << 20


@pytest.mark.slow
def test_a_short_retrain_reproduces_the_phase_change():
    """250 steps (a shorter cosine schedule) of seed 0 on this CPU: the repeated-half loss falls far below the first
    half's and both heads form, with margins."""
    torch.set_num_threads(1)
    run = lab.train_run(seed=0, steps=250, every=25)
    phase = lab.phase_change(run.snaps)
    end = run.snaps[-1]
    assert phase.step is not None and phase.step <= 225
    assert end.repeated_loss < 0.35 * end.first_loss
    prev, ind = lab.best_scores(end)
    assert prev > 0.5 and ind > 0.5

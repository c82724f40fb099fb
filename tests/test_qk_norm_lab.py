"""The QK-norm lab against independent oracles: the measured logits are the ones the softmax used (a brute-force
max over the visible pairs, the softmax of the logits equal to the model's weights), the entropy against its
formula, the QK-norm bound against RMSNorm's algebra (equality for constant gains and aligned q, k; never
exceeded however large the input), the softmax Jacobian against torch.autograd, Wortsman et al.'s LR
sensitivity on a hand example, a short seeded training run reproducing the logit growth, and the recorded JSON
holding what the page claims. Runtime: about 10-20 s on the shared 2-core machine (two 60-step trainings)."""
from __future__ import annotations

import copy
import json
import math
import random

import pytest
import torch

from attention_core.decoder import CausalSelfAttention
from attention_core.labs import qk_norm as lab


def test_the_copy_batch_repeats_the_symbols_after_the_separator_and_weights_only_the_copy():
    b = lab.copy_batch(random.Random(0), 5)
    full = torch.cat([b.ids, b.targets[:, -1:]], dim=1)               # the whole sequence
    assert full.shape == (5, 2 * lab.SEQ + 1)
    assert torch.equal(b.targets, full[:, 1:])
    assert (full[:, lab.SEQ] == lab.SEP).all()
    assert torch.equal(full[:, :lab.SEQ], full[:, lab.SEQ + 1:])
    assert ((full[:, :lab.SEQ] >= 2) & (full[:, :lab.SEQ] < lab.VOCAB)).all()
    assert b.weight[:, :lab.SEQ].sum() == 0 and (b.weight[:, lab.SEQ:] == 1).all()
    assert (b.targets[b.weight == 1] != lab.SEP).all()                  # the loss counts only copied symbols


@pytest.mark.parametrize("qk", [False, True])
@torch.no_grad()
def test_attention_stats_are_the_logits_the_softmax_used_and_their_entropy(qk):
    model = lab.build_model(qk, 3)
    ids = lab.probe_ids()[:4]
    stats = lab.attention_stats(model, ids)
    # oracle: run the blocks by hand, take each layer's input, recompute logits and weights independently
    x = model.embed(ids)
    out = model(ids)
    n = ids.size(1)
    for block, s, w in zip(model.blocks, stats, out.weights):
        h = block.ln1(x)
        attn = block.attn
        logits = attn.logits(h)
        causal = torch.ones(n, n, dtype=torch.bool).tril()
        assert torch.allclose(torch.softmax(logits.masked_fill(~causal, float("-inf")), -1), w, atol=1e-5)
        brute = max(abs(float(logits[b, hh, i, j])) for b in range(ids.size(0)) for hh in range(attn.num_heads)
                    for i in range(n) for j in range(i + 1))
        assert s.max_logit == pytest.approx(brute, rel=1e-6)
        ent = -sum(float(p) * math.log(float(p)) for p in w.flatten() if p > 0) / (w.numel() / n)
        assert s.entropy == pytest.approx(ent, rel=1e-4)
        x = block(x).output
    assert model.training                      # left as it was


def test_entropy_of_one_hot_and_uniform_rows():
    assert lab.attention_entropy(torch.eye(5)) == pytest.approx(0.0)
    assert lab.attention_entropy(torch.full((3, 8), 1 / 8)) == pytest.approx(math.log(8))
    causal = torch.ones(6, 6).tril()
    assert lab.attention_entropy(causal / causal.sum(-1, keepdim=True)) == pytest.approx(lab.uniform_entropy(6))
    assert lab.uniform_entropy(2) == pytest.approx(math.log(2) / 2)


@torch.no_grad()    # logits only: no graph (float() of a graph tensor warns)
def test_the_qk_norm_bound_is_reached_for_aligned_q_k_and_holds_for_any_input_scale():
    torch.manual_seed(0)
    attn = CausalSelfAttention(32, 4, qk_norm=True, rope=True)
    g = 1.7
    with torch.no_grad():
        attn.q_norm.weight.fill_(g)
        attn.k_norm.weight.fill_(g)
    assert lab.logit_bound(attn) == pytest.approx(g * g * math.sqrt(8))       # closed form: g^2 sqrt(d_head)
    # aligned q and k: the same token twice, W_K = W_Q -> the diagonal logits reach the bound (up to RMSNorm's eps)
    with torch.no_grad():
        attn.W_key.weight.copy_(attn.W_query.weight)
    x = torch.randn(1, 6, 32)
    diag = attn.logits(x).diagonal(dim1=-2, dim2=-1)
    assert float(diag.max()) == pytest.approx(lab.logit_bound(attn), rel=1e-3)
    # random gains, inputs up to 1000 times larger: never above the bound; without QK-norm they grow ~ scale^2
    with torch.no_grad():
        attn.q_norm.weight.copy_(torch.randn(8) * 2)
        attn.k_norm.weight.copy_(torch.randn(8) * 2)
    plain = CausalSelfAttention(32, 4, rope=True)
    assert lab.logit_bound(plain) is None
    for scale in (1.0, 30.0, 1000.0):
        xs = scale * torch.randn(2, 10, 32)
        assert float(attn.logits(xs).abs().max()) <= lab.logit_bound(attn) * (1 + 1e-5)
    small, big = (float(plain.logits(s * x).abs().max()) for s in (1.0, 100.0))
    assert big / small == pytest.approx(1e4, rel=1e-3)


def test_grown_weights_square_the_logits_without_qk_norm_and_leave_them_with_it():
    base, grown = lab.grown_weights(False, 1.0), lab.grown_weights(False, 10.0)
    assert grown.stats[0].max_logit == pytest.approx(100 * base.stats[0].max_logit, rel=1e-4)   # layer 1: exact
    assert grown.stats[0].entropy < 0.2 * base.stats[0].entropy
    on1, on10 = lab.grown_weights(True, 1.0), lab.grown_weights(True, 10.0)
    for a, b, bound in zip(on1.stats, on10.stats, on10.bounds):
        assert b.max_logit == pytest.approx(a.max_logit, rel=1e-3) and b.max_logit <= bound
    with pytest.raises(ValueError):
        lab.grown_weights(True, float("nan"))


def test_the_softmax_jacobian_matches_autograd_and_vanishes_when_saturated():
    z = torch.tensor(lab.SAT_ROW, dtype=torch.float64) * 3
    auto = torch.autograd.functional.jacobian(lambda v: torch.softmax(v, -1), z)
    assert torch.allclose(lab.softmax_jacobian(z), auto, atol=1e-12)
    rows = lab.saturation()
    tops = [r.top_weight for r in rows]
    ents = [r.entropy for r in rows]
    assert tops == sorted(tops) and ents == sorted(ents, reverse=True)
    assert rows[-1].top_weight > 0.99999 and rows[-1].jacobian_norm < 1e-4
    assert max(r.jacobian_norm for r in rows) <= 0.5 + 1e-12             # ||diag(p) - pp^T||_2 <= 1/2 always


def test_lr_sensitivity_of_a_hand_example():
    # finals 1.0, 0.5, 5.0 (capped at the initial 3.0): mean(1, 0.5, 3) - 0.5 = 1.0
    assert lab.lr_sensitivity([1.0, 0.5, 5.0], 3.0, 0.5) == pytest.approx(1.0)
    assert lab.lr_sensitivity([0.2, 0.2], 3.0, 0.2) == pytest.approx(0.0)
    assert lab.final_loss([9.0] + [1.0] * 10) == pytest.approx(1.0)


def test_a_short_high_lr_run_grows_the_logits_without_qk_norm_and_not_with_it():
    torch.set_num_threads(1)
    seen = []
    off = lab.train_run(lab.RunSpec(0.3, False, 0, 60), on_probe=lambda losses, probes: seen.append(len(losses)))
    on = lab.train_run(lab.RunSpec(0.3, True, 0, 60))
    assert [p.step for p in off.probes] == list(range(0, 61, lab.EVERY)) and seen == list(range(5, 61, 5))
    assert len(off.losses) == 60 and off.bounds == (None, None)
    assert max(off.probes[-1].max_logit) > 100 * max(off.probes[0].max_logit)    # measured: ~10^4 times
    assert min(off.probes[-1].entropy) < 0.05
    assert max(on.probes[-1].max_logit) < 0.1 * max(off.probes[-1].max_logit)
    assert all(m <= b * (1 + 1e-5) for m, b in zip(on.probes[-1].max_logit, on.bounds))
    stopped = lab.train_run(lab.RunSpec(0.3, True, 0, 60), on_probe=lambda losses, probes: len(losses) < 10)
    assert len(stopped.losses) == 10 and stopped.probes[-1].step == 10


def test_the_recorded_runs_hold_what_the_page_says():
    doc = lab.read_record()
    s = doc["settings"]
    assert (s["steps"], s["batch"], s["d_model"]) == (lab.STEPS, lab.BATCH, lab.MODEL["d_model"])
    runs = {(r["lr"], r["seed"], r["qk_norm"]): r for r in doc["runs"]}
    assert {lr for lr, _, _ in runs} == set(lab.RECORD_LRS)
    chance = s["chance_loss"]
    for seed in s["seeds"]:
        off, on = runs[(0.3, seed, False)], runs[(0.3, seed, True)]
        assert max(off["probes"][-1][1]) > 1000 * max(off["probes"][0][1])    # the exercise's answer (c)
        assert min(off["probes"][-1][2]) < 0.05
        assert lab.final_loss(off["losses"]) > 0.5 * chance                    # did not learn the copy
        assert lab.final_loss(on["losses"]) < 0.1                              # did
        assert max(on["probes"][-1][1]) <= max(on["bounds"]) * (1 + 1e-4)
    for r in doc["runs"]:                                                      # low rates: no runaway
        if r["lr"] <= 3e-3:
            assert max(r["probes"][-1][1]) < 100


def test_read_record_rejects_a_damaged_file(tmp_path):
    doc = json.loads(lab.RECORD_FILE.read_text())
    bad = copy.deepcopy(doc)
    bad["runs"] = [r for r in bad["runs"] if not (r["lr"] == 0.3 and r["seed"] == 0 and r["qk_norm"])]
    path = tmp_path / "runs.json"
    path.write_text(json.dumps(bad))
    with pytest.raises(ValueError, match="both runs"):
        lab.read_record(path)
    bad = copy.deepcopy(doc)
    bad["runs"][0]["probes"][1][1][0] = float("nan")
    path.write_text(json.dumps(bad))
    with pytest.raises(ValueError, match="bad probe"):
        lab.read_record(path)

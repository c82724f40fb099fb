"""The long-context lab and its models against independent oracles: the task's rules checked token by token, the
wavelength table against the papers' formulas written out here, the exact first-layer logit against the decoder's
own forward (CausalSelfAttention.logits), the ALiBi picture against a loop, and the shipped checkpoints' behaviour
within tolerances (never bits). Runtime: about 5-10 s on the shared machine."""
from __future__ import annotations

import math
import random

import numpy as np
import pytest
import torch

from attention_core.decoder import DecoderConfig, DecoderLM
from attention_core.labs import long_context as lab
from attention_core.models import long_context_lm as lm
from attention_core.models import recipes

L = lm.TRAIN_LEN


def test_the_task_has_a_near_rule_and_a_far_recall_and_counts_only_those():
    batch = lm.recall_batch(random.Random(3), 8, 96)
    ids, kinds = lm.topic_sequences(random.Random(3), 8, 96)
    itos = lm.TASK.vocab.itos
    for b in range(8):
        seq = [itos[i] for i in ids[b].tolist()]
        assert seq[0] in lm.TOPICS and all(s in lm.DIGITS or s == lm.QUERY for s in seq[1:])
        digits = [int(s) for s in seq[1:] if s != lm.QUERY]
        assert all(digits[j] == (digits[j - 1] + digits[j - 2]) % 10 for j in range(2, len(digits)))
        for pos in range(96):
            w, target = batch.weight[b, pos].item(), itos[batch.targets[b, pos].item()]
            if seq[pos] == lm.QUERY:                                  # far: the answer is the topic
                assert w == 1 and target == seq[0]
            elif w == 1:                                              # near: the sum of the last two digits
                assert seq[pos - 1] in lm.DIGITS and seq[pos] in lm.DIGITS and seq[pos + 1] in lm.DIGITS
                assert int(target) == (int(seq[pos]) + int(seq[pos - 1])) % 10
            else:
                assert pos == 0 or seq[pos - 1] == lm.QUERY or seq[pos + 1] == lm.QUERY or pos == 1
    assert (batch.weight == (kinds != lm.Kinds.NONE).float()).all()
    assert batch.ids.shape == (8, 96) and (batch.ids == ids[:, :-1]).all()


def test_frequency_rows_follow_the_papers_formulas():
    d, s, base = 16, 4.0, 10000.0
    rows = lab.frequency_rows(d, s)
    theta = [base ** (-2 * i / d) for i in range(d // 2)]
    ntk_base = base * s ** (d / (d - 2))                                            # bloc97 / YaRN Eq. (16)
    for r in rows:
        t0 = theta[r.pair]
        turns = L * t0 / (2 * math.pi)
        gamma = min(1.0, max(0.0, (turns - 1) / (32 - 1)))                          # YaRN ramp, alpha 1, beta 32
        expect = {"none": t0, "linear": t0 / s, "ntk": ntk_base ** (-2 * r.pair / d),
                  "yarn": (1 - gamma) * t0 / s + gamma * t0}[r.method]
        assert r.theta == pytest.approx(expect, rel=1e-12)
        assert r.wavelength == pytest.approx(2 * math.pi / expect, rel=1e-12)
        assert r.seen_turns == pytest.approx((L - 1) * t0 / (2 * math.pi))
        assert r.needed_turns == pytest.approx((s * L - 1) * expect / (2 * math.pi))
    for r in lab.frequency_rows(d, 1.0):                                            # s = 1: every method is RoPE
        assert r.theta == pytest.approx(theta[r.pair], rel=1e-12)


def test_unseen_pairs_are_those_that_never_turned_a_full_circle_in_training():
    d, n = 16, 4 * L
    rows = lab.frequency_rows(d, n / L)
    theta = np.array([10000.0 ** (-2 * i / d) for i in range(d // 2)])
    trained = np.arange(L)[:, None] * theta                                          # every angle of training
    partial = [i for i in range(d // 2) if trained[:, i].max() < 2 * math.pi]        # brute force over positions
    assert lab.unseen_pairs(rows, "none") == partial and partial == [3, 4, 5, 6, 7]
    assert lab.unseen_pairs(rows, "linear") == []                                    # PI: position 255 / 4 < 64
    ntk = [r for r in rows if r.method == "ntk"]
    assert lab.reach(ntk[-1]) == pytest.approx((n - 1) / 4)                          # the slowest: divided by s
    assert set(lab.unseen_pairs(rows, "ntk")) < set(partial)


def test_the_alibi_picture_matches_a_loop_and_the_papers_slopes():
    pic = lab.alibi_picture(6, 4)
    assert pic.slopes.tolist() == [1 / 4, 1 / 16, 1 / 64, 1 / 256]                 # 2^(-8h/H), H = 4
    for h in range(4):
        for i in range(6):
            for j in range(6):
                expect = -pic.slopes[h] * (i - j) if j <= i else -math.inf
                assert pic.bias[h, i, j] == expect
    assert lab.alibi_reach(4)[0] == pytest.approx(math.log(10) * 4)


def untrained(seed: int = 0) -> DecoderLM:
    torch.manual_seed(seed)
    return DecoderLM(DecoderConfig(len(lm.TASK.vocab), d_model=64, num_layers=2, num_heads=4, d_ff=128)).eval()


@pytest.mark.parametrize("method, scale", [("none", 1.0), ("linear", 4.0), ("ntk", 2.0), ("yarn", 4.0)])
def test_topic_logits_equal_the_decoders_own_first_layer_logits(method, scale):
    model = untrained(1)
    n = 40
    got = lab.topic_logits(model, method, scale, n)                                 # (h, n): distances 1 .. n
    twin = lab.scaled_copy(model, method, scale)
    vocab = lm.TASK.vocab
    per_topic = []
    for topic in lm.TOPICS:                       # topic at 0, filler digits, the query at every position m
        ids = torch.tensor([[vocab.stoi[topic]] + [vocab.stoi["?"]] * n])
        block = twin.blocks[0]
        full = block.attn.logits(block.ln1(twin.embed(ids)))[0]                     # (h, n+1, n+1)
        per_topic.append(full[:, 1:, 0])                                           # query at m, key at 0
    expect = torch.stack(per_topic).mean(0).detach().numpy()
    assert np.allclose(got, expect, atol=1e-5)


def test_scaling_a_copy_leaves_the_shared_model_alone_and_none_restores_it():
    model = untrained(2)
    ids = lm.recall_batch(random.Random(0), 2, 96).ids
    before = model(ids).logits
    twin = lab.scaled_copy(model, "yarn", 4.0)
    assert all(layer.rope_frequencies is None and layer.logit_scale == 1.0 for layer in model.attention_layers())
    assert not torch.allclose(twin(ids).logits, before)
    lm.set_rope_scaling(twin, "none", 1.0)
    assert torch.equal(twin(ids).logits, before)
    assert torch.equal(lab.scaled_copy(model, "linear", 1.0)(ids).logits, before)   # s = 1: plain RoPE


def test_by_position_buckets_count_what_they_say():
    sc = lm.Scores(loss=torch.zeros(1, 8), right=torch.tensor([[1, 0, 1, 1, 0, 0, 1, 1]], dtype=torch.bool),
                   kind=torch.tensor([[0, 1, 1, 2, 1, 2, 0, 1]]))
    assert lm.by_position(sc, lm.Kinds.NEAR, (0, 4, 8)) == [0.5, 0.5]
    assert lm.by_position(sc, lm.Kinds.FAR, (0, 4, 8)) == [1.0, 0.0]
    assert lm.summary(sc, lm.Kinds.NEAR)[0] == pytest.approx(0.5)


# ------------------------------------------------------------------ the shipped models: behaviour, with margins
def shipped(name: str):
    return recipes.load_model(name)


def test_every_shipped_model_solves_the_task_at_its_training_length():
    for name in ("longctx_rope", "longctx_alibi", "longctx_nope", "longctx_learned"):
        ev = shipped(name).meta["eval"]
        i = ev["lengths"].index(L)
        for kind in ("near", "far"):
            assert ev["methods"]["none"][f"{kind}_accuracy"][i] > 0.95, (name, kind)


def test_rope_fails_beyond_its_training_length_and_the_scalings_trade_near_for_far():
    ev = shipped("longctx_rope").meta["eval"]
    i4 = ev["lengths"].index(4 * L)
    acc = {m: (v["near_accuracy"][i4], v["far_accuracy"][i4]) for m, v in ev["methods"].items()}
    assert min(acc["none"]) < 0.9                                   # RoPE as trained: worse at 4L (0.68 / 0.78)
    assert acc["linear"][1] > 0.95 and acc["linear"][0] < 0.6       # PI: far fixed, near broken (no fine-tuning)
    assert acc["ntk"][0] > acc["none"][0] and acc["ntk"][1] > acc["none"][1]    # NTK: better on both (the notice)
    alibi = shipped("longctx_alibi").meta["eval"]["methods"]["none"]
    assert alibi["near_accuracy"][i4] > 0.9 and alibi["far_accuracy"][i4] > 0.9


def test_the_recorded_figures_agree_with_a_fresh_evaluation_of_the_shipped_model():
    loaded = shipped("longctx_rope")
    ev = loaded.meta["eval"]
    i4 = ev["lengths"].index(4 * L)
    for method in ("none", "linear"):
        sc = lm.scores(lab.scaled_copy(loaded.model, method, 4.0), 4 * L, sequences=32, seed=5)
        for kind, k in (("near", lm.Kinds.NEAR), ("far", lm.Kinds.FAR)):
            assert lm.summary(sc, k)[0] == pytest.approx(ev["methods"][method][f"{kind}_accuracy"][i4], abs=0.1)


@pytest.mark.parametrize("method", ["none", "yarn"])
def test_live_positions_equal_one_batch_of_every_sequence_counted_by_hand(method):
    """The page's live chart: the model reads a few sequences at a time (fast), the figures are those of one
    forward of every sequence at once, with the method's frequencies, counted per bucket by a loop here."""
    import copy

    model = recipes.load_model("longctx_rope").model
    n, seqs = 96, 16
    live = lab.live_positions(model, method, n, sequences=seqs)
    assert live.edges == (0, 32, 64, 96) and live.sequences == seqs
    twin = copy.deepcopy(model).eval()
    lm.set_rope_scaling(twin, method, n / L)
    batch = lm.recall_batch(random.Random(f"0-{n}"), seqs, n)
    _, kinds = lm.topic_sequences(random.Random(f"0-{n}"), seqs, n)
    with torch.no_grad():
        right = (twin(batch.ids).logits.argmax(-1) == batch.targets).tolist()
    kinds = kinds.tolist()
    for kind, shown, overall in ((lm.Kinds.NEAR, live.near, live.near_all), (lm.Kinds.FAR, live.far, live.far_all)):
        every = []
        for i, (lo, hi) in enumerate(zip(live.edges[:-1], live.edges[1:])):
            cells = [right[b][p] for b in range(seqs) for p in range(lo, hi) if kinds[b][p] == kind]
            every += cells
            # one argmax may flip between batch shapes (float sums in another order): at most one cell
            assert shown[i] == pytest.approx(sum(cells) / len(cells), abs=1.01 / len(cells))
        assert overall == pytest.approx(sum(every) / len(every), abs=1.01 / len(every))

"""TransformerTrainer: the schedule's shape, clipping, seeding, callback, and that training learns."""
import math
import random

import pytest
import torch

from attention_core.models.seq2seq import Seq2Seq, Seq2SeqConfig, make_seq2seq_batch, seq2seq_loss
from attention_core.models.tasks import REVERSE_VOCAB, make_reverse_example
from attention_core.models.trainer import TransformerTrainer, seed_warmup_cosine, warmup_cosine

V = REVERSE_VOCAB


def tiny_seq2seq(seed=0, attention=True):
    torch.manual_seed(seed)
    return Seq2Seq(Seq2SeqConfig(len(V), len(V), embed_dim=8, hidden_dim=32, attention=attention, attn_dim=16))


def reverse_batches(rng, n=32, length=5):
    return make_seq2seq_batch([make_reverse_example(rng, length) for _ in range(n)], V, V)


@pytest.mark.parametrize("warmup,total,floor", [(10, 101, 0.0), (1, 8, 0.1), (50, 1000, 0.05), (0, 21, 0.0)])
def test_schedule_shape(warmup, total, floor):
    f = [warmup_cosine(s, warmup, total, floor) for s in range(total)]
    # linear warm-up reaching exactly 1 at its last step, first step already > 0
    for s in range(warmup):
        assert f[s] == pytest.approx((s + 1) / warmup)
    assert max(f) == pytest.approx(1.0)
    # then non-increasing cosine that ends exactly at the floor on the run's last step
    tail = f[warmup:]
    assert all(a >= b - 1e-12 for a, b in zip(tail, tail[1:]))
    assert f[-1] == pytest.approx(floor)
    assert min(tail) >= floor - 1e-12
    if total - 1 - warmup >= 2 and (total - 1 - warmup) % 2 == 0:   # the midpoint of the cosine
        mid = warmup + (total - 1 - warmup) // 2
        assert f[mid] == pytest.approx(floor + (1 - floor) / 2)


def test_the_tutorials_hard_coded_100000_steps_never_anneal_a_short_run():
    steps, warmup = 2000, 100
    assert seed_warmup_cosine(0, warmup) == 0.0                        # first update wasted
    assert seed_warmup_cosine(steps - 1, warmup) > 0.99                # lr still at its peak at the end
    assert warmup_cosine(steps - 1, warmup, steps) == pytest.approx(0.0)
    # same curve as ours only if the run really lasts 100000 steps
    for s in (100, 5000, 50000, 99999):
        assert seed_warmup_cosine(s, warmup) == pytest.approx(warmup_cosine(s, warmup, 100001), abs=1e-4)


def test_bad_schedule_arguments():
    with pytest.raises(ValueError):
        warmup_cosine(0, 10, 0)
    with pytest.raises(ValueError):
        TransformerTrainer(tiny_seq2seq(), seq2seq_loss).fit(reverse_batches, 0)


def test_optimizer_is_adamw_with_the_tutorials_betas():
    tr = TransformerTrainer(tiny_seq2seq(), seq2seq_loss, lr=2e-3, weight_decay=0.05)
    assert isinstance(tr.optimizer, torch.optim.AdamW)
    g = tr.optimizer.param_groups[0]
    assert g["betas"] == (0.9, 0.98) and g["weight_decay"] == 0.05


def test_learning_rate_follows_the_schedule_to_the_end_of_the_actual_run():
    tr = TransformerTrainer(tiny_seq2seq(), seq2seq_loss, lr=1e-2, warmup_steps=5)
    seen = []
    tr.fit(reverse_batches, 30, callback=lambda p: seen.append((p.step, p.lr)))
    assert [s for s, _ in seen] == list(range(1, 31))
    for s, lr in seen:
        assert lr == pytest.approx(1e-2 * warmup_cosine(s - 1, 5, 30))
    assert seen[-1][1] == pytest.approx(0.0, abs=1e-12)


def test_a_short_training_run_lowers_the_loss():
    tr = TransformerTrainer(tiny_seq2seq(), seq2seq_loss, lr=1e-2, warmup_steps=10, seed=1)
    losses = tr.fit(reverse_batches, 120)
    assert len(losses) == 120 and tr.history == losses
    first, last = sum(losses[:10]) / 10, sum(losses[-10:]) / 10
    assert first > math.log(len(V)) * 0.8        # starts near chance (uniform over the vocabulary)
    assert last < 0.75 * first


def test_same_seed_same_run_other_seed_other_run():
    runs = []
    for seed in (3, 3, 4):
        tr = TransformerTrainer(tiny_seq2seq(), seq2seq_loss, lr=5e-3, seed=seed)
        runs.append(tr.fit(reverse_batches, 8))
    assert runs[0] == runs[1]
    assert runs[0] != runs[2]


def test_gradients_are_clipped():
    m = tiny_seq2seq()
    tr = TransformerTrainer(m, lambda model, b: 1000.0 * seq2seq_loss(model, b), grad_clip=0.5)
    _, norm = tr.train_step(reverse_batches(random.Random(0)))
    assert norm > 0.5
    total = torch.linalg.vector_norm(torch.stack([p.grad.norm() for p in m.parameters() if p.grad is not None]))
    assert float(total) == pytest.approx(0.5, rel=1e-4)


def test_callback_can_stop_and_snapshots_arrive_every_k_steps():
    tr = TransformerTrainer(tiny_seq2seq(), seq2seq_loss, seed=0)
    got = []

    def cb(p):
        got.append(p)
        return p.step < 6

    losses = tr.fit(reverse_batches, 50, cb, snapshot_every=3,
                    snapshot_fn=lambda m: m(*reverse_batches(random.Random(9), 2)[:3]).weights)
    assert len(losses) == 6 and [p.step for p in got] == [1, 2, 3, 4, 5, 6]
    assert [p.snapshot is not None for p in got] == [False, False, True, False, False, True]
    assert got[2].snapshot.shape == (2, 6, 5)
    assert not tr.model.training
    timed = TransformerTrainer(tiny_seq2seq(), seq2seq_loss).fit(reverse_batches, 10_000, max_seconds=0.0)
    assert len(timed) == 1


def test_a_trainer_that_has_not_trained_does_not_import_dynamo():
    """Building a torch optimizer imports torch._dynamo (~70 MB); the training page shows an untrained
    model at load, so the optimizer is only created when training starts."""
    import subprocess
    import sys
    code = ("import sys, torch; from attention_core.models.trainer import TransformerTrainer; "
            "t = TransformerTrainer(torch.nn.Linear(2, 2), lambda m, b: m(b).sum()); "
            "print(any(k.startswith('torch._dynamo') for k in sys.modules)); "
            "t.optimizer; print(any(k.startswith('torch._dynamo') for k in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=__import__("pathlib").Path(__file__).resolve().parent.parent)
    assert out.stdout.split() == ["False", "True"]

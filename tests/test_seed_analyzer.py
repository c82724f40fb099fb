"""The second tutorial's AttentionAnalyzer as its code runs it: ``self.model(batch[0])`` passes no mask, so the
padded keys of a batch get real attention weight. ``labs.analysis.seed_weights`` reproduces that call and
``pad_key_weight`` measures the weight real tokens give padding; both are checked here against the encoder's
first layer computed by hand (embedding, positions, W_Q, W_K, a plain softmax with no mask)."""
from __future__ import annotations

import math

import pytest
import torch

from attention_core.labs import analysis as lab
from attention_core.labs import pronoun as sentences
from attention_core.models.pronoun import make_pronoun_batch
from attention_core.models.recipes import load_model


@pytest.fixture(scope="module")
def lm():
    return load_model("pronoun")


@pytest.fixture(scope="module")
def batch_examples():
    return sentences.fresh_examples(0, 32, ("en", "zh"), split=None)


def first_layer_by_hand(model, tokens: torch.Tensor) -> torch.Tensor:
    """(b, h, n, n): softmax(q k^T / sqrt(d_k)) of the first encoder layer with no mask, from the weights."""
    enc = model.encoder
    layer = enc.layers[0]
    assert not layer.norm_first                                    # post-LN: attention reads the layer input
    b, n = tokens.shape
    d = enc.d_model
    x = enc.embedding.weight[tokens] * math.sqrt(d) + enc.pe[:n]     # embedding * sqrt(d) + sinusoidal table
    mha = layer.self_attn
    h = mha.num_heads
    dk = d // h
    q = (x @ mha.W_query.weight.T + mha.W_query.bias).view(b, n, h, dk).transpose(1, 2)
    k = (x @ mha.W_key.weight.T + mha.W_key.bias).view(b, n, h, dk).transpose(1, 2)
    return torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(dk), dim=-1)


@torch.no_grad()
def test_seed_weights_are_the_model_run_without_a_mask(lm, batch_examples):
    weights, lengths = lab.seed_weights(lm.model, batch_examples, lm.src_vocab)
    batch = make_pronoun_batch(batch_examples, lm.src_vocab)
    assert torch.equal(lengths, batch.lengths) and weights[0].shape[-1] == int(lengths.max())
    assert int(lengths.min()) < int(lengths.max())                 # the batch is padded
    by_hand = first_layer_by_hand(lm.model, batch.tokens)
    assert torch.allclose(weights[0], by_hand, atol=1e-5)


@torch.no_grad()
def test_padded_keys_get_the_weight_the_tutorials_call_gives_them(lm, batch_examples):
    weights, lengths = lab.seed_weights(lm.model, batch_examples, lm.src_vocab)
    pad = lab.pad_key_weight(weights, lengths)                     # (L, b)
    tokens = make_pronoun_batch(batch_examples, lm.src_vocab).tokens
    by_hand = first_layer_by_hand(lm.model, tokens)
    for i, m in enumerate(lengths.tolist()):                       # sentence by sentence, in plain loops
        rows = by_hand[i, :, :m, :]                                # its real query rows, every head
        expected = float(rows[..., m:].sum(-1).mean())             # their weight on the padded keys
        assert float(pad[0, i]) == pytest.approx(expected, abs=1e-5)
        if m == int(lengths.max()):
            assert float(pad[:, i].abs().max()) < 1e-7             # no padding, nothing to take weight
        else:
            assert float(pad[0, i]) > 1e-3                         # real weight: the tutorial never masks it
    # with its padding mask the model gives padding exactly nothing
    masked = sentences.pronoun_rows(lm.model, batch_examples, lm.src_vocab).weights
    assert float(lab.pad_key_weight(masked, lengths).abs().max()) < 1e-7


@torch.no_grad()
def test_the_tutorials_statistics_on_the_unmasked_run(lm, batch_examples):
    """seed_analyzer_stats is the tutorial's code typed out, on the weights its call gives; batch_stats reports
    the padded keys' weight of that run, and its seed numbers are not the masked model's."""
    weights, lengths = lab.seed_weights(lm.model, batch_examples, lm.src_vocab)
    seed = lab.seed_analyzer_stats(weights, 0.1)
    for layer, attn in enumerate(weights):
        attn_flat = attn.view(-1, attn.size(-1))
        entropy = -torch.sum(attn_flat * torch.log(attn_flat + 1e-8), dim=-1)
        assert float(seed.entropy[layer]) == pytest.approx(entropy.mean().item(), abs=1e-6)
        assert float(seed.sparsity[layer]) == pytest.approx((attn < 0.1).float().mean().item(), abs=1e-7)
    masked = sentences.pronoun_rows(lm.model, batch_examples, lm.src_vocab).weights
    stats = lab.batch_stats(masked, lengths, 0.1, False, weights)
    assert stats.seed_entropy == pytest.approx(seed.entropy.numpy(), abs=1e-6)
    pad = lab.pad_key_weight(weights, lengths)
    share = lengths.double() / lengths.sum()
    assert stats.pad_weight == pytest.approx((pad.double() * share).sum(1).numpy(), abs=1e-7)
    assert stats.pad_weight_max == pytest.approx(pad.max(1).values.numpy(), abs=1e-7)
    masked_seed = lab.seed_analyzer_stats(masked, 0.1)
    assert (masked_seed.entropy - seed.entropy).abs().max() > 1e-3   # the unmasked run is another run


def test_the_notices_summaries_against_loops():
    """``stats_summary``, ``pattern_summary``, ``sentence_summary``: what the analysis page's notices quote, from
    synthetic arrays, checked by plain loops over every head, pattern and key."""
    import numpy as np

    from attention_core.analysis import PATTERNS, QKGeometry

    rng = np.random.default_rng(5)
    L, h, n = 2, 3, 6
    ent, spa = rng.random((L, h)), rng.random((L, h))
    stats = lab.BatchStats(*([None] * len(lab.BatchStats._fields)))._replace(
        entropy=ent, sparsity=spa, lengths=np.array([4, 5, 6]))
    f = lab.stats_summary(stats, normalize=False)
    cells = [(ent[a, b], (a, b)) for a in range(L) for b in range(h)]
    assert (f.lo_entropy, f.lo) == min(cells) and (f.hi_entropy, f.hi) == max(cells)
    assert f.uniform_entropy == pytest.approx(math.log(5.0)) and f.mean_length == 5.0
    assert lab.stats_summary(stats, normalize=True).uniform_entropy == 1.0
    assert (f.sparsity_min, f.sparsity_max) == (spa.min(), spa.max())

    counts = rng.integers(0, 9, (L, h, len(PATTERNS)))
    pats = lab.BatchPatterns(counts, rng.random((L, h)), rng.random((L, h)))
    p = lab.pattern_summary(pats)
    totals = [sum(counts[a, b, k] for a in range(L) for b in range(h)) for k in range(len(PATTERNS))]
    assert p.top == totals.index(max(totals)) and p.top_share == pytest.approx(max(totals) / sum(totals))
    broad = PATTERNS.index("broad")
    assert p.n_broad == sum(int(np.argmax(counts[a, b]) == broad) for a in range(L) for b in range(h))
    assert p.n_heads == L * h
    assert max((pats.adjective[a, b], (a, b)) for a in range(L) for b in range(h)) == (p.adjective_weight,
                                                                                      p.adjective_head)
    assert max((pats.agree[a, b], (a, b)) for a in range(L) for b in range(h)) == (p.referent_fraction,
                                                                                  p.referent_head)

    w = rng.random((L, h, n, n))
    w /= w.sum(-1, keepdims=True)
    roll = rng.random((L, n, n))
    view = lab.SentenceView(list("abcdef"), "abcdef", 2, w, None, None, [], roll)
    queries, keys = torch.randn(n, 2), torch.randn(n, 2)
    g = QKGeometry(queries, keys, None, torch.zeros(n, n), torch.tensor([0.5, 0.25]))
    layer, head, q = 1, 2, 3
    s = lab.sentence_summary(view, g, layer, head, q)
    key = max(range(n), key=lambda j: w[layer, head, q, j])
    dist = [math.dist(keys[j].tolist(), queries[q].tolist()) for j in range(n)]
    assert (s.key, s.weight) == (key, w[layer, head, q, key])
    assert s.rank == 1 + sum(d < dist[key] for d in dist) and s.nearest == dist.index(min(dist))
    assert s.plane_variance == pytest.approx(0.75)
    other = max((j for j in range(n) if j != q), key=lambda j: roll[-1, q, j])
    assert (s.rollout_key, s.rollout_weight, s.rollout_self) == (other, roll[-1, q, other], roll[-1, q, q])
    mean = [sum(w[-1, b, q, j] for b in range(h)) / h for j in range(n)]
    assert s.last_key == mean.index(max(mean)) and s.last_weight == pytest.approx(max(mean))

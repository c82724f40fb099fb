"""The sinks page's computations (attention_core/labs/attention_sinks.py) and its trained model against independent
oracles: the receptive field of stacked windows against a brute-force search over paths and the L x (W - 1) rule;
the stream grammar; one head's weights and the first token's share against a recomputation; the shipped model's
recorded figures (sinks present, the ordering of the streaming methods) within tolerances; the rolling-cache stream
computed all at once against the library's token-by-token StreamingDecoder, and the recorded grid of every cache
size x length against the library's streams. Runtime: about 15 s."""
from __future__ import annotations

import json
import random

import numpy as np
import pytest
import torch

from attention_core.labs import attention_sinks as lab
from attention_core.models import attention_sinks_lm as sinks_lm
from attention_core.models import recipes
from attention_core.streaming import streaming_logits


def brute_reach(n: int, window: int, layers: int, sinks: int) -> list[list[set[int]]]:
    """For each layer count 1..layers and output i: the inputs reachable by a path of visible steps, written
    from the definition (j <= i and (i - j < window or j < sinks)), no matrices."""
    sees = [{j for j in range(n) if j <= i and (i - j < window or j < sinks)} for i in range(n)]
    level, out = [{i} for i in range(n)], []
    for _ in range(layers):
        level = [set().union(*(level[k] for k in sees[i])) for i in range(n)]
        out.append(level)
    return out


@pytest.mark.parametrize("n, window, layers, sinks", [(12, 3, 4, 0), (20, 4, 3, 0), (16, 1, 3, 0), (18, 5, 2, 2),
                                                      (9, 9, 2, 0), (25, 2, 5, 1)])
def test_receptive_field_equals_a_search_over_paths(n, window, layers, sinks):
    r = lab.receptive_field(n, window, layers, sinks)
    brute = brute_reach(n, window, layers, sinks)
    for layer in range(layers):
        for i in range(n):
            assert set(np.flatnonzero(r.reach[layer, i])) == brute[layer][i]
    for i in range(n):                                    # first_layer: the fewest layers after which j reaches i
        for j in range(n):
            want = next((layer + 1 for layer in range(layers) if j in brute[layer][i]), 0)
            assert r.first_layer[i, j] == want


@pytest.mark.parametrize("window", [1, 2, 3, 4, 8])
@pytest.mark.parametrize("layers", [1, 2, 3, 6])
def test_the_last_output_reaches_l_times_w_minus_1_back(window, layers):
    n = 64
    r = lab.receptive_field(n, window, layers)
    for layer in range(1, layers + 1):
        assert r.farthest[layer - 1] == min(n - 1, lab.span_rule(window, layer)) == min(n - 1, layer * (window - 1))
        # and every input in between is reached: a contiguous band of span + 1 tokens
        assert int(r.reach[layer - 1, n - 1].sum()) == min(n, layer * (window - 1) + 1)


def test_with_sinks_every_layer_reaches_the_first_tokens():
    r = lab.receptive_field(40, 4, 3, sinks=4)
    assert all(f == 39 for f in r.farthest)
    assert r.reach[0, 39, :4].all() and not r.reach[2, 39, 4:30].any()


def test_the_stream_follows_its_grammar():
    rng = random.Random(3)
    named = 0
    for _ in range(400):
        s = sinks_lm.sentence(rng)
        assert s[0] in sinks_lm.TOPICS and all(w not in sinks_lm.TOPICS for w in s[1:])
        names = [w for w in s if w in sinks_lm.NAMES]
        if names:                                         # named once, then recalled: "... @ name ."
            named += 1
            assert len(names) == 2 and s[-2:] == [sinks_lm.RECALL, names[0]]
            s = [w for w in s[:-2] if w not in sinks_lm.NAMES]
        assert 3 <= len(s) - 1 <= 8 and sinks_lm.RECALL not in s
        topic = s[0].lower()
        for prev, word in zip(s[1:-1], s[2:]):         # every word: the topic's own or a successor of prev
            assert word.startswith(topic) or word in sinks_lm.SUCCESSORS[prev]
    assert 150 < named < 250                              # NAME_P = 0.5
    crop = sinks_lm.stream(random.Random(4), 300)
    assert len(crop) == 300 and set(crop) <= set(sinks_lm.SYMBOLS) and crop[0] == sinks_lm.BOS
    assert sinks_lm.BOS not in crop[1:]
    batch = sinks_lm.make_batch(random.Random(5), 3, 10)
    assert batch.ids.shape == (3, 10) and (batch.ids[:, 1:] == batch.targets[:, :-1]).all()


def test_softmax_row_sums_to_one_and_parks_weight_on_the_high_score():
    w = lab.softmax_row([4.0, 0.1, 0.0, -0.1])
    assert w.sum() == pytest.approx(1.0) and w[0] > 0.9
    assert lab.softmax_row([0.0] * 5) == pytest.approx([0.2] * 5)


# ------------------------------------------------------------------ the shipped model
@pytest.fixture(scope="module")
def loaded():
    return recipes.load_model(lab.RECIPE)


def test_head_view_matches_a_recomputation(loaded):
    view = lab.head_view(loaded.model, seed=3)
    ids = torch.tensor([sinks_lm.encode(view.tokens)])
    with torch.no_grad():
        weights = loaded.model(ids).weights
    for layer, w in enumerate(weights):
        assert np.abs(view.weights[layer] - w[0].numpy()).max() < 1e-6
    share = sinks_lm.first_token_share(loaded.model, ids).numpy()
    assert np.abs(view.first_share - share).max() < 1e-6
    assert np.allclose(view.weights.sum(-1), 1, atol=1e-5)     # every query's weights sum to 1


def test_the_shipped_model_grew_a_sink_and_streams_as_recorded(loaded):
    """What the shipped model does (recorded at training time on held-out data), with margins for a retrained model:
    a head that parks on the first token, dense attention failing beyond the training length, positions in the
    text hurting the sinks, and the other windowed methods about equal (in this model evicting the sink costs
    almost nothing)."""
    ev = loaded.meta["eval"]
    share = np.array(ev["first_share"])
    uniform = ev["uniform_first_share"]
    assert share.shape == (4, 4) and uniform == pytest.approx(sinks_lm.uniform_share(64))
    assert share.max() > 0.3 and share.max() > 5 * uniform          # measured 0.56, 20 times an even spread
    assert ev["loss"] < 2.4                                            # it learned the grammar (measured 2.15)
    s = ev["stream"]["loss"]
    assert ev["stream"]["sink_eviction_loss"] == pytest.approx(s["window"] - s["sinks"])
    assert s["dense"] > s["sinks"] + 0.5                               # measured 3.68 against 2.08
    assert s["sinks_original"] > s["sinks"] + 0.03                     # measured 2.19 against 2.08
    assert abs(s["recompute"] - s["sinks"]) < 0.05 and abs(s["window"] - s["sinks"]) < 0.05


@torch.no_grad()
def test_the_recorded_first_token_share_is_what_the_checkpoint_does(loaded):
    held = sinks_lm.make_batch(random.Random(sinks_lm.EVAL_SEED), sinks_lm.EVAL_SEQS)
    share = sinks_lm.first_token_share(loaded.model, held.ids).numpy()
    assert np.abs(share - np.array(loaded.meta["eval"]["first_share"])).max() < 1e-5
    weights = loaded.model(held.ids[:4]).weights                     # the oracle: the weights, summed by hand
    l, h = np.unravel_index(share.argmax(), share.shape)
    by_hand = weights[l][:4, h, sinks_lm.SHARE_FROM:, 0].mean().item()
    assert by_hand == pytest.approx(float(sinks_lm.first_token_share(loaded.model, held.ids[:4])[l, h]), abs=1e-6)


STREAMS = [(0, 16, "cache"), (4, 12, "cache"), (4, 12, "original"), (4, 28, "cache"), (2, 200, "cache"),
           (1, 1, "cache")]


@pytest.mark.parametrize("sinks, window, positions", STREAMS)
def test_the_stream_computed_all_at_once_equals_feeding_it_token_by_token(loaded, sinks, window, positions):
    """The oracle: the library's StreamingDecoder, a prefill then one token at a time through rolling caches
    (the last case, 200 > 130 tokens, never evicts; the one before keeps a single slot)."""
    ids = torch.tensor([sinks_lm.encode(lab.heldout_tokens(s, 130)) for s in (1, 2)])
    want = streaming_logits(loaded.model, ids, sinks=sinks, window=window, positions=positions)
    got = lab.stream_all_at_once(loaded.model, ids, sinks=sinks, window=window, positions=positions)
    assert got.shape == want.shape and (got - want).abs().max() < 1e-4


@pytest.mark.parametrize("kv_heads, qk_norm, position", [(2, False, "rope"), (1, True, "rope"), (4, False, "none")])
def test_all_at_once_on_other_models(kv_heads, qk_norm, position):
    """GQA / MQA, QK-norm and no positions take the same path as the token-by-token stream."""
    from attention_core.decoder import DecoderConfig, DecoderLM
    torch.manual_seed(0)
    model = DecoderLM(DecoderConfig(vocab_size=11, d_model=32, num_layers=2, num_heads=4, num_kv_heads=kv_heads,
                                    d_ff=0 if qk_norm else 48, position=position, qk_norm=qk_norm)).eval()
    ids = torch.randint(0, 11, (2, 40))
    for sinks, window in ((0, 8), (3, 5), (2, 60)):
        want = streaming_logits(model, ids, sinks=sinks, window=window)
        assert (lab.stream_all_at_once(model, ids, sinks=sinks, window=window) - want).abs().max() < 1e-5


def test_cache_slots_follow_kept_positions():
    from attention_core.streaming import kept_positions
    for sinks, window in ((0, 5), (4, 4), (2, 9)):
        slots = lab.cache_slots(30, sinks, window, "original")
        for i in range(30):
            kept = kept_positions(i + 1, sinks, window)
            assert slots.index[i][slots.filled[i]].tolist() == kept
            assert int(slots.query_pos[i]) == i
        assert lab.cache_slots(30, sinks, window).query_pos.tolist() == [min(i, sinks + window - 1) for i in range(30)]


def test_the_token_by_token_check_agrees(loaded):
    check = lab.token_by_token_check(loaded.model, seed=3, cache=12)
    assert check.tokens == 14 and check.evicted == 2 and check.max_diff < 1e-4


def test_the_recorded_grid_is_what_the_library_streams(loaded):
    """One cell of the shipped grid against the library's own streams (``sinks_lm.stream_logits``: token by token
    for the rolling caches), on the same held-out crops."""
    grid = lab.read_grid(lab.GRID_FILE, loaded.meta)
    assert grid["seeds"] == list(range(lab.GRID_CROPS)) and grid["caches"] == list(lab.CACHES)
    n, c = 96, 12
    ids = torch.tensor([sinks_lm.encode(lab.heldout_tokens(s, n + 1)) for s in grid["seeds"]])
    for method in sinks_lm.STREAM_METHODS:
        want = sinks_lm.nll(sinks_lm.stream_logits(loaded.model, ids[:, :-1], method, cache=c), ids[:, 1:]).mean()
        assert grid["loss"][lab.cell(n, c)][method] == pytest.approx(float(want), abs=1e-4)
    # the cells the page offers are all there; evicting the sinks costs little, 4 sinks of a cache of 8 a lot
    for length in lab.LENGTHS:
        loss = grid["loss"][lab.cell(length, 32)]
        assert abs(loss["window"] - loss["sinks"]) < 0.05 and loss["dense"] > loss["sinks"]


def test_a_grid_for_another_checkpoint_or_without_a_cell_is_refused(loaded, tmp_path):
    record = json.loads(lab.GRID_FILE.read_text(encoding="utf-8"))
    other = dict(record, checkpoint={"train_seconds": 1.0, "loss": 3.0})
    (tmp_path / "other.json").write_text(json.dumps(other), encoding="utf-8")
    lab.read_grid(tmp_path / "other.json")                               # no checkpoint given: fine
    with pytest.raises(ValueError, match="another checkpoint"):
        lab.read_grid(tmp_path / "other.json", loaded.meta)
    cut = dict(record, loss={k: v for k, v in record["loss"].items() if k != lab.cell(256, 8)})
    (tmp_path / "cut.json").write_text(json.dumps(cut), encoding="utf-8")
    with pytest.raises(ValueError, match="256 tokens with a cache of 8"):
        lab.read_grid(tmp_path / "cut.json")


def test_stream_case_batches_crops_like_one_at_a_time(loaded):
    both = lab.stream_case(loaded.model, [1, 2], 96, 16)
    one = [lab.stream_case(loaded.model, [s], 96, 16) for s in (1, 2)]
    assert both.crops == 2 and set(both.losses) == set(sinks_lm.STREAM_METHODS)
    for m in sinks_lm.STREAM_METHODS:
        assert both.losses[m] == pytest.approx((one[0].losses[m] + one[1].losses[m]) / 2, abs=1e-5)

"""The GQA page's computations (attention_core/labs/gqa.py) and its recall models (attention_core/models/gqa_lm.py)
against independent oracles: the measured K/V head of each query head equals torch's enable_gqa grouping; the
bytes per token equal what a layer's K/V really hold; MLA's sizes are DeepSeek-V2's Table 1; the absorbed decoding
equals the explicit forward; the RoPE pitfall is a real difference; the recall batches ask what a brute-force
lookup answers; the shipped models' recorded evaluation is what they do now, within tolerances. Runtime: about
10 s (the shipped-model tests re-evaluate 300 sequences per model)."""
from __future__ import annotations

import math
import random

import pytest
import torch
import torch.nn.functional as F

from attention_core.decoder import CausalSelfAttention
from attention_core.labs import gqa as lab
from attention_core.latent import MultiHeadLatentAttention
from attention_core.models import gqa_lm, recipes


@pytest.mark.parametrize("h, h_kv", [(4, 4), (8, 2), (8, 1), (32, 8), (16, 16), (12, 3)])
def test_the_measured_kv_head_of_each_query_head_is_torchs_grouping(h, h_kv):
    got = lab.kv_head_of(h, h_kv)
    assert got == [i // (h // h_kv) for i in range(h)]
    q = torch.zeros(1, h, 1, 4)                                 # oracle: torch SDPA with enable_gqa
    v = torch.arange(h_kv, dtype=torch.float32).view(1, h_kv, 1, 1).expand(1, h_kv, 1, 4)
    out = F.scaled_dot_product_attention(q, torch.zeros(1, h_kv, 1, 4), v, enable_gqa=True)
    assert out[0, :, 0, 0].round().int().tolist() == got


def test_usable_kv_heads_is_the_largest_divisor_not_above():
    assert lab.usable_kv_heads(8, 2) == 2 and lab.usable_kv_heads(8, 16) == 8 and lab.usable_kv_heads(4, 32) == 4
    assert lab.usable_kv_heads(12, 5) == 4 and lab.usable_kv_heads(8, 0) == 1
    for h in lab.QUERY_HEADS:
        assert all(h % lab.usable_kv_heads(h, k) == 0 for k in lab.KV_HEADS)


@pytest.mark.parametrize("h, h_kv", [(8, 8), (8, 2), (8, 1)])
def test_bytes_per_token_are_what_the_layers_cache_holds(h, h_kv):
    layers, d_head = 3, 16
    attn = CausalSelfAttention(h * d_head, h, h_kv).to(torch.bfloat16).eval()
    from attention_core.decoder import KVCache
    cache = KVCache()
    with torch.no_grad():
        attn(torch.randn(1, 5, h * d_head, dtype=torch.bfloat16), cache)
    assert cache.nbytes() == 5 * attn.kv_bytes_per_token(torch.bfloat16)
    assert lab.bytes_per_token(h_kv, layers, d_head, 2) == layers * attn.kv_bytes_per_token(torch.bfloat16)
    assert lab.bytes_per_token(h_kv) == 2 * 32 * h_kv * 128 * 2                 # the page's Llama-2-7B shape


def test_mla_sizes_are_deepseek_v2_table_1():
    by = {s.variant: s.per_layer for s in lab.mla_sizes()}
    s = lab.DEEPSEEK_V2
    assert by == {"MHA": 2 * 128 * 128, "GQA": 2 * 8 * 128, "MQA": 2 * 128, "MLA": 512 + 64}
    assert by["MLA"] == 4.5 * s.d_head and by["MLA"] / (2 * s.d_head) == 2.25    # the paper: "2.25 groups"
    small = MultiHeadLatentAttention(64, 4, 32, d_rope=8)                           # the module's own formula
    assert small.cache_bytes_per_token(torch.bfloat16) == 2 * (32 + 8)


@pytest.mark.parametrize("d_latent", lab.LATENTS)
def test_absorbed_decoding_equals_the_explicit_forward(d_latent):
    demo = lab.absorption(d_latent)
    assert demo.max_diff < 1e-5 and demo.max_weight_diff < 1e-6
    assert demo.latent_bytes == demo.tokens * (d_latent + lab.DEMO["d_rope"]) * 4
    assert demo.mha_per_token == 2 * lab.DEMO["num_heads"] * lab.DEMO["d_head"]


def test_rotating_the_latent_keys_breaks_the_absorption_and_the_decoupled_part_does_not():
    demo = lab.rope_on_latent_keys()
    assert demo.max_score_diff > 0.1 and demo.max_weight_diff > 1e-3 and demo.fixed_ok < 1e-5
    # oracle: at equal positions the rotation cancels (R_i^T R_i = I), so the first token's score is the same
    g = torch.Generator().manual_seed(0)
    from attention_core.positional import rotary_embedding
    q, k = torch.randn(1, 16, generator=g), torch.randn(1, 16, generator=g)
    same = rotary_embedding(q, torch.tensor([5])) @ rotary_embedding(k, torch.tensor([5])).T
    assert same.item() == pytest.approx((q @ k.T).item(), abs=1e-5)


def test_quality_row_reads_a_recorded_evaluation_and_refuses_a_partial_one():
    ev = dict(accuracy=0.9, accuracy_ci95=0.01, loss=0.3, loss_ci95=0.02, sequences=100, num_heads=4,
              num_kv_heads=2, kv_bytes_per_token=256)
    row = lab.quality_row("gqa_kv2", {"eval": ev, "train_seconds": 12.0})
    assert row.num_kv_heads == 2 and row.accuracy == 0.9 and row.train_seconds == 12.0
    for missing in ("accuracy_ci95", "kv_bytes_per_token"):
        with pytest.raises(ValueError):
            lab.quality_row("gqa_kv2", {"eval": {k: v for k, v in ev.items() if k != missing}})
    with pytest.raises(ValueError):
        lab.quality_row("gqa_kv2", {"eval": {**ev, "accuracy": "high"}})
    d = lab.difference(0.9, 0.03, 0.8, 0.04)
    assert d.value == pytest.approx(0.1) and d.half_width == pytest.approx(0.05) and d.beyond_noise
    assert not lab.difference(0.9, 0.03, 0.88, 0.04).beyond_noise


def test_recall_batches_ask_what_a_brute_force_lookup_answers():
    batch = gqa_lm.recall_batch(random.Random(3), 16)
    itos = gqa_lm.TASK.vocab.itos
    assert batch.weight.sum(1).tolist() == [gqa_lm.QUERIES] * 16
    for row in range(16):
        entries = [itos[i] for i in batch.ids[row, :gqa_lm.PAIRS].tolist()]
        table = dict(e.split("=") for e in entries)                       # the dictionary, read back
        assert len(table) == gqa_lm.PAIRS                                 # distinct keys
        asked = []
        for pos in batch.weight[row].nonzero().flatten().tolist():
            key = itos[batch.ids[row, pos].item()]
            assert itos[batch.targets[row, pos].item()] == table[key]     # brute-force lookup
            asked.append(key)
        assert sorted(asked) == sorted(table)                             # every key asked once


def test_interval_is_1_96_standard_errors():
    x = torch.tensor([0.0, 1.0] * 50)
    assert gqa_lm.interval(x) == pytest.approx(1.96 * x.std().item() / 10)


def test_the_recipes_differ_only_in_kv_heads():
    configs = {name: recipes.RECIPES[name] for name in lab.RECIPES}
    base = configs["gqa_kv4"]
    for name, r in configs.items():
        assert (r.steps, r.batch_size, r.lr, r.seed) == (base.steps, base.batch_size, base.lr, base.seed)
        assert {k: v for k, v in r.config.items() if k != "num_kv_heads"} == \
            {k: v for k, v in base.config.items() if k != "num_kv_heads"}
    assert [configs[n].config["num_kv_heads"] for n in lab.RECIPES] == [4, 2, 1]


def test_the_shipped_models_do_what_their_recorded_evaluation_says():
    """Re-evaluated on 300 other held-out sequences: each model's accuracy is its recorded one within 4 points,
    MHA answers (nearly) everything, and sharing K/V heads costs accuracy well beyond the intervals."""
    got = {}
    for recipe in lab.RECIPES:
        loaded = recipes.load_model(recipe)
        row = lab.quality_row(recipe, loaded.meta)
        now = gqa_lm.evaluate_recall(loaded.model, sequences=300, seed=gqa_lm.EVAL_SEED + 1)
        assert now["num_kv_heads"] == row.num_kv_heads and now["kv_bytes_per_token"] == row.kv_bytes_per_token
        assert abs(now["accuracy"] - row.accuracy) < 0.04 and row.sequences == gqa_lm.EVAL_SEQUENCES
        got[row.num_kv_heads] = row
    assert got[4].accuracy > 0.97
    assert got[4].accuracy >= got[2].accuracy >= got[1].accuracy
    gap = lab.difference(got[4].accuracy, got[4].accuracy_ci95, got[1].accuracy, got[1].accuracy_ci95)
    assert gap.value > 0.05 and gap.beyond_noise

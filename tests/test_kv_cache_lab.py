"""The KV-cache page's computations (attention_core/labs/kv_cache.py) against independent oracles: generation with
the cache equals generation without it and one full causal forward over the final sequence; each pass computes
exactly the rows the page says; the size formula equals the bytes the caches really hold; the recorded benchmark
loader refuses damaged files. Runtime: about 3 s."""
from __future__ import annotations

import json

import pytest
import torch

from attention_core.labs import kv_cache as lab


@pytest.mark.parametrize("prompt, new, seed, kv_heads", [(1, 1, 0, 2), (6, 10, 0, 2), (3, 12, 7, 1), (16, 24, 3, 4)])
def test_cached_generation_equals_uncached_and_one_full_forward(prompt, new, seed, kv_heads):
    model = lab.build_model(2, 32, 4, kv_heads, seed)
    ids = lab.prompt_ids(prompt, seed)
    plain = lab.generate_without_cache(model, ids, new)
    cached = lab.generate_with_cache(model, ids, new)
    assert plain.tokens == cached.tokens and len(cached.tokens) == prompt + new
    assert (plain.logits - cached.logits).abs().max() < 1e-5
    with torch.no_grad():                                  # the oracle: one causal forward over the final tokens
        full = model(torch.tensor([cached.tokens])).logits[0, prompt - 1:-1]
    assert (full - cached.logits).abs().max() < 1e-5
    assert cached.tokens[prompt:] == full.argmax(-1).tolist()


def test_each_pass_computes_what_the_page_says():
    c = lab.compare(5, 7, 0)
    assert [s[:2] for s in c.cached.steps] == [(0, 5)] + [(5 + k, 1) for k in range(6)]
    assert [s[:2] for s in c.plain.steps] == [(0, 5 + k) for k in range(7)]
    assert c.rows_plain == 7 * 5 + 7 * 6 // 2 and c.rows_cached == 5 + 6      # closed forms
    full = lab.report(5, 16, 0)
    r = full.upto(7)                                     # a prefix of the longer run is the shorter run
    assert r.steps == [s[:2] for s in c.cached.steps] and r.tokens == c.cached.tokens
    assert r.same_tokens and r.max_abs_diff == pytest.approx(c.max_abs_diff, abs=1e-6) and r.max_abs_diff < 1e-5
    assert (r.rows_plain, r.rows_cached) == (c.rows_plain, c.rows_cached)
    assert r.cache_bytes == c.cached.cache_bytes == full.cache_bytes[6]


@pytest.mark.parametrize("layers, heads, kv_heads, d_model, dtype", [(2, 4, 2, 32, torch.float32),
                                                                      (3, 4, 1, 64, torch.bfloat16),
                                                                      (1, 8, 8, 64, torch.float16)])
def test_size_formula_equals_the_bytes_the_caches_hold(layers, heads, kv_heads, d_model, dtype):
    n = 11
    model = lab.tiny_decoder(layers, d_model, heads, kv_heads).eval().to(dtype)
    caches = model.new_caches()
    with torch.no_grad():
        model(torch.tensor([lab.prompt_ids(n)]), caches)
    held = sum(c.k.numel() * c.k.element_size() + c.v.numel() * c.v.element_size() for c in caches)
    bytes_per = torch.empty(0, dtype=dtype).element_size()
    assert held == lab.kv_cache_bytes(layers, kv_heads, d_model // heads, bytes_per, n)
    assert held == sum(c.nbytes() for c in caches)


def test_published_table():
    by = {m.name: (m, sizes) for m, sizes in lab.published_sizes()}
    llama2, sizes = by["Llama-2-7B"]
    assert sizes[0] == 2 * 2 ** 30                      # 0.5 MiB per token (32 x 32 x 128 x 2 x 2 bytes) x 4096
    assert by["Mistral-7B-v0.1"][1][1] * 4 == by["Llama-2-7B"][1][1]      # 8 K/V heads instead of 32
    for m, s in by.values():
        assert m.heads % m.kv_heads == 0 and m.dtype in lab.DTYPE_BYTES
        assert s == [2 * m.layers * m.kv_heads * m.d_head * lab.DTYPE_BYTES[m.dtype] * n for n in lab.TABLE_TOKENS]


def test_forgotten_offset_changes_the_weights_only_when_the_position_is_not_zero():
    assert lab.forgotten_offset(context=0).max_weight_diff == 0.0          # position 0 is then right
    demo = lab.forgotten_offset(context=32)
    assert 0.05 < demo.moved <= 1.0 and demo.max_weight_diff > 0.01


def test_timing_curve_times_each_context_both_ways():
    r = lab.timing_curve((4, 8), repeats=2)
    assert [x.context for x in r] == [4, 8] and all(x.plain_s > 0 and x.cached_s > 0 for x in r)


def test_read_bench_accepts_the_shipped_file_and_refuses_damaged_ones(tmp_path):
    doc = lab.read_bench(lab.BENCH_FILE)
    assert len(doc["results"]) >= 2 and doc["machine"]
    with pytest.raises(FileNotFoundError):
        lab.read_bench(tmp_path / "none.json")
    bad = tmp_path / "bad.json"
    for text in ("{not json", json.dumps({"machine": {}}), json.dumps({**doc, "results": doc["results"][:1]}),
                 json.dumps({**doc, "results": [{"context": 8, "plain_s": "x", "cached_s": 1}] * 2})):
        bad.write_text(text, encoding="utf-8")
        with pytest.raises(ValueError):                    # json.JSONDecodeError is a ValueError
            lab.read_bench(bad)

"""attention_core.streaming (rolling KV cache with attention sinks) against independent oracles: the kept tokens
are the rows of ``sliding_window_mask``; without eviction the stream equals the full causal forward; with
positions in the text it equals the library's mask-based window model (DecoderLM with window/sinks set); with
StreamingLLM's positions in the cache it equals a naive step-by-step recomputation written here from the
weights; recomputation equals one forward per window. Runtime: about 3 s."""
from __future__ import annotations

import copy
import math

import pytest
import torch

from attention_core.decoder import DecoderConfig, DecoderLM
from attention_core.masks import sliding_window_mask
from attention_core.positional import rotary_embedding
from attention_core.streaming import (
    StreamingCache,
    StreamingDecoder,
    kept_positions,
    recompute_logits,
    streaming_logits,
)

ATOL = 2e-5


def model(seed=0, position="rope", kv=None, layers=2, qk_norm=False):
    torch.manual_seed(seed)
    cfg = DecoderConfig(vocab_size=23, d_model=32, num_layers=layers, num_heads=4, num_kv_heads=kv, d_ff=48,
                        position=position, qk_norm=qk_norm)
    m = DecoderLM(cfg).eval()
    with torch.no_grad():                      # larger q/k weights: the positions matter in the scores
        for attn in m.attention_layers():
            attn.W_query.weight.mul_(3)
            attn.W_key.weight.mul_(3)
    return m


def ids(b, n, seed=1):
    return torch.randint(0, 23, (b, n), generator=torch.Generator().manual_seed(seed))


@pytest.mark.parametrize("sinks, window", [(0, 1), (0, 5), (4, 3), (2, 6), (1, 1)])
def test_kept_tokens_are_the_rows_of_the_sliding_window_mask(sinks, window):
    n = 20
    mask = sliding_window_mask(n, window, sinks=sinks)
    for t in range(n):
        assert kept_positions(t + 1, sinks, window) == mask[t].nonzero().flatten().tolist()
    cache = StreamingCache(sinks, window)
    for t in range(n):                          # the cache itself keeps exactly those, in order
        cache.append(torch.full((1, 1, 1, 2), float(t)), torch.zeros(1, 1, 1, 2))
        assert cache.index.tolist() == kept_positions(t + 1, sinks, window)
        assert cache.k[0, 0, :, 0].tolist() == [float(i) for i in cache.index.tolist()]
        assert cache.positions("cache").tolist() == list(range(len(cache)))
        assert len(cache) == min(t + 1, sinks + window)


@pytest.mark.parametrize("positions", ["cache", "original"])
@pytest.mark.parametrize("position", ["rope", "none"])
def test_without_eviction_the_stream_is_the_full_causal_forward(positions, position):
    m, x = model(position=position, kv=2), ids(2, 12)
    full = m(x).logits
    assert (streaming_logits(m, x, sinks=4, window=8, positions=positions) - full).abs().max() < ATOL
    stream = StreamingDecoder(m, 4, 8, positions)           # one token at a time, too
    steps = torch.cat([stream.feed(x[:, i:i + 1]) for i in range(12)], dim=1)
    assert (steps - full).abs().max() < ATOL


@pytest.mark.parametrize("sinks, window", [(0, 4), (4, 4), (1, 6), (2, 3)])
def test_positions_in_the_text_equal_the_mask_based_window_model(sinks, window):
    """Oracle: the library's DecoderLM with attention layers masked by sliding_window_mask(n, window, sinks)."""
    m, x = model(seed=3, kv=1, qk_norm=True), ids(3, 30, seed=4)
    masked = copy.deepcopy(m)
    for attn in masked.attention_layers():
        attn.window, attn.sinks = window, sinks
    oracle = masked(x).logits
    got = streaming_logits(m, x, sinks=sinks, window=window, positions="original")
    assert (got - oracle).abs().max() < ATOL
    assert (got - m(x).logits).abs().max() > 1e-2          # and eviction did change something


def test_without_sinks_positions_in_the_cache_change_nothing_rope_is_relative():
    m, x = model(seed=5), ids(2, 28, seed=6)
    a = streaming_logits(m, x, sinks=0, window=5, positions="cache")
    b = streaming_logits(m, x, sinks=0, window=5, positions="original")
    assert (a - b).abs().max() < 1e-4


def naive_stream(m: DecoderLM, x: torch.Tensor, sinks: int, window: int) -> torch.Tensor:
    """StreamingLLM written out step by step from the weights: each layer's inputs of every token are stored;
    at step t the keys and values of the kept tokens are projected again from those inputs, rotated by their slot
    in the cache (0 .. S-1), the query by its own slot S-1; softmax written out."""
    b, T = x.shape
    inputs = [[] for _ in m.blocks]                 # per layer: the (b, d_model) input of each token so far
    out = []
    for t in range(T):
        h = m.embed(x[:, t])                        # (b, d_model)
        kept = kept_positions(t + 1, sinks, window)
        for layer, block in enumerate(m.blocks):
            inputs[layer].append(h)
            a = block.attn
            X = block.ln1(torch.stack([inputs[layer][j] for j in kept], dim=1))      # (b, S, d_model)
            S, d = len(kept), a.d_head
            q = a.W_query(X[:, -1]).view(b, a.num_heads, 1, d)
            k = a.W_key(X).view(b, S, a.num_kv_heads, d).transpose(1, 2)
            v = a.W_value(X).view(b, S, a.num_kv_heads, d).transpose(1, 2)
            if a.q_norm is not None:
                q, k = a.q_norm(q), a.k_norm(k)
            k = rotary_embedding(k, torch.arange(S), a.rope_base)
            q = rotary_embedding(q, torch.tensor([S - 1]), a.rope_base)
            group = a.num_heads // a.num_kv_heads
            k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
            scores = (q @ k.transpose(-1, -2)) / math.sqrt(d)
            w = scores.exp() / scores.exp().sum(-1, keepdim=True)
            o = (w @ v).reshape(b, a.d_model)
            h = h + a.W_output(o)
            h = h + block.mlp(block.ln2(h))
        out.append(m.head(m.ln_f(h)))
    return torch.stack(out, dim=1)


@pytest.mark.parametrize("sinks, window, kv", [(4, 4, None), (1, 5, 2), (2, 2, 1)])
def test_positions_in_the_cache_equal_a_naive_step_by_step_recomputation(sinks, window, kv):
    m, x = model(seed=7, kv=kv, layers=3), ids(2, 24, seed=8)
    with torch.no_grad():
        oracle = naive_stream(m, x, sinks, window)
    got = streaming_logits(m, x, sinks=sinks, window=window, positions="cache")
    assert (got - oracle).abs().max() < ATOL
    original = streaming_logits(m, x, sinks=sinks, window=window, positions="original")
    assert (got - original).abs().max() > 1e-3            # the sinks' positions matter once tokens are evicted


@pytest.mark.parametrize("keep_first", [0, 1, 3])
def test_recomputation_is_one_fresh_forward_per_window(keep_first):
    m, x, w = model(seed=9), ids(2, 19, seed=10), 6
    got = recompute_logits(m, x, w, keep_first=keep_first, chunk=5)
    with torch.no_grad():
        for i in range(19):
            if i < w:
                tokens = x[:, :i + 1]
            else:                                  # the first tokens, then the most recent ones
                tokens = torch.cat((x[:, :keep_first], x[:, i - (w - keep_first) + 1:i + 1]), dim=1)
            assert tokens.size(1) == min(i + 1, w)
            want = m(tokens).logits[:, -1]
            assert (got[:, i] - want).abs().max() < ATOL


def test_bad_uses_raise_clear_errors():
    with pytest.raises(ValueError, match="window"):
        kept_positions(3, 0, 0)
    m = model()
    stream = StreamingDecoder(m, 1, 2)
    with pytest.raises(ValueError, match="one at a time"):
        stream.feed(ids(1, 4))
    with pytest.raises(ValueError, match="positions"):
        StreamingDecoder(m, 1, 2, positions="absolute")
    with pytest.raises(ValueError, match="RoPE"):
        StreamingDecoder(DecoderLM(DecoderConfig(vocab_size=5, d_model=8, num_heads=2, position="learned")), 1, 2)

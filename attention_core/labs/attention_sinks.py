"""Sliding windows and attention sinks: the page's computations (no Streamlit, no pandas).

- The receptive field of stacked window layers, computed by composing the masks: after l layers, output i
  depends on input j exactly when (M^l)_ij > 0 for the boolean window mask M (a path i -> k -> ... -> j of
  visible steps). With window W, the farthest input the last output reaches goes back l x (W - 1) tokens.
- The trained model (``attention_core.models.attention_sinks_lm``, recipe ``sinks_lm``): one head's weights on
  a held-out crop (live), and the streaming losses for every cache size and stream length the page offers,
  recorded over ``GRID_CROPS`` held-out crops into ``GRID_FILE`` by this module's CLI (the checkpoint's meta
  holds the 8 x training-length case):

      python -m attention_core.labs.attention_sinks          # writes assets/models/sinks_lm_streams.json
- ``stream_all_at_once``: the rolling-cache stream of ``attention_core.streaming`` computed for every token at once.
  Token by token, a cache never recomputes: what token i reads in layer l is the keys and values its cache holds
  then, each computed when its token arrived. So layer by layer, every query can gather the (un-rotated) keys of
  the tokens its cache holds, rotate them by their slots, and attend: the same numbers as ``streaming_logits``
  (to float precision, tested), a few milliseconds instead of one forward per token.
"""
from __future__ import annotations

import argparse
import json
import random
import time
from pathlib import Path
from typing import NamedTuple

import numpy as np
import torch

from ..functional import default_scale, grouped_query_attention
from ..masks import sliding_window_mask
from ..models import attention_sinks_lm as sinks_lm
from ..positional import rotary_embedding
from ..streaming import POSITION_RULES, StreamingDecoder, _check_model, kept_positions

RECIPE = "sinks_lm"
CACHES = (8, 12, 16, 24, 32)             # the cache sizes and stream lengths the page's controls offer
LENGTHS = (96, 128, 192, 256)
GRID_CROPS = 16                          # held-out crops (seeds 0 .. 15 of ``heldout_tokens``) per cell
GRID_FILE = Path(__file__).resolve().parents[2] / "assets" / "models" / "sinks_lm_streams.json"
GRID_COMMAND = "python -m attention_core.labs.attention_sinks"
GRID_FORMAT = 1
CHECK_SEED = 0                           # the crop fed token by token to check the all-at-once stream (grid's first)
VIEW_LEN = 32                            # the head view's crop: the sink shows as at 64 tokens, in 1/4 of the cells


# ------------------------------------------------------------------ receptive field of stacked windows
class ReceptiveField(NamedTuple):
    reach: np.ndarray          # (layers, n, n) bool: output i after l+1 layers depends on input j
    first_layer: np.ndarray    # (n, n) int: the fewest layers after which j reaches i (0 = never, within layers)
    farthest: list[int]        # per layer: how many tokens back the last output reaches (i - smallest j)


def receptive_field(n: int, window: int, layers: int, sinks: int = 0) -> ReceptiveField:
    """Compose the window mask layer by layer as boolean matrix products: reach_l = M @ reach_{l-1}."""
    m = sliding_window_mask(n, window, sinks=sinks).to(torch.int64)
    reach, r = [], torch.eye(n, dtype=torch.int64)
    for _ in range(layers):
        r = ((m @ r) > 0).to(torch.int64)                    # a path through one more layer
        reach.append(r.bool())
    stack = torch.stack(reach)                              # (layers, n, n)
    first = torch.where(stack.any(0), stack.int().argmax(0) + 1, 0)
    last = stack[:, n - 1]                                  # (layers, n): what the last output reaches
    farthest = [int(n - 1 - row.nonzero().min()) for row in last]
    return ReceptiveField(stack.numpy(), first.numpy(), farthest)


def span_rule(window: int, layers: int) -> int:
    """How far back the rule says L stacked windows of W reach: L x (W - 1) tokens (W - 1 per layer)."""
    return layers * (window - 1)


# ------------------------------------------------------------------ the trained model
def heldout_tokens(seed: int, length: int = sinks_lm.TRAIN_LEN) -> list[str]:
    """A held-out crop of the stream (seeds offset from every training and evaluation seed)."""
    return sinks_lm.stream(random.Random(900_000 + seed), length)


class HeadView(NamedTuple):
    tokens: list[str]
    weights: np.ndarray        # (layers, heads, n, n) float32
    first_share: np.ndarray    # (layers, heads): mean weight on token 0 for queries >= SHARE_FROM
    value_ratio: np.ndarray    # (layers, heads): |v of token 0| / mean |v| of the others (what a sink writes)


@torch.no_grad()
def head_view(model, seed: int, length: int = VIEW_LEN) -> HeadView:
    """Every layer's and head's attention on one held-out crop, the first token's share of it, and how large the
    first token's value vector is next to the others'."""
    tokens = heldout_tokens(seed, length)
    ids = torch.tensor([sinks_lm.encode(tokens)])
    out = model.eval()(ids)
    weights = torch.stack([w[0] for w in out.weights])                        # (layers, h, n, n)
    start = min(sinks_lm.SHARE_FROM, length - 1)
    share = weights[:, :, start:, 0].mean(-1)
    ratios, x = [], model.embed(ids)
    for block in model.blocks:                                                # the values each layer reads
        attn = block.attn
        v = attn.split_heads(attn.W_value(block.ln1(x)), attn.num_kv_heads)[0]  # (h_kv, n, d)
        norms = v.norm(dim=-1)
        ratios.append(norms[:, 0] / norms[:, 1:].mean(-1))
        x = block(x).output
    return HeadView(tokens, weights.numpy(), share.numpy(), torch.stack(ratios).numpy())


class CacheSlots(NamedTuple):
    index: torch.Tensor        # (T, t) long: the token in each slot of the cache once token i has arrived
    filled: torch.Tensor       # (T, t) bool: the slot holds a token yet (while the cache is filling up)
    query_pos: torch.Tensor    # (T,): the position token i's query is rotated by (its slot, or i in the text)


def cache_slots(T: int, sinks: int, window: int, positions: str = "cache") -> CacheSlots:
    """What a rolling cache of ``sinks`` + ``window`` holds after each token of a stream of ``T`` arrives (row i:
    ``kept_positions(i + 1, sinks, window)`` in slot order). RoPE rotates a kept key by its slot (StreamingLLM,
    ``"cache"``) or by its place in the text (``"original"``, i.e. ``index``), the new query likewise."""
    kept_positions(0, sinks, window)                                  # validates
    if positions not in POSITION_RULES:
        raise ValueError(f"positions must be one of {POSITION_RULES}, got {positions!r}")
    t = min(T, sinks + window)
    i, s = torch.arange(T)[:, None], torch.arange(t)[None, :]
    evicting = (i >= sinks + window) & (s >= sinks)                  # slots past the sinks hold the last window
    index = torch.where(evicting, i - window + 1 + (s - sinks), s)
    query = torch.arange(T).clamp(max=t - 1) if positions == "cache" else torch.arange(T)
    return CacheSlots(index, index <= i, query)


@torch.no_grad()
def stream_all_at_once(model, ids: torch.Tensor, *, sinks: int, window: int,
                       positions: str = "cache") -> torch.Tensor:
    """Logits (b, T, vocab) of ``streaming_logits(model, ids, sinks=sinks, window=window, positions=positions)``
    computed layer by layer for all T tokens at once: query i reads the cached keys and values of the tokens
    its cache holds (``cache_slots``), computed from their own layer input, never recomputed."""
    _check_model(model)
    b, T = ids.shape
    slots = cache_slots(T, sinks, window, positions)
    t = slots.index.size(1)
    visible = slots.filled[:, None, None, :]                          # (T, 1, 1, t): one query per cache
    x = model.embed(ids)                                              # (b, T, d_model)
    for block in model.blocks:
        attn = block.attn
        h = block.ln1(x)
        q = attn.split_heads(attn.W_query(h), attn.num_heads)        # (b, h, T, d)
        k = attn.split_heads(attn.W_key(h), attn.num_kv_heads)       # (b, h_kv, T, d), un-rotated as cached
        v = attn.split_heads(attn.W_value(h), attn.num_kv_heads)
        if attn.q_norm is not None:
            q, k = attn.q_norm(q), attn.k_norm(k)
        rope = dict(base=attn.rope_base, frequencies=attn.rope_frequencies)
        if attn.rope:
            q = rotary_embedding(q, slots.query_pos, **rope)
            if positions == "original":                               # by its place in the text: rotate once
                k = rotary_embedding(k, torch.arange(T), **rope)
        keys, values = k[:, :, slots.index], v[:, :, slots.index]    # (b, h_kv, T, t, d): each query's cache
        if attn.rope and positions == "cache":                        # by its slot 0 .. t-1 in the cache
            keys = rotary_embedding(keys, torch.arange(t), **rope)
        out, _ = grouped_query_attention(q.transpose(1, 2).unsqueeze(-2), keys.transpose(1, 2),
                                         values.transpose(1, 2), visible,
                                         scale=default_scale(attn.d_head) * attn.logit_scale)   # (b, T, h, 1, d)
        x = x + attn.W_output(out.reshape(b, T, attn.d_model))
        if block.mlp is not None:
            x = x + block.mlp(block.ln2(x))
    return model.head(model.ln_f(x))


CACHED = {"window": (0, "cache"), "sinks": (sinks_lm.SINKS, "cache"), "sinks_original": (sinks_lm.SINKS, "original")}


def method_logits(model, ids: torch.Tensor, method: str, cache: int) -> torch.Tensor:
    """``sinks_lm.stream_logits`` for every method, the rolling caches computed all at once."""
    if method in CACHED:
        sinks, rule = CACHED[method]
        return stream_all_at_once(model.eval(), ids, sinks=sinks, window=cache - sinks, positions=rule)
    return sinks_lm.stream_logits(model, ids, method, cache=cache)


class StreamCase(NamedTuple):
    length: int
    cache: int
    crops: int
    losses: dict               # method -> mean next-token loss over the crops and positions


@torch.no_grad()
def stream_case(model, seeds, length: int, cache: int) -> StreamCase:
    """Held-out crops of ``length`` tokens (one per seed) streamed by every method with a cache of ``cache``
    tokens; the rolling caches computed all at once (``stream_all_at_once``)."""
    ids = torch.tensor([sinks_lm.encode(heldout_tokens(seed, length + 1)) for seed in seeds])
    x, y = ids[:, :-1], ids[:, 1:]
    losses = {m: float(sinks_lm.nll(method_logits(model, x, m, cache), y).mean()) for m in sinks_lm.STREAM_METHODS}
    return StreamCase(length, cache, len(ids), losses)


class StreamCheck(NamedTuple):
    tokens: int                # the first ``tokens`` tokens were fed one at a time past a prefill of the cache
    evicted: int               # how many single tokens each evicted one
    max_diff: float            # largest |logit difference| to the same stream computed all at once


@torch.no_grad()
def token_by_token_check(model, seed: int, cache: int, evictions: int = 2) -> StreamCheck:
    """The "window + 4 sinks" stream of one held-out crop, fed through ``StreamingDecoder`` (a prefill of the
    full cache, then ``evictions`` single tokens, each evicting one), against ``stream_all_at_once``."""
    window = cache - sinks_lm.SINKS
    ids = torch.tensor([sinks_lm.encode(heldout_tokens(seed, cache + evictions))])
    stream = StreamingDecoder(model.eval(), sinks_lm.SINKS, window, "cache")
    fed = [stream.feed(ids[:, :cache])] + [stream.feed(ids[:, i:i + 1]) for i in range(cache, ids.size(1))]
    at_once = stream_all_at_once(model, ids, sinks=sinks_lm.SINKS, window=window)
    return StreamCheck(ids.size(1), evictions, float((torch.cat(fed, 1) - at_once).abs().max()))


# ------------------------------------------------------------------ the recorded grid (every cache x length)
def cell(length: int, cache: int) -> str:
    return f"{length}x{cache}"


def record_grid(loaded, path: Path | str | None = GRID_FILE, crops: int = GRID_CROPS, caches=CACHES,
                lengths=LENGTHS) -> dict:
    """Stream ``crops`` held-out crops for every length x cache and write the mean loss of each method, with the
    checkpoint's training time and loss so a page can tell a grid recorded for another checkpoint."""
    t0 = time.perf_counter()
    seeds = list(range(crops))
    grid = {cell(n, c): stream_case(loaded.model, seeds, n, c).losses for n in lengths for c in caches}
    record = {"format": GRID_FORMAT, "recipe": RECIPE, "command": GRID_COMMAND, "seeds": seeds,
              "caches": list(caches), "lengths": list(lengths), "sinks": sinks_lm.SINKS,
              "checkpoint": checkpoint_id(loaded.meta), "loss": grid,
              "seconds": round(time.perf_counter() - t0, 1)}
    if path is not None:
        Path(path).write_text(json.dumps(record, indent=1), encoding="utf-8")
    return record


def checkpoint_id(meta: dict) -> dict:
    """What identifies the checkpoint a grid was recorded on: its training time and recorded loss."""
    return {"train_seconds": meta.get("train_seconds"), "loss": meta.get("eval", {}).get("loss")}


def read_grid(path: Path | str = GRID_FILE, meta: dict | None = None) -> dict:
    """The recorded grid; ValueError if the file is not one, lacks a cell the page offers, or (given the loaded
    checkpoint's ``meta``) was recorded on another checkpoint; FileNotFoundError if it is missing."""
    record = json.loads(Path(path).read_text(encoding="utf-8"))
    if not isinstance(record, dict) or record.get("format") != GRID_FORMAT:
        raise ValueError(f"not a recorded grid of streaming losses (format {GRID_FORMAT})")
    loss = record.get("loss")
    for n in LENGTHS:
        for c in CACHES:
            row = loss.get(cell(n, c)) if isinstance(loss, dict) else None
            if not isinstance(row, dict) or not all(isinstance(row.get(m), (int, float))
                                                    for m in sinks_lm.STREAM_METHODS):
                raise ValueError(f"no losses for {n} tokens with a cache of {c}")
    if not isinstance(record.get("seeds"), list) or not record["seeds"]:
        raise ValueError("no seeds")
    if meta is not None and record.get("checkpoint") != checkpoint_id(meta):
        raise ValueError(f"recorded on another checkpoint of {RECIPE} (retrained since)")
    return record


def softmax_row(scores) -> np.ndarray:
    """softmax of one row of scores (float64): the weights of a query that must sum to 1."""
    s = np.asarray(scores, dtype=np.float64)
    e = np.exp(s - s.max())
    return e / e.sum()


def main(argv: list[str] | None = None) -> int:
    from ..models import recipes
    parser = argparse.ArgumentParser(description="Record the sinks page's streaming losses for every cache size and "
                                                 "stream length its controls offer (held-out crops).")
    parser.add_argument("--crops", type=int, default=GRID_CROPS)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--out", default=str(GRID_FILE))
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    record = record_grid(recipes.load_model(RECIPE), args.out, args.crops)
    worst = max(record["loss"].items(), key=lambda kv: kv[1]["window"] - kv[1]["sinks"])
    print(f"{args.out}: {len(record['loss'])} cells x {args.crops} crops in {record['seconds']} s; largest "
          f"window - sinks: {worst[1]['window'] - worst[1]['sinks']:.4f} at {worst[0]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Streaming a decoder past its cache: a rolling KV cache that keeps ``sinks`` first tokens and the last ``window``.

StreamingLLM (Xiao et al. 2023, arXiv 2309.17453) generates from an endless stream with a cache of fixed size:
the keys and values of the first ``sinks`` tokens (the "attention sinks", 4 in the paper) and of the most recent
``window`` tokens are kept, everything in between is evicted. With ``sinks = 0`` this is plain window attention
(evict the first tokens). The rules, as in the paper's reference code (``pos_shift/modify_llama.py`` and
``kv_cache.py`` of mit-han-lab/streaming-llm):

  what is cached   each layer's k and v BEFORE the rotation (RoPE is applied when attending, not when caching);
  what is kept     after the new token is appended: tokens 0 .. sinks-1 and the last ``window`` tokens (the new
                   one included), so a query sees at most sinks + window keys: ``sliding_window_mask(n, window,
                   sinks=sinks)`` row by row;
  which positions  ``positions="cache"`` (StreamingLLM): the kept keys are rotated by their slot in the cache,
                   0 .. t-1, and the new query by its own slot t-1, so no distance ever exceeds the cache size;
                   ``positions="original"``: by their positions in the text (distances grow without bound).

The hidden states of kept tokens are those computed when they arrived (a cache never recomputes), which is why
evicting a token changes later layers' inputs only through the tokens that come after. ``recompute_logits`` is
the slow baseline: each token re-reads its last ``window`` tokens from scratch (positions 0 .. window-1).

Shapes: b batch, n new tokens, t kept tokens, h query heads, h_kv K/V heads, d d_head.
"""
from __future__ import annotations

import torch

from .decoder import DecoderLM
from .functional import default_scale, grouped_query_attention
from .positional import rotary_embedding

POSITION_RULES = ("cache", "original")


def kept_positions(length: int, sinks: int, window: int) -> list[int]:
    """The tokens (0-based, of ``length`` seen so far) a cache of ``sinks`` + ``window`` keeps: the first
    ``sinks`` and the last ``window``; all of them while length <= sinks + window."""
    if window < 1 or sinks < 0:
        raise ValueError(f"need window >= 1 and sinks >= 0, got window {window}, sinks {sinks}")
    if length <= sinks + window:
        return list(range(length))
    return list(range(sinks)) + list(range(length - window, length))


class StreamingCache:
    """One layer's rolling cache: the un-rotated k, v (b, h_kv, t, d) of the kept tokens and their indices."""

    def __init__(self, sinks: int, window: int):
        kept_positions(0, sinks, window)                       # validates
        self.sinks, self.window = sinks, window
        self.k: torch.Tensor | None = None
        self.v: torch.Tensor | None = None
        self.index = torch.zeros(0, dtype=torch.long)          # (t,) the kept tokens' positions in the text
        self.seen = 0                                          # tokens appended so far, evicted ones included

    def __len__(self) -> int:
        return len(self.index)

    def append(self, k: torch.Tensor, v: torch.Tensor) -> None:
        """Add the new tokens' k, v (b, h_kv, n, d), then evict down to sinks + window tokens."""
        n = k.size(-2)
        new = torch.arange(self.seen, self.seen + n)
        self.seen += n
        if self.k is None:
            self.k, self.v, self.index = k, v, new
        else:
            self.k, self.v = torch.cat((self.k, k), dim=-2), torch.cat((self.v, v), dim=-2)
            self.index = torch.cat((self.index, new))
        if len(self.index) > self.sinks + self.window:         # keep the first `sinks` and the last `window`
            keep = torch.cat((torch.arange(self.sinks), torch.arange(len(self.index) - self.window, len(self.index))))
            self.k, self.v, self.index = self.k[..., keep, :], self.v[..., keep, :], self.index[keep]

    def positions(self, rule: str = "cache") -> torch.Tensor:
        """The positions the kept keys are rotated by: their slot 0 .. t-1 ("cache") or their place in the
        text ("original")."""
        if rule == "cache":
            return torch.arange(len(self.index))
        if rule == "original":
            return self.index.clone()
        raise ValueError(f"positions must be one of {POSITION_RULES}, got {rule!r}")


def _check_model(model: DecoderLM) -> None:
    c = model.config
    if c.position not in ("rope", "none"):
        raise ValueError(f"streaming needs RoPE or no positions (keys re-rotated by their slot); got {c.position!r}")
    if c.window is not None:
        raise ValueError("the model already masks a window: stream it with its window unset")


class StreamingDecoder:
    """Feed a ``DecoderLM`` a stream token by token through rolling caches (one ``StreamingCache`` per layer).

        stream = StreamingDecoder(model, sinks=4, window=28)
        logits = stream.feed(ids)          # (b, n, vocab); n > 1 only while nothing is evicted (a prefill)
    """

    def __init__(self, model: DecoderLM, sinks: int = 4, window: int = 28, positions: str = "cache"):
        _check_model(model)
        if positions not in POSITION_RULES:
            raise ValueError(f"positions must be one of {POSITION_RULES}, got {positions!r}")
        self.model, self.positions = model, positions
        self.caches = [StreamingCache(sinks, window) for _ in model.blocks]

    @torch.no_grad()
    def feed(self, ids: torch.Tensor) -> torch.Tensor:
        """ids (b, n): the next tokens of the stream; returns their logits (b, n, vocab)."""
        cache0, n = self.caches[0], ids.size(1)
        if n > 1 and len(cache0) + n > cache0.sinks + cache0.window:
            raise ValueError(f"feed {n} tokens at once only while they fit in the cache "
                             f"({len(cache0)} + {n} > {cache0.sinks} + {cache0.window}); feed one at a time")
        x = self.model.embed(ids)
        for block, cache in zip(self.model.blocks, self.caches):
            x = x + self._attend(block.attn, block.ln1(x), cache)
            if block.mlp is not None:
                x = x + block.mlp(block.ln2(x))
        return self.model.head(self.model.ln_f(x))

    def _attend(self, attn, h: torch.Tensor, cache: StreamingCache) -> torch.Tensor:
        b, n, _ = h.shape
        q = attn.split_heads(attn.W_query(h), attn.num_heads)            # (b, h, n, d)
        k = attn.split_heads(attn.W_key(h), attn.num_kv_heads)           # (b, h_kv, n, d)
        v = attn.split_heads(attn.W_value(h), attn.num_kv_heads)
        if attn.q_norm is not None:
            q, k = attn.q_norm(q), attn.k_norm(k)
        cache.append(k, v)                                               # cached un-rotated, then evicted
        keys, t = cache.k, len(cache)
        if attn.rope:
            pos = cache.positions(self.positions)                        # (t,): slot or place in the text
            keys = rotary_embedding(keys, pos, attn.rope_base, frequencies=attn.rope_frequencies)
            q = rotary_embedding(q, pos[t - n:], attn.rope_base, frequencies=attn.rope_frequencies)
        mask = torch.arange(t)[None, :] <= torch.arange(t - n, t)[:, None]   # (n, t): the new tokens are the last n
        out, _ = grouped_query_attention(q, keys, cache.v, mask, scale=default_scale(attn.d_head) * attn.logit_scale)
        return attn.W_output(out.transpose(1, 2).reshape(b, n, attn.d_model))


@torch.no_grad()
def streaming_logits(model: DecoderLM, ids: torch.Tensor, *, sinks: int, window: int,
                     positions: str = "cache") -> torch.Tensor:
    """Logits (b, T, vocab) of every token of ``ids`` (b, T) streamed through a cache of sinks + window:
    a prefill of the first sinks + window tokens (nothing is evicted yet), then one token at a time."""
    stream = StreamingDecoder(model, sinks, window, positions)
    first = min(ids.size(1), sinks + window)
    out = [stream.feed(ids[:, :first])]
    out += [stream.feed(ids[:, i:i + 1]) for i in range(first, ids.size(1))]
    return torch.cat(out, dim=1)


@torch.no_grad()
def recompute_logits(model: DecoderLM, ids: torch.Tensor, window: int, *, keep_first: int = 0,
                     chunk: int = 4096) -> torch.Tensor:
    """Sliding window with re-computation: the logits of token i come from a fresh forward (no cache) over its
    last ``window`` tokens, at positions 0 .. window-1, so each token costs a whole window. With ``keep_first``
    the first ``keep_first`` tokens of the stream (e.g. a start-of-sequence token) stay in front of every window:
    the forward reads tokens 0 .. keep_first-1 and then the last ``window - keep_first`` tokens."""
    b, T = ids.shape
    if not 0 <= keep_first < window:
        raise ValueError(f"need 0 <= keep_first < window, got keep_first {keep_first}, window {window}")
    if T <= window:
        return model(ids).logits
    head = model(ids[:, :window]).logits                                 # tokens 0 .. window-1: their prefix
    recent = window - keep_first
    windows = ids[:, keep_first:].unfold(1, recent, 1)[:, window - recent - keep_first + 1:]   # (b, T-window, recent)
    if keep_first:
        first = ids[:, None, :keep_first].expand(b, windows.size(1), keep_first)
        windows = torch.cat((first, windows), dim=-1)
    windows = windows.reshape(-1, window)                                # (b * (T - window), window)
    last = torch.cat([model(windows[i:i + chunk]).logits[:, -1] for i in range(0, len(windows), chunk)])
    return torch.cat((head, last.view(b, T - window, -1)), dim=1)

"""The intuition as a picture: a small attention pattern next to each concept page's intuition, so the page's
first screen (1280x720) shows attention before any control or question (``anatomy.intuition`` draws it).

A picture illustrates the idea of the page on a fixed short sentence (the same in every run: its weights are
computed once, its spec is a chart kind's): which keys each query looks at under the page's pattern (all keys, a causal
mask, a sliding window, a band of nearby positions, an induction pattern, a second sentence). It is not evidence
for any of the page's questions (tests/test_no_spoilers.py checks that none of its words tells an answer); the
page's own charts, computed from its controls, come after its questions.
"""
from __future__ import annotations

import functools

import torch

from attention_core.functional import scaled_dot_product_attention
from attention_core.masks import causal_mask, sliding_window_mask

from .charts import _theme, attention_heatmap, chart_style
from .i18n import current_lang, t, tl

# page -> the pattern its picture shows (a page not named here has no picture)
PICTURES = {
    "qkv": "full", "scaling": "full", "masking": "causal", "multihead": "full", "positional": "band",
    "encoder": "full", "cross_attention": "cross", "efficiency": "window", "kv_cache": "latest", "gqa": "causal",
    "attention_sinks": "sinks", "long_context": "band", "qk_norm": "full", "induction_heads": "induction",
    "bottleneck": "cross", "alignment": "cross", "pronoun": "full", "analysis": "full", "training": "full",
    "pretrained": "full",
}
HEIGHT = 180              # px of cells: 6 rows of 30 px


@functools.cache
def _weights(pattern: str, n_q: int, n_k: int) -> torch.Tensor:
    """The picture's weights: random queries and keys (seed 0, d = 16), softmax under the pattern's mask; the band
    and induction patterns are drawn from their definition (weight by distance; the token after the last copy)."""
    gen = torch.Generator().manual_seed(0)
    q, k = torch.randn(n_q, 16, generator=gen), torch.randn(n_k, 16, generator=gen)
    if pattern == "band":                       # nearby positions weigh more: softmax(-|i - j|)
        i = torch.arange(n_q, dtype=torch.float64)
        return torch.softmax(-(i[:, None] - i[None, :]).abs(), dim=-1)
    if pattern == "induction":                  # "A B C A B C": each query of the copy looks at the token after
        w = torch.zeros(n_q, n_k, dtype=torch.float64)   # the earlier occurrence of its own token
        for row in range(n_q):
            w[row, row - 2 if row >= 3 else 0] = 1.0
        return w
    mask = {"causal": causal_mask(n_q), "latest": causal_mask(n_q),
            "window": sliding_window_mask(n_q, 3), "sinks": sliding_window_mask(n_q, 2, sinks=1)}.get(pattern)
    return scaled_dot_product_attention(q, k, torch.zeros(n_k, 1), mask).weights.double()


@functools.lru_cache(maxsize=256)
def _picture_for(pattern: str, lang: str, theme: str, style: str) -> dict:
    """The spec in one language, theme and style, built once per server: every first visit of a page draws it, and
    building a heatmap's data costs more than the rest of a page's first run (docs/performance.md)."""
    return _picture(pattern)


def _picture(pattern: str) -> dict:
    tokens = tl("picture.induction_tokens" if pattern == "induction" else "picture.tokens")
    keys = tl("picture.source_tokens") if pattern == "cross" else tokens
    w = _weights(pattern, len(tokens), len(keys))
    masked = None
    if pattern in ("causal", "latest", "window", "sinks"):
        masked = ~{"window": sliding_window_mask(len(tokens), 3),
                   "sinks": sliding_window_mask(len(tokens), 2, sinks=1)}.get(pattern, causal_mask(len(tokens)))
    return attention_heatmap(w, tokens, keys, masked=None if masked is None else masked.numpy(), height=HEIGHT,
                             selectable=False, legend=False, title=t(f"picture.title_{pattern}"),
                             outline_row=len(tokens) - 1 if pattern == "latest" else None)


def picture(ns: str) -> dict | None:
    """The finished spec of page ``ns``'s picture in the current language (None: the page has none)."""
    pattern = PICTURES.get(ns)
    if pattern is None:
        return None
    spec = _picture_for(pattern, current_lang(), _theme(), chart_style())
    copy = {**spec, "usermeta": dict(spec["usermeta"])}      # the caller marks usermeta
    if "datasets" in spec:
        copy["datasets"] = dict(spec["datasets"])             # Streamlit takes the data sets out of what it draws
    return copy

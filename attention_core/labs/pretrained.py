"""The pretrained page's computations: one sentence through a real checkpoint (MiniLM by default), every
layer's and head's weights, the head-pattern labels and rollout of ``attention_core.analysis``, and the
numbers the page quotes (attention to [CLS] / [SEP], previous-token heads, [UNK] tokens)."""
from __future__ import annotations

import re
from typing import NamedTuple

import numpy as np
import torch

from attention_core.analysis import attention_rollout, classify_heads
from attention_core.pretrained import Checkpoint, encode, forward

MAX_TOKENS = 64                    # special tokens included: 72 heads x 64 x 64 weights stay under 1.2 MB
SPECIAL = ("[CLS]", "[SEP]")
UNKNOWN = "[UNK]"
CJK = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")


class SentenceRun(NamedTuple):
    tokens: tuple[str, ...]            # the checkpoint's own tokens, after any cut
    total: int                         # tokens of the whole text before the cut
    weights: np.ndarray                # (L, h, n, n) float32: softmax weights of every layer and head
    labels: tuple[tuple[str, ...], ...]   # (L, h): attention_core.analysis.classify_heads' pattern names
    rollout: np.ndarray                # (L, n, n): attention rollout through layers 1..l
    unknown: int                       # tokens that are [UNK]
    cjk: int                           # Chinese characters in the text
    special: tuple[int, ...]           # where the tokens heads park attention on sit ([CLS] / [SEP], or the first)


def sentence_run(checkpoint: Checkpoint, text: str, max_tokens: int = MAX_TOKENS) -> SentenceRun:
    """``text`` through ``checkpoint``: tokens, every head's weights, their pattern labels, rollout."""
    encoded = encode(checkpoint.tokenizer, text, max_tokens)
    out = forward(checkpoint, encoded)
    per_layer = [w[0] for w in out.attentions]                                     # L x (h, n, n)
    labels = tuple(tuple(label for label, _ in classify_heads(w)) for w in per_layer)
    rollout = attention_rollout(per_layer, cumulative=True)                        # (L, n, n)
    return SentenceRun(tuple(encoded.tokens), encoded.total, torch.stack(per_layer).numpy(), labels,
                       rollout.numpy(), sum(t == UNKNOWN for t in encoded.tokens), len(CJK.findall(text)),
                       tuple(special_positions(encoded.tokens, checkpoint.family)))


def special_positions(tokens, family: str = "bert") -> list[int]:
    """Where BERT's [CLS] and [SEP] sit; for a decoder (GPT-2), the first token: the key that causal heads
    with nothing to look for settle on (the "attention sink" of the modern-attention pages)."""
    if family != "bert":
        return [0] if len(tokens) else []
    return [i for i, t in enumerate(tokens) if t in SPECIAL]


def share_to(weights: np.ndarray, keys: list[int]) -> np.ndarray:
    """(L, h): the mean over query rows of the weight a head puts on ``keys`` (0 when ``keys`` is empty)."""
    if not keys:
        return np.zeros(weights.shape[:2])
    return weights[..., keys].sum(-1).mean(-1)


def previous_token_share(weights: np.ndarray) -> np.ndarray:
    """(L, h): the mean weight that query i puts on key i-1 (rows 1..n-1): 1 for a perfect previous-token head."""
    n = weights.shape[-1]
    if n < 2:
        return np.zeros(weights.shape[:2])
    rows = np.arange(1, n)
    return weights[..., rows, rows - 1].mean(-1)


def top_heads(score: np.ndarray, k: int = 3) -> list[tuple[int, int, float]]:
    """The ``k`` (layer, head, score) with the largest score, best first."""
    flat = np.argsort(-score, axis=None)[:k]
    return [(int(i) // score.shape[1], int(i) % score.shape[1], float(score.reshape(-1)[i])) for i in flat]


PAD_TO = 128            # MiniLM's tokenizer.json pads every text to 128 tokens (its "padding" entry)


def padding_pitfall(checkpoint: Checkpoint, text: str, pad_to: int = PAD_TO) -> tuple[float, float]:
    """The sentence padded to ``pad_to`` tokens as the shipped tokenizer.json would: the mean share of the real
    tokens' attention that lands on [PAD] keys (all layers, heads and real query rows), without and with the
    attention mask. Without it the padding is attended like words; with it, exactly 0."""
    encoded = encode(checkpoint.tokenizer, text, pad_to)
    n = len(encoded.ids)
    pad_id = checkpoint.tokenizer.token_to_id("[PAD]") or 0
    ids = torch.tensor([encoded.ids + [pad_id] * (pad_to - n)])                     # (1, pad_to)
    types = torch.tensor([encoded.type_ids + [0] * (pad_to - n)])
    mask = torch.zeros(1, pad_to, dtype=torch.long)
    mask[0, :n] = 1
    shares = []
    with torch.no_grad():
        for attention_mask in (None, mask):
            out = checkpoint.model(ids, attention_mask=attention_mask, token_type_ids=types)
            w = torch.stack([a[0] for a in out.attentions])                       # (L, h, pad_to, pad_to)
            shares.append(float(w[:, :, :n, n:].sum(-1).mean()))
    return shares[0], shares[1]

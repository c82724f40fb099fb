"""The model of the "Sliding windows and attention sinks" page: a small causal LM on a language-like stream.

The stream is a never-ending text of sentences. Each sentence opens with a topic marker (``A`` .. ``F``), then
3 to 8 words, each either the topic's own word (``a0`` .. ``a7`` for ``A``, drawn with Zipf weights) or one of
the two fixed successors of the previous word (a bigram); in half of the sentences a name (``N0`` .. ``N7``) is
inserted after the marker and the sentence ends with ``@`` and the name again. Predicting the next token needs the
previous word (a bigram head), the current sentence's topic marker (a look-back over at most 10 tokens) and, only
after ``@``, the name: most of the context is useless, and a head that reads the name has nothing to do at most
positions. There is no constant delimiter (no full stop): the one token every crop shares is the start-of-sequence
token ``§`` that begins it. Training crops have ``TRAIN_LEN`` tokens: ``§``, then the stream from a random place
(mid-sentence too), as an LLM's training documents start with <s>.

What was measured on the way (first-token share of the strongest head, held-out crops, 600 steps unless said):
without a start-of-sequence token and with a full stop closing every sentence, lr 3e-3: 0.027 (an
even spread gives 0.028), no sink; with ``§``, names and the full stop, lr 3e-3: 0.046; with ``§`` and names, no
full stop, lr 3e-3: 0.031; the same at lr 1e-2 (the recipe): 0.56 in layer 2, head 2. The larger learning rate grew
the sink within 600 steps (Gu et al. 2024, "When attention sink emerges in language models", also find that a
larger learning rate makes sinks stronger). Evicting it costs this model almost nothing (see the recorded losses).

``evaluate`` (stored in the checkpoint's ``meta["eval"]``) measures, on held-out crops (``EVAL_SEED``):
  - the loss at the training length;
  - the attention share of the first token per layer and head (queries at positions >= ``SHARE_FROM``), with
    the share a uniform head would give it, and the share of the first 4 tokens;
  - streaming on inputs ``LONG_LEN`` tokens long (``LONG_LEN / TRAIN_LEN`` times the training length) with a
    cache of ``CACHE`` tokens: dense attention (no eviction, positions up to LONG_LEN - 1), window attention
    (evict the first tokens), window + 4 sinks with StreamingLLM's positions in the cache, the same with
    positions in the text, and sliding window with re-computation (``attention_core.streaming``): the mean
    loss of each, and per block of ``BIN`` positions.
"""
from __future__ import annotations

import random

import torch
import torch.nn.functional as F

from ..streaming import recompute_logits, streaming_logits
from .lm import LMBatch, LMTask, register

BOS = "§"                      # the start-of-sequence token every training crop begins with
TOPICS = "ABCDEF"
NAMES = tuple(f"N{i}" for i in range(8))
NAME_P = 0.5                   # chance that a sentence names someone (a name after the topic marker) ...
RECALL = "@"                   # ... and then ends with "@ name ." (the name again: a look-back only then useful)
WORDS_PER_TOPIC = 8
ZIPF = tuple(1.0 / (r + 1) for r in range(WORDS_PER_TOPIC))
BIGRAM_P = 0.5                 # chance that a word is a successor of the previous word instead of a topic word
SENTENCE_WORDS = (3, 8)
TRAIN_LEN = 64
SHARE_FROM = 16                # queries from this position on: enough keys that a uniform head gives token 0 <= 1/17
LONG_LEN = 512                 # the streaming test: 8 x the training length
CACHE, SINKS = 32, 4           # cache size of every streaming method: window 32, or 4 sinks + window 28
BIN = 32
EVAL_SEED = 777_014
EVAL_SEQS, LONG_SEQS = 64, 16

WORDS = tuple(f"{t.lower()}{i}" for t in TOPICS for i in range(WORDS_PER_TOPIC))
SYMBOLS = (BOS,) + tuple(TOPICS) + WORDS + NAMES + (RECALL,)


def _successors() -> dict[str, tuple[str, str]]:
    rng = random.Random(14)                        # the grammar is fixed: the same for every run
    return {w: (rng.choice(WORDS), rng.choice(WORDS)) for w in WORDS}


SUCCESSORS = _successors()


def sentence(rng: random.Random) -> list[str]:
    """One sentence of the stream: topic marker, 3-8 words, a full stop."""
    topic = rng.randrange(len(TOPICS))
    own = WORDS[topic * WORDS_PER_TOPIC:(topic + 1) * WORDS_PER_TOPIC]
    out, prev = [TOPICS[topic]], None
    name = NAMES[rng.randrange(len(NAMES))] if rng.random() < NAME_P else None
    for _ in range(rng.randint(*SENTENCE_WORDS)):
        if prev is not None and rng.random() < BIGRAM_P:
            word = SUCCESSORS[prev][rng.randrange(2)]
        else:
            word = rng.choices(own, weights=ZIPF)[0]
        out.append(word)
        prev = word
    if name is not None:
        out.insert(1 + rng.randrange(len(out)), name)
        out += [RECALL, name]
    return out


def stream(rng: random.Random, n: int) -> list[str]:
    """``n`` tokens: the start-of-sequence token, then the stream from a random place of its first sentence."""
    first = sentence(rng)
    out = [BOS] + first[rng.randrange(len(first)):]
    while len(out) < n:
        out += sentence(rng)
    return out[:n]


def encode(tokens: list[str]) -> list[int]:
    return TASK.vocab.encode(tokens)


def make_batch(rng: random.Random, batch_size: int, length: int = TRAIN_LEN) -> LMBatch:
    rows = torch.tensor([encode(stream(rng, length + 1)) for _ in range(batch_size)])
    return LMBatch(rows[:, :-1], rows[:, 1:], torch.ones(batch_size, length))


def long_batch(seed: int = EVAL_SEED + 1, n: int = LONG_SEQS, length: int = LONG_LEN) -> LMBatch:
    return make_batch(random.Random(seed), n, length)


# ------------------------------------------------------------------ measurements
@torch.no_grad()
def first_token_share(model, ids: torch.Tensor, start: int = SHARE_FROM, first: int = 1) -> torch.Tensor:
    """(layers, heads): the mean attention weight on the first ``first`` tokens, over every query at
    positions >= start of every sequence of ``ids`` (b, n)."""
    weights = model.eval()(ids).weights                                 # per layer (b, h, n, n)
    return torch.stack([w[:, :, start:, :first].sum(-1).mean((0, 2)) for w in weights])


def uniform_share(n: int, start: int = SHARE_FROM, first: int = 1) -> float:
    """What a head spreading its weight evenly over the visible keys gives the first tokens, on average."""
    return sum(min(first, i + 1) / (i + 1) for i in range(start, n)) / (n - start)


STREAM_METHODS = ("dense", "window", "sinks", "sinks_original", "recompute")


@torch.no_grad()
def stream_logits(model, ids: torch.Tensor, method: str, cache: int = CACHE, sinks: int = SINKS) -> torch.Tensor:
    """Logits (b, T, V) of ``ids`` under one of STREAM_METHODS, each with a cache of ``cache`` tokens."""
    model.eval()
    if method == "dense":
        return model(ids).logits
    if method == "window":
        return streaming_logits(model, ids, sinks=0, window=cache)
    if method == "sinks":
        return streaming_logits(model, ids, sinks=sinks, window=cache - sinks, positions="cache")
    if method == "sinks_original":
        return streaming_logits(model, ids, sinks=sinks, window=cache - sinks, positions="original")
    if method == "recompute":
        return recompute_logits(model, ids, cache)
    raise ValueError(f"method must be one of {STREAM_METHODS}, got {method!r}")


def nll(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """(b, T) next-token losses."""
    return F.cross_entropy(logits.flatten(0, 1), targets.flatten(), reduction="none").view_as(targets)


@torch.no_grad()
def evaluate(model) -> dict:
    model.eval()
    held = make_batch(random.Random(EVAL_SEED), EVAL_SEQS)
    share = first_token_share(model, held.ids)
    share4 = first_token_share(model, held.ids, first=SINKS)
    out = {
        "train_len": TRAIN_LEN, "share_from": SHARE_FROM, "eval_seqs": EVAL_SEQS,
        "loss": float(nll(model(held.ids).logits, held.targets).mean()),
        "first_share": share.tolist(),                     # (layers, heads)
        "first4_share": share4.tolist(),
        "uniform_first_share": uniform_share(TRAIN_LEN),
        "uniform_first4_share": uniform_share(TRAIN_LEN, first=SINKS),
    }
    long = long_batch()
    out["stream"] = {"long_len": LONG_LEN, "cache": CACHE, "sinks": SINKS, "bin": BIN, "seqs": LONG_SEQS,
                     "loss": {}, "loss_by_bin": {}}
    for method in STREAM_METHODS:
        losses = nll(stream_logits(model, long.ids, method), long.targets)        # (b, T)
        out["stream"]["loss"][method] = float(losses.mean())
        out["stream"]["loss_by_bin"][method] = losses.mean(0).view(-1, BIN).mean(1).tolist()
    s = out["stream"]["loss"]
    out["stream"]["sink_eviction_loss"] = s["window"] - s["sinks"]     # what evicting the first tokens costs
    return out


TASK = register(
    LMTask("stream_sentences", SYMBOLS, make_batch, evaluate,
           "sentences of a topic-and-bigram grammar; crops of 64 tokens starting anywhere"),
    recipes={"sinks_lm": dict(steps=600, batch_size=32, lr=1e-2, warmup_steps=100, seed=14,
                              config=dict(d_model=64, num_layers=4, num_heads=4, d_ff=128, position="rope",
                                          max_len=TRAIN_LEN))},
)

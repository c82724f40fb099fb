"""Generating with a KV cache: a small decoder-only model, token by token, with and without the cache.

The model is the library's ``attention_core.decoder.DecoderLM``: pre-LN blocks of ``CausalSelfAttention`` (RoPE
positions, grouped K/V heads), untrained: random weights are enough to show the mechanics (which keys and values
are computed, which are reused, the time per token, the size of the cache), not to write sensible text.

Greedy generation (the next token is the argmax of the last position's logits):
  without a cache  every step runs the whole sequence again and keeps only the last row of logits;
  with a cache     the prefill runs the prompt once and fills each layer's ``KVCache``; each decoding step
                   then runs only the newest token, appends its k, v and reads the cached rest.
Both give the same logits (up to float rounding): a token only attends to the past, so the past's keys and
values never change.
"""
from __future__ import annotations

import functools
import json
import time
from pathlib import Path
from typing import NamedTuple

import torch

from ..decoder import DecoderConfig, DecoderLM
from ..functional import scaled_dot_product_attention
from ..positional import rotary_embedding

VOCAB = 64                  # token ids 0..63 (no tokenizer: the mechanics need none)
DEMO = {"layers": 2, "d_model": 64, "num_heads": 4, "num_kv_heads": 2}    # the page's model
DTYPE_BYTES = {"float32": 4, "bfloat16": 2, "float16": 2, "int8": 1}


# ------------------------------------------------------------------ the model
def tiny_decoder(layers: int = 2, d_model: int = 64, num_heads: int = 4, num_kv_heads: int = 2) -> DecoderLM:
    """The library's ``DecoderLM`` over VOCAB ids: pre-LN blocks with a 4 x d_model MLP, RoPE inside attention."""
    return DecoderLM(DecoderConfig(VOCAB, d_model, layers, num_heads, num_kv_heads, d_ff=4 * d_model))


@functools.lru_cache(maxsize=4)             # a few seeds' models (~0.4 MB each), never changed after building
def demo_model(seed: int) -> DecoderLM:
    return build_model(**DEMO, seed=seed)


def build_model(layers: int = 2, d_model: int = 64, num_heads: int = 4, num_kv_heads: int = 2,
                seed: int = 0) -> DecoderLM:
    """An untrained ``tiny_decoder`` with seeded random weights, in eval mode."""
    torch.manual_seed(seed)
    return tiny_decoder(layers, d_model, num_heads, num_kv_heads).eval()


def prompt_ids(n: int, seed: int = 0) -> list[int]:
    g = torch.Generator().manual_seed(seed + 1)
    return torch.randint(0, VOCAB, (n,), generator=g).tolist()


# ------------------------------------------------------------------ generation, the two ways
class Step(NamedTuple):
    """One forward pass of a generation: the prefill (step 0) or a decoding step."""
    cached_before: int      # rows of K/V read from the cache (0 without one)
    computed: int           # rows of K/V (and of q, the MLP ...) computed in this pass
    token: int              # the token this pass chose
    cache_bytes: int = 0    # bytes held by all layers' caches after this pass (0 without a cache)


class Generation(NamedTuple):
    tokens: list[int]       # prompt + generated
    logits: torch.Tensor    # (new, VOCAB): the logits that chose each generated token
    steps: list[Step]
    cache_bytes: int        # bytes held by all layers' caches at the end (0 without a cache)


@torch.inference_mode()
def generate_without_cache(model: DecoderLM, prompt: list[int], new_tokens: int) -> Generation:
    """Each step runs the model over the whole sequence so far: every K/V row is recomputed."""
    tokens, rows, steps = list(prompt), [], []
    for _ in range(new_tokens):
        logits = model(torch.tensor([tokens])).logits[0, -1]           # only the last row is used
        token = int(logits.argmax())
        steps.append(Step(0, len(tokens), token))
        rows.append(logits)
        tokens.append(token)
    return Generation(tokens, torch.stack(rows), steps, 0)


@torch.inference_mode()
def generate_with_cache(model: DecoderLM, prompt: list[int], new_tokens: int) -> Generation:
    """Prefill the prompt once, then feed only the newest token; its k, v are appended to each layer's cache."""
    caches = model.new_caches()
    tokens, rows, steps = list(prompt), [], []
    new = list(prompt)                                          # the prefill: the whole prompt at once
    for _ in range(new_tokens):
        before = len(caches[0])
        logits = model(torch.tensor([new]), caches).logits[0, -1]
        token = int(logits.argmax())
        steps.append(Step(before, len(new), token, sum(c.nbytes() for c in caches)))
        rows.append(logits)
        tokens.append(token)
        new = [token]                                           # the next step computes only this token
    return Generation(tokens, torch.stack(rows), steps, sum(c.nbytes() for c in caches))


class Comparison(NamedTuple):
    plain: Generation
    cached: Generation
    max_abs_diff: float      # largest |logit difference| over every generated position
    same_tokens: bool
    rows_plain: int          # K/V rows computed per layer over the whole generation, without / with the cache
    rows_cached: int


def compare(prompt_len: int, new_tokens: int, seed: int = 0) -> Comparison:
    """Generate ``new_tokens`` after a random prompt both ways with the same model (DEMO)."""
    model = demo_model(seed)
    prompt = prompt_ids(prompt_len, seed)
    plain = generate_without_cache(model, prompt, new_tokens)
    cached = generate_with_cache(model, prompt, new_tokens)
    diff = float((plain.logits - cached.logits).abs().max())
    return Comparison(plain, cached, diff, plain.tokens == cached.tokens,
                      sum(s.computed for s in plain.steps), sum(s.computed for s in cached.steps))


class Report(NamedTuple):
    """What the page shows of a comparison, as plain values (picklable, cacheable), for the first ``new`` tokens.

    Greedy generation of k tokens is the first k steps of generating more, so one comparison at the largest
    length serves every shorter one (``report(prompt, MAX_NEW, seed).upto(new)``)."""
    steps: list             # (rows read from the cache, rows computed) of each pass with the cache
    plain_computed: list    # rows computed by each pass without it
    tokens_plain: list      # prompt + generated, both ways
    tokens_cached: list
    step_diffs: list        # max |logit difference| of each generated position
    cache_bytes: list       # bytes held by all layers' caches after each pass

    def upto(self, new: int) -> Summary:
        prompt = len(self.tokens_cached) - len(self.steps)
        return Summary(self.steps[:new], self.tokens_cached[:prompt + new],
                       self.tokens_plain[:prompt + new] == self.tokens_cached[:prompt + new],
                       max(self.step_diffs[:new]), sum(self.plain_computed[:new]),
                       sum(c for _, c in self.steps[:new]), self.cache_bytes[new - 1])


class Summary(NamedTuple):
    steps: list
    tokens: list
    same_tokens: bool
    max_abs_diff: float
    rows_plain: int         # K/V rows computed per layer, without / with the cache
    rows_cached: int
    cache_bytes: int        # held at the end


MAX_NEW = 16


def report(prompt_len: int, new_tokens: int = MAX_NEW, seed: int = 0) -> Report:
    c = compare(prompt_len, new_tokens, seed)
    return Report([(s.cached_before, s.computed) for s in c.cached.steps], [s.computed for s in c.plain.steps],
                  c.plain.tokens, c.cached.tokens, (c.plain.logits - c.cached.logits).abs().amax(-1).tolist(),
                  [s.cache_bytes for s in c.cached.steps])


# ------------------------------------------------------------------ time per token
class Timing(NamedTuple):
    context: int            # tokens already in the sequence when the next one is generated
    plain_s: float          # seconds (best of the repeats): a full forward over context + 1 tokens
    cached_s: float         # seconds (best of the repeats): one decoding step with a cache of ``context`` tokens


@torch.no_grad()
def time_next_token(model: DecoderLM, context: int, repeats: int = 5, seed: int = 0) -> Timing:
    """The time to produce one more token after ``context`` tokens, without and with a cache: the best of
    ``repeats`` runs each (the least disturbed by other work on the machine, as ``timeit`` advises)."""
    ids = torch.tensor([prompt_ids(context + 1, seed)])
    caches = model.new_caches()
    model(ids[:, :context], caches)                             # the cache as it stands after ``context`` tokens
    plain, cached = [], []
    for _ in range(repeats):
        t0 = time.perf_counter()
        model(ids)                                              # recompute everything, keep the last row
        plain.append(time.perf_counter() - t0)
        snapshot = [(c.k, c.v) for c in caches]
        t0 = time.perf_counter()
        model(ids[:, context:], caches)                         # one token, the cache holds the rest
        cached.append(time.perf_counter() - t0)
        for c, (k, v) in zip(caches, snapshot):                 # undo the append: same cache every repeat
            c.k, c.v = k, v
    return Timing(context, min(plain), min(cached))


def timing_curve(contexts: tuple[int, ...], *, layers: int = 2, d_model: int = 64, num_heads: int = 4,
                 num_kv_heads: int = 2, repeats: int = 5, seed: int = 0) -> list[Timing]:
    model = build_model(layers, d_model, num_heads, num_kv_heads, seed)
    time_next_token(model, contexts[0], 1, seed)                # warm-up (first call allocates)
    return [time_next_token(model, n, repeats, seed) for n in contexts]


# ------------------------------------------------------------------ the size of the cache
def kv_cache_bytes(layers: int, kv_heads: int, d_head: int, bytes_per_value: int, tokens: int,
                   batch: int = 1) -> int:
    """2 (K and V) x layers x kv_heads x d_head x bytes x tokens (x batch): every layer keeps a key and a value
    vector of kv_heads x d_head numbers for every token."""
    return 2 * layers * kv_heads * d_head * bytes_per_value * tokens * batch


class PublishedModel(NamedTuple):
    name: str
    layers: int             # num_hidden_layers (GPT-2: n_layer)
    heads: int              # num_attention_heads (n_head)
    kv_heads: int           # num_key_value_heads (GPT-2 has none: every head has its own K/V)
    d_head: int             # hidden_size / num_attention_heads
    dtype: str              # torch_dtype (GPT-2's config has none: float32, the default)
    context: int            # max_position_embeddings (n_positions)
    source: str             # the config file the numbers come from


PUBLISHED = (
    PublishedModel("GPT-2", 12, 12, 12, 768 // 12, "float32", 1024,
                   "https://huggingface.co/openai-community/gpt2/blob/main/config.json"),
    PublishedModel("Llama-2-7B", 32, 32, 32, 4096 // 32, "float16", 4096,
                   "https://huggingface.co/meta-llama/Llama-2-7b-hf/blob/main/config.json"),
    PublishedModel("Mistral-7B-v0.1", 32, 32, 8, 4096 // 32, "bfloat16", 32768,
                   "https://huggingface.co/mistralai/Mistral-7B-v0.1/blob/main/config.json"),
    PublishedModel("Meta-Llama-3-8B-Instruct", 32, 32, 8, 4096 // 32, "bfloat16", 8192,
                   "https://huggingface.co/meta-llama/Meta-Llama-3-8B-Instruct/blob/main/config.json"),
    PublishedModel("Qwen2-7B-Instruct", 28, 28, 4, 3584 // 28, "bfloat16", 32768,
                   "https://huggingface.co/Qwen/Qwen2-7B-Instruct/blob/main/config.json"),
)
TABLE_TOKENS = (4096, 32768, 131072)


def published_sizes(tokens: tuple[int, ...] = TABLE_TOKENS) -> list[tuple[PublishedModel, list[int]]]:
    """Each published model with its cache bytes (batch 1, its own dtype) at each length in ``tokens``."""
    return [(m, [kv_cache_bytes(m.layers, m.kv_heads, m.d_head, DTYPE_BYTES[m.dtype], n) for n in tokens])
            for m in PUBLISHED]


# ------------------------------------------------------------------ the pitfall: the new token's position
class OffsetDemo(NamedTuple):
    context: int            # tokens already cached (rotated at positions 0 .. context-1)
    max_weight_diff: float  # largest |weight difference| of the new token's row, right vs forgotten offset
    moved: float            # share of the new token's attention that lands elsewhere: 1/2 sum |right - wrong|


def forgotten_offset(context: int = 32, d_head: int = 16, seed: int = 0) -> OffsetDemo:
    """One decoding step with RoPE: the cached keys were rotated at positions 0 .. context-1; the new token's q
    and k must be rotated at position ``context``. Rotating them at 0 (``arange(n)`` instead of
    ``arange(past, past + n)``) changes every score q.k_j, since RoPE makes it depend on the distance i - j."""
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(1, d_head, generator=g, dtype=torch.float64)
    k = torch.randn(context + 1, d_head, generator=g, dtype=torch.float64)
    v = torch.zeros(context + 1, 1, dtype=torch.float64)                  # unused: only the weights matter
    cached = rotary_embedding(k[:context], torch.arange(context))

    def row(position: int) -> torch.Tensor:
        pos = torch.tensor([position])
        keys = torch.cat((cached, rotary_embedding(k[context:], pos)))
        return scaled_dot_product_attention(rotary_embedding(q, pos), keys, v).weights[0]

    right, wrong = row(context), row(0)
    return OffsetDemo(context, float((right - wrong).abs().max()), float((right - wrong).abs().sum() / 2))


# ------------------------------------------------------------------ the recorded curve (scripts/bench_kv_cache.py)
BENCH_FILE = Path(__file__).resolve().parents[2] / "assets" / "bench" / "kv_cache.json"   # the page reads it here
BENCH_KEYS = ("machine", "settings", "results")


def read_bench(path: Path) -> dict:
    """The recorded curve, checked: raises (FileNotFoundError, ValueError, JSON errors) if it cannot be used."""
    doc = json.loads(Path(path).read_text(encoding="utf-8"))
    if not isinstance(doc, dict) or not all(k in doc for k in BENCH_KEYS):
        raise ValueError(f"not a recorded KV-cache benchmark (it needs {', '.join(BENCH_KEYS)})")
    rows = doc["results"]
    if not isinstance(rows, list) or len(rows) < 2:
        raise ValueError("fewer than two measurements")
    for row in rows:
        if not (isinstance(row, dict) and isinstance(row.get("context"), int) and row["context"] > 0
                and all(isinstance(row.get(k), (int, float)) and 0 < row[k] < 1e3 for k in ("plain_s", "cached_s"))):
            raise ValueError("a measurement lacks context, plain_s or cached_s")
    if not isinstance(doc["machine"], dict) or not isinstance(doc["settings"], dict):
        raise ValueError("machine and settings must be tables")
    return doc

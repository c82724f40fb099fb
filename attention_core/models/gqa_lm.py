"""Multi-query associative recall: the task on which the GQA page measures what sharing K/V heads costs.

A sequence lists ``PAIRS`` key-value pairs (distinct keys, random values), then asks ``QUERIES`` of those keys
again, each followed by its value (the "multi-query associative recall" task of Arora et al. 2023, Zoology):

    k3 v7 k12 v0 k5 v7 ... k9 v2  |  k5 v7 k3 v7 k9 v2 ...
    ------- the pairs --------      -- the queries (the loss counts at the value after each query key) --

A correct answer needs attention: the value that followed the same key earlier is found by matching the query
key against the keys in context (a 2-layer decoder: one layer attaches each key to its value's position, the
next matches and copies). Every position's key and value vectors live in the K/V heads, so the number of K/V
heads is the capacity of that lookup: the recipes ``gqa_kv4``, ``gqa_kv2`` and ``gqa_kv1`` are the same model
(4 query heads, d_model 32, d_head 8), the same steps, data and seed; only ``num_kv_heads`` differs
(MHA, GQA with groups of 2, MQA).

``evaluate`` answers held-out sequences (``EVAL_SEQUENCES`` of them, from the fixed ``recipes.EVAL_SEED``): the
accuracy and loss at the query positions, with their 95% intervals over sequences, and the K/V cache bytes per
token of the model (stored in the checkpoint's ``meta["eval"]``).
"""
from __future__ import annotations

import math
import random

import torch

from .lm import LMBatch, LMTask, register, token_losses

NUM_KEYS, NUM_VALUES = 24, 24
PAIRS, QUERIES = 8, 8
KEYS = tuple(f"k{i}" for i in range(NUM_KEYS))
VALUES = tuple(f"v{i}" for i in range(NUM_VALUES))
EVAL_SEQUENCES = 2000
EVAL_SEED = 777_001          # recipes.EVAL_SEED: never used by a training run (those use seeds < 100)
KV_HEADS = (4, 2, 1)         # the recipes gqa_kv4, gqa_kv2, gqa_kv1


def recall_example(rng: random.Random) -> tuple[list[str], list[int]]:
    """One sequence (symbols) and the positions of its query keys (the next symbol is their value)."""
    keys = rng.sample(KEYS, PAIRS)
    values = [rng.choice(VALUES) for _ in keys]
    seq = [s for pair in zip(keys, values) for s in pair]
    asked = rng.sample(range(PAIRS), QUERIES)
    queries = []
    for i in asked:
        queries.append(len(seq))
        seq += [keys[i], values[i]]
    return seq, queries


def recall_batch(rng: random.Random, batch_size: int) -> LMBatch:
    """Next-token targets everywhere; the loss counts only at the query keys (their target is the value)."""
    vocab = TASK.vocab
    ids, weight = [], torch.zeros(batch_size, 2 * (PAIRS + QUERIES) - 1)
    for row in range(batch_size):
        seq, queries = recall_example(rng)
        ids.append([vocab.stoi[s] for s in seq])
        weight[row, queries] = 1.0
    ids = torch.tensor(ids)
    return LMBatch(ids[:, :-1], ids[:, 1:], weight)


def interval(per_sequence: torch.Tensor) -> float:
    """Half-width of the 95% normal interval of the mean over sequences (1.96 standard errors)."""
    n = per_sequence.numel()
    return 1.96 * per_sequence.float().std().item() / math.sqrt(n)


@torch.no_grad()
def evaluate_recall(model, sequences: int = EVAL_SEQUENCES, seed: int = EVAL_SEED) -> dict:
    """Accuracy and loss at the query positions of ``sequences`` held-out sequences, each with the half-width
    of its 95% interval over sequences (queries of one sequence are not independent, sequences are); and the
    model's K/V cache in bytes per token (float32, all layers)."""
    batch = recall_batch(random.Random(seed), sequences)
    nll, right = token_losses(model, batch)
    w = batch.weight
    acc = (right.float() * w).sum(1) / w.sum(1)            # per sequence
    loss = (nll * w).sum(1) / w.sum(1)
    layers = model.attention_layers()
    return {"accuracy": acc.mean().item(), "accuracy_ci95": interval(acc),
            "loss": loss.mean().item(), "loss_ci95": interval(loss),
            "sequences": sequences, "queries": int(w.sum().item()),
            "num_heads": layers[0].num_heads, "num_kv_heads": layers[0].num_kv_heads,
            "kv_bytes_per_token": sum(a.kv_bytes_per_token() for a in layers)}


TASK = LMTask("recall", KEYS + VALUES, recall_batch, evaluate_recall,
              "multi-query associative recall: 8 key-value pairs, then 8 of the keys again")

RECIPE = dict(steps=2500, batch_size=32, lr=3e-3, warmup_steps=100, seed=21,
              config=dict(d_model=32, num_layers=2, num_heads=4, d_ff=64, position="rope", max_len=64))

register(TASK, recipes={f"gqa_kv{h}": {**RECIPE, "config": {**RECIPE["config"], "num_kv_heads": h}}
                        for h in KV_HEADS})

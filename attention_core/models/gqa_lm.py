"""Associative recall: the task on which the GQA page measures what sharing K/V heads costs.

A sequence is a small dictionary: ``PAIRS`` entry tokens, each one symbol holding a key and its value
(``k3=v7``: distinct keys, random values), then every key asked once more in random order, each followed by its
value (multi-query associative recall, as in Arora et al. 2023, "Zoology", here with the pair in one token):

    k3=v7 k12=v0 k5=v7 ... k9=v2  |  k5 v7  k3 v7  k9 v2 ...
    ------ the dictionary ------     -- the questions (the loss counts at the value after each key) --

Answering needs one attention lookup: the query key must find the entry with the same key (that match is done
with the entries' KEY vectors) and copy its value (carried by their VALUE vectors). Every entry's key and value
live in the K/V heads, so the number of K/V heads is the capacity of that lookup: the recipes ``gqa_kv4``,
``gqa_kv2`` and ``gqa_kv1`` are the same model (one layer, 4 query heads, d_model 32, d_head 8), the same steps,
data and seed; only ``num_kv_heads`` differs (MHA, GQA with groups of 2, MQA).

``evaluate_recall`` answers held-out sequences (``EVAL_SEQUENCES`` of them, from the fixed ``EVAL_SEED`` that no
training run uses): the accuracy and loss at the answers, each with its 95% interval over sequences, and the
model's K/V cache bytes per token (stored in the checkpoint's ``meta["eval"]``).
"""
from __future__ import annotations

import math
import random

import torch

from .lm import LMBatch, LMTask, register, token_losses

NUM_KEYS, NUM_VALUES = 16, 16
PAIRS = QUERIES = 8          # every key of the dictionary is asked once
KEYS = tuple(f"k{i}" for i in range(NUM_KEYS))
VALUES = tuple(f"v{i}" for i in range(NUM_VALUES))
ENTRIES = tuple(f"{k}={v}" for k in KEYS for v in VALUES)      # one token per (key, value)
EVAL_SEQUENCES = 2000
EVAL_SEED = 777_001          # recipes.EVAL_SEED: never used by a training run (those use seeds < 100)
KV_HEADS = (4, 2, 1)         # the recipes gqa_kv4, gqa_kv2, gqa_kv1


def recall_example(rng: random.Random) -> tuple[list[str], list[int]]:
    """One sequence (symbols) and the positions of its question keys (the next symbol is their value)."""
    keys = rng.sample(KEYS, PAIRS)
    values = [rng.choice(VALUES) for _ in keys]
    seq = [f"{k}={v}" for k, v in zip(keys, values)]
    queries = []
    for i in rng.sample(range(PAIRS), QUERIES):
        queries.append(len(seq))
        seq += [keys[i], values[i]]
    return seq, queries


def recall_batch(rng: random.Random, batch_size: int) -> LMBatch:
    """Next-token targets everywhere; the loss counts only at the query keys (their target is the value)."""
    stoi = _STOI
    ids, weight = [], torch.zeros(batch_size, PAIRS + 2 * QUERIES - 1)
    for row in range(batch_size):
        seq, queries = recall_example(rng)
        ids.append([stoi[s] for s in seq])
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


TASK = LMTask("recall", ENTRIES + KEYS + VALUES, recall_batch, evaluate_recall,
              "associative recall: 8 dictionary entries k=v, then each key again followed by its value")
_STOI = TASK.vocab.stoi          # built once (TASK.vocab makes a new Vocab at each access)

RECIPE = dict(steps=1500, batch_size=64, lr=1e-2, warmup_steps=50, seed=21,
              config=dict(d_model=32, num_layers=1, num_heads=4, d_ff=64, position="rope", max_len=32))

register(TASK, recipes={f"gqa_kv{h}": {**RECIPE, "config": {**RECIPE["config"], "num_kv_heads": h}}
                        for h in KV_HEADS})

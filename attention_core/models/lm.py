"""Decoder-only language models trained on synthetic token tasks: the models of the "Modern LLM attention" pages.

The model is the library's ``attention_core.decoder.DecoderLM``. A task is an ``LMTask``: its symbols, a batch
maker (token ids, next-token targets and a weight saying where the loss counts) and an evaluation of a trained
model (a dict of plain numbers, stored with the checkpoint). Each page's tasks and recipes live in their own module
``attention_core/models/<page>_lm.py``, which calls ``register`` when imported; ``recipes.LM_MODULES`` lists those
modules, so ``python -m attention_core.models <recipe>`` trains, evaluates and saves them like the other models
(``recipes.train``), and ``recipes.load_model(<recipe>)`` loads them (``weights_only=True``).

    register(LMTask("copy", vocab, make_batch, evaluate),
             recipes={"copy_h4": dict(steps=600, batch_size=32, lr=3e-3, warmup_steps=50, seed=11,
                                      config=dict(d_model=64, num_layers=2, num_heads=4, num_kv_heads=4))})
"""
from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple

import torch
import torch.nn.functional as F

from ..decoder import DecoderConfig, DecoderLM
from .tasks import Vocab


class LMBatch(NamedTuple):
    ids: torch.Tensor        # (b, n) long: the input tokens
    targets: torch.Tensor    # (b, n) long: the next token of each position
    weight: torch.Tensor     # (b, n) float: 1 where the loss counts, 0 elsewhere


@dataclass(frozen=True)
class LMTask:
    name: str
    symbols: tuple[str, ...]                                   # token i of the model is vocab.itos[i]
    batch: Callable[[random.Random, int], LMBatch]              # (rng, batch_size) -> LMBatch of symbol ids
    evaluate: Callable[[DecoderLM], dict]                      # a trained model -> plain numbers (JSON-able)
    description: str = ""

    @property
    def vocab(self) -> Vocab:
        """The symbols as a ``tasks.Vocab`` (ids 0..3 are its specials, unused here; ``vocab.stoi`` maps)."""
        return Vocab(self.symbols)


LM_TASKS: dict[str, LMTask] = {}
LM_RECIPES: dict[str, dict] = {}      # recipe name -> dict(task, steps, batch_size, lr, warmup_steps, seed, config)


def register(task: LMTask, recipes: dict[str, dict] | None = None) -> LMTask:
    """Add ``task`` and its recipes (name -> dict(steps, batch_size, lr, warmup_steps, seed, config));
    ``config`` holds DecoderConfig fields except vocab_size. Registering the same name twice is an error."""
    if task.name in LM_TASKS and LM_TASKS[task.name] is not task:
        raise ValueError(f"LM task {task.name!r} is registered twice")
    LM_TASKS[task.name] = task
    for name, recipe in (recipes or {}).items():
        if name in LM_RECIPES:
            raise ValueError(f"recipe {name!r} is registered twice")
        unknown = set(recipe.get("config", {})) - set(DecoderConfig.__dataclass_fields__)
        if unknown or "vocab_size" in recipe.get("config", {}):
            raise ValueError(f"recipe {name!r}: not DecoderConfig fields (or vocab_size given): {sorted(unknown)}")
        LM_RECIPES[name] = {"task": task.name, **recipe}
    return task


def build_lm(task: LMTask, config: dict) -> DecoderLM:
    return DecoderLM(DecoderConfig(vocab_size=len(task.vocab), **config))


def lm_loss(model: DecoderLM, batch: LMBatch) -> torch.Tensor:
    """Cross-entropy of the next token, averaged over the positions where ``batch.weight`` is 1."""
    logits = model(batch.ids).logits
    nll = F.cross_entropy(logits.flatten(0, 1), batch.targets.flatten(), reduction="none").view_as(batch.weight)
    return (nll * batch.weight).sum() / batch.weight.sum().clamp_min(1)


@torch.no_grad()
def token_losses(model: DecoderLM, batch: LMBatch) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-position next-token loss (b, n) and whether the argmax is right (b, n), model in eval mode."""
    model.eval()
    logits = model(batch.ids).logits
    nll = F.cross_entropy(logits.flatten(0, 1), batch.targets.flatten(), reduction="none").view_as(batch.weight)
    return nll, logits.argmax(-1) == batch.targets

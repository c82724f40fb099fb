"""The second tutorial's ``TransformerTrainer``, corrected.

What the tutorial gets right: betas (0.9, 0.98), linear warm-up then cosine decay, gradient
clipping at norm 1. What changes here:

- AdamW (decoupled weight decay, Loshchilov & Hutter 2019) instead of Adam.
- Pitfall: the tutorial's schedule decays towards a hard-coded ``100000`` total steps. A run of a
  few thousand steps then ends with the learning rate still near its peak (after 2000 of 100000
  steps the cosine has fallen by 0.1%): the schedule never anneals. Here the cosine ends exactly at
  the last step of the run that ``fit`` is asked to do.
- Its warm-up starts at ``lr * 0 / warmup``: the first update is wasted. Here step s (0-based) uses
  ``(s + 1) / warmup``.
- Seeded: ``fit`` seeds torch (dropout, initialisation done afterwards) and hands the batch function
  a ``random.Random(seed)``, so a run is reproducible.
- A progress callback (step, loss, learning rate, optional attention snapshot), so a page can draw
  the loss curve live and stop a capped run.
"""
from __future__ import annotations

import math
import random
import time
from collections.abc import Callable
from typing import Any, NamedTuple

import torch
from torch import nn


def warmup_cosine(step: int, warmup_steps: int, total_steps: int, min_ratio: float = 0.0) -> float:
    """Learning-rate multiplier for 0-based optimizer step ``step`` of a ``total_steps`` run.

    Linear warm-up ``(step + 1) / warmup_steps`` for the first ``warmup_steps`` steps, then
    ``min_ratio + (1 - min_ratio) * (1 + cos(pi * progress)) / 2`` with progress going from 0 at the
    end of warm-up to 1 at the last step (``total_steps - 1``).
    """
    if total_steps < 1 or warmup_steps < 0:
        raise ValueError(f"need total_steps >= 1 and warmup_steps >= 0, got {total_steps}, {warmup_steps}")
    if step < warmup_steps:
        return (step + 1) / warmup_steps
    span = max(1, total_steps - 1 - warmup_steps)
    progress = min(1.0, (step - warmup_steps) / span)
    return min_ratio + (1.0 - min_ratio) * 0.5 * (1.0 + math.cos(math.pi * progress))


def seed_warmup_cosine(step: int, warmup_steps: int) -> float:
    """The tutorial's schedule, verbatim (for the pitfall box): decays towards 100000 steps."""
    if step < warmup_steps:
        return float(step) / float(max(1, warmup_steps))
    progress = float(step - warmup_steps) / float(max(1, 100000 - warmup_steps))
    return max(0.0, 0.5 * (1.0 + math.cos(math.pi * progress)))


class TrainProgress(NamedTuple):
    step: int                 # optimizer steps done (1..steps)
    steps: int                # steps planned
    loss: float
    lr: float                 # learning rate used by this step
    grad_norm: float          # before clipping
    elapsed: float            # seconds since fit() started
    snapshot: Any = None      # snapshot_fn(model) every snapshot_every steps, else None


class TransformerTrainer:
    """Train ``model`` on ``loss_fn(model, batch) -> scalar loss``.

    trainer = TransformerTrainer(model, seq2seq_loss, lr=3e-3, warmup_steps=100, seed=0)
    history = trainer.fit(lambda rng: make_batch(rng), steps=2000, callback=print)
    """

    def __init__(self, model: nn.Module, loss_fn: Callable[[nn.Module, Any], torch.Tensor], *,
                 lr: float = 1e-3, warmup_steps: int = 100, weight_decay: float = 0.01,
                 grad_clip: float | None = 1.0, min_lr_ratio: float = 0.0, seed: int = 0,
                 betas: tuple[float, float] = (0.9, 0.98), eps: float = 1e-9):
        self.model, self.loss_fn = model, loss_fn
        self.lr, self.warmup_steps, self.min_lr_ratio = lr, warmup_steps, min_lr_ratio
        self.grad_clip, self.seed = grad_clip, seed
        self._adamw = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay)
        self._optimizer: torch.optim.Optimizer | None = None
        self.history: list[float] = []

    @property
    def optimizer(self) -> torch.optim.Optimizer:
        """AdamW, created on first use: building any torch optimizer imports torch._dynamo (~70 MB of
        memory), which a page that only shows an untrained model should not pay for."""
        if self._optimizer is None:
            self._optimizer = torch.optim.AdamW(self.model.parameters(), **self._adamw)
        return self._optimizer

    def schedule(self, steps: int) -> Callable[[int], float]:
        """The multiplier function of a ``steps``-step run (what ``fit`` gives LambdaLR)."""
        return lambda s: warmup_cosine(s, min(self.warmup_steps, steps), steps, self.min_lr_ratio)

    def train_step(self, batch: Any) -> tuple[float, float]:
        """One update: forward, backward, clip, step. Returns (loss, gradient norm before clipping)."""
        self.model.train()
        loss = self.loss_fn(self.model, batch)
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        params = [p for p in self.model.parameters() if p.grad is not None]
        max_norm = self.grad_clip if self.grad_clip is not None else float("inf")
        norm = torch.nn.utils.clip_grad_norm_(params, max_norm)
        self.optimizer.step()
        return loss.item(), float(norm)

    def fit(self, batches_fn: Callable[[random.Random], Any], steps: int,
            callback: Callable[[TrainProgress], bool | None] | None = None, *,
            snapshot_fn: Callable[[nn.Module], Any] | None = None, snapshot_every: int = 0,
            max_seconds: float | None = None) -> list[float]:
        """Run ``steps`` updates with a fresh warm-up + cosine schedule that ends at the last one.

        ``batches_fn(rng)`` returns the next batch (``rng`` is ``random.Random(seed)``). After each
        step ``callback(TrainProgress)`` is called; returning False stops the run, as does
        ``max_seconds``. Returns the loss of every step done (also appended to ``self.history``).
        The model is left in eval mode.
        """
        if steps < 1:
            raise ValueError(f"steps must be >= 1, got {steps}")
        torch.manual_seed(self.seed)
        rng = random.Random(self.seed)
        for group in self.optimizer.param_groups:
            group["lr"] = self.lr
            group["initial_lr"] = self.lr
        scheduler = torch.optim.lr_scheduler.LambdaLR(self.optimizer, self.schedule(steps))
        losses: list[float] = []
        start = time.perf_counter()
        try:
            for s in range(steps):
                lr = self.optimizer.param_groups[0]["lr"]
                loss, norm = self.train_step(batches_fn(rng))
                scheduler.step()
                losses.append(loss)
                if callback is not None:
                    snap = None
                    if snapshot_fn is not None and snapshot_every > 0 and (
                            (s + 1) % snapshot_every == 0 or s + 1 == steps):
                        self.model.eval()
                        with torch.no_grad():
                            snap = snapshot_fn(self.model)
                    info = TrainProgress(s + 1, steps, loss, lr, norm, time.perf_counter() - start, snap)
                    if callback(info) is False:
                        break
                if max_seconds is not None and time.perf_counter() - start >= max_seconds:
                    break
        finally:
            self.model.eval()
            self.history.extend(losses)
        return losses

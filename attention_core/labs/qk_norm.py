"""QK-norm and logit growth: the same small decoder trained at a high learning rate without and with QK-norm.

An attention logit is ``q . k / sqrt(d_head)``; nothing bounds it but the sizes of q and k, which grow with the
weights. At a high learning rate the weights of W_Q and W_K grow fast, the logits grow with |q| |k|, the softmax
saturates (one key gets all the weight: the attention entropy collapses to 0) and the gradient through a
saturated softmax, ``diag(p) - p p^T``, vanishes: the heads stop learning where to look (Dehghani et al. 2023,
"Scaling Vision Transformers to 22 Billion Parameters"; Wortsman et al. 2023, "Small-scale proxies for
large-scale Transformer training instabilities", arXiv 2309.14322, who show it at small scale with a high
learning rate). QK-norm RMS-normalises each head's q and k (a learned gain g per dimension) before the dot
product, so |q| <= max|g_q| sqrt(d_head), |k| likewise, and every logit is bounded:

    |logit| <= max|g_q| * max|g_k| * sqrt(d_head)          (``logit_bound``; RoPE rotations keep the norms)

The model is ``attention_core.decoder.DecoderLM`` (``DecoderConfig(qk_norm=False/True)``), the task a copy task:
``SEQ`` random symbols, a separator, the same symbols again; the loss counts on the copy. What is measured, as
Wortsman et al. do: the largest |logit| over a layer's heads and visible (query, key) pairs of a fixed probe
batch (``attention_stats``), the mean attention entropy per layer (nats, over heads and query rows) and the
training loss. ``python -m attention_core.labs.qk_norm --record`` trains both models at every learning rate of
``RECORD_LRS`` and seed of ``RECORD_SEEDS`` and writes ``assets/models/qk_norm_runs.json`` (the page's recorded
figures).
"""
from __future__ import annotations

import argparse
import json
import math
import os
import platform
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import NamedTuple

import torch

from ..decoder import CausalSelfAttention, DecoderConfig, DecoderLM
from ..models.lm import LMBatch, lm_loss
from ..models.trainer import TransformerTrainer

VOCAB = 32                    # id 0 unused, 1 the separator, 2..31 the symbols
SEP = 1
SYMBOLS = VOCAB - 2
SEQ = 8                       # symbols to copy
MODEL = dict(d_model=32, num_layers=2, num_heads=4, d_ff=128, position="rope", max_len=2 * SEQ + 1)
STEPS, BATCH, WARMUP = 200, 16, 20
WEIGHT_DECAY = 0.0            # nothing pulls the weights back: the growth is the optimiser's alone
EVERY = 5                     # steps between two looks at the logits and the entropy
PROBE_SEED, PROBE_SIZE = 123, 16
RECORD_LRS = (1e-3, 3e-3, 1e-2, 3e-2, 1e-1, 3e-1, 1.0)
RECORD_SEEDS = (0, 1, 2)
RECORD_FILE = Path(__file__).resolve().parents[2] / "assets" / "models" / "qk_norm_runs.json"
RECORD_COMMAND = "python -m attention_core.labs.qk_norm --record"
CHANCE_LOSS = math.log(SYMBOLS)    # a model that has learned nothing about the copy: uniform over the symbols


# ------------------------------------------------------------------ the task and the model
def copy_batch(rng: random.Random, batch_size: int) -> LMBatch:
    """``batch_size`` sequences ``s_1 .. s_SEQ SEP s_1 .. s_SEQ`` (input: all but the last token); the loss
    counts where the next token is a copied symbol (positions SEQ .. 2 SEQ - 1)."""
    rows = []
    for _ in range(batch_size):
        s = [rng.randrange(2, VOCAB) for _ in range(SEQ)]
        rows.append(s + [SEP] + s)
    ids = torch.tensor(rows)
    weight = torch.zeros(batch_size, 2 * SEQ)
    weight[:, SEQ:] = 1.0
    return LMBatch(ids[:, :-1], ids[:, 1:], weight)


def build_model(qk_norm: bool, seed: int) -> DecoderLM:
    torch.manual_seed(seed)
    return DecoderLM(DecoderConfig(vocab_size=VOCAB, qk_norm=qk_norm, **MODEL))


def probe_ids() -> torch.Tensor:
    """The fixed batch every measurement reads (the same for every run)."""
    return copy_batch(random.Random(PROBE_SEED), PROBE_SIZE).ids


# ------------------------------------------------------------------ what is measured
class LayerStats(NamedTuple):
    max_logit: float          # the largest |q.k / sqrt(d_head)| over heads and visible (query, key) pairs
    entropy: float            # mean over sequences, heads and query rows of -sum_j p_j ln p_j (nats)


def attention_entropy(weights: torch.Tensor) -> float:
    """Mean entropy (nats) of the rows of ``weights`` (..., n, t): 0 when every row is one-hot, ln t when
    uniform over t keys (a causal row i can reach at most ln(i + 1))."""
    return float(torch.special.entr(weights).sum(-1).mean())


def uniform_entropy(n: int) -> float:
    """The mean entropy of causal attention spread evenly: row i (1-based) uniform over i keys, ln i nats."""
    return sum(math.log(i) for i in range(1, n + 1)) / n


@torch.no_grad()
def attention_stats(model: DecoderLM, ids: torch.Tensor) -> list[LayerStats]:
    """Per layer: the largest |logit| where the mask lets the query see the key, and the mean entropy of
    the attention weights, for one forward pass of ``ids`` (the layers' inputs are caught on the way)."""
    inputs: list[torch.Tensor] = []
    layers = model.attention_layers()
    hooks = [a.register_forward_pre_hook(lambda _m, args: inputs.append(args[0])) for a in layers]
    was_training = model.training
    model.eval()
    try:
        out = model(ids)
    finally:
        for h in hooks:
            h.remove()
        model.train(was_training)
    stats = []
    n = ids.size(1)
    for attn, x, w in zip(layers, inputs, out.weights):
        logits = attn.logits(x)                                   # (b, h, n, n)
        visible = attn.score_mask(0, n, n)
        visible = visible if visible.dtype == torch.bool else torch.isfinite(visible)
        top = logits.abs().masked_fill(~visible, 0.0).amax()
        stats.append(LayerStats(float(top), attention_entropy(w)))
    return stats


def logit_bound(attn: CausalSelfAttention) -> float | None:
    """With QK-norm: max|g_q| max|g_k| sqrt(d_head) x logit_scale, a bound of every |logit| whatever the
    input (RMSNorm gives |q_hat| <= sqrt(d_head), the gains scale each coordinate, RoPE keeps the norm).
    Without QK-norm: None (no bound: |q| and |k| grow with the weights and the input)."""
    if attn.q_norm is None:
        return None
    gq = attn.q_norm.weight.detach().abs().max()
    gk = attn.k_norm.weight.detach().abs().max()
    return float(gq * gk * math.sqrt(attn.d_head) * attn.logit_scale)


class Grown(NamedTuple):
    factor: float
    stats: tuple[LayerStats, ...]       # per layer
    bounds: tuple[float | None, ...]    # per layer: logit_bound (None without QK-norm)


@torch.no_grad()
def grown_weights(qk_norm: bool, factor: float, seed: int = 0) -> Grown:
    """What weight growth does to the logits, without training: the untrained model of ``seed`` with every
    W_Q and W_K multiplied by ``factor`` (as a high learning rate makes them grow), measured on the probe
    batch. Without QK-norm q and k grow ``factor`` times and the logits ``factor``^2 times; with it the
    RMSNorm divides the growth out (up to its eps) and the logits stay under ``logit_bound``."""
    if not (math.isfinite(factor) and factor > 0):
        raise ValueError(f"factor must be a positive number, got {factor}")
    model = build_model(qk_norm, seed)
    for attn in model.attention_layers():
        attn.W_query.weight.mul_(factor)
        attn.W_key.weight.mul_(factor)
    stats = attention_stats(model, probe_ids())
    return Grown(factor, tuple(stats), tuple(logit_bound(a) for a in model.attention_layers()))


# ------------------------------------------------------------------ why saturation stops learning
SAT_ROW = (1.2, 1.0, 0.6, 0.3, 0.0, -0.2, -0.5, -0.9)       # one row of logits, scaled by c below
SAT_SCALES = (0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0)


class Saturation(NamedTuple):
    scale: float
    top_weight: float         # the largest softmax weight
    entropy: float            # nats
    jacobian_norm: float      # spectral norm of d softmax / d logits = diag(p) - p p^T


def softmax_jacobian(z: torch.Tensor) -> torch.Tensor:
    """d softmax(z) / d z = diag(p) - p p^T (n, n): what the gradient passes back to the logits."""
    p = torch.softmax(z, -1)
    return torch.diag(p) - torch.outer(p, p)


def saturation(row=SAT_ROW, scales=SAT_SCALES) -> list[Saturation]:
    """The same row of logits made c times larger: the weights turn one-hot and the Jacobian's norm -> 0."""
    out = []
    for c in scales:
        z = c * torch.tensor(row, dtype=torch.float64)
        p = torch.softmax(z, -1)
        norm = torch.linalg.matrix_norm(softmax_jacobian(z), ord=2)
        out.append(Saturation(float(c), float(p.max()), attention_entropy(p), float(norm)))
    return out


# ------------------------------------------------------------------ a run
@dataclass(frozen=True)
class RunSpec:
    lr: float
    qk_norm: bool
    seed: int = 0
    steps: int = STEPS


class Probe(NamedTuple):
    step: int
    max_logit: tuple[float, ...]      # per layer
    entropy: tuple[float, ...]        # per layer


@dataclass
class Run:
    spec: RunSpec
    losses: list[float]
    probes: list[Probe]
    seconds: float
    bounds: tuple[float | None, ...]   # logit_bound of each layer at the end (None without QK-norm)

    def to_json(self) -> dict:
        return {"lr": self.spec.lr, "qk_norm": self.spec.qk_norm, "seed": self.spec.seed, "steps": self.spec.steps,
                "losses": [round(v, 5) for v in self.losses],
                "probes": [[p.step, [round(v, 4) for v in p.max_logit], [round(v, 5) for v in p.entropy]]
                           for p in self.probes],
                "seconds": round(self.seconds, 2), "bounds": [None if b is None else round(b, 4)
                                                             for b in self.bounds]}


def train_run(spec: RunSpec, *, every: int = EVERY, on_probe: Callable[[list[float], list[Probe]], bool] | None
              = None, max_seconds: float | None = None) -> Run:
    """Train the copy model of ``spec`` (AdamW, warm-up + cosine, gradient clipping at 1, no weight decay),
    looking at the logits and entropies of the probe batch before step 1 and every ``every`` steps.
    ``on_probe(losses, probes)`` after each look may return False to stop; ``max_seconds`` stops too."""
    model = build_model(spec.qk_norm, spec.seed)
    ids = probe_ids()
    trainer = TransformerTrainer(model, lm_loss, lr=spec.lr, warmup_steps=min(WARMUP, spec.steps),
                                 weight_decay=WEIGHT_DECAY, seed=spec.seed)
    losses: list[float] = []
    probes = [Probe(0, *map(tuple, zip(*attention_stats(model, ids))))]

    def look(p) -> bool | None:
        losses.append(p.loss)
        if p.step % every == 0 or p.step == p.steps:
            probes.append(Probe(p.step, *map(tuple, zip(*attention_stats(model, ids)))))
            if on_probe is not None:
                return on_probe(losses, probes)
        return None

    start = time.perf_counter()
    trainer.fit(lambda rng: copy_batch(rng, BATCH), spec.steps, look, max_seconds=max_seconds)
    seconds = time.perf_counter() - start
    if probes[-1].step != len(losses):                      # stopped between two looks: one last look
        probes.append(Probe(len(losses), *map(tuple, zip(*attention_stats(model, ids)))))
    return Run(spec, losses, probes, seconds, tuple(logit_bound(a) for a in model.attention_layers()))


def final_loss(losses: list[float], k: int = 10) -> float:
    """The mean of the last ``k`` training losses (one step's loss is noisy)."""
    tail = losses[-k:]
    return sum(tail) / len(tail)


def lr_sensitivity(finals: list[float], initial: float, best: float) -> float:
    """Wortsman et al.'s LR sensitivity: the mean over the learning rates of min(final loss, initial loss)
    minus the best final loss: 0 when every rate trains as well as the best one."""
    return sum(min(f, initial) for f in finals) / len(finals) - best


# ------------------------------------------------------------------ the recording
def record(lrs=RECORD_LRS, seeds=RECORD_SEEDS, steps: int = STEPS, path: Path = RECORD_FILE,
           log: Callable[[str], None] = print) -> dict:
    """Train both models at every learning rate and seed and write the JSON the page reads."""
    torch.set_num_threads(1)
    runs = []
    begun = time.perf_counter()
    for lr in lrs:
        for seed in seeds:
            for qk in (False, True):
                run = train_run(RunSpec(lr, qk, seed, steps))
                last = run.probes[-1]
                log(f"lr={lr:g} seed={seed} qk_norm={qk}: final loss {final_loss(run.losses):.3f}, max |logit| "
                    f"{max(last.max_logit):.1f}, entropy {min(last.entropy):.3f} ({run.seconds:.1f} s)")
                runs.append(run.to_json())
    try:
        load = round(os.getloadavg()[0], 2)
    except OSError:
        load = None
    doc = {"command": RECORD_COMMAND, "date": datetime.now(timezone.utc).strftime("%Y-%m-%d"),
           "settings": {**MODEL, "vocab": VOCAB, "seq": SEQ, "steps": steps, "batch": BATCH, "warmup": WARMUP,
                        "weight_decay": WEIGHT_DECAY, "every": EVERY, "seeds": list(seeds), "probe_size": PROBE_SIZE,
                        "chance_loss": CHANCE_LOSS},
           "machine": {"cpu": platform.processor() or platform.machine(), "torch": torch.__version__,
                       "load_avg_1min": load, "seconds": round(time.perf_counter() - begun, 1)},
           "runs": runs}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc, indent=None, separators=(",", ":")) + "\n", encoding="utf-8")
    return doc


def read_record(path: Path = RECORD_FILE) -> dict:
    """The recorded runs, checked: every run has its losses and probes, both models at every rate."""
    doc = json.loads(path.read_text(encoding="utf-8"))
    runs = doc["runs"]
    if not runs:
        raise ValueError("no runs")
    for r in runs:
        if not r["losses"] or not r["probes"] or len(r["probes"][0][1]) != doc["settings"]["num_layers"]:
            raise ValueError(f"run lr={r.get('lr')} qk_norm={r.get('qk_norm')} is incomplete")
        for step, logits, entropies in r["probes"]:
            if not (len(logits) == len(entropies) and all(math.isfinite(v) for v in logits + entropies)):
                raise ValueError(f"run lr={r['lr']}: bad probe at step {step}")
    for lr, seed in {(r["lr"], r["seed"]) for r in runs}:
        if sorted(r["qk_norm"] for r in runs if r["lr"] == lr and r["seed"] == seed) != [False, True]:
            raise ValueError(f"lr={lr}, seed={seed}: both runs (without and with QK-norm) are needed")
    return doc


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--record", action="store_true", help=f"train and write {RECORD_FILE.name}")
    parser.add_argument("--lrs", type=float, nargs="+", default=list(RECORD_LRS))
    parser.add_argument("--seeds", type=int, nargs="+", default=list(RECORD_SEEDS))
    parser.add_argument("--steps", type=int, default=STEPS)
    parser.add_argument("--out", type=Path, default=RECORD_FILE)
    args = parser.parse_args(argv)
    if not args.record:
        parser.print_help()
        return
    record(tuple(args.lrs), tuple(args.seeds), args.steps, args.out)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()

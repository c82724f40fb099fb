"""Induction heads forming: the recipe ``induction_heads`` trained with snapshots, the phase change found in them.

The model, data and scores are ``attention_core.models.induction_heads_lm``. ``train_run`` trains the recipe (the
same seed, batches and trainer as ``python -m attention_core.models induction_heads``) and every ``every`` steps
measures, on fresh sequences, the loss of the first and of the repeated half and each head's previous-token and
induction scores, and keeps the attention pattern of every head on one short probe sequence. ``phase_change``
reads the step where the repeated-half loss falls while the induction score rises.

The page shows a recorded run at once and can train one live (through the server's queue)::

    python -m attention_core.labs.induction_heads            # records assets/models/induction_heads_run.json
"""
from __future__ import annotations

import argparse
import json
import math
import os
import random
import time
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

import numpy as np
import torch

from ..models import induction_heads_lm as ih
from ..models.lm import build_lm, lm_loss
from ..models.trainer import TransformerTrainer

RUN_FILE = Path(__file__).resolve().parents[2] / "assets" / "models" / "induction_heads_run.json"
RUN_COMMAND = "python -m attention_core.labs.induction_heads"
EVERY = 10                  # steps between two snapshots
PATTERN_EVERY = 20          # the recorded run keeps the probe's patterns every 20 steps (and at the end): ~0.2 MB
PROBE_HALF, PROBE_SEED = 8, 5   # the probe sequence whose attention patterns are kept: <sos> + 8 symbols, twice
SNAP_SEQUENCES = 64         # fresh sequences per snapshot for the losses and scores
FORMAT = 1
LIVE_STEPS = ih.RECIPE["steps"]     # the page's live run: the whole recipe


class Snapshot(NamedTuple):
    step: int
    first_loss: float
    repeated_loss: float
    previous: np.ndarray         # (layers, heads)
    induction: np.ndarray        # (layers, heads)
    patterns: np.ndarray | None  # (layers, heads, n, n) on the probe, float32 (None: not kept)


def probe_tokens() -> torch.Tensor:
    return ih.repeated_tokens(random.Random(PROBE_SEED), 1, PROBE_HALF)


def probe_labels() -> list[str]:
    """The probe's input tokens as symbols (<sos> shown as ⟨s⟩); the charts tell repeats apart by position."""
    itos = ih.TASK.vocab.itos
    return ["⟨s⟩" if i == 1 else itos[i] for i in probe_tokens()[0, :-1].tolist()]


def snapshot(model, step: int, tokens: torch.Tensor, probe: torch.Tensor) -> Snapshot:
    m = ih.measure(model, tokens)
    pat = ih.measure(model, probe).weights
    patterns = torch.stack([w[0] for w in pat]).numpy().astype(np.float32)      # (layers, heads, n, n)
    return Snapshot(step, m.first_loss, m.repeated_loss, m.previous.numpy(), m.induction.numpy(), patterns)


def build(seed: int):
    """The recipe's model and trainer for ``seed`` (as recipes.train builds them)."""
    r = ih.RECIPE
    torch.manual_seed(seed)
    model = build_lm(ih.TASK, r["config"])
    trainer = TransformerTrainer(model, lm_loss, lr=r["lr"], warmup_steps=r["warmup_steps"], seed=seed)
    return model, trainer


class Run(NamedTuple):
    losses: list[float]          # the training loss of every step
    snaps: list[Snapshot]
    seconds: float               # wall-clock seconds of training, snapshots not counted
    cpu_seconds: float           # CPU seconds of the process meanwhile, snapshots included


def train_run(seed: int = ih.RECIPE["seed"], steps: int = ih.RECIPE["steps"], every: int = EVERY,
              on_step: Callable[[int, float, Snapshot | None], bool | None] | None = None,
              max_seconds: float | None = None) -> Run:
    """Train the recipe with ``seed``; a snapshot at step 0 and every ``every`` steps (and at the last).

    ``on_step(step, loss, snapshot or None)`` after every step; False stops the run."""
    model, trainer = build(seed)
    tokens, probe = ih.eval_tokens(sequences=SNAP_SEQUENCES, seed=ih.EVAL_SEED + 1), probe_tokens()
    snaps = [snapshot(model, 0, tokens, probe)]
    snap_seconds = 0.0

    def callback(p) -> bool:
        nonlocal snap_seconds
        snap = None
        if p.step % every == 0 or p.step == p.steps:
            t0 = time.perf_counter()
            snap = snapshot(model, p.step, tokens, probe)
            snaps.append(snap)
            snap_seconds += time.perf_counter() - t0
        go = on_step(p.step, p.loss, snap) if on_step is not None else None
        if max_seconds is not None and p.elapsed - snap_seconds >= max_seconds:
            return False
        return go is not False

    start, cpu = time.perf_counter(), time.process_time()
    size = ih.RECIPE["batch_size"]
    losses = trainer.fit(lambda rng: ih.make_batch(rng, size), steps, callback)
    if snaps[-1].step != len(losses):
        snaps.append(snapshot(model, len(losses), tokens, probe))
    return Run(losses, snaps, time.perf_counter() - start - snap_seconds, time.process_time() - cpu)


# ------------------------------------------------------------------ reading a run
class Phase(NamedTuple):
    step: int | None             # the first snapshot where the repeated-half loss is below half the first-half loss
    before: int                  # the last snapshot before it still on the plateau (ratio >= PLATEAU)
    after: int                   # the first snapshot from ``step`` on where copying mostly works (ratio < COPYING)
    induction_before: float      # best last-layer induction score at ``before`` and at ``after``
    induction_after: float
    previous_before: float       # best layer-1 previous-token score at ``before`` and at ``after``
    previous_after: float
    loss_before: float           # repeated-half loss at ``before`` and at ``after``
    loss_after: float


PLATEAU, MIDDLE, COPYING = 0.8, 0.5, 0.2   # repeated-half loss / first-half loss: on the plateau, halfway, copying


def best_scores(snap: Snapshot) -> tuple[float, float]:
    """(best layer-1 previous-token score, best last-layer induction score) of a snapshot."""
    return float(np.max(snap.previous[0])), float(np.max(snap.induction[-1]))


def phase_change(snaps: list[Snapshot]) -> Phase:
    """The phase change, read from the ratio r = repeated-half loss / first-half loss of each snapshot (about 1 on
    the plateau: the repeated half is no easier than the random first half): ``step`` is the first snapshot with
    r < MIDDLE; ``before`` the last one before it with r >= PLATEAU, ``after`` the first one from ``step`` on with
    r < COPYING (the last snapshot if none). Without a crossing, ``step`` is None and the window is the whole run."""
    ratio = [s.repeated_loss / max(s.first_loss, 1e-9) for s in snaps]
    at = next((k for k, r in enumerate(ratio) if r < MIDDLE), None)
    if at is None:
        b, a = 0, len(snaps) - 1
    else:
        b = max((k for k in range(at) if ratio[k] >= PLATEAU), default=0)
        a = next((k for k in range(at, len(snaps)) if ratio[k] < COPYING), len(snaps) - 1)
    (p0, i0), (p1, i1) = best_scores(snaps[b]), best_scores(snaps[a])
    return Phase(None if at is None else snaps[at].step, snaps[b].step, snaps[a].step, i0, i1, p0, p1,
                 snaps[b].repeated_loss, snaps[a].repeated_loss)


# ------------------------------------------------------------------ the pitfall: a head looking a fixed distance back
class OffsetDemo(NamedTuple):
    half: int                 # the half length the fixed-offset head is built for
    same_half: float          # its induction score on sequences of that half length
    other_half: str           # the other half lengths it is scored on, e.g. "8, 16"
    other_halves: float       # its mean induction score on those


def offset_head(n: int, offset: int) -> torch.Tensor:
    """(1, 1, n, n) weights of a head that attends exactly ``offset`` positions back (to <sos> where it cannot):
    no induction circuit, just a position rule."""
    i = torch.arange(n)
    w = torch.zeros(1, 1, n, n)
    w[0, 0, i, (i - offset).clamp_min(0)] = 1.0
    return w


def offset_head_demo(half: int = ih.EVAL_HALF, others: tuple[int, ...] = (8, 16)) -> OffsetDemo:
    """If every training sequence had the same half length m, a head attending m - 1 positions back would score a
    perfect induction score -- and fail on any other length: why the recipe draws m per batch."""
    same = float(ih.induction_scores(offset_head(2 * half, half - 1), half)[0])
    other = [float(ih.induction_scores(offset_head(2 * m, half - 1), m)[0]) for m in others]
    return OffsetDemo(half, same, ", ".join(map(str, others)), sum(other) / len(other))


# ------------------------------------------------------------------ the recorded run (JSON)
# ------------------------------------------------------------------ head removal, reusing what it leaves unchanged
def block_without_heads(block, x: torch.Tensor, keep: torch.Tensor | None = None):
    """One decoder block on x (b, n, d_model) with each head's slice of the concatenated head outputs multiplied
    by ``keep`` (b, heads; 0 removes the head) before W_O, as ``ih.ablate_heads`` zeroes it. Returns the block's
    output, its attention weights and the concatenated head outputs (b, n, d_model) before W_O."""
    attn, seen = block.attn, {}

    def before_w_o(module, args):
        seen["heads"] = args[0]
        if keep is None:
            return None
        return (args[0] * keep.repeat_interleave(attn.d_head, dim=-1)[:, None, :],)

    hook = attn.W_output.register_forward_pre_hook(before_w_o)
    try:
        out = attn(block.ln1(x))
    finally:
        hook.remove()
    return _after_attention(block, x, out.output), out.weights, seen["heads"]


def _after_attention(block, x: torch.Tensor, attended: torch.Tensor) -> torch.Tensor:
    x = x + attended
    return x + block.mlp(block.ln2(x)) if block.mlp is not None else x


@torch.no_grad()
def ablation(model, tokens: torch.Tensor) -> dict:
    """The numbers of ``ih.ablation`` (losses and the best induction head's score with nothing removed and with
    each row of ``ih.ablation_rows`` removed), without re-running what a removal leaves unchanged: the layers below
    the first one it touches are the unablated forward's, and in that layer the attention is too (only the heads'
    contributions through W_O change). The rows that first touch the same layer run the layers above it as one
    batch."""
    half = (tokens.size(1) - 1) // 2
    batch = ih.as_batch(tokens)
    was_training = model.training
    model.eval()
    b, heads = batch.ids.size(0), model.config.num_heads
    x = model.embed(batch.ids)                                           # the unablated forward, layer by layer
    if model.pos is not None:
        x = x + model.pos(torch.arange(batch.ids.size(1)))
    inputs, weights, concat = [], [], []
    for block in model.blocks:
        inputs.append(x)
        x, w, c = block_without_heads(block, x)
        weights.append(w)
        concat.append(c)
    base = ih.Measures(*ih.half_losses(model.head(model.ln_f(x)), batch.targets, half),
                       torch.stack([ih.previous_token_scores(w) for w in weights]),
                       torch.stack([ih.induction_scores(w, half) for w in weights]), tuple(weights))
    ind_head = ih.best_heads(base)[1]
    rows = ih.ablation_rows(base)
    out = {"none": {"heads": [], "first_loss": base.first_loss, "repeated_loss": base.repeated_loss,
                    "induction": float(base.induction[1, ind_head])}}
    by_layer: dict[int, list[str]] = {}
    for name, removed in rows.items():
        if removed:
            by_layer.setdefault(min(layer for layer, _ in removed), []).append(name)
        else:                                                            # nothing to remove (no head above 0.5)
            out[name] = dict(out["none"], heads=[])
    for first, names in sorted(by_layer.items()):
        keep = torch.ones(len(model.blocks), len(names), heads)          # (layers, rows, heads)
        for r, name in enumerate(names):
            for layer, head in rows[name]:
                keep[layer, r, head] = 0.0
        keep = keep.repeat_interleave(b, dim=1)                          # (layers, rows * b, heads)
        block = model.blocks[first]                                      # the first layer touched: same attention
        kept = keep[first].repeat_interleave(block.attn.d_head, -1)[:, None]          # (rows * b, 1, d_model)
        x = _after_attention(block, inputs[first].repeat(len(names), 1, 1),
                             block.attn.W_output(concat[first].repeat(len(names), 1, 1) * kept))
        layer_weights = list(weights[:first + 1])
        for layer in range(first + 1, len(model.blocks)):
            x, w, _ = block_without_heads(model.blocks[layer], x, keep[layer])
            layer_weights.append(w)
        logits = model.head(model.ln_f(x))
        for r, name in enumerate(names):
            rows_r = slice(r * b, (r + 1) * b)
            first_loss, repeated_loss = ih.half_losses(logits[rows_r], batch.targets, half)
            w = layer_weights[1]                                         # the induction layer's weights
            w = w if w.size(0) == b else w[rows_r]                       # (shared when it was not re-run)
            out[name] = {"heads": [list(x) for x in rows[name]], "first_loss": first_loss,
                         "repeated_loss": repeated_loss, "induction": float(ih.induction_scores(w, half)[ind_head])}
    model.train(was_training)
    return {name: out[name] for name in rows}


def to_record(run: Run, seed: int, steps: int, every: int) -> dict:
    losses, snaps = run.losses, run.snaps
    return {
        "format": FORMAT, "recipe": ih.RECIPE_NAME, "seed": seed, "steps": steps, "every": every,
        "config": ih.RECIPE["config"], "lr": ih.RECIPE["lr"], "batch_size": ih.RECIPE["batch_size"],
        "halves": list(ih.HALVES), "eval_half": ih.EVAL_HALF, "snap_sequences": SNAP_SEQUENCES,
        "probe": probe_labels(), "chance_loss": math.log(len(ih.SYMBOLS)),
        "train_seconds": round(run.seconds, 2), "cpu_seconds": round(run.cpu_seconds, 2),
        "load_avg_1min": round(os.getloadavg()[0], 1), "threads": torch.get_num_threads(),
        "torch": str(torch.__version__),
        "losses": [round(x, 4) for x in losses],
        "snapshots": [{"step": s.step, "first_loss": round(s.first_loss, 4), "repeated_loss": round(s.repeated_loss, 4),
                       "previous": np.round(s.previous, 4).tolist(), "induction": np.round(s.induction, 4).tolist(),
                       **({"patterns": np.round(s.patterns, 2).tolist()}
                          if s.step % PATTERN_EVERY == 0 or s is snaps[-1] else {})} for s in snaps],
    }


def snapshots_of(record: dict) -> list[Snapshot]:
    return [Snapshot(int(s["step"]), float(s["first_loss"]), float(s["repeated_loss"]),
                     np.asarray(s["previous"], dtype=np.float32), np.asarray(s["induction"], dtype=np.float32),
                     np.asarray(s["patterns"], dtype=np.float32) if "patterns" in s else None)
            for s in record["snapshots"]]


def read_run(path: Path | str = RUN_FILE) -> dict:
    """The recorded run; ValueError if the file is not one (FileNotFoundError if it is missing)."""
    record = json.loads(Path(path).read_text(encoding="utf-8"))
    if not isinstance(record, dict) or record.get("format") != FORMAT:
        raise ValueError(f"not a recorded induction run of format {FORMAT}")
    snaps = snapshots_of(record)
    shapes = {s.patterns.shape for s in snaps if s.patterns is not None}
    n = len(record["probe"])
    if not snaps or not record["losses"] or snaps[-1].patterns is None or len(shapes) != 1 \
            or shapes.pop()[-2:] != (n, n):
        raise ValueError("no snapshots, no losses, or patterns that do not match the probe")
    return record


def record_run(path: Path | str = RUN_FILE, seed: int = ih.RECIPE["seed"], steps: int = ih.RECIPE["steps"],
               every: int = EVERY) -> dict:
    record = to_record(train_run(seed, steps, every), seed, steps, every)
    Path(path).write_text(json.dumps(record, separators=(",", ":")), encoding="utf-8")
    return record


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Record a training run of the induction-heads model with "
                                                 "snapshots (losses, per-head scores, attention patterns).")
    parser.add_argument("--seed", type=int, default=ih.RECIPE["seed"])
    parser.add_argument("--steps", type=int, default=ih.RECIPE["steps"])
    parser.add_argument("--every", type=int, default=EVERY)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--out", default=str(RUN_FILE))
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    record = record_run(args.out, args.seed, args.steps, args.every)
    phase = phase_change(snapshots_of(record))
    print(f"{args.out}: {len(record['losses'])} steps in {record['train_seconds']} s ({record['cpu_seconds']} s of "
          f"CPU, load {record['load_avg_1min']}); phase change at step {phase.step}, from step {phase.before} to "
          f"{phase.after}: repeated-half loss {phase.loss_before:.2f} -> {phase.loss_after:.2f}, induction "
          f"{phase.induction_before:.2f} -> {phase.induction_after:.2f}, previous-token {phase.previous_before:.2f} "
          f"-> {phase.previous_after:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

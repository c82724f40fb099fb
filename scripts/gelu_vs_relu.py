"""Does GELU beat ReLU in this app's encoder? The second tutorial says so in a comment
(``nn.GELU(),  # GELU激活函数优于ReLU``); the encoder page offers both. This measures it.

The model: the app's trained encoder (``attention_core.transformer.TransformerEncoder``, post-LN as in both
tutorials, d_model 64, 2 layers, 4 heads, d_ff 128) inside ``models.pronoun.PronounResolver``, trained on the
"it" task with the shipped recipe (``recipes.RECIPES["pronoun"]``). For each seed the two runs share
everything but the FFN's activation: the same initial weights (the activation has no parameters), the same
batches, the same schedule. Measured on held-out sentences (noun pairs never trained on, ``EVAL_SEED``):
cross-entropy of the readout and accuracy, after a short run (STEPS_SHORT) and after the full recipe.

    python scripts/gelu_vs_relu.py            # writes assets/bench/gelu_relu.json (about 4 min on 1 core)
"""
from __future__ import annotations

import json
import random
import statistics
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from attention_core.models import recipes  # noqa: E402
from attention_core.models.pronoun import make_pronoun_batch, pronoun_loss, referent_ids  # noqa: E402
from attention_core.models.tasks import PRONOUN_LANGS, PRONOUN_VOCAB, make_pronoun_example  # noqa: E402
from attention_core.models.trainer import TransformerTrainer  # noqa: E402
from attention_core.transformer import _activation  # noqa: E402

OUT = ROOT / "assets" / "bench" / "gelu_relu.json"
SEEDS = (1, 2, 3, 4, 5)
STEPS_SHORT = 150            # where the runs still differ: the loss is far from its floor
ACTS = ("relu", "gelu")
N_EVAL = 500                 # held-out sentences per language


def heldout_batch():
    rng = random.Random(recipes.EVAL_SEED)
    examples = [make_pronoun_example(rng, lang=lang, split="heldout") for lang in PRONOUN_LANGS
                for _ in range(N_EVAL)]
    return make_pronoun_batch(examples, PRONOUN_VOCAB)


@torch.no_grad()
def measure(model, batch) -> dict:
    model.eval()
    out = model(batch.tokens, batch.lengths, batch.pronoun, batch.nouns)
    loss = float(F.cross_entropy(out.vocab_logits, referent_ids(batch)))
    acc = float((out.logits.argmax(-1) == batch.labels).float().mean())
    return {"loss": loss, "accuracy": acc}


def run(act: str, seed: int, steps: int, batch) -> dict:
    recipe = recipes.RECIPES["pronoun"]
    torch.manual_seed(seed)
    model = recipes.build_model(recipe, PRONOUN_VOCAB, None)
    for layer in model.encoder.layers:                 # the only difference between the two runs
        layer.ffn.activation_name, layer.ffn.activation = act, _activation(act)
    trainer = TransformerTrainer(model, pronoun_loss, lr=recipe.lr, warmup_steps=recipe.warmup_steps, seed=seed)
    start = time.perf_counter()
    losses = trainer.fit(recipes.batch_fn(recipe), steps)
    return {**measure(model, batch), "train_loss_last20": sum(losses[-20:]) / 20,
            "seconds": round(time.perf_counter() - start, 1)}


def main() -> None:
    torch.set_num_threads(1)
    batch = heldout_batch()
    full = recipes.RECIPES["pronoun"].steps
    result = {"model": "PronounResolver (TransformerEncoder, post-LN, d_model 64, 2 layers, 4 heads, d_ff 128)",
              "recipe": "pronoun", "seeds": list(SEEDS), "heldout_sentences": len(batch.lengths),
              "torch": str(torch.__version__), "runs": {}}
    for steps in (STEPS_SHORT, full):
        per = {}
        for act in ACTS:
            rows = [run(act, s, steps, batch) for s in SEEDS]
            per[act] = {"loss": [r["loss"] for r in rows], "accuracy": [r["accuracy"] for r in rows],
                        "seconds": [r["seconds"] for r in rows]}
            print(steps, act, [f"{r['loss']:.4f}/{r['accuracy']:.3f}" for r in rows], flush=True)
        diff = [g - r for g, r in zip(per["gelu"]["loss"], per["relu"]["loss"])]
        per["gelu_minus_relu_loss"] = diff
        per["gelu_lower_loss_seeds"] = sum(d < 0 for d in diff)
        per["mean_loss"] = {a: statistics.mean(per[a]["loss"]) for a in ACTS}
        per["mean_accuracy"] = {a: statistics.mean(per[a]["accuracy"]) for a in ACTS}
        result["runs"][str(steps)] = per
    OUT.write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps({k: {kk: v[kk] for kk in ("mean_loss", "mean_accuracy", "gelu_lower_loss_seeds")}
                      for k, v in result["runs"].items()}, indent=1))


if __name__ == "__main__":
    main()

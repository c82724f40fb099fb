"""Why the pronoun model reads its answer as a *word*: the same encoder trained with a two-way readout.

    python scripts/pronoun_readout_ablation.py [--seeds 5 1 2] [--steps 1500] [--out PATH]

Both readouts start from the pronoun's final vector, h = W_read x_it (``attention_core.models.pronoun``):

- word (shipped):  logits over the whole vocabulary, h . E_w + b_w (E the encoder's own input
  embedding table, tied), cross-entropy towards the referent's word.
- two_way:         logit_c = sqrt(d) <h, E[noun_c]> for the sentence's two nouns only, cross-entropy
  over those two (c = 0, 1).

Same encoder (the "pronoun" recipe: 2 post-LN layers, 4 heads, d_model 64), same seeds, batches,
steps and schedule; evaluated like the shipped checkpoint (float16-rounded weights,
``recipes.evaluate_pronoun`` on held-out noun pairs from ``recipes.EVAL_SEED``). The two-way logit
difference <h, E[a] - E[b]> is antisymmetric: "it" can answer from *either* noun, e.g. by looking at
the other one and subtracting it, so nothing pushes a head to look at the referent. Writes
assets/models/pronoun_ablation.json, which the "it" page quotes in its pitfall box. About 25 s per
run on one thread.
"""
from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from attention_core.masks import padding_mask  # noqa: E402
from attention_core.models.pronoun import (
    PronounBatch,
    PronounConfig,
    PronounOutput,
    PronounResolver,
    pronoun_loss,
)
from attention_core.models.recipes import (  # noqa: E402
    ABLATION_FILE,
    EVAL_SEED,
    MODELS_DIR,
    RECIPES,
    batch_fn,
    evaluate_pronoun,
)
from attention_core.models.tasks import PRONOUN_VOCAB  # noqa: E402
from attention_core.models.trainer import TransformerTrainer  # noqa: E402

OUT = MODELS_DIR / ABLATION_FILE
COMMAND = "python scripts/pronoun_readout_ablation.py"


class TwoWayResolver(PronounResolver):
    """The shipped model's encoder and W_read; the answer compares the two nouns' embeddings only."""

    def forward(self, tokens, lengths, pronoun, nouns) -> PronounOutput:
        b, n = tokens.shape
        x, weights = self.encoder(tokens, padding_mask(lengths, n, device=tokens.device))
        h = self.W_read(x[torch.arange(b, device=tokens.device), pronoun])         # (b, d)
        E = self.encoder.embedding.weight                                           # (V, d), tied
        vocab_logits = (h @ E.t()) * math.sqrt(self.config.d_model)                # only the two nouns' are used
        logits = vocab_logits.gather(1, tokens.gather(1, nouns))                    # (b, 2)
        return PronounOutput(logits, vocab_logits, list(weights))


def two_way_loss(model: TwoWayResolver, batch: PronounBatch) -> torch.Tensor:
    out = model(batch.tokens, batch.lengths, batch.pronoun, batch.nouns)
    return F.cross_entropy(out.logits, batch.labels)


READOUTS = {"word": (PronounResolver, pronoun_loss), "two_way": (TwoWayResolver, two_way_loss)}


def run(readout: str, seed: int, steps: int) -> dict:
    recipe = RECIPES["pronoun"]
    cls, loss_fn = READOUTS[readout]
    torch.manual_seed(seed)
    model = cls(PronounConfig(len(PRONOUN_VOCAB), **recipe.config))
    trainer = TransformerTrainer(model, loss_fn, lr=recipe.lr, warmup_steps=recipe.warmup_steps, seed=seed)
    start = time.perf_counter()
    losses = trainer.fit(batch_fn(recipe), steps)
    seconds = time.perf_counter() - start
    model.load_state_dict({k: v.half().float() for k, v in model.state_dict().items()})  # what would ship
    ev = evaluate_pronoun(model.eval())
    layer, head = ev["best_encoder_head"]
    last = ev["head_agreement"][-1]
    return {
        "readout": readout, "seed": seed, "steps": steps, "train_seconds": round(seconds, 1),
        "final_loss": sum(losses[-20:]) / 20,
        "accuracy": ev["accuracy"],
        "head_agreement": [[round(x, 3) for x in row] for row in ev["head_agreement"]],
        "best_encoder_head": [layer, head],
        "best_encoder_head_fraction": ev["best_encoder_head_fraction"],
        "best_head_referent_weight": ev["best_head_referent_weight"],
        "best_head_other_weight": ev["best_head_other_weight"],
        "last_layer_min_fraction": min(last), "last_layer_max_fraction": max(last),
    }


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[RECIPES["pronoun"].seed, 1, 2])
    ap.add_argument("--steps", type=int, default=RECIPES["pronoun"].steps)
    ap.add_argument("--readouts", nargs="+", default=list(READOUTS), choices=list(READOUTS))
    ap.add_argument("--out", default=str(OUT))
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    runs = []
    for readout in args.readouts:
        for seed in args.seeds:
            r = run(readout, seed, args.steps)
            print(json.dumps({k: r[k] for k in ("readout", "seed", "accuracy", "best_encoder_head",
                                                 "best_encoder_head_fraction", "train_seconds")}), flush=True)
            runs.append(r)
    result = {"command": COMMAND, "recipe": "pronoun", "eval_seed": EVAL_SEED, "torch": str(torch.__version__),
              "threads": 1, "runs": runs}
    Path(args.out).write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

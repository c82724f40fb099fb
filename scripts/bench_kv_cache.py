"""Record the time per generated token with and without a KV cache, for contexts too long to time live.

    python scripts/bench_kv_cache.py            # writes assets/bench/kv_cache.json (a few minutes on one core)
    python scripts/bench_kv_cache.py --quick    # a short run, for checking the script

For each context length n it times the next token: a full forward over n + 1 tokens (no cache) and one decoding
step with n tokens cached (attention_core.labs.kv_cache.time_next_token), best of the repeats, on one thread.
The page "Generating with a KV cache" draws the curve and quotes it with the machine it was measured on.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from attention_core.labs import kv_cache as lab  # noqa: E402
from attention_core.labs.efficiency_bench import machine  # noqa: E402

OUT = lab.BENCH_FILE
SETTINGS = {"layers": 4, "d_model": 256, "num_heads": 8, "num_kv_heads": 2, "repeats": 5, "seed": 0}
CONTEXTS = (64, 128, 256, 512, 1024, 2048, 4096)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="three short contexts, one repeat")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    torch.set_num_threads(1)                         # as the app (app.py): one core per server
    settings = dict(SETTINGS, repeats=1) if args.quick else dict(SETTINGS)
    contexts = CONTEXTS[:3] if args.quick else CONTEXTS
    started = time.perf_counter()
    rows = lab.timing_curve(contexts, **settings)
    doc = {"machine": {**machine(), "threads": torch.get_num_threads(), "load_avg_1min": os.getloadavg()[0]},
           "settings": {**settings, "contexts": list(contexts)},
           "results": [{"context": r.context, "plain_s": r.plain_s, "cached_s": r.cached_s} for r in rows],
           "wall_s": round(time.perf_counter() - started, 1), "date": time.strftime("%Y-%m-%d")}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")
    for r in rows:
        print(f"n={r.context:6d}  no cache {1e3 * r.plain_s:9.2f} ms  cache {1e3 * r.cached_s:7.2f} ms  "
              f"speed-up x{r.plain_s / r.cached_s:.1f}")
    print(f"wrote {args.out} in {doc['wall_s']} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

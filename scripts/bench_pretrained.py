"""The pretrained page's time budgets, measured (not asserted): figures in docs/performance.md, not a unit test.

    python scripts/bench_pretrained.py            # load, 32-token forward, page reruns (AppTest), 5 repeats

1. Loading MiniLM (safetensors + tokenizer.json) once, as a fresh server does.
2. A new sentence of 32 tokens: the library's forward pass alone, and everything the page computes for it
   (``labs.pretrained.sentence_run``: forward, pattern labels of 72 heads, rollout).
Each figure is given as wall time and as this process's CPU time (``time.process_time``): on a shared, loaded
machine the wall time counts the other processes' turns too, the CPU time is what the work itself costs.

3. Script time of a page rerun (AppTest, the router included) after: a changed head, a changed layer, a clicked row
   (``?pt_row=``), and a new 32-token sentence. The median of ``--repeats`` runs, each a new value.
"""
from __future__ import annotations

import argparse
import pathlib
import statistics
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

WORDS = ("the cat sat on a mat while it was raining and the dog barked at every passing car near the old "
         "stone bridge by the quiet river").split()


def text_of(n_tokens: int, salt: int) -> str:
    """An English text of exactly ``n_tokens`` MiniLM tokens ([CLS] and [SEP] included)."""
    words = WORDS[salt % len(WORDS):] + WORDS[:salt % len(WORDS)]
    return " ".join((words * 4)[:n_tokens - 2])


def timed(fn) -> tuple[float, float]:
    """(wall, CPU) seconds of one call. AppTest runs the script in another thread of this process, so the
    process's CPU time covers it."""
    w0, c0 = time.perf_counter(), time.process_time()
    fn()
    return time.perf_counter() - w0, time.process_time() - c0


def report(name: str, runs: list[tuple[float, float]]) -> None:
    wall, cpu = (statistics.median(r[k] for r in runs) for k in (0, 1))
    print(f"{name}: median {1000 * wall:.0f} ms wall, {1000 * cpu:.0f} ms CPU ({len(runs)} runs)")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()

    import torch
    torch.set_num_threads(1)                        # as app.py sets for the server
    from attention_core import pretrained as pt
    from attention_core.labs import pretrained as lab

    t0 = time.perf_counter()
    ck = pt.shipped_minilm()
    print(f"load MiniLM: {1000 * (time.perf_counter() - t0):.0f} ms ({ck.parameters / 1e6:.1f}M parameters)")
    fwd, full = [], []
    for i in range(args.repeats):
        enc = pt.encode(ck.tokenizer, text_of(32, i), 64)
        assert len(enc.ids) == 32, len(enc.ids)
        fwd.append(timed(lambda: pt.forward(ck, enc)))
        full.append(timed(lambda: lab.sentence_run(ck, text_of(32, 100 + i))))
    report("32-token sentence, forward only", fwd)
    report("32-token sentence, sentence_run (forward + 72 pattern labels + rollout)", full)

    from tests.apptest_util import open_page
    at = open_page("pretrained", "en", timeout=120)

    def rerun(change) -> tuple[float, float]:
        change(at)
        elapsed = timed(at.run)
        assert not at.exception, [e.value for e in at.exception]
        return elapsed

    cases = {
        "changed head": lambda i: (lambda a: a.session_state.__setitem__("pt_head", 2 + i % 10)),
        "changed layer": lambda i: (lambda a: a.session_state.__setitem__("pt_layer", 1 + i % 6)),
        "clicked row": lambda i: (lambda a: a.query_params.__setitem__("pt_row", str(1 + i % 12))),
        "new 32-token sentence": lambda i: (lambda a: a.session_state.__setitem__("pt_text", text_of(32, 200 + i))),
    }
    for name, make in cases.items():
        report(f"page rerun, {name}", [rerun(make(i)) for i in range(args.repeats)])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

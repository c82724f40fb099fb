"""A class presses "Train": 30 presses within a minute on one server process, through the training page's
queue (ui/training_queue.py) with real training runs.

    python scripts/bench_training_queue.py                 # 30 presses over 60 s, 250-step runs (several minutes)
    python scripts/bench_training_queue.py --steps 40      # the same class, short runs (about a minute)
    python scripts/bench_training_queue.py --burst         # all 30 presses at the same moment

Each press is a thread that does what the page does: ``submit_training`` (the button), then a status
request every second (the live panel), until its run is done. The class: the first ``--link`` students
open the teacher's link (dates, seed 0) and each types a probe of their own; the others choose a seed of
their own (distinct trainings). Meanwhile another thread sends what a client's "clear cache" message does
(``st.cache_data.clear()``, ``st.cache_resource.clear()``) every half second.

Reported: the time from a press to its first answer (a queue position or a result), the longest wait
before a run starts and until its result (each against the bound the page states), how many trainings
ran for the 30 presses (shared runs), the peak number of trainings at once (the bound: the worker pool),
the process's CPU use while they ran, and the number of cache clears sent.
"""
from __future__ import annotations

import argparse
import pathlib
import random
import statistics
import sys
import threading
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import streamlit as st  # noqa: E402
import streamlit.logger  # noqa: E402
import torch  # noqa: E402

from ui import training_queue as tq  # noqa: E402

MONTHS = ("january", "february", "march", "april", "may", "june", "july", "august", "september", "october",
          "november", "december")


def press(i: int, spec: tq.TrainingSpec, view: tq.View, queue: tq.RunQueue, out: list, poll: float) -> None:
    t0 = time.monotonic()
    ticket = tq.submit_training(spec, view, queue=queue)
    first = time.monotonic() - t0                            # the press's own rerun shows this status
    if ticket is None:
        out.append({"i": i, "full": True, "first": first})
        return
    bound = queue.status(ticket).wait_bound
    started = None
    while True:
        status = queue.status(ticket)
        now = time.monotonic()
        if status.state != "queued" and started is None:
            started = now - t0
        if status.state in ("done", "cancelled", "failed"):
            break
        time.sleep(poll)
    queue.release(ticket)
    out.append({"i": i, "full": False, "first": first, "bound": bound, "start": started if started is not None
                else now - t0, "result": now - t0, "state": status.state, "job": ticket.job.number,
                "steps": len(status.result["losses"]) if status.result else 0})


def clearer(stop: threading.Event, counter: list) -> None:
    while not stop.is_set():
        st.cache_data.clear()
        st.cache_resource.clear()
        counter[0] += 1
        stop.wait(0.5)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--presses", type=int, default=30)
    parser.add_argument("--within", type=float, default=60.0, help="seconds over which the presses arrive")
    parser.add_argument("--burst", action="store_true", help="every press at the same moment")
    parser.add_argument("--link", type=int, default=20, help="students on the teacher's link (same training)")
    parser.add_argument("--steps", type=int, default=250)
    parser.add_argument("--poll", type=float, default=1.0, help="seconds between status requests (the live panel)")
    args = parser.parse_args()

    torch.set_num_threads(1)
    streamlit.logger.set_log_level("error")        # "no runtime found": this is no server, only its queue
    queue = tq.RunQueue()
    rng = random.Random(0)
    presses = []
    for i in range(args.presses):
        if i < args.link:       # the teacher's link, a probe of one's own
            spec = tq.TrainingSpec("dates", True, 0, args.steps, 1e-2, 20)
            probe = f"{MONTHS[i % 12]} {1 + i}, {1990 + i}"
        else:                   # a seed of one's own
            spec = tq.TrainingSpec("dates", True, 100 + i, args.steps, 1e-2, 20)
            probe = "march 5, 2017"
        presses.append((0.0 if args.burst else rng.uniform(0, args.within), spec, tq.View(probe, 25)))
    presses.sort(key=lambda p: p[0])

    out: list[dict] = []
    stop, clears = threading.Event(), [0]
    cleaner = threading.Thread(target=clearer, args=(stop, clears), daemon=True)
    peak = [0]

    def watch_peak() -> None:
        while not stop.is_set():
            peak[0] = max(peak[0], queue.stats()["running"])
            time.sleep(0.01)

    watcher = threading.Thread(target=watch_peak, daemon=True)
    cpu0, wall0 = time.process_time(), time.monotonic()
    cleaner.start()
    watcher.start()
    threads = []
    for i, (at, spec, view) in enumerate(presses):
        time.sleep(max(0.0, at - (time.monotonic() - wall0)))
        th = threading.Thread(target=press, args=(i, spec, view, queue, out, args.poll))
        th.start()
        threads.append(th)
    for th in threads:
        th.join()
    stop.set()
    cpu, wall = time.process_time() - cpu0, time.monotonic() - wall0
    stats = queue.stats()
    queue.close()

    ok = [r for r in out if not r["full"]]
    print(f"{args.presses} presses over {0 if args.burst else args.within:.0f} s ({args.link} on the teacher's link, "
          f"{args.presses - args.link} with their own seed), {args.steps}-step runs, "
          f"{tq.WORKERS} worker, caps {tq.TIME_CAP:.0f} s training / {tq.WALL_CAP:.0f} s per run")
    print(f"  first answer after a press (position or result): max {1000 * max(r['first'] for r in out):.1f} ms")
    print(f"  refused (queue full): {len(out) - len(ok)}")
    if ok:
        over = [r for r in ok if r["start"] > r["bound"] + args.poll + 0.5]
        print(f"  wait before its run started: median {statistics.median(r['start'] for r in ok):.1f} s, "
              f"max {max(r['start'] for r in ok):.1f} s; later than the bound shown at the press: {len(over)}")
        for r in over:
            print(f"    press {r['i']}: bound {r['bound']:.1f} s, started after {r['start']:.1f} s")
        print(f"  press to result: median {statistics.median(r['result'] for r in ok):.1f} s, "
              f"max {max(r['result'] for r in ok):.1f} s; states {sorted({r['state'] for r in ok})}")
        print(f"  largest bound shown at a press: {max(r['bound'] for r in ok):.0f} s")
    print(f"  trainings run for {len(ok)} presses: {stats['started']} (shared: {len({r['job'] for r in ok})} jobs)")
    print(f"  peak trainings at once: {max(peak[0], stats['peak_running'])} (bound {tq.WORKERS}); "
          f"worker threads {stats['workers']}")
    print(f"  cache clears sent meanwhile: {clears[0]}")
    print(f"  CPU: {cpu:.0f} s over {wall:.0f} s wall = {cpu / wall:.2f} cores on average")
    return 0 if max(peak[0], stats["peak_running"]) <= tq.WORKERS else 1


if __name__ == "__main__":
    raise SystemExit(main())

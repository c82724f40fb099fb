"""A class presses "Train": 30 presses within a minute on one server process, through the training page's
queue (serving/training_queue.py) with real training runs.

    python scripts/bench_training_queue.py                 # 30 presses over 60 s, 250-step runs (several minutes)
    python scripts/bench_training_queue.py --steps 40      # the same class, short runs (about a minute)
    python scripts/bench_training_queue.py --burst         # all 30 presses at the same moment
    python scripts/bench_training_queue.py --server 6      # real sessions: `streamlit run` + 6 Chromium tabs

Each press is a thread that does what the page does: ``submit_training`` (the button), then a status
request every second (the live panel), until its run is done. The class: the first ``--link`` students
open the teacher's link (dates, seed 0) and each types a probe of their own; the others choose a seed of
their own (distinct trainings). Meanwhile another thread sends what a client's "clear cache" message does
(``st.cache_data.clear()``, ``st.cache_resource.clear()``) every half second.

Reported: the time from a press to its first answer (a queue position or a result), the longest wait
before a run starts and until its result (each against the bound the page states), how many trainings
ran for the 30 presses (shared runs), the peak number of trainings at once (the bound: the worker pool),
the process's CPU use while they ran, and the number of cache clears sent.

``--server N``: the same over the real protocol (``--app DIR`` serves another checkout, e.g. the commit before
the queue, where the lock lived in ``st.cache_resource``). A ``streamlit run`` server, N headless Chromium tabs on the
training page (each its own seed, so nothing is shared) press Train within a second or two, while a
websocket client sends Streamlit's own ``clear_cache`` message (a BackMsg, as the app menu does) every half
second. Every half second each tab's text is read: a tab showing "Step k of n" has its run in progress.
Reported: each tab's time from the press to its first queue position or progress, the peak number of tabs
with a run in progress at once (the bound: 1), computed from the elapsed seconds each run shows, when each
run was kept, and the server's CPU use, in all and in its busiest threads (every training of the queue runs
in its one worker thread; before it, each ran in the script thread of the session that pressed). With
``--close-first`` the first tab is closed while its run is in progress: how long until the next run starts.
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

from serving import training_queue as tq  # noqa: E402

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


def server_mode(tabs: int, steps: int, chromium: str | None, app: pathlib.Path = ROOT,
                close_first: bool = False) -> int:
    """Real sessions: see the module's docstring."""
    import asyncio
    import os
    import re
    import shutil

    import websockets
    from playwright.sync_api import sync_playwright
    from streamlit.proto.BackMsg_pb2 import BackMsg

    from scripts.server import free_port, start_server

    port = free_port()
    proc = start_server(app, port)
    base = f"http://127.0.0.1:{port}"

    def server_cpu() -> float:
        fields = pathlib.Path(f"/proc/{proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def thread_cpu() -> dict[str, float]:
        """CPU seconds of every thread of the server (a training uses one thread for its whole run)."""
        out = {}
        for task in pathlib.Path(f"/proc/{proc.pid}/task").iterdir():
            try:
                fields = (task / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            out[task.name] = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        return out

    stop, clears = threading.Event(), [0]

    def clear_caches() -> None:                 # a client sending the app menu's "Clear cache" message
        async def run() -> None:
            msg = BackMsg()
            msg.clear_cache = True
            async with websockets.connect(f"ws://localhost:{port}/_stcore/stream", subprotocols=["streamlit"],
                                          max_size=None) as ws:
                while not stop.is_set():
                    await ws.send(msg.SerializeToString())
                    clears[0] += 1
                    try:
                        while True:         # drain what the server sends, without blocking the clears
                            await asyncio.wait_for(ws.recv(), timeout=0.5)
                    except asyncio.TimeoutError:
                        pass
        try:
            asyncio.run(run())
        except (OSError, websockets.exceptions.WebSocketException):
            pass                                # the server stops at the end

    step = re.compile(r"Step \d+ of \d+ · loss [-\d.a-z]+ · ([\d.]+) s")
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=chromium or shutil.which("chromium"),
                                        args=["--no-sandbox", "--disable-gpu", "--no-first-run"])
            pages = []
            for i in range(tabs):
                page = browser.new_page(viewport={"width": 1280, "height": 900})
                page.goto(f"{base}/training?lang=en&task=12345+%E2%86%92+54321&probe_reverse=13579&steps={steps}"
                          f"&every=25&seed={200 + i}")
                page.wait_for_selector("[data-testid='stApp'][data-test-script-state='notRunning']",
                                       timeout=120_000)
                pages.append(page)
            cleaner = threading.Thread(target=clear_caches, daemon=True)
            cleaner.start()
            cpu0, threads0, t0 = server_cpu(), thread_cpu(), time.monotonic()
            pressed, first, kept = {}, {}, {}
            for i, page in enumerate(pages):
                page.get_by_test_id("stBaseButton-primary").click()
                pressed[i] = time.monotonic() - t0
            shown_peak, closed, freed = 0, None, None
            clocks: dict[int, list] = {i: [] for i in range(tabs)}    # (sample time - run's own elapsed time)
            took: dict[int, float] = {}                               # the run's seconds, from its "Done:" line
            while len(kept) + (closed is not None) < tabs and time.monotonic() - t0 < 60 + tabs * tq.WALL_CAP:
                running = []
                for i, page in enumerate(pages):
                    if i in kept or (closed is not None and i == 0):
                        continue
                    text = page.inner_text("[data-testid='stMain']")
                    now = time.monotonic() - t0
                    if i not in first and ("in this server's queue" in text or step.search(text)
                                           or "Building a fresh model" in text):
                        first[i] = now - pressed[i]
                    done = re.search(r"Done: \d+ steps in ([\d.]+) s", text)
                    if done and "Loss of each step" in text:
                        kept[i], took[i] = now, float(done.group(1))
                    elif m := step.search(text):
                        running.append(i)
                        clocks[i].append((now - float(m.group(1)), float(m.group(1))))
                shown_peak = max(shown_peak, len(running))
                if close_first and closed is None and running == [0]:
                    pages[0].close()                  # the learner closes the tab mid-run
                    closed = time.monotonic() - t0
                elif closed is not None and freed is None and running:
                    freed = time.monotonic() - t0 - closed
                time.sleep(0.5)
            cpu, wall = server_cpu() - cpu0, time.monotonic() - t0
            busiest = sorted((v - threads0.get(k, 0.0) for k, v in thread_cpu().items()), reverse=True)[:4]
            stop.set()
            browser.close()
    finally:
        stop.set()
        proc.terminate()
        proc.wait(10)
    print(f"real server, {tabs} Chromium tabs (own seeds), {steps}-step runs, clear_cache sent every 0.5 s")
    print(f"  press to first queue position or progress: max {max(first.values(), default=float('nan')):.1f} s "
          f"({len(first)} of {tabs} tabs)")
    print(f"  runs kept: {len(kept)} of {tabs}, the last after {max(kept.values(), default=float('nan')):.0f} s")
    if close_first:
        print(f"  tab 1 closed mid-run after {closed or float('nan'):.1f} s; the next run showed progress "
              f"{freed if freed is not None else float('nan'):.1f} s later")
    # each run's interval on the server, from its own clock: it started at (sample time - elapsed) at the
    # latest (a text read late only moves that later), and lasted its "Done:" seconds (or the largest elapsed
    # seen); the peak overlap of these intervals, less 1.5 s at each end (a progress line is up to the live
    # panel's 1 s plus one pass over the tabs old when read), is the peak number of trainings at once. Tabs
    # *showing* progress can overlap by the ~1 s a finished run's last progress line stays on screen.
    spans = []
    for i, seen in clocks.items():
        if seen:
            start = min(s for s, _ in seen)
            spans.append((start + 1.5, start + took.get(i, max(e for _, e in seen)) - 1.5))
    edges = sorted([(a, 1) for a, b in spans if b > a] + [(b, -1) for a, b in spans if b > a])
    peak = level = 0
    for _, d in edges:
        level += d
        peak = max(peak, level)
    print(f"  peak trainings at once (from the runs' own clocks): {peak} (bound {tq.WORKERS}); tabs showing "
          f"progress in the same sample: {shown_peak}")
    print(f"  clear_cache messages sent: {clears[0]}")
    print(f"  server CPU: {cpu:.0f} s over {wall:.0f} s = {cpu / wall:.2f} cores; its busiest threads: "
          + ", ".join(f"{x:.1f} s" for x in busiest))
    return 0 if peak <= tq.WORKERS and len(kept) + (closed is not None) == tabs else 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--presses", type=int, default=30)
    parser.add_argument("--within", type=float, default=60.0, help="seconds over which the presses arrive")
    parser.add_argument("--burst", action="store_true", help="every press at the same moment")
    parser.add_argument("--link", type=int, default=20, help="students on the teacher's link (same training)")
    parser.add_argument("--steps", type=int, default=250)
    parser.add_argument("--poll", type=float, default=1.0, help="seconds between status requests (the live panel)")
    parser.add_argument("--server", type=int, default=0, metavar="N", help="real sessions: N Chromium tabs")
    parser.add_argument("--chromium", default=None, help="the Chromium binary (default: chromium on PATH)")
    parser.add_argument("--close-first", action="store_true",
                        help="with --server: close the first tab while its run is in progress")
    parser.add_argument("--app", type=pathlib.Path, default=ROOT,
                        help="with --server: the checkout to serve (e.g. an older commit, for comparison)")
    args = parser.parse_args()
    if args.server:
        return server_mode(args.server, args.steps, args.chromium, args.app, args.close_first)

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

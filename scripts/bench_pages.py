"""Measure every page against the budgets of docs/performance.md.

    python scripts/bench_pages.py              # script time per rerun (AppTest) + peak RSS
    python scripts/bench_pages.py --server     # also: real server, first-page time, RSS with 1 and 10 sessions
    python scripts/bench_pages.py --text       # also: rerun after typing a new sentence (pages with a text box)

Script time: each page is opened at its defaults, then one control is changed back and
forth; the median wall time of ``AppTest.run()`` for those reruns is reported (budget 100 ms). Then
every page with a random seed gets a new, never-used seed on each rerun (nothing cached: the worst case of
a control change).

A server compiles each script once and keeps the bytecode (one ScriptCache per runtime); AppTest
makes a new ScriptCache on every run(), so each rerun also recompiles app.py and the page (20-70 ms
for the long pages). By default the benchmark shares one ScriptCache across runs, as the server does;
``--recompile`` measures AppTest as it comes (compile time included).
"""
from __future__ import annotations

import argparse
import gc
import json
import pathlib
import random
import resource
import shutil
import statistics
import sys
import time
from collections.abc import Callable

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.apptest_util import open_page  # noqa: E402
from ui.registry import available_pages  # noqa: E402

BUDGET_MS = 100
BUDGET_RSS_ONE = 500
BUDGET_RSS_TEN = 700


def _candidates(at):
    """Controls to change, each with a value different from its current one (first that fits)."""
    for kind in ("slider", "number_input", "checkbox", "toggle", "select_slider", "selectbox", "radio"):
        for w in at.get(kind):
            value = w.value
            if kind in ("checkbox", "toggle"):
                yield w, not value
            elif kind in ("slider", "number_input") and isinstance(value, (int, float)):
                step = getattr(w, "step", None) or 1
                hi = getattr(w, "max", None)
                yield w, value + step if hi is None or value + step <= hi else value - step
            elif kind in ("select_slider", "selectbox", "radio"):
                options = list(getattr(w, "options", []))
                if len(options) > 1:
                    yield w, options[1] if str(value) == str(options[0]) else options[0]


def share_script_cache() -> None:
    """Give every AppTest run the same ScriptCache, as a server's runtime does."""
    from streamlit.runtime.scriptrunner.script_cache import ScriptCache
    from streamlit.testing.v1 import app_test, local_script_runner

    shared = ScriptCache()
    app_test.ScriptCache = local_script_runner.ScriptCache = lambda: shared


SCRIPT_MS: list[float] = []


def record_script_time() -> None:
    """Also record the time the ScriptRunner spends running the script (the budget's "script time"; the
    AppTest wall time adds its own message handling, a few ms)."""
    from streamlit.runtime.scriptrunner import script_runner

    run = script_runner.ScriptRunner._run_script

    def timed(self, *args, **kwargs):
        t0 = time.perf_counter()
        try:
            return run(self, *args, **kwargs)
        finally:
            SCRIPT_MS.append((time.perf_counter() - t0) * 1000)

    script_runner.ScriptRunner._run_script = timed


def _script_median(start: int) -> float | None:
    runs = SCRIPT_MS[start:]
    return statistics.median(runs) if runs else None


def time_reruns(key: str, at, repeats: int, change: Callable[[int], object]) -> dict:
    """Rerun ``at`` ``repeats`` times, calling ``change(i)`` (set a widget) before rerun i: median and max AppTest
    wall time, median script time, the page's first exception."""
    times, start = [], len(SCRIPT_MS)
    for i in range(repeats):
        change(i)
        t0 = time.perf_counter()
        at.run()
        times.append((time.perf_counter() - t0) * 1000)
    return {"page": key, "median_ms": statistics.median(times), "script_ms": _script_median(start),
            "max_ms": max(times), "runs": len(times), "exceptions": [e.value for e in at.exception][:1]}


def bench_page(key: str, repeats: int) -> dict:
    """Median script time of reruns that each change one control (alternating two values)."""
    at = open_page(key, "en")
    label = None

    def change(_i: int) -> None:
        nonlocal label
        for widget, new_value in _candidates(at):
            try:
                widget.set_value(new_value)
            except Exception:  # a value this widget type does not take: try the next control
                continue
            label = widget.label
            return

    row = time_reruns(key, at, repeats, change)
    return {**row, "control": label}


def bench_seed(key: str, repeats: int) -> dict | None:
    """Median rerun after setting the page's random seed to a value never used before (every cache misses:
    the page recomputes and redraws everything that depends on the seed). None: the page has no seed."""
    from ui.i18n import catalog
    label = catalog("en")["common.seed"]
    at = open_page(key, "en")
    if not [w for w in at.number_input if w.label == label]:
        return None
    return time_reruns(key, at, repeats,
                       lambda i: next(w for w in at.number_input if w.label == label).set_value(1000 + 37 * i))


SENTENCE_WORDS = "the cat sat on a mat while it was raining and the dog barked at every passing car".split()


def new_sentence(i: int) -> str:
    """Rerun i's text: 6-13 words drawn from SENTENCE_WORDS, a different sentence and length each time."""
    rng = random.Random(i)
    return " ".join(rng.sample(SENTENCE_WORDS, rng.randint(6, 12))) + f" {i}"


def _pronoun_sentence(i: int) -> str:
    a, b = ("animal", "dog", "cat", "horse")[i % 4], ("street", "river", "road", "bridge")[i % 3]
    return f"The {a} didn't cross the {b} because it was too {('tired', 'wide', 'scared', 'long')[i % 4]}."


def _digits(i: int) -> str:
    return "".join(str((7 * k + i) % 10) for k in range(8 + i % 17))


def text_cases() -> list[tuple[str, str, dict, Callable[[int], str]]]:
    """(row name, page, URL params, text of rerun i): every place a learner types text. Pages not listed use
    their first text box at the defaults with ``new_sentence``."""
    from ui.i18n import catalog
    en = catalog("en")
    return [("qkv · tab 3", "qkv", {"tab": en["qkv.tab_tokens"]}, new_sentence),
            ("qkv · tab 4", "qkv", {"tab": en["qkv.tab_similarity"]}, new_sentence),
            ("pronoun · typed", "pronoun", {"src": en["pronoun.src_type"]}, _pronoun_sentence),
            ("bottleneck · own", "bottleneck", {"own": "true"}, _digits)]


def bench_text(key: str, repeats: int, params: dict | None = None,
               text: Callable[[int], str] = new_sentence) -> dict | None:
    """Median rerun after typing a new text into the page's first text box (None: no text box)."""
    at = open_page(key, "en", params)
    if not list(at.text_input) + list(at.text_area):
        return None
    return time_reruns(key, at, repeats, lambda i: (list(at.text_input) + list(at.text_area))[0].set_value(text(i)))


def bench_server(keys: list[str]) -> dict:
    import psutil
    from playwright.sync_api import sync_playwright

    from scripts.server import start_server

    t0 = time.perf_counter()
    proc = start_server(ROOT)                 # returns once /_stcore/health answers
    base = proc.base
    ps = psutil.Process(proc.pid)
    args = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
            "--disable-component-update", "--disable-sync"]
    result = {}
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=shutil.which("chromium"), args=args)
            page = browser.new_page()
            page.goto(base + "/?lang=en")
            page.wait_for_selector("[data-testid='stApp'][data-test-script-state='notRunning']", timeout=60000)
            page.wait_for_selector("h1", timeout=60000)
            result["first_page_s"] = round(time.perf_counter() - t0, 2)
            for key in keys:
                page.goto(f"{base}/{'' if key == 'home' else key}?lang=en")
                page.wait_for_selector("[data-testid='stApp'][data-test-script-state='notRunning']",
                                       timeout=60000)
                page.wait_for_timeout(300)
            result["rss_one_session_all_pages_mb"] = round(ps.memory_info().rss / 2**20, 1)
            pages = []
            for i in range(9):
                pg = browser.new_context().new_page()
                key = keys[i % len(keys)]
                pg.goto(f"{base}/{'' if key == 'home' else key}?lang={'zh' if i % 2 else 'en'}")
                pages.append(pg)
            for pg in pages:
                pg.wait_for_selector("[data-testid='stApp'][data-test-script-state='notRunning']",
                                     timeout=120000)
            time.sleep(1)
            result["rss_ten_sessions_mb"] = round(ps.memory_info().rss / 2**20, 1)
            browser.close()
    finally:
        proc.terminate()
        proc.wait(10)
    return result


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=10)
    ap.add_argument("--server", action="store_true", help="also measure a real server (needs chromium)")
    ap.add_argument("--text", action="store_true", help="also: rerun after typing a new sentence")
    ap.add_argument("--json", type=pathlib.Path)
    ap.add_argument("--recompile", action="store_true",
                    help="recompile the scripts on every rerun (AppTest's default; a server does not)")
    a = ap.parse_args()
    if not a.recompile:
        share_script_cache()
    record_script_time()
    print("script bytecode:", "recompiled every rerun (AppTest default)" if a.recompile
          else "compiled once and reused, as on a server")
    keys = [p.key for p in available_pages()]
    rows = []
    print(f"{'page':18s} {'median ms':>9s} {'script ms':>9s} {'max ms':>7s}  control")
    for key in keys:
        row = bench_page(key, a.repeats)
        gc.collect()
        rows.append(row)
        flag = "" if row["median_ms"] <= BUDGET_MS else "  OVER BUDGET"
        print(f"{key:18s} {row['median_ms']:9.1f} {row['script_ms'] or 0:9.1f} {row['max_ms']:7.1f}  "
              f"{row['control']}{flag}" + (f"  EXCEPTION {row['exceptions']}" if row["exceptions"] else ""))
    print(f"{'page':18s} {'new seed ms':>11s} {'script ms':>9s} {'max ms':>7s}")
    for key in keys:
        row = bench_seed(key, a.repeats)
        if row is None:
            continue
        rows.append({**row, "control": "new seed"})
        flag = "" if row["median_ms"] <= BUDGET_MS else "  OVER BUDGET"
        print(f"{key:18s} {row['median_ms']:11.1f} {row['script_ms'] or 0:9.1f} {row['max_ms']:7.1f}{flag}"
              + (f"  EXCEPTION {row['exceptions']}" if row["exceptions"] else ""))
    if a.text:
        print(f"{'page':18s} {'new text ms':>11s} {'script ms':>9s} {'max ms':>7s}")
        cases = [(key, key, None, new_sentence) for key in keys] + text_cases()
        for name, key, params, text in cases:
            if key not in keys:
                continue
            row = bench_text(key, a.repeats, params, text)
            if row is None:
                continue
            rows.append({**row, "page": name, "control": "new text"})
            flag = "" if row["median_ms"] <= BUDGET_MS else "  OVER BUDGET"
            print(f"{name:18s} {row['median_ms']:11.1f} {row['script_ms'] or 0:9.1f} {row['max_ms']:7.1f}{flag}"
                  + (f"  EXCEPTION {row['exceptions']}" if row["exceptions"] else ""))
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"peak RSS of this benchmark process (AppTest, every page's caches): {peak:.0f} MB; "
          f"the budget ({BUDGET_RSS_ONE} MB) is the server's, measured with --server")
    out = {"pages": rows, "apptest_peak_rss_mb": round(peak, 1), "budget_ms": BUDGET_MS,
           "recompile": a.recompile}
    if a.server:
        srv = bench_server(keys)
        out["server"] = srv
        print(f"server: first page in {srv['first_page_s']} s (budget 5 s); RSS after all pages "
              f"{srv['rss_one_session_all_pages_mb']} MB (budget {BUDGET_RSS_ONE}); ten sessions "
              f"{srv['rss_ten_sessions_mb']} MB (budget {BUDGET_RSS_TEN})")
    if a.json:
        a.json.write_text(json.dumps(out, indent=2))
    over = [r for r in rows if r["median_ms"] > BUDGET_MS or r["exceptions"]]
    return 1 if over else 0


if __name__ == "__main__":
    sys.exit(main())

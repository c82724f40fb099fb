"""Measure what efficient attention buys: time and peak memory against sequence length n.

    python -m attention_core.labs.efficiency_bench                 # full run, writes assets/bench/efficient.json
    python -m attention_core.labs.efficiency_bench --quick         # n <= 2048, a smoke test
    python -m attention_core.labs.efficiency_bench --max-n 4096 --repeats 5 --out /tmp/bench.json

Every (method, n) runs in a fresh subprocess (so one call's allocations cannot hide another's):
inputs are made first, then the kernel peak-RSS counter is reset (``/proc/self/clear_refs``) and
the call's *peak extra memory* is VmHWM after the call minus VmRSS before it; then the call is
timed ``repeats`` times (more if it is fast) and the median process CPU time kept (the wall time
too: on a shared CPU it is inflated by other jobs). Full softmax attention is the
baseline of the same run; log-log slopes of time and memory against n are fitted over the upper
part of the range, where constant overheads no longer dominate. ``lra_reference`` and
``measured_ratios`` put our ratios beside the published Long Range Arena table (Tay et al. 2021).
"""
from __future__ import annotations

import argparse
import csv
import gc
import json
import math
import os
import platform
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import NamedTuple

import torch

# name -> (theory slope of time, theory slope of memory, what is measured)
METHODS: dict[str, tuple[float, float, str]] = {
    "full": (2.0, 2.0, ("softmax(QK^T/sqrt d) V with the n x n matrix "
                       "(functional.scaled_dot_product_attention)")),
    "linear": (1.0, 1.0, "efficient.linear_attention, elu+1 features, non-causal"),
    "performer": (1.0, 1.0, "efficient.performer_attention, m = 256 orthogonal random features"),
    "linformer": (1.0, 1.0, "efficient.linformer_attention, k_proj = 256"),
    "window": (1.0, 1.0, ("efficient.sliding_window_attention, |i-j| <= 64 (129 keys per query), "
                         "banded O(n w)")),
    "flash": (2.0, 1.0, "efficient.flash_attention, block_q = block_k = 128, tiles in Python"),
    "sparse_masked": (2.0, 2.0, "efficient.sparse_attention with a dense local_mask(n, 64): the O(n^2) way"),
    "torch_sdpa": (2.0, 1.0, ("torch.nn.functional.scaled_dot_product_attention (fused C++ kernel), "
                             "for context")),
}
PERFORMER_M, LINFORMER_K, WINDOW, FLASH_BLOCK = 256, 256, 64, 128
SIZES = [256, 512, 1024, 2048, 4096, 8192, 16384]
MAX_N = {"sparse_masked": 4096}        # shown to make a point, not to burn minutes
DEFAULT_OUT = Path(__file__).resolve().parents[2] / "assets" / "bench" / "efficient.json"


# ----------------------------------------------------------------------------------------------
# one measurement (runs inside the subprocess)

def _make_call(method: str, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, seed: int = 0):
    """Return a zero-argument callable; parameters (projections) are built here, outside the measurement."""
    from .. import efficient, masks
    from ..functional import scaled_dot_product_attention

    n, d = q.size(-2), q.size(-1)
    g = torch.Generator().manual_seed(seed + 1)
    if method == "full":
        return lambda: scaled_dot_product_attention(q, k, v).output
    if method == "linear":
        return lambda: efficient.linear_attention(q, k, v).output
    if method == "performer":
        proj = efficient.orthogonal_random_features(PERFORMER_M, d, g)
        return lambda: efficient.performer_attention(q, k, v, proj).output
    if method == "linformer":
        E = torch.randn(LINFORMER_K, n, generator=g) / math.sqrt(n)
        F = torch.randn(LINFORMER_K, n, generator=g) / math.sqrt(n)
        return lambda: efficient.linformer_attention(q, k, v, E, F).output
    if method == "window":
        return lambda: efficient.sliding_window_attention(q, k, v, WINDOW).output
    if method == "flash":
        return lambda: efficient.flash_attention(q, k, v, block_q=FLASH_BLOCK, block_k=FLASH_BLOCK).output
    if method == "sparse_masked":
        return lambda: efficient.sparse_attention(q, k, v, masks.local_mask(n, WINDOW)).output
    if method == "torch_sdpa":
        return lambda: torch.nn.functional.scaled_dot_product_attention(q, k, v)
    raise ValueError(f"unknown method {method!r}")


def _proc_status() -> tuple[int, int]:
    """(VmRSS, VmHWM) of this process in bytes."""
    text = Path("/proc/self/status").read_text()
    rss = int(re.search(r"VmRSS:\s+(\d+)", text).group(1)) * 1024
    hwm = int(re.search(r"VmHWM:\s+(\d+)", text).group(1)) * 1024
    return rss, hwm


def _reset_peak() -> bool:
    try:
        Path("/proc/self/clear_refs").write_text("5")     # Linux: reset VmHWM to the current RSS
        return True
    except OSError:
        return False


def measure(method: str, n: int, d: int = 64, repeats: int = 3, min_time: float = 0.3, seed: int = 0) -> dict:
    """Peak extra memory of one call and the median time of ``repeats`` or more calls, at (1, 1, n, d)."""
    from ..efficient import relative_error

    g = torch.Generator().manual_seed(seed)
    q, k, v = (torch.randn(1, 1, n, d, generator=g) for _ in range(3))
    small = _make_call(method, q[..., :128, :], k[..., :128, :], v[..., :128, :], seed)
    small()                                               # warm up code paths, not counted
    call = _make_call(method, q, k, v, seed)
    gc.collect()
    rss_before, hwm_before = _proc_status()
    reset_ok = _reset_peak()
    t0 = time.perf_counter()
    out = call()
    first = time.perf_counter() - t0
    _, hwm_after = _proc_status()
    if reset_ok:
        extra = hwm_after - rss_before
    else:   # fall back: only meaningful if the call set a new process-wide peak
        extra = hwm_after - rss_before if hwm_after > hwm_before else None
    exact = torch.nn.functional.scaled_dot_product_attention(q, k, v)
    err = relative_error(out, exact)
    max_abs = (out - exact).abs().max().item()
    del out, exact
    gc.collect()
    walls, cpus = [], []
    t_start = time.perf_counter()
    while len(walls) < repeats or (time.perf_counter() - t_start < min_time and len(walls) < 50):
        t0, c0 = time.perf_counter(), time.process_time()
        call()
        cpus.append(time.process_time() - c0)
        walls.append(time.perf_counter() - t0)
    return {
        "method": method, "n": n, "d": d,
        "time_s": statistics.median(cpus), "wall_time_s": statistics.median(walls), "repeats": len(walls),
        "time_min_s": min(cpus), "first_call_wall_s": first,
        "peak_extra_bytes": extra, "rss_before_bytes": rss_before,
        "peak_reset": reset_ok,
        "relative_error_vs_exact": err, "max_abs_diff_vs_exact": max_abs,
    }


# ----------------------------------------------------------------------------------------------
# the driver

def machine() -> dict:
    cpu = platform.processor() or ""
    try:
        m = re.search(r"model name\s*:\s*(.+)", Path("/proc/cpuinfo").read_text())
        cpu = m.group(1).strip() if m else cpu
    except OSError:
        pass
    mem = None
    try:
        m = re.search(r"MemTotal:\s+(\d+)", Path("/proc/meminfo").read_text())
        mem = int(m.group(1)) * 1024 if m else None
    except OSError:
        pass
    return {
        "cpu": cpu, "logical_cores": os.cpu_count(), "memory_bytes": mem,
        "platform": platform.platform(), "python": platform.python_version(),
        "torch": torch.__version__,
    }


def _mem_available() -> int | None:
    try:
        m = re.search(r"MemAvailable:\s+(\d+)", Path("/proc/meminfo").read_text())
        return int(m.group(1)) * 1024 if m else None
    except OSError:
        return None


def fit_slope(ns: list[float], ys: list[float]) -> float | None:
    """Least-squares slope of log y against log n (None with fewer than two positive points)."""
    pts = [(math.log(n), math.log(y)) for n, y in zip(ns, ys) if y is not None and y > 0]
    if len(pts) < 2:
        return None
    mx = sum(x for x, _ in pts) / len(pts)
    my = sum(y for _, y in pts) / len(pts)
    sxx = sum((x - mx) ** 2 for x, _ in pts)
    return sum((x - mx) * (y - my) for x, y in pts) / sxx if sxx else None


def _run_one(method: str, n: int, args, timeout: float) -> dict:
    cmd = [sys.executable, "-m", "attention_core.labs.efficiency_bench", "--worker", method, str(n),
           "--repeats", str(args.repeats), "--threads", str(args.threads)]
    try:
        proc = subprocess.run(cmd, check=False, capture_output=True, text=True, timeout=timeout,
                              cwd=Path(__file__).resolve().parents[2])
    except subprocess.TimeoutExpired:
        return {"method": method, "n": n, "skipped": f"timed out after {timeout:.0f} s"}
    if proc.returncode != 0:
        tail = proc.stderr.strip().splitlines()[-1:] or ["?"]
        return {"method": method, "n": n, "skipped": f"worker failed: {tail[0]}"}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def run(sizes: list[int], methods: list[str], args) -> dict:
    results, budget = [], args.budget
    stop: dict[str, str] = {}
    available = _mem_available()
    started = time.perf_counter()
    for n in sizes:
        for method in methods:
            t_slope, m_slope, _ = METHODS[method]
            reason = stop.get(method)
            if reason is None and n > MAX_N.get(method, math.inf):
                reason = f"not run above n = {MAX_N[method]} (costs as much as full attention)"
            prev = [r for r in results if r["method"] == method and r.get("time_s")]
            if reason is None and prev:
                p = prev[-1]
                scale = n / p["n"]
                t_pred = p["wall_time_s"] * scale ** t_slope * (args.repeats + 2)
                m_pred = (p["peak_extra_bytes"] or 0) * scale ** m_slope
                if t_pred > budget:
                    reason = f"predicted {t_pred:.0f} s for {args.repeats} repeats > budget {budget:.0f} s"
                elif available and m_pred > 0.5 * available:
                    reason = f"predicted peak {m_pred / 2**30:.1f} GiB > half the available memory"
            if reason:
                stop[method] = reason
                results.append({"method": method, "n": n, "skipped": reason, "time_s": None,
                                "peak_extra_bytes": None})
                print(f"{method:>13} n={n:>6}  skipped: {reason}", flush=True)
                continue
            r = _run_one(method, n, args, timeout=3 * budget)
            results.append(r)
            if "skipped" in r:
                stop[method] = r["skipped"]
                r.setdefault("time_s", None), r.setdefault("peak_extra_bytes", None)
                print(f"{method:>13} n={n:>6}  {r['skipped']}", flush=True)
            else:
                mib = (r["peak_extra_bytes"] or 0) / 2**20
                print(f"{method:>13} n={n:>6}  cpu {r['time_s'] * 1e3:10.2f} ms  "
                      f"wall {r['wall_time_s'] * 1e3:10.2f} ms  {mib:9.2f} MiB  "
                      f"err {r['relative_error_vs_exact']:.2e}", flush=True)
    return {"results": results, "wall_s": time.perf_counter() - started}


def summarise(results: list[dict], fit_points: int = 4) -> dict:
    """Slopes (over the largest ``fit_points`` measured n of each method) and ratios against full."""
    slopes = {}
    for method in dict.fromkeys(r["method"] for r in results):
        rows = [r for r in results if r["method"] == method and r.get("time_s")]
        rows = sorted(rows, key=lambda r: r["n"])[-fit_points:]
        ns = [r["n"] for r in rows]
        t_theory, m_theory, _ = METHODS.get(method, (None, None, ""))
        t = fit_slope(ns, [r["time_s"] for r in rows])
        w = fit_slope(ns, [r.get("wall_time_s") for r in rows])
        m = fit_slope(ns, [r["peak_extra_bytes"] for r in rows])
        slopes[method] = {
            "fit_range": [ns[0], ns[-1]] if ns else None, "points": len(ns),
            "time_slope": t, "time_slope_theory": t_theory,
            "time_slope_ok": None if t is None else abs(t - t_theory) <= 0.25,
            "wall_time_slope": w,
            "memory_slope": m, "memory_slope_theory": m_theory,
            "memory_slope_ok": None if m is None else abs(m - m_theory) <= 0.25,
        }
    return slopes


def targets(results: list[dict], slopes: dict) -> dict:
    by = {(r["method"], r["n"]): r for r in results if r.get("time_s")}
    out = {}
    f, lin = by.get(("full", 16384)), by.get(("linear", 16384))
    value = f["time_s"] / lin["time_s"] if f and lin else None
    out["linear_speedup_at_16384"] = {
        "target": ">= 10 (CPU time)", "value": value, "met": None if value is None else value >= 10,
        "value_wall_time": (f["wall_time_s"] / lin["wall_time_s"]
                            if f and lin and "wall_time_s" in f else None),
    }
    f8, fl8 = by.get(("full", 8192)), by.get(("flash", 8192))
    ratio = (fl8["peak_extra_bytes"] / f8["peak_extra_bytes"]
             if f8 and fl8 and f8["peak_extra_bytes"] and fl8["peak_extra_bytes"] is not None else None)
    out["flash_memory_ratio_at_8192"] = {
        "target": "<= 1/8 of full, same output", "value": ratio,
        "flash_max_abs_diff_vs_exact": fl8["max_abs_diff_vs_exact"] if fl8 else None,
        "met": None if ratio is None else (ratio <= 1 / 8 and fl8["max_abs_diff_vs_exact"] < 1e-5),
    }
    out["time_slopes_within_0.25"] = {
        m: {"slope": s["time_slope"], "theory": s["time_slope_theory"], "met": s["time_slope_ok"]}
        for m, s in slopes.items() if m in ("full", "flash", "linear", "performer", "linformer", "window")
    }
    return out


# ----------------------------------------------------------------------------------------------
# the published table, side by side

def lra_reference(path: str | os.PathLike) -> list[dict]:
    """Read the Long Range Arena Table 2 CSV into plain records (comment lines start with '#')."""
    with open(path, newline="", encoding="utf-8") as fh:
        lines = [line for line in fh if line.strip() and not line.lstrip().startswith("#")]
    rows = []
    for rec in csv.DictReader(lines):
        rows.append({
            "model": rec["model"].strip(), "seq_len": int(rec["seq_len"]),
            "steps_per_sec": float(rec["steps_per_sec"]), "speed_ratio": float(rec["speed_ratio"]),
            "peak_memory_gb": float(rec["peak_memory_gb"]),
        })
    return rows


def measured_ratios(bench_json: dict | str | os.PathLike, n_values) -> list[dict]:
    """Our speed-up (time_full / time_method) and memory ratio (mem_method / mem_full) at the same n.

    ``bench_json``: the dict written by this module, or a path to it. Only (method, n) pairs measured
    together with full attention appear.
    """
    if not isinstance(bench_json, dict):
        bench_json = json.loads(Path(bench_json).read_text(encoding="utf-8"))
    measured = [r for r in bench_json["results"] if r.get("time_s")]
    full = {r["n"]: r for r in measured if r["method"] == "full"}
    out = []
    for r in measured:
        f = full.get(r["n"])
        if r["n"] not in n_values or f is None:
            continue
        mem = (r["peak_extra_bytes"] / f["peak_extra_bytes"]
               if r.get("peak_extra_bytes") is not None and f.get("peak_extra_bytes") else None)
        out.append({"method": r["method"], "n": r["n"], "speed_ratio": f["time_s"] / r["time_s"],
                    "memory_ratio": mem})
    return out


def by_method(doc: dict) -> dict[tuple[str, int], dict]:
    """The timed results of a recorded run, keyed by (method, n)."""
    return {(r["method"], r["n"]): r for r in doc["results"] if r.get("time_s")}


def nearest_size(by: dict, methods, preferred: int, field: str = "time_s") -> int | None:
    """The measured n closest to ``preferred`` (on a log scale, the larger on a tie) at which every one of
    ``methods`` has ``field``: the page quotes sizes found in the data, so a run with other sizes still reads."""
    sizes = [n for n in {n for _, n in by} if all(by.get((m, n), {}).get(field) for m in methods)]
    return min(sizes, key=lambda n: (abs(math.log(n / preferred)), -n)) if sizes else None


class QuotedSizes(NamedTuple):
    """The sizes at which the efficiency page quotes the recorded run (each the measured n nearest the one
    wanted; None where nothing fits)."""

    top: int | None                  # full vs linear speed-up (wanted: the largest n, 16384)
    memory: int | None               # full vs flash peak memory (wanted: 8192)
    masked: int | None               # dense-masked sparse vs the banded window (wanted: 4096)
    doubling: tuple[int, int] | None  # the exercise: n and 2n, both timed for full and linear (4096, 8192)
    memory_rows: tuple[int, ...]     # full vs flash memory, the four largest sizes measured for both


def quoted_sizes(doc: dict) -> QuotedSizes:
    by = by_method(doc)
    largest = max((n for m, n in by if m == "full"), default=16384)
    pairs = [n for n in sorted({n for _, n in by}) if nearest_size(by, ("full", "linear"), n) == n
             and nearest_size(by, ("full", "linear"), 2 * n) == 2 * n]
    doubling = min(pairs, key=lambda n: (abs(math.log(n / 4096)), -n), default=None)
    both_memory = sorted(n for n in {n for _, n in by}
                         if nearest_size(by, ("full", "flash"), n, "peak_extra_bytes") == n)
    return QuotedSizes(nearest_size(by, ("full", "linear"), largest),
                       nearest_size(by, ("full", "flash"), 8192, "peak_extra_bytes"),
                       nearest_size(by, ("sparse_masked", "window"), 4096),
                       None if doubling is None else (doubling, 2 * doubling), tuple(both_memory[-4:]))


def doubling_ratios(doc: dict) -> tuple[int, int, dict[str, float]] | None:
    """The exercise's answer: n, 2n (``quoted_sizes``) and time(2n) / time(n) of full and linear attention."""
    sizes = quoted_sizes(doc).doubling
    if sizes is None:
        return None
    by, (a, b) = by_method(doc), sizes
    return a, b, {m: by[(m, b)]["time_s"] / by[(m, a)]["time_s"] for m in ("full", "linear")}


# ----------------------------------------------------------------------------------------------

def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="n <= 2048, fewer repeats")
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT)
    ap.add_argument("--max-n", type=int, default=SIZES[-1])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, default=1, help="torch threads in each measurement")
    ap.add_argument("--budget", type=float, default=240.0, help="wall seconds allowed per (method, n)")
    ap.add_argument("--methods", nargs="+", default=list(METHODS), choices=list(METHODS))
    ap.add_argument("--resummarise", type=Path, metavar="JSON",
                    help="recompute slopes and targets of an existing result file (no new measurements)")
    ap.add_argument("--worker", nargs=2, metavar=("METHOD", "N"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)

    if args.worker:
        print(json.dumps(measure(args.worker[0], int(args.worker[1]), repeats=args.repeats)))
        return 0

    if args.resummarise:
        doc = json.loads(args.resummarise.read_text(encoding="utf-8"))
        doc["slopes"] = summarise(doc["results"])
        doc["targets"] = targets(doc["results"], doc["slopes"])
        doc["resummarised"] = "slopes and targets recomputed from the stored results by --resummarise"
        args.resummarise.write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")
        print(json.dumps({"slopes": doc["slopes"], "targets": doc["targets"]}, indent=1))
        return 0

    max_n = min(args.max_n, 2048) if args.quick else args.max_n
    if args.quick:
        args.repeats, args.budget = min(args.repeats, 2), min(args.budget, 10.0)
    sizes = [n for n in SIZES if n <= max_n]
    info = machine()
    info["torch_threads"] = args.threads
    info["load_average_at_start"] = os.getloadavg()
    print(f"{info['cpu']}, {info['logical_cores']} cores, torch {info['torch']}, {args.threads} thread(s)")
    measured = run(sizes, args.methods, args)
    slopes = summarise(measured["results"])
    doc = {
        "about": "Time and peak extra memory of one attention call, batch 1, 1 head, d = 64, float32, CPU.",
        "machine": info,
        "settings": {
            "sizes": sizes, "d": 64, "batch": 1, "heads": 1, "dtype": "float32",
            "repeats_min": args.repeats, "quick": args.quick, "budget_s_per_call": args.budget,
            "performer_m": PERFORMER_M, "linformer_k": LINFORMER_K, "window": WINDOW,
            "flash_block": FLASH_BLOCK,
        },
        "methods": {m: METHODS[m][2] for m in args.methods},
        "timing_method": (
            "each (method, n) in a fresh subprocess; one warm-up call at n = 128; time_s is the median "
            "*process CPU time* (user + sys, time.process_time) of >= repeats calls (more until 0.3 s of "
            "wall time elapsed, at most 50), wall_time_s the median wall time. The 2-core CPU is shared "
            "with other jobs (load average recorded), which inflates wall time unevenly; CPU time with 1 "
            "torch thread is the work the call does, so slopes, ratios and targets use it. sys time "
            "includes the page faults of fresh allocations (e.g. the n x n matrices of full attention), an "
            "honest part of the O(n^2) cost"),
        "memory_method": ("peak_extra_bytes = VmHWM after the first full-size call minus VmRSS right before "
                          "it, with VmHWM reset via /proc/self/clear_refs just before the call; inputs and "
                          "parameters (projections) exist before and are not counted, the output is"),
        "slope_fit": "least squares of log(y) on log(n) over the largest 4 measured n of each method",
        "results": measured["results"],
        "slopes": slopes,
        "targets": targets(measured["results"], slopes),
        "wall_s": measured["wall_s"],
        "load_average_at_end": os.getloadavg(),
        "note_on_errors": (
            "relative_error_vs_exact is measured on i.i.d. N(0, 1) inputs, where exact attention averages "
            "many random values (a small output), so the approximations' relative errors are large and say "
            "little about quality on trained models; it is recorded to show that full, flash and torch_sdpa"
            " agree (flash: max_abs_diff_vs_exact)"),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")
    print(json.dumps({"slopes": slopes, "targets": doc["targets"]}, indent=1))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""The byte-budgeted caches of serving/cache.py and the bounded-memory head classifier (one server within 700 MB,
docs/performance.md).

Runtime: about 5 s (one subprocess measures the classifier's peak memory at 32 heads x 64 tokens).
"""
from __future__ import annotations

import copy
import pickle
import random
import subprocess
import sys
import textwrap
import threading

import numpy as np
import pandas as pd
import pytest
import torch

from attention_core import analysis as an
from serving import cache as uc
from tests.conftest import ROOT

# ---------------------------------------------------------------------------------------------
# the LRU and its budgets
# ---------------------------------------------------------------------------------------------


def fresh(max_bytes: int, global_bytes: int = 10**9, **kw) -> uc.ByteBudgetCache:
    return uc.ByteBudgetCache("test", max_bytes, budget=uc._Budget(global_bytes), **kw)


def test_eviction_is_by_bytes_least_recently_used_first():
    c = fresh(1000)
    c.put("a", "A", 400)
    c.put("b", "B", 400)
    assert c.get("a") == "A"                 # "a" is now the most recently used
    c.put("c", "C", 400)                     # 1200 > 1000: the least recently used ("b") goes
    assert c.get("b", None) is None and c.get("a") == "A" and c.get("c") == "C"
    assert c.total == 800
    c.put("big", "X", 900)                   # needs room for 900: both others go
    assert list(c.entries) == ["big"] and c.total == 900
    # many small entries fit where one large did not: bytes count, not entries
    for i in range(50):
        c.put(i, i, 10)
    assert len(c) == 50 and c.total == 500


def test_an_entry_larger_than_the_budget_is_returned_but_not_kept():
    c = fresh(100)
    c.put("small", 1, 60)
    assert c.put("huge", 2, 101) is False
    assert c.get("huge", None) is None and c.get("small") == 1 and c.total == 60
    value, hit = c.get_or_compute("k", lambda: ("value", "kept", 500))
    assert (value, hit) == ("value", False) and c.get("k", None) is None


def test_budgets_hold_after_every_operation_per_cache_and_global():
    budget = uc._Budget(5000)
    caches = [uc.ByteBudgetCache(f"c{i}", 2000, budget=budget) for i in range(4)]
    rng = random.Random(0)
    for step in range(3000):
        c = rng.choice(caches)
        if rng.random() < 0.3:
            c.get(rng.randrange(40))
        else:
            c.put(rng.randrange(40), step, rng.randrange(1, 900))
        for x in caches:
            assert x.total == sum(size for _, size, _ in x.entries.values()) <= x.max_bytes
        assert budget.total <= budget.max_bytes
    assert sum(len(x) for x in caches) > 4   # the budgets held without emptying everything


def test_the_global_budget_evicts_the_least_recently_used_entry_of_any_cache():
    budget = uc._Budget(1000)
    a, b = uc.ByteBudgetCache("a", 1000, budget=budget), uc.ByteBudgetCache("b", 1000, budget=budget)
    a.put("a1", 1, 300)
    b.put("b1", 1, 300)
    a.put("a2", 1, 300)
    b.get("b1")
    a.get("a2")
    b.put("b2", 1, 300)                      # 1200 > 1000: "a1" is the oldest of all
    assert list(a.entries) == ["a2"] and list(b.entries) == ["b1", "b2"] and budget.total == 900


def test_max_entries_also_bounds_a_cache():
    c = fresh(10**6, max_entries=3)
    for i in range(10):
        c.put(i, i, 1)
    assert list(c.entries) == [7, 8, 9]


# ---------------------------------------------------------------------------------------------
# the decorators
# ---------------------------------------------------------------------------------------------


def test_shared_results_are_read_only_and_copies_of_them_are_not():
    calls = []

    @uc.shared_arrays(max_bytes=10**6)
    def compute(n: int) -> dict:
        calls.append(n)
        return {"w": np.arange(n, dtype=np.float32), "rows": [[1, 2], [3]], "meta": {"n": n}, "pair": (np.ones(2), [0])}

    r = compute(4)
    assert compute(4) is r and calls == [4]            # one shared object, computed once
    with pytest.raises(ValueError):
        r["w"][0] = 99.0                               # numpy: read-only
    for mutate in (lambda: r.__setitem__("w", None), lambda: r.pop("w"), lambda: r.update(x=1),
                   lambda: r["rows"].append(1), lambda: r["rows"][0].__setitem__(0, 9), lambda: r["meta"].clear(),
                   lambda: r["pair"][1].append(1), lambda: r.setdefault("z", 1)):
        with pytest.raises(TypeError, match="read-only"):
            mutate()
    with pytest.raises(ValueError):
        r["pair"][0][0] = 5.0
    assert compute(4)["w"].tolist() == [0, 1, 2, 3] and compute(4)["rows"] == [[1, 2], [3]]
    # a copy is an ordinary, mutable dict (as pages do before handing a spec to Streamlit)
    for c in (dict(r), copy.copy(r), copy.deepcopy(r), pickle.loads(pickle.dumps(r))):
        assert type(c) is dict
        c["new"] = 1
    deep = copy.deepcopy(r)
    assert type(deep["rows"]) is list and type(deep["meta"]) is dict
    deep["rows"].append([4])
    assert compute(4)["rows"] == [[1, 2], [3]] and "new" not in compute(4)


def test_cache_data_gives_every_caller_its_own_copy():
    @uc.cache_data(max_bytes=10**6)
    def compute(n: int) -> dict:
        return {"x": np.zeros(n), "l": [1]}

    a = compute(3)
    a["x"][0] = 7.0
    a["l"].append(2)
    b = compute(3)
    assert b["x"].tolist() == [0.0, 0.0, 0.0] and b["l"] == [1] and b is not a
    assert compute.cache.total == len(pickle.dumps({"x": np.zeros(3), "l": [1]}, protocol=pickle.HIGHEST_PROTOCOL))


def test_keys_are_argument_values_and_underscore_arguments_are_not_hashed():
    calls = []

    @uc.shared_arrays(max_bytes=10**6)
    def f(a, b=2, _build=None):
        calls.append((a, b))
        return a

    f(1)
    f(1, 2)
    f(a=1, b=2, _build=object())                       # same values, another builder: a hit
    f(1.0)                                             # 1.0 is not 1 (st.cache_data hashes types too)
    f(np.arange(3))
    f(np.arange(3))                                    # equal arrays: a hit
    f(np.arange(3) + 1)
    f([1, {"x": 2}])
    f([1, {"x": 2}])
    assert len(calls) == 5


def test_a_page_script_run_again_finds_its_cache():
    """Streamlit executes a page file anew on every rerun, redefining its functions: the cache must survive."""
    source = textwrap.dedent("""
        from serving.cache import MB, cache_data
        CALLS = []
        @cache_data(max_bytes=1 * MB)
        def f(n):
            CALLS.append(n)
            return list(range(n))
        f(5)
    """)
    code = compile(source, str(ROOT / "app_pages" / "_rerun_probe.py"), "exec")
    runs = [{} for _ in range(3)]
    for ns in runs:
        exec(code, ns)
    assert [len(ns["CALLS"]) for ns in runs] == [1, 0, 0]
    assert runs[0]["f"].cache is runs[2]["f"].cache


def test_concurrent_sessions_compute_once_and_keep_the_budget():
    calls = []
    started = threading.Event()

    @uc.shared_arrays(max_bytes=64 * 1024)
    def slow(i: int) -> np.ndarray:
        calls.append(i)
        started.wait(0.05)
        return np.full(1024, i, dtype=np.float64)      # 8 KB each: 7 fit in the budget

    errors, results = [], {}

    def session(tid: int) -> None:
        rng = random.Random(tid)
        try:
            for _ in range(200):
                i = rng.randrange(12)
                out = slow(i)
                assert out[0] == i and not out.flags.writeable
                results.setdefault(i, set()).add(id(out))
                c = slow.cache
                assert c.total <= c.max_bytes
        except Exception as e:                          # reported below, with the thread's failure
            errors.append(e)

    # the same key from 8 threads at once: one computation
    threads = [threading.Thread(target=slow, args=(99,)) for _ in range(8)]
    for t in threads:
        t.start()
    started.set()
    for t in threads:
        t.join(10)
    assert calls.count(99) == 1
    threads = [threading.Thread(target=session, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors, errors[:3]
    c = slow.cache
    assert c.total == sum(size for _, size, _ in c.entries.values()) <= c.max_bytes
    assert len(c) <= 7


def test_nbytes_counts_buffers():
    a = np.zeros((100, 100))
    assert 80_000 <= uc.nbytes(a) < 81_000
    assert uc.nbytes([a, a]) < 81_000 + 200                       # the same array counts once
    assert uc.nbytes(a[:10]) >= 80_000                            # a view keeps its whole base alive
    assert uc.nbytes(torch.zeros(1000)) >= 4000
    layer = torch.nn.Linear(100, 100)                             # a module: its parameters and buffers
    assert 40_400 <= uc.nbytes(layer) < 40_400 + 5_000
    assert uc.nbytes({"a": layer, "b": layer}) < 40_400 + 6_000   # shared, counted once
    frame = pd.DataFrame({"token": ["word"] * 1000, "w": np.zeros(1000)})
    assert uc.nbytes({"datasets": {"data": frame}}) >= frame.memory_usage(deep=True).sum() >= 8000 + 4000


def test_every_page_cache_has_a_byte_budget_and_the_total_is_bounded():
    """No page (nor its sections' module, ui/<page>_sections.py) keeps results in Streamlit's entry-count caches ;
    the budgets of serving.cache hold the total (README, "Memory")."""
    for path in sorted((ROOT / "app_pages").glob("*.py")) + sorted((ROOT / "ui").glob("*_sections.py")):
        if path.stem == "home":
            continue
        text = path.read_text(encoding="utf-8")
        assert "st.cache_data" not in text and "st.cache_resource" not in text, path.name
    assert uc.BUDGET.max_bytes <= 32 * uc.MB
    from ui import charts
    assert isinstance(charts.SKELETONS, uc.ByteBudgetCache) and charts.SKELETONS.max_bytes <= 8 * uc.MB


# ---------------------------------------------------------------------------------------------
# the head classifier: float32, chunked, equal to the float64 definition
# ---------------------------------------------------------------------------------------------


def scores_float64(weights: torch.Tensor) -> torch.Tensor:
    """The classifier as it was (float64, every head x template at once, JS through entropies): the oracle."""
    def xlogx(x):
        return (x * torch.log2(torch.where(x > 0, x, torch.ones_like(x)))).sum(-1)

    w = weights.to(torch.float64)
    h, n = w.shape[0], w.shape[-1]
    total = w.sum(-1, keepdim=True)
    live = (total > 0).squeeze(-1).to(torch.float64)
    w = w / torch.where(total > 0, total, torch.ones_like(total))
    temps, owner = [], []
    for k, name in enumerate(an.PATTERNS):
        c = an._candidates(name, n)
        temps += c
        owner += [k] * len(c)
    temps, owner = torch.stack(temps).to(torch.float64), torch.tensor(owner)
    js = (xlogx(w)[:, None] + xlogx(temps)[None]) / 2 - xlogx((w[:, None] + temps[None]) / 2)
    d = js.clamp(0.0, 1.0).sqrt()
    n_live = live.sum(-1, keepdim=True)
    mean_d = (d * live[:, None]).sum(-1) / n_live.clamp_min(1)
    mean_d = torch.where(n_live > 0, mean_d, torch.ones_like(mean_d))
    best = torch.full((h, len(an.PATTERNS)), float("inf"), dtype=torch.float64)
    return 1.0 - best.scatter_reduce(1, owner.expand(h, -1), mean_d, reduce="amin")


def head_sets(n: int, g: torch.Generator) -> list[torch.Tensor]:
    heads = [torch.softmax(torch.randn(6, n, n, generator=g) / tau, -1) for tau in (0.01, 0.1, 1.0, 30.0)]
    heads.append(torch.stack([an._candidates(name, n)[0] for name in an.PATTERNS]))           # exact templates
    heads.append(torch.stack([an.synthetic_pattern(name, n, noise=1e-4, seed=1) for name in an.PATTERNS]))
    masked = torch.softmax(torch.randn(3, n, n, generator=g), -1) * torch.tril(torch.ones(n, n))
    masked[:, 0] = 0.0                                                                          # a dead query row
    heads.append(masked)
    return heads


@pytest.mark.parametrize("chunk", [1 << 20, 97])
def test_float32_chunked_classifier_equals_the_float64_one(monkeypatch, chunk):
    """Within 1e-6 (measured: 9e-8), the same labels; with a tiny chunk every head and template is its own chunk."""
    monkeypatch.setattr(an, "_CHUNK", chunk)
    g = torch.Generator().manual_seed(0)
    for n in (1, 2, 3, 5, 9, 16, 33):
        for w in head_sets(n, g):
            new, old = an._scores_batch(w), scores_float64(w)
            assert new.dtype == torch.float64
            torch.testing.assert_close(new, old, rtol=0, atol=1e-6)
            assert [label for label, _ in an.classify_heads(w)] == \
                [an._label(dict(zip(an.PATTERNS, row))) for row in old.tolist()]
    temps, _ = an._all_candidates(16)
    assert temps.dtype == torch.float32


def test_classifier_at_the_page_maximum_equals_float64_and_chunking_does_not_change_it(monkeypatch):
    w = torch.softmax(torch.randn(32, 64, 64, generator=torch.Generator().manual_seed(3)) * 3, -1)
    whole = an._scores_batch(w)
    torch.testing.assert_close(whole[:4], scores_float64(w[:4]), rtol=0, atol=1e-6)   # the oracle: 4 heads (70 MB)
    monkeypatch.setattr(an, "_CHUNK", 5000)
    torch.testing.assert_close(an._scores_batch(w), whole, rtol=0, atol=1e-12)


def test_head_similarity_chunked_equals_all_at_once(monkeypatch):
    w = torch.softmax(torch.randn(2, 7, 9, 9, generator=torch.Generator().manual_seed(1)), -1)
    direct = an.js_distance(w[:, :, None], w[:, None]).mean(dim=(0, 3))
    monkeypatch.setattr(an, "_CHUNK", 200)          # 1 head per chunk
    torch.testing.assert_close(an.head_similarity(w), direct, rtol=0, atol=1e-12)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads the peak RSS from /proc")
def test_classifier_memory_is_bounded_at_32_heads_of_64_tokens():
    """The page maximum (multihead: h = 32, n = 64) once took ~550 MB of float64 temporaries (921 MB server peak);
    chunked float32 must stay under 60 MB above the inputs. Measured in a fresh process (peak RSS, Linux)."""
    probe = textwrap.dedent("""
        import sys, torch
        sys.path.insert(0, sys.argv[1])
        torch.set_num_threads(1)
        from attention_core import analysis as an

        def peak_mb():   # VmHWM, the peak RSS; ru_maxrss would start at the forking parent's (pytest's) size
            with open("/proc/self/status") as f:
                return next(int(line.split()[1]) for line in f if line.startswith("VmHWM")) / 1024

        w = torch.softmax(torch.randn(32, 64, 64), -1)
        an.classify_heads(w[:, :8, :8]); an.head_similarity(w[:2, :8, :8])   # imports and kernels warmed
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")                                                      # reset VmHWM to the RSS now
        before = peak_mb()
        an.classify_heads(w); an.head_similarity(w)
        print(peak_mb() - before)
    """)
    out = subprocess.run([sys.executable, "-c", probe, str(ROOT)], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    grown_mb = float(out.stdout.strip().splitlines()[-1])
    assert grown_mb < 60, f"classifying 32 heads of 64 tokens grew the peak RSS by {grown_mb:.0f} MB"


def test_one_miss_computes_at_a_time_and_nested_cached_calls_do_not_deadlock():
    """Ten sessions missing at once would add up their temporaries: the server computes COMPUTE_SLOTS (1) at a
    time. A cached function that calls another keeps its slot (no deadlock), even when all slots are taken."""
    lock, running, peak = threading.Lock(), [0], [0]

    @uc.shared_arrays(max_bytes=10**6)
    def inner(i: int) -> int:
        return i * 2

    @uc.shared_arrays(max_bytes=10**6)
    def outer(i: int) -> int:
        with lock:
            running[0] += 1
            peak[0] = max(peak[0], running[0])
        threading.Event().wait(0.02)
        value = inner(i) + inner(i + 1000)          # nested misses while this thread holds a slot
        with lock:
            running[0] -= 1
        return value

    threads = [threading.Thread(target=outer, args=(k,)) for k in range(10)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert not any(t.is_alive() for t in threads)
    assert peak[0] == uc.COMPUTE_SLOTS == 1
    assert [outer(k) for k in range(10)] == [4 * k + 2000 for k in range(10)]


def test_importing_the_cache_tunes_no_allocator_and_the_router_asks_once(monkeypatch):
    """Side effects happen where the router asks for them: a fresh import of serving.cache calls no mallopt;
    limit_heaps() sets M_ARENA_MAX (-8) to 2 once, however often the router's script runs."""
    import importlib

    calls = []

    class FakeLibc:
        def mallopt(self, param, value):
            calls.append((param, value))

        def malloc_trim(self, pad):
            return 0

    import ctypes
    import sys

    monkeypatch.setattr(ctypes, "CDLL", lambda name: FakeLibc())       # the glibc a fresh import finds
    monkeypatch.setattr(sys, "platform", "linux")
    monkeypatch.delenv("ATTN_KEEP_MALLOC", raising=False)
    fresh = importlib.util.module_from_spec(importlib.util.find_spec("serving.cache"))
    fresh.__spec__.loader.exec_module(fresh)          # a second copy: the real module's caches stay untouched
    assert isinstance(fresh._LIBC, FakeLibc)
    assert calls == []                                  # importing tuned nothing
    assert fresh.limit_heaps() and fresh.limit_heaps()
    assert calls == [(-8, 2)]
    monkeypatch.setattr(fresh, "_LIBC", None)
    assert fresh.limit_heaps() is False

"""Caches with a byte budget, shared by every session of the server (docs/performance.md, "Memory").

Streamlit's ``st.cache_data`` / ``st.cache_resource`` bound a cache by its number of entries, not by its
size: 32 entries of 2 KB and 32 entries of 40 MB count the same. Here every cache has a budget in bytes,
and all of them together share one global budget (``GLOBAL_BUDGET``): storing an entry first evicts the
least recently used entries of its own cache until it fits there, then the least recently used entries
of any cache until the total fits. An entry larger than its cache's budget is computed, returned and not
kept. One lock guards the bookkeeping (sessions run in threads); computations run outside it, and
concurrent calls with the same arguments compute once (the others wait for that result).

Two ways to keep a result:

- ``shared_arrays``: one object shared by every session and call, never copied (a page that reads a
  12-layer stack of activations several times per rerun would pay more for the copies than for the
  computation). The result is frozen first: numpy arrays become read-only, dicts and lists become
  read-only ``FrozenDict`` / ``FrozenList`` (subclasses of dict and list: a copy of one, ``dict(x)``,
  ``copy.deepcopy(x)`` or a pickle round trip, is an ordinary mutable dict / list). So a page that tried to
  modify a shared result gets an error instead of changing it for everyone. (Torch tensors and pandas
  frames cannot be frozen: return numpy arrays, or use ``cache_data``.)
- ``cache_data``: like ``st.cache_data``, the result is pickled when stored and every call gets a fresh
  copy; the entry's size is the length of the pickle.

The key is the function and its arguments (their values, as ``st.cache_data`` hashes them); arguments whose
name starts with an underscore are not part of the key (``st.cache_data``'s convention, e.g. a builder).
``budget_report()`` lists what each cache holds.
"""
from __future__ import annotations

import copy
import functools
import hashlib
import inspect
import os
import pickle
import sys
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

import numpy as np

MB = 2 ** 20
GLOBAL_BUDGET = 32 * MB       # every cache of this module together (README, "Memory")
_MISSING = object()


def _glibc():
    if not sys.platform.startswith("linux") or os.environ.get("ATTN_KEEP_MALLOC"):
        return None
    try:
        import ctypes
        libc = ctypes.CDLL("libc.so.6")
        libc.malloc_trim, libc.mallopt                       # noqa: B018 - glibc only (not musl)
        return libc
    except (OSError, AttributeError):
        return None


_LIBC = _glibc()
_TRIM = {"last": 0.0}
TRIM_AFTER_S = 0.1       # a computation at least this long may have left many freed buffers on the heap
TRIM_EVERY_S = 1.0       # at most one trim a second (1-2 ms, and the next rerun faults the pages in again)


def return_freed_memory_to_the_os(force: bool = False) -> bool:
    """Give freed heap memory back to the OS (glibc ``malloc_trim``), at most every TRIM_EVERY_S seconds.

    glibc keeps freed blocks of the heap for reuse, so the temporaries of a large computation (torch / numpy
    buffers under its 32 MB mmap threshold) stay in the server's RSS after it; and each session thread may
    get its own heap (arena). Called after cache misses that computed for a while. On other platforms
    nothing happens. (A fixed low mmap threshold would also return them, but made torch-heavy reruns 1.5-2x
    slower: every large buffer then costs fresh page faults.)"""
    if _LIBC is None:
        return False
    now = time.monotonic()
    if not force and now - _TRIM["last"] < TRIM_EVERY_S:
        return False
    _TRIM["last"] = now
    _LIBC.malloc_trim(0)
    return True


_ARENAS = {"set": False}


def limit_heaps() -> bool:
    """Two heaps (glibc arenas, ``M_ARENA_MAX``) for all session threads, not one per thread: each thread's own heap
    would keep its freed temporaries. The server asks for it once (app.py, before any page runs); importing this
    module changes nothing. False where there is no glibc (or ``ATTN_KEEP_MALLOC`` is set)."""
    if _LIBC is None:
        return False
    if not _ARENAS["set"]:
        _LIBC.mallopt(-8, 2)
        _ARENAS["set"] = True
    return True


# ---------------------------------------------------------------------------------------------
# read-only containers
# ---------------------------------------------------------------------------------------------

def _read_only(self, *args, **kwargs):
    raise TypeError(f"this {type(self).__name__} is a cached result shared by every session: it is read-only "
                    "(copy it first, e.g. dict(x), list(x) or copy.deepcopy(x))")


class FrozenDict(dict):
    """A dict that refuses changes; its copies (copy, deepcopy, pickle) are ordinary dicts."""

    __setitem__ = __delitem__ = clear = pop = popitem = setdefault = update = __ior__ = _read_only

    def __copy__(self):
        return dict(self)

    def __deepcopy__(self, memo):
        return {copy.deepcopy(k, memo): copy.deepcopy(v, memo) for k, v in self.items()}

    def __reduce__(self):
        return dict, (dict(self),)


class FrozenList(list):
    """A list that refuses changes; its copies (copy, deepcopy, pickle) are ordinary lists."""

    __setitem__ = __delitem__ = append = extend = insert = pop = remove = clear = sort = reverse = _read_only
    __iadd__ = __imul__ = _read_only

    def __copy__(self):
        return list(self)

    def __deepcopy__(self, memo):
        return [copy.deepcopy(v, memo) for v in self]

    def __reduce__(self):
        return list, (list(self),)


def freeze(value):
    """``value`` made read-only for sharing: numpy arrays in place (``writeable = False``), dicts and lists
    (also inside tuples and named tuples) replaced by FrozenDict / FrozenList. Other objects as they are."""
    if isinstance(value, np.ndarray):
        value.flags.writeable = False
        return value
    if isinstance(value, dict):
        return value if isinstance(value, FrozenDict) else FrozenDict((k, freeze(v)) for k, v in value.items())
    if isinstance(value, list):
        return value if isinstance(value, FrozenList) else FrozenList(freeze(v) for v in value)
    if isinstance(value, tuple):
        items = [freeze(v) for v in value]
        return type(value)(*items) if hasattr(value, "_fields") else type(value)(items)
    return value


# ---------------------------------------------------------------------------------------------
# sizes and keys
# ---------------------------------------------------------------------------------------------

def nbytes(value, _seen: set | None = None) -> int:
    """Approximate memory held by ``value``: numpy / torch buffers, pandas frames (deep), containers
    recursively, other objects by ``sys.getsizeof`` (and their ``__dict__``). Shared objects count once."""
    seen = set() if _seen is None else _seen
    if id(value) in seen:
        return 0
    seen.add(id(value))
    if isinstance(value, np.ndarray):
        base = value
        while isinstance(base.base, np.ndarray):          # a view keeps its whole base alive: count that
            base = base.base
        if base is not value:
            if id(base) in seen:
                return 112
            seen.add(id(base))
        return 112 + base.nbytes
    if isinstance(value, (str, bytes, bytearray, int, float, bool, complex, type(None))):
        return sys.getsizeof(value)
    mod = type(value).__module__.split(".")[0]
    if mod == "torch" and hasattr(value, "untyped_storage"):
        return 200 + value.untyped_storage().nbytes()
    if hasattr(value, "named_modules") and hasattr(value, "state_dict"):    # an nn.Module: its tensors
        tensors = {id(t): t for t in (*value.parameters(), *value.buffers())}
        return 2000 * sum(1 for _ in value.modules()) + sum(nbytes(t, seen) for t in tensors.values())
    if mod == "pandas" and hasattr(value, "memory_usage"):
        usage = value.memory_usage(index=True, deep=True)
        return 500 + int(usage.sum() if hasattr(usage, "sum") else usage)
    size = sys.getsizeof(value)
    if isinstance(value, dict):
        return size + sum(nbytes(k, seen) + nbytes(v, seen) for k, v in value.items())
    if isinstance(value, (list, tuple, set, frozenset)):
        return size + sum(nbytes(v, seen) for v in value)
    if hasattr(value, "__dict__"):
        size += nbytes(vars(value), seen)
    return size


def _key_part(value):
    """A hashable stand-in for an argument's value (st.cache_data hashes values, not identities)."""
    if value is None or isinstance(value, (bool, int, str, bytes)):
        return (type(value).__name__, value)
    if isinstance(value, float):
        return ("float", repr(value))                     # nan equals itself, 1 and 1.0 differ
    if isinstance(value, (list, tuple)):
        return (type(value).__name__, tuple(_key_part(v) for v in value))
    if isinstance(value, dict):
        return ("dict", tuple(sorted((repr(k), _key_part(v)) for k, v in value.items())))
    if isinstance(value, (set, frozenset)):
        return ("set", tuple(sorted(repr(_key_part(v)) for v in value)))
    if isinstance(value, np.ndarray):
        data = np.ascontiguousarray(value)
        return ("ndarray", data.shape, data.dtype.str, hashlib.blake2b(data.tobytes(), digest_size=16).digest())
    if isinstance(value, np.generic):
        return ("np", value.dtype.str, value.item())
    if type(value).__module__.split(".")[0] == "torch" and hasattr(value, "detach"):
        return ("tensor", _key_part(value.detach().cpu().numpy()))
    try:
        hash(value)
        return (type(value).__qualname__, value)
    except TypeError:
        return ("pickle", hashlib.blake2b(pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL),
                                          digest_size=16).digest())


def key_of_values(values: tuple) -> tuple:
    """A cache key for a tuple of argument values (see ``_key_part``)."""
    return tuple(_key_part(v) for v in values)


# ---------------------------------------------------------------------------------------------
# the budgeted LRU
# ---------------------------------------------------------------------------------------------

class _Budget:
    """The global budget: every ByteBudgetCache registers here; one lock for all bookkeeping."""

    def __init__(self, max_bytes: int):
        self.max_bytes = max_bytes
        self.lock = threading.RLock()
        self.caches: list[ByteBudgetCache] = []
        self.clock = 0

    @property
    def total(self) -> int:
        return sum(c.total for c in self.caches)

    def tick(self) -> int:
        self.clock += 1
        return self.clock

    def evict_to_fit(self) -> None:
        """Drop the least recently used entries of any cache until the total fits (call under the lock)."""
        total = self.total
        while total > self.max_bytes:
            oldest = min((c for c in self.caches if c.entries), default=None,
                         key=lambda c: next(iter(c.entries.values()))[2])
            if oldest is None:
                return
            total -= oldest.pop_oldest()


BUDGET = _Budget(GLOBAL_BUDGET)
COMPUTE_SLOTS = 1        # cache misses computing at once in the server: their temporaries would add up, and torch
#                          runs one thread per computation while the GIL serialises the rest (measured: ten heavy
#                          sessions took the same 3.5 s with 1 slot as with 2, and peaked 17 MB lower)
_COMPUTING = threading.BoundedSemaphore(COMPUTE_SLOTS)


class _Depth(threading.local):
    depth = 0                # > 0: this thread is inside a computation (and holds a slot)


_SLOTS = _Depth()


class ByteBudgetCache:
    """An LRU of ``key -> value`` holding at most ``max_bytes`` (and at most ``max_entries`` entries, if
    given), and together with every other cache at most ``BUDGET.max_bytes``. Thread-safe."""

    def __init__(self, name: str, max_bytes: int, *, max_entries: int | None = None, budget: _Budget = BUDGET):
        self.name, self.max_bytes, self.max_entries, self.budget = name, int(max_bytes), max_entries, budget
        self.entries: OrderedDict[Any, tuple[Any, int, int]] = OrderedDict()   # key -> (value, bytes, last use)
        self.total = 0
        self.hits = self.misses = 0
        self._inflight: dict[Any, threading.Event] = {}
        with budget.lock:
            budget.caches.append(self)

    def __len__(self) -> int:
        return len(self.entries)

    def get(self, key, default=_MISSING):
        with self.budget.lock:
            entry = self.entries.get(key)
            if entry is None:
                return default
            self.entries[key] = (entry[0], entry[1], self.budget.tick())
            self.entries.move_to_end(key)
            return entry[0]

    def put(self, key, value, size: int) -> bool:
        """Keep ``value`` (``size`` bytes), evicting as needed; False when it is larger than the budget."""
        with self.budget.lock:
            old = self.entries.pop(key, None)
            if old is not None:
                self.total -= old[1]
            if size > self.max_bytes or size > self.budget.max_bytes:
                return False
            self.entries[key] = (value, size, self.budget.tick())
            self.total += size
            while self.total > self.max_bytes or (self.max_entries and len(self.entries) > self.max_entries):
                self.pop_oldest()
            self.budget.evict_to_fit()
            return key in self.entries

    def pop_oldest(self) -> int:
        """Drop the least recently used entry; its size (call under the lock)."""
        _, (_, size, _) = self.entries.popitem(last=False)
        self.total -= size
        return size

    def clear(self) -> None:
        with self.budget.lock:
            self.entries.clear()
            self.total = 0

    def get_or_compute(self, key, compute: Callable[[], tuple[Any, Any, int]]):
        """The cached value for ``key``; on a miss ``compute()`` returns (value to return, value to keep, its
        size). Concurrent misses of one key compute once: the others wait and read the kept value. At most
        ``COMPUTE_SLOTS`` misses compute at once in the server (their temporaries add up); a computation that
        calls another cached function keeps its slot, and never waits for another thread's computation."""
        holding = _SLOTS.depth > 0
        for _ in range(3):                    # bounded: a waiter whose result was not kept computes itself
            with self.budget.lock:
                value = self.get(key)
                if value is not _MISSING:
                    self.hits += 1
                    return value, True
                waiting = self._inflight.get(key)
                if waiting is None or holding:
                    mine = self._inflight[key] = threading.Event() if waiting is None else None
                    break
            waiting.wait(timeout=120)
        else:
            mine = None
        self.misses += 1
        if not holding:
            _COMPUTING.acquire()
        _SLOTS.depth += 1
        try:
            t0 = time.monotonic()
            result, kept, size = compute()
            self.put(key, kept, size)
            if time.monotonic() - t0 >= TRIM_AFTER_S:
                return_freed_memory_to_the_os()
            return result, False
        finally:
            _SLOTS.depth -= 1
            if not holding:
                _COMPUTING.release()
            if mine is not None:
                with self.budget.lock:
                    self._inflight.pop(key, None)
                mine.set()


def budget_report() -> list[dict]:
    """What every cache holds now: name, entries, bytes, budget (and the global total)."""
    with BUDGET.lock:
        rows = [{"cache": c.name, "entries": len(c), "bytes": c.total, "budget": c.max_bytes,
                 "hits": c.hits, "misses": c.misses} for c in BUDGET.caches]
    rows.append({"cache": "(all)", "entries": sum(r["entries"] for r in rows),
                 "bytes": sum(r["bytes"] for r in rows), "budget": BUDGET.max_bytes})
    return rows


# ---------------------------------------------------------------------------------------------
# decorators
# ---------------------------------------------------------------------------------------------

def _keyer(fn: Callable) -> Callable:
    """(args, kwargs) -> the cache key: every argument by value, except those named ``_...``."""
    sig = inspect.signature(fn)
    names = list(sig.parameters)
    plain = all(p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) for p in sig.parameters.values())

    def key(args, kwargs):
        if plain and not kwargs and len(args) == len(names):      # the common case, about 1 us cheaper
            return tuple(_key_part(v) for n, v in zip(names, args) if not n.startswith("_"))
        bound = sig.bind(*args, **kwargs)
        bound.apply_defaults()
        return tuple((n, _key_part(v)) for n, v in bound.arguments.items() if not n.startswith("_"))

    return key


def _cache_for(fn: Callable, max_bytes: int, max_entries: int | None, name: str | None) -> ByteBudgetCache:
    """The cache of ``fn``: found by its file, name and code, so a page script that runs again (Streamlit
    re-executes it on every rerun, defining its functions anew) finds the cache of its previous runs, and an
    edited function starts a new one (the old one's entries go as the global budget needs room)."""
    code = fn.__code__
    ident = (code.co_filename, fn.__qualname__, _code_digest(code))
    with BUDGET.lock:
        cache = _BY_FUNCTION.get(ident)
        if cache is None:
            cache = _BY_FUNCTION[ident] = ByteBudgetCache(name or f"{fn.__module__}.{fn.__qualname__}", max_bytes,
                                                          max_entries=max_entries)
        cache.max_bytes, cache.max_entries = int(max_bytes), max_entries
        return cache


_BY_FUNCTION: dict[tuple, ByteBudgetCache] = {}


def _code_digest(code) -> str:
    """The function's bytecode and constants (nested functions included, without their addresses)."""
    h = hashlib.blake2b(code.co_code, digest_size=8)
    for const in code.co_consts:
        h.update(_code_digest(const).encode() if inspect.iscode(const) else repr(const).encode())
    return h.hexdigest()


def _decorate(fn: Callable, cache: ByteBudgetCache, share: bool, context: Callable[[], Any] | None = None) -> Callable:
    key_of = _keyer(fn)
    if context is not None:                 # ambient state the result depends on besides the arguments
        plain_key = key_of

        def key_of(args, kwargs):
            return context(), plain_key(args, kwargs)

    if share:
        def compute(args, kwargs):
            value = freeze(fn(*args, **kwargs))
            return value, value, nbytes(value)
    else:
        def compute(args, kwargs):
            value = fn(*args, **kwargs)
            blob = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
            return value, blob, len(blob)

    @functools.wraps(fn)
    def cached(*args, **kwargs):
        value, hit = cache.get_or_compute(key_of(args, kwargs), lambda: compute(args, kwargs))
        return pickle.loads(value) if hit and not share else value

    cached.clear = cache.clear
    cached.cache = cache
    return cached


def shared_arrays(max_entries: int | None = None, *, max_bytes: int = 16 * MB, name: str | None = None) -> Callable:
    """Decorator: cache numeric results (numpy arrays, or dicts / lists / tuples of them) in a byte budget,
    one frozen object shared by every session and call, without a copy per call."""
    def decorate(fn: Callable) -> Callable:
        return _decorate(fn, _cache_for(fn, max_bytes, max_entries, name), share=True)

    return decorate


def cache_data(max_entries: int | None = None, *, max_bytes: int = 8 * MB, name: str | None = None,
               context: Callable[[], Any] | None = None) -> Callable:
    """Decorator: ``st.cache_data`` with a byte budget (the pickled result is kept; every call gets a copy).
    ``context()``, when given, is part of every key: state the result depends on that is not an argument."""
    def decorate(fn: Callable) -> Callable:
        return _decorate(fn, _cache_for(fn, max_bytes, max_entries, name), share=False, context=context)

    return decorate

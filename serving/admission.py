"""Page runs are admitted first come, first served: a class opening the same link at once is served in turn.

The server's Python runs one thread at a time (the GIL), so N page runs started together share the processor and all
finish together, after N runs' time: with 30 students every one of them waits for the whole class. Admitting a
bounded number of runs at a time, in arrival order, finishes the same work in the same total time, but the first
students see their page after one run's time and the median student after half the class's
(``scripts/bench_class.py`` measures both; docs/performance.md has the figures).

``RUN_SLOTS`` runs at once (``ATTENTION_APP_RUN_SLOTS``; 0 admits every run as Streamlit does by itself). A run that
waited ``MAX_WAIT_S`` is let through anyway: a slow run never holds the others back for longer than that. Partial
reruns of a fragment do not pass through here (they are short, and the router does not run for them).
"""
from __future__ import annotations

import contextlib
import os
import threading


def _slots() -> int:
    try:
        return max(0, int(os.environ.get("ATTENTION_APP_RUN_SLOTS", "1")))
    except ValueError:
        return 1


RUN_SLOTS = _slots()
MAX_WAIT_S = 10.0
_GATE = threading.BoundedSemaphore(RUN_SLOTS) if RUN_SLOTS else None


@contextlib.contextmanager
def admitted():
    """Hold one of the server's run slots for the body (a page's run); wait in turn for it, at most MAX_WAIT_S."""
    got = _GATE.acquire(timeout=MAX_WAIT_S) if _GATE is not None else False
    try:
        yield
    finally:
        if got:
            _GATE.release()

"""serving.admission: page runs pass one at a time (RUN_SLOTS = 1), in arrival order; a run that waited too long
goes through anyway; 0 slots admits every run at once."""
import importlib
import threading
import time

import pytest


@pytest.fixture(autouse=True)
def default_afterwards():
    """Each test reloads the module with its own setting; the rest of the suite gets the default back."""
    yield
    import os

    import serving.admission as admission
    os.environ.pop("ATTENTION_APP_RUN_SLOTS", None)
    importlib.reload(admission)


def fresh(monkeypatch, slots: str, max_wait: float | None = None):
    monkeypatch.setenv("ATTENTION_APP_RUN_SLOTS", slots)
    import serving.admission as admission
    admission = importlib.reload(admission)
    if max_wait is not None:
        monkeypatch.setattr(admission, "MAX_WAIT_S", max_wait)
    return admission


def run_together(admission, n: int, hold: float) -> list[tuple[int, float, float]]:
    """n threads, each holding its slot ``hold`` seconds: (arrival, entered, left). Thread i+1 starts once thread i
    has reached the gate and 30 ms more have passed (a thread started is not yet running on a loaded machine: a
    fixed 10 ms apart let a later thread reach the gate first)."""
    spans, lock = [], threading.Lock()
    at_gate = [threading.Event() for _ in range(n)]

    def one(i):
        at_gate[i].set()
        with admission.admitted():
            t0 = time.perf_counter()
            time.sleep(hold)
            with lock:
                spans.append((i, t0, time.perf_counter()))

    threads = []
    for i in range(n):
        threads.append(threading.Thread(target=one, args=(i,)))
        threads[-1].start()
        assert at_gate[i].wait(30)
        time.sleep(0.03)
    for th in threads:
        th.join(30)
    return sorted(spans, key=lambda s: s[1])


def test_one_slot_admits_one_run_at_a_time_in_arrival_order(monkeypatch):
    admission = fresh(monkeypatch, "1")
    spans = run_together(admission, 6, 0.05)
    assert [i for i, _, _ in spans] == list(range(6))                       # first come, first served
    assert all(a[2] <= b[1] for a, b in zip(spans, spans[1:]))             # never two at once


def test_zero_slots_admit_every_run_at_once(monkeypatch):
    admission = fresh(monkeypatch, "0")
    spans = run_together(admission, 4, 0.3)
    assert max(s[1] for s in spans) < min(s[2] for s in spans)             # all four inside together


@pytest.mark.parametrize("value", ["x", "-3"])
def test_a_bad_setting_falls_back_to_a_valid_one(monkeypatch, value):
    admission = fresh(monkeypatch, value)
    assert admission.RUN_SLOTS in (0, 1)


def test_a_run_that_waited_too_long_goes_through_and_the_slot_is_not_lost(monkeypatch):
    admission = fresh(monkeypatch, "1", max_wait=0.1)
    spans = run_together(admission, 2, 0.5)                                 # the second waits 0.1 s, not 0.5 s
    assert spans[1][1] - spans[0][1] < 0.4
    with admission.admitted():                                             # the slot is free again afterwards
        assert admission._GATE.acquire(blocking=False) is False           # ... and held by this run
    assert admission._GATE.acquire(blocking=False) is True
    admission._GATE.release()


def test_an_exception_in_the_run_gives_the_slot_back(monkeypatch):
    admission = fresh(monkeypatch, "1")
    with pytest.raises(RuntimeError):
        with admission.admitted():
            raise RuntimeError("the page failed")
    assert admission._GATE.acquire(blocking=False) is True
    admission._GATE.release()

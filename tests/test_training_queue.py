"""The server's training queue (serving/training_queue.py) with tiny fake jobs: shared runs, the worker bound,
queue positions and their wait bounds, cancellation freeing the worker, and a full queue: about 2 s; and
the real training job once (8 steps, two probes): 2-8 s, with the machine's load."""
import threading
import time

import numpy as np
import pytest
import streamlit as st

from serving import training_queue as tq


def until(condition, timeout=3.0):
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.005)


class Tracker:
    """Fake jobs that record how many run at once and which ran."""

    def __init__(self):
        self.lock = threading.Lock()
        self.now = self.peak = 0
        self.ran: list = []

    def job(self, seconds=0.02, gate: threading.Event | None = None):
        def work(ctx):
            with self.lock:
                self.now += 1
                self.peak = max(self.peak, self.now)
                self.ran.append(ctx.key)
            try:
                for view in ctx.views:
                    ctx.record(view)["seen"] = view
                end = time.monotonic() + seconds
                while time.monotonic() < end or (gate is not None and not gate.is_set()):
                    if ctx.stopped():
                        return None
                    ctx.progress["step"] = ctx.progress.get("step", 0) + 1
                    time.sleep(0.002)
                return {"key": ctx.key}
            finally:
                with self.lock:
                    self.now -= 1
        return work


@pytest.fixture
def queue():
    q = tq.RunQueue(workers=1, wall_cap=10.0, max_waiting=5, lease=60.0, grace=0.05)
    yield q
    q.close()


def blocked(queue, tracker):
    """A job that holds the worker until the returned event is set."""
    gate = threading.Event()
    ticket = queue.submit("blocker", "v", tracker.job(0.0, gate))
    until(lambda: queue.status(ticket).state == "running")
    return gate, ticket


def test_identical_requests_share_one_run_and_each_view_gets_its_record(queue):
    tr = Tracker()
    gate, _ = blocked(queue, tr)
    tickets = [queue.submit("same", f"probe{i % 3}", tr.job()) for i in range(12)]
    assert len({id(t.job) for t in tickets}) == 1                # one job for twelve requests
    gate.set()
    until(lambda: all(queue.status(t).state == "done" for t in tickets))
    assert tr.ran == ["blocker", "same"]                         # computed once
    for t in tickets:
        s = queue.status(t)
        assert s.result == {"key": "same"} and s.record == {"seen": t.view}   # its own view's record
    # later: the same request is answered from the finished run at once; a new view needs a new run
    again = queue.submit("same", "probe1", tr.job())
    assert queue.status(again).state == "done" and again.job is tickets[0].job
    other = queue.submit("same", "probe9", tr.job())
    until(lambda: queue.status(other).state == "done")
    assert tr.ran == ["blocker", "same", "same"] and other.job is not tickets[0].job


def test_a_running_job_takes_only_views_it_records(queue):
    tr = Tracker()
    gate = threading.Event()
    first = queue.submit("k", "a", tr.job(0.0, gate))
    until(lambda: queue.status(first).state == "running")
    same_view = queue.submit("k", "a", tr.job())
    new_view = queue.submit("k", "b", tr.job())
    assert same_view.job is first.job                            # it records "a" from its first step
    assert new_view.job is not first.job                         # "b" would miss the first snapshots: next run
    assert queue.status(new_view).state == "queued" and queue.status(new_view).position == 1
    gate.set()
    until(lambda: queue.status(new_view).state == "done")
    assert tr.ran == ["k", "k"]


@pytest.mark.parametrize("workers", [1, 2])
def test_never_more_runs_at_once_than_workers(workers):
    q = tq.RunQueue(workers=workers, wall_cap=10.0, max_waiting=50)
    tr = Tracker()
    try:
        tickets = []
        threads = [threading.Thread(target=lambda i=i: tickets.append(q.submit(f"job{i}", "v", tr.job(0.01))))
                   for i in range(16)]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        until(lambda: all(q.status(t).state == "done" for t in tickets), timeout=5)
        assert sorted(tr.ran) == sorted(f"job{i}" for i in range(16))
        assert tr.peak == workers and q.stats()["peak_running"] == workers
        st.cache_resource.clear()                 # what a client's "clear cache" message does ...
        st.cache_data.clear()
        more = [q.submit(f"after{i}", "v", tr.job(0.01)) for i in range(6)]
        until(lambda: all(q.status(t).state == "done" for t in more), timeout=5)
        assert tr.peak == workers and q.stats()["workers"] == workers   # ... changes nothing here
    finally:
        q.close()


def test_the_page_queue_is_module_state_that_clearing_caches_does_not_replace():
    before = tq.QUEUE
    st.cache_resource.clear()
    st.cache_data.clear()
    assert tq.QUEUE is before and tq.QUEUE.workers == tq.WORKERS == 1


def test_positions_and_wait_bounds(queue):
    tr = Tracker()
    gate, _ = blocked(queue, tr)
    tickets = [queue.submit(f"j{i}", "v", tr.job(0.0)) for i in range(3)]
    statuses = [queue.status(t) for t in tickets]
    assert [s.state for s in statuses] == ["queued"] * 3
    assert [s.position for s in statuses] == [1, 2, 3]
    # the running job may take up to wall_cap (10 s) in all; each job ahead up to 10 s more
    bounds = [s.wait_bound for s in statuses]
    # each status reads the clock a few microseconds after the previous one: compare to 10 ms, not to 1e-6
    assert 9.0 < bounds[0] <= 10.0 and bounds[1] == pytest.approx(bounds[0] + 10, abs=0.01) \
        and bounds[2] == pytest.approx(bounds[0] + 20, abs=0.01)
    queue.release(tickets[0])                                    # the first one leaves: the others move up
    assert [queue.status(t).position for t in tickets[1:]] == [1, 2]
    gate.set()
    until(lambda: all(queue.status(t).state == "done" for t in tickets[1:]))
    assert "j0" not in tr.ran                                    # nobody watched it: it never ran


def test_releasing_a_running_job_frees_the_worker(queue):
    tr = Tracker()
    gate, ticket = blocked(queue, tr)                            # would run for ever
    waiting = queue.submit("next", "v", tr.job(0.0))
    t0 = time.monotonic()
    queue.release(ticket)                                        # its only watcher leaves (a closed tab)
    until(lambda: queue.status(waiting).state == "done")
    assert time.monotonic() - t0 < 1.0
    assert queue.status(ticket).state == "cancelled" and tr.peak == 1


def test_a_closed_session_stops_its_run_after_the_grace(queue):
    tr = Tracker()
    connected = threading.Event()
    connected.set()
    ticket = queue.submit("k", "v", tr.job(0.0, threading.Event()), alive=connected.is_set)
    other = queue.submit("k", "v", tr.job())                      # a second session watches the same run
    until(lambda: queue.status(ticket).state == "running")
    connected.clear()                                             # the first session's browser closes
    time.sleep(0.15)
    assert queue.status(ticket).state == "running"               # still watched by the second
    queue.release(other)
    until(lambda: queue.status(ticket).state == "cancelled")


def test_a_failing_job_reports_and_the_worker_goes_on(queue):
    def boom(ctx):
        raise RuntimeError("no")

    tr = Tracker()
    bad = queue.submit("bad", "v", boom)
    good = queue.submit("good", "v", tr.job())
    until(lambda: queue.status(good).state == "done")
    s = queue.status(bad)
    assert s.state == "failed" and s.error == "RuntimeError: no"


def test_a_full_queue_says_so(queue):
    tr = Tracker()
    gate, _ = blocked(queue, tr)
    tickets = [queue.submit(f"j{i}", "v", tr.job()) for i in range(5)]
    assert all(tickets)
    assert queue.submit("one too many", "v", tr.job()) is None
    assert queue.submit("j0", "w", tr.job()) is not None         # joining a waiting run is always possible
    queue.release(tickets[1])
    assert queue.submit("now there is room", "v", tr.job()) is not None
    gate.set()


def test_training_job_snapshots_each_view_with_its_own_probe():
    """The real job, 8 steps: one training, two probes; each view's snapshots are of its probe, and
    the losses are those of the same seeded run done directly."""
    q = tq.RunQueue(workers=1)
    try:
        gate, _ = blocked(q, Tracker())                           # both requests arrive while it waits
        spec = tq.TrainingSpec("reverse", True, 0, 8, 1e-2, 20)
        a = tq.submit_training(spec, tq.View("1111122222", 5), queue=q)
        b = tq.submit_training(spec, tq.View("9876543", 3), queue=q)
        assert a.job is b.job
        gate.set()
        until(lambda: q.status(a).state == "done", timeout=60)
        sa, sb = q.status(a), q.status(b)
        assert [s for s, _, _ in sa.record["snaps"]] == [5, 8]
        assert [s for s, _, _ in sb.record["snaps"]] == [3, 6, 8]
        assert all(w.shape[1] == 10 for _, _, w in sa.record["snaps"])
        assert all(w.shape[1] == 7 for _, _, w in sb.record["snaps"])
        assert sa.record["probe"] == "1111122222" and sb.record["probe"] == "9876543"
        assert not sa.record["snaps"][0][2].flags.writeable      # shared between sessions: read-only
        run = tq.live_run("reverse", attention=True, seed=0, lr=1e-2, warmup_steps=20)
        assert np.allclose(sa.result["losses"], run.trainer.fit(run.batches, 8), atol=1e-6)
        assert q.stats()["started"] == 2                        # the blocker and the one shared training
    finally:
        q.close()


def test_finished_runs_are_kept_within_a_byte_budget():
    q = tq.RunQueue(workers=1, done_bytes=3 * 8000 + 100)

    def big(ctx):
        for view in ctx.views:
            ctx.record(view)["w"] = np.zeros(1000)                 # 8000 bytes
        return None

    try:
        tickets = [q.submit(f"j{i}", "v", big) for i in range(5)]
        until(lambda: all(q.status(t).state == "done" for t in tickets))
        assert q.stats()["done_kept"] == 3                          # the oldest two are forgotten ...
        assert q.status(tickets[0]).record["w"].nbytes == 8000      # ... their holders keep what they had
        assert q.submit("j4", "v", big).job is tickets[4].job       # the newest still answers at once
        assert q.submit("j0", "v", big).job is not tickets[0].job
    finally:
        q.close()


def test_a_finished_run_can_be_asked_for_again(queue):
    tr = Tracker()
    first = queue.submit("k", "v", tr.job())
    until(lambda: queue.status(first).state == "done")
    again = queue.submit("k", "v", tr.job(), reuse_done=False)     # the same session presses again
    assert again.job is not first.job
    until(lambda: queue.status(again).state == "done")
    assert tr.ran == ["k", "k"]

"""Training runs for a whole class at once: one bounded pool of workers per server process, identical
runs computed once and shared, and a live queue position for everyone who waits.

Why a plain module and not ``st.cache_resource``: any client can send Streamlit's "clear cache" message,
which empties ``st.cache_resource``; a lock kept there was replaced by a fresh one and three trainings
then ran at once. The state here lives in this imported module, which no client message touches: the
bound holds for the life of the server process.

What is shared, and what is not. A *job* is one training, identified by everything that changes its
weights and losses (``TrainingSpec``: task, attention, seed, steps, learning rate, warm-up, time cap);
the probe does not change them, so every session asking for the same training shares one job. What a
session *watches* -- its probe and snapshot interval, a *view* -- is recorded separately per view, so
one session's probe never reaches another session's page. A queued job takes new views until it
starts; a running job only takes sessions that want a view it already records (the others wait for
the next job of the same training). A finished job is kept for a while and answers the same
(training, view) at once.

Bounds (the page states them): ``workers`` jobs at a time (one: the CPU is shared by every session),
each stopped after ``TIME_CAP`` s of training and ``WALL_CAP`` s in all; at most ``max_waiting``
jobs wait (more: the page says the queue is full); the page holds at most one ticket per session. A
waiting session sees its position and an upper bound of the wait, computed from those caps.

Memory: a finished job is kept to answer the same request at once for ``DONE_TTL`` s, at most
``KEEP_DONE`` jobs and ``DONE_BYTES`` of arrays in all; its snapshot arrays are read-only, so the sessions
that show them share them without copies.

Liveness: a watcher counts while its session is connected (``alive()``, checked with a grace of
``grace`` s for a reconnecting websocket) and while it has asked for its status within ``lease`` s. A
queued job nobody watches is dropped; a running one stops at its next step, which frees the worker.
"""
from __future__ import annotations

import itertools
import threading
import time
from collections import deque
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from attention_core.models.recipes import live_run

WORKERS = 1               # trainings at a time per server process
TIME_CAP = 20.0           # s of training per run (snapshots not counted)
WALL_CAP = 30.0           # s per run in all, snapshots included: the bound a waiting session is told
MAX_WAITING = 40          # distinct jobs waiting; more and the page says the queue is full
MAX_VIEWS = 16            # distinct (probe, interval) views recorded by one job
LEASE = 90.0              # s without a status request before a watcher stops counting (a hidden tab polls ~1/min)
GRACE = 3.0               # s a watcher's session may be disconnected (a websocket reconnecting) and still count
KEEP_DONE = 16            # finished jobs kept to answer the same request at once ...
DONE_TTL = 600.0          # ... for this many seconds ...
DONE_BYTES = 16 << 20     # ... and within this many bytes of arrays (a 600-step run with 16 probes: ~4 MB)


# ------------------------------------------------------------------ the queue (knows nothing of training)
@dataclass
class _Watcher:
    view: Hashable
    alive: Callable[[], bool]
    touched: float
    seen_alive: float

    def live(self, now: float, lease: float, grace: float) -> bool:
        try:
            ok = bool(self.alive())
        except Exception:           # a session that cannot say it is alive is not
            ok = False
        if ok:
            self.seen_alive = now
        return now - self.touched <= lease and now - self.seen_alive <= grace


class Job:
    """One computation shared by every watcher of it; ``views`` holds one record (a dict) per view."""

    def __init__(self, key: Hashable, work: Callable[[JobContext], Any], number: int):
        self.key, self.work, self.number = key, work, number
        self.views: dict[Hashable, dict] = {}
        self.watchers: dict[int, _Watcher] = {}
        self.state = "queued"            # -> running -> done | cancelled | failed
        self.progress: dict = {}         # written by the worker while it runs
        self.result: Any = None
        self.error: str | None = None
        self.submitted = time.monotonic()
        self.started: float | None = None
        self.finished: float | None = None
        self.nbytes = 0                  # arrays held by its records, counted when it finishes


class JobContext:
    """What a job's ``work`` function sees: its views (fixed when it starts), a record per view to fill,
    a progress dict for the watchers, and ``stopped()``: True once nobody watches (then return early)."""

    def __init__(self, queue: RunQueue, job: Job):
        self._queue, self._job = queue, job
        self.key = job.key
        self.views: list = list(job.views)
        self.progress = job.progress
        self.was_stopped = False

    def record(self, view: Hashable) -> dict:
        return self._job.views[view]

    def stopped(self) -> bool:
        if not self._queue.has_watchers(self._job):
            self.was_stopped = True
        return self.was_stopped


@dataclass(frozen=True)
class Ticket:
    job: Job
    watcher: int
    view: Hashable


@dataclass(frozen=True)
class Status:
    state: str                    # "queued", "running", "done", "cancelled", "failed"
    position: int = 0             # queued: 1 = the next job to start
    wait_bound: float = 0.0       # queued: at most this many seconds before it starts
    watchers: int = 0             # sessions watching this job (the shared computation)
    progress: dict = field(default_factory=dict)
    record: dict | None = None    # this ticket's view
    result: Any = None
    error: str | None = None


class RunQueue:
    """A fixed pool of ``workers`` threads running shared jobs in order of arrival."""

    def __init__(self, workers: int = WORKERS, *, wall_cap: float = WALL_CAP, max_waiting: int = MAX_WAITING,
                 max_views: int = MAX_VIEWS, lease: float = LEASE, grace: float = GRACE,
                 keep_done: int = KEEP_DONE, done_ttl: float = DONE_TTL, done_bytes: int = DONE_BYTES):
        self.workers, self.wall_cap, self.max_waiting, self.max_views = workers, wall_cap, max_waiting, max_views
        self.lease, self.grace, self.keep_done, self.done_ttl = lease, grace, keep_done, done_ttl
        self.done_bytes = done_bytes
        self._cond = threading.Condition()
        self._active: list[Job] = []            # queued and running, in order of arrival
        self._done: deque[Job] = deque()
        self._ids = itertools.count(1)
        self._threads: list[threading.Thread] = []
        self._closed = False
        self.running = 0
        self.peak_running = 0
        self.started = 0                        # jobs that ran (the work done, after sharing)

    # -------------------------------------------------------------- the API a page uses
    def submit(self, key: Hashable, view: Hashable, work: Callable[[JobContext], Any], *,
               alive: Callable[[], bool] | None = None, reuse_done: bool = True) -> Ticket | None:
        """Watch the job of ``key`` with ``view``: a finished one that recorded the view (unless
        ``reuse_done`` is False: the caller wants the computation done again), the running one if it
        records the view, else the queued one of that key (a new one if needed). None when ``max_waiting``
        jobs already wait: the caller says the queue is full."""
        alive = alive or (lambda: True)
        with self._cond:
            self._start_workers()
            now = time.monotonic()
            self._expire_done(now)
            job = next((j for j in reversed(self._done) if j.key == key and view in j.views), None) \
                if reuse_done else None
            if job is None:
                job = next((j for j in self._active if j.key == key and j.state == "running" and view in j.views),
                           None)
            if job is None:
                job = next((j for j in self._active if j.key == key and j.state == "queued"
                            and (view in j.views or len(j.views) < self.max_views)), None)
            if job is None:
                if self._waiting(now) >= self.max_waiting:
                    return None
                job = Job(key, work, next(self._ids))
                self._active.append(job)
                self._cond.notify_all()
            job.views.setdefault(view, {})
            wid = next(self._ids)
            job.watchers[wid] = _Watcher(view, alive, now, now)
            return Ticket(job, wid, view)

    def status(self, ticket: Ticket) -> Status:
        """Where the ticket's job is (and a touch: the watcher is still here)."""
        job = ticket.job
        with self._cond:
            now = time.monotonic()
            watcher = job.watchers.get(ticket.watcher)
            if watcher is not None:
                watcher.touched = now
            n = len(job.watchers)
            if job.state == "queued":
                position, bound = self._position(job, now)
                return Status("queued", position, bound, n)
            return Status(job.state, 0, 0.0, n, dict(job.progress), job.views.get(ticket.view), job.result, job.error)

    def release(self, ticket: Ticket) -> None:
        """The session no longer wants the ticket: a job nobody watches is dropped or stopped."""
        with self._cond:
            ticket.job.watchers.pop(ticket.watcher, None)
            self._cond.notify_all()

    def has_watchers(self, job: Job) -> bool:
        with self._cond:
            now = time.monotonic()
            for wid, w in list(job.watchers.items()):
                if not w.live(now, self.lease, self.grace):
                    del job.watchers[wid]
            return bool(job.watchers)

    def stats(self) -> dict:
        with self._cond:
            return {"running": self.running, "peak_running": self.peak_running, "started": self.started,
                    "waiting": sum(j.state == "queued" for j in self._active), "done_kept": len(self._done),
                    "workers": len(self._threads)}

    def close(self) -> None:
        """Stop the workers once their current job ends (tests and benchmarks)."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        for thread in self._threads:
            thread.join(timeout=self.wall_cap + 5)

    # -------------------------------------------------------------- inside
    def _start_workers(self) -> None:
        while len(self._threads) < self.workers and not self._closed:
            thread = threading.Thread(target=self._work_loop, name=f"training-worker-{len(self._threads)}",
                                      daemon=True)
            self._threads.append(thread)
            thread.start()

    def _live_queued(self, now: float) -> list[Job]:
        """Queued jobs somebody still watches, in order; the others are dropped (cancelled)."""
        out = []
        for job in list(self._active):
            if job.state != "queued":
                continue
            for wid, w in list(job.watchers.items()):
                if not w.live(now, self.lease, self.grace):
                    del job.watchers[wid]
            if job.watchers:
                out.append(job)
            else:
                job.state, job.finished = "cancelled", now
                self._active.remove(job)
        return out

    def _waiting(self, now: float) -> int:
        return len(self._live_queued(now))

    def _position(self, job: Job, now: float) -> tuple[int, float]:
        """1-based place among the waiting jobs, and an upper bound of the seconds before it starts: each
        worker is free when its job reaches ``wall_cap``; every job ahead takes at most ``wall_cap``."""
        queued = self._live_queued(now)
        ahead = queued.index(job) if job in queued else 0
        free = sorted([max(0.0, self.wall_cap - (now - j.started)) for j in self._active
                       if j.state == "running" and j.started is not None]
                      + [0.0] * max(0, self.workers - self.running))[:max(self.workers, 1)]
        for _ in range(ahead):
            free[0] += self.wall_cap
            free.sort()
        return ahead + 1, free[0]

    def _expire_done(self, now: float) -> None:
        """Forget the oldest finished jobs past the count, age or byte budget (sessions that harvested a run
        keep their own references; only the answering of new requests is forgotten)."""
        while self._done and (len(self._done) > self.keep_done or now - self._done[0].finished > self.done_ttl
                              or sum(j.nbytes for j in self._done) > self.done_bytes):
            self._done.popleft()

    def _next_job(self) -> Job | None:
        queued = self._live_queued(time.monotonic())
        return queued[0] if queued else None

    def _work_loop(self) -> None:
        torch.set_num_threads(1)      # as app.py sets for the server: one core per worker, whatever else runs
        while True:
            with self._cond:
                job = self._next_job()
                while job is None and not self._closed:
                    self._cond.wait(timeout=1.0)
                    job = self._next_job()
                if job is None:
                    return
                job.state, job.started = "running", time.monotonic()
                self.running += 1
                self.started += 1
                self.peak_running = max(self.peak_running, self.running)
            ctx = JobContext(self, job)
            state, result, error = "done", None, None
            try:
                result = job.work(ctx)
                if ctx.was_stopped:
                    state = "cancelled"
            except Exception as exc:     # shown to the watchers as a message, never as a traceback
                state, error = "failed", f"{type(exc).__name__}: {exc}"
            with self._cond:
                job.result, job.error, job.state, job.finished = result, error, state, time.monotonic()
                self.running -= 1
                self._active.remove(job)
                if state == "done":
                    job.nbytes = _nbytes(job.views) + _nbytes(job.result)
                    self._done.append(job)
                    self._expire_done(job.finished)
                self._cond.notify_all()


def _nbytes(value) -> int:
    """Bytes of the numpy arrays and float sequences in ``value`` (dicts, lists, tuples)."""
    if isinstance(value, np.ndarray):
        return value.nbytes
    if isinstance(value, dict):
        return sum(_nbytes(v) for v in value.values())
    if isinstance(value, (list, tuple)):
        return 8 * len(value) + sum(_nbytes(v) for v in value if not isinstance(v, (int, float)))
    return 0


# ------------------------------------------------------------------ the training job of the page
@dataclass(frozen=True)
class TrainingSpec:
    """Everything that changes a run's weights and losses: the identity of a shared job."""
    task: str
    attention: bool
    seed: int
    steps: int
    lr: float
    warmup: int
    time_cap: float = TIME_CAP


@dataclass(frozen=True)
class View:
    """What one session watches: its probe (as typed) and the snapshot interval."""
    probe: str
    every: int


def snap_of(task: str, snapshot) -> tuple[str, np.ndarray | None]:
    """(what the model answers, its attention matrix) from a live_run snapshot: the alignment (output x
    input characters) of a Translation; for the pronoun task the answer's word and the attention from
    "it" of every layer and head ((L * h) x tokens) of a Resolution."""
    if task == "pronoun":
        f = snapshot.from_pronoun.numpy()
        return snapshot.token, f.reshape(-1, f.shape[-1])
    return snapshot.output, snapshot.alignment.numpy() if snapshot.alignment is not None else None


def _frozen(w: np.ndarray | None) -> np.ndarray | None:
    if w is not None:
        w = np.array(w)                 # its own memory, read-only: shared by every watcher of the view
        w.flags.writeable = False
    return w


def training_work(spec: TrainingSpec, *, wall_cap: float = WALL_CAP) -> Callable[[JobContext], dict]:
    """The job of ``spec``: one run of ``live_run`` + ``TransformerTrainer.fit``, the probe of every view
    snapshotted every ``view.every`` steps and at the end. Returns the shared part (losses, learning rates,
    seconds, whether the cap stopped it, the model's layers and heads); each view's record gets its parsed
    probe and its snapshots ``(step, answer, weights)``."""

    def work(ctx: JobContext) -> dict:
        begun = time.perf_counter()            # the wall cap counts from here: model building included
        run = live_run(spec.task, attention=spec.attention, seed=spec.seed, lr=spec.lr, warmup_steps=spec.warmup)
        heads = None
        if spec.task == "pronoun":
            heads = (len(run.model.encoder.layers), run.model.config.num_heads)
        watched = []
        for view in ctx.views:
            record = ctx.record(view)
            try:   # only its snapshot function and parsed probe are used (the model it builds is not)
                probe_run = live_run(spec.task, attention=spec.attention, probe=view.probe)
            except ValueError as exc:
                record["error"] = str(exc)
                continue
            record.update(probe=probe_run.probe, snaps=[])
            watched.append((view, record, probe_run.snapshot))
        losses: list[float] = []
        lrs: list[float] = []
        ctx.progress.update(step=0, steps=spec.steps, losses=losses, elapsed=0.0, heads=heads)
        snap_seconds = 0.0
        slowest = [0.0, time.perf_counter()]   # the longest step so far (snapshots included), the last step's end

        def take(step: int, due) -> None:
            nonlocal snap_seconds
            t0 = time.perf_counter()
            run.model.eval()
            with torch.no_grad():
                for view, record, fn in due:
                    out, w = snap_of(spec.task, fn(run.model))
                    record["snaps"].append((step, out, _frozen(w)))
            snap_seconds += time.perf_counter() - t0

        def on_step(p) -> bool:
            losses.append(p.loss)
            lrs.append(p.lr)
            take(p.step, [x for x in watched if p.step % x[0].every == 0 or p.step == p.steps])
            ctx.progress.update(step=p.step, elapsed=p.elapsed, loss=p.loss)
            now = time.perf_counter()
            slowest[:] = [max(slowest[0], now - slowest[1]), now]
            if ctx.stopped():
                return False
            # another step and the last snapshots must still end within the wall cap
            reserve = 2 * slowest[0] + 0.5
            return p.elapsed - snap_seconds < spec.time_cap and now - begun + reserve < wall_cap

        start = time.perf_counter()
        run.trainer.fit(run.batches, spec.steps, on_step)
        seconds = time.perf_counter() - start
        last = [x for x in watched if not x[1]["snaps"] or x[1]["snaps"][-1][0] != len(losses)]
        if last and losses:                  # a capped run: one last look at the probe
            take(len(losses), last)
        return {"losses": tuple(losses), "lrs": tuple(lrs), "seconds": seconds,
                "capped": len(losses) < spec.steps, "heads": heads}

    return work


QUEUE = RunQueue()     # the one queue of this server process (module state: no client message resets it)


def session_alive() -> Callable[[], bool]:
    """For the session running this script: True while its browser is connected (closing the tab frees its
    place in the queue). Streamlit is imported here only: the queue itself knows nothing of sessions."""
    try:   # private names (README, "Private Streamlit names"; guarded by tests/test_private_names.py)
        from streamlit.runtime import Runtime
        from streamlit.runtime.scriptrunner import get_script_run_ctx

        ctx = get_script_run_ctx()
        if ctx is None or not Runtime.exists():
            return lambda: True             # no server (AppTest): the queue's lease alone decides
        runtime, session = Runtime.instance(), ctx.session_id
        runtime.is_active_session           # noqa: B018 - looked up now, so a rename is found here
    except (ImportError, AttributeError):
        from .compat import missing
        missing("tab_closed", "streamlit.runtime.Runtime.is_active_session")
        return lambda: True                 # a closed tab keeps its place until its lease runs out
    return lambda: runtime.is_active_session(session)


def submit_training(spec: TrainingSpec, view: View, *, alive: Callable[[], bool] | None = None,
                    reuse_done: bool = True, queue: RunQueue | None = None) -> Ticket | None:
    queue = queue or QUEUE
    return queue.submit(spec, view, training_work(spec, wall_cap=queue.wall_cap), alive=alive,
                        reuse_done=reuse_done)

"""The live-run client of the pages that train in the server's queue (serving.training_queue): one place for what a
page does with a run -- submit it, tell whether this session has one pending, keep it once it has finished
(or say why it was not), and the live panel (its place in the queue, its progress, a Cancel button).

A page makes one ``LiveRun`` with only what differs: its namespace, the session-state key of its ticket, the
job of its settings, what to keep of a finished run and how to draw a run in progress. The session holds
``(ticket, data)`` under that key while a run is queued or running; ``data`` is the page's own (its settings).
Every message is ``common.*``: a cancelled run (nobody watched it) and a failed one are named apart on
every page.
"""
from __future__ import annotations

from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Any

import streamlit as st

from serving import training_queue as tq
from ui import anatomy
from ui import format as fmt
from ui.i18n import t

POLL = 1.0          # seconds between two looks at a queued or running run
WAITING = ("queued", "running")

Job = tuple[Hashable, Hashable, Callable[[tq.JobContext], Any]]      # (key, view, work) for RunQueue.submit


def default_progress(data, p: dict) -> str:
    return t("common.progress", step=p["step"], steps=p["steps"], s=fmt.fixed(p.get("elapsed", 0.0), 1))


def has_losses(status: tq.Status) -> bool:
    """A finished run worth keeping: a result with at least one step's loss."""
    return bool(status.result) and bool(status.result.get("losses"))


@dataclass(frozen=True)
class LiveRun:
    ns: str                                             # the page's namespace: its Cancel button's key
    ticket_key: str                                     # session state: (ticket, data) while pending
    job: Callable[[Any], Job]                           # the page's settings -> what the queue runs
    keep: Callable[[Any, tq.Status], None]              # a finished run -> the page's session state
    draw: Callable[[Any, tq.Status], None]              # a running run's charts (after its progress bar)
    progress: Callable[[Any, dict], str] = default_progress   # the progress bar's text
    usable: Callable[[tq.Status], bool] = has_losses    # a "done" run that fails this is named as failed
    again: Callable[[Any], bool] = lambda data: False   # True: this session has the run, train it anew

    @property
    def cancelled_key(self) -> str:
        return self.ticket_key + "_cancelled"

    # -------------------------------------------------------------- the session's run
    def pending(self) -> tuple[tq.Ticket, Any] | None:
        return st.session_state.get(self.ticket_key)

    def status(self) -> tq.Status | None:
        held = self.pending()
        return None if held is None else tq.QUEUE.status(held[0])

    def finished(self) -> bool:
        """This session's run has ended (done, cancelled or failed) and waits for harvest()."""
        status = self.status()
        return status is not None and status.state not in WAITING

    def drop(self) -> None:
        held = st.session_state.pop(self.ticket_key, None)
        if held is not None:
            tq.QUEUE.release(held[0])

    def start(self, data) -> None:
        """Queue the run of ``data`` (or join the same one another session started or finished). One place in
        the queue per session: a new press replaces the one held."""
        self.drop()
        key, view, work = self.job(data)
        ticket = tq.QUEUE.submit(key, view, work, alive=tq.session_alive(), reuse_done=not self.again(data))
        if ticket is None:
            anatomy.problem("common.err_queue_full", n=tq.QUEUE.max_waiting, s=fmt.fixed(tq.QUEUE.wall_cap, 0))
            return
        st.session_state[self.ticket_key] = (ticket, data)

    def harvest(self) -> None:
        """A finished run of this session goes to the page (keep), or a message says why not."""
        if st.session_state.pop(self.cancelled_key, False):
            st.info(t("common.run_cancelled"), icon=":material/stop_circle:")
        held = self.pending()
        if held is None:
            return
        ticket, data = held
        status = tq.QUEUE.status(ticket)
        if status.state in WAITING:
            return
        self.drop()
        if status.state == "done" and self.usable(status):
            self.keep(data, status)
        else:
            anatomy.problem("common.err_stopped" if status.state == "cancelled" else "common.err_failed")

    # -------------------------------------------------------------- the page's part
    def button(self, data, *, label: str, key: str) -> None:
        """Harvest, then the Train button (disabled while a run is pending; none when ``data`` is None: the
        page showed why) and, while a run is pending, the live panel. A press reruns the whole page, so what
        lies outside a fragment follows (a run another session has finished is kept at once: harvest)."""
        self.harvest()                       # before the button: a finished run enables it again
        if data is not None and st.button(label, key=key, type="primary", icon=":material/play_arrow:",
                                          disabled=self.pending() is not None):
            self.start(data)
            if self.pending() is not None:
                st.rerun()
        self.panel()

    def panel(self) -> None:
        """The live panel, only while a run is pending (its timer stops with the run)."""
        if self.pending() is not None:
            _panel(self)

    def cancel(self) -> None:
        self.drop()
        st.session_state[self.cancelled_key] = True


@st.fragment(run_every=POLL)
def _panel(run: LiveRun) -> None:
    """Where this session's run is, redrawn every POLL s: its place in the queue and an upper bound of the wait,
    or its progress and the page's live charts; the Cancel button gives the place up (or stops the run)."""
    held = run.pending()
    if held is None:
        return
    ticket, data = held
    status = tq.QUEUE.status(ticket)
    if status.state not in WAITING:
        st.rerun()                                            # the whole page: harvest() keeps the run
    if st.button(t("common.cancel_run"), key=f"{run.ns}_cancel_run", icon=":material/stop:"):
        run.cancel()
        st.rerun()
    if status.state == "queued":
        st.info(t("common.queue_position", pos=status.position, s=fmt.fixed(status.wait_bound, 0),
                  cap=fmt.fixed(tq.QUEUE.wall_cap, 0), workers=tq.QUEUE.workers), icon=":material/hourglass_top:")
        return
    if status.watchers > 1:
        st.caption(t("common.queue_shared", n=status.watchers - 1))
    p = status.progress
    if not p.get("step"):
        st.progress(0.0, text=t("common.progress_start"))
        return
    st.progress(min(p["step"] / p["steps"], 1.0), text=run.progress(data, p))
    run.draw(data, status)

"""ui.live_run, the live-run client of the training pages, against a real serving.training_queue.RunQueue running
tiny jobs: what a page shows while a run waits, runs, is kept, is cancelled (by the learner or because nobody
watched it) and fails -- the cancelled and the failed run named apart."""
import threading
import time

import pytest
from streamlit.testing.v1 import AppTest

from serving import training_queue as tq
from tests.apptest_util import exceptions
from ui import i18n, live_run

GATE = threading.Event()          # a "hold" job runs until this is set (or nobody watches it)


def work_of(kind: str, n: int):
    def work(ctx: tq.JobContext) -> dict:
        ctx.progress.update(step=0, steps=n)
        if kind == "fail":
            raise RuntimeError("boom")
        if kind == "hold":
            ctx.progress.update(step=1, elapsed=0.5)
            while not GATE.is_set() and not ctx.stopped():
                time.sleep(0.01)
        return {"losses": () if kind == "empty" else tuple(float(i) for i in range(n))}
    return work


def keep(data, status: tq.Status) -> None:
    import streamlit as st
    st.session_state["kept"] = (data, status.result["losses"])


def draw(data, status: tq.Status) -> None:
    import streamlit as st
    st.markdown(f"live chart of {data[0]} at step {status.progress['step']}")


LIVE = live_run.LiveRun("tiny", "_tiny_ticket", lambda data: (("tiny",) + data, "view", work_of(*data)),
                        keep, draw)


def page():
    import streamlit as st

    from tests.test_live_run import LIVE
    LIVE.button(st.session_state.get("data", ("ok", 3)), label="Train", key="go")


@pytest.fixture
def queue(monkeypatch):
    """A queue of its own (the server's is shared by the other tests), with a short lease."""
    q = tq.RunQueue(workers=1, wall_cap=10.0, lease=0.5)
    monkeypatch.setattr(tq, "QUEUE", q)
    GATE.clear()
    yield q
    GATE.set()
    q.close()


def open_tiny(data, lang: str = "en") -> AppTest:
    at = AppTest.from_function(page, default_timeout=30)
    at.session_state["lang"] = lang           # what the router sets from ?lang=
    at.session_state["data"] = data
    return at.run()


def until_harvested(at: AppTest, timeout: float = 20) -> AppTest:
    deadline = time.monotonic() + timeout
    while "_tiny_ticket" in at.session_state:
        assert time.monotonic() < deadline, "the run did not end"
        time.sleep(0.05)
        at.run()
    return at


def cat(lang: str = "en") -> dict:
    return i18n.catalog(lang)


def warnings(at: AppTest) -> list[str]:
    return [w.value for w in at.warning]


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_a_run_is_pending_then_kept(queue, lang):
    at = open_tiny(("ok", 3), lang)
    assert "_tiny_ticket" not in at.session_state and not at.button(key="go").disabled
    at.button(key="go").click().run()
    at = until_harvested(at)
    assert exceptions(at) == [] and warnings(at) == []
    assert at.session_state["kept"] == (("ok", 3), (0.0, 1.0, 2.0))
    assert not at.button(key="go").disabled
    assert not [b for b in at.button if b.key == "tiny_cancel_run"]      # no panel once the run is kept
    assert cat(lang)["common.cancel_run"] not in [b.label for b in at.button]


def test_a_queued_run_shows_its_place_then_its_progress_and_the_page_chart(queue):
    free = threading.Event()
    blocker = queue.submit("blocker", "v", lambda ctx: free.wait(20))   # holds the worker, watched or not
    deadline = time.monotonic() + 10
    while queue.status(blocker).state != "running":
        assert time.monotonic() < deadline
        time.sleep(0.01)
    at = open_tiny(("hold", 4))
    at.button(key="go").click().run()
    assert exceptions(at) == []
    head = cat()["common.queue_position"].split("{pos}")[0]
    shown = "\n".join(i.value for i in at.info)
    assert head + "1" in shown and "10 s" in shown                       # place 1, within the wall cap
    assert at.button(key="go").disabled
    assert at.button(key="tiny_cancel_run").label == cat()["common.cancel_run"]
    free.set()                                                           # the worker is free: ours runs
    queue.release(blocker)
    deadline = time.monotonic() + 10
    while not any("live chart of hold at step 1" in m.value for m in at.markdown):
        assert time.monotonic() < deadline, "the running run was not drawn"
        time.sleep(0.05)
        at.run()
    (bar,) = at.get("progress")
    assert bar.proto.text == cat()["common.progress"].format(step=1, steps=4, s="0.5")
    assert "_tiny_ticket" in at.session_state and at.button(key="go").disabled
    GATE.set()
    at = until_harvested(at)
    assert at.session_state["kept"] == (("hold", 4), (0.0, 1.0, 2.0, 3.0)) and warnings(at) == []


def test_two_sessions_share_one_run_and_are_told(queue):
    first, second = open_tiny(("hold", 2)), open_tiny(("hold", 2))
    first.button(key="go").click().run()
    second.button(key="go").click().run()
    deadline = time.monotonic() + 10
    expected = cat()["common.queue_shared"].format(n=1)
    while expected not in [c.value for c in second.caption]:
        assert time.monotonic() < deadline, "the shared run was not said"
        time.sleep(0.05)
        first.run()                       # both keep looking (the lease)
        second.run()
    assert first.session_state["_tiny_ticket"][0].job is second.session_state["_tiny_ticket"][0].job
    GATE.set()
    for at in (first, second):
        assert until_harvested(at).session_state["kept"] == (("hold", 2), (0.0, 1.0))
    assert queue.started == 1                                           # computed once


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_cancel_button_gives_the_run_up(queue, lang):
    at = open_tiny(("hold", 5), lang)
    at.button(key="go").click().run()
    ticket = at.session_state["_tiny_ticket"][0]
    at.button(key="tiny_cancel_run").click().run()
    assert exceptions(at) == []
    assert "_tiny_ticket" not in at.session_state and "kept" not in at.session_state
    assert cat(lang)["common.run_cancelled"] in [i.value for i in at.info]
    assert not at.button(key="go").disabled
    deadline = time.monotonic() + 10
    while queue.status(ticket).state not in ("cancelled",):             # nobody watches it: the worker stops
        assert time.monotonic() < deadline, queue.status(ticket).state
        time.sleep(0.02)
    assert cat(lang)["common.run_cancelled"] not in [i.value for i in at.run().info]   # said once


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_a_run_nobody_watched_is_named_stopped(queue, lang):
    at = open_tiny(("hold", 5), lang)
    at.button(key="go").click().run()
    ticket = at.session_state["_tiny_ticket"][0]
    deadline = time.monotonic() + 10
    while queue.status(ticket).state != "running":
        assert time.monotonic() < deadline
        time.sleep(0.02)
    time.sleep(1.0)                       # no look for longer than the lease: the worker stops the run
    at = until_harvested(at)
    assert warnings(at) == [cat(lang)["common.err_stopped"]]
    assert "kept" not in at.session_state and not at.button(key="go").disabled


@pytest.mark.parametrize("kind", ["fail", "empty"])
@pytest.mark.parametrize("lang", ["en", "zh"])
def test_a_failed_run_is_named_failed_not_stopped(queue, kind, lang):
    at = open_tiny((kind, 3), lang)
    at.button(key="go").click().run()
    at = until_harvested(at)
    assert exceptions(at) == []
    assert warnings(at) == [cat(lang)["common.err_failed"]]
    assert "boom" not in "\n".join(m.value for m in at.markdown)          # never the exception's text
    assert "kept" not in at.session_state and not at.button(key="go").disabled


def test_a_full_queue_is_said_and_nothing_is_pending(queue):
    queue.max_waiting = 0
    at = open_tiny(("ok", 2))
    at.button(key="go").click().run()
    assert warnings(at) == [cat()["common.err_queue_full"].format(n=0, s="10")]
    assert "_tiny_ticket" not in at.session_state and not at.button(key="go").disabled


def test_the_pages_use_the_client_and_only_common_messages():
    """The three training pages hold no copy of the client and no message of their own for it."""
    import pathlib
    root = pathlib.Path(__file__).resolve().parent.parent
    for name in ("training", "qk_norm", "induction_heads"):
        source = (root / "app_pages" / f"{name}.py").read_text(encoding="utf-8")
        assert "live_run.LiveRun(" in source and "run_every" not in source and "QUEUE.submit" not in source
        for lang in i18n.LANGS:
            own = {k.split(".", 1)[1] for k in i18n.catalog(lang) if k.startswith(f"{name}.")}
            assert not own & {"err_stopped", "err_failed", "err_queue_full", "queue_position", "progress_start"}

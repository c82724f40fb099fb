"""One AppTest walk of each page in each language, shared by the tests that read what the page draws.

``walk(key, lang)`` opens the page at its default URL, then opens each of its other tabs in turn (a page draws a
tab only while it is open) and keeps every run: the run's element tree (``AppTest`` binds a new tree to itself on
each run, so a shallow copy taken after the run keeps that run's own, with its widgets' values: ``keep``), its
exceptions, the exercises it offered to ask the class (``ui.poll.ask_button``), and, in English, what it passed to
"Show the code" and every Python code object that executed (every cache emptied before each English run, so
nothing a run shows is served from an earlier one). The walk is made once per test process and page; the tests
that assert on it (``SWEEP_MODULES``) are grouped by page and language at collection (tests/conftest.py) so that
one xdist worker walks each page once for all of them:

- tests/test_app.py: the page opens in both languages and shows its title;
- tests/test_no_spoilers.py: nothing above an exercise gives its answer away, in any tab;
- tests/test_lesson_order.py: no evidence above the exercise it answers, in any tab;
- tests/test_show_code.py: "Show the code" lists only code that ran (English);
- tests/test_zh_text.py: no English and no ASCII punctuation in what a Chinese page shows, in any tab;
- tests/test_poll.py: every exercise a page offers to ask the class is found again as labels in both languages;
- tests/test_course.py: each page says where it is in the course and links on to the next page, in both languages.
"""
from __future__ import annotations

import contextlib
import copy
import functools
import gc
import sys
import threading
from dataclasses import dataclass, field

import streamlit as st
from streamlit.testing.v1 import AppTest

from tests.apptest_util import exceptions, open_page

# the modules asserting on the walk, and the language of those of their tests that take none (test_poll walks
# both: after the page's English tests)
SWEEP_MODULES = {"test_app": "en", "test_no_spoilers": "en", "test_lesson_order": "en", "test_show_code": "en",
                 "test_zh_text": "zh", "test_poll": "zh", "test_course": "en"}
RECORDED = ("en",)          # the languages whose runs record what ran ("Show the code" is checked in English)


class Recorder:
    """The code objects that execute, in this thread and every thread started while recording."""

    def __init__(self):
        self.ran: set = set()

    def _profile(self, frame, event, arg):
        if event == "call":
            self.ran.add(frame.f_code)

    def __enter__(self):
        self._old = sys.getprofile(), threading.getprofile()
        threading.setprofile(self._profile)
        sys.setprofile(self._profile)
        return self

    def __exit__(self, *exc):
        sys.setprofile(self._old[0])
        threading.setprofile(self._old[1])


def clear_caches() -> None:
    """Every memo a page's computation could be served from, so whatever a run shows it computes (as on a
    fresh server). st.cache_resource holds only ui.models' loaded files (the training queue is kept elsewhere
    on purpose), so emptying it reloads the shipped checkpoints: without that, a function that runs while a
    file is read (bench.lra_reference) would count as run or not depending on which test ran first."""
    from serving import cache as ui_cache
    st.cache_data.clear()
    st.cache_resource.clear()
    for cache in list(ui_cache._BY_FUNCTION.values()):
        cache.clear()
    for obj in gc.get_objects():
        if type(obj) is functools._lru_cache_wrapper:        # type(): isinstance wakes lazy proxies
            module = getattr(obj, "__module__", "") or ""
            if module.startswith(("attention_core", "ui", "app_pages", "__main__")):
                obj.cache_clear()


class _Frozen:
    """What a kept run's widgets read their values from: the values they had in that run (a widget reads its
    value from the session, and the session moves on with the walk's next run)."""

    def __init__(self, tree):
        from streamlit.runtime.state.common import TESTING_KEY
        state = tree.session_state
        values: dict = {TESTING_KEY: dict(state[TESTING_KEY])} if TESTING_KEY in state else {}
        stack = [tree]
        while stack:
            node = stack.pop()
            stack.extend(getattr(node, "children", {}).values())
            wid = getattr(node, "id", None)
            if isinstance(wid, str) and wid:
                try:
                    values[wid] = state[wid]
                except (KeyError, AttributeError):
                    pass
        self._session_state = _Values(values)


class _Values(dict):
    def __bool__(self) -> bool:               # the element tree asserts the session exists
        return True


def keep(at: AppTest) -> tuple[AppTest, _Frozen]:
    """A view of ``at``'s last run that later runs leave as it is, once ``at`` has run again or is done with
    (``settle``): its widgets then read the values they had in this run."""
    return copy.copy(at), _Frozen(at._tree)


def settle(kept: AppTest, frozen: _Frozen) -> None:
    kept._tree._runner = frozen     # ``at`` no longer runs from this tree (its next run needs the live session)


@dataclass
class Run:
    where: str                      # "default URL" or "tab '<label>'"
    at: AppTest                     # this run's elements (a shallow copy of the walk's AppTest after the run)
    errors: list[str]
    asked: dict = field(default_factory=dict)     # exercise key -> (question, options, answer) offered to a poll
    shown: list = field(default_factory=list)     # the objects passed to "Show the code" (recorded languages)
    ran: set = field(default_factory=set)         # the code objects that executed (recorded languages)


@contextlib.contextmanager
def _recording(places: list[tuple[object, str]], record):
    """Each ``(module, name)`` of ``places`` replaced, while the block runs, by one function that calls
    ``record`` with its arguments and then what the last place held."""
    originals = [getattr(module, name) for module, name in places]

    def recording(*args, **kwargs):
        record(*args, **kwargs)
        return originals[-1](*args, **kwargs)

    for module, name in places:
        setattr(module, name, recording)
    try:
        yield
    finally:
        for (module, name), original in zip(places, originals):
            setattr(module, name, original)


def _recording_show_code(shown: list):
    """Every object passed to show_code: by a page (``ui.anatomy.show_code``, looked up when its script runs) or by
    the lesson's end (``ui.code_view.show_code``, what a page declared)."""
    import ui.anatomy
    import ui.code_view
    return _recording([(ui.anatomy, "show_code"), (ui.code_view, "show_code")],
                      lambda *objs, **kw: shown.extend(objs))


def _recording_polls(asked: dict):
    """Every exercise the run offers to ask the class (``ui.poll.ask_button``: its question, options, answer)."""
    import ui.poll

    def record(key, question, options, answer):
        asked[key] = (question, list(options), answer)
    return _recording([(ui.poll, "ask_button")], record)


@functools.lru_cache(maxsize=None)
def walk(key: str, lang: str) -> tuple[Run, ...]:
    """The runs of ``key`` in ``lang``: the default URL, then each other tab opened in turn."""
    record = lang in RECORDED
    shown: list = []
    asked: dict = {}

    def one(where: str, run) -> tuple[Run, AppTest, _Frozen]:
        shown.clear()
        asked.clear()
        if record:
            clear_caches()
        with (Recorder() if record else contextlib.nullcontext()) as rec:
            at = run()
        kept, frozen = keep(at)
        return Run(where, kept, exceptions(at), dict(asked), list(shown), rec.ran if record else set()), at, frozen

    with _recording_show_code(shown), _recording_polls(asked):
        first, at, frozen = one("default URL", lambda: open_page(key, lang))
        runs, pending = [first], [(first.at, frozen)]
        for label in [tab.label for tab in at.tabs][1:]:
            def rerun(label=label):
                at.session_state["tab"] = label
                return at.run()
            run, _, frozen = one(f"tab {label!r}", rerun)
            runs.append(run)
            pending.append((run.at, frozen))
    for kept, frozen in pending:
        settle(kept, frozen)
    return tuple(runs)

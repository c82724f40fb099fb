""""Show the code" shows code that ran (never code the page did not run).

Each page runs once at its default URL and once more per other tab (one AppTest per page, every cache
emptied before each run so no result is served from an earlier one). During each run the test records every
object passed to ``ui.anatomy.show_code`` and every Python code object that executed (``sys.setprofile`` and
``threading.setprofile``: AppTest runs the script in its own thread), then fails listing each shown object that
did not run: a function whose code never executed, a class none of whose own methods (``__init__``,
``forward`` ...) executed. Runtime: about 40-55 s on a shared 2-core machine (17 tests).
"""
from __future__ import annotations

import functools
import gc
import inspect
import sys
import threading

import pytest
import streamlit as st

import ui.anatomy
import ui.code_view
import ui.presenter
from serving import cache as ui_cache
from tests.apptest_util import exceptions, open_page
from ui.registry import available_pages

PAGE_KEYS = [p.key for p in available_pages()]


def _clear_caches() -> None:
    """Every memo a page's computation could be served from, so whatever a run shows it computes (as on a
    fresh server). st.cache_resource holds only ui.models' loaded files (the training queue is kept elsewhere
    on purpose), so emptying it reloads the shipped checkpoints: without that, a function that runs while a
    file is read (bench.lra_reference) would count as run or not depending on which test ran first."""
    st.cache_data.clear()
    st.cache_resource.clear()
    for cache in list(ui_cache._BY_FUNCTION.values()):
        cache.clear()
    for obj in gc.get_objects():
        if type(obj) is functools._lru_cache_wrapper:        # type(): isinstance wakes lazy proxies
            module = getattr(obj, "__module__", "") or ""
            if module.startswith(("attention_core", "ui", "app_pages", "__main__")):
                obj.cache_clear()


def _code_of(fn):
    fn = inspect.unwrap(fn) if callable(fn) else fn
    fn = getattr(fn, "__func__", fn)                     # bound method, classmethod, staticmethod
    return getattr(fn, "__code__", None)


def codes_of(obj) -> set:
    """The code objects whose execution counts as "obj ran"."""
    if inspect.isclass(obj):
        codes = set()
        for value in vars(obj).values():
            if isinstance(value, property):
                value = value.fget
            code = _code_of(value) if (callable(value) or isinstance(value, (staticmethod, classmethod))) else None
            if code is not None:
                codes.add(code)
        return codes
    code = _code_of(obj)
    return {code} if code is not None else set()


def shown_name(obj) -> str:
    return f"{getattr(obj, '__module__', '?')}.{getattr(obj, '__qualname__', repr(obj))}"


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


@pytest.fixture
def shown(monkeypatch):
    """Every object passed to show_code: by a page (``ui.anatomy.show_code``, looked up when its script runs) or by
    the lesson's end (``ui.code_view.show_code``, what a page declared): without the second, a converted page's
    list would go unchecked."""
    objects: list = []
    original = ui.code_view.show_code

    def recording_show_code(*objs, **kw):
        objects.extend(objs)
        return original(*objs, **kw)

    monkeypatch.setattr(ui.anatomy, "show_code", recording_show_code)
    monkeypatch.setattr(ui.code_view, "show_code", recording_show_code)
    return objects


def _not_run(objects, ran) -> list[str]:
    return [shown_name(o) for o in dict.fromkeys(objects) if not (codes_of(o) & ran)]


def test_recorder_tells_a_called_function_from_one_not_called():
    """The check itself: a function called in an AppTest-like thread counts, one never called does not."""
    def called():
        return 1

    def never():
        return 2

    with Recorder() as rec:
        worker = threading.Thread(target=called)
        worker.start()
        worker.join()
    assert _not_run([called, never, Recorder], rec.ran) == [shown_name(never)]


@pytest.mark.parametrize("key", PAGE_KEYS)
def test_show_code_shows_only_code_that_ran(key, shown):
    _clear_caches()
    with Recorder() as rec:
        at = open_page(key, "en")
    errors = exceptions(at)
    runs = [("default URL", list(shown), rec.ran)]
    for label in [tab.label for tab in at.tabs][1:]:
        shown.clear()
        _clear_caches()
        at.session_state["tab"] = label
        with Recorder() as rec:
            at.run()
        errors += exceptions(at)
        runs.append((f"tab {label!r}", list(shown), rec.ran))
    assert errors == [], f"{key} raised: {errors}"
    violations = [f"{key} ({where}): {name}" for where, objects, ran in runs for name in _not_run(objects, ran)]
    assert violations == [], "show_code shows objects that did not run:\n" + "\n".join(violations)


def test_the_code_is_drawn_only_when_its_expander_is_open(monkeypatch):
    """Closed (the default), "Show the code" draws no source: highlighted code is thousands of DOM nodes that
    every rerun would re-render (the redraw budget). Opened (``?code_…=true``, the expander's bound key), it draws the
    source of each object passed, under the object's name."""
    shown = []
    original = ui.code_view.show_code

    def recording(*objects, **kw):
        shown.append((objects, kw.get("key")))
        original(*objects, **kw)

    monkeypatch.setattr(ui.code_view, "show_code", recording)
    label = "Show the code that produced this"
    at = open_page("scaling", "en")
    assert exceptions(at) == [] and shown
    closed = [x for x in at.get("expander") if x.label == label]
    assert closed and all(not list(x.get("code")) for x in closed)
    objects, key = shown[0]
    assert key == ui.presenter.code_key("scaling")     # one key per page, ?code_scaling=true
    at = open_page("scaling", "en", {key: "true"})
    assert exceptions(at) == []
    opened = [x for x in at.get("expander") if x.label == label and list(x.get("code"))]
    assert len(opened) == 1
    assert [c.value for c in opened[0].get("code")] == [ui.anatomy._source(o).rstrip() for o in objects]

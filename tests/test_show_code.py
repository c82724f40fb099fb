""""Show the code" shows code that ran (never code the page did not run).

Each page runs once at its default URL and once more per other tab, in English (the shared walk of
tests/sweep.py: one AppTest per page, every cache emptied before each run so no result is served from an earlier
one). During each run the walk records every object passed to ``ui.anatomy.show_code`` and every Python code
object that executed (``sys.setprofile`` and ``threading.setprofile``: AppTest runs the script in its own thread);
the test fails listing each shown object that did not run: a function whose code never executed, a class none of
whose own methods (``__init__``, ``forward`` ...) executed.
"""
from __future__ import annotations

import inspect
import threading

import pytest

import ui.anatomy
import ui.code_view
import ui.presenter
from tests.apptest_util import exceptions, open_page
from tests.sweep import Recorder, walk
from ui.registry import available_pages

PAGE_KEYS = [p.key for p in available_pages()]


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
def test_show_code_shows_only_code_that_ran(key):
    runs = walk(key, "en")                    # every cache emptied before each run, every call recorded
    errors = [e for run in runs for e in run.errors]
    assert errors == [], f"{key} raised: {errors}"
    assert runs[0].shown or key in ("home", "glossary", "summary", "teach", "poll"), f"{key} showed no code"
    violations = [f"{key} ({run.where}): {name}" for run in runs for name in _not_run(run.shown, run.ran)]
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

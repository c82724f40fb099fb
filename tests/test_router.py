"""The router's own controls and the moves between pages, as a student clicks them.

- The sidebar's presenter switch and language switch, on every page in both languages: no traceback, the page is
  drawn again in presenter mode (``?present=1`` in the address, the step bar shown) or in the other language.
- Every ordered pair of pages (run A, go to B with A's control values), in both languages: no traceback, and every
  control of B starts where a fresh visit of B starts — a value of A's control with the same key (``h``, ``n``,
  ``layers`` ...) never reaches it. The pairs are walked as one Eulerian circuit of the complete directed graph of
  pages, so each ordered pair is one consecutive move: 22 x 21 moves per language, walked in ``CHUNKS`` stretches
  (each its own session, starting on a fresh visit of its first page) so that two workers share them.
"""
from __future__ import annotations

import functools

import pytest

from tests.apptest_util import NOT_LESSONS, exceptions, open_page, run
from ui.i18n import catalog
from ui.registry import available_pages

PAGES = [p.key for p in available_pages()]
OTHER = {"en": "zh", "zh": "en"}


def title_of(key: str, lang: str) -> str:
    return catalog(lang)[f"{key}.title"]


def path_of(key: str) -> str:
    return f"app_pages/{key}.py"


@pytest.mark.parametrize("lang", ["en", "zh"])
@pytest.mark.parametrize("key", PAGES)
def test_the_router_switches_work_on_every_page(key, lang):
    at = open_page(key, lang)
    assert exceptions(at) == []
    # the language switch: the same page, in the other language
    (switch,) = [w for w in at.sidebar.get("button_group") if w.key == "_lang_switch"]
    switch.set_value(OTHER[lang]).run()
    assert exceptions(at) == [], exceptions(at)
    assert at.query_params["lang"] == [OTHER[lang]] or at.query_params["lang"] == OTHER[lang]
    assert title_of(key, OTHER[lang]) in [t.value for t in at.title]
    # the presenter switch: the same page, in presenter mode, with the switch back to off
    at.sidebar.toggle(key="present_toggle").set_value(True)
    run(at)                                  # held back, then what the browser reports: the page
    assert exceptions(at) == [], exceptions(at)
    assert str(at.query_params.get("present", "")).strip("[]'") == "1", dict(at.query_params)
    assert at.sidebar.toggle(key="present_toggle").value is False
    assert title_of(key, OTHER[lang]) in [t.value for t in at.title]
    if key not in NOT_LESSONS:                              # the concept pages are lessons: the step bar is shown
        assert [b for b in at.button if b.key == "present_next"], "no step bar in presenter mode"


WIDGETS = {"Slider", "SelectSlider", "NumberInput", "Selectbox", "Radio", "Toggle", "Checkbox", "TextInput",
           "TextArea", "Multiselect", "ButtonGroup", "DateInput", "TimeInput", "ColorPicker"}


def control_values(at) -> dict[str, object]:
    """Key -> value of every keyed control drawn in the main area (the router's sidebar controls excluded)."""
    values, stack = {}, [at.main]
    while stack:
        node = stack.pop()
        stack.extend(getattr(node, "children", {}).values())
        if type(node).__name__ in WIDGETS and getattr(node, "key", None):
            try:
                values[node.key] = node.value
            except Exception:  # noqa: BLE001 - a control whose value AppTest cannot read is not compared
                pass
    return values


def euler_circuit(nodes: list[str], start: str) -> list[str]:
    """A closed walk through the complete directed graph on ``nodes`` (no self-loops) that uses every ordered pair
    (a, b) exactly once as a consecutive step (Hierholzer's algorithm)."""
    out = {a: [b for b in reversed(nodes) if b != a] for a in nodes}
    stack, walk = [start], []
    while stack:
        v = stack[-1]
        if out[v]:
            stack.append(out[v].pop())
        else:
            walk.append(stack.pop())
    return walk[::-1]


CHUNKS = 4


def stretch(chunk: int) -> list[str]:
    """The ``chunk``-th of ``CHUNKS`` consecutive stretches of the circuit; neighbouring stretches share a page, so
    every move of the circuit is in exactly one of them."""
    walk = euler_circuit(PAGES, "home")
    moves = len(walk) - 1
    lo, hi = chunk * moves // CHUNKS, (chunk + 1) * moves // CHUNKS
    return walk[lo:hi + 1]


def test_the_circuit_covers_every_ordered_pair_once():
    walk = euler_circuit(PAGES, "home")
    pairs = list(zip(walk, walk[1:]))
    assert len(pairs) == len(set(pairs)) == len(PAGES) * (len(PAGES) - 1)
    assert walk[0] == walk[-1] == "home"
    chunked = [pair for c in range(CHUNKS) for pair in zip(stretch(c), stretch(c)[1:])]
    assert chunked == pairs                         # the stretches, one after another, are the circuit


@functools.lru_cache(maxsize=None)
def fresh_values(lang: str) -> dict[str, dict[str, object]]:
    """Each page's control values on a fresh visit (once per worker and language)."""
    fresh = {}
    for key in PAGES:
        at = open_page(key, lang)
        assert exceptions(at) == [], (key, exceptions(at))
        fresh[key] = control_values(at)
    return fresh


@pytest.mark.slow
@pytest.mark.parametrize("chunk", range(CHUNKS))
@pytest.mark.parametrize("lang", ["en", "zh"])
def test_every_ordered_pair_of_pages_navigates_without_carrying_values(lang, chunk):
    fresh = fresh_values(lang)
    assert "h" in set(fresh["qkv"]) & set(fresh["multihead"])      # a key two pages share: what is at risk
    walk = stretch(chunk)
    at = open_page(walk[0], lang)
    problems, unsent = [], []
    for a, b in zip(walk, walk[1:]):
        try:
            # a browser re-sends the values of page a's controls with the move once it has rerun a (R); AppTest
            # sends every control of its last run, so the move alone is that path (Chromium presses R in
            # tests/test_router_browser.py)
            at.switch_page(path_of(b))
            at.run()
        except ValueError:
            # AppTest cannot write back a selectbox whose value is a label of the other language (the pronoun
            # page keeps the learner's choice across a language switch): a browser can, and
            # tests/test_router_browser.py moves on from there. Here the walk goes on from b, afresh.
            unsent.append(a)
            at = open_page(b, lang)
        if exceptions(at):
            problems.append(f"{a} -> {b}: {exceptions(at)[0][:160]}")
            at = open_page(b, lang)                # go on from a clean session: report every pair, not the first
            continue
        carried = {k: v for k, v in control_values(at).items() if k in fresh[b] and v != fresh[b][k]}
        if carried:
            problems.append(f"{a} -> {b}: controls not at their fresh values {carried}")
    assert problems == [], f"{len(problems)} moves:\n" + "\n".join(problems[:40])
    assert set(unsent) <= {"pronoun"}, unsent

"""The pages as a course: following "next" from home visits every page once, in the registry's order, in both
languages and in presenter mode; "you are here" under every page; home's "start here"; the order's invariants."""
from urllib.parse import parse_qs

import pytest
from streamlit.testing.v1 import AppTest

from tests.apptest_util import APP, exceptions, run
from tests.sweep import walk
from ui import course
from ui.i18n import catalog
from ui.registry import PAGES, SECTIONS, available_pages, spec_of

PAGE_KEYS = [p.key for p in available_pages()]


def links(at: AppTest) -> list:
    return list(at.get("page_link"))


def course_link(at: AppTest, lang: str, kind: str):
    """The footer's link of ``kind`` ("prev", "next"), or None; there is at most one."""
    prefix = catalog(lang)[f"common.course_{kind}"].split("{")[0]
    found = [link for link in links(at) if link.proto.label.startswith(prefix)
             and not link.proto.label.startswith(catalog(lang)["common.course_next_core"].split("{")[0])]
    assert len(found) <= 1, [f.proto.label for f in found]
    return found[0] if found else None


def expected_position(key: str, lang: str) -> str:
    """"Page i of n · core path · about m min", from the registry and the catalogue (not from ui.course)."""
    cat, pages = catalog(lang), available_pages()
    spec = spec_of(key)
    kind = cat["common.course_core" if spec.core else "common.course_optional"]
    return cat["common.course_position"].format(i=pages.index(spec) + 1, n=len(pages), kind=kind,
                                                minutes=spec.minutes)


def open_link(key: str, params: dict[str, str]) -> AppTest:
    """A page opened as its link opens it. Each hop gets a new session: AppTest keeps the widget state of a page
    left behind (qkv's bandwidth slider "h" reaches multihead's head-count slider "h"), which a browser drops
    on a page switch (checked in Chromium: qkv → scaling → masking → multihead shows no error)."""
    at = AppTest.from_file(APP, default_timeout=120)
    for name, value in params.items():
        at.query_params[name] = value
    if key != "home":
        at.switch_page(spec_of(key).path)
    return run(at)


@pytest.mark.parametrize("lang", ["en", "zh"])
@pytest.mark.parametrize("key", PAGE_KEYS)
def test_each_page_leads_on_to_the_next_in_order(key, lang):
    """Following "next" from home visits every page once, in the registry's order: each page, as its link opens it
    (the shared walk of tests/sweep.py: the default URL in its language), says where it is, links back to the page
    before it and on to the page after it, in its language and not in presenter mode. Home is first and the last
    page has no "next", so the chain from home is the registry's order."""
    i = PAGE_KEYS.index(key)
    at = walk(key, lang)[0].at
    assert exceptions(at) == [], (key, exceptions(at))
    assert expected_position(key, lang) in [c.value for c in at.caption], f"{key}: no 'you are here'"
    before, nxt = course_link(at, lang, "prev"), course_link(at, lang, "next")
    home = PAGE_KEYS[0]                                  # its link's page is "": the app's root
    assert (before is None) == (i == 0), key
    assert before is None or before.proto.page == ("" if PAGE_KEYS[i - 1] == home else PAGE_KEYS[i - 1]), key
    assert (nxt is None) == (i == len(PAGE_KEYS) - 1), key
    if nxt is not None:
        query = parse_qs(nxt.proto.query_string)
        assert query["lang"] == [lang] and "present" not in query, (key, nxt.proto.query_string)
        assert nxt.proto.page == PAGE_KEYS[i + 1], (key, nxt.proto.page)


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_next_from_home_visits_every_page_once_in_order_in_presenter_mode(lang, present=True):
    params = {"lang": lang, **({"present": "1"} if present else {})}
    visited, key = [], "home"
    while True:
        at = open_link(key, params)
        assert exceptions(at) == [], (key, exceptions(at))
        visited.append(key)
        assert expected_position(key, lang) in [c.value for c in at.caption], f"{key}: no 'you are here'"
        before = course_link(at, lang, "prev")
        assert (before is None) == (key == "home"), key
        nxt = course_link(at, lang, "next")
        if nxt is None:
            break
        query = parse_qs(nxt.proto.query_string)
        assert query["lang"] == [lang], (key, nxt.proto.query_string)
        assert (query.get("present") == ["1"]) == present, (key, nxt.proto.query_string)
        params = {name: values[0] for name, values in query.items()}
        key = nxt.proto.page
        assert key not in visited, f"next leads back to {key}"
    assert visited == [p.key for p in available_pages()]


def test_neighbours_and_core_path():
    pages = available_pages()
    keys = [p.key for p in pages]
    assert course.neighbours(keys[0]) == (None, pages[1])
    assert course.neighbours(keys[-1]) == (pages[-2], None)
    assert course.neighbours("no_such_page") == (None, None)
    for i, spec in enumerate(pages[:-1]):
        core = course.next_core(spec.key)
        rest = pages[i + 1:]
        if core is None:
            assert not any(p.core for p in rest), spec.key
        else:
            assert core.core and all(not p.core for p in pages[i + 1:keys.index(core.key)]), spec.key


def test_order_follows_the_sections_and_the_narrative():
    """The navigation groups pages by section: PAGES lists the sections in SECTIONS' order, each contiguous, so
    the sidebar's order is the "next" order. The tutorials open with the bottleneck; pages that lean on another
    come after it."""
    seen = [p.section for p in PAGES]
    runs = [s for i, s in enumerate(seen) if i == 0 or seen[i - 1] != s]
    assert runs == [s for s in SECTIONS if s in seen], runs
    keys = [p.key for p in PAGES]
    assert keys[:3] == ["home", "bottleneck", "alignment"]
    for first, then in (("bottleneck", "qkv"), ("qkv", "scaling"), ("scaling", "masking"), ("masking", "multihead"),
                        ("positional", "long_context"), ("kv_cache", "gqa"), ("kv_cache", "attention_sinks"),
                        ("encoder", "pronoun"), ("efficiency", "kv_cache"), ("induction_heads", "summary")):
        assert keys.index(first) < keys.index(then), (first, then)
    assert all(1 <= p.minutes <= 30 for p in PAGES)
    assert sum(p.core for p in PAGES) >= 8 and sum(not p.core for p in PAGES) >= 5


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_home_says_start_here_and_marks_core_and_time(lang):
    at = AppTest.from_file(APP, default_timeout=60)
    at.query_params["lang"] = lang
    at.run()
    cat = catalog(lang)
    assert cat["home.start_here"] in [s.value for s in at.subheader]
    first_core = next(p for p in available_pages() if p.core and p.key != "home")
    start = [link for link in links(at) if link.proto.label == cat["home.start_link"].format(
        title=cat[f"nav.{first_core.key}"])]
    assert start and start[0].proto.page == first_core.key
    captions = [c.value for c in at.caption]
    for spec in available_pages():
        if spec.key != "home":
            assert course.kind(spec) and cat["home.card_meta"].format(
                kind=cat["common.course_core" if spec.core else "common.course_optional"],
                minutes=spec.minutes) in captions


@pytest.mark.parametrize("lang", ["en", "zh"])
@pytest.mark.parametrize("key, needs", [("attention_sinks", "kv_cache"), ("long_context", "positional"),
                                        ("gqa", "kv_cache")])
def test_a_page_links_the_page_it_builds_on(key, needs, lang):
    at = AppTest.from_file(APP, default_timeout=120)
    at.query_params["lang"] = lang
    at.run()
    at.switch_page(spec_of(key).path).run()
    assert exceptions(at) == []
    assert needs in [link.proto.page for link in links(at)
                     if link.proto.label != catalog(lang)["common.course_prev"].format(title=catalog(lang)[
                         f"nav.{needs}"])], f"{key} has no link to {needs}"


def test_embed_hides_the_navigation(monkeypatch):
    """``?embed=true`` (read as st.context.is_embedded): st.navigation draws no page list, the page still runs.
    AppTest runs the router in this process, so a wrapper around st.navigation records where it was asked to
    draw the pages."""
    import streamlit as st

    asked: list[str] = []
    real = st.navigation

    def recording(pages, **kwargs):
        asked.append(kwargs.get("position", "sidebar"))
        return real(pages, **kwargs)

    monkeypatch.setattr(st, "navigation", recording)
    for embedded in (False, True):
        asked.clear()
        at = AppTest.from_file(APP, default_timeout=120)
        at.query_params["lang"] = "en"
        at.context = {"is_embedded": embedded}
        at.run()
        at.switch_page("app_pages/qkv.py").run()
        assert exceptions(at) == []
        assert catalog("en")["qkv.title"] in [t.value for t in at.title]
        assert asked and set(asked) == {"hidden" if embedded else "sidebar"}, asked
        embed_css = [h for h in at.get("html") if course.EMBED_CSS in h.proto.body]
        assert bool(embed_css) == embedded           # the router's own sidebar widgets are hidden too

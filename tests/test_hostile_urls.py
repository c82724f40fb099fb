"""Any value a link can carry, in any URL-bound control of any page: never a traceback; a value the page
cannot use is ignored or clamped, and the message under the title names it (serving.url_guard).

The bound keys are found, not listed: every literal ``key=`` of a call with ``bind="query-params"`` in the
page source, plus every widget the page actually draws whose proto carries a ``query_param_key`` (this finds
``ui.controls.seed``/``sentence`` and keys built at run time). A new control is covered without editing
this file.

Runtime: 57-75 s wall, 28 s CPU on the shared 2-core machine (load 7-10). Each page gets ``RUNS`` runs in English
(or one per tab) and one in Chinese; each run sets every bound key at once, key i to hostile class
(i + offset + 5 r), so the classes rotate over a page's keys and runs; the first run gives every number input a
number beyond any integer (it used to crash the page: OverflowError). ``HOSTILE_URLS=all`` gives every key every class
(a sweep for finding bugs: 13 pages pass it, 170 s wall, 64 s CPU). Before the URL guard, 12 of the 13 pages
raise and the 13th (alignment) drops ``?day=abc`` without a message.
"""
from __future__ import annotations

import ast
import os
import re

import pytest
from streamlit.runtime.state.query_params import CLIENT_STATE_QUERY_STRING_MAX_LENGTH
from streamlit.testing.v1 import AppTest

from tests.apptest_util import ROOT, exceptions, open_page
from ui.i18n import catalog
from ui.registry import available_pages

HOSTILE: list[tuple[str, str | list[str]]] = [
    ("inf", "inf"), ("-inf", "-inf"), ("nan", "nan"), ("1e400", "1e400"), ("digits", "9" * 5000),
    ("negative", "-3"), ("zero", "0"), ("float", "2.5"), ("text", "abc"), ("cjk", "注意力机制"),
    ("emoji", "🙂🔥"), ("100kb", "x" * 100_000), ("html", "<b>x</b><script>alert(1)</script>"),
    ("unknown", "no-such-option"), ("repeated", ["1", "7"]), ("huge", "99999999"), ("empty", ""),
    ("many", list("abcdefgh")),   # beyond a multiselect's max_selections
]
OVERFLOW = ["inf", "-inf", "1e400", "9" * 5000]
RUNS = 3
EVERY = os.environ.get("HOSTILE_URLS") == "all"
PAGES = [p.key for p in available_pages() if p.key != "home"]
NOT_CONTROLS = {"lang"}


def source_keys(page: str) -> set[str]:
    """Literal keys of the bound controls written in ``app_pages/<page>.py`` and in its sections' module
    ``ui/<page>_sections.py`` (where a page's section bodies live)."""
    keys = set()
    files = [ROOT / "app_pages" / f"{page}.py", ROOT / "ui" / f"{page}_sections.py"]
    trees = [ast.parse(f.read_text(encoding="utf-8")) for f in files if f.exists()]
    for node in (n for tree in trees for n in ast.walk(tree)):
        if isinstance(node, ast.Call):
            kw = {k.arg: k.value for k in node.keywords}
            bind, key = kw.get("bind"), kw.get("key")
            if (isinstance(bind, ast.Constant) and bind.value == "query-params" and isinstance(key, ast.Constant)
                    and isinstance(key.value, str)):
                keys.add(key.value)
    return keys


def drawn_widgets(at: AppTest) -> dict[str, str]:
    """Key -> widget kind (AppTest's class name, e.g. NumberInput) of every URL-bound widget drawn in this run,
    main area and sidebar."""
    kinds, stack = {}, [at._tree]
    while stack:
        node = stack.pop()
        stack.extend(getattr(node, "children", {}).values())
        proto = getattr(node, "proto", None)
        key = getattr(proto, "query_param_key", "") if proto is not None else ""
        if key and key not in NOT_CONTROLS:
            kinds[key] = type(node).__name__
    return kinds


def drawn_keys(at: AppTest) -> set[str]:
    return set(drawn_widgets(at))


class Page:
    """What a page binds, found by running it at its defaults and once per tab (a tab's body runs only when
    it is open): its bound keys, their default values, the tab control's key and labels."""

    def __init__(self, page: str):
        self.page = page
        at = open_page(page, "en")
        assert exceptions(at) == [], f"{page} fails at its defaults"
        self.defaults = self._values(at)
        self.kinds = drawn_widgets(at)
        self.tabs = [tab.label for tab in at.tabs]
        self.tab_key = next((k for k in source_keys(page) if k == "tab"), None) if self.tabs else None
        self.tab_defaults: dict = {}     # the defaults of controls drawn only in another tab (``spells_default``)
        for label in self.tabs[1:] if self.tab_key else []:
            at.session_state[self.tab_key] = label
            at.run()
            self.tab_defaults = self._values(at) | self.tab_defaults

    @staticmethod
    def _values(at: AppTest) -> dict:
        return {k: at.session_state[k] if k in at.session_state else None for k in drawn_keys(at)}

    def keys(self) -> list[str]:
        return sorted(source_keys(self.page) | set(self.defaults))

    def spells_default(self, key: str, sent) -> bool:
        """``?key=<the default>`` is dropped from the URL without a message: nothing was rejected."""
        default = self.defaults.get(key, self.tab_defaults.get(key))
        if isinstance(sent, list) or default is None:
            return False
        try:
            return float(sent) == float(default)
        except (TypeError, ValueError, OverflowError):
            return str(sent) == str(default)


_PAGES: dict[str, Page] = {}


def page_info(page: str) -> Page:
    if page not in _PAGES:
        _PAGES[page] = Page(page)
    return _PAGES[page]


def test_discovery_finds_the_controls():
    """The discovery is not vacuous: it sees literal keys, the shared seed/sentence controls, keys made at run
    time, and the tabs of a page."""
    assert {"n", "d", "base", "shuf"} <= set(page_info("positional").keys())
    assert "seed" in page_info("scaling").keys() and "text" in page_info("encoder").keys()
    assert page_info("scaling").kinds["seed"] == "NumberInput"
    qkv = page_info("qkv")
    assert len(qkv.tabs) == 4 and qkv.tab_key == "tab"
    library = drawn_keys(open_page("qkv", "en", {"tab": qkv.tabs[1]}))   # keys made from an f-string
    assert {"qs", "qc", "qh"} <= library and not {"qs", "qc", "qh"} & source_keys("qkv")


def plan(info: Page) -> list[tuple[str, dict]]:
    """(language, params) of each run of a page: every key hostile, the classes rotating over keys and runs;
    on a page with tabs, each English run opens another tab (so its controls are drawn and read)."""
    keys, offset = info.keys(), sum(map(ord, info.page))
    runs = range(max(len(HOSTILE) if EVERY else RUNS, len(info.tabs)))
    out = []
    for r in runs:
        params = {k: HOSTILE[(i + offset + r * 5) % len(HOSTILE)][1] for i, k in enumerate(keys)}
        if r == 0:   # number inputs given a number beyond any integer used to crash the page
            params.update({k: OVERFLOW[i % len(OVERFLOW)] for i, k in enumerate(keys)
                           if info.kinds.get(k) == "NumberInput"})
        if info.tab_key:
            params[info.tab_key] = info.tabs[r % len(info.tabs)]
        out.append(("en", params))
    out.append(("zh", {k: HOSTILE[(i + offset + 11) % len(HOSTILE)][1] for i, k in enumerate(keys)}))
    return out


def named_in(text: str, key: str, lang: str) -> bool:
    """The message names parameter ``key`` (escaped as Markdown, quoted as the catalog quotes it)."""
    start = catalog(lang)["common.url_param"].split("{name}")[0]
    escaped = re.sub(r"([\\`*_{}\[\]()#+\-.!|<>~$])", r"\\\1", key)
    return start + escaped in text


def url_value(at: AppTest, key: str):
    value = at.query_params.get(key)
    return value[0] if isinstance(value, list) and len(value) == 1 else value


def check_run(info: Page, lang: str, params: dict) -> set[str]:
    """Open the page with ``params``: no exception, the page is drawn, and every value Streamlit dropped or
    corrected (the URL no longer says what the link said) is named in the message. Returns the keys drawn."""
    page = info.page
    at = open_page(page, lang, params)
    shown = {k: str(v)[:30] for k, v in params.items()}
    assert exceptions(at) == [], f"{page} ({lang}) raised with {shown}"
    assert catalog(lang)[f"{page}.title"] in [t.value for t in at.title], f"{page} ({lang}) lost its page"
    warnings = "\n".join(w.value for w in at.warning)
    drawn = drawn_keys(at)
    for key, sent in params.items():
        if key not in drawn or sent == "":
            continue   # a control this setting does not draw does not read its value; "?k=" means "not set"
        kept = url_value(at, key)
        if kept != (sent[0] if isinstance(sent, list) and len(sent) == 1 else sent):
            if kept is None and info.spells_default(key, sent):
                continue
            assert named_in(warnings, key, lang), (
                f"{page} ({lang}): ?{key}={str(sent)[:30]!r} became {str(kept)[:30]!r} without a message; "
                f"warnings: {warnings[:300]!r}")
    assert "<script>" not in "\n".join(m.value for m in at.markdown), "link text rendered as HTML"
    return drawn


@pytest.mark.parametrize("page", PAGES)
def test_hostile_values_in_every_bound_control(page):
    info = page_info(page)
    keys = info.keys()
    if not keys:   # a page without URL-bound controls (the summary): unknown and hostile parameters are ignored
        for lang in ("en", "zh"):
            check_run(info, lang, {name: value for name, value in HOSTILE[:6]})
        return
    for lang, params in plan(info):
        drawn = check_run(info, lang, params)
        new = sorted(drawn - set(params))
        if new:   # keys made at run time in a tab not open at the defaults: one more run gives them values
            more = {k: HOSTILE[(i + 3) % len(HOSTILE)][1] for i, k in enumerate(new)}
            check_run(info, lang, {**params, **more})


# ---- every widget kind the pages bind, each hostile value class: fast (a tiny app) and exhaustive ----

KINDS_APP = '''
import datetime
import streamlit as st
from ui import anatomy
from serving import url_guard
from ui.i18n import resolve_lang
resolve_lang()
anatomy.header("scaling")
st.number_input("ni", 0, 9999, 0, 1, key="ni", bind="query-params")
st.number_input("nf", 0.0, 5.0, 1.0, key="nf", bind="query-params")
st.slider("si", 2, 128, 48, key="si", bind="query-params")
st.slider("sf", 0.0, 0.9, 0.2, 0.05, key="sf", bind="query-params")
st.select_slider("ss", [100, 1000, 10000], value=1000, key="ss", bind="query-params")
st.selectbox("sb", [8, 16, 32], index=1, key="sb", bind="query-params")
st.selectbox("sbn", list(range(5)), index=None, key="sbn", bind="query-params")
st.multiselect("ms", list("abcdefgh"), default=["a"], max_selections=3, key="ms", bind="query-params")
st.toggle("tg", value=False, key="tg", bind="query-params")
st.text_input("ti", value="hi", max_chars=20, key="ti", bind="query-params")
st.text_area("ta", value="hello", max_chars=30, key="ta", bind="query-params")
st.tabs(["one", "two"], key="tab", bind="query-params")
st.radio("ra", ["x", "y"], key="ra", bind="query-params")
st.segmented_control("sc", ["p", "q"], default="p", key="sc", bind="query-params")
st.pills("pi", ["u", "v", "w"], selection_mode="multi", key="pi", bind="query-params")
st.date_input("di", datetime.date(2020, 1, 1), key="di", bind="query-params")
url_guard.end_run()   # what the router does after a page: name what the controls did not take
'''
KIND_DEFAULTS = {"ni": "0", "nf": "1", "si": "48", "sf": "0.2", "ss": "1000", "sb": "16", "tg": "false", "ti": "hi",
                 "ta": "hello", "tab": "one", "ra": "x", "sc": "p", "di": "2020-01-01"}
KIND_KEYS = ["ni", "nf", "si", "sf", "ss", "sb", "sbn", "ms", "tg", "ti", "ta", "tab", "ra", "sc", "pi", "di"]


def _num(text) -> float | None:
    try:
        return float(text)
    except (TypeError, ValueError):
        return None


@pytest.fixture(scope="module")
def kinds_app(tmp_path_factory) -> str:
    path = tmp_path_factory.mktemp("kinds") / "kinds_app.py"
    path.write_text(f"import sys\nsys.path.insert(0, {str(ROOT)!r})\n" + KINDS_APP, encoding="utf-8")
    return str(path)


@pytest.mark.parametrize("name,value", HOSTILE, ids=[h[0] for h in HOSTILE])
def test_every_widget_kind_survives_every_value_class(kinds_app, name, value):
    at = AppTest.from_file(kinds_app, default_timeout=30)
    at.query_params["lang"] = "en"
    for key in KIND_KEYS:
        at.query_params[key] = value
    at.run()
    assert exceptions(at) == []
    if len(str(value)) * len(KIND_KEYS) > CLIENT_STATE_QUERY_STRING_MAX_LENGTH:
        # Streamlit ignores a query string over 512 Ki characters as a whole, before any widget sees it
        assert all(url_value(at, key) is None for key in KIND_KEYS)
        return
    warnings = "\n".join(w.value for w in at.warning)
    for key in KIND_KEYS:
        kept = url_value(at, key)
        sent = value[0] if isinstance(value, list) and len(value) == 1 else value
        default = KIND_DEFAULTS.get(key)
        if kept is None and default is not None and (sent == default or _num(sent) == _num(default)):
            continue   # the link spelled the default
        if kept != sent and value != "":
            assert named_in(warnings, key, "en"), f"?{key}={str(value)[:20]!r} -> {kept!r}, no message"
    if name == "inf":   # an integer number_input given inf used to crash the page
        assert named_in(warnings, "ni", "en")
    if name == "many":  # Streamlit keeps the first max_selections: the learner is told
        assert at.multiselect(key="ms").value == ["a", "b", "c"] and named_in(warnings, "ms", "en")


def test_values_that_are_used_or_spell_the_default_get_no_message(kinds_app):
    at = AppTest.from_file(kinds_app, default_timeout=30)
    good = {"ni": "17", "nf": "2.5", "si": "100", "sf": "0.5", "ss": "10000", "sb": "32", "sbn": "3",
            "ms": ["b", "c"], "tg": "true", "ti": "hello", "ta": "text", "tab": "two", "ra": "y", "sc": "q",
            "pi": ["u", "w"], "di": "2021-05-06"}
    defaults = {"ni": "0", "si": "48", "tg": "false", "sb": "16"}
    for key, value in {**good, "lang": "en"}.items():
        at.query_params[key] = value
    at.run()
    assert exceptions(at) == [] and list(at.warning) == []
    for key, value in good.items():
        assert url_value(at, key) == value, key
    at = AppTest.from_file(kinds_app, default_timeout=30)
    for key, value in {**defaults, "lang": "en"}.items():
        at.query_params[key] = value
    at.run()
    assert exceptions(at) == [] and list(at.warning) == []


def test_the_message_is_in_the_page_language_and_escaped(kinds_app):
    at = AppTest.from_file(kinds_app, default_timeout=30)
    at.query_params["lang"] = "zh"
    at.query_params["ni"] = "inf"
    at.query_params["ti"] = "<b>*x*</b>" + "y" * 40
    at.run()
    (warning,) = at.warning
    assert "设为" in warning.value and "ni" in warning.value
    assert r"\<b\>\*x\*\<" in warning.value, warning.value   # the link's text is inert Markdown


def test_switching_language_is_not_reported_as_a_bad_link():
    """Tabs are named by their label, so switching the language draws them anew and Streamlit re-reads the
    URL, which still holds the other language's label: that is not a link the learner opened (no message),
    while the same label in a fresh link in the other language is. 4 s."""
    rnn_en = catalog("en")["efficiency.tab_rnn"]       # a tab whose label differs between the languages
    assert rnn_en != catalog("zh")["efficiency.tab_rnn"]
    at = open_page("efficiency", "en", {"tab": rnn_en})
    assert exceptions(at) == [] and list(at.warning) == []
    at.session_state["lang"] = "zh"            # what the router's language switch sets
    at.query_params["lang"] = "zh"
    at.run()
    assert exceptions(at) == [] and at.title[0].value == catalog("zh")["efficiency.title"]
    assert not named_in("\n".join(w.value for w in at.warning), "tab", "zh")
    fresh = open_page("efficiency", "zh", {"tab": rnn_en})
    assert named_in("\n".join(w.value for w in fresh.warning), "tab", "zh")

"""Every label key a page looks up exists, in the language it is looked up in.

``t()`` returns the English label (or the key itself) when a key is missing, and many keys are built with
f-strings, so no static scan can find them all: this test records every key ``t()``/``tl()`` looks up
(``ui.i18n.looked_up``) while AppTest runs every page in both languages, opens each of its tabs and answers
and reveals each exercise, and fails listing the keys the catalog of that language lacks. Keys written as
literals in app_pages/ and ui/ are also checked statically (they may sit in branches no run reaches).
Runtime: about 45 s on a shared 2-core machine (34 tests).
"""
import pathlib
import re

import pytest
from streamlit.testing.v1 import AppTest

from tests.apptest_util import APP, exceptions, open_page
from ui import i18n
from ui.registry import available_pages

ROOT = pathlib.Path(__file__).resolve().parent.parent
PAGE_KEYS = [p.key for p in available_pages()]


def _exercise_keys(at) -> list[str]:
    """The exercise keys shown now (anatomy.exercise makes a radio ``<key>_guess``)."""
    return [r.key[:-len("_guess")] for r in at.radio if r.key and r.key.endswith("_guess")]


def _open(key: str, lang: str, state: dict) -> AppTest:
    """A fresh AppTest of the page with ``state`` in its session before the page runs."""
    at = AppTest.from_file(APP, default_timeout=60)
    at.query_params["lang"] = lang
    at.run()
    if key != "home":
        at.switch_page(f"app_pages/{key}.py")
    for name, value in state.items():
        at.session_state[name] = value
    return at.run()


def _rerun(at: AppTest, key: str, lang: str, state: dict, change: dict) -> AppTest:
    """Rerun with ``change`` in the session. AppTest cannot rerun a page whose radio shows a value it cannot
    find among its formatted options (the pronoun page in Chinese): such a page is opened afresh instead."""
    state.update(change)
    for name, value in change.items():
        at.session_state[name] = value
    try:
        return at.run()
    except ValueError:
        return _open(key, lang, state)


def _answer_and_reveal(at: AppTest, key: str, lang: str, state: dict, done: set[str]) -> AppTest:
    """Choose the first answer of each exercise not yet done and reveal it (one rerun for all of them)."""
    change = {}
    for ex in _exercise_keys(at):
        if ex not in done:
            done.add(ex)
            change[f"{ex}_guess"] = 0
            change[f"{ex}_revealed"] = 0          # what pressing "reveal" with that guess stores
    return _rerun(at, key, lang, state, change) if change else at


def _walk(key: str, lang: str) -> list[str]:
    """Run the page, every tab and every exercise; return the exceptions seen."""
    at = open_page(key, lang)
    errors = exceptions(at)
    state: dict = {}
    done: set[str] = set()
    at = _answer_and_reveal(at, key, lang, state, done)
    errors += exceptions(at)
    for label in [tab.label for tab in at.tabs][1:]:
        at = _rerun(at, key, lang, state, {"tab": label})
        errors += exceptions(at)
        at = _answer_and_reveal(at, key, lang, state, done)
        errors += exceptions(at)
    return errors


@pytest.fixture
def recorded():
    i18n.looked_up = set()
    try:
        yield i18n.looked_up
    finally:
        i18n.looked_up = None


@pytest.mark.parametrize("lang", i18n.LANGS)
@pytest.mark.parametrize("key", PAGE_KEYS)
def test_every_key_a_page_looks_up_exists(key, lang, recorded):
    errors = _walk(key, lang)
    assert errors == [], f"{key} ({lang}) raised: {errors}"
    seen = {k for lg, k in recorded if lg == lang}
    assert seen, f"nothing recorded for {key} ({lang}): is ui.i18n.t still recording?"
    missing = sorted(k for k in seen if k not in i18n.catalog(lang))
    assert missing == [], f"page {key} ({lang}) looks up keys missing from assets/i18n/{lang}: {missing}"


def test_the_walk_reaches_later_tabs_and_reveals():
    """The walk is worth its time: it runs a tab that is closed by default and an exercise's feedback."""
    i18n.looked_up = set()
    try:
        _walk("masking", "en")
        seen = {k for _, k in i18n.looked_up}
    finally:
        i18n.looked_up = None
    assert {"masking.causal_title", "masking.custom_title"} <= seen      # tabs 2 and 3
    assert {"common.correct", "common.not_quite"} & seen                 # a revealed answer's feedback


LITERAL = re.compile(r"""(?<![\w])(?:t|tl|problem)\(\s*(["'])([A-Za-z_][\w.]*)\1""")


def test_literal_keys_in_the_code_exist_in_both_languages():
    files = sorted((ROOT / "app_pages").glob("*.py")) + sorted((ROOT / "ui").glob("*.py")) + [ROOT / "app.py"]
    missing = []
    for path in files:
        for match in LITERAL.finditer(path.read_text(encoding="utf-8")):
            for lang in i18n.LANGS:
                if match.group(2) not in i18n.catalog(lang):
                    missing.append(f"{path.relative_to(ROOT)}: {match.group(2)} ({lang})")
    assert missing == []

"""The private Streamlit names the app still leans on (README, "Private Streamlit names"): each listed one exists
in the installed Streamlit, so an upgrade that removes one fails here first; when one is missing the feature steps
down loudly (a log line and a notice on every page); and no Streamlit method is replaced by the app."""
from __future__ import annotations

import logging
import re

import pytest
import streamlit as st

from serving import compat
from tests.apptest_util import ROOT, exceptions, open_page
from ui.i18n import catalog


def readme_rows() -> list[tuple[str, str]]:
    """(name, guarding test file) of each row of the README's table."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text.split("### Private Streamlit names", 1)[1].split("\n#", 1)[0]
    return re.findall(r"^\| `([^`]+)` \|.*?\| `(tests/[^`]+?\.py)[^`]*` \|", section, flags=re.M)


def test_the_readme_lists_each_private_name_with_an_existing_test():
    rows = readme_rows()
    names = {name for name, _ in rows}
    assert {"streamlit.runtime.Runtime.is_active_session", "runner.postScriptGC",
            "data-testid=stSidebar"} <= names, names
    for name, test in rows:
        assert (ROOT / test).is_file(), f"{name}: {test} does not exist"


def test_the_private_names_exist_in_this_streamlit():
    from streamlit.runtime import Runtime
    from streamlit.runtime.scriptrunner import get_script_run_ctx

    assert callable(Runtime.is_active_session) and callable(Runtime.exists) and callable(get_script_run_ctx)
    from streamlit.delta_generator import DeltaGenerator  # the pages' type hints

    assert st.get_option("runner.postScriptGC") is False          # .streamlit/config.toml turns it off
    assert isinstance(DeltaGenerator, type)


def test_no_streamlit_method_is_replaced():
    """The URL guard works through st.query_params and st.session_state: Streamlit's seeding is its own."""
    from streamlit.runtime.state.session_state import SessionState

    at = open_page("scaling", "en", {"seed": "inf"})
    assert exceptions(at) == []
    for name in ("_seed_widget_from_url", "_handle_query_param_binding", "register_widget"):
        method = getattr(SessionState, name)
        assert method.__module__ == "streamlit.runtime.state.session_state", (name, method.__module__)
        assert not hasattr(method, "_url_guard")


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_a_missing_private_name_is_said_on_every_page_and_logged(lang, caplog, monkeypatch):
    monkeypatch.setattr(compat, "_missing", {})
    with caplog.at_level(logging.WARNING, logger="attention.compat"):
        compat.missing("tab_closed", "streamlit.runtime.Runtime.is_active_session")
        compat.missing("tab_closed", "streamlit.runtime.Runtime.is_active_session")    # logged once
    assert len([r for r in caplog.records if "is_active_session" in r.getMessage()]) == 1
    feature = catalog(lang)["common.compat_tab_closed"]
    for key in ("home", "training"):
        at = open_page(key, lang)
        assert exceptions(at) == []
        assert any(feature in c.value for c in at.caption), key


def test_the_training_queue_steps_down_without_the_session_check(monkeypatch):
    from streamlit import runtime

    from serving import training_queue

    monkeypatch.setattr(compat, "_missing", {})

    class NoCheck:                     # a Runtime that lost is_active_session in an upgrade
        @staticmethod
        def exists():
            return True

        @staticmethod
        def instance():
            return NoCheck()

    monkeypatch.setattr(runtime, "Runtime", NoCheck)
    monkeypatch.setattr("streamlit.runtime.scriptrunner.get_script_run_ctx", lambda: type("C", (), {"session_id": "s"}))
    alive = training_queue.session_alive()
    assert alive() is True and "tab_closed" in compat.degraded()

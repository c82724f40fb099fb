"""The few places the app leans on something Streamlit does not promise (README, "Private Streamlit names"): when
one is missing after an upgrade, the feature that needs it steps down, the server logs it once, and every page
says so under its content, in the learner's language — never a silent change of behaviour."""
from __future__ import annotations

import logging
import threading

import streamlit as st

from ui.i18n import t

_LOG = logging.getLogger("attention.compat")
_lock = threading.Lock()
_missing: dict[str, str] = {}      # feature key (i18n common.compat_<key>) -> what was missing


def missing(feature: str, what: str) -> None:
    """Record that ``feature`` runs without ``what`` (a private Streamlit name); logged once per process."""
    with _lock:
        if feature in _missing:
            return
        _missing[feature] = what
    _LOG.warning("Streamlit has no %s any more: %s steps down (see README, 'Private Streamlit names')", what, feature)


def degraded() -> dict[str, str]:
    with _lock:
        return dict(_missing)


def notice() -> None:
    """The router, after each page: one line per feature that stepped down."""
    for feature in degraded():
        st.caption(t("common.compat_notice", feature=t(f"common.compat_{feature}")))

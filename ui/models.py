"""The shipped checkpoints, loaded once per server process and shared by every page and session."""
from __future__ import annotations

import streamlit as st

from attention_core.train import LoadedModel, load_curves, load_model


@st.cache_resource(show_spinner=False)
def shipped_model(name: str) -> LoadedModel:
    """assets/models/<name>.pt in eval mode; raises FileNotFoundError if it is not shipped."""
    return load_model(name)


def model(name: str) -> LoadedModel | None:
    """Like shipped_model, but None when the checkpoint is missing (the page then says so)."""
    try:
        return shipped_model(name)
    except FileNotFoundError:
        return None


@st.cache_resource(show_spinner=False)
def curves() -> dict:
    """The recorded accuracy curves (assets/models/curves.json); {} if missing."""
    try:
        return load_curves()
    except FileNotFoundError:
        return {}

"""Router: page config, the language switch, and st.navigation over the sections."""
import streamlit as st
import torch

# attention_core's __init__ imports its submodules: its first import must finish in one thread before any page
# imports a submodule in another. Concurrent first sessions on a fresh server otherwise race through Python's
# per-module import locks and one of them gets a partially initialised module (ImportError "cannot import name
# 'CausalSelfAttention' from partially initialized module 'attention_core.decoder'", seen with 60 sessions in
# tests/test_serving.py). Imported here, a second session waits for the first to finish it.
import attention_core  # noqa: F401
from ui.i18n import language_switch, t
from ui.presenter import sidebar_toggle
from ui.registry import ROOT, SECTIONS, available_pages
from ui.url_guard import begin_run

# the tensors of these lessons are tiny: one thread avoids thread start-up and contention costs
# that are larger than the work itself (and leaves the other cores to other sessions)
torch.set_num_threads(1)

st.set_page_config(page_title="Attention, explained by running it", page_icon=str(ROOT / "assets" / "favicon.png"),
                   layout="wide")
language_switch()
sidebar_toggle()          # presenter mode: ?present=1

sections: dict[str, list] = {}
for spec in available_pages():
    page = st.Page(spec.file, title=t(f"nav.{spec.key}"), icon=spec.icon, url_path=spec.key,
                   default=spec.key == "home")
    sections.setdefault(t(f"nav.section_{spec.section}"), []).append(page)
ordered = {t(f"nav.section_{s}"): sections[t(f"nav.section_{s}")]
           for s in SECTIONS if t(f"nav.section_{s}") in sections}
# a link can set any control to any value: what a page cannot use is ignored or clamped, and named under its title
begin_run()
st.navigation(ordered, expanded=True).run()
st.sidebar.caption(t("common.footer"))

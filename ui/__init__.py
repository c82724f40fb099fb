"""Streamlit/Altair presentation shared by the pages: i18n, charts, controls, page anatomy.

Every page imports from this package, so the one guard every page needs lives here:
the router must run before any page.
"""


def _require_router() -> None:
    """Send a page opened before the router ever ran back through the router.

    Streamlit still treats a `pages/` folder next to the entry point as a legacy (v1)
    multipage app until the first `st.navigation` call of the process: a deep link such
    as `/masking?lang=zh` on a freshly started server would run pages/masking.py on its
    own (no language switch, English, the raw file list in the sidebar). Clearing the
    flag and rerunning makes Streamlit run app.py, which then routes to the same page.
    """
    try:
        import streamlit as st
        from streamlit.runtime.pages_manager import PagesManager
        from streamlit.runtime.scriptrunner import get_script_run_ctx
    except ImportError:  # pragma: no cover - streamlit layout changed: nothing to guard
        return
    if PagesManager.uses_pages_directory and get_script_run_ctx() is not None:
        PagesManager.uses_pages_directory = False
        st.rerun()


_require_router()

"""Streamlit/Altair presentation shared by the pages: i18n, charts, controls, page anatomy.

The pages live in ``app_pages/``, not ``pages/``: Streamlit treats a ``pages/`` folder next to the entry
point as a legacy (v1) multipage app until the first ``st.navigation`` call of the process, and on a fresh
server it then runs a deep link's page file on its own, without the router (no language switch, the raw
file list in the sidebar, and the page's imports racing other sessions').
"""

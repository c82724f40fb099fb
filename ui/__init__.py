"""Streamlit/Altair presentation shared by the pages: i18n, charts, controls, page anatomy."""

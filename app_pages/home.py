"""Home: what the app teaches, a map of the pages, how to use it in class and at home."""
import streamlit as st

from ui.i18n import label_notices, lesson, t
from ui.registry import SECTIONS, available_pages

st.title(t("home.title"))
label_notices("home", "common", "nav")       # a label file that cannot be read is named here
st.markdown(t("home.tagline"))
st.markdown(lesson("home/what"))

st.header(t("home.map"))
pages = available_pages()
for section in SECTIONS:
    in_section = [p for p in pages if p.section == section and p.key != "home"]
    if not in_section:
        continue
    st.subheader(t(f"nav.section_{section}"))
    cols = st.columns(min(3, len(in_section)))
    for i, spec in enumerate(in_section):
        with cols[i % len(cols)].container(border=True):
            st.page_link(spec.file, label=t(f"nav.{spec.key}"), icon=spec.icon)
            st.caption(t(f"nav.{spec.key}_blurb"))

left, right = st.columns(2)
with left:
    st.header(t("home.in_class"))
    st.markdown(lesson("home/in_class"))
with right:
    st.header(t("home.self_study"))
    st.markdown(lesson("home/self_study"))

"""Home: what the app teaches, where to start, a map of the pages (core and optional, with their time), how to use
it in class and at home."""
import streamlit as st

from ui import course
from ui.i18n import label_notices, lesson, t
from ui.registry import SECTIONS, available_pages, spec_of

# a card's title wraps instead of being cut at the card's edge (a long title in a narrow column)
_CARD_CSS = """<style>
.st-key-home_map [data-testid="stPageLink"] p, .st-key-home_map [data-testid="stPageLink"] span {
  white-space: normal !important; overflow-wrap: anywhere; text-overflow: clip;}
</style>"""

st.title(t("home.title"))
label_notices("home", "common", "nav")       # a label file that cannot be read is named here
st.markdown(t("home.tagline"))

pages = available_pages()
core = [p for p in pages if p.core and p.key != "home"]
with st.container(border=True, key="home_start"):
    st.subheader(t("home.start_here"), anchor="start-here")
    minutes = sum(p.minutes for p in core)
    st.markdown(t("home.start_here_body", n=len(core), h=minutes // 60, m=minutes % 60))
    if core:
        course.page_link(core[0], t("home.start_link", title=t(f"nav.{core[0].key}")))
    teach = spec_of("teach")
    if teach is not None and teach.file.exists():
        course.page_link(teach, t("home.teach_link"))

st.markdown(lesson("home/what"))

st.header(t("home.map"))
st.caption(t("home.map_caption"))
st.html(_CARD_CSS)
with st.container(key="home_map"):
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
                st.caption(t("home.card_meta", kind=course.kind(spec), minutes=spec.minutes))

left, right = st.columns(2)
with left:
    st.header(t("home.in_class"))
    st.markdown(lesson("home/in_class"))
with right:
    st.header(t("home.self_study"))
    st.markdown(lesson("home/self_study"))

"""Teach: ready lesson plans, each a timed sequence of links that open a page in presenter mode at a step, with the
question to pose at each stop; and how to embed or print a page."""
import streamlit as st

from ui import course
from ui.i18n import current_lang, t
from ui.registry import spec_of

NS = "teach"


def clock(minutes: int) -> str:
    """Minutes from the start of the lesson as h:mm ("0:05")."""
    return f"{minutes // 60}:{minutes % 60:02d}"


st.title(t(f"{NS}.title"))
st.markdown(t(f"{NS}.intro"))
lang = current_lang()

for plan, stops in course.LESSON_PLANS.items():
    total = sum(s.minutes for s in stops)
    st.header(t(f"{NS}.{plan}_title"))
    st.markdown(t(f"{NS}.plan_meta", n=len(stops), minutes=total, goal=t(f"{NS}.{plan}_goal")))
    start = 0
    for n, stop in enumerate(stops, start=1):
        spec = spec_of(stop.page)
        if spec is None or not spec.file.exists():
            continue
        with st.container(border=True, key=f"{NS}_{plan}_{n}"):
            st.markdown(t(f"{NS}.stop_heading", start=clock(start), end=clock(start + stop.minutes),
                          page=t(f"nav.{stop.page}"), step=stop.step))
            st.markdown(t(f"{NS}.stop_ask", question=t(f"{NS}.{plan}_q{n}")))
            st.page_link(spec.file, label=t(f"{NS}.stop_open"), icon=":material/slideshow:",
                         query_params=course.stop_params(stop, lang))
        start += stop.minutes
    with st.expander(t(f"{NS}.plan_links")):
        st.code("\n".join(course.stop_url(s, lang) for s in stops), language=None)

st.header(t(f"{NS}.embed_heading"))
st.markdown(t(f"{NS}.embed_body"))
st.header(t(f"{NS}.print_heading"))
st.markdown(t(f"{NS}.print_body"))

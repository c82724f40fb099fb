"""The pages as one course: where a page sits on the path (``ui.registry.PAGES``' order), previous / next links at
the end of every page, links to the pages a page builds on, and the app's frame for an embedded or printed page.

The router draws ``footer`` after the page has run, so no page repeats it; a page calls ``builds_on`` where its
text relies on another page."""
from __future__ import annotations

from typing import NamedTuple

import streamlit as st

from . import presenter
from .i18n import current_lang, t
from .registry import PageSpec, available_pages, spec_of

_KEY = "course_nav"          # the footer's container: presenter mode leaves it visible under every step


def route_key(page) -> str:
    """The registry key of the ``st.Page`` that ``st.navigation`` returned (the default page's url_path is "")."""
    return getattr(page, "url_path", "") or "home"


def neighbours(key: str, pages: list[PageSpec] | None = None) -> tuple[PageSpec | None, PageSpec | None]:
    """The pages before and after ``key`` in the course's order (None at either end, or for an unknown key)."""
    pages = available_pages() if pages is None else pages
    keys = [p.key for p in pages]
    if key not in keys:
        return None, None
    i = keys.index(key)
    return (pages[i - 1] if i > 0 else None), (pages[i + 1] if i + 1 < len(pages) else None)


def next_core(key: str, pages: list[PageSpec] | None = None) -> PageSpec | None:
    """The next page of the core path after ``key`` (None after the last core page)."""
    pages = available_pages() if pages is None else pages
    keys = [p.key for p in pages]
    if key not in keys:
        return None
    return next((p for p in pages[keys.index(key) + 1:] if p.core), None)


def kind(spec: PageSpec) -> str:
    return t("common.course_core") if spec.core else t("common.course_optional")


def position(key: str) -> str:
    """"Page 5 of 23 · core path · about 12 min" (empty for an unknown key)."""
    pages = available_pages()
    keys = [p.key for p in pages]
    if key not in keys:
        return ""
    spec = pages[keys.index(key)]
    return t("common.course_position", i=keys.index(key) + 1, n=len(pages), kind=kind(spec), minutes=spec.minutes)


def link_params() -> dict[str, str]:
    """What a link to another page keeps of this view: the language, and presenter mode when it is on (a new page
    starts at its first step)."""
    params = {"lang": current_lang()}
    if presenter.active():
        params[presenter.PARAM] = "1"
    return params


def page_link(spec: PageSpec, label: str, icon: str | None = None) -> None:
    st.page_link(spec.file, label=label, icon=icon or spec.icon, query_params=link_params())


def builds_on(key: str) -> None:
    """A link to the page ``key`` that the text around it relies on ("Builds on: Positional encoding")."""
    spec = spec_of(key)
    if spec is None or not spec.file.exists():
        return
    page_link(spec, t("common.course_builds_on", title=t(f"nav.{key}")), icon=":material/school:")


def footer(page) -> None:
    """Under every page: where it sits in the course, and links to the previous and next pages (and to the next
    page of the core path when the next page is optional)."""
    frame()
    key = route_key(page)
    before, after = neighbours(key)
    if before is None and after is None:
        return
    with st.container(key=_KEY):
        st.divider()
        st.caption(position(key))
        with st.container(horizontal=True, horizontal_alignment="distribute"):
            if before is not None:
                page_link(before, t("common.course_prev", title=t(f"nav.{before.key}")),
                          icon=":material/arrow_back:")
            if after is not None:
                page_link(after, t("common.course_next", title=t(f"nav.{after.key}")),
                          icon=":material/arrow_forward:")
        core = next_core(key)
        if after is not None and not after.core and core is not None:
            page_link(core, t("common.course_next_core", title=t(f"nav.{core.key}")), icon=":material/route:")


# ------------------------------------------------------------------------------ the app's frame

def embedded() -> bool:
    """``?embed=true`` (an LMS or a slide's iframe). Streamlit keeps that parameter out of ``st.query_params``;
    ``st.context.is_embedded`` is its public reading."""
    try:
        return bool(st.context.is_embedded)
    except Exception:      # no browser context (a bare script run)
        return False


def nav_position() -> str:
    """Where ``st.navigation`` draws the pages: nowhere when the page is embedded (one page, no sidebar)."""
    return "hidden" if embedded() else "sidebar"


# Embedded, the router's sidebar widgets (language, presenter mode) would still open a sidebar: the language is in
# the link (?lang=) and an iframe is no place for presenter mode.
EMBED_CSS = """<style>
section[data-testid="stSidebar"], [data-testid="stSidebarCollapsedControl"] {display: none;}
</style>"""

# A printed page is a handout: the text and the charts, without the app's chrome (sidebar, header, the controls
# that do nothing on paper, the course links) and with page breaks between the page's sections.
PRINT_CSS = """<style>
@media print {
  section[data-testid="stSidebar"], [data-testid="stSidebarCollapsedControl"], header[data-testid="stHeader"],
  [data-testid="stToolbar"], [data-testid="stDecoration"], [data-testid="stStatusWidget"],
  [data-testid="stBottom"], .st-key-course_nav, [class*="st-key-secondary_"],
  [data-testid="stButton"], [data-testid="stDownloadButton"], [data-testid="stSlider"],
  [data-testid="stSelectSlider"], [data-testid="stSelectbox"], [data-testid="stMultiSelect"],
  [data-testid="stRadio"], [data-testid="stCheckbox"], [data-testid="stToggle"],
  [data-testid="stTextInput"], [data-testid="stTextArea"], [data-testid="stNumberInput"],
  [data-testid="stButtonGroup"], [data-testid="stPageLink"] .st-emotion-cache-none,
  [data-testid="stElementToolbar"], [data-testid="stFullScreenFrame"] > div > button {display: none !important;}
  .stMainBlockContainer {max-width: 100% !important; padding: 0 !important;}
  .stMain, .stAppViewContainer, .stApp {overflow: visible !important; height: auto !important;}
  @page {size: A4; margin: 9mm 10mm;}
  html {font-size: 13px;}
  .stMainBlockContainer [data-testid="stVerticalBlock"] {gap: 0.25rem !important;}
  [data-testid="stElementContainer"] {break-inside: avoid;}
  [data-testid="stPageLink"] a {padding-top: 0 !important; padding-bottom: 0 !important; min-height: 0 !important;}
  .katex-display {margin: 0.3em 0 !important;}
  /* every section (a level-2 heading) after the first starts a new sheet; a heading stays with what follows */
  [data-testid="stElementContainer"]:has(h2) ~ [data-testid="stElementContainer"]:has(h2) {break-before: page;}
  h2, h3, h4 {break-after: avoid;}
  [data-testid="stVegaLiteChart"], [data-testid="stImage"], [data-testid="stTable"],
  [data-testid="stExpander"], [data-testid="stAlert"] {break-inside: avoid;}
}
</style>"""


def frame() -> None:
    """The CSS of the app's frame: the print handout always, no sidebar when embedded."""
    st.html(PRINT_CSS + (EMBED_CSS if embedded() else ""))


# ------------------------------------------------------------------------------ lesson plans (the Teach page)

class Stop(NamedTuple):
    """One stop of a lesson plan: a page opened in presenter mode at a step, for some minutes, with a question
    (``teach.<plan>_q<n>``, n counted from 1) to pose before moving on."""

    page: str
    step: int
    minutes: int
    seed: int | None = None     # for a page with a URL-bound random seed: the example the question was written on


# Each plan follows the course's order; the steps are those of the pages' presenter mode (tests/test_teach.py opens
# every link and checks it lands on its step).
LESSON_PLANS: dict[str, tuple[Stop, ...]] = {
    "first_lecture": (
        Stop("bottleneck", 2, 5, seed=0), Stop("bottleneck", 3, 5, seed=0), Stop("bottleneck", 5, 5, seed=0),
        Stop("alignment", 3, 5), Stop("qkv", 2, 5, seed=0), Stop("qkv", 5, 5, seed=0),
        Stop("scaling", 2, 5, seed=0), Stop("scaling", 4, 5, seed=0), Stop("masking", 2, 5, seed=0),
    ),
    "transformer_parts": (
        Stop("multihead", 2, 5, seed=0), Stop("multihead", 3, 5, seed=0), Stop("positional", 5, 5, seed=0),
        Stop("positional", 6, 5, seed=0), Stop("positional", 9, 5, seed=0), Stop("encoder", 1, 5, seed=0),
        Stop("encoder", 2, 10, seed=0),
    ),
    "modern_llms": (
        Stop("kv_cache", 2, 5, seed=0), Stop("kv_cache", 4, 5, seed=0), Stop("kv_cache", 5, 5, seed=0),
        Stop("gqa", 2, 5), Stop("gqa", 4, 5), Stop("attention_sinks", 2, 5, seed=0),
        Stop("attention_sinks", 4, 5, seed=0), Stop("long_context", 2, 5), Stop("long_context", 3, 5),
    ),
}


def stop_params(stop: Stop, lang: str) -> dict[str, str]:
    """The query parameters of a stop's link: language, presenter mode, step (and seed)."""
    params = {"lang": lang, presenter.PARAM: "1", presenter.STEP_PARAM: str(stop.step)}
    if stop.seed is not None:
        params["seed"] = str(stop.seed)
    return params


def stop_url(stop: Stop, lang: str) -> str:
    """The stop's link relative to the app's address: ``/qkv?lang=en&present=1&step=5&seed=0`` (its values are
    plain words and numbers: nothing to escape)."""
    return f"/{stop.page}?" + "&".join(f"{k}={v}" for k, v in stop_params(stop, lang).items())

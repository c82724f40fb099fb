"""What the browser and assistive technology are told about a page: its language and its name.

Streamlit serves one ``index.html`` saying ``<html lang="en">`` whatever the page shows, so a screen reader would
read a Chinese page with an English voice; the router declares the page's language on every run
(``declare_language``). Streamlit 1.67 has no public option for the document's language: the declaration is a
small script in ``st.html(..., unsafe_allow_javascript=True)`` (public API: the script runs in the page itself,
not in an iframe, and runs again when its text changes, i.e. when the language does). The same script makes the
app's code blocks reachable from the keyboard: a block wider than its column scrolls, and a region that scrolls
must take focus (Tab to it, then the arrow keys scroll it; WCAG 2.1.1); ``st.code`` has no option for that.

The browser tab names the page in its language: the router sets the app's name (``declare_language``), then the
page's own (``name_page``, before the page runs), through ``st.set_page_config``, which 1.67 allows several times a run
(the last call wins). Once an app has set a title, Streamlit no longer uses ``st.navigation``'s page titles for
the tab, so the router's own title (in app.py) is overridden here rather than dropped.
"""
from __future__ import annotations

import streamlit as st

from .i18n import LANGS, catalog, current_lang, t

# BCP 47 tags of the app's languages (Chinese: simplified script is implied by the texts, "zh" as the brief asks)
LANG_TAGS = {"en": "en", "zh": "zh"}
assert set(LANG_TAGS) == set(LANGS)

# The element holding the script is hidden (it draws nothing; hidden, it takes no gap in the sidebar's column).
# The observer runs once per batch of DOM changes (a new code block appears when an expander opens or a page is
# drawn): it only looks for code blocks without a tabindex.
_SCRIPT = """<style>[data-testid="stElementContainer"]:has(#a11y-declare) {display: none;}</style>
<script id="a11y-declare">
document.documentElement.lang = "LANG";
if (!window.__a11yCodeFocus) {
  const mark = () => document.querySelectorAll('[data-testid="stCode"] pre:not([tabindex])')
    .forEach(e => { e.tabIndex = 0; });
  window.__a11yCodeFocus = new MutationObserver(mark);
  window.__a11yCodeFocus.observe(document.body, {childList: true, subtree: true});
  mark();
}
</script>"""


def declaration(lang: str) -> str:
    """The HTML the router sends for ``lang`` (tests read it)."""
    return _SCRIPT.replace("LANG", LANG_TAGS[lang])


def declare_language(lang: str | None = None) -> None:
    """The router's part, once per run after the language is known: ``<html lang>`` is the page's language, the
    tab says the app's name in it (a page's header then names the page), code blocks take keyboard focus."""
    lang = lang if lang in LANG_TAGS else current_lang()
    st.set_page_config(page_title=t("a11y.app_title"))
    st.sidebar.html(declaration(lang), unsafe_allow_javascript=True)


def tab_title(ns: str) -> str:
    """The browser tab's title of page ``ns`` in the current language: its name in the navigation, then the app's."""
    known = catalog(current_lang())
    page = t(f"nav.{ns}") if f"nav.{ns}" in known else t(f"{ns}.title")
    return t("a11y.tab_title", page=page)


def with_csv_note(spec: dict) -> dict:
    """A heatmap's spec whose text alternative also says where its numbers are (drawn with its CSV download)."""
    note = t("a11y.chart_csv")
    joined = f"{spec.get('description', '')}{'' if current_lang() == 'zh' else ' '}{note}".strip()
    return {**spec, "description": joined}


def name_page(ns: str) -> None:
    """Name page ``ns`` in the browser tab (called by the router for every page, before the page runs)."""
    st.set_page_config(page_title=tab_title(ns))


def theme() -> str:
    """The theme the learner's browser shows: "dark" or "light" (Streamlit reports it with each run)."""
    return "dark" if getattr(st.context.theme, "type", None) == "dark" else "light"

"""Router: page config, the language switch, and st.navigation over the sections."""
import streamlit as st
import torch

# these import nothing of attention_core: the pages' modules are imported below, once, in one thread
from serving import admission, cache, compat, url_guard
from serving.preload import import_page_modules
from ui.a11y import declare_language, name_page
from ui.course import footer, nav_position
from ui.i18n import language_switch, t
from ui.presenter import early_css, sidebar_toggle, styling_first, wait_for_style
from ui.registry import ROOT, SECTIONS, available_pages

# sessions starting together on a fresh server must not import the pages' modules concurrently (ImportError
# from a partially initialised module, seen in tests/test_serving.py): the first imports them, the others wait
import_page_modules()
# two heaps for all session threads (glibc), so freed temporaries of one session's run serve the next
cache.limit_heaps()

# the tensors of these lessons are tiny: one thread avoids thread start-up and contention costs
# that are larger than the work itself (and leaves the other cores to other sessions)
torch.set_num_threads(1)


def route() -> bool:
    """One run of the app: the page's config, the router's own controls, the navigation and the page (False when
    the page waits for presenter mode's CSS: see ``ui.presenter.styling_first``)."""
    st.set_page_config(page_title="Attention, explained by running it", page_icon=str(ROOT / "assets" / "favicon.png"),
                       layout="wide")
    early_css()               # presenter mode's layout before anything is drawn
    language_switch()
    sidebar_toggle()          # presenter mode: ?present=1
    declare_language()        # <html lang>, the tab's title and keyboard access in the page's language

    sections: dict[str, list] = {}
    for spec in available_pages():
        entry = st.Page(spec.file, title=t(f"nav.{spec.key}"), icon=spec.icon, url_path=spec.key,
                       default=spec.key == "home")
        sections.setdefault(t(f"nav.section_{spec.section}"), []).append(entry)
    ordered = {t(f"nav.section_{s}"): sections[t(f"nav.section_{s}")]
               for s in SECTIONS if t(f"nav.section_{s}") in sections}
    page = st.navigation(ordered, expanded=True, position=nav_position())   # ?embed=true: one page, no sidebar
    if styling_first():      # presenter mode's CSS first, alone, until the browser reports it applies (the
        return False         # navigation keeps the page's address)
    # a link can set any control to any value, and a move between pages brings the last page's values: what a page
    # cannot use is ignored or clamped and named under its title, and another page's values never reach its controls
    url_guard.begin_run(page.url_path or "home")
    name_page(page.url_path or "home")   # the browser tab names the page, in its language
    page.run()
    url_guard.end_run()
    footer(page)             # where the page sits in the course, and its previous / next pages
    compat.notice()          # a feature that stepped down after a Streamlit upgrade says so on every page
    st.sidebar.caption(t("common.footer"))
    return True


with admission.admitted():   # a class opening one link at once is served in turn, not all at the end
    drawn = route()
if not drawn:
    wait_for_style()

"""Presenter mode (``?present=1``): a page shown to a room one step at a time.

A page marks its steps in lesson order with ``lesson.step(...)`` (a ``Lesson`` per run). Outside presenter mode
steps are plain containers and nothing changes. In presenter mode every step still runs (widgets keep their state
and their URL values) but only the current one is shown, with large type, the sidebar and secondary material
(show the code, CSV downloads) hidden, and Previous / Next buttons (PageUp / PageDown: what a presentation
clicker sends). The current step is in the URL (``?step=3``), so a teacher can prepare a sequence of links.
Steps marked ``keep=True`` (the controls) stay visible under every step.

The lesson also knows what ran: a section declares the library code it calls (``step(..., shows=...)``, or
``shows(...)`` where the call is conditional), and ``end`` draws "Show the code" with exactly that, in the order it
ran. A fragment (``part``) rerunning on its own declares again; when what it declares changes while "Show the code"
is open, the page reruns so the list is redrawn (the list sits outside the fragment).
"""
from __future__ import annotations

import contextlib
import functools
import time
from typing import Any, Callable, TypeVar

import streamlit as st

from serving import compat

from . import code_view
from .i18n import t

PARAM, STEP_PARAM = "present", "step"
STYLE_WAIT_S = 0.4     # without the component below: a fixed wait for the browser to load the HTML element's code
_KEY = "present_step_{}"
_LESSON = "_lesson"        # the Lesson of the page's last full run: ``shows`` declares into it
T = TypeVar("T")

# The presenter layout, sent by the router before anything else of a run (``early_css``): the first paint of a
# fresh load is already the presenter's (no sidebar, no 16 px text for a second). Large prose; the title, its
# objective and the controls kept under every step made compact, so each step's chart starts on its first screen
# at 1280x720 (the charts' own text is scaled in ``ui.charts.styled``).
_LAYOUT_CSS = """<style>
:root {--presenter-layout: on;}
section[data-testid="stSidebar"], [data-testid="stSidebarCollapsedControl"],
header[data-testid="stHeader"] {display: none;}
.stMainBlockContainer {font-size: 1.35rem; max-width: 100%; padding-top: 0.6rem; padding-bottom: 2rem;}
.stMainBlockContainer p, .stMainBlockContainer li {font-size: 1.3rem; line-height: 1.4;}
.stMainBlockContainer h1 {font-size: 1.9rem; padding: 0 0 0.1rem 0;}
.stMainBlockContainer h2 {font-size: 1.6rem; padding: 0.2rem 0;}
.stMainBlockContainer h3 {font-size: 1.35rem; padding: 0.1rem 0;}
.stMainBlockContainer [data-testid="stElementContainer"]:has(h1) + [data-testid="stElementContainer"] p
  {font-size: 1rem; line-height: 1.3; color: rgba(49, 51, 63, 0.75);}
.stMainBlockContainer [data-testid="stVerticalBlock"] {gap: 0.6rem;}
.stMainBlockContainer [data-testid="stAlert"] p {font-size: 1.15rem; line-height: 1.35;}
.stMainBlockContainer [data-testid="stWidgetLabel"] p {font-size: 1.05rem; line-height: 1.3;}
[class*="st-key-present_keep_"] {zoom: 0.85;}
[class*="st-key-present_keep_"] p, [class*="st-key-present_keep_"] label p {font-size: 1.05rem; line-height: 1.3;}
[class*="st-key-present_keep_"] textarea {min-height: 2.6rem; height: 2.8rem;}
[class*="st-key-present_keep_"] [data-testid="stVerticalBlock"] {gap: 0.35rem;}
[class*="st-key-secondary_"], div[class*="st-key-"][class*="_csv"] {display: none;}
.stMainBlockContainer [data-testid="stElementContainer"]:has(style) {display: none;}
</style>"""
# Only the current step is shown: from the URL's step at the start of the run, corrected by ``Lesson.end`` where
# the page has fewer steps (a step past the last one shows the last)
# (a hidden step's wrapper is hidden too: an empty wrapper still takes the column's gap, ~10 px per step above)
_STEP_CSS = """<style>
[class*="st-key-present_step_"]:not(.st-key-present_step_CURRENT),
[data-testid="stLayoutWrapper"]:has(> [class*="st-key-present_step_"]:not(.st-key-present_step_CURRENT))
  {display: none;}
</style>"""
_SHOW_CSS = """<style>.st-key-present_step_CURRENT,
[data-testid="stLayoutWrapper"]:has(> .st-key-present_step_CURRENT) {display: flex !important;}</style>"""


def active() -> bool:
    """Presenter mode is on for this run (``?present=1``)."""
    return str(st.query_params.get(PARAM, "")).lower() in ("1", "true", "yes", "on")


def _enter() -> None:
    """The switch's callback: it runs before the page, so the page is drawn in presenter mode at once; the switch
    itself goes back to off (in presenter mode the sidebar is hidden and the step bar's exit button leaves)."""
    if st.session_state.get("present_toggle"):
        st.query_params[PARAM] = "1"
        st.query_params.pop(STEP_PARAM, None)
        st.session_state["present_toggle"] = False


def _go_to(step: int) -> None:
    """The step bar's Previous and Next (callbacks: the run they start draws that step)."""
    st.query_params[STEP_PARAM] = str(step)


def _leave() -> None:
    """The step bar's exit: presenter mode off, from the run it starts."""
    st.query_params.pop(PARAM, None)
    st.query_params.pop(STEP_PARAM, None)


def _layout_css() -> str:
    return _LAYOUT_CSS + _STEP_CSS.replace("CURRENT", str(_current(10 ** 6)))


# The browser's side of ``styling_first``: it reports once the layout's CSS applies (the custom property the CSS
# sets is computed), a frame later; after 4 s it reports anyway, so a page is never held back for good.
_READY_JS = """
export default function(component) {
  const start = performance.now();
  const check = () => {
    const on = getComputedStyle(document.documentElement).getPropertyValue('--presenter-layout').trim() === 'on';
    if (on || performance.now() - start > 4000) {
      requestAnimationFrame(() => component.setTriggerValue('ready', on ? 'css' : 'timeout'));
    } else {
      setTimeout(check, 15);
    }
  };
  check();
}
"""
try:
    _style_ready = st.components.v2.component("presenter_style_ready", js=_READY_JS)
except Exception:          # noqa: BLE001 -- an upgrade without custom components: a fixed wait (``wait_for_style``)
    _style_ready = None


def styling_first() -> bool:
    """True in a session's first run in presenter mode: the router then draws no page. The run draws the layout's
    CSS (``early_css``) and a component that reports, from the browser, once the CSS applies; its report reruns
    the script, and that run draws the page, so the page's first text is drawn with the CSS applied (sent with
    the page, the CSS landed 0.2-0.8 s after the first text, later on a loaded machine: the frontend fetches each
    element kind's code on its first use). A test without a browser (AppTest) runs the script again itself."""
    if not active() or st.session_state.get("_presenter_styled"):
        return False
    st.session_state["_presenter_styled"] = True
    if _style_ready is not None:
        _style_ready(key="presenter_style_ready", on_ready_change=lambda: None)
    else:
        compat.missing("presenter_style", "st.components.v2.component")
    return True


def wait_for_style() -> None:
    """The end of the run ``styling_first`` held back, outside admission (a wait is no work): nothing to do when the
    browser reports; without the component, a fixed wait, then a rerun."""
    if _style_ready is None:
        time.sleep(STYLE_WAIT_S)
        st.rerun()


def early_css() -> None:
    """The router's first output in presenter mode: the presenter layout and the URL's step, before the sidebar,
    the navigation and the page draw anything (a style-only ``st.html``: Streamlit keeps it in its event
    container, which takes no space)."""
    if active():
        # the sidebar collapsed before any element is drawn: the CSS hiding it comes a moment later
        st.set_page_config(initial_sidebar_state="collapsed")
        st.session_state["_presented"] = True
        st.session_state["_present_css_step"] = _current(10 ** 6)     # the step the layout's CSS shows
        st.html(_layout_css())
    elif st.session_state.pop("_presented", False):     # presenter mode left: the sidebar comes back
        st.set_page_config(initial_sidebar_state="expanded")


def sidebar_toggle() -> None:
    """The router's switch into presenter mode (it sets ``?present=1``; the bar on the page leaves it)."""
    st.sidebar.toggle(t("common.present_on"), value=False, key="present_toggle", help=t("common.present_help"),
                      on_change=_enter)


def shows(*objects: Any) -> None:
    """Declare that these library objects (functions, methods, classes) ran in this run: the lesson being drawn
    lists them in "Show the code". Called where the code is called, so the list is never kept by hand."""
    lesson = st.session_state.get(_LESSON)
    if lesson is not None:
        lesson.shows(*objects)


def code_key(ns: str) -> str:
    """The key (and URL parameter) of a page's "Show the code" expander: ``?code_<page>=true`` opens it."""
    return f"code_{ns}"


def _current(n_hint: int) -> int:
    try:
        step = int(str(st.query_params.get(STEP_PARAM, "1")))
    except ValueError:
        step = 1
    return max(1, min(step, max(n_hint, 1)))


def _same(a: list, b: list | None) -> bool:
    return b is not None and len(a) == len(b) and all(x is y for x, y in zip(a, b))


class Lesson:
    """The steps of one page run. Create it after ``anatomy.header`` and close it with ``end()``."""

    def __init__(self, ns: str):
        self.ns, self.on, self.count, self.kept = ns, active(), 0, 0
        self.known = int(st.session_state.get(f"_present_steps_{ns}", 99))   # steps counted by the last run
        self.current = _current(self.known)
        # the tab each step was drawn in, by the last run (pages whose tabs all run: ``Lesson.tabs``)
        self.where: dict[int, int] = dict(st.session_state.get(f"_present_where_{ns}", {}))
        self.tab_now: int | None = None           # the tab whose panel is being drawn, while ``tabs`` draws it
        self.tab_steps: dict[int, int] = {}
        self.open_tab: int | None = None          # the tab shown in this run (``Lesson.tabs``)
        tab, seen = st.session_state.get("tab"), st.session_state.get(f"_present_tab_{ns}")
        if self.on and seen is not None and tab != seen:      # another tab opened: its lesson starts there
            labels = st.session_state.get(f"_present_labels_{ns}", [])
            opened = labels.index(tab) if tab in labels else None
            self.current = min((s for s, i in self.where.items() if i == opened),
                               default=int(st.session_state.get(f"_present_tab_start_{ns}", 1)))
            st.query_params[STEP_PARAM] = str(self.current)
        st.session_state[f"_present_tab_{ns}"] = tab
        self.bar = st.empty() if self.on else None
        self.inside = 0                           # the step being drawn (0: none, or a kept section)
        self.ended = False                        # True once ``end`` ran: a fragment rerunning after is its own run
        self.reached: dict[str, int] = {}         # the step count at the end of each ``part``, by its body's name
        self.code: list = []                      # what ran, for "Show the code" (``shows``), in order, each once
        self.code_of: dict[str, list] = {}        # what each ``part`` declared, by its body's name
        self.followed: dict[str, Any] = {}        # what the page outside each ``part`` was drawn for (``follow``)
        st.session_state[_LESSON] = self

    def shows(self, *objects: Any) -> None:
        """These objects ran: "Show the code" lists them (``end`` draws it)."""
        for obj in objects:
            if not any(obj is seen for seen in self.code):
                self.code.append(obj)

    def tabs(self, labels: list[str], *, lazy: bool = False, **kwargs) -> list:
        """``st.tabs(labels, key="tab", ...)``. ``lazy``: only the open tab runs (``tab.open``); in presenter mode
        a tab opened starts at its first step (the one after the steps drawn before the tabs). Otherwise, for a
        page whose tabs all run and hold steps: each panel (a context manager) notes its steps, and in presenter
        mode the panel holding the current step is the one opened (Next from the last step of one tab opens the
        next tab; a lesson-plan link to a step inside a tab opens it). Outside presenter mode it is ``st.tabs``."""
        key = kwargs.setdefault("key", "tab")
        # a tab's first step: the step holding the tab bar, or the one after the steps drawn before it
        st.session_state[f"_present_tab_start_{self.ns}"] = self.inside or self.count + 1
        if lazy:
            return st.tabs(labels, **kwargs)
        want = self.where.get(self.current) if self.on else None
        if want is not None and want < len(labels) and st.session_state.get(key) != labels[want]:
            st.session_state[key] = labels[want]
            st.session_state[f"_present_tab_{self.ns}"] = labels[want]
        st.session_state[f"_present_labels_{self.ns}"] = list(labels)
        panels = st.tabs(labels, **kwargs)
        shown = st.session_state.get(key)
        self.open_tab = labels.index(shown) if shown in labels else 0
        return [self._panel(i, panel) for i, panel in enumerate(panels)]

    @contextlib.contextmanager
    def _panel(self, index: int, panel):
        self.tab_now = index
        try:
            with panel:
                yield
        finally:
            self.tab_now = None

    def part(self, body: Callable[..., T], *args: Any, follow: Callable[[T], Any] | None = None) -> T:
        """``body(*args)`` as an ``st.fragment``: the controls drawn in it rerun and redraw only it (the redraw budget,
        docs/performance.md), and the presenter steps it draws keep their numbers (the fragment's own rerun numbers
        them from where the full run was when it got here). On the full run, ``body``'s return value; a fragment's own
        rerun returns to Streamlit, not to the page. ``follow``: what the page outside the part was drawn for, read
        from ``body``'s result (a control's value, "a run has finished"); when the part's own rerun reads another
        value, the whole page reruns so that what lies outside follows."""
        counters, name, before = (self.count, self.kept), body.__qualname__, list(self.code)

        @functools.wraps(body)      # the fragment's identity is the body's name (and where it is drawn)
        def rerunnable(*a: Any) -> T:
            own = self.ended                    # the fragment's own rerun (``end`` ran in the full run)
            if own and self.on and st.session_state.get("tab") != st.session_state.get(f"_present_tab_{self.ns}"):
                st.rerun(scope="app")          # another tab opened in it: the page's step bar starts that tab
            self.count, self.kept = counters
            self.code = list(before)
            out = body(*a)
            if own and self.on and self.count != self.reached.get(name, self.count):
                st.rerun(scope="app")          # its number of steps changed: the step bar (outside) counts anew
            declared = self.code[len(before):]
            if own and st.session_state.get(code_key(self.ns)) and not _same(declared, self.code_of.get(name)):
                st.rerun(scope="app")          # it ran other code while "Show the code" is open: redraw the list
            self.reached[name], self.code_of[name] = self.count, declared
            if follow is not None:
                drawn_for, self.followed[name] = self.followed.get(name), follow(out)
                if own and self.followed[name] != drawn_for:
                    st.rerun(scope="app")      # what lies outside was drawn for another value: it follows
            return out

        return st.fragment(rerunnable)(*args)

    @contextlib.contextmanager
    def step(self, name: str, *, keep: bool = False, shows: tuple = ()):
        """One step of the lesson (``name`` only documents it); ``keep``: shown under every step; ``shows``: the
        library code the step runs, listed in "Show the code"."""
        self.shows(*shows)
        if keep:                      # not a step of its own: shown under every step
            self.kept += 1
            key = f"present_keep_{self.kept}"
        else:
            self.count += 1
            key = _KEY.format(self.count)
            if self.tab_now is not None:
                self.tab_steps[self.count] = self.tab_now
        outer, self.inside = self.inside, (self.count if not keep else self.inside)
        try:
            with st.container(key=key):
                yield
        finally:
            self.inside = outer

    def end(self) -> None:
        """"Show the code" with what ran; in presenter mode the step bar (Previous / Next / exit) and the CSS
        showing the current step."""
        if self.code:
            code_view.show_code(*self.code, key=code_key(self.ns))
        self.ended = True
        st.session_state[f"_present_steps_{self.ns}"] = self.count
        st.session_state[f"_present_where_{self.ns}"] = self.tab_steps
        st.session_state[f"_present_tab_{self.ns}"] = st.session_state.get("tab")    # as drawn (a first run: None)
        if not self.on:
            return
        n = self.count
        current = min(self.current, n)
        if self.open_tab is not None and self.tab_steps.get(current, self.open_tab) != self.open_tab:
            once = f"_present_reopen_{self.ns}"          # one rerun per step at most: never a loop
            if st.session_state.get(once) != current:
                st.session_state[once] = current
                st.rerun()      # the current step is in a tab this run did not open: the next run opens it
        else:
            st.session_state.pop(f"_present_reopen_{self.ns}", None)
        with self.bar.container(horizontal=True, vertical_alignment="center"):
            # callbacks, which run before the next run: one run per click, drawn at the new step (a button
            # read after drawing, then st.rerun(), drew the whole page twice per click)
            st.button(t("common.present_prev"), key="present_prev", shortcut="PageUp", disabled=current <= 1,
                      icon=":material/arrow_back:", on_click=_go_to, args=(current - 1,))
            st.markdown(t("common.present_step", i=current, n=n))
            st.button(t("common.present_next"), key="present_next", shortcut="PageDown", disabled=current >= n,
                      icon=":material/arrow_forward:", type="primary", on_click=_go_to, args=(current + 1,))
            st.button(t("common.present_exit"), key="present_exit", type="tertiary", icon=":material/close:",
                      on_click=_leave)
        css = _STEP_CSS.replace("CURRENT", str(current))
        if current != st.session_state.get("_present_css_step"):   # the router's CSS hid every step but another
            css += _SHOW_CSS.replace("CURRENT", str(current))
        st.html(css)

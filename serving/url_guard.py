"""What an address and a move between pages can carry into a page's controls: used, clamped or ignored with a
message, never a traceback, and never a value that belongs to another page.

Every page binds its controls to the URL (``bind="query-params"``), so a shared link seeds them; Streamlit parses
each value for its widget kind and silently resets a value it cannot use or clamps it. This module works with
Streamlit's public API only (``st.query_params``, ``st.session_state``, ``st.rerun``), in three steps of a run:

1. **Before the page runs** (``begin_run``, from the router; ``slot`` in an app without one), on a page's first run
   in a session: a value that no widget kind can take is dropped from the address and the page is run again without
   it. That is a number that is not finite (``inf``, ``nan``, ``1e400``, a 5,000-digit number: an integer control
   would raise ``OverflowError`` on it) and a text longer than any control accepts. What the address asked for is
   kept for step 3.
2. **On a move to another page** in the same session, the controls of the page left behind are forgotten: a key
   (``h``, ``n``, ``step`` ...) names a different control on each page, and the browser sends the previous page's
   values with the move, so a value from one page would otherwise reach the next page's control of the same key
   (a bandwidth slider of range 0.05..3 given 8 heads). Internal state (keys starting with ``_``: a training
   ticket, the presenter's counters) and the router's own keys stay.
3. **After the page ran** (``end_run``, from the router): what the controls adopted (the address Streamlit wrote
   back, the controls' values) is compared with what the address asked for; each parameter that was dropped or
   changed is named in one message under the page's title (``ui.anatomy.header`` makes the slot), in the page's
   language. A value that merely spells the default (``?seed=0``) is not reported; neither is anything on a later
   run of the same page (the address is then the app's own, e.g. a tab relabelled by a language switch).
"""
from __future__ import annotations

import math
import threading
from typing import Any, Callable

import streamlit as st

from ui.format import md_escape
from ui.i18n import LANGS, t

ROUTER_PARAMS = frozenset({"lang", "present", "step", "embed", "embed_options"})   # read by the router, not widgets
ROUTER_STATE = frozenset({"lang", "present_toggle"})     # session keys of the router's own widgets and settings
MAX_TEXT = 20_000        # characters: beyond every control's max_chars
_PREVIEW = 24            # characters of a rejected value quoted in the message

_PAGE, _PENDING, _DROPPED, _ADOPTED = "_url_page", "_url_pending", "_url_dropped", "_url_adopted"
_local = threading.local()   # a script run happens in one thread: the message slot of the current run


def unusable(value: str) -> bool:
    """No widget kind can take this value: a number that is not finite (an integer control runs int(float(value)):
    ``inf``, ``1e400`` or a 400-digit number raise OverflowError there), or a text longer than any control takes. A long
    digit string that is a finite number is left alone: it is a fine text (a probe of 300 digits gets the page's own
    message) and a number control clamps it or resets it."""
    if len(value) > MAX_TEXT:
        return True
    try:
        number = float(value)
    except (ValueError, OverflowError):
        return False
    return not math.isfinite(number)


def _address() -> dict[str, list[str]]:
    return {k: st.query_params.get_all(k) for k in st.query_params if k not in ROUTER_PARAMS}


def _preview(values: list[str]) -> str:
    text = values[-1] if values else ""
    return text[:_PREVIEW] + ("…" if len(text) > _PREVIEW else "")


def _forget_page_left_behind() -> None:
    """Step 2: the previous page's controls (their values, and their parameters in the address) do not follow the
    learner to the next page. Parameters no control of that page held pass on (a link's settings for this page)."""
    left = [key for key in st.session_state.keys() if not key.startswith("_") and key not in ROUTER_STATE]
    for key in left:
        del st.session_state[key]
    for key in left:
        if key in st.query_params and key not in ROUTER_PARAMS:
            try:
                del st.query_params[key]
            except Exception:  # noqa: BLE001 - still bound to the old page's control: Streamlit drops it itself
                pass


def _visit(page: str) -> None:
    """Steps 1 and 2 on the first run of ``page`` in this session (nothing on its later runs)."""
    state = st.session_state
    previous = state.get(_PAGE)
    if previous == page:
        return
    state[_PAGE] = page
    if previous is not None:
        _forget_page_left_behind()
    dropped = dict(state.get(_DROPPED, {}))
    for key, values in _address().items():
        if any(unusable(v) for v in values):
            dropped[key] = _preview(values)
            try:
                del st.query_params[key]
            except Exception:  # noqa: BLE001 - bound already (cannot happen on a first run): Streamlit resets it
                pass
    state[_PENDING] = _address()
    if dropped.keys() != state.get(_DROPPED, {}).keys():
        state[_DROPPED] = dropped
        st.rerun()      # run the page again without them: Streamlit seeds controls from the address a run starts with


def begin_run(page: str = "") -> None:
    """The router, before the page runs (``page``: its url path)."""
    _local.slot = None
    _visit(page)


def slot() -> None:
    """The place for this run's message, right under a page's title (``ui.anatomy.header``), before any control:
    an empty placeholder, filled at the end of the run when a link value was ignored or adjusted. In an app
    without the router this also does ``begin_run``'s work."""
    _visit(st.session_state.get(_PAGE, ""))
    _local.slot = st.empty()


def adopt_label(key: str, options, label_of: Callable[[Any, str], str]) -> None:
    """A bound control over language-neutral options stores its displayed label in the address, so a link made in
    the other language (``?lang=zh&mode=Random+(untrained)``) names its option by that language's label. Before the
    control is drawn, map such a label back to its option (``label_of(option, lang)``); the control then shows it in
    the page's language, which is the link's own choice, not a value the page changed."""
    asked = st.query_params.get(key)
    if asked is None or key in st.session_state:
        return
    for lang in LANGS:
        for option in options:
            if label_of(option, lang) == asked:
                st.session_state[key] = option
                adopted(key)
                return


def adopted(key: str) -> None:
    """The page set control ``key`` from the address's value itself (a label of the other language mapped to its
    option or tab): what the link asked for is used, so this run's message does not name it."""
    st.session_state[_ADOPTED] = [*st.session_state.get(_ADOPTED, []), key]


def _means(value: Any, sent: list[str]) -> bool:
    """The control's value ``value`` is what the address text ``sent`` says (``5.0`` and ``5``, ``TRUE`` and True)."""
    if isinstance(value, (list, tuple)):
        return [str(v) for v in value] == sent
    if len(sent) != 1:
        return False
    text = sent[0]
    if isinstance(value, bool):
        return text.lower() == str(value).lower()
    if hasattr(value, "isoformat"):
        return value.isoformat() == text
    try:
        return float(text) == float(value)
    except (TypeError, ValueError, OverflowError):
        return str(value) == text


def _same_text(a: list[str], b: list[str]) -> bool:
    if a == b:
        return True
    try:
        return len(a) == len(b) == 1 and float(a[0]) == float(b[0])
    except (ValueError, OverflowError):
        return False


def end_run() -> None:
    """The router, after the page ran: name what the controls did not take as the address asked (step 3)."""
    state = st.session_state
    notes = []
    dropped = state.get(_DROPPED, {})
    for key in [k for k in dropped if k in state]:   # dropped before the run: named on the page with that control
        notes.append(("rejected", key, dropped[key]))
    if getattr(_local, "slot", None) is not None:    # a page with a title: what no control of it read is let go
        state[_DROPPED] = {}
    adopted = set(state.pop(_ADOPTED, []))
    for key, sent in (state.pop(_PENDING, None) or {}).items():
        if sent in ([], [""]) or key in adopted:
            continue                          # "?k=" means "not set"
        now = st.query_params.get_all(key) if key in st.query_params else []
        if _same_text(now, sent):
            continue                          # used as asked (or read by no control: Streamlit leaves it alone)
        known = key in state
        if not now:                           # dropped from the address: the default spelled, or not usable
            if not (known and _means(state[key], sent)):
                notes.append(("rejected", key, _preview(sent)))
        elif len(sent) > 1 or not (known and _means(state[key], sent)):
            notes.append(("adjusted", key, _preview(sent)))
    if notes:
        _show(notes)


def _show(notes: list[tuple[str, str, str]]) -> None:
    """Draw (or redraw) the one message of this run in the page's slot, or as a toast on a page without one."""
    slot = getattr(_local, "slot", None)
    if slot is not None:
        slot.warning(message(notes), icon=":material/link_off:")
    else:
        st.toast(message(notes), icon=":material/link_off:", duration="long")


def message(notes: list[tuple[str, str, str]]) -> str:
    """The learner's message for the recorded notes: each parameter named with the value it had (escaped:
    a link's text is never Markdown or HTML)."""
    lines, seen = [], set()
    for kind in ("rejected", "adjusted"):
        items = []
        for k, key, value in notes:
            if k == kind and key not in seen:
                seen.add(key)
                items.append(t("common.url_param", name=md_escape(key), value=md_escape(value)))
        if items:
            lines.append(t(f"common.url_{kind}", params=t("common.url_list_sep").join(items)))
    return "  \n".join(lines)

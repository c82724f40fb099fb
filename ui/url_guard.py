"""Any value a link can carry is used, clamped or ignored with a message: never a traceback.

Every page binds its controls to the URL (``bind="query-params"``), so a shared link seeds them. Streamlit
1.67 parses that value per widget kind when the widget is created (``SessionState._seed_widget_from_url``):
it resets values it cannot use (out of range, unknown option, text for a number) to the default and cuts
the rest (text beyond ``max_chars``, a multiselect beyond ``max_selections``) - silently - and one case
raises: an integer ``st.number_input`` runs ``int(float(value))``, so ``?seed=inf`` (``-inf``, ``1e400``, a
400-digit number) is an ``OverflowError`` on every page with a seed.

This module wraps that one seeding step for every widget of every page, so no page needs its own check:
an exception drops the value (the widget shows its default) and every value that was dropped or changed is
recorded, and one message under the page's title (``ui.anatomy.header`` makes the slot) names those
parameters and values, in the page's language. A value that merely spells the default (``?seed=0``) is not
reported. The router installs the guard before any page runs (``begin_run``).
"""
from __future__ import annotations

import functools
import threading
from typing import Any

_SINGLE_VALUED = {"bool_value", "int_value", "double_value", "string_value"}
_PREVIEW = 24          # characters of a rejected value quoted in the message

_local = threading.local()   # a script run happens in one thread: the notes and slot of the current run


def _notes() -> list[tuple[str, str, str]]:
    if not hasattr(_local, "notes"):
        _local.notes = []
    return _local.notes


def _note(kind: str, key: str, url_value: Any) -> None:
    value = url_value[-1] if isinstance(url_value, list) and url_value else url_value
    text = str(value if value is not None else "")
    notes = _notes()
    if any(k == key for _, k, _ in notes):
        return
    notes.append((kind, key, text[:_PREVIEW] + ("…" if len(text) > _PREVIEW else "")))
    _show(notes)


def _show(notes: list[tuple[str, str, str]]) -> None:
    """Draw (or redraw) the one message of this run in the page's slot, or as a toast on a page without one."""
    import streamlit as st

    slot = getattr(_local, "slot", None)
    try:
        if slot is not None:
            slot.warning(message(notes), icon=":material/link_off:")
        else:
            st.toast(message(notes[-1:]), icon=":material/link_off:", duration="long")
    except Exception:  # noqa: BLE001 - e.g. no script run (bare mode): the value is still ignored
        pass


def _same(a: Any, b: Any) -> bool:
    """URL-parsed value ``a`` and serialized widget value ``b`` mean the same (``5.0`` and ``5`` do)."""
    try:
        if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
            return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
        return bool(a == b)
    except Exception:  # noqa: BLE001 - comparing odd values is never worth a traceback
        return False


def _guarded_seed(original, self, metadata, user_key: str, widget_id: str, url_value):
    """Streamlit's URL seeding, with every exception turned into "ignore the value" and every dropped or
    changed value recorded for the message."""
    from streamlit.runtime.state.query_params import parse_url_param

    # a page may read the link's value itself and set the widget through st.session_state before drawing it
    # (a label in the other language, app_pages/pronoun.py adopt_url_choice): then Streamlit's own reading of
    # the value failing is no news for the learner
    adopted = user_key in getattr(self, "_new_session_state", ())
    # a control drawn anew under the same key (tabs whose labels changed with the language) is re-seeded
    # from the URL of the previous run: not a link the learner opened
    relabelled = getattr(_local, "relabelled", None) == (user_key, widget_id)
    try:
        seeded = original(self, metadata, user_key, widget_id, url_value)
    except Exception:  # noqa: BLE001 - e.g. OverflowError from int(inf): the value is unusable
        try:
            self.query_params.remove_param(user_key)
        except Exception:  # noqa: BLE001
            pass
        _note("rejected", user_key, url_value)
        return False
    try:
        parsed = parse_url_param(url_value, metadata.value_type)
    except Exception:  # noqa: BLE001 - not even parseable: certainly not used
        parsed = object()
    if not seeded:
        if adopted or relabelled:
            return seeded
        # dropped: fine when the link merely spelled the default (Streamlit then drops it from the URL)
        try:
            default = metadata.serializer(metadata.deserializer(None))
        except Exception:  # noqa: BLE001
            default = object()
        if not _same(parsed, default):
            _note("rejected", user_key, url_value)
        return seeded
    try:
        used = metadata.serializer(self[user_key])
    except Exception:  # noqa: BLE001
        used = parsed
    repeated = isinstance(url_value, list) and len(url_value) > 1 and metadata.value_type in _SINGLE_VALUED
    if repeated or not _same(parsed, used):
        _note("adjusted", user_key, url_value)
    return seeded


def install() -> bool:
    """Wrap Streamlit's URL seeding once per process; True when the guard is in place."""
    try:
        from streamlit.runtime.state.session_state import SessionState
    except ImportError:  # pragma: no cover - Streamlit moved it: tests/test_hostile_urls.py fails loudly
        return False
    original = getattr(SessionState, "_seed_widget_from_url", None)
    if original is None:  # pragma: no cover - same
        return False
    if getattr(original, "_url_guard", False):
        return True

    @functools.wraps(original)
    def seed(self, metadata, user_key, widget_id, url_value):
        return _guarded_seed(original, self, metadata, user_key, widget_id, url_value)

    seed._url_guard = True
    SessionState._seed_widget_from_url = seed

    binding = getattr(SessionState, "_handle_query_param_binding", None)
    if binding is not None:
        @functools.wraps(binding)
        def bind(self, metadata, user_key, widget_id):
            try:   # bound in an earlier run of this page under another id: the same control, relabelled
                old = self.query_params.get_binding_for_param(user_key)
                _local.relabelled = (user_key, widget_id) if old is not None and old.widget_id != widget_id else None
            except Exception:  # noqa: BLE001
                _local.relabelled = None
            return binding(self, metadata, user_key, widget_id)

        SessionState._handle_query_param_binding = bind
    return True


def message(notes: list[tuple[str, str, str]]) -> str:
    """The learner's message for the recorded notes: each parameter named with the value it had (escaped:
    a link's text is never Markdown or HTML)."""
    from .anatomy import md_escape
    from .i18n import t

    lines = []
    for kind in ("rejected", "adjusted"):
        items = [t("common.url_param", name=md_escape(key), value=md_escape(value))
                 for k, key, value in notes if k == kind]
        if items:
            lines.append(t(f"common.url_{kind}", params=t("common.url_list_sep").join(items)))
    return "  \n".join(lines)


def begin_run() -> None:
    """A new script run: forget the notes and slot of the previous one (the router calls this first)."""
    install()
    _notes().clear()
    _local.slot = None


def slot() -> None:
    """The place for this run's message, right under a page's title (``ui.anatomy.header``), before any
    control: an empty placeholder, filled when a link value is ignored or adjusted."""
    import streamlit as st

    begin_run()
    _local.slot = st.empty()


install()

"""Ask the class: a live poll of a page's predict-first question (peer instruction: ask, see the spread,
discuss, ask again, reveal).

``ask_button`` sits in every exercise (``ui.anatomy.exercise``): pressing it opens a room for that question and
takes the teacher's session to the poll page (app_pages/poll.py, ``ui.poll_room.room_page``) with ``?room=CODE``.
This module is only that opening (ui.anatomy imports it, so it imports nothing that imports ui.anatomy); the
views are ``ui.poll_room``. The session
that opened a room holds its owner token (in its session state, never in the URL) and sees the projector view:
the question, the room code, a QR code of the join link, the live count (redrawn every second) and the controls.
Every other session sees the student view: the question and its answers in the student's own language (each text
written from the catalog labels it was made from, ``ui.poll_text``), one vote per round, then the answer once
revealed. The rooms live in ``serving.poll_store`` (this process, or Redis with ``REDIS_URL``).
"""
from __future__ import annotations

import re

import streamlit as st

from serving import poll_store

from . import poll_text
from .i18n import current_lang, t
from .registry import PAGES

OWNED = "_poll_owned"      # session state: room code -> owner token, for the rooms this session opened
PAGE_KEYS = {p.key for p in PAGES}
POLL_PAGE = next(p for p in PAGES if p.key == "poll")


# ------------------------------------------------------------------------------------------- opening a room

def ask_button(key: str, question: str, options, answer: int) -> None:
    """The teacher's "Ask the class" control of one exercise."""
    if st.button(t("poll.ask"), key=f"{key}_ask", icon=":material/how_to_vote:", type="tertiary",
                 help=t("poll.ask_help")):
        open_room(key, question, list(options), answer)


def room_spec(key: str, question: str, options: list[str], answer: int, lang: str, page: str = "") -> dict:
    """What a room stores for an exercise: references to the labels of its texts (``ui.poll_text``)."""
    q = poll_text.reference(question, lang)
    prefer = q["key"].split(".")[0] + "." if q["key"] else ""
    if page not in PAGE_KEYS:
        page = prefer[:-1] if prefer[:-1] in PAGE_KEYS else ""
    return {"page": page, "exercise": str(key)[:80], "lang": lang, "answer": int(answer), "question": q,
            "options": [poll_text.reference(o, lang, prefer) for o in options]}


def _this_page() -> str:
    """The url path of the page the session is on (``st.context.url``), '' when unknown (AppTest)."""
    try:
        url = st.context.url or ""
    except Exception:  # noqa: BLE001 - no browser context
        url = ""
    m = re.match(r"[a-z]+://[^/?#]*(/[^?#]*)?", url)
    path = (m.group(1) or "") if m else ""
    return path.rstrip("/").rsplit("/", 1)[-1]


def open_room(key: str, question: str, options: list[str], answer: int) -> None:
    spec = room_spec(key, question, options, answer, current_lang(), _this_page())
    try:
        code, token = poll_store.store().create(spec)
    except poll_store.StoreFull:
        st.warning(t("poll.too_many_rooms"), icon=":material/info:")
        return
    except poll_store.Unavailable:
        st.warning(t("poll.unavailable"), icon=":material/info:")
        return
    except ValueError:           # more answers than a poll takes, or a spec beyond the size bound
        st.warning(t("poll.cannot_open"), icon=":material/info:")
        return
    owned = st.session_state.setdefault(OWNED, {})
    owned[code] = token
    params = {"room": code, "lang": current_lang()}
    if st.query_params.get("present"):
        params["present"] = "1"          # presenter mode goes along
    st.switch_page(POLL_PAGE.file, query_params=params)

"""Ask the class: the poll page's views (app_pages/poll.py). The session that opened a room (``ui.poll``) holds
its owner token (in its session state, never in the URL) and sees the projector view: the question, the room code,
a QR code of the join link, the live count (redrawn every second) and the controls. Every other session sees the
student view: the question and its answers in the student's own language (each text written from the catalog
labels it was made from, ``ui.poll_text``), one vote per round, then the answer once revealed. The rooms live in
``serving.poll_store`` (this process, or Redis with ``REDIS_URL``).
"""
from __future__ import annotations

import functools
import io
import re
import secrets

import streamlit as st

from serving import poll_store, url_guard

from . import anatomy, poll_text
from .i18n import current_lang, t
from .poll import OWNED, PAGE_KEYS, POLL_PAGE
from .poll_charts import LETTERS, votes
from .registry import PAGES

VOTER = "_poll_voter"      # session state: this session's random voter id
MINE = "_poll_mine"        # session state: (room, round) -> the option this session chose
FLASH = "_poll_flash"      # session state: the outcome of the last vote or control, shown once


# ------------------------------------------------------------------------------------------------ the page

def room_page() -> None:
    """app_pages/poll.py: the join box, then the projector view (the room's owner) or the student view."""
    st.title(t("poll.title"))
    url_guard.slot()
    raw = st.text_input(t("poll.code_label"), key="room", bind="query-params", max_chars=16,
                        help=t("poll.code_help"), placeholder="ABCD-2345")
    raw = raw.strip() if isinstance(raw, str) else ""
    if not raw:
        _about()
        return
    code = poll_store.normalise_code(raw)
    if code is None:
        st.warning(t("poll.bad_code", code=anatomy.md_escape(raw[:24])), icon=":material/info:")
        _about()
        return
    try:
        state = poll_store.store().state(code)
    except poll_store.Unavailable:
        anatomy.problem("poll.unavailable")
        return
    if state is None:
        st.warning(t("poll.no_room", code=poll_store.display_code(code)), icon=":material/info:")
        _about()
        return
    token = st.session_state.get(OWNED, {}).get(code)
    if token:
        _projector(state, token)
    else:
        _student(code)


def _about() -> None:
    st.markdown(t("poll.intro"))
    st.markdown(t("poll.how_teacher"))
    st.caption(t("poll.how_safe"))


def _text(ref: dict, lang: str) -> str:
    return poll_text.render(ref, lang)


def _question(state: poll_store.RoomState, lang: str, *, with_options: bool) -> None:
    """The question in ``lang`` (and its answers, lettered, on the projector): one markdown."""
    spec = state.spec
    parts = [t("poll.from_page", page=t(f"nav.{spec['page']}"))] if spec.get("page") in PAGE_KEYS else []
    parts.append(f"**{t('common.exercise')}** {_text(spec['question'], lang)}")
    text = "\n\n".join(parts)
    if with_options:
        text += "\n\n" + "\n".join(f"- {t('poll.option', letter=LETTERS[i], text=_text(o, lang))}"
                                    for i, o in enumerate(spec["options"]))
    st.markdown(text)


def _flash() -> None:
    message = st.session_state.pop(FLASH, None)
    if message == poll_store.OK:
        st.success(t("poll.voted_ok"), icon=":material/check_circle:")
    elif message:
        st.warning(t(f"poll.{message}"), icon=":material/info:")


# ------------------------------------------------------------------------------------------ the projector

@functools.lru_cache(maxsize=64)
def qr_png(link: str) -> bytes:
    """The QR code of ``link`` as a PNG, made here (segno: no service, no network)."""
    import segno
    buf = io.BytesIO()
    segno.make(link, error="m").save(buf, kind="png", scale=8, border=2)
    return buf.getvalue()


def join_link(code: str) -> str:
    """The poll page's address on this server with ``?room=CODE`` (no ?lang=: each phone picks its own)."""
    try:
        url = st.context.url or ""
    except Exception:  # noqa: BLE001 - no browser context
        url = ""
    m = re.match(r"(https?://[^/?#\s]+)(/[^?#\s]*)?", url)
    if m:
        base, path = m.group(1), (m.group(2) or "/").rstrip("/")
        prefix = path.rsplit("/", 1)[0] if path else ""
    else:
        base, prefix = "http://localhost:8501", ""
    return f"{base}{prefix}/{POLL_PAGE.key}?room={code}"


def _projector(state: poll_store.RoomState, token: str) -> None:
    lang, code = current_lang(), state.code
    left, right = st.columns([3, 2])      # the count beside the QR code: both on the projector's first screen
    with left:
        _question(state, lang, with_options=True)
        _projector_live(code, token)
    with right:
        st.markdown(f"### {t('poll.room', code=poll_store.display_code(code))}")
        link = join_link(code)
        st.image(qr_png(link), width=220, alt=t("poll.qr_alt", code=poll_store.display_code(code)))
        st.caption(t("poll.join"))
        st.code(link, language=None, wrap_lines=True)
    st.caption(t("poll.owner_note"))
    page = state.spec.get("page")
    if page in PAGE_KEYS:
        st.page_link(next(p for p in PAGES if p.key == page).file, label=t("poll.back"),
                     icon=":material/arrow_back:")


def _control(code: str, token: str, action: str) -> None:
    try:
        result = poll_store.store().control(code, token, action)
    except poll_store.Unavailable:
        result = "unavailable"
    if result != poll_store.OK:
        st.session_state[FLASH] = {"forbidden": "vote_no_room", "no_room": "vote_no_room"}.get(result, result)


def _live_state(code: str) -> poll_store.RoomState | None:
    """The room now, for a redraw; None (with a message) when it closed or the store cannot be reached."""
    try:
        state = poll_store.store().state(code)
    except poll_store.Unavailable:
        anatomy.problem("poll.unavailable")
        return None
    if state is None:
        st.warning(t("poll.vote_no_room"), icon=":material/info:")
    return state


def _chart(state: poll_store.RoomState, *, revealed: bool) -> None:
    """Every round's count of each answer; the answer outlined once revealed."""
    anatomy.show_chart(votes(state.counts, answer=state.spec["answer"] if revealed else None,
                             option_title=t("poll.chart_option"), count_title=t("poll.chart_count"),
                             round_title=t("poll.chart_round"), round_label=t("poll.round")), key="poll_votes")


@st.fragment(run_every=1)
def _projector_live(code: str, token: str) -> None:
    """Redrawn every second: the count (or how many voted, while hidden), the status, the controls."""
    state = _live_state(code)
    if state is None:
        return
    _flash()
    total = state.total()
    if state.revealed:
        status = t("poll.status_revealed")
    else:
        status = t("poll.status_open" if state.open else "poll.status_closed", n=state.round)
    st.markdown(f"**{status}** {t('poll.votes', n=total)}")
    if state.show or state.revealed:
        _chart(state, revealed=state.revealed)
    else:
        st.info(t("poll.counts_hidden", n=total), icon=":material/visibility_off:")
    if state.revealed:
        answer = state.spec["answer"]
        st.success(t("poll.answer", letter=LETTERS[answer], text=_text(state.spec["options"][answer],
                                                                           current_lang())),
                   icon=":material/check_circle:")
    with st.container(horizontal=True):
        if state.show:
            st.button(t("poll.hide"), key="poll_hide", icon=":material/visibility_off:",
                      on_click=_control, args=(code, token, "hide"))
        else:
            st.button(t("poll.show"), key="poll_show", icon=":material/visibility:",
                      on_click=_control, args=(code, token, "show"))
        st.button(t("poll.close"), key="poll_close", icon=":material/lock:", disabled=not state.open,
                  on_click=_control, args=(code, token, "close"))
        st.button(t("poll.next_round", n=state.round + 1), key="poll_next", icon=":material/replay:",
                  disabled=state.round >= poll_store.store().max_rounds,
                  on_click=_control, args=(code, token, "next_round"))
        st.button(t("poll.reveal"), key="poll_reveal", icon=":material/lightbulb:", type="primary",
                  disabled=state.revealed, on_click=_control, args=(code, token, "reveal"))


# -------------------------------------------------------------------------------------------- the student

def _voter() -> str:
    if VOTER not in st.session_state:
        st.session_state[VOTER] = secrets.token_hex(8)
    return st.session_state[VOTER]


def _vote(code: str, rnd: int, option: int) -> None:
    voter = _voter()
    try:
        result = poll_store.store().vote(code, rnd, voter, option)
        if result == poll_store.ALREADY:
            option = poll_store.store().voted(code, rnd, voter)
    except poll_store.Unavailable:
        result, option = "unavailable", None
    if result in (poll_store.OK, poll_store.ALREADY) and option is not None:
        st.session_state.setdefault(MINE, {})[(code, rnd)] = option
    st.session_state[FLASH] = result if result in (poll_store.OK, "unavailable") else f"vote_{result}"


def _student(code: str) -> None:
    _student_live(code)


@st.fragment(run_every=2)
def _student_live(code: str) -> None:
    """Redrawn every 2 seconds: a new round, the close and the reveal reach the phone without a reload."""
    lang = current_lang()
    state = _live_state(code)
    if state is None:
        return
    _question(state, lang, with_options=False)
    _flash()
    mine = st.session_state.get(MINE, {}).get((code, state.round))
    if state.revealed:
        answer = state.spec["answer"]
        st.success(t("poll.answer", letter=LETTERS[answer], text=_text(state.spec["options"][answer], lang)),
                   icon=":material/check_circle:")
        if mine is not None:
            st.markdown(t("poll.you_right") if mine == answer else t("poll.you_other", letter=LETTERS[mine]))
        _chart(state, revealed=True)
    elif mine is not None:
        st.info(t("poll.your_vote", n=state.round, letter=LETTERS[mine]), icon=":material/how_to_vote:")
    elif not state.open:
        st.info(t("poll.waiting"), icon=":material/hourglass_empty:")
    else:
        st.markdown(t("poll.choose", n=state.round))
        for i, option in enumerate(state.spec["options"]):
            st.button(t("poll.option", letter=LETTERS[i], text=_text(option, lang)), key=f"poll_vote_{i}",
                      width="stretch", on_click=_vote, args=(code, state.round, i))

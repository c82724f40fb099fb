"""Ask the class, as a class uses it (AppTest sessions against the in-process store; the same through Redis
and 3 replicas: tests/test_poll_serving.py).

- every exercise of every page can be asked: its question and answers are found again as catalog labels, and
  written from them in the other language they equal what that language's page shows (the oracle: the page
  itself, run in that language);
- a teacher session and 30 student sessions (15 in Chinese, 15 in English) in one room: every vote counted exactly
  once and shown on the projector; a second vote of a session refused; hide/show, close, a second round, reveal,
  each reaching the students; only the session that opened the room sees and can use the controls;
- any ?room= value is safe input: a message in the learner's language, never a traceback, nothing as HTML.
The first test runs once per page, beside the page's other sweep tests (its walks are shared: tests/sweep.py).
"""
from __future__ import annotations

import re

import pytest

import ui.poll as poll
import ui.poll_room as poll_room
from serving import poll_store
from tests.apptest_util import all_text, chart_data, exceptions, lesson_pages, open_page
from tests.sweep import walk
from ui import poll_text
from ui.i18n import catalog
from ui.registry import available_pages

EN, ZH = catalog("en"), catalog("zh")
HAN = re.compile(r"[\u4e00-\u9fff]")


@pytest.mark.parametrize("key", [spec.key for spec in available_pages()])
def test_every_exercise_of_every_page_can_be_asked_in_both_languages(key):
    seen: dict[tuple[str, str], tuple[str, list[str], int]] = {}
    for lang in ("en", "zh"):
        for run in walk(key, lang):                 # every tab opened in turn (the shared walk: tests/sweep.py)
            assert run.errors == [], (key, lang, run.where, run.errors)
            seen.update({(lang, exercise): asked for exercise, asked in run.asked.items()})
    if key in lesson_pages():                       # a lesson asks at least one question
        assert seen, f"{key} offers no exercise to ask the class"
    problems = []
    for (lang, exercise), (question, options, answer) in sorted(seen.items()):
        other = "zh" if lang == "en" else "en"
        spec = poll.room_spec(exercise, question, options, answer, lang)
        refs = [spec["question"], *spec["options"]]
        for ref, text in zip(refs, [question, *options]):
            if ref["key"] is None or poll_text.render(ref, lang) != text:
                problems.append(f"{lang} {exercise}: {text[:60]!r} is not found again as a label")
        assert (other, exercise) in seen, f"{exercise} is asked in {lang} only"
        other_question, other_options, other_answer = seen[(other, exercise)]
        assert other_answer == answer
        for ref, text in zip(refs, [other_question, *other_options]):
            if poll_text.render(ref, other) != text:
                problems.append(f"{lang}->{other} {exercise}: {poll_text.render(ref, other)[:60]!r} != {text[:60]!r}")
    assert problems == []


def test_render_falls_back_to_the_teachers_words_and_translates_label_fields():
    ref = poll_text.reference("Nothing any catalog says 12345", "en")
    assert ref["key"] is None and poll_text.render(ref, "zh") == "Nothing any catalog says 12345"
    ref = poll_text.reference(EN["masking.ex_opt1"], "en")
    assert ref["key"] == "masking.ex_opt1" and poll_text.render(ref, "zh") == ZH["masking.ex_opt1"]
    # a label filled with a label: the inner one is translated too
    text = EN["poll.from_page"].format(page=EN["nav.masking"])
    ref = poll_text.reference(text, "en")
    assert ref["fields"] == {"page": {"key": "nav.masking", "item": None}}
    assert poll_text.render(ref, "zh") == ZH["poll.from_page"].format(page=ZH["nav.masking"])


# ------------------------------------------------------------------------------------------------ a class

def votes_on_projector(at) -> dict[tuple[str, str], int]:
    """(round label, option letter) -> count, read from the projector chart's data."""
    (chart,) = at.get("vega_lite_chart")
    frame = chart_data(chart)["data"]
    return {(r, o): int(c) for r, o, c in zip(frame["round"], frame["option"], frame["count"])}


def ask(at, key: str) -> str:
    """Press "Ask the class" under exercise ``key``; return the room code. The app moves the session to the poll
    page (st.switch_page); AppTest's own page pointer is moved along, so later runs are of that page, as in a
    browser."""
    at.button(key=f"{key}_ask").click().run()
    assert exceptions(at) == []
    at.switch_page("app_pages/poll.py")
    code = at.query_params["room"]
    return code[0] if isinstance(code, list) else code


def student(code: str, lang: str):
    at = open_page("poll", lang, {"room": code})
    assert exceptions(at) == []
    return at


def test_a_teacher_and_thirty_students(monkeypatch):
    monkeypatch.setattr(poll_store, "_STORE", poll_store.MemoryStore())
    teacher = open_page("gqa", "en")
    code = ask(teacher, "gqa_ex")
    assert poll_store.normalise_code(code) == code
    assert set(teacher.query_params) == {"room", "lang"}        # the owner's token is never in the URL
    token = teacher.session_state[poll.OWNED][code]
    assert token not in str(dict(teacher.query_params)) and token not in all_text(teacher)
    text = all_text(teacher)
    assert poll_store.display_code(code) in text and f"/poll?room={code}" in text
    assert EN["gqa.ex_question"] in text and EN["gqa.ex_b"] in text
    assert [b.key for b in teacher.button] == ["poll_hide", "poll_close", "poll_next", "poll_reveal"]
    assert teacher.get("imgs") or teacher.get("image"), "no QR code drawn"

    # 30 phones: 15 in Chinese, 15 in English, each reads the question in its own language
    langs = ["zh" if i % 2 else "en" for i in range(30)]
    choice = [(0, 1, 1, 2, 1)[i % 5] for i in range(30)]
    phones = []
    for lang in langs:
        at = student(code, lang)
        cat = catalog(lang)
        shown = all_text(at)
        assert cat["gqa.ex_question"] in shown
        labels = [b.label for b in at.button]
        assert labels == [cat["poll.option"].format(letter=letter, text=cat[f"gqa.ex_{k}"])
                          for letter, k in zip("ABC", "abc")]
        assert not any(b.key in ("poll_hide", "poll_close", "poll_next", "poll_reveal") for b in at.button)
        if lang == "zh":
            assert HAN.search(labels[0])
        phones.append(at)
    for at, c in zip(phones, choice):
        at.button(key=f"poll_vote_{c}").click().run()
        assert exceptions(at) == []
        cat = catalog(at.query_params["lang"][0] if isinstance(at.query_params["lang"], list)
                      else at.query_params["lang"])
        assert cat["poll.voted_ok"] in all_text(at)
        assert not [b for b in at.button if b.key.startswith("poll_vote_")]     # one vote: the buttons are gone
    expected = [choice.count(i) for i in range(3)]
    teacher.run()
    assert votes_on_projector(teacher) == {("Round 1", letter): n for letter, n in zip("ABC", expected)}
    assert EN["poll.votes"].format(n=30) in all_text(teacher)

    # a session's second vote (a second click, a forged widget event) is refused and not counted
    again = phones[0]
    store = poll_store.store()
    voter = again.session_state[poll_room.VOTER]
    assert store.vote(code, 1, voter, 2) == poll_store.ALREADY
    assert store.state(code).round_counts() == expected
    # a student's session cannot control the room: it has no token, and a made-up one is refused
    assert poll.OWNED not in again.session_state or code not in again.session_state[poll.OWNED]
    assert store.control(code, "guessed", "reveal") == poll_store.FORBIDDEN

    # hide: the projector shows how many voted, not the spread
    teacher.button(key="poll_hide").click().run()
    assert not teacher.get("vega_lite_chart") and EN["poll.counts_hidden"].format(n=30) in all_text(teacher)
    teacher.button(key="poll_show").click().run()
    assert votes_on_projector(teacher)[("Round 1", "B")] == expected[1]

    # close: a phone that had not voted is told to wait; then a second round: everyone votes again
    late = student(code, "zh")
    teacher.button(key="poll_close").click().run()
    late.run()
    assert ZH["poll.waiting"] in all_text(late) and not [b for b in late.button if b.key.startswith("poll_vote")]
    teacher.button(key="poll_next").click().run()
    assert EN["poll.status_open"].format(n=2) in all_text(teacher)
    second = [1] * 20 + [0] * 5
    for at, c in zip(phones, second):
        at.run()
        at.button(key=f"poll_vote_{c}").click().run()
        assert exceptions(at) == []
    teacher.run()
    counts = votes_on_projector(teacher)
    assert [counts[("Round 2", x)] for x in "ABC"] == [5, 20, 0]
    assert [counts[("Round 1", x)] for x in "ABC"] == expected                # the first round is kept

    # reveal: each phone shows the answer in its language, and whether its own vote was it
    teacher.button(key="poll_reveal").click().run()
    assert EN["poll.answer"].format(letter="B", text=EN["gqa.ex_b"]) in all_text(teacher)
    for i, at in enumerate(phones):
        at.run()
        cat = catalog(langs[i])
        shown = all_text(at)
        assert cat["poll.answer"].format(letter="B", text=cat["gqa.ex_b"]) in shown
        if i < 25:
            assert (cat["poll.you_right"] if second[i] == 1 else cat["poll.you_other"].format(letter="A")) in shown
    assert store.state(code).round_counts(1) == expected and store.state(code).round_counts(2) == [5, 20, 0]


def test_the_teacher_opens_a_poll_from_an_exercise_in_a_tab_in_presenter_mode_and_in_chinese(monkeypatch):
    monkeypatch.setattr(poll_store, "_STORE", poll_store.MemoryStore())
    at = open_page("masking", "zh", {"tab": ZH["masking.tab_causal"], "present": "1", "step": "3"})
    code = ask(at, "mask_ex")
    assert at.query_params["present"] in ("1", ["1"])               # presenter mode goes along
    assert ZH["masking.ex_question"] in all_text(at)
    english = student(code, "en")
    assert EN["masking.ex_question"] in all_text(english)
    assert [b.label for b in english.button] == [EN["poll.option"].format(letter=x, text=EN[f"masking.ex_opt{i}"])
                                                 for i, x in enumerate("ABCD")]


ROOM_VALUES = {"empty": "", "text": "nope", "unknown": "ABCD-2345", "html": "<b>x</b><script>alert(1)</script>",
               "emoji": "🙂🔥" * 3, "digits": "9" * 5000, "cjk": "注意力机制", "100kb": "x" * 100_000,
               "lower": "abcd2345 ", "ambiguous": "0O1IL"}


@pytest.mark.parametrize("value", list(ROOM_VALUES.values()), ids=list(ROOM_VALUES))
@pytest.mark.parametrize("lang", ["en", "zh"])
def test_any_room_value_is_safe_input(value, lang, monkeypatch):
    monkeypatch.setattr(poll_store, "_STORE", poll_store.MemoryStore())
    at = open_page("poll", lang, {"room": value})
    assert exceptions(at) == []
    cat = catalog(lang)
    assert cat["poll.title"] in [t.value for t in at.title]
    text = all_text(at)
    assert "<script>" not in "\n".join(m.value for m in at.markdown)
    assert cat["poll.intro"] in text                                       # how to join, in any case
    if value.strip():
        warnings = "\n".join(w.value for w in at.warning)
        assert warnings and (HAN.search(warnings) if lang == "zh" else not HAN.search(warnings.replace(value, "")))
    assert not [b for b in at.button if b.key and b.key.startswith("poll_")]


def test_a_room_that_closed_or_an_unreachable_store_is_a_message(monkeypatch):
    monkeypatch.setattr(poll_store, "_STORE", poll_store.MemoryStore(ttl=60))
    code, _ = poll_store.store().create(poll.room_spec("k", EN["gqa.ex_question"],
                                                       [EN["gqa.ex_a"], EN["gqa.ex_b"]], 1, "en"))
    at = student(code, "zh")
    assert ZH["gqa.ex_question"] in all_text(at)
    monkeypatch.setattr(poll_store, "_STORE", poll_store.MemoryStore())       # the room is gone (expired)
    at.button(key="poll_vote_0").click().run()
    assert exceptions(at) == [] and ZH["poll.no_room"].format(code=poll_store.display_code(code)) in all_text(at)
    monkeypatch.setattr(poll_store, "_STORE", poll_store.RedisStore("redis://127.0.0.1:9/0"))
    at = student(code, "en")
    assert EN["poll.unavailable"] in all_text(at)
    teacher = open_page("gqa", "en")
    teacher.button(key="gqa_ex_ask").click().run()
    assert exceptions(teacher) == [] and EN["poll.unavailable"] in all_text(teacher)

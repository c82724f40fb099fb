"""Nothing crosses sessions: what one learner types never reaches another learner's page.

Two AppTest instances in one process share ``st.cache_data``, ``st.cache_resource``, ``ui.anatomy``'s spec
cache and the training queue, like two browser sessions of one server. Session A opens a page with input X,
then session B opens it with input Y (everything else the same): every chart (spec and data) and every text
of B must show Y and nothing of X. Every page and tab that shows typed text is covered (the library tab of
the Q/K/V page and the measured-cost tab of the efficiency page show none). About 50 s. A shared cache keyed by something that omits the input (the
training page's snapshot grid was cached under the run's name) fails this.
"""
import json
import re
import time

import pytest

from tests.apptest_util import all_text, chart_data, chart_spec, charts, exceptions, open_page
from ui.i18n import catalog

X_WORDS, Y_WORDS = ("zebra", "quokka", "walrus"), ("mango", "papaya", "lychee")
X, Y = " ".join(X_WORDS + X_WORDS[:1]), " ".join(Y_WORDS + Y_WORDS[:1])


def rendered(at) -> str:
    """Everything B shows: every chart's spec and data (decoded), every text and every table."""
    parts = [all_text(at)]
    for chart in charts(at):
        parts.append(json.dumps(chart_spec(chart), ensure_ascii=False))
        parts.extend(frame.to_json(force_ascii=False) for frame in chart_data(chart).values())
    parts.extend(df.value.to_json(force_ascii=False) for df in at.dataframe)
    return "\n".join(parts)


def two_sessions(page: str, params: dict, key: str, x: str, y: str):
    """Session A with ``key=x``, then session B with ``key=y``; both without errors. Returns (A, B)."""
    a = open_page(page, "en", {**params, key: x})
    assert exceptions(a) == []
    b = open_page(page, "en", {**params, key: y})
    assert exceptions(b) == []
    return a, b


# ---------------------------------------------------------------- pages where the learner types words
EN = catalog("en")
TYPED = [
    ("multihead", {"tab": EN[f"multihead.tab_{tab}"]}, "text") for tab in ("heads", "shapes", "compare", "gallery", "geometry")
] + [
    ("qkv", {"tab": EN["qkv.tab_tokens"]}, "text"),
    ("qkv", {"tab": EN["qkv.tab_similarity"]}, "text"),
    ("efficiency", {}, "text"),
    ("efficiency", {"tab": EN["efficiency.tab_flash"]}, "text"),
    ("efficiency", {"tab": EN["efficiency.tab_rnn"]}, "text"),
    ("encoder", {}, "text"),
    ("positional", {}, "text"),
    ("cross_attention", {}, "src"),
    ("cross_attention", {}, "tgt"),
    ("cross_attention", {"tab": EN["cross_attention.tab_crossmodal"]}, "words"),
    ("masking", {"tab": EN["masking.tab_padding"]}, "batch"),
    ("masking", {"tab": EN["masking.tab_causal"]}, "batch"),
    ("masking", {"tab": EN["masking.tab_custom"]}, "batch"),
]


@pytest.mark.parametrize("page,params,key", TYPED, ids=[f"{p}-{k}-{i}" for i, (p, _, k) in enumerate(TYPED)])
def test_typed_words_stay_in_their_session(page, params, key):
    a, b = two_sessions(page, params, key, X, Y)
    assert any(w in rendered(a) for w in X_WORDS)       # A shows its own words (the test is not empty) ...
    shown = rendered(b)
    assert any(w in shown for w in Y_WORDS)               # ... and B shows its own
    assert not [w for w in X_WORDS if w in shown], f"{page}: session A's words on session B's page"


def test_typed_sentence_of_the_it_page_stays_in_its_session():
    x = "The trophy didn't fit in the suitcase because it was too big."
    y = "The ball didn't fit in the box because it was too small."
    a, b = two_sessions("pronoun", {"src": catalog("en")["pronoun.src_type"]}, "text", x, y)
    assert "suitcase" in rendered(a)
    shown = rendered(b)
    assert "ball" in shown and "suitcase" not in shown and "trophy" not in shown


def input_chars(at) -> dict[str, set]:
    """The input characters every chart draws, by chart: heatmap key labels ("1₁" or "1·0" is the first "1", “-”·4 a repeated "-"), the
    small multiples' input characters, the bottleneck page's input tape and encoder boxes."""
    found = {}
    for i, chart in enumerate(charts(at)):
        for name, frame in chart_data(chart).items():
            chars = set()
            if "in_char" in frame:
                chars |= set(frame["in_char"])
            if "key" in frame and "query" in frame:
                chars |= {re.sub("[₀-₉]+$", "", str(k).split("·")[0]).strip("“”")   # not its position,
                          for k in frame["key"]}                                   # nor a sign's quotes
            if "char" in frame and "line" in frame:
                chars |= set(frame.loc[frame["line"] == "input", "char"])
            if "label" in frame and "part" in frame:
                chars |= set(frame.loc[frame["part"] == "enc", "label"])
            if chars:
                found[f"{i}:{chart_spec(chart).get('title')!s}/{name}"] = chars
    return found


def test_typed_dates_stay_in_their_session():
    """The date page: the answer the model writes for A (1776-07-04) never shows on B's page (the pitfall's demo
    open: it quotes the typed date, and it is drawn only when open)."""
    a, b = two_sessions("alignment", {"al_pit": "true"}, "date", "july 4, 1776", "december 31, 1999")
    assert "1776" in rendered(a)
    shown = rendered(b)
    assert "1999" in shown and "1776" not in shown


def test_typed_digits_stay_in_their_session():
    """The bottleneck page: every chart of B that draws the input draws B's digits, none of A's."""
    a, b = two_sessions("bottleneck", {"own": "true"}, "digits", "1111122222", "9876543")
    assert set().union(*input_chars(a).values()) == {"1", "2"}
    drawn = input_chars(b)
    assert len(drawn) >= 3                                # the tape, the heatmap, the architecture diagrams
    for name, chars in drawn.items():
        assert chars == set("9876543"), f"{name}: {sorted(chars)}"


# ---------------------------------------------------------------- the training page (the reported leak)
def trained(probe: str, steps: int = 20, every: int = 5, timeout: float = 120.0):
    """A session that trains "reverse, with attention" with ``probe`` and waits for the run to be kept."""
    at = open_page("training", "en", {"task": "12345 → 54321", "probe_reverse": probe, "steps": str(steps),
                                      "every": str(every)})
    at.button(key="train").click().run()
    deadline = time.monotonic() + timeout
    while "_train_ticket" in at.session_state:            # the live panel reruns the page every second
        assert time.monotonic() < deadline
        time.sleep(0.2)
        at.run()
    assert exceptions(at) == []
    assert len(at.session_state["_train_runs"]) == 1
    return at


def test_training_snapshots_show_each_sessions_own_probe():
    """The issue's reproduction: A trains with probe 1111122222, then B the same task, seed, steps and
    interval with 9876543. B's snapshot grid, heatmap, table and notices show 9876543 only."""
    a = trained("1111122222")
    assert set().union(*input_chars(a).values()) == {"1", "2"}
    b = trained("9876543")
    drawn = input_chars(b)
    assert len(drawn) == 2                                # the enlarged snapshot and the grid of all snapshots
    for name, chars in drawn.items():
        assert chars == set("9876543"), f"{name}: {sorted(chars)}"
    runs = b.session_state["_train_runs"]
    assert runs[0].source == "9876543" and all(w.shape[1] == 7 for _, _, w in runs[0].snaps if w is not None)
    assert "1111122222" not in rendered(b) and "9876543" in all_text(b)

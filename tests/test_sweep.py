"""The shared walk (tests/sweep.py) keeps each run as it was: a kept run shows what the walk's AppTest showed
right after that run, widget values included, after later runs have moved the session on."""
from tests.apptest_util import open_page
from tests.sweep import walk
from tests.test_lesson_order import sections
from tests.test_no_spoilers import drawn


def test_a_kept_run_shows_what_the_live_run_showed():
    runs = walk("multihead", "zh")          # five tabs, sliders and an exercise in each
    at = open_page("multihead", "zh")
    live = [(sections(at), drawn(at), [(s.key, s.value) for s in at.slider])]
    for label in [tab.label for tab in at.tabs][1:]:
        at.session_state["tab"] = label
        at.run()
        live.append((sections(at), drawn(at), [(s.key, s.value) for s in at.slider]))
    kept = [(sections(r.at), drawn(r.at), [(s.key, s.value) for s in r.at.slider]) for r in runs]
    assert len(kept) == len(live) == 5
    assert kept == live
    assert len({str(k[0]) for k in kept}) == 5          # the tabs differ: each kept run is its own
    assert [r.where for r in runs][0] == "default URL" and all(r.errors == [] for r in runs)


def test_the_english_walk_records_what_ran_and_what_was_shown():
    runs = walk("scaling", "en")
    assert runs[0].shown and runs[0].ran                  # the recorders were on
    from attention_core.functional import scaled_dot_product_attention as sdpa
    assert any(c.co_name == sdpa.__name__ for c in runs[0].ran)
    assert walk("scaling", "zh")[0].ran == set()          # Chinese runs record nothing (show-code is checked in en)

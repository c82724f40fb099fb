"""In a real browser (AppTest runs the whole script on every change, so it cannot see an st.fragment): the pages
whose controls redraw only their fragment (the redraw budget) still keep what lies outside it right. A block size
changed in efficiency's approximations fragment reruns the page so the sparse pitfalls below follow it; a step count
changed in training's settings fragment reruns the page so the schedule pitfall follows it; a new seed on the KV-cache
page re-sends only its fragment (the whole page was 72 messages); and on a planted lesson, "Show the code" (drawn
outside the fragment) follows what the fragment ran while it is open. Runtime: about 30-60 s on the
shared 2-core machine (one server, three pages)."""
import re
import shutil
import urllib.parse

import pytest

from scripts.layout_check import wait_idle
from scripts.server import start_server
from tests.apptest_util import ROOT

sync_playwright = pytest.importorskip("playwright.sync_api").sync_playwright
pytestmark = pytest.mark.skipif(shutil.which("chromium") is None, reason="no chromium on this machine")


@pytest.fixture(scope="module")
def page(server, browser):
    tab = browser.new_page(viewport={"width": 1280, "height": 720})
    tab.base = server
    frames = tab.frames_received = []
    tab.on("websocket", lambda ws: ws.on("framereceived", lambda payload: frames.append(len(payload))))
    yield tab
    tab.close()


def open_url(page, path: str) -> None:
    page.goto(f"{page.base}/{path}")
    wait_idle(page)
    page.wait_for_timeout(500)


def press(page, thumb_or_input, key: str) -> None:
    """A key on a control, then until the app is idle again (a fragment rerun, and a page rerun if it asks)."""
    thumb_or_input.focus()
    thumb_or_input.press(key)
    page.wait_for_timeout(1500)
    wait_idle(page)
    page.wait_for_timeout(1000)
    wait_idle(page)


def main_text(page) -> str:
    return page.locator("[data-testid=stMain]").inner_text()


def slider(page, label: str):
    return page.locator("[data-testid=stSlider]").filter(has_text=label).first.locator("input[type=range]").first


def test_efficiency_pitfalls_follow_the_block_slider_of_the_fragment(page):
    open_url(page, f"efficiency?lang=en&v={urllib.parse.quote('Block-local + global')}&block=4")
    shown = lambda: set(re.findall(r"n = \d+(?: and|,) block = (\d+)", main_text(page)))  # noqa: E731
    assert shown() == {"4"}
    press(page, slider(page, "Block size"), "ArrowRight")
    assert "block=5" in page.url and shown() == {"5"}


def test_training_schedule_pitfall_follows_the_step_slider_of_the_fragment(page):
    open_url(page, "training?lang=en")
    shown = lambda: re.findall(r"At the last of (\d+) steps", main_text(page))  # noqa: E731
    assert shown() == ["250"]
    press(page, slider(page, "Training steps"), "ArrowRight")
    assert "steps=260" in page.url and shown() == ["260"]


def test_kv_cache_seed_redraws_only_its_fragment(page):
    open_url(page, "kv_cache?lang=en")
    page.frames_received.clear()
    seed = page.locator("[data-testid=stNumberInput]").filter(has_text="seed").first.locator("input")
    press(page, seed, "ArrowUp")
    assert seed.input_value() == "1"
    # the fragment ran again (its controls, grid and notice were re-sent), the rest of the page was not: 72 before
    assert 10 < len(page.frames_received) < 30, len(page.frames_received)


PLANTED_LESSON = '''
import sys
sys.path.insert(0, {root!r})
import streamlit as st
from ui import presenter


def first():
    return 1


def second():
    return 2


def body(steps):
    chosen = first if st.radio("which", ["first", "second"], key="which") == "first" else second
    chosen()
    presenter.shows(chosen)


steps = presenter.Lesson("planted")
steps.part(body, steps)
steps.end()
'''


def test_show_the_code_follows_what_a_fragment_ran_while_it_is_open(page, tmp_path):
    """The lesson draws "Show the code" outside the fragment that declared it; a control of the fragment that
    makes it run other code, while the list is open, reruns the page so the list names the code that ran.
    (A second tab of the module's browser: a second sync Playwright inside the first one's loop is refused.)"""
    (tmp_path / "app.py").write_text(PLANTED_LESSON.format(root=str(ROOT)))
    proc = start_server(tmp_path)
    tab = page.context.browser.new_page(viewport={"width": 1280, "height": 720})
    try:
        tab.goto(f"{proc.base}/?code_planted=true")
        wait_idle(tab, title=False)
        captions = lambda: " ".join(tab.locator("[data-testid=stCaptionContainer]").all_inner_texts())  # noqa: E731
        assert "__main__.first" in captions() and "second" not in captions()
        tab.locator("[data-testid=stRadio]").get_by_text("second", exact=True).click()
        tab.wait_for_function("() => [...document.querySelectorAll('[data-testid=stCaptionContainer]')]"
                              ".some(c => c.innerText.includes('__main__.second'))", timeout=30_000)
        wait_idle(tab, title=False)
        assert "__main__.second" in captions() and "__main__.first" not in captions()
    finally:
        tab.close()
        proc.terminate()
        proc.wait(10)

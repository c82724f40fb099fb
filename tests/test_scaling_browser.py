"""The scaling page's seed press in a real browser: the seeded fragment writes into slots the controls fragment
made (Streamlit >= 1.67 lets a fragment write into containers made outside it). AppTest reruns whole scripts, so
only a browser exercises the fragment-only rerun: after it, the page must read exactly as a fresh load of the same
URL (every slot replaced in place: nothing stale, nothing drawn twice, no exception). ~20 s (one server)."""
import re
import shutil
import time

import pytest

sync_playwright = pytest.importorskip("playwright.sync_api").sync_playwright
if shutil.which("chromium") is None:
    pytest.skip("no chromium on this machine", allow_module_level=True)

IDLE = """() => document.querySelector("[data-testid='stApp']")?.getAttribute('data-test-script-state') === 'notRunning'
  && document.querySelectorAll('[data-testid=stSkeleton]').length === 0"""


def settle(page) -> None:
    page.wait_for_timeout(300)
    page.wait_for_function(IDLE, timeout=60_000, polling=50)
    page.wait_for_timeout(700)
    page.wait_for_function(IDLE, timeout=60_000, polling=50)


def reading(page) -> tuple[list[str], int]:
    """The main area's text (axis tick numbers left out: Vega may order them differently after a data update)
    and the number of charts."""
    text = page.locator("[data-testid=stMain]").inner_text()
    lines = [x for x in text.splitlines() if x.strip() and not re.fullmatch(r"[−\-0-9.,e+]+", x.strip())]
    return lines, page.locator("[data-testid=stVegaLiteChart]").count()


@pytest.fixture
def browser_and_server(browser, server):
    return browser, server


def test_seed_press_redraws_the_slots_in_place(browser_and_server):
    browser, base = browser_and_server
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    fresh = browser.new_page(viewport={"width": 1280, "height": 900})
    # a setting where the sweep's floor note and a warning are drawn too (tau = 1/8, unscaled, d_k = 1024)
    page.goto(f"{base}/scaling?lang=en&dk=1024&scale=false&tau=1%2F8&pitx=true")
    settle(page)
    before, n_before = reading(page)
    seed = page.locator("[data-testid=stNumberInput] input").first
    for step in range(2):
        seed.focus()
        seed.press("ArrowUp")
        settle(page)
        assert f"seed={step + 1}" in page.url
        after, n_after = reading(page)
        t0 = time.perf_counter()
        fresh.goto(page.url)
        settle(fresh)
        assert time.perf_counter() - t0 < 60
        expected, n_expected = reading(fresh)
        assert page.locator("[data-testid=stException]").count() == 0
        assert n_after == n_expected == n_before == 10      # nine lesson charts and the first-screen picture
        assert after == expected            # every seeded slot holds this seed's content, once
    assert after != before                  # ... and the seed did change what the page says
    page.close()
    fresh.close()

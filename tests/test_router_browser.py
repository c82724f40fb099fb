"""The router's own controls clicked in a real browser (Chromium against `streamlit run`), where AppTest cannot see
what the browser sends: the presenter switch, and a move between two pages whose controls share a key after a
full rerun (the browser re-sends the last page's control values with the move)."""
from __future__ import annotations

import os
import shutil

import pytest

from ui.i18n import catalog

if shutil.which("chromium") is None:
    if os.environ.get("CI"):
        raise RuntimeError("CI must install Debian's chromium for the browser tests (.ci/run does)")
    pytest.skip("no chromium on this machine", allow_module_level=True)

sync_playwright = pytest.importorskip("playwright.sync_api").sync_playwright


def idle(page) -> None:
    page.wait_for_timeout(300)
    page.wait_for_selector("[data-testid='stApp'][data-test-script-state='notRunning']", timeout=60_000)
    page.wait_for_timeout(500)


def shown_exceptions(page) -> list[str]:
    return [e[:300] for e in page.locator("[data-testid='stException']").all_inner_texts()]


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_presenter_switch_enters_presenter_mode(server, browser, lang):
    page = browser.new_page(viewport={"width": 1280, "height": 720})
    page.goto(f"{server}/qkv?lang={lang}")
    page.wait_for_selector("[data-testid='stMain'] h1", timeout=60_000)
    idle(page)
    page.locator("[data-testid=stSidebar]").get_by_text(catalog(lang)["common.present_on"], exact=True).click()
    idle(page)
    try:
        # presenter mode's first run draws only its layout's CSS and waits for the browser to report it applied;
        # the rerun that report starts draws the page, later than idle() on a loaded machine
        page.locator(".st-key-present_next").wait_for(state="visible", timeout=60_000)
        idle(page)
        assert shown_exceptions(page) == []
        assert "present=1" in page.url
        assert page.locator("[data-testid=stSidebar]").is_hidden()      # presenter layout: no sidebar
        assert page.get_by_text(catalog(lang)["common.present_next"]).first.is_visible()
    finally:
        page.close()


@pytest.mark.parametrize("lang", ["en", "zh"])
@pytest.mark.parametrize("first,second", [("multihead", "qkv"), ("qkv", "multihead"), ("pronoun", "analysis")])
def test_a_rerun_then_a_move_to_a_page_sharing_keys(server, browser, lang, first, second):
    """The student path of the report: open a page, press R, click another page in the sidebar."""
    page = browser.new_page(viewport={"width": 1280, "height": 720})
    page.goto(f"{server}/{first}?lang={lang}")
    page.wait_for_selector("[data-testid='stMain'] h1", timeout=60_000)
    idle(page)
    page.keyboard.press("r")
    idle(page)
    page.locator("[data-testid=stSidebarNav]").get_by_text(catalog(lang)[f"nav.{second}"], exact=True).click()
    page.wait_for_function("t => document.querySelector('[data-testid=stMain] h1')?.innerText.includes(t)",
                           arg=catalog(lang)[f"{second}.title"], timeout=60_000)
    idle(page)
    try:
        assert shown_exceptions(page) == []
        assert f"/{second}" in page.url
        warnings = page.locator("[data-testid=stAlertContentWarning]").all_inner_texts()
        assert not [w for w in warnings if catalog(lang)["common.url_param"].split("{")[0] in w], warnings
    finally:
        page.close()

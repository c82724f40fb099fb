"""Every registered page opens in both languages without an exception; the language switch works."""
import pytest

from tests.apptest_util import all_text, exceptions, open_page
from tests.sweep import walk
from ui.i18n import catalog
from ui.registry import available_pages

PAGE_KEYS = [p.key for p in available_pages()]


@pytest.mark.parametrize("lang", ["en", "zh"])
@pytest.mark.parametrize("key", PAGE_KEYS)
def test_page_opens_without_exception(key, lang):
    at = walk(key, lang)[0].at                 # the page at its default URL (the shared walk: tests/sweep.py)
    assert exceptions(at) == []
    title = catalog(lang)["home.title" if key == "home" else f"{key}.title"]
    assert title in [t.value for t in at.title], f"{key} in {lang} does not show its title"


def test_language_follows_query_param_and_switch():
    at = open_page("home", "zh")
    assert at.title[0].value == catalog("zh")["home.title"]
    switch = at.sidebar.get("button_group")[0]
    switch.set_value("en").run()
    assert at.title[0].value == catalog("en")["home.title"]
    assert at.query_params["lang"] == ["en"] or at.query_params["lang"] == "en"


def test_unknown_language_falls_back_to_english():
    at = open_page("home", "fr")
    assert exceptions(at) == [] and at.title[0].value == catalog("en")["home.title"]


def test_home_map_links_every_available_page():
    at = open_page("home", "en")
    labels = [link.proto.label for link in at.get("page_link")]
    for spec in available_pages():
        if spec.key != "home":
            assert catalog("en")[f"nav.{spec.key}"] in labels
    assert catalog("en")["home.in_class"] in all_text(at)

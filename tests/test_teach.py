"""The Teach page's lesson plans: every link opens its page in presenter mode at the named step, without an error or
a URL-guard message, in both languages; the plans are timed and every stop has its question."""
import re
from urllib.parse import parse_qs

import pytest
from streamlit.testing.v1 import AppTest

from tests.apptest_util import APP, exceptions, open_page
from ui import course
from ui.i18n import catalog
from ui.registry import spec_of

STOPS = [(plan, n, stop) for plan, stops in course.LESSON_PLANS.items() for n, stop in enumerate(stops, start=1)]


def guard_messages(lang: str) -> list[str]:
    """The fixed pieces of the URL guard's two messages (serving.url_guard), to find them among a page's warnings."""
    cat = catalog(lang)
    return [cat[k].split("{params}")[0] for k in ("common.url_rejected", "common.url_adjusted")]


def test_at_least_three_plans_each_timed_in_course_order():
    assert len(course.LESSON_PLANS) >= 3
    order = [p.key for p in course.available_pages()]
    for plan, stops in course.LESSON_PLANS.items():
        assert 30 <= sum(s.minutes for s in stops) <= 90, plan
        pages = [order.index(s.page) for s in stops]
        assert pages == sorted(pages), f"{plan} jumps back in the course"
        for lang in ("en", "zh"):
            for n in range(1, len(stops) + 1):
                assert catalog(lang)[f"teach.{plan}_q{n}"].strip(), (plan, n, lang)


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_page_lists_every_stop_with_its_link(lang):
    at = open_page("teach", lang)
    assert exceptions(at) == []
    links = [(link.proto.page, parse_qs(link.proto.query_string)) for link in at.get("page_link")
             if link.proto.label == catalog(lang)["teach.stop_open"]]
    want = [(stop.page, {k: [v] for k, v in course.stop_params(stop, lang).items()}) for _, _, stop in STOPS]
    assert links == want
    text = "\n".join(str(m.value) for m in at.markdown)
    for plan, n, _ in STOPS:
        assert catalog(lang)[f"teach.{plan}_q{n}"] in text
    codes = "\n".join(c.value for c in at.code)
    for _, _, stop in STOPS:
        assert course.stop_url(stop, lang) in codes


@pytest.mark.parametrize("lang", ["en", "zh"])
@pytest.mark.parametrize("plan, n, stop", STOPS, ids=[f"{p}-{n}" for p, n, _ in STOPS])
def test_every_link_lands_on_its_step(plan, n, stop, lang):
    at = AppTest.from_file(APP, default_timeout=120)
    for name, value in course.stop_params(stop, lang).items():
        at.query_params[name] = value
    at.run()
    at.switch_page(spec_of(stop.page).path).run()
    assert exceptions(at) == [], exceptions(at)
    bar = catalog(lang)["common.present_step"]
    pattern = re.escape(bar).replace(re.escape("{i}"), r"(\d+)").replace(re.escape("{n}"), r"(\d+)")
    shown = [m for m in (re.fullmatch(pattern, str(md.value)) for md in at.markdown) if m]
    assert len(shown) == 1, f"{stop.page}: no presenter step bar"
    i, total = map(int, shown[0].groups())
    assert i == stop.step <= total, (stop, i, total)
    warnings = [str(w.value) for w in at.warning]
    assert not [w for w in warnings if any(w.startswith(g) for g in guard_messages(lang))], warnings
    assert catalog(lang)[f"{stop.page}.title"] in [t.value for t in at.title]

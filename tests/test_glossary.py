"""The glossary (assets/glossary.toml) and its page: complete entries, searchable in both languages, every term
linked to an existing page that teaches it. (That the zh pages use its terms: tests/test_zh_text.py.)"""
from __future__ import annotations

import re
import tomllib

import pytest

from tests.apptest_util import exceptions, open_page
from ui.i18n import catalog
from ui.registry import ROOT, available_pages

FIELDS = ("en", "zh", "def_en", "def_zh", "page", "reject", "english_ok")
HAN = re.compile(r"[\u4e00-\u9fff]")


def terms() -> list[dict]:
    with (ROOT / "assets" / "glossary.toml").open("rb") as fh:
        return tomllib.load(fh)["term"]


def links(at) -> list[tuple[str, str]]:
    """(page url path, label) of every page link the run shows, but the course's previous / next links that the
    router draws under every page (ui.course.footer)."""
    lang = "zh" if at.query_params.get("lang") in ("zh", ["zh"]) else "en"
    course = tuple(catalog(lang)[f"common.course_{k}"].split("{")[0] for k in ("prev", "next", "next_core"))
    return [(link.proto.page, link.proto.label) for link in at.get("page_link")
            if not link.proto.label.startswith(course)]


def test_entries_are_complete_and_unique():
    entries = terms()
    pages = {p.key for p in available_pages()}
    assert len(entries) >= 40
    for e in entries:
        assert set(e) == set(FIELDS), e.get("en")
        assert all(str(e[f]).strip() for f in ("en", "zh", "def_en", "def_zh")), e["en"]
        assert HAN.search(e["def_zh"]) and not HAN.search(e["def_en"]), e["en"]
        assert e["page"] in pages and e["page"] not in ("home", "glossary"), e["en"]
        assert e["zh"] not in e["reject"] and all(isinstance(v, str) and v.strip() for v in e["reject"]), e["en"]
    for field in ("en", "zh"):
        names = [e[field].casefold() for e in entries]
        assert len(names) == len(set(names)), f"duplicate {field} terms"


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_every_term_is_shown_and_linked_to_the_page_that_teaches_it(lang):
    at = open_page("glossary", lang)
    assert exceptions(at) == []
    cat = catalog(lang)
    assert cat["glossary.title"] in [t.value for t in at.title]
    entries = terms()
    shown = links(at)
    assert [page for page, _ in shown] == [e["page"] for e in entries]         # one link per term, in order
    files = {p.key: p.file for p in available_pages()}
    for page, label in shown:
        assert files[page].exists() and label == cat[f"nav.{page}"]
    text = "\n".join(m.value for m in at.markdown)
    other = "zh" if lang == "en" else "en"
    captions = "\n".join(c.value for c in at.caption)
    for e in entries:
        assert f"**{e[lang]}**" in text and e[f"def_{lang}"] in text, e["en"]
        assert e[other] in captions, e["en"]


@pytest.mark.parametrize("lang", ["en", "zh"])
@pytest.mark.parametrize("query, expect", [
    ("attention rollout", "attention rollout"),          # English term
    ("注意力展开", "attention rollout"),                   # its Chinese term finds the same entry
    ("ＲｏＰＥ", "rotary position embedding (RoPE)"),      # full-width letters and case are folded
    ("编码器层", "encoder layer"),
])
def test_search_finds_a_term_in_both_languages(lang, query, expect):
    at = open_page("glossary", lang, {"q": query})
    assert exceptions(at) == []
    entry = next(e for e in terms() if e["en"] == expect)
    shown = links(at)
    assert 1 <= len(shown) < len(terms())
    assert entry["page"] in [page for page, _ in shown]
    assert f"**{entry[lang]}**" in "\n".join(m.value for m in at.markdown)


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_no_match_gives_a_message_and_user_text_is_not_html(lang):
    at = open_page("glossary", lang, {"q": "<b>zzzz</b>"})
    assert exceptions(at) == [] and links(at) == []
    shown = "\n".join(w.value for w in at.warning)
    assert catalog(lang)["glossary.none"].split("{")[0] in shown
    assert "<b>" not in shown and "\\<b\\>" in shown                        # escaped, never a tag

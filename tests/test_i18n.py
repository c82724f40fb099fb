"""Every word a learner reads exists in both languages."""
import pathlib
import re

import pytest

from ui import i18n
from ui.registry import PAGES, available_pages

ROOT = pathlib.Path(__file__).resolve().parent.parent


def test_same_label_files_in_both_languages():
    files = {lang: sorted(p.name for p in (ROOT / "assets/i18n" / lang).glob("*.toml")) for lang in i18n.LANGS}
    assert files["en"] == files["zh"]


def test_same_keys_in_both_languages():
    en, zh = i18n.catalog("en"), i18n.catalog("zh")
    assert set(en) - set(zh) == set(), "keys only in English"
    assert set(zh) - set(en) == set(), "keys only in Chinese"


def test_same_placeholders_and_types():
    en, zh = i18n.catalog("en"), i18n.catalog("zh")
    for key in en:
        assert type(en[key]) is type(zh[key]), key
        if isinstance(en[key], str):
            assert i18n.placeholders(en[key]) == i18n.placeholders(zh[key]), key
        elif isinstance(en[key], list):
            assert len(en[key]) == len(zh[key]), key
            for a, b in zip(en[key], zh[key]):
                assert i18n.placeholders(str(a)) == i18n.placeholders(str(b)), key


def test_no_empty_label_and_chinese_is_chinese():
    han = re.compile(r"[\u4e00-\u9fff]")
    for lang in i18n.LANGS:
        for key, value in i18n.catalog(lang).items():
            assert str(value).strip(), f"{lang}:{key} is empty"
    zh = i18n.catalog("zh")
    en = i18n.catalog("en")
    translated = [k for k in zh if isinstance(zh[k], str) and han.search(zh[k])]
    # almost every Chinese label contains Chinese; the few that don't are code-like (formulas, names)
    untranslated = [k for k in zh if isinstance(zh[k], str) and zh[k] == en[k] and len(zh[k]) > 25
                    and not han.search(zh[k]) and not k.endswith(("sentence", "latex", "formula", "code"))]
    assert len(translated) > 0.6 * len(zh)
    assert untranslated == [], f"long labels left in English in zh: {untranslated}"


def test_same_lessons_in_both_languages():
    assert i18n.lesson_names("en") == i18n.lesson_names("zh")
    for name in i18n.lesson_names("en"):
        for lang in i18n.LANGS:
            assert i18n.lesson_text(lang, name).strip(), f"{lang}/{name} is empty"


@pytest.mark.parametrize("lang", i18n.LANGS)
def test_every_page_has_navigation_labels(lang):
    cat = i18n.catalog(lang)
    for spec in PAGES:
        assert f"nav.{spec.key}" in cat and f"nav.{spec.key}_blurb" in cat
        assert f"nav.section_{spec.section}" in cat
    for spec in available_pages():
        if spec.key != "home":
            assert f"{spec.key}.title" in cat, f"page {spec.key} has no title in {lang}"


def test_locale_mapping():
    assert i18n.locale_lang("zh-CN") == "zh" and i18n.locale_lang("zh-TW") == "zh"
    assert i18n.locale_lang("en-GB") == "en" and i18n.locale_lang(None) == "en"
    assert i18n.locale_lang("fr-FR") == "en"


def test_chinese_soft_wraps_do_not_become_spaces():
    assert i18n._CJK_SOFT_WRAP.sub(r"\1\2", "对齐，\n  到 2017 年、\n*值得*") == "对齐，到 2017 年、*值得*"
    assert i18n._CJK_SOFT_WRAP.sub(r"\1\2", "the\nnext 行\n- 列表") == "the\nnext 行\n- 列表"


@pytest.mark.parametrize("lang", i18n.LANGS)
def test_bold_and_italics_close_under_commonmark(lang):
    """Streamlit renders Markdown with a CommonMark parser: a closing ** right after full-width punctuation and
    before a character ("**第 2 块：**查询") does not close, and the learner sees the asterisks. Render every
    label and lesson with a CommonMark parser and look for a leftover **."""
    from markdown_it import MarkdownIt

    md = MarkdownIt("commonmark")
    texts = {f"{key}": value for key, value in i18n.catalog(lang).items()
             if not key.endswith("_code")}                     # code is shown with st.code, not as Markdown
    texts |= {f"lesson {name}": i18n.lesson_text(lang, name) for name in i18n.lesson_names(lang)}
    bad = []
    for name, value in texts.items():
        for text in value if isinstance(value, list) else [value]:
            html = md.render(re.sub(r"\{[^}]*\}", "x", str(text)))          # placeholders filled in
            if "**" in re.sub(r"<code>.*?</code>", "", html, flags=re.S):
                bad.append(name)
    assert bad == [], f"unclosed ** in {lang}: {bad}"

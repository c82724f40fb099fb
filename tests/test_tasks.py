"""Synthetic tasks: determinism, exact labels, vocabularies, the pronoun grammar."""
import datetime as dt
import random
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from attention_core.models.tasks import (
    DATE_FORMATS,
    DATE_MAX,
    DATE_MIN,
    DATE_SOURCE_VOCAB,
    DATE_TARGET_VOCAB,
    MAX_DATE_INPUT,
    MONTHS,
    PRONOUN_ERRORS,
    PRONOUN_TEMPLATES,
    PRONOUN_VOCAB,
    ZH_DIGITS,
    CharVocab,
    is_heldout_date,
    is_heldout_pair,
    make_date_example,
    make_pronoun_example,
    make_reverse_example,
    normalize_date_text,
    ordinal,
    parse_pronoun_sentence,
    pronoun_text,
    unknown_chars,
    zh_number,
)

dates = st.dates(min_value=DATE_MIN, max_value=DATE_MAX)


# ---------------------------------------------------------------- an independent reader of every form

_ZH_VAL = {c: i for i, c in enumerate(ZH_DIGITS)} | {"零": 0}


def _zh_small(s: str) -> int:
    """Chinese numeral 1..99 -> int, written independently of tasks.zh_number."""
    if "十" not in s:
        return _ZH_VAL[s]
    tens, _, units = s.partition("十")
    return (_ZH_VAL[tens] if tens else 1) * 10 + (_ZH_VAL[units] if units else 0)


def _month(word: str) -> int:
    return next(i + 1 for i, m in enumerate(MONTHS) if m.startswith(word))


def _year(y: str) -> int:
    if len(y) == 2:
        return 2000 + int(y) if int(y) < 50 else 1900 + int(y)
    return int(y)


def oracle_parse(text: str) -> dt.date:
    """Read a generated surface form back with regular expressions (an oracle for the labels)."""
    m = re.search(r"(\d{2,4})年(\d{1,2})月(\d{1,2})[日号]", text)
    if m:
        return dt.date(_year(m[1]), int(m[2]), int(m[3]))
    zh = "[一二三四五六七八九十]+"
    m = re.fullmatch(rf"([〇零一二三四五六七八九]{{4}})年({zh})月({zh})日", text)
    if m:
        return dt.date(int("".join(str(_ZH_VAL[c]) for c in m[1])), _zh_small(m[2]), _zh_small(m[3]))
    m = re.fullmatch(r"(\d{4})[/.](\d{1,2})[/.](\d{1,2})", text) or re.fullmatch(r"(\d{4})(\d\d)(\d\d)", text)
    if m:
        return dt.date(int(m[1]), int(m[2]), int(m[3]))
    m = re.search(r"([a-z]{3})[a-z]* (\d{1,2})(?:st|nd|rd|th)?,? (\d{4})$", text)
    if m:
        return dt.date(int(m[3]), _month(m[1]), int(m[2]))
    m = re.search(r"(\d{1,2})(?:st|nd|rd|th)? (?:of )?([a-z]{3})[a-z]* (\d{2}|\d{4})$", text)
    if m:
        return dt.date(_year(m[3]), _month(m[2]), int(m[1]))
    raise AssertionError(f"oracle cannot read {text!r}")


# ---------------------------------------------------------------- dates

@pytest.mark.parametrize("fmt", [f.id for f in DATE_FORMATS])
@settings(max_examples=25, deadline=None)
@given(d=dates, seed=st.integers(0, 2**31))
def test_every_format_round_trips_to_the_iso_date(fmt, d, seed):
    ex = make_date_example(random.Random(seed), fmt=fmt, date=d)
    assert ex.target == d.isoformat()
    assert oracle_parse(ex.source) == d
    assert unknown_chars(ex.source) == []
    assert 0 < len(ex.source) <= MAX_DATE_INPUT
    assert ex.source == normalize_date_text(ex.source)


def test_formats_cover_both_languages_and_the_examples_are_march_5_2017():
    langs = {f.lang for f in DATE_FORMATS}
    assert {"en", "zh"} <= langs
    assert len({f.id for f in DATE_FORMATS}) == len(DATE_FORMATS)
    for f in DATE_FORMATS:
        assert oracle_parse(normalize_date_text(f.example())) == dt.date(2017, 3, 5), f.id
    examples = {f.id: f.example() for f in DATE_FORMATS}
    assert examples["zh_numerals"] == "二〇一七年三月五日"
    assert examples["en_weekday_ordinal"] == "sunday, march 5th 2017"   # 2017-03-05 was a Sunday
    assert examples["zh_weekday"] == "2017年3月5日星期日"


def test_weekday_names_are_the_real_weekday():
    rng = random.Random(3)
    for _ in range(200):
        ex = make_date_example(rng, fmt="en_weekday_ordinal")
        assert ex.source.split(",")[0] == ex.date.strftime("%A").lower()


def test_date_examples_are_deterministic_from_the_seed():
    a = [make_date_example(random.Random(7)) for _ in range(3)]
    b = [make_date_example(random.Random(7)) for _ in range(3)]
    assert a == b
    r1, r2 = random.Random(11), random.Random(12)
    assert [make_date_example(r1) for _ in range(20)] != [make_date_example(r2) for _ in range(20)]


def test_language_filter_and_bad_arguments():
    rng = random.Random(0)
    assert {make_date_example(rng, lang="zh").lang for _ in range(50)} == {"zh"}
    with pytest.raises(ValueError):
        make_date_example(rng, lang="fr")
    with pytest.raises(ValueError):
        make_date_example(rng, fmt="nope")
    with pytest.raises(ValueError):
        make_date_example(rng, fmt="zh_ymd", lang="en")


def test_heldout_split_is_disjoint():
    rng = random.Random(0)
    assert all(not is_heldout_date(make_date_example(rng, split="train").date) for _ in range(300))
    assert all(is_heldout_date(make_date_example(rng, split="heldout").date) for _ in range(300))
    frac = sum(is_heldout_date(DATE_MIN + dt.timedelta(days=i)) for i in range(3650)) / 3650
    assert 0.09 < frac < 0.11


def test_small_number_helpers():
    assert [ordinal(n) for n in (1, 2, 3, 4, 11, 12, 13, 21, 22, 23, 31)] == [
        "1st", "2nd", "3rd", "4th", "11th", "12th", "13th", "21st", "22nd", "23rd", "31st"]
    for n in range(1, 32):
        assert _zh_small(zh_number(n)) == n
    assert zh_number(10) == "十" and zh_number(20) == "二十" and zh_number(31) == "三十一"


def test_normalisation_and_unknown_characters():
    assert normalize_date_text("  March   5,\t2017 ") == "march 5, 2017"
    assert normalize_date_text("２０１７年３月５日（周日）") == "2017年3月5日(周日)"   # full width -> ASCII
    assert unknown_chars("5 März 2017") == ["ä", "z"]
    assert unknown_chars("March 5, 2017 🎉🎉") == ["🎉"]
    assert unknown_chars("<b>x</b>") == ["<", ">", "x"]
    assert unknown_chars("") == []


def test_char_vocab_round_trip_and_specials():
    v = DATE_SOURCE_VOCAB
    text = "sunday, march 5th 2017"
    ids = v.encode_text(text, sos=True, eos=True)
    assert ids[0] == v.sos_id and ids[-1] == v.eos_id
    assert v.decode_text(ids) == text
    assert v.encode_text("ä") == [v.unk_id]
    assert v.itos[:4] == ["<pad>", "<sos>", "<eos>", "<unk>"]
    assert "<pad>" not in v and "a" in v
    assert CharVocab(v.to_list()) == v                     # what a checkpoint stores rebuilds it
    assert DATE_TARGET_VOCAB.decode_text(DATE_TARGET_VOCAB.encode_text("2017-03-05", eos=True) + [5]) \
        == "2017-03-05"                                     # stops at <eos>


# ---------------------------------------------------------------- reversal

def test_reverse_examples():
    rng = random.Random(0)
    for length in (5, 17, 40):
        s, t = make_reverse_example(rng, length)
        assert len(s) == length and t == s[::-1] and s.isdigit()
    lengths = {len(make_reverse_example(rng)[0]) for _ in range(2000)}
    assert lengths == set(range(5, 41))
    assert make_reverse_example(random.Random(5), 30) == make_reverse_example(random.Random(5), 30)
    with pytest.raises(ValueError):
        make_reverse_example(rng, 0)


# ---------------------------------------------------------------- pronouns

@settings(max_examples=150, deadline=None)
@given(seed=st.integers(0, 2**31), lang=st.sampled_from(["en", "zh"]))
def test_generated_sentences_parse_back_to_the_same_example(seed, lang):
    ex = make_pronoun_example(random.Random(seed), lang=lang)
    assert ex.tokens[ex.pronoun] == ("it" if lang == "en" else "它")
    a, b = (ex.tokens[i] for i in ex.nouns)
    assert a != b
    assert PRONOUN_VOCAB.unknown(ex.tokens) == []
    parsed = parse_pronoun_sentence(ex.text, lang)
    assert parsed.ok, parsed
    assert parsed.example == ex


def test_adjective_decides_the_referent():
    for t in PRONOUN_TEMPLATES:
        for lang in ("en", "zh"):
            k = 0 if lang == "en" else 1
            for label, adjs in ((0, t.adj_first), (1, t.adj_second)):
                for adj in adjs:
                    toks = [{"A": t.nouns_a[0][k], "B": t.nouns_b[1][k], "ADJ": adj[k]}.get(w, w)
                            for w in t.tokens(lang)]
                    p = parse_pronoun_sentence(pronoun_text(toks, lang), lang)
                    assert p.ok and p.example.label == label and p.example.template == t.id
        # within one template no adjective points both ways
        assert not {a for a, _ in t.adj_first} & {a for a, _ in t.adj_second}
        assert not {z for _, z in t.adj_first} & {z for _, z in t.adj_second}


def test_the_tutorial_sentence_in_both_languages():
    en = parse_pronoun_sentence("The animal didn't cross the street because it was too tired.", "en")
    assert en.ok and en.example.tokens[en.example.referent] == "animal"
    en = parse_pronoun_sentence("The animal did not cross the street, because it was too wide", "en")
    assert en.ok and en.example.tokens[en.example.referent] == "street"
    zh = parse_pronoun_sentence("动物没有过马路，因为它太累了", "zh")
    assert zh.ok and zh.example.tokens == (
        "动物", "没有", "过", "马路", "，", "因为", "它", "太", "累", "了", "。")
    assert zh.example.referent == 0 and zh.example.pronoun == 6
    zh = parse_pronoun_sentence("马 没有过马路, 因为它太宽了。", "zh")    # 马 vs 马路: longest match
    assert zh.ok and zh.example.tokens[zh.example.referent] == "马路"


@pytest.mark.parametrize("text,lang,code,detail", [
    ("", "en", "empty", ""),
    ("   ", "zh", "empty", ""),
    ("x" * 500, "en", "too_long", "200"),
    ("The dog ate the cat", "en", "unknown_word", "ate"),
    ("The dog didn't cross the street because it was too happy", "en", "unknown_word", "happy"),
    ("The dog didn't cross the street because it was too tired 😀", "en", "unknown_word", "😀"),
    ("<script>alert(1)</script>", "en", "unknown_word", "<"),
    ("狗没有过马路，因为他太累了", "zh", "unknown_word", "他"),
    ("狗没有过马路，因为它太开心了", "zh", "unknown_word", "开心"),
    ("the dog the street", "en", "no_template", ""),
    ("it was too tired because the dog didn't cross the street", "en", "no_template", ""),
    ("The street didn't cross the dog because it was too tired", "en", "bad_noun", "street"),
    ("The dog didn't cross the street because it was too fast", "en", "bad_adjective", "fast"),
    ("狗不怕狗，因为它太小了", "zh", "same_noun", "狗"),
])
def test_out_of_grammar_sentences_are_rejected_with_a_code(text, lang, code, detail):
    p = parse_pronoun_sentence(text, lang)
    assert not p.ok and p.example is None
    assert p.error == code and p.error in PRONOUN_ERRORS
    assert p.detail == detail


def test_pronoun_examples_deterministic_balanced_and_split():
    a = [make_pronoun_example(random.Random(4)) for _ in range(3)]
    assert a == [make_pronoun_example(random.Random(4)) for _ in range(3)]
    rng = random.Random(1)
    exs = [make_pronoun_example(rng, split="train") for _ in range(2000)]
    assert 0.45 < sum(e.label for e in exs) / len(exs) < 0.55
    assert {e.lang for e in exs} == {"en", "zh"} and len({e.template for e in exs}) == len(PRONOUN_TEMPLATES)
    en = lambda e, i: e.tokens[e.nouns[i]] if e.lang == "en" else None  # noqa: E731
    assert not any(is_heldout_pair(e.template, en(e, 0), en(e, 1)) for e in exs if e.lang == "en")
    held = [make_pronoun_example(rng, lang="en", split="heldout") for _ in range(200)]
    assert all(is_heldout_pair(e.template, en(e, 0), en(e, 1)) for e in held)

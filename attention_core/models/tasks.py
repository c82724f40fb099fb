"""Synthetic tasks for the learned-attention pages, generated in code from a seed (no downloads).

(a) Date normalisation at the character level (the first tutorial's Seq2Seq, sections 2 and 4.1):
    "March 5, 2017", "5 mar 17", "二〇一七年三月五日", ... -> "2017-03-05".
(b) Reversing digit strings of length 5-40: a task whose difficulty grows with length, so the fixed
    context vector of a Seq2Seq model without attention becomes an information bottleneck (1.2, 2.2).
(c) Pronoun resolution from templates (5.2, "The animal didn't cross the street because it was too
    tired"), in English and Chinese: the adjective decides whether "it"/"它" is the first or the
    second noun.

Every generator takes a ``random.Random`` so that a seed fixes the data exactly, on any platform.
"""
from __future__ import annotations

import datetime as _dt
import random
import re
import unicodedata
import zlib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import NamedTuple

from ..text import sentence_language

# --------------------------------------------------------------------------------------------------
# Vocabularies
# --------------------------------------------------------------------------------------------------

PAD, SOS, EOS, UNK = "<pad>", "<sos>", "<eos>", "<unk>"
SPECIALS = (PAD, SOS, EOS, UNK)


class Vocab:
    """Symbols <-> ids. ids 0..3 are <pad>, <sos>, <eos>, <unk>; the rest follow ``symbols`` in order.

    A symbol is a character (date and reversal tasks) or a word (pronoun task). ``encode`` maps an
    unknown symbol to <unk>; ask ``unknown(seq)`` first to tell the learner which ones they are.
    """

    def __init__(self, symbols: Iterable[str]):
        self.itos: list[str] = list(SPECIALS)
        for s in symbols:
            if s not in self.itos:
                self.itos.append(s)
        self.stoi = {s: i for i, s in enumerate(self.itos)}

    pad_id, sos_id, eos_id, unk_id = 0, 1, 2, 3

    def __len__(self) -> int:
        return len(self.itos)

    def __contains__(self, symbol: str) -> bool:
        return symbol in self.stoi and symbol not in SPECIALS

    def __eq__(self, other) -> bool:
        return isinstance(other, Vocab) and self.itos == other.itos

    def encode(self, seq: Iterable[str], *, sos: bool = False, eos: bool = False) -> list[int]:
        ids = [self.stoi.get(s, self.unk_id) if s not in SPECIALS else self.unk_id for s in seq]
        return ([self.sos_id] if sos else []) + ids + ([self.eos_id] if eos else [])

    def decode(self, ids: Iterable[int], *, stop_at_eos: bool = True) -> list[str]:
        """ids -> symbols, dropping <pad>/<sos> and stopping at the first <eos>."""
        out = []
        for i in ids:
            i = int(i)
            if i == self.eos_id and stop_at_eos:
                break
            if i in (self.pad_id, self.sos_id):
                continue
            out.append(self.itos[i] if 0 <= i < len(self.itos) else UNK)
        return out

    def unknown(self, seq: Iterable[str]) -> list[str]:
        """Distinct symbols of ``seq`` missing from the vocabulary, in order of first appearance."""
        seen: list[str] = []
        for s in seq:
            if s not in self and s not in seen:
                seen.append(s)
        return seen

    def to_list(self) -> list[str]:
        """The non-special symbols, in id order (what a checkpoint stores)."""
        return self.itos[len(SPECIALS):]


class CharVocab(Vocab):
    """A character vocabulary: ``encode_text("5 mar")`` encodes character by character."""

    def encode_text(self, text: str, *, sos: bool = False, eos: bool = False) -> list[int]:
        return self.encode(list(text), sos=sos, eos=eos)

    def decode_text(self, ids: Iterable[int]) -> str:
        return "".join(self.decode(ids))


# --------------------------------------------------------------------------------------------------
# (a) Dates
# --------------------------------------------------------------------------------------------------

DATE_MIN = _dt.date(1950, 1, 1)
DATE_MAX = _dt.date(2049, 12, 31)
#: Two-digit years ("5 Mar 17", "17年3月5日") are read with a pivot: 00-49 -> 20xx, 50-99 -> 19xx,
#: which is why all dates lie in 1950-2049.
TWO_DIGIT_YEAR_PIVOT = 50
MAX_DATE_INPUT = 40  # longest input (in characters, after normalisation) the models were trained on

MONTHS = ("january", "february", "march", "april", "may", "june", "july", "august", "september",
          "october", "november", "december")
MONTHS_ABBR = tuple(m[:3] for m in MONTHS)
WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
WEEKDAYS_ABBR = tuple(w[:3] for w in WEEKDAYS)
ZH_DIGITS = "〇一二三四五六七八九"
ZH_WEEKDAYS = "一二三四五六日"  # 星期一 .. 星期日 (Sunday also 星期天 / 周日)


def ordinal(n: int) -> str:
    """1 -> "1st", 2 -> "2nd", 11 -> "11th", 23 -> "23rd"."""
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def zh_number(n: int) -> str:
    """1..31 in Chinese numerals: 5 -> 五, 10 -> 十, 15 -> 十五, 20 -> 二十, 31 -> 三十一."""
    if not 1 <= n <= 99:
        raise ValueError(f"zh_number expects 1..99, got {n}")
    tens, units = divmod(n, 10)
    head = "" if tens == 0 else ("十" if tens == 1 else ZH_DIGITS[tens] + "十")
    return head + (ZH_DIGITS[units] if units else "")


def zh_year(year: int, zero: str = "〇") -> str:
    """2017 -> 二〇一七 (digit by digit; ``zero="零"`` gives the also common 二零一七)."""
    return "".join(zero if c == "0" else ZH_DIGITS[int(c)] for c in str(year))


def _zh_weekday(d: _dt.date, rng: random.Random, prefix: str = "星期") -> str:
    w = ZH_WEEKDAYS[d.weekday()]
    if w == "日" and prefix == "星期" and rng.random() < 0.3:
        w = "天"
    return prefix + w


def _yy(d: _dt.date) -> str:
    return f"{d.year % 100:02d}"


@dataclass(frozen=True)
class DateFormat:
    """One surface form: ``id``, ``lang`` ("en", "zh" or "num" for language-neutral numeric forms),
    a ``description`` and the function that renders a date (``rng`` picks small variants)."""

    id: str
    lang: str
    description: str
    render: Callable[[_dt.date, random.Random], str]

    def example(self, d: _dt.date = _dt.date(2017, 3, 5)) -> str:
        return self.render(d, random.Random(0))


DATE_FORMATS: tuple[DateFormat, ...] = (
    DateFormat("en_mdy_long", "en", "Month D, YYYY",
               lambda d, r: f"{MONTHS[d.month - 1]} {d.day}, {d.year}"),
    DateFormat("en_dmy_long", "en", "D Month YYYY",
               lambda d, r: f"{d.day} {MONTHS[d.month - 1]} {d.year}"),
    DateFormat("en_mdy_abbr", "en", "Mon D, YYYY",
               lambda d, r: f"{MONTHS_ABBR[d.month - 1]} {d.day}, {d.year}"),
    DateFormat("en_dmy_abbr_yy", "en", "D Mon YY (two-digit year, pivot 50)",
               lambda d, r: f"{d.day} {MONTHS_ABBR[d.month - 1]} {_yy(d)}"),
    DateFormat("en_weekday_ordinal", "en", "Weekday, Month Dth YYYY",
               lambda d, r: f"{WEEKDAYS[d.weekday()]}, {MONTHS[d.month - 1]} {ordinal(d.day)} {d.year}"),
    DateFormat("en_ordinal_of", "en", "the Dth of Month YYYY",
               lambda d, r: f"the {ordinal(d.day)} of {MONTHS[d.month - 1]} {d.year}"),
    DateFormat("en_weekday_abbr", "en", "Wkd D Mon YYYY",
               lambda d, r: f"{WEEKDAYS_ABBR[d.weekday()]} {d.day} {MONTHS_ABBR[d.month - 1]} {d.year}"),
    DateFormat("num_ymd_slash", "num", "YYYY/MM/DD (year first, never ambiguous)",
               lambda d, r: f"{d.year}/{d.month:02d}/{d.day:02d}"),
    DateFormat("num_ymd_dot", "num", "YYYY.M.D",
               lambda d, r: f"{d.year}.{d.month}.{d.day}"),
    DateFormat("num_compact", "num", "YYYYMMDD",
               lambda d, r: f"{d.year}{d.month:02d}{d.day:02d}"),
    DateFormat("zh_ymd", "zh", "YYYY年M月D日",
               lambda d, r: f"{d.year}年{d.month}月{d.day}日"),
    DateFormat("zh_ymd_padded", "zh", "YYYY年MM月DD日",
               lambda d, r: f"{d.year}年{d.month:02d}月{d.day:02d}日"),
    DateFormat("zh_ymd_hao", "zh", "YYYY年M月D号 (spoken)",
               lambda d, r: f"{d.year}年{d.month}月{d.day}号"),
    DateFormat("zh_numerals", "zh", "Chinese numerals (〇 or 零 for zero)",
               lambda d, r: f"{zh_year(d.year, '零' if r.random() < 0.3 else '〇')}年"
                            f"{zh_number(d.month)}月{zh_number(d.day)}日"),
    DateFormat("zh_yy", "zh", "YY年M月D日 (two-digit year, pivot 50)",
               lambda d, r: f"{_yy(d)}年{d.month}月{d.day}日"),
    DateFormat("zh_weekday", "zh", "YYYY年M月D日星期W",
               lambda d, r: f"{d.year}年{d.month}月{d.day}日{_zh_weekday(d, r)}"),
    DateFormat("zh_zhou", "zh", "YYYY年M月D日(周W)",
               lambda d, r: f"{d.year}年{d.month}月{d.day}日({_zh_weekday(d, r, '周')})"),
)
DATE_FORMAT_IDS = tuple(f.id for f in DATE_FORMATS)
DATE_LANGS = ("en", "zh", "num")
_FORMATS_BY_ID = {f.id: f for f in DATE_FORMATS}


def date_format(fmt_id: str) -> DateFormat:
    try:
        return _FORMATS_BY_ID[fmt_id]
    except KeyError:
        raise ValueError(f"unknown date format {fmt_id!r}; known: {', '.join(DATE_FORMAT_IDS)}") from None


def iso(d: _dt.date) -> str:
    return d.isoformat()


SPLITS = (None, "train", "heldout")


def is_heldout_date(d: _dt.date) -> bool:
    """One date in ten (by day number) is never shown in training, in any format: the test set."""
    return d.toordinal() % 10 == 0


def _check_split(split: str | None) -> None:
    if split not in SPLITS:
        raise ValueError(f"split must be one of {SPLITS}, got {split!r}")


def random_date(rng: random.Random, split: str | None = None) -> _dt.date:
    """Uniform over DATE_MIN..DATE_MAX; ``split="train"`` skips held-out dates, "heldout" keeps only them."""
    _check_split(split)
    span = (DATE_MAX - DATE_MIN).days
    while True:
        d = DATE_MIN + _dt.timedelta(days=rng.randint(0, span))
        if split is None or is_heldout_date(d) == (split == "heldout"):
            return d


def normalize_date_text(text: str) -> str:
    """What the date models read: NFKC (full-width ２０１７ -> 2017, （ -> ( ), lower case, runs of
    white space -> one space, stripped. Apply it to anything typed before encoding."""
    text = unicodedata.normalize("NFKC", text).lower()
    return re.sub(r"\s+", " ", text).strip()


class DateExample(NamedTuple):
    source: str      # normalised surface form
    target: str      # ISO date, "YYYY-MM-DD"
    fmt: str         # DateFormat id
    lang: str        # "en", "zh" or "num"
    date: _dt.date


def make_date_example(rng: random.Random, fmt: str | None = None, lang: str | None = None,
                      date: _dt.date | None = None, split: str | None = None) -> DateExample:
    """A random date rendered in ``fmt`` (or a random format of ``lang``, or of any language).

    Parser-free: the source is rendered from the date, never parsed, so the label is exact.
    ``split``: None (any date), "train" (never a held-out date) or "heldout" (only those).
    """
    if fmt is None:
        pool = [f for f in DATE_FORMATS if lang is None or f.lang == lang]
        if not pool:
            raise ValueError(f"unknown language {lang!r}; known: {DATE_LANGS}")
        f = pool[rng.randrange(len(pool))]
    else:
        f = date_format(fmt)
        if lang is not None and f.lang != lang:
            raise ValueError(f"format {fmt!r} is {f.lang!r}, not {lang!r}")
    d = random_date(rng, split) if date is None else date
    return DateExample(normalize_date_text(f.render(d, rng)), iso(d), f.id, f.lang, d)


def _date_source_chars() -> list[str]:
    chars = set("0123456789 ,./()")
    chars |= set("".join(MONTHS + WEEKDAYS + ("st", "nd", "rd", "th", "the", "of")))
    chars |= set(ZH_DIGITS + "零十年月日号星期周天")
    return sorted(chars)


DATE_SOURCE_VOCAB = CharVocab(_date_source_chars())
DATE_TARGET_VOCAB = CharVocab("0123456789-")


def unknown_chars(text: str, vocab: Vocab | None = None) -> list[str]:
    """Characters of ``normalize_date_text(text)`` that the date model has never seen, e.g.
    ``unknown_chars("5 März 2017") == ["ä"]``; ``[]`` means every character can be encoded."""
    vocab = DATE_SOURCE_VOCAB if vocab is None else vocab
    return vocab.unknown(normalize_date_text(text))


# --------------------------------------------------------------------------------------------------
# (b) Reversal
# --------------------------------------------------------------------------------------------------

REVERSE_MIN_LEN, REVERSE_MAX_LEN = 5, 40
REVERSE_VOCAB = CharVocab("0123456789")


def make_reverse_example(rng: random.Random, length: int | None = None) -> tuple[str, str]:
    """A random digit string of ``length`` (random in 5..40 if None) and its reversal."""
    if length is None:
        length = rng.randint(REVERSE_MIN_LEN, REVERSE_MAX_LEN)
    if length < 1:
        raise ValueError(f"length must be >= 1, got {length}")
    s = "".join(rng.choice("0123456789") for _ in range(length))
    return s, s[::-1]


# --------------------------------------------------------------------------------------------------
# (c) Pronoun resolution
# --------------------------------------------------------------------------------------------------

PRONOUN_LANGS = ("en", "zh")

# nouns as (english, chinese)
ANIMALS = (("animal", "动物"), ("dog", "狗"), ("cat", "猫"), ("horse", "马"), ("cow", "牛"),
           ("sheep", "羊"), ("fox", "狐狸"), ("rabbit", "兔子"), ("deer", "鹿"), ("bear", "熊"),
           ("goat", "山羊"), ("mouse", "老鼠"), ("lion", "狮子"), ("tiger", "老虎"), ("wolf", "狼"),
           ("duck", "鸭子"), ("elephant", "大象"), ("monkey", "猴子"), ("pig", "猪"), ("squirrel", "松鼠"))
PLACES = (("street", "马路"), ("road", "公路"), ("river", "河"), ("bridge", "桥"), ("highway", "高速公路"),
          ("field", "田野"), ("railway", "铁路"), ("square", "广场"), ("valley", "山谷"), ("stream", "小溪"))
OBJECTS = (("trophy", "奖杯"), ("ball", "球"), ("book", "书"), ("box", "盒子"), ("bag", "包"),
           ("suitcase", "行李箱"), ("drawer", "抽屉"), ("bottle", "瓶子"), ("cup", "杯子"), ("jar", "罐子"),
           ("basket", "篮子"), ("toy", "玩具"), ("lamp", "台灯"), ("pillow", "枕头"), ("bucket", "水桶"),
           ("chair", "椅子"), ("table", "桌子"), ("stone", "石头"))


@dataclass(frozen=True)
class PronounTemplate:
    """Two noun slots and an adjective slot; ``adj_first`` adjectives make "it" the first noun,
    ``adj_second`` ones the second. Token lists per language, with "A", "B", "ADJ" as slots."""

    id: str
    en: tuple[str, ...]
    zh: tuple[str, ...]
    nouns_a: tuple[tuple[str, str], ...]
    nouns_b: tuple[tuple[str, str], ...]
    adj_first: tuple[tuple[str, str], ...]
    adj_second: tuple[tuple[str, str], ...]

    def tokens(self, lang: str) -> tuple[str, ...]:
        return self.en if lang == "en" else self.zh


_EN_TAIL = ("because", "it", "was", "too", "ADJ", ".")
_ZH_TAIL = ("，", "因为", "它", "太", "ADJ", "了", "。")

PRONOUN_TEMPLATES: tuple[PronounTemplate, ...] = (
    PronounTemplate(
        "cross", ("the", "A", "didn't", "cross", "the", "B") + _EN_TAIL, ("A", "没有", "过", "B") + _ZH_TAIL,
        ANIMALS, PLACES,
        (("tired", "累"), ("scared", "害怕"), ("slow", "慢"), ("old", "老"), ("lazy", "懒")),
        (("wide", "宽"), ("long", "长"), ("crowded", "拥挤"), ("dangerous", "危险"), ("slippery", "滑"))),
    PronounTemplate(
        "fit", ("the", "A", "didn't", "fit", "in", "the", "B") + _EN_TAIL, ("A", "放不进", "B") + _ZH_TAIL,
        OBJECTS, OBJECTS,
        (("big", "大"), ("long", "长"), ("wide", "宽"), ("tall", "高")),
        (("small", "小"), ("narrow", "窄"), ("short", "短"), ("full", "满"), ("shallow", "浅"))),
    PronounTemplate(
        "lift", ("the", "A", "couldn't", "lift", "the", "B") + _EN_TAIL, ("A", "搬不动", "B") + _ZH_TAIL,
        ANIMALS, OBJECTS,
        (("weak", "虚弱"), ("tired", "累"), ("small", "小"), ("old", "老")),
        (("heavy", "重"), ("big", "大"))),
    PronounTemplate(
        "afraid", ("the", "A", "wasn't", "afraid", "of", "the", "B") + _EN_TAIL, ("A", "不怕", "B") + _ZH_TAIL,
        ANIMALS, ANIMALS,
        (("brave", "勇敢"), ("strong", "强壮"), ("big", "大")),
        (("small", "小"), ("slow", "慢"), ("weak", "弱小"))),
    PronounTemplate(
        "catch", ("the", "A", "couldn't", "catch", "the", "B") + _EN_TAIL, ("A", "追不上", "B") + _ZH_TAIL,
        ANIMALS, ANIMALS,
        (("slow", "慢"), ("tired", "累"), ("old", "老"), ("lazy", "懒")),
        (("fast", "快"), ("clever", "聪明"))),
)
PRONOUN_TEMPLATE_IDS = tuple(t.id for t in PRONOUN_TEMPLATES)
_TEMPLATES_BY_ID = {t.id: t for t in PRONOUN_TEMPLATES}
PRONOUN_TOKEN = {"en": "it", "zh": "它"}
MAX_PRONOUN_CHARS = 200


@dataclass(frozen=True)
class PronounExample:
    """tokens: the sentence as tokens; nouns: positions of the first and second noun;
    pronoun: position of "it"/"它"; label: 0 if "it" is the first noun, 1 if the second."""

    tokens: tuple[str, ...]
    lang: str
    template: str
    nouns: tuple[int, int]
    pronoun: int
    adjective: str
    label: int

    @property
    def referent(self) -> int:
        """Token position of the noun "it" refers to."""
        return self.nouns[self.label]

    @property
    def text(self) -> str:
        return pronoun_text(self.tokens, self.lang)


def pronoun_text(tokens: Sequence[str], lang: str) -> str:
    """Tokens -> a readable sentence ("The dog didn't ..." / "狗没有过马路，因为它太累了。")."""
    if lang == "zh":
        return "".join(tokens)
    s = " ".join(tokens).replace(" .", ".").replace(" ,", ",")
    return s[:1].upper() + s[1:]


def _fill(t: PronounTemplate, lang: str, a: str, b: str, adj: str, label: int) -> PronounExample:
    toks = [{"A": a, "B": b, "ADJ": adj}.get(tok, tok) for tok in t.tokens(lang)]
    slots = t.tokens(lang)
    return PronounExample(tuple(toks), lang, t.id, (slots.index("A"), slots.index("B")),
                          toks.index(PRONOUN_TOKEN[lang]), adj, label)


def is_heldout_pair(template: str, a: str, b: str) -> bool:
    """About one (template, first noun, second noun) triple in ten (English nouns, by CRC32) is never
    shown in training, in either language and with either adjective: the test set."""
    return zlib.crc32(f"{template}|{a}|{b}".encode()) % 10 == 0


def make_pronoun_example(rng: random.Random, lang: str | None = None, template: str | None = None,
                         label: int | None = None, split: str | None = None) -> PronounExample:
    """A random sentence: template, two different nouns, and an adjective that picks the referent.

    ``split``: None (any noun pair), "train" (never a held-out pair) or "heldout" (only those).
    """
    _check_split(split)
    lang = rng.choice(PRONOUN_LANGS) if lang is None else lang
    if lang not in PRONOUN_LANGS:
        raise ValueError(f"lang must be one of {PRONOUN_LANGS}, got {lang!r}")
    t = rng.choice(PRONOUN_TEMPLATES) if template is None else pronoun_template(template)
    k = 0 if lang == "en" else 1
    while True:
        a = rng.choice(t.nouns_a)
        b = rng.choice([n for n in t.nouns_b if n != a])
        if split is None or is_heldout_pair(t.id, a[0], b[0]) == (split == "heldout"):
            break
    label = rng.randrange(2) if label is None else label
    adj = rng.choice(t.adj_first if label == 0 else t.adj_second)
    return _fill(t, lang, a[k], b[k], adj[k], label)


def pronoun_template(template_id: str) -> PronounTemplate:
    try:
        return _TEMPLATES_BY_ID[template_id]
    except KeyError:
        raise ValueError(f"unknown template {template_id!r}; known: {PRONOUN_TEMPLATE_IDS}") from None


def _lexicon(lang: str) -> set[str]:
    k = 0 if lang == "en" else 1
    words: set[str] = set()
    for t in PRONOUN_TEMPLATES:
        words |= {w for w in t.tokens(lang) if w not in ("A", "B", "ADJ")}
        for group in (t.nouns_a, t.nouns_b, t.adj_first, t.adj_second):
            words |= {pair[k] for pair in group}
    return words


PRONOUN_LEXICON = {lang: frozenset(_lexicon(lang)) for lang in PRONOUN_LANGS}
PRONOUN_VOCAB = Vocab(sorted(PRONOUN_LEXICON["en"]) + sorted(PRONOUN_LEXICON["zh"]))

#: Error codes of ``parse_pronoun_sentence`` (the page translates them; ``detail`` names the word).
PRONOUN_ERRORS = ("empty", "too_long", "unknown_word", "no_template", "bad_noun", "bad_adjective",
                  "same_noun")


class PronounParse(NamedTuple):
    """``example`` when the sentence is in the grammar, else ``error`` (one of PRONOUN_ERRORS) and
    ``detail`` (the offending word, or the template it almost matched)."""

    example: PronounExample | None
    error: str | None = None
    detail: str = ""

    @property
    def ok(self) -> bool:
        return self.error is None


_EN_CONTRACTIONS = {"did not": "didn't", "could not": "couldn't", "was not": "wasn't",
                    "didnt": "didn't", "couldnt": "couldn't", "wasnt": "wasn't"}


def tokenize_pronoun_sentence(text: str, lang: str) -> tuple[list[str], str | None]:
    """Text -> (tokens, first unknown word or None). English: lower-cased words, "did not" ->
    "didn't", final "." added; Chinese: longest match over the lexicon (the grammar's words), "。"
    added. Commas are dropped in English and normalised to "，" in Chinese."""
    text = unicodedata.normalize("NFKC", text).replace("’", "'").replace("‘", "'").strip()
    if lang == "en":
        text = text.lower().replace("。", ".").replace("、", ",")   # a Chinese input method's stops
        for long, short in _EN_CONTRACTIONS.items():
            text = re.sub(rf"\b{long}\b", short, text)
        words = re.findall(r"[^\W\d_]+(?:'[^\W\d_]+)?|[^\s\w,.!?]|\d+", text)
        tokens = words + ["."]
        unknown = next((w for w in words if w not in PRONOUN_LEXICON["en"]), None)
        return tokens, unknown
    if lang != "zh":
        raise ValueError(f"lang must be one of {PRONOUN_LANGS}, got {lang!r}")
    text = re.sub(r"\s+", "", text).replace(",", "，").rstrip("。.!！")
    lex = PRONOUN_LEXICON["zh"]
    longest = max(len(w) for w in lex)
    tokens, i, unknown = [], 0, None
    while i < len(text):
        for n in range(min(longest, len(text) - i), 0, -1):
            if text[i:i + n] in lex:
                tokens.append(text[i:i + n])
                i += n
                break
        else:  # no word starts here: report the run of characters up to the next known word
            j = i + 1
            while j < len(text) and not any(text[j:j + n] in lex for n in range(1, longest + 1)):
                j += 1
            unknown = unknown or text[i:j]
            tokens.append(text[i:j])
            i = j
    return tokens + ["。"], unknown


def parse_pronoun_sentence(text: str, lang: str | None = None) -> PronounParse:
    """Read a sentence typed by the learner. In the grammar -> ``PronounParse(example)``; otherwise
    an error code: "empty", "too_long", "unknown_word" (detail: the word), "no_template" (the
    sentence has no template's shape), "bad_noun" (a known noun in a slot it cannot fill, e.g.
    "the street didn't cross the dog"), "bad_adjective" (not one of that template's adjectives),
    "same_noun" (both nouns the same: then "it" has no single answer). Without ``lang``, the sentence's
    language is ``sentence_language(text)``, the decision the pages use."""
    if lang is None:
        lang = sentence_language(text)
    if lang not in PRONOUN_LANGS:
        raise ValueError(f"lang must be one of {PRONOUN_LANGS}, got {lang!r}")
    if not text or not text.strip():
        return PronounParse(None, "empty")
    if len(text) > MAX_PRONOUN_CHARS:
        return PronounParse(None, "too_long", str(MAX_PRONOUN_CHARS))
    tokens, unknown = tokenize_pronoun_sentence(text, lang)
    if unknown is not None:
        return PronounParse(None, "unknown_word", unknown)
    k = 0 if lang == "en" else 1
    best: PronounParse | None = None
    for t in PRONOUN_TEMPLATES:
        slots = t.tokens(lang)
        if len(slots) != len(tokens) or any(s != w for s, w in zip(slots, tokens)
                                            if s not in ("A", "B", "ADJ")):
            continue
        a, b, adj = (tokens[slots.index(s)] for s in ("A", "B", "ADJ"))
        nouns_a = {n[k] for n in t.nouns_a}
        nouns_b = {n[k] for n in t.nouns_b}
        if a not in nouns_a or b not in nouns_b:
            best = best or PronounParse(None, "bad_noun", a if a not in nouns_a else b)
            continue
        if a == b:
            best = best or PronounParse(None, "same_noun", a)
            continue
        first, second = {x[k] for x in t.adj_first}, {x[k] for x in t.adj_second}
        if adj not in first | second:
            best = best or PronounParse(None, "bad_adjective", adj)
            continue
        return PronounParse(_fill(t, lang, a, b, adj, 0 if adj in first else 1))
    return best or PronounParse(None, "no_template")

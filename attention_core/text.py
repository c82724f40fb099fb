"""From a sentence to vectors: a tiny tokenizer and deterministic token embeddings.

Not a learned tokenizer: words, numbers, single CJK characters, single emoji and
single punctuation marks become tokens, so any text a learner types (English,
Chinese, emoji, HTML-looking text) gives a sensible, reproducible sequence.
"""
from __future__ import annotations

import re
import unicodedata
import zlib

import torch

# one token: a run of letters/digits (with inner apostrophes), or one CJK character,
# or any other single visible character (punctuation, symbols, one emoji with its modifiers)
_CJK = r"\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\u3040-\u30ff\uac00-\ud7af"
_MODIFIERS = r"\ufe0e\ufe0f\u20e3\U0001f3fb-\U0001f3ff"  # variation selectors, keycap, skin tones
_TOKEN = re.compile(rf"[{_CJK}]|[^\W_{_CJK}]+(?:['’][^\W_{_CJK}]+)*|\S(?:[{_MODIFIERS}]|\u200d\S)*", re.UNICODE)


# a letter of a CJK script (Han, including the supplementary planes, kana, hangul): the models here read
# English and Chinese, so any of these makes a sentence "zh"; CJK punctuation alone does not
_CJK_LETTER = re.compile(rf"[{_CJK}\U00020000-\U0003134f]")


def sentence_language(text: str) -> str:
    """The one language decision for a sentence a learner types to the bilingual models: ``"zh"`` if,
    after NFKC, it holds a CJK letter, else ``"en"``.

    NFKC comes first, so what an input method adds to Latin text does not make it Chinese: full-width
    Latin ``ｔｈｅ`` is ``the``, the ideographic space U+3000 is a space, the small punctuation U+FE50-U+FE6B
    (``﹐`` ``﹒``) is ``,`` ``.``; and CJK punctuation (``。`` ``，``) alone does not decide either.
    """
    return "zh" if _CJK_LETTER.search(unicodedata.normalize("NFKC", text or "")) else "en"


def tokenize(text: str) -> list[str]:
    """Split text into tokens; whitespace is dropped. ``tokenize("it's 好!") == ["it's", "好", "!"]``."""
    return _TOKEN.findall(text or "")


def token_seed(token: str, seed: int = 0) -> int:
    """A stable 32-bit seed per (token, seed): the same word always gets the same vector.

    Python's ``hash`` is salted per process, so CRC32 of the UTF-8 bytes is used instead.
    """
    return zlib.crc32(f"{seed}\x00{token.lower()}".encode("utf-8"))


def embed_tokens(tokens: list[str], d: int, seed: int = 0) -> torch.Tensor:
    """Deterministic random embeddings, shape (len(tokens), d), entries ~ N(0, 1).

    Identical tokens get identical rows (like an embedding table lookup), so shuffling
    a sentence shuffles the rows; case is ignored.
    """
    rows = []
    cache: dict[str, torch.Tensor] = {}
    for tok in tokens:
        if tok.lower() not in cache:
            g = torch.Generator().manual_seed(token_seed(tok, seed))
            cache[tok.lower()] = torch.randn(d, generator=g)
        rows.append(cache[tok.lower()])
    return torch.stack(rows) if rows else torch.zeros(0, d)


def projection(d_in: int, d_out: int, seed: int, name: str) -> torch.Tensor:
    """A seeded random projection matrix (d_in, d_out) with Xavier-like scale 1/sqrt(d_in)."""
    g = torch.Generator().manual_seed(zlib.crc32(f"{name}\x00{seed}".encode("utf-8")))
    return torch.randn(d_in, d_out, generator=g) / d_in ** 0.5

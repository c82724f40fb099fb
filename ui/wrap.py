"""Chart titles that fit a 390 px phone: a long title becomes a few short lines instead of being cut with "…".

Vega cuts a chart title to the chart's width; on a 390 px phone that is about 40 Latin or 20 Chinese characters.
``title_lines`` breaks a title into lines of at most ``limit`` characters (a Chinese character counts two) at
spaces, or after Chinese punctuation, and returns the title unchanged when it fits on one line (a Vega-Lite title
may be a string or a list of lines).
"""
from __future__ import annotations

BREAK_AFTER = "，、：；。）"        # a Chinese title may break after these (there are no spaces to break at)


def width(text: str) -> int:
    """Display width in Latin characters: a wide (CJK) character counts two."""
    return sum(2 if ord(c) > 0x2e7f else 1 for c in text)


def _pieces(text: str) -> list[str]:
    """The unbreakable pieces of ``text``, each with its trailing break (a space or a Chinese punctuation mark)."""
    out, cur = [], ""
    for c in text:
        cur += c
        if c == " " or c in BREAK_AFTER:
            out.append(cur)
            cur = ""
    return out + ([cur] if cur else [])


def title_lines(text: str, limit: int = 36) -> str | list[str]:
    """``text`` as one line if it is at most ``limit`` wide, else as lines of at most ``limit`` (a piece longer
    than ``limit`` stays whole on its own line)."""
    if width(text) <= limit:
        return text
    lines, cur = [], ""
    for piece in _pieces(text):
        if cur and width(cur + piece.rstrip()) > limit:
            lines.append(cur.rstrip())
            cur = ""
        cur += piece
    if cur.strip():
        lines.append(cur.rstrip())
    return lines if len(lines) > 1 else text

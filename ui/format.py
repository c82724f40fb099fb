"""How numbers are written on a page: one function per style, used by every page and chart.

Minus signs are the typographic "−" where a learner reads the number in prose; the exact value of a
chart cell is in its tooltip (``ui.charts``), never rounded there.
"""
from __future__ import annotations

import math
import re


def fixed(x: float, digits: int = 2) -> str:
    """A fixed number of decimals: 0.25, 3.1416 (``digits`` = 4)."""
    return f"{float(x):.{digits}f}"


def pct(x: float, digits: int = 0) -> str:
    """A fraction as a percentage: 0.997 -> "100%" (digits 0) or "99.7%" (digits 1)."""
    return f"{100 * float(x):.{digits}f}%"


def count(n: int) -> str:
    """An integer with thousands separators: 16640 -> "16,640"."""
    return f"{int(n):,}"


def sig(x: float) -> str:
    """About three significant digits, scientific below 0.01: 1,800 / 42.5 / 0.125 / 2.4e-07."""
    x = float(x)
    if not math.isfinite(x):
        return "∞" if x > 0 else ("−∞" if x < 0 else "NaN")
    if x == 0:
        return "0"
    if abs(x) >= 1000:
        return f"{x:,.0f}"
    if abs(x) >= 10:
        return f"{x:.1f}"
    if abs(x) >= 0.01:
        return f"{x:.3f}"
    return f"{x:.1e}"


def short(x: float) -> str:
    """Compact: 3 significant digits, scientific below 1e-3 (chart legends, small labels); ±∞ as "−∞"."""
    x = float(x)
    if not math.isfinite(x):
        return exact(x)
    return "0" if x == 0 else (f"{x:.1e}" if abs(x) < 1e-3 else f"{x:.3g}")


def exact(x: float) -> str:
    """A value as a learner reads it in a pitfall: NaN, −∞, −65504, −1e+09, 0.1111."""
    x = float(x)
    if math.isnan(x):
        return "NaN"
    if math.isinf(x):
        return "−∞" if x < 0 else "∞"
    text = str(int(x)) if x.is_integer() and abs(x) < 1e6 else f"{x:.4g}"
    return text.replace("-", "−")


def clip(label: str, limit: int = 10) -> str:
    """A label cut to ``limit`` characters with "…" (axis labels; the tooltip keeps the whole text)."""
    label = str(label)
    return label if len(label) <= limit else label[:limit - 1] + "…"


_MD_SPECIAL = re.compile(r"([\\`*_{}\[\]()#+\-.!|<>~$])")


def md_escape(text: str) -> str:
    """User text made inert for st.markdown: no Markdown, no HTML, no LaTeX."""
    return _MD_SPECIAL.sub(r"\\\1", str(text))

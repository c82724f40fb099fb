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


_SUPERSCRIPT = str.maketrans("0123456789-", "⁰¹²³⁴⁵⁶⁷⁸⁹⁻")


def approx(x: float, digits: int = 3) -> str:
    """``digits`` significant digits, thousands separators, no trailing scientific notation above 0.001: a measured
    ratio or time as a learner reads it ("1,150 times", "10,700 ms", "9.29 ms", "0.0421"); below 0.001 as
    ``sci``. The minus sign is "−"."""
    x = float(x)
    if not math.isfinite(x) or x == 0:
        return exact(x)
    if abs(x) < 1e-3:
        return sci(x, digits)
    magnitude = math.floor(math.log10(abs(x)))
    rounded = round(x, digits - 1 - magnitude)
    magnitude = math.floor(math.log10(abs(rounded)))          # 9.996 rounds to 10.0: one digit fewer after the point
    text = f"{rounded:,.{max(0, digits - 1 - magnitude)}f}"
    return text.replace("-", "−")


def sci(x: float, digits: int = 2) -> str:
    """Scientific notation as printed in a textbook: 6.0 × 10⁻⁸ (``digits`` significant digits); 0 stays "0"."""
    x = float(x)
    if not math.isfinite(x) or x == 0:
        return exact(x)
    mantissa, exponent = f"{x:.{digits - 1}e}".split("e")
    return f"{mantissa.replace('-', '−')} × 10{str(int(exponent)).translate(_SUPERSCRIPT)}"


def sum_error(sums) -> str:
    """How far row sums are from 1, as ``sci`` of the largest |sum − 1| (rounding in float32 leaves ~1e-7)."""
    values = [float(s) for s in sums]
    return sci(max((abs(v - 1.0) for v in values), default=0.0))

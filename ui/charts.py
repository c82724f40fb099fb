"""The one way to build and draw a chart (README, "One way to build and draw a chart").

``chart_kind`` turns an Altair builder into a function returning the finished Vega-Lite spec (built once per
static shape, filled per rerun); the shared kinds live here: the attention heatmap (``heatmap``,
``attention_heatmap``) and a row of weights (``bars``). Pure functions, no Streamlit calls: the tests decode
the spec and data of each chart directly.
"""
from __future__ import annotations

import functools
import inspect
import json
import math
import os
import re
import warnings
from collections import Counter
from typing import NamedTuple, Sequence

import altair as alt
import numpy as np
import pandas as pd

from serving.cache import MB, ByteBudgetCache, cache_data, key_of_values, nbytes

# colour-blind-safe schemes: perceptually uniform sequential, and a blue/orange diverging one
WEIGHT_SCHEME = "viridis"
SIGNED_SCHEME = "blueorange"
MASKED_GREY = "#d4d4d4"
OUTLINE_ORANGE = "#e66101"   # the query's colour: a row framed in it is the query shown in another chart
MAX_NUMBERS = 16          # numbers printed in cells up to 16 x 16 (and only where they fit: ``number_fit``)
NUMBER_FONT = 11          # px, the numbers in cells
TITLE_FONT = 16           # px, chart titles in Streamlit's Vega theme (bold)
LABEL_FONT = 12           # px, axis labels in Streamlit's Vega theme (Source Sans)
MAX_CELLS_PER_AXIS = 128  # larger matrices are shown as averaged tiles (the CSV keeps every value)
MAX_ARIA_CELLS = 400      # heatmaps with more cells carry no ARIA label per cell (see ``heatmap_chart``)
ROW_SELECTION = "row"     # name of the click selection; st.altair_chart returns it
FIT_X = alt.AutoSizeParams(type="fit-x", contains="padding")   # stretch to the column, keep the height


# Vega's colour schemes, as vega-scale defines them (a run of hex colours, interpolated linearly in RGB between
# neighbours, channels rounded): a heatmap of thousands of cells drawn as ONE image (the encoder's layer diagram:
# 4,000+ SVG rects took 150-250 ms per redraw) is coloured here exactly as Vega colours a rect and draws its legend
# (tests/test_charts.py checks against the legend gradient Vega draws in a browser).
SCHEME_COLOURS = {"blueorange": "134b852f78b35da2cb9dcae1d2e5eff2f0ebfce0bafbbf74e8932fc5690d994a07"}


def scheme_rgb(values, domain: tuple[float, float], scheme: str = SIGNED_SCHEME) -> np.ndarray:
    """uint8 RGB, shape (*values.shape, 3): ``values`` on a linear colour scale over ``domain`` (clamped), the
    colours of Vega's ``scheme``; NaN -> MASKED_GREY."""
    hexes = SCHEME_COLOURS[scheme]
    stops = np.array([[int(hexes[i + j:i + j + 2], 16) for j in (0, 2, 4)] for i in range(0, len(hexes), 6)],
                     dtype=np.float64)
    v = np.asarray(values, dtype=np.float64)
    lo, hi = float(domain[0]), float(domain[1])
    pos = np.clip((np.nan_to_num(v) - lo) / (hi - lo), 0.0, 1.0) * (len(stops) - 1)
    i = np.clip(np.floor(pos).astype(int), 0, len(stops) - 2)
    rgb = stops[i] + (stops[i + 1] - stops[i]) * (pos - i)[..., None]
    out = np.floor(rgb + 0.5).astype(np.uint8)                      # JavaScript's Math.round, as d3-color
    out[np.isnan(v)] = [int(MASKED_GREY[k:k + 2], 16) for k in (1, 3, 5)]
    return out


def png_data_url(rgb: np.ndarray) -> str:
    """A (rows, cols, 3) uint8 image as a PNG data URL (one pixel per cell; drawn unsmoothed by an image mark)."""
    import base64
    import io

    from PIL import Image

    buf = io.BytesIO()
    Image.fromarray(np.ascontiguousarray(rgb, dtype=np.uint8), "RGB").save(buf, format="PNG")
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode("ascii")


def as_numpy(matrix) -> np.ndarray:
    """Tensor / array / nested list -> float64 2-D array (detached, on the CPU)."""
    if hasattr(matrix, "detach"):
        matrix = matrix.detach().cpu().double().numpy()
    arr = np.asarray(matrix, dtype=np.float64)
    if arr.ndim != 2:
        raise ValueError(f"a heatmap needs a 2-D matrix, got shape {arr.shape}")
    return arr


def unique_labels(tokens: Sequence[str]) -> list[str]:
    """Axis labels that keep repeated tokens apart: "the·0", "cat", "the·4". A repeated sign is quoted, “-”·4,
    so that its position does not read as a number ("-·4" reads "minus 4")."""
    counts = Counter(tokens)
    return [f"{_quoted(str(tok))}·{i}" if counts[tok] > 1 else str(tok) for i, tok in enumerate(tokens)]


_SIGNS = set("-+−–—±×÷*/=<>~^.,:%")


def _quoted(tok: str) -> str:
    return f"“{tok}”" if tok and set(tok) <= _SIGNS else tok


def pool_factor(n: int, limit: int = MAX_CELLS_PER_AXIS) -> int:
    return max(1, math.ceil(n / limit))


def _pool(arr: np.ndarray, fr: int, fc: int, reduce=np.nanmean) -> np.ndarray:
    """Average ``fr`` x ``fc`` tiles (NaN cells ignored; an all-NaN tile stays NaN), vectorised."""
    n_q, n_k = arr.shape
    rows, cols = math.ceil(n_q / fr), math.ceil(n_k / fc)
    padded = np.full((rows * fr, cols * fc), np.nan)
    padded[:n_q, :n_k] = arr
    tiles = padded.reshape(rows, fr, cols, fc).transpose(0, 2, 1, 3).reshape(rows, cols, fr * fc)
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)   # an all-NaN (fully masked) tile
        return reduce(tiles, axis=-1)


def _range_labels(labels: Sequence[str], f: int) -> list[str]:
    n = len(labels)
    return [f"{i}–{min(i + f, n) - 1}" if f > 1 else labels[i] for i in range(0, n, f)]


def heatmap_frame(matrix, row_labels: Sequence[str], col_labels: Sequence[str],
                  masked=None) -> tuple[pd.DataFrame, int]:
    """Long-form data of a heatmap, one row per cell, and the pooling factor used (1 = none).

    Columns: query_pos, key_pos (int16 up to 32,767 positions), query, key (unique axis labels, categorical), value (float,
    null where masked scores are -inf), exact (the value as text, full precision), masked.
    """
    data = _heatmap_data(matrix, row_labels, col_labels, masked)
    return data.frame, data.factor


class _HeatmapData(NamedTuple):
    frame: pd.DataFrame
    factor: int
    rows: list            # axis labels in order (after pooling)
    cols: list
    any_masked: bool
    bound: float          # largest |finite value| (1.0 if none)


def _labels_column(labels: Sequence[str], codes: np.ndarray):
    """Axis labels per cell: categorical (codes into the labels) when the labels are distinct, else strings (a
    typed label such as "a·1" next to a repeated "a" can collide)."""
    labels = [str(x) for x in labels]
    if len(set(labels)) == len(labels):
        return pd.Categorical.from_codes(codes, categories=labels)
    return np.asarray(labels, dtype=object)[codes]


def _heatmap_data(matrix, row_labels: Sequence[str], col_labels: Sequence[str], masked=None) -> _HeatmapData:
    arr = as_numpy(matrix)
    n_q, n_k = arr.shape
    if len(row_labels) != n_q or len(col_labels) != n_k:
        raise ValueError(f"labels ({len(row_labels)}, {len(col_labels)}) do not match the matrix {arr.shape}")
    hidden = np.zeros_like(arr, dtype=bool) if masked is None else np.broadcast_to(
        np.asarray(masked, dtype=bool), arr.shape)
    hidden = hidden | np.isneginf(arr)
    fr, fc = pool_factor(n_q), pool_factor(n_k)
    rows, cols = unique_labels(row_labels), unique_labels(col_labels)
    if fr > 1 or fc > 1:
        visible = np.where(hidden, np.nan, arr)
        with np.errstate(all="ignore"):
            arr = _pool(visible, fr, fc)
        hidden = np.isnan(arr)
        rows = _range_labels(row_labels, fr) if fr > 1 else rows      # an unpooled axis keeps unique labels
        cols = _range_labels(col_labels, fc) if fc > 1 else cols
    qi, ki = np.meshgrid(np.arange(arr.shape[0]) * fr, np.arange(arr.shape[1]) * fc, indexing="ij")
    finite = np.isfinite(arr)
    values = np.where(finite, arr, np.nan)  # masked weights stay 0; -inf scores become null
    exact = np.where(finite, np.char.mod("%.8g", np.where(finite, arr, 0.0)),
                     np.where(np.isneginf(arr), "−∞", "—"))
    # small types: a 30 x 30 heatmap was 54 KB per redraw at 8-byte positions and a string per label and cell;
    # labels are categories (one dictionary of the axis labels, 1-2 byte codes per cell)
    pos_type = np.int16 if max(n_q, n_k) < 2 ** 15 else np.int64     # signed: -(q - k) stays what it says
    frame = pd.DataFrame({
        "query_pos": qi.ravel().astype(pos_type),
        "key_pos": ki.ravel().astype(pos_type),
        "query": _labels_column(rows, np.repeat(np.arange(len(rows)), arr.shape[1])),
        "key": _labels_column(cols, np.tile(np.arange(len(cols)), arr.shape[0])),
        "value": values.ravel(),
        "exact": exact.ravel(),
        "masked": hidden.ravel(),
    })
    magnitude = np.abs(values[finite]) if finite.any() else np.zeros(0)
    bound = float(magnitude.max()) if magnitude.size and magnitude.max() > 0 else 1.0
    return _HeatmapData(frame, max(fr, fc), list(rows), list(cols), bool(hidden.any()), bound)


# =====================================================================================================
# The one way to build and draw a chart: a chart kind
# =====================================================================================================
#
# Altair is the authoring language: a *builder* takes a DataFrame (or a dict of them) and options and
# returns an ``alt.Chart``. Building and serialising an Altair chart costs 30-80 ms, far more than the
# maths of a rerun, so ``@chart_kind`` turns a builder into a function that returns the finished
# Vega-Lite spec (``st.vega_lite_chart``'s input) in about a millisecond:
#
# - the spec is built ONCE per *static shape*: the builder's arguments other than the data and the
#   ``fill`` arguments (options, titles in the current language, sizes that change the layout);
# - the ``fill`` arguments (axis orders, colour domains, heights, titles, a selected row ...) are given
#   placeholders in that one build and replaced by this rerun's values in the JSON text;
# - the data never enters the spec: each DataFrame becomes a named dataset that Streamlit ships as Arrow.
#
# The cache key is derived from the arguments (never written by hand), and the skeletons live in one
# byte-budgeted cache shared by every session (a skeleton holds options and placeholders, no data).
# A fill argument must reach the spec unchanged (no arithmetic, no ``if`` on it); a value that is None,
# empty or a bool is part of the static shape instead. ``VERIFY`` (tests: ``tests/test_chart_kinds.py``)
# rebuilds every chart directly with Altair and checks the filled spec is the same.

SKELETONS = ByteBudgetCache("ui.charts.skeletons", 4 * MB)
VERIFY = os.environ.get("ATTENTION_VERIFY_CHARTS") == "1"   # tests switch it on: every fill is checked
_HOLE = "\u27e6fill:{}\u27e7"                               # ⟦fill:i⟧ (string and list placeholders)
_INT_HOLE, _FLOAT_HOLE = 918273000, 61728.0625             # + i: numbers no real chart spec contains
Spec = dict                                                 # a finished Vega-Lite spec, "datasets" included


def _fill_kind(value) -> str:
    """How a fill value enters the skeleton: a placeholder of its type, or "static" (part of the key)."""
    if value is None or isinstance(value, bool) or (isinstance(value, (str, list, tuple)) and not value):
        return "static"
    if isinstance(value, (int, np.integer)):
        return "int"
    if isinstance(value, (float, np.floating)):
        return "float" if math.isfinite(value) else "static"
    if isinstance(value, str):
        return "str"
    if isinstance(value, (list, tuple)):
        return "list"
    raise TypeError(f"a fill value must be a number, a string or a list, not {type(value).__name__}")


def _placeholder(kind: str, i: int):
    return {"int": _INT_HOLE + 7 * i, "float": _FLOAT_HOLE + i, "str": _HOLE.format(i),
            "list": [_HOLE.format(i)]}[kind]


def _plain(value):
    """JSON-able: numpy scalars and arrays to Python, tuples to lists."""
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


def _named(data):
    """The builder's data argument as Altair named datasets (what the spec refers to)."""
    if isinstance(data, pd.DataFrame):
        return alt.NamedData(name="data")
    if isinstance(data, dict):
        return {name: alt.NamedData(name=name) for name in data}
    raise TypeError(f"chart data must be a DataFrame or a dict of them, not {type(data).__name__}")


def _datasets(data) -> dict:
    return {"data": data} if isinstance(data, pd.DataFrame) else dict(data)


def _bare_spec(chart) -> dict:
    spec = chart.to_dict(validate=VERIFY)
    spec.pop("datasets", None)
    view = spec.get("config", {}).get("view", {})
    for key in ("continuousWidth", "continuousHeight"):   # Altair's default theme; Streamlit drops it too
        view.pop(key, None)
    return spec


class _Skeleton(NamedTuple):
    text: str                 # the spec as JSON with placeholders
    pattern: re.Pattern | None
    holes: dict               # placeholder text -> (fill name, how to write the value there)


class ChartKind:
    """A chart builder made cheap to redraw (see the comment above). ``kind(data, **args)`` returns the
    finished spec; ``kind.chart(data, **args)`` the Altair chart itself (tests, notebooks)."""

    def __init__(self, build, fill: tuple[str, ...]):
        self.build, self.fill = build, tuple(fill)
        self.name = f"{build.__module__}.{build.__qualname__}"
        params = inspect.signature(build).parameters
        missing = [f for f in self.fill if f not in params]
        if missing:
            raise TypeError(f"{self.name} has no argument {', '.join(missing)} to fill")
        self.defaults = {name: p.default for name, p in params.items() if p.default is not inspect.Parameter.empty}
        functools.update_wrapper(self, build)

    def chart(self, data, **args):
        return self.build(data, **args)

    def __call__(self, data, **args) -> Spec:
        values = {name: _plain(args.pop(name, self.defaults.get(name))) for name in self.fill}
        kinds = {name: _fill_kind(v) for name, v in values.items()}
        static = {**args, **{n: v for n, v in values.items() if kinds[n] == "static"}}
        holes = {n: k for n, k in kinds.items() if k != "static"}
        style = chart_style()
        key = (self.name, key_of_values(tuple(sorted(static.items(), key=lambda kv: kv[0]))),
               tuple(sorted(holes.items())), None if isinstance(data, pd.DataFrame) else tuple(data), style)
        skeleton = SKELETONS.get_or_compute(key, lambda: self._skeleton(data, static, holes, style))[0]
        spec = self._fill(skeleton, values)
        if VERIFY:
            self.verify(spec, data, {**args, **values}, style)
        spec["usermeta"] = {"chart_kind": self.name}     # Vega-Lite ignores it; tests read which kind drew a chart
        accessible(spec, self.build.__name__, {n: v for n, v in {**args, **values}.items() if n.endswith("title")})
        spec["datasets"] = _datasets(data)
        return spec

    def _skeleton(self, data, static: dict, holes: dict, style: str = ""):
        placeholders = {name: _placeholder(kind, i) for i, (name, kind) in enumerate(sorted(holes.items()))}
        text = json.dumps(styled(_bare_spec(self.build(_named(data), **static, **placeholders)), style),
                          ensure_ascii=False)
        found = {}
        for name, ph in placeholders.items():
            if isinstance(ph, list):
                forms = {json.dumps(ph, ensure_ascii=False): "json"}
            elif isinstance(ph, str):
                forms = {json.dumps(ph, ensure_ascii=False): "json", f"'{ph}'": "expr"}
            else:
                forms = {json.dumps(ph): "number"}
            # a fill argument this shape does not use is simply absent (VERIFY catches one changed on the way)
            found.update({form: (name, how) for form, how in forms.items() if form in text})
        stray = re.findall(r"\u27e6fill:\d+\u27e7", re.sub("|".join(re.escape(f) for f in found), "", text)) \
            if found else []
        if stray:
            raise ValueError(f"{self.name}: a fill argument was changed on its way into the spec")
        pieces = [rf"(?<![\d.]){re.escape(f)}(?![\d.])" if how == "number" else re.escape(f)
                  for f, (_, how) in sorted(found.items(), key=lambda kv: len(kv[0]), reverse=True)]
        pattern = re.compile("|".join(pieces)) if found else None
        skeleton = _Skeleton(text, pattern, found)
        return skeleton, skeleton, nbytes(text) + 200 * len(found)

    @staticmethod
    def _fill(skeleton: _Skeleton, values: dict) -> dict:
        if skeleton.pattern is None:
            return json.loads(skeleton.text)

        def write(match: re.Match) -> str:
            name, how = skeleton.holes[match.group(0)]
            text = json.dumps(values[name], ensure_ascii=False)
            return json.dumps(text, ensure_ascii=False)[1:-1] if how == "expr" else text   # "expr": inside a string

        return json.loads(skeleton.pattern.sub(write, skeleton.text))

    def verify(self, spec: dict, data, args: dict, style: str = "") -> None:
        """The filled spec equals a fresh Altair build with the same arguments (auto-named params aside)."""
        direct = styled(_bare_spec(self.build(_named(data), **args)), style)
        def norm(spec: dict) -> str:
            text = json.dumps(spec, sort_keys=True, ensure_ascii=False)
            return re.sub(r'"(param|view)_[0-9a-f_]+"', '"auto"', text)

        if norm(direct) != norm(spec):
            raise AssertionError(f"{self.name}: the filled spec differs from a direct build\n"
                                 f"direct: {norm(direct)[:2000]}\nfilled: {norm(spec)[:2000]}")


# ----------------------------------------------------------------------------- what a screen reader is told
# One text alternative per chart, in the page's language: the spec's top-level ``description``, which Vega writes as
# the ``aria-label`` of the chart's element (role "graphics-document"); without it a screen reader announces "Vega
# visualization". It names what the chart shows: a sentence per chart kind where one exists (``a11y.kind.<builder>``:
# the kinds with no title or axis titles, such as small multiples), the chart's title, then its axes and colour as
# the chart labels them. Never one label per mark: the kinds switch per-mark ARIA off above a cell count (the redraw
# budget), and the numbers are in the tooltip, the per-mark labels of small charts, and the CSV of a heatmap.
# Reference lines (a rule whose tooltip names no data field: a threshold, "now", chance) are hidden from assistive
# technology: Vega gives a rule layer whose items have no label (no data field, or no item at all) the role of a
# graphic with no name (axe: svg-img-alt); the chart's description says what the chart shows.
_AXES = ("x", "y", "color")
_CJK_SENTENCE_GAP = re.compile(r"(?<=。)\s+")   # Chinese sentences follow each other without a space


def _title_text(title) -> str:
    if isinstance(title, dict):
        title = title.get("text")
    if isinstance(title, (list, tuple)):
        return " ".join(str(x).strip() for x in title if str(x).strip())
    return str(title).strip() if isinstance(title, str) else ""


def _units(spec: dict):
    """Every view of a spec: itself, its layers, concatenated and faceted views (depth first)."""
    yield spec
    for key in ("layer", "hconcat", "vconcat", "concat"):
        for sub in spec.get(key) or ():
            if isinstance(sub, dict):
                yield from _units(sub)
    if isinstance(spec.get("spec"), dict):
        yield from _units(spec["spec"])


def _hide_reference_rules(spec: dict) -> None:
    for unit in _units(spec):
        mark = unit.get("mark")
        kind = mark.get("type") if isinstance(mark, dict) else mark
        tip = (unit.get("encoding") or {}).get("tooltip")
        named = any(isinstance(x, dict) and "field" in x for x in (tip if isinstance(tip, list) else [tip]))
        if kind == "rule" and not named and not (isinstance(mark, dict) and "aria" in mark):
            unit["mark"] = {**(mark if isinstance(mark, dict) else {"type": "rule"}), "aria": False}


def describe(spec: dict, kind: str = "", titles: dict | None = None) -> str:
    """The chart's text alternative in the current language (see above); ``titles``: the builder's ``*_title``
    arguments, used for an axis the spec does not title (a facet's shared axes)."""
    from .i18n import catalog, current_lang, t  # ui.charts stays importable without a Streamlit session

    parts = []
    lead = catalog(current_lang()).get(f"a11y.kind.{kind}")
    if lead:
        parts.append(str(lead))
    heading = _title_text(spec.get("title"))
    if not heading:                                   # side by side charts: their own titles
        heading = " · ".join(filter(None, (_title_text(u.get("title")) for u in list(_units(spec))[1:])))
    if heading:
        parts.append(t("a11y.chart_title", title=heading))
    found: dict[str, str] = {}
    for unit in _units(spec):
        for channel in _AXES:
            enc = (unit.get("encoding") or {}).get(channel)
            if channel not in found and isinstance(enc, dict) and _title_text(enc.get("title")):
                found[channel] = _title_text(enc.get("title"))
    if not found:                                     # a facet's shared axes: the builder's axis arguments
        for channel, arg in (("x", "x_title"), ("y", "y_title"), ("color", "value_title")):
            if isinstance((titles or {}).get(arg), str) and titles[arg].strip():
                found[channel] = titles[arg].strip()
    if not parts:
        parts.append(t("a11y.chart"))
    for channel, key in (("x", "a11y.chart_x"), ("y", "a11y.chart_y"), ("color", "a11y.chart_colour")):
        if channel in found:
            parts.append(t(key, name=found[channel]))
    return _CJK_SENTENCE_GAP.sub("", " ".join(parts))


# Axis, legend and facet-header text: Streamlit's Vega theme draws it #808495, 3.7:1 on white, below WCAG AA's
# 4.5:1 for text; this grey is 6.9:1. In the dark theme (the browser's preference or the menu's) a light grey of
# the same contrast on Streamlit's dark background. A builder's own colour is kept.
CHART_TEXT = {"light": "#5b5a59", "dark": "#c3c6cf"}


def _theme() -> str:
    """"dark" when the learner's browser shows the dark theme, else "light" (also outside a Streamlit run)."""
    try:
        from .a11y import theme  # ui.charts stays a pure builder, importable without a Streamlit session
        return theme()
    except Exception:  # noqa: BLE001 - no session: the light theme
        return "light"
_TEXT_COLOURS = {"axis": ("labelColor", "titleColor"), "legend": ("labelColor", "titleColor"),
                 "header": ("labelColor", "titleColor")}


def accessible(spec: dict, kind: str = "", titles: dict | None = None) -> dict:
    """Give a finished spec its one text alternative (unless its builder wrote one), hide its reference rules and
    draw its axis and legend text at AA contrast; returns the spec (changed in place)."""
    if not spec.get("description"):
        spec["description"] = describe(spec, kind, titles)
    _hide_reference_rules(spec)
    config, colour = spec.setdefault("config", {}), CHART_TEXT[_theme()]
    for part, keys in _TEXT_COLOURS.items():
        section = config.setdefault(part, {})
        for key in keys:
            section.setdefault(key, colour)
    return spec


# ----------------------------------------------------------------------------- presenter style
# In presenter mode (``?present=1``) the prose grows to ~22 px; a chart's 10-12 px axis labels and cell numbers
# would stay unreadable from the back of a room. So every chart kind has a second skeleton per static shape, its
# text scaled here once (cached like the first): every font size x PRESENT_SCALE and at least PRESENT_MIN_FONT px
# (explicit sizes in marks, axes, headers and titles, and the defaults in ``config``), and the legibility rules
# above that depend on a font size (``number_fit``, ``thin_labels``) rewritten for the larger text, so a cell
# shows its number only where the larger number fits and dense axes keep fewer labels.

PRESENT_SCALE = 1.5
PRESENT_MIN_FONT = 18       # px at 1280x720: the smallest chart text a room reads
_FIT = re.compile(r"bandwidth\('x'\) >= (\d+(?:\.\d+)?) && bandwidth\('y'\) >= (\d+(?:\.\d+)?)")
_THIN = re.compile(r"ceil\((\d+(?:\.\d+)?) / max\(")


def chart_style() -> str:
    """"present" while the page is shown in presenter mode, else "" (also outside a Streamlit run)."""
    try:
        # ui.charts stays importable and pure without a Streamlit session
        from .presenter import active
        return "present" if active() else ""
    except Exception:                   # no session, no query parameters: the normal style
        return ""


def chart_cache(max_entries: int | None = None, *, max_bytes: int = 8 * MB):
    """Decorator: ``cache_data`` for a function that returns chart specs. The style is part of the key: a spec
    drawn for a student's screen must not reach a presenter's projector (its text would stay small), nor the
    other way round."""
    return cache_data(max_entries, max_bytes=max_bytes, context=chart_style)


def _is_hole(value) -> bool:
    """A number placeholder of a fill argument (it must reach the skeleton unchanged)."""
    return value >= _INT_HOLE or _FLOAT_HOLE <= value < _FLOAT_HOLE + 1000


def _present_font(size):
    if isinstance(size, bool) or not isinstance(size, (int, float)) or _is_hole(size):
        if isinstance(size, dict) and isinstance(size.get("expr"), str):      # a size the browser computes
            return {"expr": f"max({PRESENT_MIN_FONT}, {PRESENT_SCALE:g} * ({size['expr']}))"}
        return size
    return max(PRESENT_MIN_FONT, round(size * PRESENT_SCALE, 1))


def _present_expr(text: str) -> str:
    number = PRESENT_MIN_FONT / NUMBER_FONT          # cell numbers grow from NUMBER_FONT to the minimum
    label = PRESENT_MIN_FONT / LABEL_FONT
    text = _FIT.sub(lambda m: f"bandwidth('x') >= {math.ceil(float(m[1]) * number)} && "
                              f"bandwidth('y') >= {math.ceil(float(m[2]) * number)}", text)
    return _THIN.sub(lambda m: f"ceil({math.ceil(float(m[1]) * label)} / max(", text)


def _present_walk(node):
    if isinstance(node, dict):
        out = {}
        for k, v in node.items():
            if k == "fontSize" or k.endswith("FontSize"):
                out[k] = _present_font(v)
            elif k in ("labelLimit", "limit") and isinstance(v, (int, float)) and not isinstance(v, bool) and v \
                    and not _is_hole(v):
                out[k] = round(v * PRESENT_SCALE)
            else:
                out[k] = _present_walk(v)
        return out
    if isinstance(node, list):
        return [_present_walk(v) for v in node]
    if isinstance(node, str) and ("bandwidth(" in node or "ceil(" in node):
        return _present_expr(node)
    return node


def styled(spec: dict, style: str) -> dict:
    """``spec`` in the given style ("" unchanged; "present": the presenter's large text, see above)."""
    if style != "present":
        return spec
    spec = _present_walk(spec)
    config = spec.setdefault("config", {})
    big, bigger = PRESENT_MIN_FONT, round(PRESENT_MIN_FONT * 1.1)
    for part, sizes in (("axis", {"labelFontSize": big, "titleFontSize": bigger}),
                        ("legend", {"labelFontSize": big, "titleFontSize": big}),
                        ("header", {"labelFontSize": big, "titleFontSize": bigger}),
                        ("title", {"fontSize": round(TITLE_FONT * PRESENT_SCALE), "subtitleFontSize": big}),
                        ("text", {"fontSize": big})):
        for name, size in sizes.items():
            config.setdefault(part, {}).setdefault(name, size)
    return spec


def chart_kind(*, fill: tuple[str, ...] = ()):
    """Decorator: an Altair builder ``build(data, **options) -> alt.Chart`` becomes a ``ChartKind``."""
    return lambda build: ChartKind(build, fill)


# =====================================================================================================
# The attention heatmap
# =====================================================================================================

def heatmap_height(n_rows: int) -> int:
    """The plot height of a heatmap of ``n_rows`` query rows (30 px cells up to 16 rows, then smaller)."""
    cell = 30 if n_rows <= MAX_NUMBERS else max(4, min(22, 560 // max(n_rows, 1)))
    return max(120, cell * n_rows)


# ----------------------------------------------------------------------------- what fits, decided in the browser
# A chart that stretches to its column (``fit_x``) does not know its width before the browser lays it out: 700 px
# on a projector, 250 px of plot on a phone. So the rules below are Vega expressions on the laid-out band scales
# (``bandwidth('x')`` is the cell width in px, ``bandwidth('y')`` its height), evaluated at every size:
#
# - numbers in cells (``number_fit``): drawn only when every cell is at least as wide as the widest number of the
#   format plus 4 px, and at least the font size + 2 px high; otherwise the number layer is fully transparent
#   (the tooltip and the CSV keep every value). The widest number's width is estimated per character:
#   digit 0.62 em, "." 0.32 em, "−" 0.84 em, "×" 0.84 em (measured in Chromium's sans-serif, rounded up).
# - dense axes (``thin_labels``): every k-th label is kept, k = ceil(spacing / band width), where the spacing a
#   label needs is the font size + 2 px (y axis; and an x axis rotated -45°: 1.42 x that across), or the longest
#   label's width + 4 px (an upright x axis of short labels); the band is the scale's step (range / count, bar
#   padding included). The others are written as "" (the tick stays; the tooltip names every band).
#   With 12 query rows of 30 px nothing is thinned; 32 columns on a 250 px phone plot keep every 2nd or 3rd.
# - long titles (``title_size``): the font shrinks from 16 px towards 10 px where the estimated title width
#   exceeds the chart's container, instead of Vega cutting the title with "…" (the spec's title stays the
#   string given). At 10 px a phone's 358 px hold about 65 Latin or 33 Chinese characters: longer titles
#   belong in a caption.

def text_px(text: str, font: float) -> float:
    """An upper estimate of ``text``'s width in px in a sans-serif font of ``font`` px."""
    em = {".": 0.32, ",": 0.32, "−": 0.84, "-": 0.4, "×": 0.84, " ": 0.3}
    return font * sum(em.get(c, 1.0 if ord(c) > 0x2e7f else 0.62) for c in text)


def number_width(lo: float, hi: float, digits: int = 2) -> int:
    """The cell width (px) the numbers of ``format(value, '.{digits}f')`` need for values in [lo, hi]."""
    widest = max((f"{v:.{digits}f}".replace("-", "−") for v in (lo, hi, 0.0)), key=len)
    return math.ceil(text_px(widest, NUMBER_FONT) + 4)


def number_fit(min_width: int, min_height: int) -> str:
    """Vega expression: 1 when the heatmap's cells hold a number of ``min_width`` x ``min_height`` px, else 0."""
    return f"bandwidth('x') >= {min_width} && bandwidth('y') >= {min_height} ? 1 : 0"


def thin_labels(channel: str, spacing: float) -> str:
    """Vega ``labelExpr``: keep every k-th label of a band axis so labels ``spacing`` px apart never overlap."""
    band = f"span(range('{channel}')) / max(length(domain('{channel}')), 1)"     # the band's step, padding included
    step = f"max(1, ceil({spacing:g} / max({band}, 0.01)))"
    return f"indexof(domain('{channel}'), datum.value) % {step} === 0 ? datum.label : ''"


def title_width(title: str | Sequence[str] | None) -> int:
    """An estimate of a chart title's width in px (Streamlit's theme: 16 px bold), a little high; a title given
    as lines (a list, as Vega takes it) is as wide as its widest line."""
    lines = [title or ""] if title is None or isinstance(title, str) else [str(x) for x in title]
    return max(1, math.ceil(max((text_px(x, TITLE_FONT) for x in lines), default=0)))


# the width a title has: the column the chart stretches to (``containerSize()``), else the plot and its axes/legend
TITLE_ROOM = "max(containerSize()[0], width + 110)"


def title_size(title_px: int) -> alt.ExprRef:
    """The title's font size: 16 px, smaller (down to 10 px) where the chart's container is narrower than the
    title (``TITLE_ROOM``)."""
    room = f"{TITLE_ROOM} - 50"                             # Vega cuts a title 40 px short of the container
    return alt.ExprRef(f"clamp({TITLE_FONT} * ({room}) / {title_px}, 10, {TITLE_FONT})")


# Vega's padding (5 px a side), 3 px more above a sized title: after a resize that grows the title's font, Vega keeps
# the room above it that the smaller font needed, and the title's top drew 1.2 px outside the chart
TITLE_PADDING = {"top": 8, "left": 5, "right": 5, "bottom": 5}


def sized_title(chart: alt.TopLevelMixin, title, title_px: int):
    """``chart`` titled ``title``, its font shrinking with the container (``title_size``), and the width where
    Vega cuts it with "…" (``limit``) following the container as well. Vega's own limit (the container less
    40 px) is set when the chart is first drawn and kept: a chart drawn in a narrow column and then widened (a
    phone turned upright, a window enlarged) kept the narrow limit while its font grew, and cut the title."""
    limit = alt.ExprRef(f"{TITLE_ROOM} - 40")
    return chart.properties(title=alt.TitleParams(title, limit=limit), padding=TITLE_PADDING).configure_title(
        fontSize=title_size(title_px))


def label_spacing(labels: Sequence[str], upright: bool) -> float:
    """The band width (px) below which the x labels must be thinned (see above)."""
    if upright:
        return math.ceil(max((text_px(str(x), LABEL_FONT) for x in labels), default=0) + 4)
    return math.ceil((LABEL_FONT + 2) * 1.42)


@chart_kind(fill=("domain", "threshold", "selected", "height", "width", "title", "outline", "title_px"))
def heatmap_chart(frame, *, kind: str, show_numbers: bool, fine: bool, many: bool, any_masked: bool, upright_x: bool,
                  overlap_x: bool, overlap_y: bool, selectable: bool, legend: bool, fit_x: bool, x_title: str,
                  y_title: str, value_title: str, domain, threshold: float, selected: int | None, height: int,
                  width: int | None = None, title: str | None = None, outline: int | None = None, number_min_width: int = 30, x_spacing: float = 17,
                  label_limit: int = 120, title_px: int = 1) -> alt.Chart:
    """The Altair heatmap of ``heatmap_frame``'s data: rect per cell, numbers where they fit, click = row;
    ``outline``: the query row (``query_pos``) framed in orange (a query shown in another chart).
    ``overlap_x`` / ``overlap_y``: thin the axis's labels to those that fit (``thin_labels``).
    The axes are in position order (``query_pos``, ``key_pos``), not given as label lists: the spec then stays the
    same for new labels (a new sentence, a new digit string), and Streamlit swaps the data instead of rebuilding
    the chart (far cheaper, docs/performance.md). Masked cells get their grey only when some cell is masked
    (``any_masked``): the condition is an expression Vega evaluates per cell."""
    rows_in_order = alt.EncodingSortField(field="query_pos", op="min")
    cols_in_order = alt.EncodingSortField(field="key_pos", op="min")
    if kind == "weights" and domain is None:      # 0 .. the largest value, found by Vega in the data
        scale = alt.Scale(domainMin=0, scheme=WEIGHT_SCHEME, clamp=True)
    elif kind == "weights":
        scale = alt.Scale(domain=domain, scheme=WEIGHT_SCHEME, clamp=True)
    else:
        scale = alt.Scale(domain=domain, scheme=SIGNED_SCHEME, domainMid=0)
    x_thin = {"labelExpr": thin_labels("x", x_spacing)} if overlap_x else {}
    y_thin = {"labelExpr": thin_labels("y", LABEL_FONT + 2)} if overlap_y else {}
    base = alt.Chart(frame).encode(
        # Vega's own labelOverlap would hide labels the page may quote: thinning keeps every k-th instead;
        # Streamlit's theme flushes the end labels inwards (labelFlush), which pushes them onto their neighbours
        x=alt.X("key:N", sort=cols_in_order, title=x_title,
                axis=alt.Axis(labelAngle=0 if upright_x else -45, labelOverlap=False, labelLimit=label_limit,
                              labelFlush=False, orient="top", **x_thin)),
        y=alt.Y("query:N", sort=rows_in_order, title=y_title,
                axis=alt.Axis(labelOverlap=False, labelLimit=label_limit, labelFlush=False, **y_thin)),
    )
    colour = alt.Color("value:Q", scale=scale, title=value_title,
                       # the colour bar fits beside a short heatmap (fit-x does not grow below it)
                       legend=alt.Legend(gradientLength=alt.ExprRef("clamp(height - 30, 40, 200)")))
    if any_masked:
        colour = alt.when(alt.datum.masked).then(alt.value(MASKED_GREY)).otherwise(colour)
    tooltip = [alt.Tooltip("query:N", title=y_title), alt.Tooltip("key:N", title=x_title),
               alt.Tooltip("exact:N", title=value_title)]
    # ``many`` cells (> MAX_ARIA_CELLS): no ARIA label per cell (Vega writes one per SVG element, ~20 % of a large
    # heatmap's redraw); the tooltip and the CSV keep every value
    rect = base.mark_rect(stroke="white", strokeWidth=0.5 if fine else 0, **({"aria": False} if many else {})
                          ).encode(color=colour, tooltip=tooltip)
    if selectable:
        pick = alt.selection_point(name=ROW_SELECTION, fields=["query_pos"], on="click",
                                   value=None if selected is None else [{"query_pos": selected}])
        rect = rect.add_params(pick).encode(opacity=alt.when(pick).then(alt.value(1.0)).otherwise(alt.value(0.35)))
    layers = [rect]
    if show_numbers:
        if kind == "weights":
            light_text = alt.datum.value < 0.55          # dark end of viridis
        else:
            light_text = abs(alt.datum.value) > threshold  # dark ends of blue/orange
        text = base.mark_text(fontSize=NUMBER_FONT,
                              opacity=alt.ExprRef(number_fit(number_min_width, NUMBER_FONT + 2))).encode(
            text=alt.Text("cell_text:N"),
            color=(alt.when(alt.datum.masked).then(alt.value("#555555"))
                   .when(light_text).then(alt.value("white")).otherwise(alt.value("black"))),
            tooltip=tooltip,
        ).transform_calculate(cell_text="datum.masked ? '×' : format(datum.value, '.2f')")
        layers.append(text)
    elif any_masked and fine:
        layers.append(base.transform_filter(alt.datum.masked).mark_text(
            text="×", color="#666666", fontSize=10, opacity=alt.ExprRef(number_fit(12, 12))))
    if outline is not None:
        layers.append(alt.Chart(frame).transform_filter(alt.datum.query_pos == outline)
                      .transform_aggregate(groupby=["query", "query_pos"])
                      .mark_rect(fill=None, stroke=OUTLINE_ORANGE, strokeWidth=2.5)
                      .encode(y=alt.Y("query:N", sort=rows_in_order)))
    chart = alt.layer(*layers).properties(height=height)
    if width is not None:
        chart = chart.properties(width=width)
    if not legend:
        chart = chart.configure_legend(disable=True)
    if title:
        chart = sized_title(chart, title, title_px)
    if fit_x:
        chart = chart.properties(autosize=FIT_X)
    return chart


def heatmap(matrix, row_labels: Sequence[str], col_labels: Sequence[str] | None = None, *,
            kind: str = "weights", masked=None, title: str | None = None,
            x_title: str = "key", y_title: str = "query", value_title: str = "weight",
            show_numbers: bool | None = None, selected_row: int | None = None,
            selectable: bool = True, height: int | None = None,
            domain: tuple[float, float] | str | None = None, width: int | None = None,
            legend: bool = True, fit_x: bool = True, outline_row: int | None = None) -> Spec:
    """The one attention heatmap, as a finished spec: queries as rows, keys as columns.

    ``height`` is the plot's own height (the rows): with ``fit_x`` (default) the chart stretches to its
    column's width and grows below for the axis labels and the legend.
    kind="weights": fixed 0..1 colour domain (viridis), so two heatmaps compare by colour;
    ``domain="data"``: 0 .. the largest value, computed by Vega from the data, so the spec does not change with
    the values and a new sample swaps the data instead of rebuilding the chart (a domain in the spec would).
    kind="scores": diverging scheme centred on 0 for raw / scaled scores.
    Masked cells are drawn grey with a "×", never just dark. Clicking a cell selects its query row
    (selection named ``row``, field ``query_pos``). ``outline_row``: a query row framed in orange.
    Larger than 128 per axis: averaged tiles.
    Numbers in cells (``show_numbers``; default: up to 16 x 16) are drawn only where the laid-out cells hold
    them, and dense axes keep every k-th label (``number_fit``, ``thin_labels``: decided in the browser at
    the rendered size, so the same spec is legible at 1280 px and at 390 px).
    """
    col_labels = row_labels if col_labels is None else col_labels
    data = _heatmap_data(matrix, row_labels, col_labels, masked)
    n_rows, n_cols = len(data.rows), len(data.cols)
    if show_numbers is None:
        show_numbers = n_rows <= MAX_NUMBERS and n_cols <= MAX_NUMBERS
    from_data = domain == "data"
    if from_data and kind != "weights":
        raise ValueError('domain="data" is for kind="weights"')
    lo, hi = (0.0, data.bound) if from_data else \
        domain or ((0.0, 1.0) if kind == "weights" else (-data.bound, data.bound))
    upright = all(len(str(c)) <= 2 for c in data.cols)
    # the numbers drawn are the values (weights 0..1 whatever the colour domain; scores up to the bound)
    v_lo, v_hi = (0.0, 1.0) if kind == "weights" else (-data.bound, data.bound)
    return heatmap_chart(
        data.frame, kind=kind, show_numbers=bool(show_numbers), fine=n_rows <= 48,
        many=n_rows * n_cols > MAX_ARIA_CELLS, any_masked=data.any_masked,
        upright_x=upright, overlap_x=n_cols > 8, overlap_y=n_rows > 16,
        selectable=selectable, legend=bool(legend), fit_x=bool(fit_x), x_title=x_title, y_title=y_title,
        value_title=value_title, domain=None if from_data else [float(lo), float(hi)],
        threshold=0.6 * float(hi) if show_numbers else 0.6,
        selected=None if selected_row is None else int(selected_row) // data.factor * data.factor,
        height=int(height or heatmap_height(n_rows)), width=width, title=title,
        outline=None if outline_row is None else int(outline_row) // data.factor * data.factor,
        number_min_width=number_width(v_lo, v_hi), x_spacing=label_spacing(data.cols, upright),
        title_px=title_width(title))


def attention_heatmap(weights, tokens: Sequence[str], key_tokens: Sequence[str] | None = None, *,
                      title: str | None = None, **options) -> Spec:
    """``heatmap`` with the page's language filling the common titles (key, query, weight / score)."""
    from .i18n import t  # ui.charts stays importable without a Streamlit session (t falls back)

    value = "common.score" if options.get("kind") == "scores" else "common.weight"
    options.setdefault("x_title", t("common.key"))
    options.setdefault("y_title", t("common.query"))
    options.setdefault("value_title", t(value))
    return heatmap(weights, tokens, key_tokens, title=title, **options)


# =====================================================================================================
# Bars: one row of weights (or any vector)
# =====================================================================================================

def bars_frame(values, labels: Sequence[str], highlight: int | None = None) -> pd.DataFrame:
    vals = as_numpy(np.asarray(values, dtype=np.float64).reshape(1, -1))[0]
    return pd.DataFrame({"pos": np.arange(len(vals)), "label": unique_labels(list(labels)),
                         "value": vals, "exact": np.char.mod("%.8g", vals),
                         "highlight": np.arange(len(vals)) == (-1 if highlight is None else highlight)})


@chart_kind(fill=("order", "domain", "height", "title", "title_px"))
def bars_chart(frame, *, value_title: str, label_title: str, upright: bool, fit_x: bool, order=(),
               domain=None, height: int = 220, title: str | None = None, x_spacing: float = 17,
               label_limit: int = 120, title_px: int = 1) -> alt.Chart:
    """Labelled bars; x labels thinned to those that fit (``thin_labels``), never hidden by Vega's overlap."""
    y = alt.Y("value:Q", title=value_title, scale=alt.Scale(domain=domain) if domain else alt.Undefined)
    chart = alt.Chart(frame).mark_bar().encode(
        x=alt.X("label:N", sort=order, title=label_title,
                axis=alt.Axis(labelAngle=0 if upright else -45, labelOverlap=False, labelFlush=False,
                              labelLimit=label_limit, labelExpr=thin_labels("x", x_spacing))),
        y=y,
        color=alt.when(alt.datum.highlight).then(alt.value("#e66101")).otherwise(alt.value("#3b528b")),
        tooltip=[alt.Tooltip("label:N", title=label_title), alt.Tooltip("exact:N", title=value_title)],
    ).properties(height=height)
    if fit_x:
        chart = chart.properties(autosize=FIT_X)
    return sized_title(chart, title, title_px) if title else chart


def bars(values, labels: Sequence[str], *, value_title: str = "weight", label_title: str = "key",
         domain: tuple[float, float] | None = (0.0, 1.0), highlight: int | None = None,
         height: int = 220, title: str | None = None, fit_x: bool = False) -> Spec:
    """One row of weights (or any vector) as labelled bars, exact value in the tooltip."""
    frame = bars_frame(values, labels, highlight)
    upright = all(len(str(label)) <= 2 for label in frame["label"])
    return bars_chart(frame, value_title=value_title, label_title=label_title, upright=upright, fit_x=fit_x,
                      x_spacing=label_spacing(list(frame["label"]), upright),
                      order=list(frame["label"]), domain=None if domain is None else [float(d) for d in domain],
                      height=height, title=title, title_px=title_width(title))


def matrix_csv(matrix, row_labels: Sequence[str], col_labels: Sequence[str] | None = None) -> bytes:
    """The full matrix as CSV (UTF-8 with BOM so spreadsheet programs read Chinese labels)."""
    col_labels = row_labels if col_labels is None else col_labels
    frame = pd.DataFrame(as_numpy(matrix), index=unique_labels(list(row_labels)),
                         columns=unique_labels(list(col_labels)))
    return frame.to_csv(float_format="%.8g").encode("utf-8-sig")

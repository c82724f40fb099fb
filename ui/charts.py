"""The Altair chart builders every page uses (tensors in, ``alt.Chart`` out).

Pure functions of their inputs: no Streamlit calls here, so the tests can decode
the Vega-Lite spec and data of each chart directly.
"""
from __future__ import annotations

import copy
import functools
import json
import math
import re
from collections import Counter
from typing import NamedTuple, Sequence

import altair as alt
import numpy as np
import pandas as pd

# colour-blind-safe schemes: perceptually uniform sequential, and a blue/orange diverging one
WEIGHT_SCHEME = "viridis"
SIGNED_SCHEME = "blueorange"
MASKED_GREY = "#d4d4d4"
MAX_NUMBERS = 16          # numbers printed in cells up to 16 x 16
MAX_CELLS_PER_AXIS = 128  # larger matrices are shown as averaged tiles (the CSV keeps every value)
ROW_SELECTION = "row"     # name of the click selection; st.altair_chart returns it
FIT_X = alt.AutoSizeParams(type="fit-x", contains="padding")   # stretch to the column, keep the height


def to_spec(chart) -> dict | None:
    """A chart as a Vega-Lite dict, without re-validating it against the schema.

    Altair validates on every ``to_dict()``, which costs as much as building the chart; the
    builders here are validated once by the tests instead. The chart's top-level DataFrame
    becomes the named dataset "data" (Streamlit ships it to the browser as Arrow), so no
    global Altair setting is touched (sessions run in threads). Returns None for a chart
    without one top-level DataFrame: draw that one with st.altair_chart. A dict passes
    through unchanged, so a page may cache specs with ``st.cache_data``.
    """
    if isinstance(chart, dict):
        return chart
    frame = getattr(chart, "data", None)
    if not isinstance(frame, pd.DataFrame):
        return None
    bare = chart.copy(deep=False)
    bare.data = alt.NamedData(name="data")
    spec = bare.to_dict(validate=False)
    view = spec.get("config", {}).get("view", {})
    for key in ("continuousWidth", "continuousHeight"):  # Altair's default theme; Streamlit drops it too
        view.pop(key, None)
    spec["datasets"] = {"data": frame}
    return spec


def as_numpy(matrix) -> np.ndarray:
    """Tensor / array / nested list -> float64 2-D array (detached, on the CPU)."""
    if hasattr(matrix, "detach"):
        matrix = matrix.detach().cpu().double().numpy()
    arr = np.asarray(matrix, dtype=np.float64)
    if arr.ndim != 2:
        raise ValueError(f"a heatmap needs a 2-D matrix, got shape {arr.shape}")
    return arr


def unique_labels(tokens: Sequence[str]) -> list[str]:
    """Axis labels that keep repeated tokens apart: "the·0", "cat", "the·4"."""
    counts = Counter(tokens)
    return [f"{tok}·{i}" if counts[tok] > 1 else str(tok) for i, tok in enumerate(tokens)]


def pool_factor(n: int, limit: int = MAX_CELLS_PER_AXIS) -> int:
    return max(1, math.ceil(n / limit))


def _pool(arr: np.ndarray, fr: int, fc: int, reduce) -> np.ndarray:
    n_q, n_k = arr.shape
    out = np.full((math.ceil(n_q / fr), math.ceil(n_k / fc)), np.nan)
    for a in range(out.shape[0]):          # at most 128 x 128 tiles: cheap
        for b in range(out.shape[1]):
            tile = arr[a * fr:(a + 1) * fr, b * fc:(b + 1) * fc]
            out[a, b] = reduce(tile)
    return out


def _range_labels(labels: Sequence[str], f: int) -> list[str]:
    n = len(labels)
    return [f"{i}–{min(i + f, n) - 1}" if f > 1 else labels[i] for i in range(0, n, f)]


def heatmap_frame(matrix, row_labels: Sequence[str], col_labels: Sequence[str],
                  masked=None) -> tuple[pd.DataFrame, int]:
    """Long-form data of a heatmap, one row per cell, and the pooling factor used (1 = none).

    Columns: query_pos, key_pos (integers), query, key (unique axis labels), value (float,
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
            arr = _pool(visible, fr, fc, lambda tile: np.nan if np.isnan(tile).all() else np.nanmean(tile))
        hidden = np.isnan(arr)
        rows, cols = _range_labels(row_labels, fr), _range_labels(col_labels, fc)
    qi, ki = np.meshgrid(np.arange(arr.shape[0]) * fr, np.arange(arr.shape[1]) * fc, indexing="ij")
    finite = np.isfinite(arr)
    values = np.where(finite, arr, np.nan)  # masked weights stay 0; -inf scores become null
    exact = np.where(finite, np.char.mod("%.8g", np.where(finite, arr, 0.0)),
                     np.where(np.isneginf(arr), "−∞", "—"))
    frame = pd.DataFrame({
        "query_pos": qi.ravel(),
        "key_pos": ki.ravel(),
        "query": np.repeat(rows, arr.shape[1]),
        "key": np.tile(cols, arr.shape[0]),
        "value": values.ravel(),
        "exact": exact.ravel(),
        "masked": hidden.ravel(),
    })
    magnitude = np.abs(values[finite]) if finite.any() else np.zeros(0)
    bound = float(magnitude.max()) if magnitude.size and magnitude.max() > 0 else 1.0
    return _HeatmapData(frame, max(fr, fc), list(rows), list(cols), bool(hidden.any()), bound)


class HeatmapLayout(NamedTuple):
    """Everything the spec of a heatmap depends on besides its data (see ``heatmap_spec``)."""

    kind: str
    domain: tuple             # colour domain (lo, hi)
    threshold: float          # scores: |value| above it gets white numbers
    show_numbers: bool
    fine: bool                # at most 48 rows: cell borders, "×" on masked cells
    any_masked: bool
    upright_x: bool           # every key label is at most 2 characters (digits, CJK): no need to slant them
    overlap_x: bool           # let Vega drop labels (more than 40 per axis)
    overlap_y: bool
    selectable: bool
    selected: int | None      # selected query_pos
    height: int
    width: int | None         # plotting width in px (None: as wide as the container allows)
    legend: bool
    fit_x: bool               # autosize fit-x: the chart fills its column, labels included
    title: str | None
    x_title: str
    y_title: str
    value_title: str
    row_order: tuple
    col_order: tuple


def _heatmap_layout(data: _HeatmapData, *, kind: str, title, x_title, y_title, value_title,
                    show_numbers, selected_row, selectable, height, domain, width=None,
                    legend=True, fit_x=False) -> HeatmapLayout:
    n_rows, n_cols = len(data.rows), len(data.cols)
    if show_numbers is None:
        show_numbers = n_rows <= MAX_NUMBERS and n_cols <= MAX_NUMBERS
    if kind == "weights":
        lo, hi = domain or (0.0, 1.0)
    else:
        lo, hi = domain or (-data.bound, data.bound)
    cell = 30 if n_rows <= MAX_NUMBERS else max(4, min(22, 560 // max(n_rows, 1)))
    return HeatmapLayout(
        kind, (lo, hi), 0.6 * hi, bool(show_numbers), n_rows <= 48, data.any_masked,
        all(len(str(c)) <= 2 for c in data.cols), n_cols > 40, n_rows > 40, selectable,
        None if selected_row is None else int(selected_row) // data.factor * data.factor,
        height or max(120, cell * n_rows), width, bool(legend), bool(fit_x), title, x_title, y_title, value_title,
        tuple(data.rows), tuple(data.cols))


def _heatmap_chart(frame: pd.DataFrame, L: HeatmapLayout) -> alt.Chart:
    if L.kind == "weights":
        scale = alt.Scale(domain=list(L.domain), scheme=WEIGHT_SCHEME, clamp=True)
    else:
        scale = alt.Scale(domain=list(L.domain), scheme=SIGNED_SCHEME, domainMid=0)
    base = alt.Chart(frame).encode(
        # every token label stays up to 40 per axis (Vega would drop every other one when narrow)
        x=alt.X("key:N", sort=list(L.col_order), title=L.x_title,
                axis=alt.Axis(labelAngle=0 if L.upright_x else -45, labelOverlap=L.overlap_x, labelLimit=90,
                              orient="top")),
        y=alt.Y("query:N", sort=list(L.row_order), title=L.y_title,
                axis=alt.Axis(labelOverlap=L.overlap_y, labelLimit=90)),
    )
    colour = (alt.when(alt.datum.masked).then(alt.value(MASKED_GREY))
              .otherwise(alt.Color("value:Q", scale=scale, title=L.value_title)))
    tooltip = [alt.Tooltip("query:N", title=L.y_title), alt.Tooltip("key:N", title=L.x_title),
               alt.Tooltip("exact:N", title=L.value_title)]
    rect = base.mark_rect(stroke="white", strokeWidth=0.5 if L.fine else 0).encode(
        color=colour, tooltip=tooltip)
    if L.selectable:
        pick = alt.selection_point(name=ROW_SELECTION, fields=["query_pos"], on="click",
                                   value=None if L.selected is None else [{"query_pos": L.selected}])
        rect = rect.add_params(pick).encode(
            opacity=alt.when(pick).then(alt.value(1.0)).otherwise(alt.value(0.35)))
    layers = [rect]
    if L.show_numbers:
        if L.kind == "weights":
            light_text = alt.datum.value < 0.55          # dark end of viridis
        else:
            light_text = abs(alt.datum.value) > L.threshold  # dark ends of blue/orange
        text = base.mark_text(fontSize=11).encode(
            text=alt.Text("cell_text:N"),
            color=(alt.when(alt.datum.masked).then(alt.value("#555555"))
                   .when(light_text).then(alt.value("white")).otherwise(alt.value("black"))),
            tooltip=tooltip,
        ).transform_calculate(
            cell_text="datum.masked ? '×' : format(datum.value, '.2f')")
        layers.append(text)
    elif L.any_masked and L.fine:
        layers.append(base.transform_filter(alt.datum.masked).mark_text(text="×", color="#666666",
                                                                         fontSize=10))
    chart = alt.layer(*layers).properties(height=L.height)
    if L.width is not None:
        chart = chart.properties(width=L.width)
    if not L.legend:
        chart = chart.configure_legend(disable=True)
    if L.title:
        chart = chart.properties(title=L.title)
    if L.fit_x:
        chart = chart.properties(autosize=FIT_X)
    return chart


def heatmap(matrix, row_labels: Sequence[str], col_labels: Sequence[str] | None = None, *,
            kind: str = "weights", masked=None, title: str | None = None,
            x_title: str = "key", y_title: str = "query", value_title: str = "weight",
            show_numbers: bool | None = None, selected_row: int | None = None,
            selectable: bool = True, height: int | None = None,
            domain: tuple[float, float] | None = None, width: int | None = None,
            legend: bool = True, fit_x: bool = True) -> alt.Chart:
    """The one attention heatmap: queries as rows, keys as columns.

    ``height`` is the plot's own height (the rows): with ``fit_x`` (default) the chart stretches to its
    column's width and grows below for the axis labels and the legend; with fit_x=False Streamlit's
    "fit" squeezes all of them into ``height``, which can cut a legend.
    kind="weights": fixed 0..1 colour domain (viridis), so two heatmaps compare by colour.
    kind="scores": diverging scheme centred on 0 for raw / scaled scores.
    Masked cells are drawn grey with a "×", never just dark. Clicking a cell selects its
    query row (selection named ``row``, field ``query_pos``). ``heatmap_spec`` gives the same
    chart as a finished spec, about 40 times faster.
    """
    col_labels = row_labels if col_labels is None else col_labels
    data = _heatmap_data(matrix, row_labels, col_labels, masked)
    return _heatmap_chart(data.frame, _heatmap_layout(
        data, kind=kind, title=title, x_title=x_title, y_title=y_title, value_title=value_title,
        show_numbers=show_numbers, selected_row=selected_row, selectable=selectable, height=height,
        domain=domain, width=width, legend=legend, fit_x=fit_x))


# Placeholders of a heatmap skeleton; each is replaced by the real value in one pass over the JSON
# text (so a token that happens to spell a placeholder is never replaced again).
_SENTINELS = {"lo": 123456.5, "hi": 654321.5, "threshold": 777777.25, "selected": 987650123,
              "height": 987654321, "width": 987654322, "title": "@@title@@", "rows": "@@rows@@", "cols": "@@cols@@"}


@functools.lru_cache(maxsize=128)
def _heatmap_skeleton(L: HeatmapLayout) -> tuple[str, re.Pattern]:
    spec = to_spec(_heatmap_chart(_EMPTY_FRAME, L))
    del spec["datasets"]
    text = json.dumps(spec, ensure_ascii=False)
    pieces = {json.dumps(v) for k, v in _SENTINELS.items() if k not in ("rows", "cols")}
    pieces |= {json.dumps([_SENTINELS["rows"]]), json.dumps([_SENTINELS["cols"]])}
    present = [p for p in pieces if p in text]
    return text, re.compile("|".join(re.escape(p) for p in sorted(present, key=len, reverse=True)))


_EMPTY_FRAME = pd.DataFrame({"query_pos": [], "key_pos": [], "query": [], "key": [], "value": [],
                             "exact": [], "masked": []})


def heatmap_spec(matrix, row_labels: Sequence[str], col_labels: Sequence[str] | None = None, *,
                 kind: str = "weights", masked=None, title: str | None = None,
                 x_title: str = "key", y_title: str = "query", value_title: str = "weight",
                 show_numbers: bool | None = None, selected_row: int | None = None,
                 selectable: bool = True, height: int | None = None,
                 domain: tuple[float, float] | None = None, width: int | None = None,
                 legend: bool = True, fit_x: bool = True) -> dict:
    """``to_spec(heatmap(...))`` with the same arguments, without building an Altair chart.

    Building the chart costs 30-80 ms (Altair copies and validates every piece); here the spec
    of each *kind* of heatmap (options, not data) is built once with placeholders and kept as
    JSON text, and a new matrix only fills in its data, axis orders, colour domain, selection,
    height and title (about 1 ms). A test checks the result equals ``to_spec(heatmap(...))``.
    """
    col_labels = row_labels if col_labels is None else col_labels
    data = _heatmap_data(matrix, row_labels, col_labels, masked)
    frame = data.frame
    L = _heatmap_layout(
        data, kind=kind, title=title, x_title=x_title, y_title=y_title, value_title=value_title,
        show_numbers=show_numbers, selected_row=selected_row, selectable=selectable, height=height,
        domain=domain, width=width, legend=legend, fit_x=fit_x)
    s = _SENTINELS
    text, pattern = _heatmap_skeleton(L._replace(
        domain=(s["lo"], s["hi"]), threshold=s["threshold"],
        selected=None if L.selected is None else s["selected"], height=s["height"],
        width=None if L.width is None else s["width"],
        title=s["title"] if L.title else None, row_order=(s["rows"],), col_order=(s["cols"],)))
    values = {json.dumps(s["lo"]): _json_number(L.domain[0]), json.dumps(s["hi"]): _json_number(L.domain[1]),
              json.dumps(s["threshold"]): _json_number(L.threshold), json.dumps(s["selected"]): str(L.selected),
              json.dumps(s["height"]): str(int(L.height)), json.dumps(s["width"]): str(L.width),
              json.dumps(s["title"]): json.dumps(L.title, ensure_ascii=False),
              json.dumps([s["rows"]]): json.dumps(list(L.row_order), ensure_ascii=False),
              json.dumps([s["cols"]]): json.dumps(list(L.col_order), ensure_ascii=False)}
    spec = json.loads(pattern.sub(lambda m: values[m.group(0)], text))
    spec["datasets"] = {"data": frame}
    return spec


def _json_number(x) -> str:
    x = x.item() if hasattr(x, "item") else x
    return json.dumps(x if isinstance(x, int) and not isinstance(x, bool) else float(x))


def _bars_frame(values, labels: Sequence[str], highlight: int | None) -> pd.DataFrame:
    vals = as_numpy(np.asarray(values, dtype=np.float64).reshape(1, -1))[0]
    return pd.DataFrame({"pos": np.arange(len(vals)), "label": unique_labels(list(labels)),
                         "value": vals, "exact": np.char.mod("%.8g", vals),
                         "highlight": np.arange(len(vals)) == (-1 if highlight is None else highlight)})


def bars(values, labels: Sequence[str], *, value_title: str = "weight", label_title: str = "key",
         domain: tuple[float, float] | None = (0.0, 1.0), highlight: int | None = None,
         height: int = 220, title: str | None = None, fit_x: bool = False) -> alt.Chart:
    """One row of weights (or any vector) as labelled bars, exact value in the tooltip."""
    frame = _bars_frame(values, labels, highlight)
    upright = all(len(str(label)) <= 2 for label in frame["label"])     # digits, CJK characters: no slant
    y = alt.Y("value:Q", title=value_title,
              scale=alt.Scale(domain=list(domain)) if domain else alt.Undefined)
    chart = alt.Chart(frame).mark_bar().encode(
        x=alt.X("label:N", sort=list(frame["label"]), title=label_title,
                axis=alt.Axis(labelAngle=0 if upright else -45, labelOverlap=True)),
        y=y,
        color=alt.when(alt.datum.highlight).then(alt.value("#e66101")).otherwise(alt.value("#3b528b")),
        tooltip=[alt.Tooltip("label:N", title=label_title), alt.Tooltip("exact:N", title=value_title)],
    ).properties(height=height)
    if fit_x:
        chart = chart.properties(autosize=FIT_X)
    return chart.properties(title=title) if title else chart


def matrix_csv(matrix, row_labels: Sequence[str], col_labels: Sequence[str] | None = None) -> bytes:
    """The full matrix as CSV (UTF-8 with BOM so spreadsheet programs read Chinese labels)."""
    col_labels = row_labels if col_labels is None else col_labels
    frame = pd.DataFrame(as_numpy(matrix), index=unique_labels(list(row_labels)),
                         columns=unique_labels(list(col_labels)))
    return frame.to_csv(float_format="%.8g").encode("utf-8-sig")


_SKELETONS: dict[tuple, dict] = {}     # chart class -> finished spec (bounded: cleared past 256 classes)


def class_skeleton(cls: tuple, build) -> dict:
    """The finished spec of the first chart built for ``cls`` (``to_spec(build())``), shared afterwards.

    ``cls`` names everything a chart's spec depends on besides what ``respec`` replaces (options, titles,
    size class): every chart of the class is the skeleton with new data. For builders whose arguments are
    arrays, where a skeleton cannot be built from placeholders cheaply."""
    spec = _SKELETONS.get(cls)
    if spec is None:
        if len(_SKELETONS) > 256:
            _SKELETONS.clear()
        spec = _SKELETONS[cls] = to_spec(build())
    return spec


def respec(skeleton: dict, frame: pd.DataFrame, *, sort: dict | None = None, domain: dict | None = None,
           selection: dict | None = None, titles: dict | None = None, **top) -> dict:
    """The finished spec of a chart (``to_spec``) with new data: the spec of the same builder called on
    other data, when its options are the same. Building an Altair chart costs 10-80 ms; this about 1 ms.

    ``sort``: field -> new explicit order (e.g. the tokens of a new sentence) of every encoding of that
    field that has one. ``domain``: channel ("x", "color") or (channel, field) -> new scale domain.
    ``selection``: parameter name -> its new initial value. ``titles``: channel -> new axis / legend title
    (where the encoding has one). ``top``: top-level properties (title,
    width, height; None removes one). Each page's use is checked by a test against a freshly built spec.
    """
    sort, domain, titles = sort or {}, domain or {}, titles or {}
    out = {k: v for k, v in skeleton.items() if k != "datasets"}   # top-level changes only: a shallow copy
    if sort or domain or selection or titles:
        out = copy.deepcopy(out)

    def walk(node) -> None:
        if isinstance(node, dict):
            enc = node.get("encoding")
            if isinstance(enc, dict):
                for channel, e in enc.items():
                    if not isinstance(e, dict):
                        continue
                    field = e.get("field")
                    if field in sort and isinstance(e.get("sort"), list):
                        e["sort"] = list(sort[field])
                    new = domain.get((channel, field), domain.get(channel))
                    if new is not None and isinstance(e.get("scale"), dict) and "domain" in e["scale"]:
                        e["scale"]["domain"] = list(new)
                    if channel in titles and "title" in e:
                        e["title"] = titles[channel]
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    if sort or domain or titles:
        walk(out)
    for param in out.get("params", []):
        if selection and param.get("name") in selection:
            param["value"] = selection[param["name"]]
    for key, value in top.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = value
    out["datasets"] = {"data": frame}
    return out


@functools.lru_cache(maxsize=64)
def _bars_skeleton(value_title: str, label_title: str, has_domain: bool, height: int, fit_x: bool,
                   upright: bool) -> dict:
    return to_spec(bars([0.0], ["·" if upright else "···"], value_title=value_title, label_title=label_title,
                        domain=(0.0, 1.0) if has_domain else None, height=height, fit_x=fit_x))


def bars_spec(values, labels: Sequence[str], *, value_title: str = "weight", label_title: str = "key",
              domain: tuple[float, float] | None = (0.0, 1.0), highlight: int | None = None,
              height: int = 220, title: str | None = None, fit_x: bool = False) -> dict:
    """``to_spec(bars(...))`` with the same arguments, from a cached skeleton (``respec``): ~1 ms."""
    frame = _bars_frame(values, labels, highlight)
    upright = all(len(str(label)) <= 2 for label in frame["label"])
    skeleton = _bars_skeleton(value_title, label_title, domain is not None, height, fit_x, upright)
    return respec(skeleton, frame, sort={"label": list(frame["label"])},
                  domain={"y": list(domain)} if domain is not None else None, title=title or None)

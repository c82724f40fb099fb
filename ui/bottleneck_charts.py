"""Charts of the bottleneck page (numbers in, ``alt.Chart`` out, no Streamlit calls).

Every title and label is passed in already translated. The alignment heatmap comes from
``ui.charts.heatmap``; here are the recorded accuracy curves, the answers marked character by
character, accuracy by output position, and the Seq2Seq diagram of what the decoder can see.
"""
from __future__ import annotations

from collections.abc import Sequence

import altair as alt
import numpy as np
import pandas as pd

from .charts import FIT_X, Spec, chart_kind

ORANGE, BLUE, GREY = "#e66101", "#3b528b", "#9e9e9e"
RIGHT, WRONG, REFERENCE = "#1b9e77", "#d95f02", "#e8e8e8"   # teal / orange: apart for colour-blind eyes
MODELS = ("attention", "no_attention")
# Streamlit's default for a stretched chart is autosize "fit": the height then includes axes and legends
# and squeezes the plot; with fit-x the width still fills the column and ``height`` is the plot's own.
TICKS_1_5 = "datum.value == 1 || datum.value % 5 == 0 ? datum.label : ''"   # axis labels 1, 5, 10, ...
COLOURS = {"attention": ORANGE, "no_attention": BLUE}


def _category(values) -> pd.Categorical:
    """Strings as a categorical column (sent as a small dictionary plus codes), built without pandas' slower
    factorizing: the distinct values in order of first appearance."""
    values = list(values)
    index = {v: i for i, v in enumerate(dict.fromkeys(values))}
    return pd.Categorical.from_codes(np.fromiter((index[v] for v in values), dtype=np.int8, count=len(values)),
                                     categories=list(index))


def curves_frame(curves: dict, metric: str, names: dict[str, str]) -> pd.DataFrame:
    """Long form of ``curves["reverse"]``: one row per (model, length) with the recorded accuracy.

    ``names`` maps "attention" / "no_attention" to the legend labels."""
    rev = curves["reverse"]
    rows = []
    for model in MODELS:
        if model not in rev:
            continue
        for length, value in zip(rev["lengths"], rev[model][metric]):
            rows.append({"model": model, "name": names[model], "length": int(length), "value": float(value)})
    frame = pd.DataFrame(rows, columns=["model", "name", "length", "value"])
    frame["exact"] = np.char.mod("%.4g", frame["value"].to_numpy(dtype=np.float64))
    return frame


@chart_kind(fill=("length_domain",))
def curves_chart(frame, *, legend: list[str], colours: list[str], title: str, x_title: str, y_title: str,
                 length_domain=(), height: int = 220) -> alt.LayerChart:
    """Accuracy against input length, one line per model (the recorded evaluation of the shipped models)."""
    colour = alt.Color("name:N", title=None, sort=legend, scale=alt.Scale(domain=legend, range=colours),
                       legend=alt.Legend(orient="bottom"))
    x = alt.X("length:Q", title=x_title, scale=alt.Scale(domain=length_domain, nice=False))
    tooltip = [alt.Tooltip("name:N", title=" "), alt.Tooltip("length:Q", title=x_title),
               alt.Tooltip("exact:N", title=y_title)]
    lines = alt.Chart().mark_line(point=True).encode(
        x=x, y=alt.Y("value:Q", title=y_title, scale=alt.Scale(domain=[0, 1])), color=colour, tooltip=tooltip)
    return alt.layer(lines, data=frame).properties(title=title, height=height, autosize=FIT_X)


def _legend(present, names: dict[str, str]) -> dict:
    """The legend labels and colours of the models in ``present``, in MODELS order."""
    shown = [m for m in MODELS if m in present]
    return {"legend": [names[m] for m in shown], "colours": [COLOURS[m] for m in shown]}


def accuracy_curves(curves: dict, metric: str, *, names: dict[str, str], title: str, x_title: str,
                    y_title: str) -> Spec:
    """The recorded accuracy curves of ``curves["reverse"]`` for ``metric`` ("exact" or "char")."""
    frame = curves_frame(curves, metric, names)
    return curves_chart(frame, **_legend(set(frame["model"]), names), title=title, x_title=x_title,
                        y_title=y_title, length_domain=[int(frame["length"].min()), int(frame["length"].max())])


def tapes_frame(rows: Sequence[tuple[str, str, Sequence[bool | None] | None]],
                status_names: dict[str, str] | None = None) -> pd.DataFrame:
    """One row per character of each line: (line label, text, marks); marks None = the reference line.
    ``pos`` counts from 1.

    ``status``: "reference", "right", "wrong" (a wrong character) or "missing" (the answer stopped
    early; the cell shows "·"); ``ink``: the character's colour (black on the grey reference, else white).
    Small types (int8 / int16, categorical strings): less to send and to decode on every redraw."""
    out = []
    for r, (label, text, marks) in enumerate(rows):
        n = len(text) if marks is None else len(marks)
        for i in range(n):
            ch = text[i] if i < len(text) else "·"
            if marks is None:
                status = "reference"
            elif i >= len(text):
                status = "missing"
            else:
                status = "right" if marks[i] else "wrong"
            out.append((label, r, i + 1, ch, status))
    cols = list(zip(*out)) or [(), (), (), (), ()]
    frame = pd.DataFrame({"line": _category(cols[0]), "line_pos": np.array(cols[1], dtype=np.int8),
                          "pos": np.array(cols[2], dtype=np.int16), "char": _category(cols[3]),
                          "status": _category(cols[4]),
                          "ink": _category("black" if k == "reference" else "white" for k in cols[4])})
    if status_names is not None:
        frame["status_name"] = _category(status_names[k] for k in cols[4])
    return frame


def tape_font(n: int) -> int:
    """Font size of a tape of n cells (the only thing a tape's spec depends on besides the texts)."""
    return 13 if n <= 40 else 10


@chart_kind()
def tapes_chart(frame, *, lines: list[str], status_names: list[str], font: int, x_title: str) -> alt.LayerChart:
    """Answers as rows of cells, one character per cell, coloured right / wrong against the first row.
    ``status_names``: the legend names of reference, right, wrong and missing.

    Cheap to redraw (the redraw budget, docs/performance.md): the letters' colour is a column (no expression per cell),
    no ARIA label per mark (one per character, each costing the browser time on every redraw)."""
    colour = alt.Color("status_name:N", title=None, sort=status_names,
                       scale=alt.Scale(domain=status_names, range=[REFERENCE, RIGHT, WRONG, "#ffffff"]),
                       legend=alt.Legend(orient="bottom", columns=2, labelLimit=0))     # 2 a row: fits a phone
    base = alt.Chart().encode(
        x=alt.X("pos:O", title=x_title, axis=alt.Axis(labelAngle=0, labelExpr=TICKS_1_5)),
        y=alt.Y("line:N", sort=lines, title=None, axis=alt.Axis(labelLimit=220, labelOverlap=False)),
        tooltip=[alt.Tooltip("line:N", title=" "), alt.Tooltip("pos:O", title=x_title),
                 alt.Tooltip("char:N", title="·"), alt.Tooltip("status_name:N", title=" ")])
    cells = base.mark_rect(stroke="#bdbdbd", strokeWidth=0.5, aria=False).encode(color=colour)
    text = base.mark_text(fontSize=font, aria=False).encode(
        text="char:N", color=alt.Color("ink:N", scale=None))
    return alt.layer(cells, text, data=frame).properties(height=30 * len(lines), autosize=FIT_X)


def tapes(rows: Sequence[tuple[str, str, Sequence[bool | None] | None]], *, status_names: dict[str, str],
          x_title: str) -> Spec:
    """The lines of ``rows`` (label, text, marks) as tapes of cells (see ``tapes_frame``)."""
    frame = tapes_frame(rows, status_names)
    n = int(frame["pos"].max()) if len(frame) else 1
    return tapes_chart(frame, lines=list(dict.fromkeys(frame["line"])),
                       status_names=[status_names[k] for k in ("reference", "right", "wrong", "missing")],
                       font=tape_font(n), x_title=x_title)


def position_frame(by_position: dict[str, Sequence[float]], names: dict[str, str]) -> pd.DataFrame:
    rows = [{"model": m, "name": names[m], "position": i + 1, "value": float(v)}
            for m in MODELS if m in by_position for i, v in enumerate(by_position[m])]
    frame = pd.DataFrame(rows, columns=["model", "name", "position", "value"])
    frame["exact"] = np.char.mod("%.4g", frame["value"].to_numpy(dtype=np.float64))
    return frame


@chart_kind(fill=("last",))
def position_chart(frame, *, legend: list[str], colours: list[str], title: str, x_title: str, y_title: str,
                   last: int = 2, height: int = 200) -> alt.Chart:
    """Share of answers right at each output position (1 = the first digit written), per model."""
    colour = alt.Color("name:N", title=None, sort=legend, scale=alt.Scale(domain=legend, range=colours),
                       legend=alt.Legend(orient="bottom"))
    return alt.Chart(frame).mark_line(point=True).encode(
        x=alt.X("position:Q", title=x_title, scale=alt.Scale(domain=[1, last], nice=False)),
        y=alt.Y("value:Q", title=y_title, scale=alt.Scale(domain=[0, 1])),
        color=colour,
        tooltip=[alt.Tooltip("name:N", title=" "), alt.Tooltip("position:Q", title=x_title),
                 alt.Tooltip("exact:N", title=y_title)],
    ).properties(title=title, height=height, autosize=FIT_X)


def accuracy_by_position(by_position: dict[str, Sequence[float]], *, names: dict[str, str], title: str,
                         x_title: str, y_title: str) -> Spec:
    frame = position_frame(by_position, names)
    return position_chart(frame, **_legend(by_position, names), title=title, x_title=x_title, y_title=y_title,
                          last=max(int(frame["position"].max()), 2))


def _faded(colour: str, alpha: float = 0.35) -> str:
    """``colour`` drawn at ``alpha`` over white, as an opaque colour."""
    rgb = [int(colour[i:i + 2], 16) for i in (1, 3, 5)]
    return "#" + "".join(f"{round(255 - alpha * (255 - c)):02x}" for c in rgb)


CELL_FILL = {"enc": "#d9e3f1", "ctx": BLUE, "dec": "#fde0c5"}
CELL_EDGE = "#616161"


def architecture_frame(source: str, output: str, step: int, weights=None, *, encoder_title: str = "",
                       decoder_title: str = "") -> pd.DataFrame:
    """The diagram's parts in one table (``part`` tells them apart).

    Encoder cells h_1..h_n (row 0), the context vector c (row 1), decoder cells s_1..s_m (row 2), each
    row's cells chained by one grey line drawn under them; "context" links h_n -> c -> s_1; with
    ``weights`` (the attention row of decoder step ``step``, 0-based) one "attend" link h_j -> s_step per
    source position, with its weight; "side" rows name the two rows.
    How each part is drawn is in the table too (so the browser evaluates no expression per mark):
    ``fill`` and ``edge`` (a cell's colours; decoder cells after ``step`` are faded, opaque so the chain
    line stays hidden under them), ``ink`` (a label's colour).
    """
    n = len(source)
    rows: list[tuple] = []

    def node(part, x, y, label, pos, active=True):
        fill, edge = CELL_FILL.get(part, "#ffffff"), CELL_EDGE
        if not active:
            fill, edge = _faded(fill), _faded(edge)
        rows.append((part, x, y, np.nan, np.nan, label, pos, np.nan, fill, edge,
                     "white" if part == "ctx" else ("#555555" if part == "side" else "black")))

    def link(part, x, y, x2, y2, weight=np.nan, pos=-1):
        rows.append((part, x, y, x2, y2, "", pos, weight, "#ffffff", "#ffffff", "black"))

    for j, ch in enumerate(source):
        node("enc", j, 0, ch, j)
    cx = n + 0.5
    node("ctx", cx, 1, "c", -1)
    link("context", n - 1, 0, cx, 1)
    link("context", cx, 1, 0, 2)
    for t, ch in enumerate(output):
        node("dec", t, 2, ch, t, active=t <= step)
    if weights is not None:
        w = np.asarray(weights, dtype=np.float64)
        for j in range(n):
            link("attend", j, 0, step, 2, weight=float(w[j]), pos=j)
    node("side", -0.8, -0.45, encoder_title, -1)
    node("side", -0.8, 2.45, decoder_title, -1)
    cols = list(zip(*rows))
    text = lambda i: _category(cols[i])                               # noqa: E731
    number = lambda i, kind=np.float32: np.array(cols[i], dtype=kind)  # noqa: E731
    # small types: less to send and to decode on every redraw (the redraw budget, docs/performance.md)
    return pd.DataFrame({"part": text(0), "x": number(1), "y": number(2), "x2": number(3), "y2": number(4),
                         "label": text(5), "pos": number(6, np.int16), "weight": number(7), "fill": text(8),
                         "edge": text(9), "ink": text(10)})


def architecture_size(source: str, output: str) -> str:
    """The diagram's size class ("s", "m", "l"): how large its cells and letters are drawn."""
    width = max(len(source) + 1.5, len(output))
    return "s" if width <= 20 else ("m" if width <= 40 else "l")


@chart_kind(fill=("title",))
def architecture_chart(frame, *, size: str, attends: bool, weight_title: str, title: str = "",
                       height: int = 190) -> alt.LayerChart:
    """Encoder over the input (top), decoder writing the output (bottom), the context vector c between
    (``architecture_frame``).

    Without ``attends`` the decoder's only link to the input is c (the final encoder state); with it,
    the decoder step is also linked to every encoder cell, line width and opacity following the
    attention weight. The cells' colours come from the frame's columns (``scale=None``): no
    expression per mark; no ARIA label per mark (the diagram is described by its title and caption).
    """
    xs = alt.Scale(nice=False, zero=False, padding=14)           # from the data: -0.8 .. n + 0.5
    ys = alt.Scale(domain=[-0.6, 2.6], nice=False, reverse=True)
    base = alt.Chart()
    x, y = alt.X("x:Q", scale=xs, axis=None), alt.Y("y:Q", scale=ys, axis=None)
    # one line per row through its cells' centres, under the cells: the chain between neighbours
    chain = base.transform_filter(alt.FieldOneOfPredicate(field="part", oneOf=["enc", "dec"])).mark_line(
        color=GREY, strokeWidth=1.5, aria=False).encode(x=x, y=y, detail="part:N")
    context = base.transform_filter(alt.datum.part == "context").mark_rule(color=BLUE, strokeWidth=3,
                                                                           aria=False).encode(
        x=x, y=y, x2="x2:Q", y2="y2:Q")
    layers = [chain, context]
    if attends:
        layers.append(base.transform_filter(alt.datum.part == "attend").mark_rule(color=ORANGE, aria=False).encode(
            x=x, y=y, x2="x2:Q", y2="y2:Q",
            strokeWidth=alt.StrokeWidth("weight:Q", scale=alt.Scale(domain=[0, 1], range=[0.3, 7]), legend=None),
            opacity=alt.Opacity("weight:Q", scale=alt.Scale(domain=[0, 1], range=[0.15, 1]), legend=None),
            tooltip=[alt.Tooltip("pos:Q", title="j"), alt.Tooltip("weight:Q", title=weight_title, format=".3f")]))
    nodes = base.transform_filter(alt.FieldOneOfPredicate(field="part", oneOf=["enc", "ctx", "dec"]))
    layers.append(nodes.mark_square(size={"s": 420, "m": 220, "l": 110}[size], strokeWidth=0.8,
                                    opacity=1, aria=False).encode(
        x=x, y=y, color=alt.Color("fill:N", scale=None), stroke=alt.Stroke("edge:N", scale=None)))
    layers.append(nodes.mark_text(fontSize=9 if size == "l" else 12, aria=False).encode(
        x=x, y=y, text="label:N", color=alt.Color("ink:N", scale=None)))
    layers.append(base.transform_filter(alt.datum.part == "side").mark_text(
        align="left", fontSize=11, color="#555555", aria=False).encode(x=x, y=y, text="label:N"))
    return alt.layer(*layers, data=frame).properties(title=title, height=height, autosize=FIT_X).configure_view(
        stroke=None)


def architecture(source: str, output: str, step: int, weights=None, *, title: str, encoder_title: str,
                 decoder_title: str, weight_title: str) -> Spec:
    """The Seq2Seq diagram of ``source`` -> ``output`` at decoder step ``step`` (0-based); with ``weights``
    (that step's attention row) the attention links."""
    frame = architecture_frame(source, output, step, weights, encoder_title=encoder_title,
                               decoder_title=decoder_title)
    return architecture_chart(frame, size=architecture_size(source, output), attends=weights is not None,
                              weight_title=weight_title, title=title)

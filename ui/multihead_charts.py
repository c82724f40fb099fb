"""Charts of the multi-head attention page: how d_model is cut into heads, every head as a small
multiple (click one to enlarge it), the pattern gallery, and the query/key geometry of one head.

Pure functions (no Streamlit calls): arrays in, ``alt.Chart`` out; every title and label is passed
in already translated. Weights use the fixed 0..1 viridis domain of ui.charts.heatmap.
"""
from __future__ import annotations

import functools
import math
from collections.abc import Sequence

import altair as alt
import numpy as np
import pandas as pd

from .charts import SIGNED_SCHEME, WEIGHT_SCHEME, as_numpy, class_skeleton, respec, to_spec, unique_labels

HEAD_SELECTION = "head"      # name of the click selection of the head grid (field "head")
MAX_PANEL_SIDE = 24          # a small multiple shows at most 24 x 24 cells (averaged tiles beyond)
QUERY_COLOUR = "#e66101"
KEY_COLOUR = "#3b528b"
VALUE_COLOUR = "#1b9e77"


def _short(label: str, limit: int = 10) -> str:
    return label if len(label) <= limit else label[:limit - 1] + "…"


def _one_frame(**pieces: pd.DataFrame) -> pd.DataFrame:
    """A chart's frames as one, each row tagged with its ``piece`` (ui.charts.to_spec ships one dataset)."""
    return pd.concat([frame.assign(piece=name) for name, frame in pieces.items()], ignore_index=True)


def _piece(name: str) -> alt.Chart:
    """A layer that draws one piece of the chart's frame."""
    return alt.Chart().transform_filter(alt.datum.piece == name)


# ---------------------------------------------------------------------------------------------
# the split: d_model dimensions -> h heads of d_k
# ---------------------------------------------------------------------------------------------


def split_frame(values, num_heads: int) -> pd.DataFrame:
    """One row per dimension of a d_model vector: its head (1-based), its place inside the head,
    its value."""
    vals = np.asarray(values, dtype=np.float64).reshape(-1)
    d_model = len(vals)
    d_k = d_model // num_heads
    dim = np.arange(d_model)
    return pd.DataFrame({"dim": dim, "dim_end": dim + 1, "head": dim // d_k + 1, "within": dim % d_k,
                         "within_end": dim % d_k + 1, "value": vals, "exact": np.char.mod("%.6g", vals)})


def split_chart(values, num_heads: int, *, top_title: str, bottom_title: str, dim_title: str,
                head_title: str, within_title: str, value_title: str, width: int = 760) -> alt.VConcatChart:
    """Top: one token's projected query, d_model numbers coloured by value, cut by black lines into
    the h blocks that become the heads. Bottom: the same numbers after split_heads, one row per head
    (d_k each) — the same colours, re-read, nothing copied."""
    frame = split_frame(values, num_heads)
    d_model = len(frame)
    d_k = d_model // num_heads
    bound = float(frame["value"].abs().max()) or 1.0
    colour = alt.Color("value:Q", title=value_title,
                       scale=alt.Scale(scheme=SIGNED_SCHEME, domain=[-bound, bound], domainMid=0))
    tooltip = [alt.Tooltip("dim:Q", title=dim_title), alt.Tooltip("head:O", title=head_title),
               alt.Tooltip("within:Q", title=within_title), alt.Tooltip("exact:N", title=value_title)]
    ticks = list(range(0, d_model + 1, d_k)) if num_heads <= 16 else [0, d_model]
    x = alt.X("dim:Q", title=dim_title, scale=alt.Scale(domain=[0, d_model], nice=False),
              axis=alt.Axis(values=ticks, labelAngle=0, grid=False))
    cells = _piece("dims").mark_rect(stroke="white", strokeWidth=0.3 if d_model <= 128 else 0).encode(
        x=x, x2="dim_end:Q", color=colour, tooltip=tooltip)
    pieces = {"dims": frame, "cuts": pd.DataFrame({"at": np.arange(0, d_model + 1, d_k)})}
    rules = _piece("cuts").mark_rule(color="black", strokeWidth=2).encode(x=alt.X("at:Q"))
    layers = [cells, rules]
    if num_heads <= 16:
        pieces["names"] = pd.DataFrame({"mid": (np.arange(num_heads) + 0.5) * d_k,
                                        "head": np.arange(1, num_heads + 1)})
        layers.append(_piece("names").mark_text(dy=-22, fontSize=11, fontWeight="bold").encode(
            x=alt.X("mid:Q"), text="head:N"))
    top = alt.layer(*layers).properties(title=alt.TitleParams(top_title, offset=18), width=width, height=28)
    bottom = _piece("dims").properties(title=bottom_title).mark_rect(stroke="white", strokeWidth=0.5).encode(
        x=alt.X("within:Q", title=within_title, scale=alt.Scale(domain=[0, d_k], nice=False),
                axis=alt.Axis(values=list(range(d_k + 1)) if d_k <= 32 else alt.Undefined, labelAngle=0, grid=False)),
        x2="within_end:Q",
        y=alt.Y("head:O", title=head_title, axis=alt.Axis(labelOverlap=True)),
        color=colour, tooltip=tooltip,
    ).properties(width=min(width, max(120, 40 * d_k)), height=max(40, min(22, 440 // num_heads) * num_heads))
    return alt.vconcat(top, bottom, spacing=28, data=_one_frame(**pieces)).resolve_scale(color="shared")


# ---------------------------------------------------------------------------------------------
# small multiples: every head, and the pattern gallery
# ---------------------------------------------------------------------------------------------


def _pool(matrix: np.ndarray, f: int) -> np.ndarray:
    n_q, n_k = matrix.shape
    pad = np.full((math.ceil(n_q / f) * f, math.ceil(n_k / f) * f), np.nan)
    pad[:n_q, :n_k] = matrix
    tiles = pad.reshape(pad.shape[0] // f, f, pad.shape[1] // f, f)
    return np.nanmean(tiles, axis=(1, 3))


def panels_frame(matrices, row_labels: Sequence[str], col_labels: Sequence[str], titles: Sequence[str],
                 max_side: int = MAX_PANEL_SIDE) -> tuple[pd.DataFrame, int]:
    """Long form of a stack of (n_q, n_k) matrices, one panel each; (frame, pooling factor).

    Columns: head (1-based panel number), panel (its title), query_pos, key_pos (first position of
    the tile), query, key (labels; position ranges when pooled), value, exact.
    """
    stack = np.asarray(matrices.detach().double().cpu().numpy() if hasattr(matrices, "detach") else matrices,
                       dtype=np.float64)
    h, n_q, n_k = stack.shape
    f = max(1, math.ceil(max(n_q, n_k) / max_side))
    rows, cols = unique_labels(list(row_labels)), unique_labels(list(col_labels))
    if f > 1:
        stack = np.stack([_pool(m, f) for m in stack])
        rows = [f"{i}–{min(i + f, n_q) - 1}" for i in range(0, n_q, f)]
        cols = [f"{j}–{min(j + f, n_k) - 1}" for j in range(0, n_k, f)]
    titles = list(titles)
    if len(set(titles)) < len(titles):     # the facet groups by title: keep every panel apart
        titles = [f"{title} ({i + 1})" for i, title in enumerate(titles)]
    pq, pk = stack.shape[1:]
    head, qi, ki = np.meshgrid(np.arange(h), np.arange(pq), np.arange(pk), indexing="ij")
    values = stack.ravel()
    frame = pd.DataFrame({
        "head": head.ravel() + 1,
        "panel": np.asarray(list(titles), dtype=object)[head.ravel()],
        "query_pos": qi.ravel() * f,
        "key_pos": ki.ravel() * f,
        "query": np.asarray(rows, dtype=object)[qi.ravel()],
        "key": np.asarray(cols, dtype=object)[ki.ravel()],
        "value": values,
        "exact": np.char.mod("%.6g", values),
    })
    return frame, f


def small_multiples(matrices, row_labels: Sequence[str], col_labels: Sequence[str] | None = None, *,
                    titles: Sequence[str], columns: int = 4, x_title: str = "key", y_title: str = "query",
                    value_title: str = "weight", panel_title: str = "head", selected: int | None = None,
                    selectable: bool = True, panel_size: int = 150, title_limit: int = 220,
                    domain: tuple[float, float] = (0.0, 1.0)) -> alt.FacetChart:
    """One small heatmap per matrix (every head, or every gallery pattern), same 0..1 colour scale.

    ``selectable``: clicking any cell of a panel selects that panel (selection "head", field "head",
    1-based). Panels are never dimmed (they are compared with each other); ``selected`` only sets
    the selection's initial value — mark the chosen panel in its title.
    """
    col_labels = row_labels if col_labels is None else col_labels
    frame, _ = panels_frame(matrices, row_labels, col_labels, titles)
    n_side = max(frame["query_pos"].nunique(), 1)
    show_labels = n_side <= 16
    axis_x = alt.Axis(labelAngle=-60, labelFontSize=9, labelLimit=60, labels=show_labels, ticks=show_labels)
    axis_y = alt.Axis(labelFontSize=9, labelLimit=60, labels=show_labels, ticks=show_labels)
    tooltip = [alt.Tooltip("panel:N", title=panel_title), alt.Tooltip("query:N", title=y_title),
               alt.Tooltip("key:N", title=x_title), alt.Tooltip("exact:N", title=value_title)]
    base = alt.Chart(frame).mark_rect().encode(
        x=alt.X("key:N", sort=list(dict.fromkeys(frame["key"])), title=x_title if show_labels else None,
                axis=axis_x),
        y=alt.Y("query:N", sort=list(dict.fromkeys(frame["query"])), title=y_title if show_labels else None,
                axis=axis_y),
        color=alt.Color("value:Q", title=value_title,
                        scale=alt.Scale(domain=list(domain), scheme=WEIGHT_SCHEME, clamp=True)),
        tooltip=tooltip,
    ).properties(width=panel_size, height=panel_size)
    if selectable:
        pick = alt.selection_point(name=HEAD_SELECTION, fields=["head"], on="click",
                                   value=None if selected is None else [{"head": int(selected)}])
        base = base.add_params(pick)
    order = list(dict.fromkeys(frame["panel"]))
    return base.facet(
        facet=alt.Facet("panel:N", sort=order, title=None,
                        header=alt.Header(labelFontSize=12 if panel_size >= 120 else 10,
                                          labelFontWeight="bold", labelLimit=title_limit)),
        columns=max(1, columns),
    )


def small_multiples_spec(matrices, row_labels: Sequence[str], col_labels: Sequence[str] | None = None, *,
                         titles: Sequence[str], columns: int = 4, x_title: str = "key", y_title: str = "query",
                         value_title: str = "weight", panel_title: str = "head", selected: int | None = None,
                         selectable: bool = True, panel_size: int = 150, title_limit: int = 220,
                         domain: tuple[float, float] = (0.0, 1.0)) -> dict:
    """``to_spec(small_multiples(...))`` with the same arguments from a cached skeleton (``ui.charts.respec``):
    new data, axis orders, panel order and selected panel."""
    col_labels = row_labels if col_labels is None else col_labels
    frame, _ = panels_frame(matrices, row_labels, col_labels, titles)
    options = dict(columns=columns, x_title=x_title, y_title=y_title, value_title=value_title,
                   panel_title=panel_title, selectable=selectable, panel_size=panel_size, title_limit=title_limit,
                   domain=tuple(domain))
    cls = ("small_multiples", frame["query_pos"].nunique() <= 16, selected is None, *options.items())
    skeleton = class_skeleton(cls, lambda: small_multiples(matrices, row_labels, col_labels, titles=titles,
                                                           selected=selected, **options))
    out = respec(skeleton, frame,
                 sort={"key": list(dict.fromkeys(frame["key"])), "query": list(dict.fromkeys(frame["query"]))},
                 selection=None if selected is None else {HEAD_SELECTION: [{"head": int(selected)}]})
    out["facet"] = {**out["facet"], "sort": list(dict.fromkeys(frame["panel"]))}
    return out


# ---------------------------------------------------------------------------------------------
# query / key geometry of one head
# ---------------------------------------------------------------------------------------------


def geometry_frame(queries, keys, tokens: Sequence[str], weights_row, query: int) -> pd.DataFrame:
    """Points of the shared q/k plane: every key (with its weight from the chosen query) and every
    query (the chosen one flagged)."""
    q, k = as_numpy(queries), as_numpy(keys)
    w = np.asarray(weights_row, dtype=np.float64).reshape(-1)
    labels = unique_labels(list(tokens))
    n_q, n_k = len(q), len(k)
    return pd.DataFrame({
        "kind": ["key"] * n_k + ["query"] * n_q,
        "pos": list(range(n_k)) + list(range(n_q)),
        "token": labels[:n_k] + labels[:n_q],
        "label": [_short(s) for s in labels[:n_k] + labels[:n_q]],
        "x": np.concatenate([k[:, 0], q[:, 0]]),
        "y": np.concatenate([k[:, 1], q[:, 1]]),
        "weight": np.concatenate([w, np.full(n_q, np.nan)]),
        "exact": list(np.char.mod("%.4f", w)) + [""] * n_q,
        "chosen": [False] * n_k + [i == query for i in range(n_q)],
    })


def equal_aspect(xs, ys, width: int, height: int, pad: float = 0.08) -> tuple[list[float], list[float]]:
    """x and y domains with the same data units per pixel, so distances in the plot are true
    distances in the plane (a PCA plane drawn stretched would mislead "close" and "far")."""
    xs, ys = np.asarray(xs, dtype=np.float64), np.asarray(ys, dtype=np.float64)
    cx, cy = (xs.max() + xs.min()) / 2, (ys.max() + ys.min()) / 2
    unit = max(float(np.ptp(xs)) / width, float(np.ptp(ys)) / height, 1e-9) * (1 + 2 * pad)
    return [cx - unit * width / 2, cx + unit * width / 2], [cy - unit * height / 2, cy + unit * height / 2]


def _geometry_data(queries, keys, tokens: Sequence[str], weights_row, query: int, key_name: str,
                   query_name: str, width: int, height: int) -> tuple[pd.DataFrame, list[float], list[float]]:
    """The one frame ``geometry_chart`` draws and its equal-aspect x and y domains."""
    frame = geometry_frame(queries, keys, tokens, weights_row, query)
    frame["kind_name"] = np.where(frame["kind"] == "key", key_name, query_name)
    keys_f = frame[frame["kind"] == "key"]
    others = frame[(frame["kind"] == "query") & ~frame["chosen"]]
    chosen = frame[frame["chosen"]]
    qx, qy = (float(chosen["x"].iloc[0]), float(chosen["y"].iloc[0])) if len(chosen) else (0.0, 0.0)
    lines = pd.DataFrame({
        "pos": np.repeat(keys_f["pos"].to_numpy(), 2),
        "x": np.ravel(np.column_stack([np.full(len(keys_f), qx), keys_f["x"].to_numpy()])),
        "y": np.ravel(np.column_stack([np.full(len(keys_f), qy), keys_f["y"].to_numpy()])),
        "weight": np.repeat(keys_f["weight"].to_numpy(), 2),
        "token": np.repeat(keys_f["token"].to_numpy(), 2),
        "exact": np.repeat(keys_f["exact"].to_numpy(), 2),
    })
    dx, dy = equal_aspect(frame["x"], frame["y"], width, height)
    return _one_frame(keys=keys_f, others=others, chosen=chosen, link=lines), dx, dy


def geometry_chart(queries, keys, tokens: Sequence[str], weights_row, query: int, *, title: str,
                   x_title: str, y_title: str, key_name: str, query_name: str, weight_title: str,
                   token_title: str, width: int = 420, height: int = 380) -> alt.LayerChart:
    """Keys (squares) and queries (circles) of one head in one PCA plane, equal scales on both axes;
    the chosen query is filled and labelled, the other queries are small rings; a line from the
    chosen query to every key, as thick and opaque as its attention weight."""
    data, dx, dy = _geometry_data(queries, keys, tokens, weights_row, query, key_name, query_name, width, height)
    x = alt.X("x:Q", title=x_title, scale=alt.Scale(domain=dx, nice=False, zero=False))
    y = alt.Y("y:Q", title=y_title, scale=alt.Scale(domain=dy, nice=False, zero=False))
    tip = [alt.Tooltip("kind_name:N", title=""), alt.Tooltip("token:N", title=token_title),
           alt.Tooltip("exact:N", title=weight_title)]
    shape = alt.Shape("kind_name:N", title="", scale=alt.Scale(domain=[key_name, query_name],
                                                              range=["square", "circle"]))
    colour = alt.Color("kind_name:N", title="", scale=alt.Scale(domain=[key_name, query_name],
                                                               range=[KEY_COLOUR, QUERY_COLOUR]))
    link = _piece("link").mark_line(color=QUERY_COLOUR).encode(
        x=x, y=y, detail="pos:N",
        opacity=alt.Opacity("weight:Q", scale=alt.Scale(domain=[0, 1], range=[0.08, 1]), legend=None),
        strokeWidth=alt.StrokeWidth("weight:Q", scale=alt.Scale(domain=[0, 1], range=[0.5, 7]), legend=None),
        tooltip=[alt.Tooltip("token:N", title=token_title), alt.Tooltip("exact:N", title=weight_title)])
    rings = _piece("others").mark_point(filled=False, size=45, opacity=0.6, strokeWidth=1).encode(
        x=x, y=y, shape=shape, color=colour, tooltip=tip)
    key_pts = _piece("keys").mark_point(filled=True, size=80, opacity=1).encode(
        x=x, y=y, shape=shape, color=colour, tooltip=tip)
    q_pt = _piece("chosen").mark_point(filled=True, size=150, opacity=1, stroke="white", strokeWidth=1)
    q_pt = q_pt.encode(x=x, y=y, shape=shape, color=colour, tooltip=tip)
    key_text = _piece("keys").mark_text(dx=8, align="left", fontSize=11, color=KEY_COLOUR).encode(
        x=x, y=y, text="label:N", tooltip=tip)
    q_text = _piece("chosen").mark_text(dx=-9, dy=-9, align="right", fontSize=12, fontWeight="bold",
                                         color=QUERY_COLOUR).encode(x=x, y=y, text="label:N", tooltip=tip)
    return alt.layer(link, rings, key_pts, q_pt, key_text, q_text, data=data).properties(
        title=title, width=width, height=height)


@functools.lru_cache(maxsize=16)
def _geometry_skeleton(key_name: str, query_name: str, weight_title: str, token_title: str, width: int,
                       height: int) -> dict:
    plane = np.array([[0.0, 0.0], [1.0, 1.0]])
    return to_spec(geometry_chart(plane, plane, ["a", "b"], [0.5, 0.5], 0, title="·", x_title="x",
                                  y_title="y", key_name=key_name, query_name=query_name,
                                  weight_title=weight_title, token_title=token_title, width=width, height=height))


def geometry_spec(queries, keys, tokens: Sequence[str], weights_row, query: int, *, title: str,
                  x_title: str, y_title: str, key_name: str, query_name: str, weight_title: str,
                  token_title: str, width: int = 420, height: int = 380) -> dict:
    """``to_spec(geometry_chart(...))`` from a cached skeleton (``ui.charts.respec``): new data, domains, title."""
    data, dx, dy = _geometry_data(queries, keys, tokens, weights_row, query, key_name, query_name, width, height)
    skeleton = _geometry_skeleton(key_name, query_name, weight_title, token_title, width, height)
    return respec(skeleton, data, domain={"x": dx, "y": dy}, titles={"x": x_title, "y": y_title}, title=title)


def _values_data(values, tokens: Sequence[str], weights_row, value_name: str, output_name: str, width: int,
                 height: int) -> tuple[pd.DataFrame, list[float], list[float]]:
    v = as_numpy(values)
    w = np.asarray(weights_row, dtype=np.float64).reshape(-1)
    labels = unique_labels(list(tokens))
    frame = pd.DataFrame({"x": v[:, 0], "y": v[:, 1], "token": labels, "label": [_short(s) for s in labels],
                          "weight": w, "exact": np.char.mod("%.4f", w), "kind": value_name})
    out = w @ v                                                # the output, in the same plane
    star = pd.DataFrame({"x": [out[0]], "y": [out[1]], "kind": [output_name], "label": [output_name]})
    dx, dy = equal_aspect(np.append(v[:, 0], out[0]), np.append(v[:, 1], out[1]), width, height)
    return _one_frame(values=frame, star=star), dx, dy


def values_chart(values, tokens: Sequence[str], weights_row, *, title: str, x_title: str, y_title: str,
                 value_name: str, output_name: str, weight_title: str, token_title: str,
                 width: int = 420, height: int = 380) -> alt.LayerChart:
    """The values of one head in their own PCA plane, sized by the chosen query's weights, and the
    head's output for that query: the weighted mean of the value points (a star)."""
    data, dx, dy = _values_data(values, tokens, weights_row, value_name, output_name, width, height)
    tip = [alt.Tooltip("token:N", title=token_title), alt.Tooltip("exact:N", title=weight_title)]
    xs = alt.Scale(domain=dx, nice=False, zero=False)
    ys = alt.Scale(domain=dy, nice=False, zero=False)
    x = alt.X("x:Q", title=x_title, scale=xs)
    y = alt.Y("y:Q", title=y_title, scale=ys)
    pts = _piece("values").mark_circle(color=VALUE_COLOUR).encode(
        x=x, y=y, size=alt.Size("weight:Q", scale=alt.Scale(domain=[0, 1], range=[20, 600]), legend=None),
        opacity=alt.value(0.8), tooltip=tip)
    text = _piece("values").mark_text(dx=8, align="left", fontSize=11, color=VALUE_COLOUR).encode(
        x=x, y=y, text="label:N", tooltip=tip)
    out_pt = _piece("star").mark_point(shape="diamond", filled=True, size=220, color=QUERY_COLOUR).encode(
        x=x, y=y, tooltip=[alt.Tooltip("kind:N", title="")])
    out_text = _piece("star").mark_text(dx=-10, dy=-10, align="right", fontWeight="bold",
                                         color=QUERY_COLOUR).encode(x=x, y=y, text="label:N")
    return alt.layer(pts, text, out_pt, out_text, data=data).properties(title=title, width=width, height=height)


@functools.lru_cache(maxsize=16)
def _values_skeleton(value_name: str, output_name: str, weight_title: str, token_title: str, width: int,
                     height: int) -> dict:
    return to_spec(values_chart(np.array([[0.0, 0.0], [1.0, 1.0]]), ["a", "b"], [0.5, 0.5], title="·",
                                x_title="x", y_title="y", value_name=value_name, output_name=output_name,
                                weight_title=weight_title, token_title=token_title, width=width, height=height))


def values_spec(values, tokens: Sequence[str], weights_row, *, title: str, x_title: str, y_title: str,
                value_name: str, output_name: str, weight_title: str, token_title: str,
                width: int = 420, height: int = 380) -> dict:
    """``to_spec(values_chart(...))`` from a cached skeleton (``ui.charts.respec``)."""
    data, dx, dy = _values_data(values, tokens, weights_row, value_name, output_name, width, height)
    skeleton = _values_skeleton(value_name, output_name, weight_title, token_title, width, height)
    return respec(skeleton, data, domain={"x": dx, "y": dy}, titles={"x": x_title, "y": y_title}, title=title)

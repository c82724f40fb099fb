"""Charts of the multi-head attention page: how d_model is cut into heads, every head as a small
multiple (click one to enlarge it), the pattern gallery, and the query/key geometry of one head.

Frame builders (arrays in, DataFrames out), the chart kinds that draw them (``ui.charts.chart_kind``:
Altair builders, built once per static shape and filled per rerun) and one public function per chart.
No Streamlit calls; every title and label is passed in already translated. Weights use the fixed 0..1
viridis domain of ui.charts.heatmap.
"""
from __future__ import annotations

import math
from collections.abc import Sequence

import altair as alt
import numpy as np
import pandas as pd

from .charts import (MAX_ARIA_CELLS, SIGNED_SCHEME, WEIGHT_SCHEME, Spec, _pool, as_numpy, chart_kind,
                     unique_labels)
from .format import clip

HEAD_SELECTION = "head"      # name of the click selection of the head grid (field "head")
MAX_PANEL_SIDE = 24          # a small multiple shows at most 24 x 24 cells (averaged tiles beyond)
QUERY_COLOUR = "#e66101"
KEY_COLOUR = "#3b528b"
VALUE_COLOUR = "#1b9e77"
PLANE_PADDING = {"top": 16, "left": 12, "right": 8, "bottom": 10}   # room above for a two-line title


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


@chart_kind(fill=("top_title", "bottom_title", "domain", "dim_domain", "ticks", "within_domain", "within_ticks",
                  "bottom_width", "bottom_height"))
def split_kind(data, *, dim_title: str, head_title: str, within_title: str, value_title: str, fine: bool,
               named: bool, width: int, top_title: str = "", bottom_title: str = "", domain=(-1, 1),
               dim_domain=(0, 1), ticks=(), within_domain=(0, 1), within_ticks=None, bottom_width: int = 120,
               bottom_height: int = 40) -> alt.VConcatChart:
    colour = alt.Color("value:Q", title=value_title, scale=alt.Scale(scheme=SIGNED_SCHEME, domain=domain, domainMid=0))
    tooltip = [alt.Tooltip("dim:Q", title=dim_title), alt.Tooltip("head:O", title=head_title),
               alt.Tooltip("within:Q", title=within_title), alt.Tooltip("exact:N", title=value_title)]
    x = alt.X("dim:Q", title=dim_title, scale=alt.Scale(domain=dim_domain, nice=False),
              axis=alt.Axis(values=ticks, labelAngle=0, grid=False))
    cells = alt.Chart(data["dims"]).mark_rect(stroke="white", strokeWidth=0.3 if fine else 0).encode(
        x=x, x2="dim_end:Q", color=colour, tooltip=tooltip)
    layers = [cells, alt.Chart(data["cuts"]).mark_rule(color="black", strokeWidth=2).encode(x=alt.X("at:Q"))]
    if named:
        layers.append(alt.Chart(data["names"]).mark_text(dy=-22, fontSize=11, fontWeight="bold").encode(
            x=alt.X("mid:Q"), text="head:N"))
    top = alt.layer(*layers).properties(title=alt.TitleParams(top_title, offset=18), width=width, height=28)
    bottom = alt.Chart(data["dims"]).properties(title=bottom_title).mark_rect(stroke="white", strokeWidth=0.5).encode(
        x=alt.X("within:Q", title=within_title, scale=alt.Scale(domain=within_domain, nice=False),
                axis=alt.Axis(values=alt.Undefined if within_ticks is None else within_ticks, labelAngle=0,
                              grid=False)),
        x2="within_end:Q",
        y=alt.Y("head:O", title=head_title, axis=alt.Axis(labelOverlap=True)),
        color=colour, tooltip=tooltip,
    ).properties(width=bottom_width, height=bottom_height)
    return alt.vconcat(top, bottom, spacing=28).resolve_scale(color="shared").configure_legend(orient="bottom")


def split_chart(values, num_heads: int, *, top_title: str, bottom_title: str, dim_title: str,
                head_title: str, within_title: str, value_title: str, width: int = 760) -> Spec:
    """Top: one token's projected query, d_model numbers coloured by value, cut by black lines into
    the h blocks that become the heads. Bottom: the same numbers after split_heads, one row per head
    (d_k each) — the same colours, re-read, nothing copied."""
    frame = split_frame(values, num_heads)
    d_model = len(frame)
    d_k = d_model // num_heads
    bound = float(frame["value"].abs().max()) or 1.0
    named = num_heads <= 16
    data = {"dims": frame, "cuts": pd.DataFrame({"at": np.arange(0, d_model + 1, d_k)})}
    if named:
        data["names"] = pd.DataFrame({"mid": (np.arange(num_heads) + 0.5) * d_k, "head": np.arange(1, num_heads + 1)})
    return split_kind(data, dim_title=dim_title, head_title=head_title, within_title=within_title,
                      value_title=value_title, fine=d_model <= 128, named=named, width=width, top_title=top_title,
                      bottom_title=bottom_title, domain=[-bound, bound], dim_domain=[0, d_model],
                      ticks=list(range(0, d_model + 1, d_k)) if named else [0, d_model], within_domain=[0, d_k],
                      within_ticks=list(range(d_k + 1)) if d_k <= 32 else None,
                      bottom_width=min(width, max(120, 40 * d_k)),
                      bottom_height=max(40, min(22, 440 // num_heads) * num_heads))


# ---------------------------------------------------------------------------------------------
# small multiples: every head, and the pattern gallery
# ---------------------------------------------------------------------------------------------


def panels_frame(matrices, row_labels: Sequence[str], col_labels: Sequence[str], titles: Sequence[str],
                 max_side: int = MAX_PANEL_SIDE) -> tuple[pd.DataFrame, int]:
    """Long form of a stack of (n_q, n_k) matrices, one panel each; (frame, pooling factor).

    Columns: head (1-based panel number), panel (its title), query_pos, key_pos (first position of
    the tile), query, key (labels; position ranges when pooled), value (float32).
    """
    stack = np.asarray(matrices.detach().double().cpu().numpy() if hasattr(matrices, "detach") else matrices,
                       dtype=np.float64)
    h, n_q, n_k = stack.shape
    f = max(1, math.ceil(max(n_q, n_k) / max_side))
    rows, cols = unique_labels(list(row_labels)), unique_labels(list(col_labels))
    if f > 1:
        stack = np.stack([_pool(m, f, f) for m in stack])
        rows = [f"{i}–{min(i + f, n_q) - 1}" for i in range(0, n_q, f)]
        cols = [f"{j}–{min(j + f, n_k) - 1}" for j in range(0, n_k, f)]
    titles = list(titles)
    if len(set(titles)) < len(titles):     # the facet groups by title: keep every panel apart
        titles = [f"{title} ({i + 1})" for i, title in enumerate(titles)]
    pq, pk = stack.shape[1:]
    head, qi, ki = np.meshgrid(np.arange(h), np.arange(pq), np.arange(pk), indexing="ij")
    values = stack.ravel()
    # labels as categoricals (Arrow dictionaries: h x n x n rows repeat h titles and n tokens), the value in
    # float32 with its tooltip formatted by Vega: the payload of a rerun stays small
    frame = pd.DataFrame({
        "head": (head.ravel() + 1).astype(np.int16),
        "panel": pd.Categorical.from_codes(head.ravel(), categories=list(titles)),
        "query_pos": (qi.ravel() * f).astype(np.int16),
        "key_pos": (ki.ravel() * f).astype(np.int16),
        "query": pd.Categorical.from_codes(qi.ravel(), categories=list(dict.fromkeys(rows)))
        if len(set(rows)) == len(rows) else np.asarray(rows, dtype=object)[qi.ravel()],
        "key": pd.Categorical.from_codes(ki.ravel(), categories=list(dict.fromkeys(cols)))
        if len(set(cols)) == len(cols) else np.asarray(cols, dtype=object)[ki.ravel()],
        "value": values.astype(np.float32),
    })
    return frame, f


@chart_kind(fill=("selected",))
def small_multiples_kind(frame, *, columns: int, x_title: str, y_title: str, value_title: str, panel_title: str,
                         selectable: bool, show_labels: bool, panel_size: int, title_limit: int, domain: tuple,
                         spacing: int | None = None, legend_below: bool = False, aria: bool = True,
                         selected: int | None = None) -> alt.FacetChart:
    """``frame``: ``panels_frame``'s. Keys, queries and panels are ordered by their positions (``key_pos``,
    ``query_pos``, ``head``), not by lists of labels: a list sort is an ``indexof`` Vega evaluates per cell in
    its interpreter, and new labels (a new sentence) would change the spec. ``aria=False``: no screen-reader
    label per cell (``panels_frame`` rows above ``ui.charts.MAX_ARIA_CELLS``; the tooltip keeps every value)."""
    axis_x = alt.Axis(labelAngle=-60, labelFontSize=9, labelLimit=60, labels=show_labels, ticks=show_labels)
    axis_y = alt.Axis(labelFontSize=9, labelLimit=60, labels=show_labels, ticks=show_labels)
    tooltip = [alt.Tooltip("panel:N", title=panel_title), alt.Tooltip("query:N", title=y_title),
               alt.Tooltip("key:N", title=x_title), alt.Tooltip("value:Q", title=value_title, format=".4f")]
    base = alt.Chart(frame).mark_rect(aria=aria).encode(
        x=alt.X("key:N", sort=alt.EncodingSortField(field="key_pos", op="min"),
                title=x_title if show_labels else None, axis=axis_x),
        y=alt.Y("query:N", sort=alt.EncodingSortField(field="query_pos", op="min"),
                title=y_title if show_labels else None, axis=axis_y),
        color=alt.Color("value:Q", title=value_title,
                        scale=alt.Scale(domain=list(domain), scheme=WEIGHT_SCHEME, clamp=True),
                        legend=alt.Legend(orient="bottom") if legend_below else alt.Undefined),
        tooltip=tooltip,
    ).properties(width=panel_size, height=panel_size)
    if selectable:
        pick = alt.selection_point(name=HEAD_SELECTION, fields=["head"], on="click",
                                   value=None if selected is None else [{"head": selected}])
        base = base.add_params(pick)
    return base.facet(
        facet=alt.Facet("panel:N", sort=alt.EncodingSortField(field="head", op="min"), title=None,
                        header=alt.Header(labelFontSize=12 if panel_size >= 100 else 11,
                                          labelFontWeight="bold", labelLimit=title_limit)),
        columns=max(1, columns), **({} if spacing is None else {"spacing": spacing}),
    )


def small_multiples(matrices, row_labels: Sequence[str], col_labels: Sequence[str] | None = None, *,
                    titles: Sequence[str], columns: int = 4, x_title: str = "key", y_title: str = "query",
                    value_title: str = "weight", panel_title: str = "head", selected: int | None = None,
                    selectable: bool = True, panel_size: int = 150, title_limit: int = 220,
                    domain: tuple[float, float] = (0.0, 1.0), labels: bool | None = None,
                    spacing: int | None = None, legend_below: bool = False) -> Spec:
    """One small heatmap per matrix (every head, or every gallery pattern), same 0..1 colour scale.

    ``selectable``: clicking any cell of a panel selects that panel (selection "head", field "head",
    1-based). Panels are never dimmed (they are compared with each other); ``selected`` only sets
    the selection's initial value — mark the chosen panel in its title. ``labels``: token labels on the
    axes (None: up to 16 per axis); ``spacing``: pixels between panels (None: Vega-Lite's 20).
    """
    col_labels = row_labels if col_labels is None else col_labels
    frame, _ = panels_frame(matrices, row_labels, col_labels, titles)
    return small_multiples_kind(
        frame, columns=columns, x_title=x_title, y_title=y_title, value_title=value_title, panel_title=panel_title,
        selectable=selectable, show_labels=frame["query_pos"].nunique() <= 16 if labels is None else bool(labels),
        panel_size=panel_size, title_limit=title_limit, spacing=spacing, legend_below=legend_below,
        domain=tuple(float(d) for d in domain), aria=len(frame) <= MAX_ARIA_CELLS,
        selected=None if selected is None else int(selected))


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
        "label": [clip(s) for s in labels[:n_k] + labels[:n_q]],
        "x": np.concatenate([k[:, 0], q[:, 0]]),
        "y": np.concatenate([k[:, 1], q[:, 1]]),
        "weight": np.concatenate([w, np.full(n_q, np.nan)]),
        "exact": list(np.char.mod("%.4f", w)) + [""] * n_q,
        "chosen": [False] * n_k + [i == query for i in range(n_q)],
        "named": [i == int(np.argmax(w)) for i in range(n_k)] + [False] * n_q,   # the key labelled in the plane
    })


def equal_aspect(xs, ys, width: int, height: int, pad: float = 0.08) -> tuple[list[float], list[float]]:
    """x and y domains with the same data units per pixel, so distances in the plot are true
    distances in the plane (a PCA plane drawn stretched would mislead "close" and "far")."""
    xs, ys = np.asarray(xs, dtype=np.float64), np.asarray(ys, dtype=np.float64)
    cx, cy = (xs.max() + xs.min()) / 2, (ys.max() + ys.min()) / 2
    unit = max(float(np.ptp(xs)) / width, float(np.ptp(ys)) / height, 1e-9) * (1 + 2 * pad)
    return [cx - unit * width / 2, cx + unit * width / 2], [cy - unit * height / 2, cy + unit * height / 2]


def geometry_frames(queries, keys, tokens: Sequence[str], weights_row, query: int,
                    key_name: str, query_name: str) -> dict[str, pd.DataFrame]:
    """The frames ``geometry_chart`` draws: the keys, the other queries, the chosen query, the links."""
    frame = geometry_frame(queries, keys, tokens, weights_row, query)
    frame["kind_name"] = np.where(frame["kind"] == "key", key_name, query_name)
    keys_f = frame[frame["kind"] == "key"]
    chosen = frame[frame["chosen"]]
    qx, qy = (float(chosen["x"].iloc[0]), float(chosen["y"].iloc[0])) if len(chosen) else (0.0, 0.0)
    link = pd.DataFrame({
        "pos": np.repeat(keys_f["pos"].to_numpy(), 2),
        "x": np.ravel(np.column_stack([np.full(len(keys_f), qx), keys_f["x"].to_numpy()])),
        "y": np.ravel(np.column_stack([np.full(len(keys_f), qy), keys_f["y"].to_numpy()])),
        "weight": np.repeat(keys_f["weight"].to_numpy(), 2),
        "token": np.repeat(keys_f["token"].to_numpy(), 2),
        "exact": np.repeat(keys_f["exact"].to_numpy(), 2),
    })
    return {"keys": keys_f, "others": frame[(frame["kind"] == "query") & ~frame["chosen"]], "chosen": chosen,
            "link": link}


@chart_kind(fill=("title", "x_title", "y_title", "x_domain", "y_domain"))
def geometry_kind(data, *, key_name: str, query_name: str, weight_title: str, token_title: str, width: int,
                  height: int, title: str = "", x_title: str = "x", y_title: str = "y", x_domain=(0, 1),
                  y_domain=(0, 1)) -> alt.LayerChart:
    x = alt.X("x:Q", title=x_title, scale=alt.Scale(domain=x_domain, nice=False, zero=False))
    y = alt.Y("y:Q", title=y_title, scale=alt.Scale(domain=y_domain, nice=False, zero=False))
    tip = [alt.Tooltip("kind_name:N", title=""), alt.Tooltip("token:N", title=token_title),
           alt.Tooltip("exact:N", title=weight_title)]
    shape = alt.Shape("kind_name:N", title="", scale=alt.Scale(domain=[key_name, query_name],
                                                              range=["square", "circle"]))
    colour = alt.Color("kind_name:N", title="", scale=alt.Scale(domain=[key_name, query_name],
                                                               range=[KEY_COLOUR, QUERY_COLOUR]))
    keys, chosen = alt.Chart(data["keys"]), alt.Chart(data["chosen"])
    link = alt.Chart(data["link"]).mark_line(color=QUERY_COLOUR).encode(
        x=x, y=y, detail="pos:N",
        opacity=alt.Opacity("weight:Q", scale=alt.Scale(domain=[0, 1], range=[0.08, 1]), legend=None),
        strokeWidth=alt.StrokeWidth("weight:Q", scale=alt.Scale(domain=[0, 1], range=[0.5, 7]), legend=None),
        tooltip=[alt.Tooltip("token:N", title=token_title), alt.Tooltip("exact:N", title=weight_title)])
    rings = alt.Chart(data["others"]).mark_point(filled=False, size=45, opacity=0.6, strokeWidth=1).encode(
        x=x, y=y, shape=shape, color=colour, tooltip=tip)
    key_pts = keys.mark_point(filled=True, size=80, opacity=1).encode(x=x, y=y, shape=shape, color=colour, tooltip=tip)
    q_pt = chosen.mark_point(filled=True, size=150, opacity=1, stroke="white", strokeWidth=1).encode(
        x=x, y=y, shape=shape, color=colour, tooltip=tip)
    # labels: the chosen query (left of its point) and its most weighted key (right): more would collide in a
    # 300 px plane; every point names its token in the tooltip
    key_text = keys.transform_filter(alt.datum.named).mark_text(dx=8, align="left", fontSize=11,
                                                                 color=KEY_COLOUR).encode(
        x=x, y=y, text="label:N", tooltip=tip)
    q_text = chosen.mark_text(dx=-9, dy=-9, align="right", fontSize=12, fontWeight="bold",
                              color=QUERY_COLOUR).encode(x=x, y=y, text="label:N", tooltip=tip)
    return alt.layer(link, rings, key_pts, q_pt, key_text, q_text).properties(
        title=alt.TitleParams(title, anchor="start", fontSize=12), width=width, height=height,
        padding=PLANE_PADDING)


def geometry_chart(queries, keys, tokens: Sequence[str], weights_row, query: int, *, title: str,
                   x_title: str, y_title: str, key_name: str, query_name: str, weight_title: str,
                   token_title: str, width: int = 420, height: int = 380) -> Spec:
    """Keys (squares) and queries (circles) of one head in one PCA plane, equal scales on both axes;
    the chosen query is filled and labelled, the other queries are small rings; a line from the
    chosen query to every key, as thick and opaque as its attention weight."""
    data = geometry_frames(queries, keys, tokens, weights_row, query, key_name, query_name)
    points = pd.concat([data["keys"], data["others"], data["chosen"]])
    dx, dy = equal_aspect(points["x"], points["y"], width, height)
    return geometry_kind(data, key_name=key_name, query_name=query_name, weight_title=weight_title,
                         token_title=token_title, width=width, height=height, title=title, x_title=x_title,
                         y_title=y_title, x_domain=dx, y_domain=dy)


def values_frames(values, tokens: Sequence[str], weights_row, value_name: str,
                  output_name: str) -> dict[str, pd.DataFrame]:
    """The value points (sized by the weights) and the output, their weighted mean, in the same plane."""
    v = as_numpy(values)
    w = np.asarray(weights_row, dtype=np.float64).reshape(-1)
    labels = unique_labels(list(tokens))
    points = pd.DataFrame({"x": v[:, 0], "y": v[:, 1], "token": labels, "label": [clip(s) for s in labels],
                           "weight": w, "exact": np.char.mod("%.4f", w), "kind": value_name,
                           "named": np.arange(len(w)) == int(np.argmax(w))})   # the value labelled in the plane
    out = w @ v                                                # the output, in the same plane
    return {"values": points, "star": pd.DataFrame({"x": [out[0]], "y": [out[1]], "kind": [output_name],
                                                    "label": [output_name]})}


@chart_kind(fill=("title", "x_title", "y_title", "x_domain", "y_domain"))
def values_kind(data, *, weight_title: str, token_title: str, width: int, height: int, title: str = "",
                x_title: str = "x", y_title: str = "y", x_domain=(0, 1), y_domain=(0, 1)) -> alt.LayerChart:
    tip = [alt.Tooltip("token:N", title=token_title), alt.Tooltip("exact:N", title=weight_title)]
    x = alt.X("x:Q", title=x_title, scale=alt.Scale(domain=x_domain, nice=False, zero=False))
    y = alt.Y("y:Q", title=y_title, scale=alt.Scale(domain=y_domain, nice=False, zero=False))
    points, star = alt.Chart(data["values"]), alt.Chart(data["star"])
    pts = points.mark_circle(color=VALUE_COLOUR).encode(
        x=x, y=y, size=alt.Size("weight:Q", scale=alt.Scale(domain=[0, 1], range=[20, 600]), legend=None),
        opacity=alt.value(0.8), tooltip=tip)
    text = points.transform_filter(alt.datum.named).mark_text(dx=8, align="left", fontSize=11,
                                                              color=VALUE_COLOUR).encode(
        x=x, y=y, text="label:N", tooltip=tip)
    out_pt = star.mark_point(shape="diamond", filled=True, size=220, color=QUERY_COLOUR).encode(
        x=x, y=y, tooltip=[alt.Tooltip("kind:N", title="")])
    out_text = star.mark_text(dx=-10, dy=-10, align="right", fontWeight="bold", color=QUERY_COLOUR).encode(
        x=x, y=y, text="label:N")
    return alt.layer(pts, text, out_pt, out_text).properties(
        title=alt.TitleParams(title, anchor="start", fontSize=12), width=width, height=height,
        padding=PLANE_PADDING)


def values_chart(values, tokens: Sequence[str], weights_row, *, title: str, x_title: str, y_title: str,
                 value_name: str, output_name: str, weight_title: str, token_title: str,
                 width: int = 420, height: int = 380) -> Spec:
    """The values of one head in their own PCA plane, sized by the chosen query's weights, and the
    head's output for that query: the weighted mean of the value points (a star)."""
    data = values_frames(values, tokens, weights_row, value_name, output_name)
    xs, ys = (np.append(data["values"][c], data["star"][c]) for c in ("x", "y"))
    dx, dy = equal_aspect(xs, ys, width, height)
    return values_kind(data, weight_title=weight_title, token_title=token_title, width=width, height=height,
                       title=title, x_title=x_title, y_title=y_title, x_domain=dx, y_domain=dy)


# ---- LEGACY names still used by app_pages/analysis.py (removed when that page is converted) ----
small_multiples_spec = small_multiples
geometry_spec = geometry_chart

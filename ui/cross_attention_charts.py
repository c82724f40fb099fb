"""Charts of the cross-attention page (arrays in, ``alt.Chart`` out, no Streamlit calls).

The heatmaps (target x source, words x patches, gate values) come from ``ui.charts.heatmap``;
here is the picture a word looks at: the synthetic image drawn pixel by pixel, with the word's
attention over the patches laid on top (unattended patches shaded), and the patches the word
names outlined.
"""
from __future__ import annotations

import altair as alt
import numpy as np
import pandas as pd

from .charts import Spec, as_numpy, bars_frame, chart_kind

NAMED_STROKE = "#e66101"   # orange outline: the patches the word names (where it "should" look)
SHADE = 0.7                # darkest shade, over a patch with no attention (sqrt keeps mid weights visible)


def _hex(rgb: np.ndarray) -> np.ndarray:
    """(..., 3) floats in [0, 1] -> '#rrggbb' strings."""
    v = np.clip(np.round(np.asarray(rgb, dtype=np.float64) * 255), 0, 255).astype(int)
    return np.array([f"#{r:02x}{g:02x}{b:02x}" for r, g, b in v.reshape(-1, 3)])


def image_attention_frame(image, weights, patch: int, named=None) -> pd.DataFrame:
    """Long-form data of the picture: one row per pixel (part "pixel", its colour) and one per
    patch (part "patch": its weight, its shade, whether the word names it), in image coordinates
    (x right, y down; cells span [x0, x1) x [y0, y1))."""
    img = np.asarray(image.detach().cpu().numpy() if hasattr(image, "detach") else image, dtype=np.float64)
    h, w, _ = img.shape
    yy, xx = np.meshgrid(np.arange(h), np.arange(w), indexing="ij")
    pixels = pd.DataFrame({"part": "pixel", "x0": xx.ravel(), "x1": xx.ravel() + 1, "y0": yy.ravel(),
                           "y1": yy.ravel() + 1, "rgb": _hex(img.reshape(-1, 3)), "patch": -1,
                           "weight": np.nan, "shade": 0.0, "named": False, "exact": ""})
    wts = as_numpy(np.asarray(weights, dtype=np.float64).reshape(1, -1))[0]
    rows, cols = -(-h // patch), -(-w // patch)
    if len(wts) != rows * cols:
        raise ValueError(f"{len(wts)} weights for a {rows} x {cols} patch grid")
    r, c = np.divmod(np.arange(rows * cols), cols)
    top = wts.max() if len(wts) and wts.max() > 0 else 1.0
    named = np.zeros(rows * cols, dtype=bool) if named is None else np.asarray(named, dtype=bool)
    patches = pd.DataFrame({"part": "patch", "x0": c * patch, "x1": np.minimum((c + 1) * patch, w),
                            "y0": r * patch, "y1": np.minimum((r + 1) * patch, h), "rgb": "#000000",
                            "patch": np.arange(rows * cols), "weight": wts,
                            "shade": SHADE * (1 - np.sqrt(np.clip(wts / top, 0, 1))), "named": named,
                            "exact": np.char.mod("%.6g", wts)})
    return pd.concat([pixels, patches], ignore_index=True)


@chart_kind(fill=("title",))
def image_attention_chart(frame, *, image_height: int, image_width: int, numbers: bool, picture_title: str,
                          weight_title: str, patch_title: str, size: int = 260,
                          title: str = "") -> alt.HConcatChart:
    """The picture as drawn (left) and the same picture with one word's attention on top (right).

    Right: patches the word barely looks at are shaded dark (shade = 0.7 * (1 - sqrt(w / max w)));
    the patches the word names are outlined in orange; the tooltip gives each patch's exact
    weight, and with ``numbers`` the weights are printed in the patches.
    """
    xs = alt.Scale(domain=[0, image_width], nice=False)
    ys = alt.Scale(domain=[image_height, 0], nice=False)          # image rows go down
    base = alt.Chart(frame).encode(x=alt.X("x0:Q", scale=xs, axis=None), x2="x1:Q",
                                   y=alt.Y("y0:Q", scale=ys, axis=None), y2="y1:Q")
    pixels = base.transform_filter(alt.datum.part == "pixel").mark_rect().encode(
        color=alt.Color("rgb:N", scale=None, legend=None))
    patches = base.transform_filter(alt.datum.part == "patch")
    tooltip = [alt.Tooltip("patch:Q", title=patch_title), alt.Tooltip("exact:N", title=weight_title)]
    shade = patches.mark_rect(color="black").encode(
        opacity=alt.Opacity("shade:Q", scale=None, legend=None), tooltip=tooltip)
    outline = patches.mark_rect(filled=False).encode(
        stroke=alt.when(alt.datum.named).then(alt.value(NAMED_STROKE)).otherwise(alt.value("#ffffff")),
        strokeWidth=alt.when(alt.datum.named).then(alt.value(2.5)).otherwise(alt.value(0.4)),
        tooltip=tooltip)
    grid = patches.mark_rect(filled=False, stroke="#9e9e9e", strokeWidth=0.4)
    layers = [pixels, shade, outline]
    if numbers:
        layers.append(alt.Chart(frame).transform_filter(alt.datum.part == "patch").transform_calculate(
            cx="(datum.x0 + datum.x1) / 2", cy="(datum.y0 + datum.y1) / 2",
            label="format(datum.weight, '.2f')",
        ).mark_text(fontSize=12, fontWeight="bold", color="white").encode(
            x=alt.X("cx:Q", scale=xs, axis=None), y=alt.Y("cy:Q", scale=ys, axis=None),
            text="label:N", tooltip=tooltip))
    height = size * image_height // max(image_width, 1)
    picture = alt.layer(pixels, grid).properties(title=picture_title, width=size, height=height)
    spot = alt.layer(*layers).properties(title=title, width=size, height=height)
    return alt.hconcat(picture, spot, spacing=12).configure_view(stroke=None)


def image_attention(image, weights, patch: int, named=None, *, title: str, picture_title: str,
                    weight_title: str, patch_title: str, size: int = 260) -> Spec:
    """The picture and one word's attention over its patches (``image_attention_chart``); the weights are
    printed in the patches when there are at most 16."""
    frame = image_attention_frame(image, weights, patch, named)
    return image_attention_chart(frame, image_height=int(frame["y1"].max()), image_width=int(frame["x1"].max()),
                                 numbers=bool(frame["patch"].max() < 16), picture_title=picture_title,
                                 weight_title=weight_title, patch_title=patch_title, size=size, title=title)


@chart_kind(fill=("order", "height", "title"))
def row_bars_chart(frame, *, value_title: str, label_title: str, order=(), height: int = 220,
                   title: str | None = None) -> alt.Chart:
    """One row of weights as horizontal bars: a label per bar, never hidden (a phone keeps every source token
    the notices quote), the highlighted bar orange, the exact weight in the tooltip."""
    chart = alt.Chart(frame).mark_bar().encode(
        y=alt.Y("label:N", sort=order, title=label_title, axis=alt.Axis(labelOverlap=False, labelLimit=120)),
        x=alt.X("value:Q", title=value_title, scale=alt.Scale(domain=[0, 1])),
        color=alt.when(alt.datum.highlight).then(alt.value(NAMED_STROKE)).otherwise(alt.value("#3b528b")),
        tooltip=[alt.Tooltip("label:N", title=label_title), alt.Tooltip("exact:N", title=value_title)],
    ).properties(height=height, autosize=alt.AutoSizeParams(type="fit-x", contains="padding"))
    return chart.properties(title=title) if title else chart


def row_bars(values, labels, *, value_title: str, label_title: str, highlight: int | None = None,
             title: str | None = None) -> Spec:
    """``row_bars_chart`` of one row of weights over ``labels`` (18 px a bar)."""
    frame = bars_frame(values, labels, highlight)
    return row_bars_chart(frame, value_title=value_title, label_title=label_title, order=list(frame["label"]),
                          height=max(120, 18 * len(frame)), title=title)

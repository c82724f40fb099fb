"""The positional page's sections: the computations cached on plain parameters, what the table and the shuffle test
drew (``TableView``, ``ShuffleView``) for the later steps, and each section's controls, charts and what to notice (the
sinusoidal table, a column pair against a counter bit, similarity by offset, the shuffle test, the three encodings'
similarity of positions, rotary live) with the pitfalls' demos."""
from __future__ import annotations

import math
import re
import textwrap
from typing import NamedTuple

import numpy as np
import pandas as pd
import streamlit as st
import torch

from attention_core.labs import positional as pl
from attention_core.positional import rotary_embedding, sinusoidal_encoding
from serving.cache import MB, cache_data
from ui import anatomy, controls, presenter
from ui import format as fmt
from ui import positional_charts as pc
from ui.charts import attention_heatmap, heatmap, unique_labels
from ui.i18n import lesson, t

MAX_TOKENS = 24     # shuffle-test sentences: two heatmaps stay readable
D_SHUFFLE = 32      # width of the shuffle test's embeddings and attention
GAIN = 2.0          # W_Q, W_K of the untrained layer x2: weights visibly uneven (see make_self_attention)
D_ROT = 16          # width of the rotary demo's q and k
N_COMPARE = 32      # positions in the comparison heatmaps
BASES = (10, 100, 1000, 10000, 100000)


# ------------------------------------------------------------------ cached computations
@cache_data(max_entries=64, max_bytes=8 * MB)
def table(n: int, d: int, base: float) -> pl.EncodingTable:
    return pl.encoding_table(n, d, base)


@cache_data(max_entries=64, max_bytes=8 * MB)
def shuffle_all(tokens: tuple[str, ...], seed: int, shuffle_seed: int) -> dict[str, pl.ShuffleResult]:
    """The shuffle test of the sentence with each encoding of ``pl.ENCODINGS``."""
    return {enc: pl.shuffle_test(tokens, D_SHUFFLE, enc, seed=seed, shuffle_seed=shuffle_seed, gain=GAIN)
            for enc in pl.ENCODINGS}


@cache_data(max_entries=32, max_bytes=8 * MB)
def comparison(n: int, base: float, seed: int) -> dict[str, pl.SimilarityGrid]:
    return pl.similarity_grids(n, D_ROT, base, seed)


def lines(title: str, width: int = 44) -> list[str]:
    """A chart title as short lines (Vega draws a list as lines): cut after "—" / "——" / "，", then long English
    parts at spaces, so a title fits a phone's column instead of ending in "…"."""
    out = []
    for part in re.split(r"(?<=—) |(?<=——)|(?<=，)", title):
        out += textwrap.wrap(part, width) if " " in part else [part]
    return [line for line in out if line]


def sci(x: float) -> str:
    return "0" if x == 0 else f"{x:.1e}"


def signed(x: float) -> str:
    """A metric's delta: rounding-size differences in scientific notation, never "-0.0000"."""
    return "0" if x == 0 else (f"{x:+.1e}" if abs(x) < 1e-4 else f"{x:+.4f}")


class TableView(NamedTuple):
    """What the table tab chose and drew: the later steps (and tabs) read it."""
    n: int
    d: int
    base: int
    pe: np.ndarray           # (n, d) the table
    periods: np.ndarray      # (ceil(d/2),) positions per turn of each column pair
    picked: int | None       # the clicked row of the table, if any


class ShuffleView(NamedTuple):
    """The shuffle test as drawn, for its notice."""
    gaps: dict[str, float]   # encoding -> largest gap
    labels: list[str]        # the shuffled sentence, unique labels
    row: int                 # the clicked query of the shuffled order
    partner: int             # its strongest key
    w_shuf: np.ndarray
    w_orig: np.ndarray
    perm: list[int]
    enc: str


# ------------------------------------------------------------------ 1. the table
def table_section() -> TableView:
    c1, c2, c3 = st.columns(3)
    n = c1.slider(t("positional.n"), 2, 128, 48, key="n", bind="query-params", help=t("positional.n_help"))
    d = c2.slider(t("positional.d"), 1, 128, 64, key="d", bind="query-params", help=t("positional.d_help"))
    base = c3.select_slider(t("positional.base"), BASES, value=10000, key="base", bind="query-params",
                            help=t("positional.base_help"))
    base = int(base) if base in BASES else 10000
    pe, bits, per = (x.numpy() for x in table(n, d, float(base)))
    positions = [str(i) for i in range(n)]
    dims = [str(j) for j in range(d)]
    ref_before = controls.kept_row("row_pe", n)

    left, right = st.columns([3, 1])
    with left:
        spec = heatmap(pe, positions, dims, kind="scores", domain=(-1.0, 1.0),
                       title=t("positional.pe_title", n=n, d=d), x_title=t("positional.dimension"),
                       y_title=t("positional.position"), value_title=t("positional.value"), show_numbers=False,
                       selected_row=ref_before)
        picked = anatomy.show_matrix(spec, pe, positions, dims, key="pe", file_name="pe.csv")
    with right:
        bit_cols = [str(b) for b in range(bits.shape[1])]
        anatomy.show_chart(heatmap(bits, positions, bit_cols, kind="weights", show_numbers=False,
                                   title=t("positional.bits_title"), x_title=t("positional.bit_axis"),
                                   y_title=t("positional.position"), value_title=t("positional.bit_value"),
                                   selectable=False), key="bits")
    st.caption(t("positional.table_caption"))
    return TableView(n, d, base, pe, per, picked)


def counter_section(view: TableView) -> tuple[int, int]:
    """One column pair next to the counter bit of about the same period: (pair, bit)."""
    pe, per, n, d = view.pe, view.periods, view.n, view.d
    pairs = math.ceil(d / 2)
    i = int(st.number_input(t("positional.pair"), 0, 63, 2, key="pair", bind="query-params",   # "+": the next pair
                            help=t("positional.pair_help")))
    if i >= pairs:
        anatomy.problem("positional.err_pair", i=i, pairs=pairs, d=d)
        i = pairs - 1
    b = pl.closest_bit(float(per[i]))
    has_cos = 2 * i + 1 < d
    if not has_cos:
        st.caption(t("positional.no_cos", d=d))
    curves3 = (pe[:, 2 * i], pe[:, 2 * i + 1] if has_cos else [float("nan")] * n,
               pl.binary_counter(n, b + 1)[:, b])
    series = [f"sin · {2 * i}", f"cos · {2 * i + 1}" if has_cos else "—", t("positional.bit", b=b)]
    anatomy.show_chart(pc.wave_chart(
        *curves3, series=series, x_title=t("positional.position"), y_title=t("positional.value"),
        title=lines(t("positional.wave_title", i=i, period=fmt.fixed(float(per[i]), 1), b=b,
                      bit_period=2 ** (b + 1)))),
        key="wave")
    return i, b


def offset_section(view: TableView, i: int, b: int) -> None:
    """Similarity by offset, for the clicked position and one more; what to notice in the table."""
    pe, per, n, d = view.pe, view.periods, view.n, view.d
    ref = controls.keep_row("row_pe", view.picked, n, n // 4)
    other = (ref + n // 2) % n
    curves = pl.offset_curves(torch.from_numpy(pe), [ref, other])
    anatomy.show_chart(pc.offset_chart(
        curves, labels=[t("positional.ref", p=ref), t("positional.ref", p=other)],
        x_title=t("positional.offset"), y_title=t("positional.dot"), title=lines(t("positional.offset_title"))),
        key="offset")
    gap = pl.curve_gap(curves[0], curves[1])
    k = shared_offset(n, ref, other)
    dot_a, dot_b = float(curves[0].dots[ref + k]), float(curves[1].dots[other + k])

    items = [t("positional.notice_bits", b=b, every=2 ** b, i=i, period=fmt.fixed(float(per[i]), 1),
               slow=fmt.fixed(float(per[-1]), 0), n=n),
             t("positional.notice_offset", a=ref, b=other, k=f"{k:+d}".replace("-", "−"), dot_a=fmt.fixed(dot_a, 4),
               dot_b=fmt.fixed(dot_b, 4), gap=sci(gap))]
    if d % 2:
        items.append(t("positional.notice_odd", d=d, gap=sci(gap)))
    else:
        norms = (pe.astype("float64") ** 2).sum(1) ** 0.5
        items.append(t("positional.notice_norm", d=d, half=fmt.fixed(math.sqrt(d / 2), 3),
                       lo=fmt.fixed(float(norms.min()), 3), hi=fmt.fixed(float(norms.max()), 3)))
    anatomy.notice(items)


def shared_offset(n: int, a: int, b: int) -> int:
    """An offset k that both positions a and b can move by and stay among the n positions, for the notice's
    PE[a]·PE[a+k] = PE[b]·PE[b+k]: 3 where it fits, else 1, else backwards; 0 only when n = 2 leaves no
    other (the old rule quoted PE[3]·PE[3+1] = nan for n = 4)."""
    return next((k for k in (3, 1, -1, -3) if 0 <= a + k < n and 0 <= b + k < n), 0)


# ------------------------------------------------------------------ 2. the shuffle test
def shuffle_section() -> tuple[int, ShuffleView | None]:
    """The test, after its question: the seed (the comparison tab uses it) and what was drawn."""
    anatomy.explanation(lesson("positional/shuffle"))
    tokens = controls.sentence(key="text", max_tokens=MAX_TOKENS, min_tokens=2)
    enc = st.segmented_control(t("positional.encoding"), list(pl.ENCODINGS), default="none", required=True,
                               format_func=lambda e: t(f"positional.enc_{e}"), key="enc", bind="query-params")
    enc = enc if enc in pl.ENCODINGS else "none"
    c2, c3 = st.columns(2)
    shuffle_seed = int(c2.number_input(t("positional.shuffle_seed"), 0, 9999, 1, key="shuf",
                                       bind="query-params", help=t("positional.shuffle_seed_help")))
    with c3:
        seed = controls.seed()
    if tokens is None:
        return seed, None
    toks = tuple(tokens)
    res = shuffle_all(toks, seed, shuffle_seed)
    presenter.shows(pl.attend_with_positions, pl.shuffle_test)      # what the test ran (``shuffle_all``)
    cur = res[enc]
    perm = cur.perm.tolist()
    w_orig, w_shuf = cur.original.weights.numpy(), cur.shuffled.weights.numpy()
    shuffled = [tokens[p] for p in perm]
    if shuffled == tokens:
        anatomy.problem("positional.err_same_order")

    gaps = {e: float(res[e].gap.max()) for e in pl.ENCODINGS}
    st.markdown(f"**{t('positional.gap_heading')}**")
    anatomy.show_chart(pc.gap_chart(
        [gaps[e] for e in pl.ENCODINGS], [t(f"positional.enc_{e}") for e in pl.ENCODINGS],
        x_title=t("positional.gap_axis"), y_title=t("positional.gap_axis"),
        highlight=pl.ENCODINGS.index(enc)), key="gaps")

    row_before = controls.kept_row("row_shuf", len(tokens))
    left, right = st.columns(2)
    with left:
        anatomy.show_chart(attention_heatmap(w_orig, tokens, title=t("positional.w_original"), selectable=False),
                           key="w_orig")
    with right:
        spec = attention_heatmap(w_shuf, shuffled, title=t("positional.w_shuffled"), selected_row=row_before)
        picked = anatomy.show_matrix(spec, w_shuf, shuffled, key="w_shuf", file_name="w_shuf.csv")
    row = controls.keep_row("row_shuf", picked, len(tokens), 0)
    st.caption(t("positional.gap_row_caption", enc=t(f"positional.enc_{enc}")))
    anatomy.show_chart(pc.gap_chart(
        cur.gap.numpy(), unique_labels(shuffled), x_title=t("positional.gap_axis"),
        y_title=t("positional.gap_axis"), highlight=row), key="gap_bars")

    labels = unique_labels(shuffled)
    j = int(w_shuf[row].argmax())          # the picked word's strongest partner, in both orders
    return seed, ShuffleView(gaps, labels, row, j, w_shuf, w_orig, perm, enc)


def shuffle_notice(v: ShuffleView) -> None:
    gaps, labels, row, j, w_shuf, w_orig, perm, enc = v
    anatomy.notice([
        t("positional.notice_none", gap=sci(gaps["none"]), sin=fmt.fixed(gaps["sinusoidal"], 3),
          rot=fmt.fixed(gaps["rotary"], 3), learned=fmt.fixed(gaps["learned"], 3)),
        t("positional.notice_pair", q=anatomy.md_escape(labels[row]), k=anatomy.md_escape(labels[j]),
          shuf=fmt.fixed(float(w_shuf[row, j]), 4), orig=fmt.fixed(float(w_orig[perm[row], perm[j]]), 4),
          enc=t(f"positional.enc_{enc}")),
        t("positional.notice_learned", learned=fmt.fixed(gaps["learned"], 3)),
    ])


# ------------------------------------------------------------------ 3. learned vs sinusoidal vs rotary
def compare_grids(base: int, seed: int) -> dict[str, pl.SimilarityGrid]:
    st.markdown(lesson("positional/compare"))
    grids = comparison(N_COMPARE, float(base), seed)
    what = st.segmented_control(t("positional.compare_pick"), list(pl.GRIDS), default="rotary", required=True,
                                format_func=lambda e: t(f"positional.grid_{e}"), key="cmp",
                                bind="query-params")
    what = what if what in pl.GRIDS else "rotary"
    positions = [str(i) for i in range(N_COMPARE)]
    left, right = st.columns([3, 2])
    with left:
        anatomy.show_chart(heatmap(
            grids[what].similarity.numpy(), positions, kind="scores", domain=(-1.0, 1.0), show_numbers=False,
            title=t(f"positional.grid_{what}_title"), x_title=t("positional.position_n"),
            y_title=t("positional.position_m"), value_title=t("positional.similarity"), selectable=False),
            key="cmp_grid")
    with right:
        st.markdown(f"**{t('positional.toeplitz_heading')}**")
        anatomy.show_chart(pc.gap_chart(
            [grids[e].toeplitz_gap for e in pl.GRIDS], [t(f"positional.grid_{e}") for e in pl.GRIDS],
            x_title=t("positional.toeplitz_axis"), y_title=t("positional.toeplitz_axis"),
            highlight=pl.GRIDS.index(what)), key="toeplitz")
        st.caption(t("positional.toeplitz_caption"))
    return grids


def rotary_section(base: int, seed: int, grids: dict[str, pl.SimilarityGrid]) -> None:
    st.subheader(t("positional.rotary_live"))
    c1, c2, c3 = st.columns(3)
    m = c1.slider(t("positional.m"), 0, 200, 3, key="m", bind="query-params")
    j = c2.slider(t("positional.j"), 0, 200, 7, key="j", bind="query-params")
    s = c3.slider(t("positional.shift"), 0, 1000, 100, key="s", bind="query-params")
    q, k = pl.random_qk(D_ROT, seed)
    rot, rot_s = pl.rotary_score(q, k, m, j, base), pl.rotary_score(q, k, m + s, j + s, base)
    add, add_s = pl.additive_score(q, k, m, j), pl.additive_score(q, k, m + s, j + s)
    cols = st.columns(4)
    cols[0].metric(t("positional.rot_score", m=m, j=j), fmt.fixed(rot, 4))
    cols[1].metric(t("positional.rot_score", m=m + s, j=j + s), fmt.fixed(rot_s, 4), delta=signed(rot_s - rot),
                   delta_color="off")
    cols[2].metric(t("positional.add_score", m=m, j=j), fmt.fixed(add, 4))
    cols[3].metric(t("positional.add_score", m=m + s, j=j + s), fmt.fixed(add_s, 4), delta=signed(add_s - add),
                   delta_color="off")
    left, right = st.columns([2, 3])
    with left:   # the first pair turns by theta_0 = base^0 = 1 radian per position
        plane = pc.rotation_chart(
            q[:2], k[:2], {"q": float(m), "k": float(j), "q_shift": float(m + s), "k_shift": float(j + s)},
            labels={"q": t("positional.arrow_q", m=m), "k": t("positional.arrow_k", j=j),
                    "q_shift": t("positional.arrow_q", m=m + s), "k_shift": t("positional.arrow_k", j=j + s)},
            title=t("positional.rotation_title"))
        anatomy.show_chart(plane, key="rotation", width="content")      # square: its own pixel width
        st.caption(t("positional.rotation_caption"))
    with right:
        st.markdown(lesson("positional/table"))
    rq = rotary_embedding(q.unsqueeze(0), torch.tensor([m]), base)[0]
    anatomy.notice([
        t("positional.notice_rotary", m=m, j=j, s=s, rot=fmt.fixed(rot, 4), rot_s=fmt.fixed(rot_s, 4),
          diff=sci(abs(rot_s - rot))),
        t("positional.notice_added", add=fmt.fixed(add, 4), add_s=fmt.fixed(add_s, 4)),
        t("positional.notice_norm_kept", before=fmt.fixed(float(q.norm()), 4), after=fmt.fixed(float(rq.norm()), 4)),
        t("positional.notice_grids", sin=sci(grids["sinusoidal"].toeplitz_gap),
          learned=fmt.fixed(grids["learned"].toeplitz_gap, 2), rot=sci(grids["rotary"].toeplitz_gap),
          added=fmt.fixed(grids["added"].toeplitz_gap, 2)),
    ])


# ------------------------------------------------------------------ pitfalls
def odd_d_demo(d: int) -> None:
    err = pl.tutorial_error(4, d)
    if err is None:
        st.caption(t("positional.odd_ok", d=d))
    else:
        st.error(t("positional.odd_error", d=d, err=err), icon=":material/error:")
        st.success(t("positional.odd_fixed", d=d, shape=f"{tuple(sinusoidal_encoding(4, d).shape)}"),
                   icon=":material/check_circle:")


def scale_demo(d: int) -> None:
    rows = []
    for recipe in pl.EMBEDDING_RECIPES:
        r = pl.embedding_scale(recipe, d)
        rows.append({t("positional.recipe"): t(f"positional.recipe_{recipe}"),
                     t("positional.token_norm"): round(r.token_norm, 2),
                     t("positional.position_norm"): round(r.position_norm, 2),
                     t("positional.ratio"): round(r.ratio, 3)})
    st.table(pd.DataFrame(rows), hide_index=True, border="horizontal")     # wraps on a phone

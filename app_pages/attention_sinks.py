"""Sliding windows and attention sinks: how far stacked windows reach, the first token as a parking place for
attention, and streaming with a rolling cache that evicts the first tokens or keeps 4 sinks (StreamingLLM).

The receptive field is computed by composing the window masks (attention_core/labs/attention_sinks.py); the
trained model is the recipe ``sinks_lm`` (attention_core/models/attention_sinks_lm.py), whose recorded figures
(first-token share per head, streaming losses at 8 x the training length) are in its checkpoint's meta; the
streaming losses for every cache size and length the sliders offer are recorded over 16 held-out streams by
``python -m attention_core.labs.attention_sinks`` (assets/models/sinks_lm_streams.json), and for the cache size
shown the rolling cache (attention_core/streaming.py) is fed token by token past its first evictions on the server
and checked against the all-at-once computation that recorded them. The window part, the head view and the streaming
controls are fragments: their controls rerun only their part of the page.
"""
from __future__ import annotations

import streamlit as st

from attention_core.labs import attention_sinks as lab
from attention_core.masks import sliding_window_mask
from attention_core.models import attention_sinks_lm as sinks_lm
from attention_core.streaming import StreamingCache, StreamingDecoder
from ui import anatomy, models, presenter
from ui import attention_sinks_sections as sec
from ui.attention_sinks_charts import method_bars, method_frame
from ui.format import fixed, sig
from ui.i18n import t

NS = "attention_sinks"


# ------------------------------------------------------------------ the parts whose controls rerun only them
@st.fragment
def window_part() -> None:
    """The window controls, the question and the pictures that answer it: a change reruns only this part."""
    chosen = sec.window_controls()
    sec.window_question(chosen)
    sec.window_evidence(chosen)


@st.fragment
def head_part(lm, best: tuple[int, int], stamp: float) -> None:
    """The head, layer and seed controls and what they show: a change reruns (and redraws) only this part."""
    layer, head, seed = sec.head_controls(lm, best)
    shown = sec.view(seed, stamp)
    sec.head_evidence(layer, head, shown)
    sec.why_section(layer, head, shown)


@st.fragment
def live_section(stamp: float, meta: dict) -> None:
    """The cache and length controls, the recorded grid's cell and the token-by-token check: a change reruns
    (and redraws) only this part."""
    st.markdown(f"**{t(f'{NS}.live_heading')}**")
    a, b = st.columns(2)
    with a:
        cache = int(st.select_slider(t(f"{NS}.ctl_cache"), options=sec.CACHES, value=16, key="cache",
                                     bind="query-params"))
    with b:
        length = int(st.select_slider(t(f"{NS}.ctl_length"), options=sec.LENGTHS, value=96, key="length",
                                      bind="query-params"))
    grid = sec.recorded_grid(meta)
    if isinstance(grid, models.Unavailable):
        models.show_unavailable(grid)
    else:
        L, labels, seeds = grid["loss"][lab.cell(length, cache)], sec.method_labels(), grid["seeds"]
        anatomy.show_chart(method_bars(method_frame(L, sec.METHODS, labels, "window"),
                                       x_title=t(f"{NS}.axis_loss"), y_title=t(f"{NS}.axis_method"), order=labels,
                                       title=t(f"{NS}.live_title", T=length, cache=cache, crops=len(seeds))),
                           key="live")
        st.caption(t(f"{NS}.live_caption", command=lab.GRID_COMMAND, crops=len(seeds), first=seeds[0],
                     last=seeds[-1], cache=cache, w=cache - sinks_lm.SINKS))
        anatomy.notice([t(f"{NS}.notice_live", window=fixed(L["window"], 3), sinks=fixed(L["sinks"], 3),
                          diff=fixed(L["window"] - L["sinks"], 3), dense=fixed(L["dense"], 3),
                          recompute=fixed(L["recompute"], 3))])
    check = sec.live_check(lab.CHECK_SEED, cache, stamp)
    st.caption(t(f"{NS}.live_check", seed=lab.CHECK_SEED, cache=cache, k=check.evicted, diff=sig(check.max_diff)))


# ------------------------------------------------------------------ the page
anatomy.header(NS)
lesson = presenter.Lesson(NS)
with lesson.step("intuition"):
    anatomy.intuition(NS)
    anatomy.formula(r"M_{ij} = [j \le i] \wedge \big([i - j < W] \vee [j < s]\big)")
    anatomy.formula(r"o_i = \sum_{j:M_{ij}} v_j \, \mathrm{softmax}_j\Big(\frac{q_i \cdot k_j}{\sqrt{d}}\Big)",
                    t(f"{NS}.formula_caption"))
with lesson.step("window", shows=(sliding_window_mask, lab.receptive_field)):
    window_part()
lm = models.model(lab.RECIPE)
ev = None if lm is None else sec.recorded(lm.meta)
if lm is None:
    models.unavailable(lab.RECIPE)
elif ev is not None:
    stamp = float(lm.meta.get("train_seconds", 0.0))       # a rebuilt checkpoint gets new cache entries
    with lesson.step("sinks", shows=(lab.head_view,)):
        best = sec.sinks_section(lm, ev)
        head_part(lm, best, stamp)
    with lesson.step("stream"):
        st.subheader(t(f"{NS}.stream_heading"))
        sec.stream_question(ev)
        sec.stream_explained(ev["stream"]["cache"], ev["stream"]["long_len"], ev["train_len"], ev["stream"]["sinks"])
    with lesson.step("stream evidence"):      # its own step: the question's screen does not show its answer
        sec.stream_evidence(ev)
    with lesson.step("live", shows=(StreamingCache.append, StreamingDecoder._attend, lab.stream_all_at_once)):
        live_section(stamp, lm.meta)
    with lesson.step("pitfall"):
        sec.pitfall_section(ev)
lesson.end()          # and "Show the code": what the steps declared

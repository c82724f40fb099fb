"""MHA -> GQA -> MQA -> MLA: fewer K/V heads, or one small latent, to shrink the KV cache.

A slider over the number of K/V heads: the picture of which query heads read which K/V head is measured by
running ``grouped_query_attention`` (labs.gqa.kv_head_of), the cache bytes per token come from the KV-cache
formula; the quality cost is recorded at training time by three small decoders that differ only in their number
of K/V heads (models/gqa_lm.py, checkpoints' meta["eval"]); MLA (attention_core/latent.py) caches one latent per
token, and its up-projections are absorbed into the query and output maps: the page runs both computations and
prints their difference.
"""
from __future__ import annotations

from typing import NamedTuple

import pandas as pd
import streamlit as st

from attention_core.functional import grouped_query_attention
from attention_core.labs import gqa as lab
from attention_core.latent import MultiHeadLatentAttention
from serving.cache import MB, cache_data
from ui import anatomy, models, presenter
from ui.format import count, fixed, pct, sig
from ui.gqa_charts import cache_bars, quality_frame, quality_points, sharing_frame, sharing_picture, sizes_frame
from ui.i18n import t
from ui.registry import ROOT

NS = "gqa"
KV_CACHE_PAGE = ROOT / "app_pages" / "kv_cache.py"
TRAIN_COMMAND = "python -m attention_core.models {recipe}"


class Inputs(NamedTuple):
    heads: int
    kv_heads: int


# ------------------------------------------------------------------ computation: cached on plain arguments
@cache_data(max_entries=64, max_bytes=1 * MB)
def sharing_data(heads: int, kv_heads: int, query_label: str, kv_label: str) -> pd.DataFrame:
    return sharing_frame(lab.kv_head_of(heads, kv_heads), query_label, kv_label)


@cache_data(max_entries=8, max_bytes=1 * MB)
def absorption(d_latent: int) -> lab.Absorption:
    return lab.absorption(d_latent)


@cache_data(max_entries=2, max_bytes=1 * MB)
def rope_pitfall() -> lab.RopePitfall:
    return lab.rope_on_latent_keys()


def variant_name(heads: int, kv_heads: int) -> str:
    if kv_heads == heads:
        return "MHA"
    return "MQA" if kv_heads == 1 else "GQA"


# ------------------------------------------------------------------ sections, in lesson order
def controls_section() -> Inputs:
    left, right = st.columns(2)
    with left:
        heads = st.select_slider(t(f"{NS}.ctl_heads"), options=lab.QUERY_HEADS, value=8, key="heads",
                                 bind="query-params")
    with right:     # by default a ratio of 2: the exercise under these sliders asks for another (32 to 8)
        kv_heads = st.select_slider(t(f"{NS}.ctl_kv_heads"), options=lab.KV_HEADS, value=4, key="kv_heads",
                                    bind="query-params")
    heads, kv_heads = int(heads), int(kv_heads)
    usable = lab.usable_kv_heads(heads, kv_heads)
    if usable != kv_heads:
        anatomy.problem(f"{NS}.kv_too_many", h_kv=kv_heads, h=heads, used=usable)
    return Inputs(heads, usable)


def question_section() -> None:
    anatomy.exercise(f"{NS}_ex", t(f"{NS}.ex_question"), [t(f"{NS}.ex_a"), t(f"{NS}.ex_b"), t(f"{NS}.ex_c")],
                     answer=1, explanation=t(f"{NS}.ex_explain"))


def evidence_section(inputs: Inputs) -> None:
    h, h_kv = inputs
    frame = sharing_data(h, h_kv, t(f"{NS}.query_head"), t(f"{NS}.kv_head"))
    anatomy.show_chart(sharing_picture(frame, query_title=t(f"{NS}.axis_queries"), kv_title=t(f"{NS}.axis_kv"),
                                       labels=h <= 8,
                                       title=t(f"{NS}.sharing_title", h=h, h_kv=h_kv,
                                               name=variant_name(h, h_kv))), key="sharing", width="stretch")
    per_token, mha = lab.bytes_per_token(h_kv), lab.bytes_per_token(h)
    a, b = st.columns(2)
    a.metric(t(f"{NS}.metric_bytes"), t(f"{NS}.kib", v=fixed(per_token / 1024, 0)))
    b.metric(t(f"{NS}.metric_ratio"), t(f"{NS}.times", v=fixed(mha / per_token, 0)))
    st.caption(t(f"{NS}.bytes_caption", L=lab.SIZE["layers"], d=lab.SIZE["d_head"], b=lab.SIZE["bytes"],
                 h_kv=h_kv, per=count(per_token), mha=count(mha), h=h))
    st.page_link(KV_CACHE_PAGE, label=t(f"{NS}.kv_cache_link"), icon=":material/memory:")
    group = h // h_kv
    anatomy.notice([t(f"{NS}.notice_group", group=group, h_kv=h_kv, h=h),
                    t(f"{NS}.notice_bytes", per=count(per_token), mha=count(mha), ratio=fixed(mha / per_token, 0)),
                    t(f"{NS}.notice_queries", h=h)])


def recorded_quality() -> list[lab.QualityRow] | None:
    if models.unavailable(*lab.RECIPES):
        return None
    rows = []
    for recipe in lab.RECIPES:
        try:
            rows.append(lab.quality_row(recipe, models.shipped_model(recipe).meta))
        except ValueError:
            models.show_unavailable(models.Unavailable(f"assets/models/{recipe}.pt", False,
                                                       TRAIN_COMMAND.format(recipe=recipe), t(f"{NS}.no_eval")))
            return None
    return rows


def quality_section() -> None:
    st.subheader(t(f"{NS}.quality_heading"))
    st.markdown(t(f"{NS}.quality_intro"))
    rows = recorded_quality()
    if rows is None:
        return
    labels = [f"{variant_name(r.num_heads, r.num_kv_heads)} ({r.num_kv_heads})" for r in rows]
    table = pd.DataFrame({
        t(f"{NS}.col_model"): labels,
        t(f"{NS}.col_bytes"): [r.kv_bytes_per_token for r in rows],
        t(f"{NS}.col_acc"): [f"{pct(r.accuracy, 1)} ± {pct(r.accuracy_ci95, 1)}" for r in rows],
        t(f"{NS}.col_loss"): [f"{fixed(r.loss, 3)} ± {fixed(r.loss_ci95, 3)}" for r in rows],
    })
    st.dataframe(table, hide_index=True)
    left, right = st.columns(2)
    x_title, model_title = t(f"{NS}.axis_bytes"), t(f"{NS}.col_model")
    with left:
        frame = quality_frame(labels, [r.kv_bytes_per_token for r in rows], [r.accuracy for r in rows],
                              [r.accuracy_ci95 for r in rows])
        anatomy.show_chart(quality_points(frame, x_title=x_title, y_title=t(f"{NS}.axis_acc"),
                                          model_title=model_title, title=t(f"{NS}.acc_title")), key="acc")
    with right:
        frame = quality_frame(labels, [r.kv_bytes_per_token for r in rows], [r.loss for r in rows],
                              [r.loss_ci95 for r in rows])
        anatomy.show_chart(quality_points(frame, x_title=x_title, y_title=t(f"{NS}.axis_loss"),
                                          model_title=model_title, title=t(f"{NS}.loss_title")), key="loss")
    first = rows[0]
    st.caption(t(f"{NS}.quality_caption", n=count(first.sequences), seconds=", ".join(fixed(r.train_seconds, 0)
                                                                                     for r in rows),
                 command=TRAIN_COMMAND.format(recipe="gqa_kv4")))
    notes = []
    for row, label in zip(rows[1:], labels[1:]):
        d = lab.difference(first.accuracy, first.accuracy_ci95, row.accuracy, row.accuracy_ci95)
        verdict = t(f"{NS}.beyond_noise") if d.beyond_noise else t(f"{NS}.within_noise")
        notes.append(t(f"{NS}.notice_quality", a=labels[0], b=label, diff=fixed(100 * d.value, 1),
                       hw=fixed(100 * d.half_width, 1), verdict=verdict,
                       ratio=fixed(first.kv_bytes_per_token / row.kv_bytes_per_token, 0)))
    anatomy.notice(notes)


def mla_section() -> None:
    st.subheader(t(f"{NS}.mla_heading"))
    st.markdown(t(f"{NS}.mla_intro"))
    anatomy.formula(r"c_t = W^{DKV} h_t,\quad k^R_t = \mathrm{RoPE}(W^{KR} h_t)")
    anatomy.formula(r"k^C_{t,i} = W^{UK}_i c_t,\quad v^C_{t,i} = W^{UV}_i c_t\,", t(f"{NS}.mla_formula_caption"))
    shape = lab.DEEPSEEK_V2
    sizes = lab.mla_sizes()
    order = [s.variant for s in sizes]
    frame = sizes_frame(order, [s.per_layer for s in sizes], [s.formula for s in sizes], "MLA")
    anatomy.show_chart(cache_bars(frame, x_title=t(f"{NS}.axis_numbers"), y_title=t(f"{NS}.axis_variant"),
                                  formula_title=t(f"{NS}.axis_formula"), order=order,
                                  title=t(f"{NS}.sizes_title", name=shape.name)), key="sizes")
    by = {s.variant: s.per_layer for s in sizes}
    st.caption(t(f"{NS}.sizes_caption", name=shape.name, L=shape.layers, h=shape.heads, d=shape.d_head,
                 c=shape.d_latent, r=shape.d_rope, g=lab.GQA_GROUPS,
                 source=shape.source.removeprefix("https://")))
    anatomy.notice([t(f"{NS}.notice_mla", mla=count(by["MLA"]), mha=count(by["MHA"]),
                      share=pct(by["MLA"] / by["MHA"], 1), groups=fixed(by["MLA"] / (2 * shape.d_head), 2),
                      mqa=count(by["MQA"]))])


def absorption_section() -> None:
    st.markdown(t(f"{NS}.absorb_intro"))
    anatomy.formula(r"q_{t,i}^{C\top} k^C_{j,i} = \big(W^{UK\top}_i W^{Q}_i h_t\big)^{\!\top} c_j\,")
    anatomy.formula(r"W^O_i\, W^{UV}_i \textstyle\sum_j a_{t,j,i}\, c_j\,", t(f"{NS}.absorb_formula_caption"))
    d_latent = st.select_slider(t(f"{NS}.ctl_latent"), options=lab.LATENTS, value=16, key="d_latent",
                                bind="query-params")
    demo = absorption(int(d_latent))
    a, b = st.columns(2)
    a.metric(t(f"{NS}.metric_diff"), sig(demo.max_diff))
    b.metric(t(f"{NS}.metric_latent"), t(f"{NS}.numbers", v=demo.latent_per_token))
    anatomy.notice([t(f"{NS}.notice_absorb", n=demo.tokens, diff=sig(demo.max_diff), wdiff=sig(demo.max_weight_diff)),
                    t(f"{NS}.notice_absorb_cache", bytes=count(demo.latent_bytes), c=demo.d_latent,
                      r=lab.DEMO["d_rope"], per=demo.latent_per_token, mha=demo.mha_per_token,
                      h=lab.DEMO["num_heads"], d=lab.DEMO["d_head"])])
    st.caption(t(f"{NS}.mla_not_trained"))


def rope_demo() -> None:
    demo = rope_pitfall()
    st.markdown(t(f"{NS}.pit_demo", n=demo.tokens, score=fixed(demo.max_score_diff, 2),
                  weight=fixed(demo.max_weight_diff, 3), ok=sig(demo.fixed_ok)))


def pitfall_section() -> None:
    anatomy.pitfall(t(f"{NS}.pit_title"), t(f"{NS}.pit_body"), code=t(f"{NS}.pit_code"), demo=rope_demo)


def sharing_body(steps: presenter.Lesson) -> None:
    """The two head sliders, the question and the picture they drive, as a fragment (``Lesson.part``): a slider
    change reruns and re-sends only this, not the intuition above or the quality, MLA and pitfall sections below."""
    with steps.step("controls", keep=True):
        chosen = controls_section()
    with steps.step("question"):
        question_section()
    with steps.step("evidence", shows=(lab.kv_head_of, grouped_query_attention, lab.bytes_per_token)):
        evidence_section(chosen)


# ------------------------------------------------------------------ the page
anatomy.header(NS)
lesson = presenter.Lesson(NS)
with lesson.step("intuition"):
    anatomy.intuition(NS)
    anatomy.formula(r"\mathrm{head}_i = \operatorname{softmax}\!\Big(\frac{q_i K_{g(i)}^\top}{\sqrt{d}}\Big) V_{g(i)}\,")
    anatomy.formula(r"g(i) = \Big\lfloor \frac{i}{h / h_{kv}} \Big\rfloor", t(f"{NS}.formula_caption"))
lesson.part(sharing_body, lesson)
with lesson.step("quality", shows=(lab.quality_row,)):
    quality_section()
with lesson.step("mla", shows=(MultiHeadLatentAttention.forward,)):
    mla_section()
with lesson.step("absorption", shows=(MultiHeadLatentAttention.absorbed, lab.absorption)):
    absorption_section()
with lesson.step("pitfall"):
    pitfall_section()
lesson.end()          # and "Show the code": what the steps declared

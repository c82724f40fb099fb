"""Positions at long range: a model trained on 64 tokens reads 256. RoPE as trained, RoPE rescaled at evaluation
(position interpolation, NTK-aware, YaRN), ALiBi, no positions and learned positions, on a task that needs a near
token and a far one (attention_core/models/long_context_lm.py).

The accuracy-vs-length figures are recorded in the checkpoints (meta["eval"], written by
``python -m attention_core.models longctx_<x>``); the rotation wavelengths, the first-layer logit against
distance, the ALiBi bias and a small accuracy-by-position evaluation are computed live.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np
import pandas as pd
import streamlit as st

from attention_core.labs import long_context as lab
from attention_core.models import long_context_lm as lm
from attention_core.positional import (
    alibi_slopes,
    rope_linear_frequencies,
    rope_ntk_frequencies,
    rope_yarn_frequencies,
    yarn_attention_factor,
)
from ui import anatomy, models, presenter
from ui.cache import MB, cache_data
from ui.charts import bars, heatmap
from ui.format import fixed, pct
from ui.i18n import t
from ui.long_context_charts import lines_chart, lines_frame, pairs_frame, wavelength_chart

NS = "long_context"
L = lm.TRAIN_LEN
LENGTHS = tuple(n for n in lm.EVAL_LENGTHS if n > L)          # the lengths the controls offer: beyond L
ROPE, ALIBI, NOPE, LEARNED = "longctx_rope", "longctx_alibi", "longctx_nope", "longctx_learned"
RECIPES = (ROPE, ALIBI, NOPE, LEARNED)
LIVE_SEQUENCES = 16
D_HEAD = 16             # the models' d_model 64 / 4 heads (checked against the checkpoint by the tests)
ALIBI_N = 12


class Inputs(NamedTuple):
    method: str     # one of lab.METHODS
    n: int          # evaluation length (tokens)


def method_label(method: str) -> str:
    return t(f"{NS}.method_{method}")


def series_names() -> dict[str, str]:
    """(recipe, method) keys -> the curve's name on screen, in the order of the legend."""
    return {**{f"{ROPE}:{m}": method_label(m) for m in lab.METHODS},
            f"{ALIBI}:none": t(f"{NS}.model_alibi"), f"{NOPE}:none": t(f"{NS}.model_nope"),
            f"{LEARNED}:none": t(f"{NS}.model_learned")}


# ------------------------------------------------------------------ computation: cached on plain arguments
@cache_data(max_entries=16, max_bytes=1 * MB)
def wavelengths(n: int) -> list[lab.FrequencyRow]:
    return lab.frequency_rows(D_HEAD, n / L)


@cache_data(max_entries=32, max_bytes=2 * MB)
def logits(method: str, n: int) -> np.ndarray:
    return lab.topic_logits(models.shipped_model(ROPE).model, method, n / L, n)


@cache_data(max_entries=32, max_bytes=1 * MB)
def live(method: str, n: int) -> lab.LivePositions:
    return lab.live_positions(models.shipped_model(ROPE).model, method, n, sequences=LIVE_SEQUENCES)


@cache_data(max_entries=2, max_bytes=1 * MB)
def short_input_check() -> tuple[lab.LivePositions, lab.LivePositions]:
    """The pitfall: PI at s = 4 applied to a short input (n = L) against plain RoPE."""
    model = models.shipped_model(ROPE).model
    squeezed = lm.scores(lab.scaled_copy(model, "linear", 4.0), L, sequences=LIVE_SEQUENCES, seed=0,
                         chunk=LIVE_SEQUENCES)
    plain = lm.scores(model, L, sequences=LIVE_SEQUENCES, seed=0, chunk=LIVE_SEQUENCES)
    return lm.summary(plain, lm.Kinds.NEAR)[0], lm.summary(squeezed, lm.Kinds.NEAR)[0]


def recorded() -> dict[str, dict] | None:
    """recipe -> meta["eval"] of each shipped checkpoint, or None (with a message) if one is missing/damaged."""
    if models.unavailable(*RECIPES):
        return None
    return {r: models.shipped_model(r).meta["eval"] for r in RECIPES}


# ------------------------------------------------------------------ sections, in lesson order
def controls_section() -> Inputs:
    left, mid = st.columns(2)
    with left:
        method = st.selectbox(t(f"{NS}.ctl_method"), lab.METHODS, format_func=method_label, key="method",
                              bind="query-params")
    with mid:
        n = st.select_slider(t(f"{NS}.ctl_n"), options=LENGTHS, value=LENGTHS[-1], key="n", bind="query-params")
    return Inputs(str(method), int(n))


def question_section() -> None:
    anatomy.exercise(f"{NS}_ex", t(f"{NS}.ex_question", L=L, n=4 * L),
                     [t(f"{NS}.ex_a"), t(f"{NS}.ex_b"), t(f"{NS}.ex_c")], answer=1,
                     explanation=t(f"{NS}.ex_explain", L=L))


def evidence_section(evals: dict[str, dict]) -> None:
    st.subheader(t(f"{NS}.evidence_heading"))
    config = models.shipped_model(ROPE).config
    st.markdown(t(f"{NS}.task", L=L, layers=config["num_layers"], heads=config["num_heads"], d=config["d_model"])
                + "  \n`" + " ".join(lab.fresh_sequence(24)) + " …`")
    names = series_names()
    lengths = evals[ROPE]["lengths"]
    for kind in ("far", "near"):
        series = {names[f"{r}:{m}"]: evals[r]["methods"][m][f"{kind}_accuracy"]
                  for r in RECIPES for m in evals[r]["methods"] if f"{r}:{m}" in names}
        anatomy.show_chart(lines_chart(lines_frame(lengths, series, rules=(L,)), x_title=t(f"{NS}.axis_length"),
                                       y_title=t(f"{NS}.axis_accuracy"), series_title=t(f"{NS}.axis_series"),
                                       log_x=False, log_y=False, points=True, series=list(series),
                                       domain=[0.0, 1.0], title=t(f"{NS}.acc_title_{kind}", L=L)), key=f"acc_{kind}")
    seq = evals[ROPE]["sequences"]
    st.caption(t(f"{NS}.acc_caption", seq=seq, L=L, seed=evals[ROPE]["seed"], rows=lm.MAX_LEN,
                 command="python -m attention_core.models " + " / ".join(RECIPES)))


def notice_section(evals: dict[str, dict]) -> None:
    lengths = evals[ROPE]["lengths"]
    i4, i2 = lengths.index(4 * L), lengths.index(2 * L)

    def acc(recipe: str, method: str, kind: str, i: int) -> str:
        value = evals[recipe]["methods"][method][f"{kind}_accuracy"][i]
        return "—" if value is None else pct(value, 1)

    anatomy.notice([
        t(f"{NS}.notice_rope", n2=2 * L, n4=4 * L, far2=acc(ROPE, "none", "far", i2), far4=acc(ROPE, "none", "far", i4),
          near4=acc(ROPE, "none", "near", i4)),
        t(f"{NS}.notice_pi", n4=4 * L, far_pi=acc(ROPE, "linear", "far", i4), near_pi=acc(ROPE, "linear", "near", i4),
          far_yarn=acc(ROPE, "yarn", "far", i4), near_yarn=acc(ROPE, "yarn", "near", i4)),
        t(f"{NS}.notice_ntk", n4=4 * L, far=acc(ROPE, "ntk", "far", i4), near=acc(ROPE, "ntk", "near", i4)),
        t(f"{NS}.notice_others", n4=4 * L, L=L, alibi_far=acc(ALIBI, "none", "far", i4),
          alibi_near=acc(ALIBI, "none", "near", i4), nope_far=acc(NOPE, "none", "far", i4),
          nope_near=acc(NOPE, "none", "near", i4), learned_far=acc(LEARNED, "none", "far", i4),
          learned_near=acc(LEARNED, "none", "near", i4)),
    ])


def angles_section(inputs: Inputs) -> None:
    st.subheader(t(f"{NS}.angles_heading"))
    s = inputs.n / L
    anatomy.formula(r"\theta_i = b^{-2i/d},\quad \text{PI: } \theta_i' = \theta_i / s,\quad "
                    r"\text{NTK: } \theta_i' = \big(b\, s^{d/(d-2)}\big)^{-2i/d},\quad "
                    r"\text{YaRN: } \theta_i' = (1-\gamma_i)\,\theta_i/s + \gamma_i\,\theta_i",
                    t(f"{NS}.angles_caption", s=fixed(s, 0), L=L, n=inputs.n))
    rows = wavelengths(inputs.n)
    names = [method_label(r.method) for r in rows]
    limits = {t(f"{NS}.limit_train", L=L): float(L), t(f"{NS}.limit_eval", n=inputs.n): float(inputs.n)}
    frame = pairs_frame([r.pair for r in rows], names, [r.wavelength for r in rows], limits)
    anatomy.show_chart(wavelength_chart(frame, x_title=t(f"{NS}.axis_pair"), y_title=t(f"{NS}.axis_wavelength"),
                                        method_title=t(f"{NS}.axis_series"),
                                        methods=[method_label(m) for m in lab.METHODS],
                                        title=t(f"{NS}.wave_title", s=fixed(s, 0))), key="waves")
    unseen = {m: lab.unseen_pairs(rows, m) for m in lab.METHODS}
    plain = [r for r in rows if r.method == "none"]
    pi = [r for r in rows if r.method == "linear"]
    yarn = [r for r in rows if r.method == "yarn"]
    turns0 = L / plain[0].wavelength                    # r_0: turns of the fastest pair over L
    anatomy.notice([
        t(f"{NS}.notice_unseen", n=inputs.n, L=L, pairs=", ".join(map(str, unseen["none"])) or "—",
          k=len(unseen["none"]), half=D_HEAD // 2, fast=sum(r.wavelength < L for r in plain)),
        t(f"{NS}.notice_pi_wave", s=fixed(s, 0), w0=fixed(plain[0].wavelength, 1), w1=fixed(pi[0].wavelength, 1),
          pairs=len(unseen["linear"])),
        t(f"{NS}.notice_yarn_wave", L=L, r0=fixed(turns0, 1), ratio=fixed(yarn[0].theta / plain[0].theta, 2),
          factor=fixed(yarn_attention_factor(s) ** 2, 3)),
        t(f"{NS}.notice_ntk_wave", pairs=", ".join(map(str, unseen["ntk"])) or "—", n=inputs.n,
          reach=fixed(max((lab.reach(r) for r in rows if r.method == "ntk" and r.pair in unseen["ntk"]), default=L), 0)),
    ])


def logit_section(inputs: Inputs) -> None:
    st.subheader(t(f"{NS}.logit_heading"))
    st.markdown(t(f"{NS}.logit_intro"))
    values = logits(inputs.method, inputs.n)                      # (h, n)
    distance = np.arange(1, inputs.n + 1)
    series = {t(f"{NS}.head", h=h + 1): values[h].tolist() for h in range(len(values))}
    anatomy.show_chart(lines_chart(lines_frame(distance, series, rules=(L,)), x_title=t(f"{NS}.axis_distance"),
                                   y_title=t(f"{NS}.axis_logit"), series_title=t(f"{NS}.axis_head"), log_x=False,
                                   log_y=False, points=False, series=list(series), height=260,
                                   title=t(f"{NS}.logit_title", method=method_label(inputs.method), n=inputs.n)),
                       key="logit")
    inside, beyond = values[:, :L], values[:, L:]
    top = int(np.argmax(inside.mean(1)))
    anatomy.notice([t(f"{NS}.notice_logit", h=top + 1, L=L, lo=fixed(inside[top].min(), 2),
                      hi=fixed(inside[top].max(), 2), blo=fixed(beyond[top].min(), 2),
                      bhi=fixed(beyond[top].max(), 2), method=method_label(inputs.method))])


def live_section(inputs: Inputs) -> None:
    st.subheader(t(f"{NS}.live_heading"))
    run = live(inputs.method, inputs.n)
    mids = [(a + b - 1) / 2 for a, b in zip(run.edges[:-1], run.edges[1:])]
    series = {t(f"{NS}.kind_far"): run.far, t(f"{NS}.kind_near"): run.near}
    anatomy.show_chart(lines_chart(lines_frame(mids, series, rules=(L,)), x_title=t(f"{NS}.axis_position"),
                                   y_title=t(f"{NS}.axis_accuracy"), series_title=t(f"{NS}.axis_kind"),
                                   log_x=False, log_y=False, points=True, series=list(series), domain=[0.0, 1.0],
                                   height=240, title=t(f"{NS}.live_title", method=method_label(inputs.method),
                                                       n=inputs.n)), key="live")
    st.caption(t(f"{NS}.live_caption", seq=run.sequences, n=inputs.n, far=pct(run.far_all, 1),
                 near=pct(run.near_all, 1), L=L))


def alibi_section() -> None:
    st.subheader(t(f"{NS}.alibi_heading"))
    anatomy.formula(r"\mathrm{score}_h(i, j) = \frac{q_i \cdot k_j}{\sqrt{d}} - m_h\,(i - j),\qquad "
                    r"m_h = 2^{-8h/H}", t(f"{NS}.alibi_caption"))
    heads = 4
    head = st.slider(t(f"{NS}.ctl_head"), 1, heads, 1, key="head", bind="query-params")
    pic = lab.alibi_picture(ALIBI_N, heads)
    slopes = pic.slopes
    anatomy.show_chart(bars(slopes, [t(f"{NS}.head", h=h + 1) for h in range(heads)], value_title=t(f"{NS}.axis_slope"),
                            label_title=t(f"{NS}.axis_head"), domain=None, highlight=int(head) - 1,
                            height=160, title=t(f"{NS}.slopes_title", h=heads), fit_x=True), key="slopes")
    tokens = [str(i) for i in range(ALIBI_N)]
    bias = pic.bias[int(head) - 1]
    masked = np.isinf(bias)
    anatomy.show_chart(heatmap(np.where(masked, 0.0, bias), tokens, kind="scores", masked=masked,
                               x_title=t("common.key"), y_title=t("common.query"), value_title=t(f"{NS}.axis_bias"),
                               selectable=False, title=t(f"{NS}.bias_title", h=int(head), m=fixed(slopes[int(head) - 1], 4))),
                       key="bias")
    reach = lab.alibi_reach(heads)
    far = 4 * L - 1
    anatomy.notice([t(f"{NS}.notice_alibi", m1=fixed(slopes[0], 3), r1=fixed(reach[0], 0), m4=fixed(slopes[-1], 4),
                      r4=fixed(reach[-1], 0), d=far, pen=fixed(slopes[-1] * far, 2),
                      fac=fixed(float(np.exp(slopes[-1] * far)), 1))])


def pitfall_demo() -> None:
    plain, squeezed = short_input_check()
    st.markdown(t(f"{NS}.pit_demo", L=L, plain=pct(plain, 1), squeezed=pct(squeezed, 1), seq=LIVE_SEQUENCES))


def pitfall_section() -> None:
    anatomy.pitfall(t(f"{NS}.pit_title"), t(f"{NS}.pit_body"), code=t(f"{NS}.pit_code"), demo=pitfall_demo)


# ------------------------------------------------------------------ the page
anatomy.header(NS)
lesson = presenter.Lesson(NS)
with lesson.step("intuition"):
    anatomy.intuition(NS)
    anatomy.formula(r"q_m^\top R_{\Theta}(n - m)\, k_n:\ \text{pair } i \text{ turns by } (n - m)\,\theta_i",
                    t(f"{NS}.formula_caption"))
with lesson.step("controls", keep=True):
    chosen = controls_section()
with lesson.step("question"):
    question_section()
evals = recorded()
if evals is not None:
    with lesson.step("evidence"):
        evidence_section(evals)
        notice_section(evals)
with lesson.step("angles"):
    angles_section(chosen)
if evals is not None:
    with lesson.step("logit"):
        logit_section(chosen)
    with lesson.step("live"):
        live_section(chosen)
with lesson.step("alibi"):
    alibi_section()
if evals is not None:
    with lesson.step("pitfall"):
        pitfall_section()
anatomy.show_code(lm.recall_batch, lm.set_rope_scaling, rope_linear_frequencies, rope_ntk_frequencies,
                  rope_yarn_frequencies, yarn_attention_factor, lab.topic_logits, alibi_slopes)
lesson.end()

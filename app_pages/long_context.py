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
from attention_core.models import recipes
from attention_core.positional import (
    alibi_slopes,
    rope_linear_frequencies,
    rope_ntk_frequencies,
    rope_yarn_frequencies,
    yarn_attention_factor,
)
from serving.cache import MB, cache_data
from ui import anatomy, course, models, presenter
from ui.charts import bars, chart_cache, heatmap
from ui.format import fixed, pct
from ui.i18n import t
from ui.long_context_charts import lines_chart, lines_frame, pairs_frame, wavelength_chart

NS = "long_context"
L = lm.TRAIN_LEN
LENGTHS = tuple(n for n in lm.EVAL_LENGTHS if n > L)          # the lengths the controls offer: beyond L
ROPE, ALIBI, NOPE, LEARNED = "longctx_rope", "longctx_alibi", "longctx_nope", "longctx_learned"
RECIPES = (ROPE, ALIBI, NOPE, LEARNED)
# the control's options are the methods' names, the same in every language, so a shared URL works in both
METHOD_OPTIONS = {"RoPE": "none", "RoPE+PI": "linear", "RoPE+NTK": "ntk", "RoPE+YaRN": "yarn"}
LIVE_SEQUENCES = 16
LIVE_BUCKET = 32        # positions per point of the live chart
D_HEAD = 16             # the models' d_model 64 / 4 heads (checked against the checkpoint by the tests)
ALIBI_N = 12            # tokens of the bias picture
ALIBI_HEADS = 4         # the heads of the shipped ALiBi model


class Inputs(NamedTuple):
    method: str     # one of lab.METHODS
    n: int          # evaluation length (tokens)


def method_label(method: str) -> str:
    return t(f"{NS}.method_{method}")


def series_keys() -> list[tuple[str, str]]:
    """(recipe, method) of each curve of the accuracy charts, in the order of the legend."""
    return [(ROPE, m) for m in lab.METHODS] + [(ALIBI, "none"), (NOPE, "none"), (LEARNED, "none")]


def series_names() -> list[str]:
    return [method_label(m) for m in lab.METHODS] + [t(f"{NS}.model_{k}") for k in ("alibi", "nope", "learned")]


# ------------------------------------------------------------------ computation: cached on plain arguments
# The checkpoint-dependent results are keyed on the checkpoints' (mtime, size): a rebuilt file is read again.
Stamps = tuple[tuple[int, int], ...]


class Shipped(NamedTuple):
    evals: dict[str, dict]     # recipe -> meta["eval"]
    config: dict               # the RoPE model's DecoderConfig fields
    stamps: Stamps             # of RECIPES, in order


@cache_data(max_entries=16, max_bytes=1 * MB)
def wavelength_frame(n: int, names: tuple[str, ...], limit_names: tuple[str, str]) -> tuple[pd.DataFrame, list]:
    rows = lab.frequency_rows(D_HEAD, n / L)
    labels = dict(zip(lab.METHODS, names))
    frame = pairs_frame([r.pair for r in rows], [labels[r.method] for r in rows], [r.wavelength for r in rows],
                        dict(zip(limit_names, (float(L), float(n)))))
    return frame, rows


@cache_data(max_entries=8, max_bytes=1 * MB)
def accuracy_frames(stamps: Stamps, names: tuple[str, ...]) -> dict[str, pd.DataFrame]:
    """The recorded accuracy against length, one frame per kind ("far", "near"); ``names`` label the series in
    the order of ``series_keys()``."""
    evals = {r: models.shipped_model(r).meta["eval"] for r in RECIPES}
    out = {}
    for kind in ("far", "near"):
        series = {name: evals[r]["methods"][m][f"{kind}_accuracy"] for name, (r, m) in zip(names, series_keys())}
        out[kind] = lines_frame(evals[ROPE]["lengths"], series, rules=(L,))
    return out


@cache_data(max_entries=32, max_bytes=2 * MB)
def logit_frame(stamps: Stamps, method: str, n: int, heads: tuple[str, ...]) -> tuple[pd.DataFrame, np.ndarray]:
    values = lab.topic_logits(models.shipped_model(ROPE).model, method, n / L, n)       # (h, n)
    frame = lines_frame(np.arange(1, n + 1), dict(zip(heads, values.tolist())), rules=(L,))
    return frame, values


@cache_data(max_entries=32, max_bytes=1 * MB)
def live_frame(stamps: Stamps, method: str, n: int, kinds: tuple[str, str]) -> tuple[pd.DataFrame, lab.LivePositions]:
    run = lab.live_positions(models.shipped_model(ROPE).model, method, n, sequences=LIVE_SEQUENCES,
                             bucket=LIVE_BUCKET)
    mids = [(a + b - 1) / 2 for a, b in zip(run.edges[:-1], run.edges[1:])]
    return lines_frame(mids, dict(zip(kinds, (run.far, run.near))), rules=(L,)), run


@cache_data(max_entries=2, max_bytes=1 * MB)
def short_input_check(stamps: Stamps) -> tuple[float, float]:
    """The pitfall: near accuracy on inputs of length L with plain RoPE, and with PI at s = 4 applied anyway."""
    model = models.shipped_model(ROPE).model
    squeezed = lm.scores(lab.scaled_copy(model, "linear", 4.0), L, sequences=LIVE_SEQUENCES, seed=0,
                         chunk=LIVE_SEQUENCES)
    plain = lm.scores(model, L, sequences=LIVE_SEQUENCES, seed=0, chunk=LIVE_SEQUENCES)
    return lm.summary(plain, lm.Kinds.NEAR)[0], lm.summary(squeezed, lm.Kinds.NEAR)[0]


@chart_cache(max_entries=32, max_bytes=2 * MB)
def alibi_charts(head: int, heads: int, labels: tuple[str, ...], titles: tuple[str, ...]) -> tuple[dict, dict]:
    """The slopes bars and the bias heatmap of one head (finished specs: the heatmap builds its own frame)."""
    slope_title, head_title, bias_title, key_title, query_title, slopes_title, heat_title = titles
    pic = lab.alibi_picture(ALIBI_N, heads)
    bias = pic.bias[head - 1]
    masked = np.isinf(bias)
    slopes = bars(pic.slopes, labels, value_title=slope_title, label_title=head_title, domain=None,
                  highlight=head - 1, height=160, title=slopes_title, fit_x=True)
    heat = heatmap(np.where(masked, 0.0, bias), [str(i) for i in range(ALIBI_N)], kind="scores", masked=masked,
                   x_title=key_title, y_title=query_title, value_title=bias_title, selectable=False,
                   show_numbers=False,                 # -0.0039 x 12 columns do not fit a phone; the tooltip has them
                   title=heat_title)
    return slopes, heat


def shipped() -> Shipped | None:
    """The recorded evaluations, or None (with a message per missing or damaged checkpoint)."""
    got = [models.load(r) for r in RECIPES]
    if any(isinstance(g, models.Unavailable) for g in got):
        models.unavailable(*RECIPES)
        return None
    stamps = tuple((s.st_mtime_ns, s.st_size) for s in (recipes.checkpoint_path(r).stat() for r in RECIPES))
    return Shipped({r: g.meta["eval"] for r, g in zip(RECIPES, got)}, got[0].config, stamps)


# ------------------------------------------------------------------ sections, in lesson order
def controls_section() -> Inputs:
    left, mid = st.columns(2)
    with left:
        choice = st.selectbox(t(f"{NS}.ctl_method"), tuple(METHOD_OPTIONS), key="method", bind="query-params")
        method = METHOD_OPTIONS.get(choice, "none")
    with mid:
        n = st.select_slider(t(f"{NS}.ctl_n"), options=LENGTHS, value=LENGTHS[-1], key="n", bind="query-params")
    return Inputs(str(method), int(n))


def question_section() -> None:
    anatomy.exercise(f"{NS}_ex", t(f"{NS}.ex_question", L=L, n=4 * L),
                     [t(f"{NS}.ex_a"), t(f"{NS}.ex_b", L=L), t(f"{NS}.ex_c")], answer=1,
                     explanation=t(f"{NS}.ex_explain", L=L))


def evidence_section(shown: Shipped) -> None:
    st.subheader(t(f"{NS}.evidence_heading"))
    config, rope = shown.config, shown.evals[ROPE]
    st.markdown(t(f"{NS}.task", L=L, layers=config["num_layers"], heads=config["num_heads"], d=config["d_model"])
                + "  \n`" + " ".join(lab.fresh_sequence(24)) + " …`")
    names = series_names()
    frames = accuracy_frames(shown.stamps, tuple(names))
    for kind in ("far", "near"):
        anatomy.show_chart(lines_chart(frames[kind], x_title=t(f"{NS}.axis_length"), y_title=t(f"{NS}.axis_accuracy"),
                                       series_title=t(f"{NS}.axis_series"), log_x=False, log_y=False, points=True,
                                       series=names, domain=[0.0, 1.0], title=t(f"{NS}.acc_title_{kind}", L=L)),
                           key=f"acc_{kind}")
    st.caption(t(f"{NS}.acc_caption", seq=rope["sequences"], L=L, seed=rope["seed"], rows=lm.MAX_LEN,
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
    anatomy.formula(r"\begin{aligned}\text{PI: } \theta_i' &= \theta_i / s \\ "
                    r"\text{NTK: } \theta_i' &= \big(b\, s^{d/(d-2)}\big)^{-2i/d} \\ "
                    r"\text{YaRN: } \theta_i' &= (1-\gamma_i)\,\theta_i/s + \gamma_i\,\theta_i\end{aligned}\;",
                    t(f"{NS}.angles_caption", s=fixed(s, 0), L=L, n=inputs.n))
    names = [method_label(m) for m in lab.METHODS]
    frame, rows = wavelength_frame(inputs.n, tuple(names),
                                   (t(f"{NS}.limit_train", L=L), t(f"{NS}.limit_eval", n=inputs.n)))
    anatomy.show_chart(wavelength_chart(frame, x_title=t(f"{NS}.axis_pair"), y_title=t(f"{NS}.axis_wavelength"),
                                        method_title=t(f"{NS}.axis_series"), methods=names,
                                        title=t(f"{NS}.wave_title")), key="waves")
    unseen = {m: lab.unseen_pairs(rows, m) for m in lab.METHODS}
    plain, pi, ntk, yarn = ([r for r in rows if r.method == m] for m in lab.METHODS)
    turns0 = L / plain[0].wavelength                    # r_0: turns of the fastest pair over L
    anatomy.notice([
        t(f"{NS}.notice_unseen", n=inputs.n, L=L, pairs=", ".join(map(str, unseen["none"])) or "—",
          k=len(unseen["none"]), half=D_HEAD // 2, fast=sum(r.wavelength < L for r in plain)),
        t(f"{NS}.notice_pi_wave", s=fixed(s, 0), w0=fixed(plain[0].wavelength, 1), w1=fixed(pi[0].wavelength, 1),
          pairs=len(unseen["linear"])),
        t(f"{NS}.notice_yarn_wave", L=L, r0=fixed(turns0, 1), ratio=fixed(yarn[0].theta / plain[0].theta, 2),
          factor=fixed(yarn_attention_factor(s) ** 2, 3)),
        t(f"{NS}.notice_ntk_wave", pairs=", ".join(map(str, unseen["ntk"])) or "—", n=inputs.n,
          reach=fixed(max((lab.reach(r) for r in ntk if r.pair in unseen["ntk"]), default=L), 0)),
    ])


def logit_section(inputs: Inputs, shown: Shipped) -> None:
    st.subheader(t(f"{NS}.logit_heading"))
    st.markdown(t(f"{NS}.logit_intro"))
    heads = tuple(t(f"{NS}.head", h=h + 1) for h in range(shown.config["num_heads"]))
    frame, values = logit_frame(shown.stamps, inputs.method, inputs.n, heads)        # values (h, n)
    anatomy.show_chart(lines_chart(frame, x_title=t(f"{NS}.axis_distance"), y_title=t(f"{NS}.axis_logit"),
                                   series_title=t(f"{NS}.axis_head"), log_x=False, log_y=False, points=False,
                                   series=list(heads), height=260,
                                   title=t(f"{NS}.logit_title")),
                       key="logit")
    inside, beyond = values[:, :L], values[:, L:]
    top = int(np.argmax(inside.mean(1)))
    anatomy.notice([t(f"{NS}.notice_logit", h=top + 1, L=L, lo=fixed(inside[top].min(), 2),
                      hi=fixed(inside[top].max(), 2), blo=fixed(beyond[top].min(), 2),
                      bhi=fixed(beyond[top].max(), 2), method=method_label(inputs.method))])


def live_section(inputs: Inputs, shown: Shipped) -> None:
    st.subheader(t(f"{NS}.live_heading"))
    kinds = (t(f"{NS}.kind_far"), t(f"{NS}.kind_near"))
    frame, run = live_frame(shown.stamps, inputs.method, inputs.n, kinds)
    anatomy.show_chart(lines_chart(frame, x_title=t(f"{NS}.axis_position"), y_title=t(f"{NS}.axis_accuracy"),
                                   series_title=t(f"{NS}.axis_kind"), log_x=False, log_y=False, points=True,
                                   series=list(kinds), domain=[0.0, 1.0], height=240,
                                   title=t(f"{NS}.live_title", b=LIVE_BUCKET)),
                       key="live")
    st.caption(t(f"{NS}.live_caption", method=method_label(inputs.method), seq=run.sequences, n=inputs.n,
                 far=pct(run.far_all, 1), near=pct(run.near_all, 1), L=L))


def alibi_section() -> None:
    st.subheader(t(f"{NS}.alibi_heading"))
    anatomy.formula(r"\begin{aligned}\mathrm{score}_h(i, j) &= \frac{q_i \cdot k_j}{\sqrt{d}} - m_h\,(i - j) \\ "
                    r"m_h &= 2^{-8h/H}\end{aligned}\;", t(f"{NS}.alibi_caption"))
    head = int(st.slider(t(f"{NS}.ctl_head"), 1, ALIBI_HEADS, 1, key="head", bind="query-params"))
    slopes = alibi_slopes(ALIBI_HEADS).numpy()
    titles = (t(f"{NS}.axis_slope"), t(f"{NS}.axis_head"), t(f"{NS}.axis_bias"), t("common.key"), t("common.query"),
              t(f"{NS}.slopes_title", h=ALIBI_HEADS), t(f"{NS}.bias_title", h=head, m=fixed(slopes[head - 1], 4)))
    bars_spec, heat_spec = alibi_charts(head, ALIBI_HEADS, tuple(t(f"{NS}.head", h=h + 1) for h in range(ALIBI_HEADS)),
                                        titles)
    anatomy.show_chart(bars_spec, key="slopes")
    anatomy.show_chart(heat_spec, key="bias")
    reach = lab.alibi_reach(ALIBI_HEADS)
    far = 4 * L - 1
    anatomy.notice([t(f"{NS}.notice_alibi", m1=fixed(slopes[0], 3), r1=fixed(reach[0], 0), m4=fixed(slopes[-1], 4),
                      r4=fixed(reach[-1], 0), d=far, pen=fixed(slopes[-1] * far, 2),
                      fac=fixed(float(np.exp(slopes[-1] * far)), 1))])


def pitfall_demo(shown: Shipped) -> None:
    plain, squeezed = short_input_check(shown.stamps)
    st.markdown(t(f"{NS}.pit_demo", L=L, plain=pct(plain, 1), squeezed=pct(squeezed, 1), seq=LIVE_SEQUENCES))


def pitfall_section(shown: Shipped) -> None:
    anatomy.pitfall(t(f"{NS}.pit_title"), t(f"{NS}.pit_body"), code=t(f"{NS}.pit_code"),
                    demo=lambda: pitfall_demo(shown), key="pit_run")        # computed only when opened


# ------------------------------------------------------------------ fragments: a control reruns only its part
# (``lesson.part``; elements outside a fragment are not re-sent: the redraw budget).
def length_sections(lesson: presenter.Lesson, shown: Shipped | None) -> None:
    """The method and length controls and the three sections they drive: wavelengths, logit, live accuracy."""
    with lesson.step("controls", keep=True):
        chosen = controls_section()
    with lesson.step("angles", shows=(rope_linear_frequencies, rope_ntk_frequencies, rope_yarn_frequencies,
                                      yarn_attention_factor)):
        angles_section(chosen)
    if shown is not None:
        with lesson.step("logit", shows=(lab.topic_logits,)):
            logit_section(chosen, shown)
        with lesson.step("live", shows=(lm.recall_batch, lm.set_rope_scaling)):
            live_section(chosen, shown)


def alibi_fragment(lesson: presenter.Lesson) -> None:
    with lesson.step("alibi", shows=(alibi_slopes,)):
        alibi_section()


# ------------------------------------------------------------------ the page
anatomy.header(NS)
lesson = presenter.Lesson(NS)
with lesson.step("intuition"):
    anatomy.intuition(NS)
    course.builds_on("positional")     # RoPE itself is taught there
    anatomy.formula(r"q_m^\top R_{(n - m)\theta}\, k_n\;",
                    t(f"{NS}.formula_caption"))
with lesson.step("question"):
    question_section()
shown = shipped()
if shown is not None:
    with lesson.step("evidence"):          # the recorded figures at every length: no control changes them
        evidence_section(shown)
        notice_section(shown.evals)
lesson.part(length_sections, lesson, shown)
lesson.part(alibi_fragment, lesson)
if shown is not None:
    with lesson.step("pitfall"):
        pitfall_section(shown)
lesson.end()          # and "Show the code": what the steps declared

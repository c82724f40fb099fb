"""Induction heads: a 2-layer attention-only model learns to copy from context, in a sudden phase change.

The model and data are attention_core.models.induction_heads_lm (the recipe ``induction_heads``); the recorded run
(assets/models/induction_heads_run.json, ``python -m attention_core.labs.induction_heads``) holds the losses of both
halves, every head's previous-token and induction scores and the heads' patterns every few steps; the shipped
checkpoint (assets/models/induction_heads.pt) is ablated live; a fresh run of a chosen seed trains in the server's
queue (serving.training_queue: one at a time, time-capped) and draws its curves as it goes.
"""
from __future__ import annotations

import random
import time

import numpy as np
import pandas as pd
import streamlit as st

from attention_core.labs import induction_heads as lab
from attention_core.models import induction_heads_lm as ih
from attention_core.models import recipes
from serving import training_queue as tq
from serving.cache import MB, cache_data
from ui import anatomy, live_run, presenter
from ui import multihead_charts as mc
from ui.charts import MAX_ARIA_CELLS
from ui.format import fixed
from ui.i18n import t
from ui.induction_heads_charts import curves
from ui.models import Unavailable, model, show_unavailable, unavailable, why_of

NS = "induction_heads"
RECIPE = ih.RECIPE_NAME
PANEL = 110                      # px: one head's pattern in the small multiples
HALVES = tuple(range(ih.HALVES[0], ih.HALVES[1] + 1))
REMOVE = ("none", "previous", "all_previous", "control", "induction", "all_induction")
FORMULA = (r"P_h = \frac{1}{n-1}\sum_{i=1}^{n-1} a^h_{i,\,i-1}\;",          # two lines: each fits a phone
           r"I_h = \frac{1}{m-1}\sum_{i=m+1}^{2m-1} a^h_{i,\,i-m+1}\;")


# ------------------------------------------------------------------ the recorded run (a JSON written by the lab's CLI)
@cache_data(max_entries=2, max_bytes=4 * MB)
def _recorded(path: str, stamp: tuple[int, int]):
    try:
        record = lab.read_run(path)
    except FileNotFoundError:
        return Unavailable(SHOWN, True, lab.RUN_COMMAND)
    except Exception as err:          # damaged: JSON, UTF-8 or content errors
        return Unavailable(SHOWN, False, lab.RUN_COMMAND, why_of(err, lab.RUN_FILE))
    snaps = lab.snapshots_of(record)
    facts = {k: v for k, v in record.items() if k != "snapshots"}      # the snapshots as arrays only
    return facts, snaps, lab.phase_change(snaps)


SHOWN = "assets/models/induction_heads_run.json"


def recorded():
    try:
        s = lab.RUN_FILE.stat()
    except OSError:
        return Unavailable(SHOWN, True, lab.RUN_COMMAND)
    return _recorded(str(lab.RUN_FILE), (s.st_mtime_ns, s.st_size))


def seed_input(key: str, label: str) -> int:
    return int(st.number_input(t(label), min_value=0, max_value=9999, value=0, step=1, key=key, bind="query-params"))


def head_name(layer: int, head: int) -> str:
    return t(f"{NS}.head", layer=layer + 1, head=head + 1)


def loss_chart(snaps: list[lab.Snapshot], phase: int | None, title: str, max_step: int, chance: float):
    steps = [s.step for s in snaps]
    series = [(t(f"{NS}.series_first"), [s.first_loss for s in snaps]),
              (t(f"{NS}.series_repeated"), [s.repeated_loss for s in snaps]),
              (t(f"{NS}.series_chance"), [chance] * len(snaps))]
    return curves(steps, series, phase=phase, title=title, x_title=t(f"{NS}.axis_step"),
                  y_title=t(f"{NS}.axis_loss"), series_title=t(f"{NS}.axis_series"), rule_title=t(f"{NS}.phase_rule"),
                  max_step=max_step)


def score_chart(snaps: list[lab.Snapshot], phase: int | None, title: str, max_step: int):
    steps = [s.step for s in snaps]
    best = [lab.best_scores(s) for s in snaps]
    series = [(t(f"{NS}.series_previous"), [b[0] for b in best]), (t(f"{NS}.series_induction"), [b[1] for b in best])]
    return curves(steps, series, phase=phase, title=title, x_title=t(f"{NS}.axis_step"),
                  y_title=t(f"{NS}.axis_score"), series_title=t(f"{NS}.axis_series"), rule_title=t(f"{NS}.phase_rule"),
                  max_step=max_step)


def phase_notice(phase: lab.Phase, last: int) -> str:
    """The phase change in words, with its numbers (or that there was none in ``last`` steps)."""
    if phase.step is None:
        return t(f"{NS}.notice_no_phase", steps=last)
    return t(f"{NS}.notice_phase", step=phase.step, before=phase.before, after=phase.after,
             l0=fixed(phase.loss_before, 2), l1=fixed(phase.loss_after, 2), i0=fixed(phase.induction_before, 2),
             i1=fixed(phase.induction_after, 2), p0=fixed(phase.previous_before, 2), p1=fixed(phase.previous_after, 2))


# ------------------------------------------------------------------ the trained model, ablated live
@cache_data(max_entries=64, max_bytes=2 * MB)
def ablation_numbers(half: int, seed: int, stamp: tuple[int, int]) -> dict:
    """The shipped model on 64 fresh sequences of this half length: losses and scores, each head removal
    (``stamp``: the checkpoint's time and size, so a rebuilt one is measured again)."""
    loaded = model(RECIPE)
    tokens = ih.repeated_tokens(random.Random(seed), 64, half)
    return lab.ablation(loaded.model, tokens)


# ------------------------------------------------------------------ sections, in lesson order
def question_section(doc) -> None:
    explain = t(f"{NS}.ex_explain")
    if not isinstance(doc, Unavailable):
        record, snaps, phase = doc
        if phase.step is not None:
            explain += " " + t(f"{NS}.ex_numbers", after=phase.after, before=phase.before,
                               l0=fixed(phase.loss_before, 2), l1=fixed(phase.loss_after, 2))
    anatomy.exercise(f"{NS}_ex", t(f"{NS}.ex_question"), [t(f"{NS}.ex_a"), t(f"{NS}.ex_b"), t(f"{NS}.ex_c")],
                     answer=1, explanation=explain)


def recorded_section(doc) -> None:
    st.subheader(t(f"{NS}.recorded_heading"))
    if isinstance(doc, Unavailable):
        show_unavailable(doc)
        return
    record, snaps, phase = doc
    last = snaps[-1].step
    anatomy.show_chart(loss_chart(snaps, phase.step, t(f"{NS}.loss_title"), last, record["chance_loss"]), key="loss")
    anatomy.show_chart(score_chart(snaps, phase.step, t(f"{NS}.score_title"), last), key="scores")
    cfg = record["config"]
    st.caption(t(f"{NS}.recorded_caption", steps=len(record["losses"]), seed=record["seed"], d=cfg["d_model"],
                 h=cfg["num_heads"], V=len(ih.SYMBOLS), lo=record["halves"][0], hi=record["halves"][1],
                 m=record["eval_half"], n=record["snap_sequences"], s=fixed(record["train_seconds"], 1),
                 lr=record["lr"], b=record["batch_size"], command=lab.RUN_COMMAND, cpu=fixed(record["cpu_seconds"], 1),
                 load=fixed(record["load_avg_1min"], 1)))
    end = snaps[-1]
    p_end, i_end = lab.best_scores(end)
    items = []
    items.append(phase_notice(phase, last))
    items.append(t(f"{NS}.notice_end", step=last, first=fixed(end.first_loss, 2), rep=fixed(end.repeated_loss, 2),
                   chance=fixed(record["chance_loss"], 2), prev=fixed(p_end, 2), ind=fixed(i_end, 2)))
    anatomy.notice(items)


@cache_data(max_entries=32, max_bytes=4 * MB)
def grid_frame(panels: tuple[tuple[int, int, int], ...], titles: tuple[str, ...], stamp: tuple[int, int]):
    """The small multiples' frame of the recorded patterns (step, layer, head) of each panel (``stamp``: the file's)."""
    by_step = {x.step: x for x in recorded()[1]}
    matrices = np.stack([by_step[step].patterns[layer, head] for step, layer, head in panels])
    positions = [str(i) for i in range(matrices.shape[-1])]
    return mc.panels_frame(matrices, positions, positions, titles)[0]


def grid(panels: list[tuple[int, int, int]], titles: list[str], key: str) -> None:
    """Head patterns on the probe as small multiples, two per row (fits a 390 px phone): positions, no labels."""
    s = lab.RUN_FILE.stat()
    frame = grid_frame(tuple(panels), tuple(titles), (s.st_mtime_ns, s.st_size))
    anatomy.show_chart(mc.small_multiples_kind(
        frame, columns=2, x_title=t(f"{NS}.axis_key_pos"), y_title=t(f"{NS}.axis_query_pos"),
        value_title=t("common.weight"), panel_title=t(f"{NS}.axis_head"), selectable=False, show_labels=False,
        panel_size=PANEL, title_limit=PANEL + 40, domain=(0.0, 1.0), aria=len(frame) <= MAX_ARIA_CELLS),
        key=key, width="content")


def patterns_section(doc) -> None:
    if isinstance(doc, Unavailable):
        return
    record, snaps, phase = doc
    st.subheader(t(f"{NS}.patterns_heading"))
    steps = [s.step for s in snaps if s.patterns is not None]
    picked = st.select_slider(t(f"{NS}.ctl_step"), options=steps, value=steps[-1], key="train_step", bind="query-params")
    snap = next(s for s in snaps if s.step == picked)
    layers, heads = snap.patterns.shape[:2]
    grid([(picked, a, b) for a in range(layers) for b in range(heads)],
         [t(f"{NS}.panel", name=head_name(a, b), prev=fixed(snap.previous[a, b], 2), ind=fixed(snap.induction[a, b], 2))
          for a in range(layers) for b in range(heads)], "heads")
    probe = t(f"{NS}.sep").join(f"{i} {anatomy.md_escape(x)}" for i, x in enumerate(record["probe"]))
    st.caption(t(f"{NS}.patterns_caption", step=picked, half=lab.PROBE_HALF, m=record["eval_half"], probe=probe))
    final = snaps[-1]
    prev_head, ind_head = int(np.argmax(final.previous[0])), int(np.argmax(final.induction[-1]))
    shown = [x for x in snaps if x.step in over_steps(steps, phase)]
    st.markdown(f"**{t(f'{NS}.over_heading', prev=head_name(0, prev_head), ind=head_name(layers - 1, ind_head))}**")
    panels, names = [], []
    for x in shown:                                    # one row per snapshot: the two heads side by side
        panels += [(x.step, 0, prev_head), (x.step, layers - 1, ind_head)]
        names += [t(f"{NS}.panel_step", step=x.step, name=head_name(0, prev_head)),
                  t(f"{NS}.panel_step", step=x.step, name=head_name(layers - 1, ind_head))]
    grid(panels, names, "over")
    st.caption(t(f"{NS}.over_caption"))


def over_steps(steps: list[int], phase: lab.Phase) -> list[int]:
    """The snapshot steps (with patterns) nearest the start, the plateau's end, the crossing, the copying, the end."""
    wanted = [steps[0], phase.before, phase.step if phase.step is not None else steps[len(steps) // 2], phase.after,
              steps[-1]]
    return sorted({min(steps, key=lambda s: abs(s - w)) for w in wanted})


def ablation_section() -> None:
    st.subheader(t(f"{NS}.ablation_heading"))
    st.markdown(t(f"{NS}.ablation_intro"))
    if unavailable(RECIPE):
        return
    ablation_part()


@st.fragment
def ablation_part() -> None:
    """The half length and the test sequences' seed, and the removal table they give: a change reruns only this."""
    left, right = st.columns([3, 1])
    with left:
        half = st.select_slider(t(f"{NS}.ctl_half"), options=HALVES, value=ih.EVAL_HALF, key="half",
                                bind="query-params")
    with right:
        seed = seed_input("data_seed", f"{NS}.ctl_data_seed")
    s = recipes.checkpoint_path(RECIPE).stat()
    res = ablation_numbers(int(half), int(seed), (s.st_mtime_ns, s.st_size))
    removed = {k: t(f"{NS}.sep").join(head_name(a, b) for a, b in res[k]["heads"]) or "—" for k in REMOVE}
    st.table(pd.DataFrame({t(f"{NS}.col_removed"): [t(f"{NS}.removed", role=t(f"{NS}.role_{k}"), heads=removed[k])
                                                     for k in REMOVE],
                           t(f"{NS}.col_first"): [fixed(res[k]["first_loss"], 2) for k in REMOVE],
                           t(f"{NS}.col_repeated"): [fixed(res[k]["repeated_loss"], 2) for k in REMOVE],
                           t(f"{NS}.col_induction", name=removed["induction"]): [fixed(res[k]["induction"], 2)
                                                                                for k in REMOVE]}), hide_index=True)
    loss = {k: fixed(res[k]["repeated_loss"], 2) for k in REMOVE}
    anatomy.notice([
        t(f"{NS}.notice_ablation", half=half, base=loss["none"], prev=loss["previous"], pname=removed["previous"],
          all_prev=loss["all_previous"], pnames=removed["all_previous"], control=loss["control"],
          cname=removed["control"], chance=fixed(float(np.log(len(ih.SYMBOLS))), 2)),
        t(f"{NS}.notice_ablation_induction", ind=loss["induction"], iname=removed["induction"],
          all_ind=loss["all_induction"], inames=removed["all_induction"],
          i0=fixed(res["none"]["induction"], 2), i1=fixed(res["all_previous"]["induction"], 2)),
    ])


# ------------------------------------------------------------------ a live run (on the button; in the server's queue)
def live_work(seed: int, steps: int):
    """The queue's job: lab.train_run with the time caps, progress (losses, compact snapshots) for the watchers."""
    def work(ctx: tq.JobContext) -> dict:
        begun = time.perf_counter()
        losses, snaps = [], []
        ctx.progress.update(step=0, steps=steps, losses=losses, snaps=snaps)

        def on_step(step, loss, snap):
            losses.append(loss)
            if snap is not None:
                snaps.append(lab.Snapshot(snap.step, snap.first_loss, snap.repeated_loss, snap.previous,
                                          snap.induction, None))
            ctx.progress.update(step=step, loss=loss, elapsed=time.perf_counter() - begun)
            return not ctx.stopped() and time.perf_counter() - begun < tq.WALL_CAP - 3

        run = lab.train_run(seed, steps, lab.EVERY, on_step, max_seconds=tq.TIME_CAP)
        kept = [lab.Snapshot(s.step, s.first_loss, s.repeated_loss, s.previous, s.induction, None) for s in run.snaps]
        return {"losses": tuple(run.losses), "snaps": kept, "seconds": run.seconds,
                "capped": len(run.losses) < steps}
    return work


def live_key(seed: int) -> tuple:
    return ("induction_heads", seed, lab.LIVE_STEPS, tq.TIME_CAP)


def keep(seed: int, status: tq.Status) -> None:
    st.session_state["_ih_run"] = (seed, status.result)


def draw_live(seed: int, status: tq.Status) -> None:
    p = status.progress
    snaps = list(p["snaps"])
    if len(snaps) > 1:
        anatomy.show_chart(loss_chart(snaps, None, t(f"{NS}.live_loss_title", seed=seed), p["steps"],
                                      float(np.log(len(ih.SYMBOLS)))))
        anatomy.show_chart(score_chart(snaps, None, t(f"{NS}.live_score_title", seed=seed), p["steps"]))


LIVE = live_run.LiveRun(NS, "_ih_ticket", lambda seed: (live_key(seed), "curves", live_work(seed, lab.LIVE_STEPS)),
                        keep, draw_live)


def live_section() -> None:
    st.subheader(t(f"{NS}.live_heading"))
    st.markdown(t(f"{NS}.live_intro", steps=lab.LIVE_STEPS, cap=fixed(tq.TIME_CAP, 0)))
    seed = seed_input("train_seed", f"{NS}.ctl_train_seed")
    LIVE.button(seed, label=t(f"{NS}.train"), key="train")
    kept = st.session_state.get("_ih_run")
    if kept is None:
        if LIVE.pending() is None:
            st.info(t(f"{NS}.press"), icon=":material/play_circle:")
        return
    run_seed, result = kept
    snaps = list(result["snaps"])
    phase = lab.phase_change(snaps)
    presenter.shows(lab.train_run, lab.snapshot)      # the learner's run, trained on this server (the queue's job)
    last = snaps[-1].step
    anatomy.show_chart(loss_chart(snaps, phase.step, t(f"{NS}.live_loss_title", seed=run_seed), last,
                                  float(np.log(len(ih.SYMBOLS)))), key="live_loss")
    anatomy.show_chart(score_chart(snaps, phase.step, t(f"{NS}.live_score_title", seed=run_seed), last),
                       key="live_scores")
    items = [t(f"{NS}.live_done", seed=run_seed, steps=len(result["losses"]), s=fixed(result["seconds"], 1))]
    if result["capped"]:
        items.append(t(f"{NS}.live_capped", cap=fixed(tq.TIME_CAP, 0)))
    items.append(phase_notice(phase, last))
    anatomy.notice(items)


def offset_demo() -> None:
    d = lab.offset_head_demo()
    st.markdown(t(f"{NS}.pit_demo", m=d.half, score=fixed(d.same_half, 2), other=d.other_half,
                  score_other=fixed(d.other_halves, 2)))


def pitfall_section() -> None:
    anatomy.pitfall(t(f"{NS}.pit_title"), t(f"{NS}.pit_body"), code=t(f"{NS}.pit_code"), demo=offset_demo)


# ------------------------------------------------------------------ the page
anatomy.header(NS)
lesson = presenter.Lesson(NS)
shown_run = recorded()
with lesson.step("intuition"):
    anatomy.intuition(NS)
    anatomy.formula(FORMULA[0])
    anatomy.formula(FORMULA[1], t(f"{NS}.formula_caption"))
with lesson.step("question"):
    question_section(shown_run)
with lesson.step("recorded", shows=(ih.repeated_tokens, ih.previous_token_scores, ih.induction_scores,
                                    ih.half_losses, lab.phase_change)):
    recorded_section(shown_run)
with lesson.step("patterns"):
    patterns_section(shown_run)
with lesson.step("ablation", shows=(lab.block_without_heads, lab.ablation)):
    ablation_section()
with lesson.step("live"):
    live_section()
with lesson.step("pitfall", shows=(lab.offset_head_demo,)):
    pitfall_section()
lesson.end()          # and "Show the code": what the steps declared

"""The training page's sections: the run's settings (in the URL) and its probe, the live run in the server's queue
(its job, what a session keeps, its drawing while it trains), the kept runs' results (loss curves, snapshots, what
to notice), the step-0 exercise and the pitfalls of the tutorial's train_step with their demos."""
from __future__ import annotations

import numpy as np
import pandas as pd
import streamlit as st
import torch

from attention_core.labs import seed_bugs
from attention_core.labs import training as lab
from attention_core.labs.bottleneck import clean_digits
from attention_core.models import recipes, tasks, trainer
from serving import training_queue as tq
from serving.cache import MB, cache_data
from ui import anatomy, live_run
from ui import format as fmt
from ui import pronoun_charts as pc
from ui import training_charts as tc
from ui.alignment_charts import visible_chars
from ui.charts import heatmap, heatmap_height, unique_labels
from ui.controls import seed as seed_control
from ui.i18n import t
from ui.wrap import title_lines

NS = "training"
TASKS = {"dates": "march 5, 2017 → 2017-03-05", "reverse": "12345 → 54321",     # same label in both languages
         "pronoun": "it / 它 → ?"}
TIME_CAP = tq.TIME_CAP    # seconds of training: the run stops here whatever the step count (2-core machine)
STEPS = (10, 600, 250)    # min, max, default
EVERY = (5, 100, 25)
MAX_REVERSE_PROBE = 20
KEEP_RUNS = 4             # runs kept in the session for comparison
GRID = 12                 # the last snapshots drawn as small multiples
DECAY_GRADS = (0.0, 0.01, 1.0, 100.0)     # gradient sizes of the weight-decay pitfall
LR, WARMUP = 1e-2, 20     # live_run's defaults: a fast schedule for a short run
LRS = {"dates": LR, "reverse": LR, "pronoun": 3e-3}   # the encoder learns less steadily at 1e-2 (loss ~1.7 after
#                                                      300 steps, against ~0.5 at 3e-3, seeds 0-2 measured)


# ------------------------------------------------------------------ this session's runs
def runs() -> list[lab.KeptRun]:
    return st.session_state.setdefault("_train_runs", [])


# ------------------------------------------------------------------ controls
def controls() -> lab.RunSettings | None:
    """The run's settings (all in the URL); None after a message about the probe."""
    c1, c2, c3 = st.columns([4, 2, 2])     # the three task buttons fit on one line
    task = c1.segmented_control(t(f"{NS}.task"), list(TASKS), default="dates", required=True,
                                format_func=TASKS.get, key="task", bind="query-params", help=t(f"{NS}.task_help"),
                                width="stretch", wrap=True)  # a phone, presenter type: the buttons wrap inside
                                                            # the column, never cut at its edge
    task = task if task in TASKS else "dates"
    attention = c2.toggle(t(f"{NS}.attention"), value=True, key="attn", bind="query-params",
                          help=t(f"{NS}.attention_help_pronoun" if task == "pronoun" else f"{NS}.attention_help"),
                          disabled=task == "pronoun")
    with c3:
        seed = seed_control()
    c4, c5 = st.columns(2)
    steps = c4.slider(t(f"{NS}.steps"), *STEPS, step=10, key="steps", bind="query-params",
                      help=t(f"{NS}.steps_help", cap=fmt.fixed(TIME_CAP, 0)))
    every = c5.slider(t(f"{NS}.every"), *EVERY, step=5, key="every", bind="query-params",
                      help=t(f"{NS}.every_help"))
    settings = lab.RunSettings(task, task == "pronoun" or bool(attention), int(seed), int(steps), int(every), "")
    default = recipes.LIVE_PROBES["reverse"] if task == "reverse" else t(f"{NS}.probe_{task}_default")
    help_key = f"{NS}.probe_pronoun_help" if task == "pronoun" else f"{NS}.probe_help"
    typed = st.text_input(t(f"{NS}.probe_{task}"), value=default, key=f"probe_{task}", bind="query-params",
                          max_chars=400, help=t(help_key))
    if task == "pronoun":
        example = pronoun_probe(typed)
        return None if example is None else settings._replace(probe=typed, referent=example.tokens[example.referent])
    if task == "dates":
        probe = tasks.normalize_date_text(typed)
        bad, limit = tasks.unknown_chars(probe), tasks.MAX_DATE_INPUT
        checks = (("err_empty", not probe), ("err_long", len(probe) > limit), ("err_unknown", bad))
    else:
        probe, bad = clean_digits(typed)
        limit = MAX_REVERSE_PROBE
        checks = (("err_digits", bad), ("err_empty", not probe), ("err_long", len(probe) > limit))
    failed = next((key for key, fails in checks if fails), None)      # the first check that fails, in this order
    if failed is None:
        return settings._replace(probe=probe)
    anatomy.problem(f"{NS}.{failed}", n=len(probe), max=limit, chars=quoted(bad))
    return None


def pronoun_probe(text: str) -> tasks.PronounExample | None:
    """The typed probe sentence parsed by the grammar; None after the "it" page's message for it."""
    parsed = tasks.parse_pronoun_sentence(text, lang := tasks.sentence_language(text))
    if not parsed.ok:
        key, fields = pc.parse_message(parsed, lang)
        anatomy.problem(key, **fields)
    return parsed.example if parsed.ok else None


def quoted(chars: list[str], limit: int = 8) -> str:
    shown = t(f"{NS}.sep").join(t("common.quoted", text=anatomy.md_escape(c))
                                for c in visible_chars("".join(chars[:limit])))
    return shown + ("…" if len(chars) > limit else "")


def axis(task: str, which: str) -> str:
    """Axis titles of the snapshot heatmaps: input x output characters, or tokens x heads."""
    x, y = ("token_axis", "head_axis") if task == "pronoun" else ("input_axis", "output_axis")
    return t(f"{NS}.{x if which == 'x' else y}")


def run_name(cfg: lab.RunSettings, number: int) -> str:
    return t(f"{NS}.run_name", n=number, task=t(f"{NS}.task_{cfg.task}"),
             attn=t(f"{NS}.with_attn") if cfg.attention else t(f"{NS}.without_attn"), seed=cfg.seed, steps=cfg.steps)


def snapshot_heatmap(task: str, step: int, out: str, w, rows: list[str], cols: list[str], **options):
    """One snapshot of the probe's attention (output characters or heads x input characters or tokens)."""
    title = t(f"{NS}.snap_title_pronoun" if task == "pronoun" else f"{NS}.snap_title", step=step, out=out)
    return heatmap(w, rows, cols, title=title, x_title=axis(task, "x"), y_title=axis(task, "y"),
                   value_title=t("common.weight"), selectable=False, **options)


def loss_curves(series: list[tuple[str, list]], title: str, max_step: int):
    return tc.loss_curves(series, title=title, x_title=t(f"{NS}.step_axis"), y_title=t(f"{NS}.loss_axis"),
                          smooth_title=t(f"{NS}.smooth", k=tc.SMOOTH), max_step=max_step)


@cache_data(max_entries=16, max_bytes=4 * MB)
def untrained(task: str, seed: int, probe: str) -> lab.StartingPoint:
    """The probe through a freshly initialised attention model (step 0): how attention starts out."""
    run = recipes.live_run(task, attention=True, seed=seed, lr=LRS[task], warmup_steps=WARMUP, probe=probe)
    with torch.inference_mode():
        snap = run.snapshot(run.model)
    _, w = tq.snap_of(task, snap)
    pronoun = task == "pronoun"
    return lab.starting_point(w, w.shape[-1] if pronoun else len(probe), run.probe if pronoun else None)


# ------------------------------------------------------------------ the run (only on the button; in the server's queue)
def job_of(cfg: lab.RunSettings) -> tuple[tq.TrainingSpec, tq.View]:
    """What the server's queue shares (the training) and what this session watches (its probe)."""
    return (tq.TrainingSpec(cfg.task, cfg.attention, cfg.seed, cfg.steps, LRS[cfg.task], WARMUP, TIME_CAP),
            tq.View(cfg.probe, cfg.every))


def labels(task: str, record: dict, heads: tuple[int, int] | None) -> tuple[str, list[str], list[str] | None]:
    """(the probe as shown, the snapshot's column labels, its row labels or None for output characters)."""
    if task == "pronoun":
        e = record["probe"]
        heads = [t("pronoun.head_label", layer=a + 1, head=b + 1) for a in range(heads[0]) for b in range(heads[1])]
        return tasks.pronoun_text(e.tokens, e.lang), unique_labels(list(e.tokens)), heads
    return record["probe"], visible_chars(record["probe"]), None


def keep(cfg: lab.RunSettings, status: tq.Status) -> None:
    """A finished run of this session becomes one of its kept runs."""
    number = st.session_state.get("_train_count", 0) + 1
    result, record = status.result, status.record
    shown, cols, rows = labels(cfg.task, record, result["heads"])
    kept = runs()
    kept.append(lab.KeptRun(cfg, run_name(cfg, number), list(result["losses"]), list(result["lrs"]),
                            list(record["snaps"]), result["seconds"], result["capped"], shown, cols, rows,
                            record["probe"]))
    del kept[:-KEEP_RUNS]
    st.session_state["_train_count"] = number
    st.session_state["show_run"] = kept[-1].name         # show the new run (set before the box is drawn)
    st.session_state.pop("snap_pick", None)
    st.caption(t(f"{NS}.progress_done", steps=len(result["losses"]), s=fmt.fixed(result["seconds"], 1)))


def progress_text(cfg: lab.RunSettings, p: dict) -> str:
    return t(f"{NS}.progress", step=p["step"], steps=p["steps"], loss=fmt.fixed(p["loss"], 3),
             s=fmt.fixed(p["elapsed"], 1))


def draw_live(cfg: lab.RunSettings, status: tq.Status) -> None:
    """The shared run's loss so far and the latest snapshot of this session's probe."""
    p = status.progress
    name = run_name(cfg, st.session_state.get("_train_count", 0) + 1)
    anatomy.show_chart(loss_curves([(name, list(p["losses"]))], t(f"{NS}.loss_live"), cfg.steps))
    record = status.record or {}
    snaps = list(record.get("snaps", ()))
    if not snaps:
        return
    step, out, w = snaps[-1]
    if w is not None and len(out):
        _, cols, rows = labels(cfg.task, record, p.get("heads"))
        anatomy.show_chart(snapshot_heatmap(cfg.task, step, out, w, rows or list(out), cols, show_numbers=False,
                                            height=320))
    else:
        st.caption(t(f"{NS}.snap_plain", step=step, out=anatomy.md_escape(out) or "—"))


def job(cfg: lab.RunSettings) -> live_run.Job:
    spec, view = job_of(cfg)
    return spec, view, tq.training_work(spec, wall_cap=tq.QUEUE.wall_cap)


def trained_before(cfg: lab.RunSettings) -> bool:
    """A run this session already has is trained again (pressing twice shows that a seeded run is
    reproducible); a run another session finished is shared."""
    spec = job_of(cfg)[0]
    return any(job_of(r.settings)[0] == spec for r in runs())


def has_snapshots(status: tq.Status) -> bool:
    return live_run.has_losses(status) and "snaps" in (status.record or {})


# ------------------------------------------------------------------ results (from the session: cheap)
def snapshots_section(run: lab.KeptRun) -> None:
    task = run.settings.task
    st.subheader(t(f"{NS}.snaps_title_pronoun" if task == "pronoun" else f"{NS}.snaps_title", name=run.name))
    steps = [s for s, _, _ in run.snaps]
    if st.session_state.get("snap_pick") not in steps:                  # a new run: show its last snapshot
        st.session_state["snap_pick"] = steps[-1]
    picked = st.select_slider(t(f"{NS}.snap_pick"), steps, key="snap_pick") if len(steps) > 1 else steps[0]
    step, out, w = next(x for x in run.snaps if x[0] == picked)
    rows = run.rows or list(out)
    if w is not None and len(out):
        anatomy.show_matrix(snapshot_heatmap(task, step, out, w, rows, run.cols, show_numbers=len(run.cols) <= 16,
                                             height=heatmap_height(len(rows))),
                            w, rows, run.cols, key="snap", selectable=False, file_name=f"attention_step_{step}.csv")
    else:
        st.info(t(f"{NS}.no_alignment", out=anatomy.md_escape(out) or "—"), icon=":material/info:")
    with_w = run.with_weights()
    if len(with_w) > 1:
        st.markdown(f"**{t(f'{NS}.grid_title')}**")
        anatomy.show_chart(tc.snapshots(with_w[-GRID:], run.cols, label=t(f"{NS}.panel"),
                                        weight_title=t("common.weight"), x_title=axis(task, "x"),
                                        y_title=axis(task, "y"), row_labels=run.rows), key="grid")
    table = {t(f"{NS}.col_step"): steps, t(f"{NS}.col_output"): [o or "—" for _, o, _ in run.snaps],
             t(f"{NS}.col_right"): ["✓" if lab.is_right(run.settings, o) else "✗" for _, o, _ in run.snaps]}
    if with_w:
        peaks = {s: lab.peak(w_) for s, _, w_ in with_w}
        table[t(f"{NS}.col_peak")] = [round(peaks[s], 3) if s in peaks else None for s in steps]
    st.dataframe(table, hide_index=True, width="stretch")


def notices(run: lab.KeptRun) -> None:
    losses, cfg = np.asarray(run.losses), run.settings
    k = min(10, max(1, len(losses) // 4))
    items = [t(f"{NS}.notice_loss", first=fmt.fixed(losses[:k].mean(), 3), last=fmt.fixed(losses[-k:].mean(), 3), k=k,
               n=len(losses), s=fmt.fixed(run.seconds, 1))]
    if run.capped:
        items.append(t(f"{NS}.notice_capped", n=len(losses), steps=cfg.steps, cap=fmt.fixed(TIME_CAP, 0)))
    with_w = run.with_weights()
    if len(with_w) >= 2:
        (s0, _, w0), (s1, _, w1) = with_w[0], with_w[-1]
        items.append(t(f"{NS}.notice_sharp", s0=s0, p0=fmt.fixed(lab.peak(w0)), s1=s1, p1=fmt.fixed(lab.peak(w1)),
                       uniform=fmt.fixed(1 / w1.shape[1])))
    first_right = next(((s, o) for s, o, _ in run.snaps if lab.is_right(cfg, o)), None)
    probe = anatomy.md_escape(run.source)
    if first_right is not None:
        items.append(t(f"{NS}.notice_right", step=first_right[0], probe=probe, out=anatomy.md_escape(first_right[1])))
    else:
        items.append(t(f"{NS}.notice_not_yet", out=anatomy.md_escape(run.snaps[-1][1]) or "—", probe=probe))
    if not cfg.attention:
        items.append(t(f"{NS}.notice_try_attention"))
    if cfg.task == "pronoun" and with_w:
        e, (s1, _, w1), odd = run.probe, with_w[-1], run.probe.nouns[1 - run.probe.label]
        best = int((w1[:, e.referent] - w1[:, odd]).argmax())
        items.append(t(f"{NS}.notice_pronoun_head", step=s1, head=run.rows[best], w=fmt.fixed(w1[best, e.referent]),
                       ref=anatomy.md_escape(e.tokens[e.referent]), other=anatomy.md_escape(e.tokens[odd]),
                       wo=fmt.fixed(w1[best, odd])))
    others = [r for r in runs()
              if r is not run and r.settings.task == cfg.task and r.settings.attention != cfg.attention]
    if others:
        o = others[-1]
        n = min(len(o.losses), len(losses))
        items.append(t(f"{NS}.notice_compare", a=run.name, b=o.name, n=n,
                       la=fmt.fixed(lab.smooth(losses[:n], tc.SMOOTH)[-1], 3),
                       lb=fmt.fixed(lab.smooth(o.losses[:n], tc.SMOOTH)[-1], 3)))
    same = [r for r in runs() if r is not run and r.settings == cfg]
    if same:
        n = min(len(same[-1].losses), len(losses))
        diff = float(np.abs(np.asarray(same[-1].losses[:n]) - losses[:n]).max())
        items.append(t(f"{NS}.notice_repeat", name=same[-1].name, diff=f"{diff:.2g}"))
    anatomy.notice(items)


def results_section(live: live_run.LiveRun) -> None:
    """The kept runs: the loss curves of all, the snapshots and notices of the one picked (``live``: the page's
    client of the queue, for the run pending)."""
    kept = runs()
    if not kept:
        if live.pending() is None:
            st.info(t(f"{NS}.press"), icon=":material/play_circle:")
        return
    names = [r.name for r in kept]
    if st.session_state.get("show_run") not in names:
        st.session_state["show_run"] = names[-1]
    pick = st.selectbox(t(f"{NS}.show_run"), names, key="show_run", help=t(f"{NS}.show_run_help", k=KEEP_RUNS))
    run = next(r for r in kept if r.name == pick)
    st.subheader(t(f"{NS}.loss_title"))
    anatomy.show_chart(loss_curves([(r.name, r.losses) for r in kept], t(f"{NS}.loss_chart"),
                                   max(len(r.losses) for r in kept)), key="loss")
    st.caption(t(f"{NS}.loss_caption", k=tc.SMOOTH))
    snapshots_section(run)
    notices(run)


def train_section(cfg: lab.RunSettings | None, live: live_run.LiveRun) -> None:
    live.button(cfg, label=t(f"{NS}.train"), key="train")


def start_exercise(cfg: lab.RunSettings | None) -> None:
    """How sharp is attention before any training? Answered by the untrained model on the probe."""
    begin = untrained(cfg.task, cfg.seed, cfg.probe) if cfg else None
    if cfg is not None and cfg.task == "pronoun":
        explain = t(f"{NS}.ex_explain_pronoun", peak=fmt.fixed(begin.peak, 3), uniform=fmt.fixed(begin.uniform, 3),
                    ref=anatomy.md_escape(begin.referent_word), wr=fmt.fixed(begin.referent, 3),
                    wo=fmt.fixed(begin.other, 3))
        anatomy.exercise("tr_ex_pr", t(f"{NS}.ex_question_pronoun"), [t(f"{NS}.ex_pr_{k}") for k in "abc"], 1, explain)
        return
    explain = t(f"{NS}.ex_explain")
    if begin is not None:
        explain += " " + t(f"{NS}.ex_numbers", peak=fmt.fixed(begin.peak, 3), uniform=fmt.fixed(begin.uniform, 3))
    anatomy.exercise("tr_ex", t(f"{NS}.ex_question"), [t(f"{NS}.ex_{k}") for k in "abc"], 1, explain)


# ------------------------------------------------------------------ pitfalls of the tutorial's train_step
def schedule_demo(steps: int) -> None:
    ours = [trainer.warmup_cosine(s, min(WARMUP, steps), steps) for s in range(steps)]
    theirs = [trainer.seed_warmup_cosine(s, WARMUP) for s in range(steps)]
    anatomy.show_chart(tc.schedules(ours, theirs, names=(t(f"{NS}.sched_ours"), t(f"{NS}.sched_tutorial")),
                                    title=title_lines(t(f"{NS}.sched_chart", steps=steps)),
                                    x_title=t(f"{NS}.step_axis"), y_title=t(f"{NS}.sched_axis")), key="sched")
    st.caption(t(f"{NS}.sched_caption", steps=steps, ours=fmt.fixed(ours[-1], 4), theirs=fmt.fixed(theirs[-1], 5),
                 first=fmt.fixed(theirs[0], 0)))


@cache_data(max_entries=1, max_bytes=1 * MB)
def tutorial_loss() -> seed_bugs.LossOnStates:
    return seed_bugs.tutorial_loss_on_encoder_states()


@cache_data(max_entries=1, max_bytes=1 * MB)
def decay_effects() -> dict[float, tuple[float, float]]:
    """Per gradient size: the weight left after Adam's and after AdamW's decay (seed_bugs.weight_decay_effect)."""
    return {g: (seed_bugs.weight_decay_effect("adam", g), seed_bugs.weight_decay_effect("adamw", g))
            for g in DECAY_GRADS}


def loss_head_demo() -> None:
    r = tutorial_loss()
    st.markdown(t(f"{NS}.pit_head_now", states=r.states, targets=r.targets, err=(r.error or "—").replace(
        "`", "'"), logits=r.logits, loss=fmt.fixed(r.fixed_loss), chance=fmt.fixed(r.chance)))


def adamw_demo() -> None:
    decay = decay_effects()
    st.table(pd.DataFrame([{t(f"{NS}.pit_decay_grad"): f"{g:g}", t(f"{NS}.pit_decay_adam"): f"{a:.2e}",   # wraps
                            t(f"{NS}.pit_decay_adamw"): f"{w:.2e}"} for g, (a, w) in decay.items()]).set_index(
        t(f"{NS}.pit_decay_grad")))
    st.markdown(t(f"{NS}.pit_decay_now", a0=fmt.fixed(decay[0.0][0], 3), a001=f"{decay[0.01][0]:.1e}",
                  a100=f"{decay[100.0][0]:.1e}", w=f"{decay[1.0][1]:.2e}"))


def pitfalls(steps: int) -> None:
    anatomy.pitfall(t(f"{NS}.pit_title"), t(f"{NS}.pit_body"), code=t(f"{NS}.pit_code"),
                    demo=lambda: schedule_demo(steps), shows=(trainer.warmup_cosine,))
    anatomy.pitfall(t(f"{NS}.pit_head_title"), t(f"{NS}.pit_head_body"), code=t(f"{NS}.pit_head_code"),
                    demo=loss_head_demo, shows=(seed_bugs.tutorial_loss_on_encoder_states,))
    anatomy.pitfall(t(f"{NS}.pit_decay_title"), t(f"{NS}.pit_decay_body"), code=t(f"{NS}.pit_decay_code"),
                    demo=adamw_demo, shows=(seed_bugs.weight_decay_effect,))

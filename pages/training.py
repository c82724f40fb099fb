"""Training live: a short, capped training run of a small Seq2Seq model in the app, with the loss
curve and alignment snapshots, so the learner watches attention learn where to look.

Second tutorial's TransformerTrainer (fixed: AdamW, a schedule that ends with the run, seeded) on
the first tutorial's Seq2Seq with Bahdanau attention. A run starts only when the button is pressed,
never on a rerun; its results stay in the session so the page stays responsive afterwards.
"""
from __future__ import annotations

import threading
import time

import numpy as np
import streamlit as st
import torch

from attention_core.seq2seq import seq2seq_loss
from attention_core.seq2seq_lab import clean_digits, matching_form, smooth
from attention_core.tasks import MAX_DATE_INPUT, normalize_date_text, unknown_chars
from attention_core.train import LIVE_PROBES, live_run
from attention_core.trainer import TransformerTrainer, seed_warmup_cosine, warmup_cosine
from ui import anatomy
from ui import training_charts as tc
from ui.alignment_charts import visible_chars
from ui.charts import heatmap, heatmap_like, to_spec
from ui.controls import seed as seed_control
from ui.i18n import current_lang, lesson, t

NS = "training"
TASKS = {"dates": "march 5, 2017 → 2017-03-05", "reverse": "12345 → 54321"}   # same label in both languages
TIME_CAP = 20.0           # seconds: the run stops here whatever the step count (2-core machine)
STEPS = (10, 600, 250)    # min, max, default
EVERY = (5, 100, 25)
MAX_REVERSE_PROBE = 20
KEEP_RUNS = 4             # runs kept in the session for comparison
LR, WARMUP = 1e-2, 20     # live_run's defaults: a fast schedule for a short run
FORMULA = (r"\mathcal{L} = -\frac{1}{T}\sum_{t=1}^{T}\log p_\theta\big(y_t \mid y_{<t},\, x\big),\qquad "
           r"\eta_s = \eta\cdot\begin{cases}\dfrac{s+1}{w} & s < w\\[4pt]"
           r"\tfrac12\big(1+\cos\big(\pi\,\frac{s-w}{S-1-w}\big)\big) & s \ge w\end{cases}")
TUTORIAL_SCHEDULE = """# second tutorial, TransformerTrainer.get_lr_scheduler
def lr_lambda(step):
    if step < warmup_steps:
        return float(step) / float(max(1, warmup_steps))          # step 0: learning rate 0
    progress = float(step - warmup_steps) / float(max(1, 100000 - warmup_steps))
    return max(0.0, 0.5 * (1.0 + math.cos(math.pi * progress)))  # decays over 100000 steps
# the fix (attention_core.trainer.warmup_cosine): (step + 1) / warmup, and the cosine ends at the
# last step of the run that fit() is asked to do"""


# ------------------------------------------------------------------ shared state
@st.cache_resource(show_spinner=False)
def run_lock() -> threading.Lock:
    """One training run at a time per server: the CPU is small and shared by every session."""
    return threading.Lock()


@st.cache_resource(max_entries=64, show_spinner=False)
def spec(key: tuple, _build) -> dict:
    return to_spec(_build())


def chart(key: tuple, build) -> dict:
    return spec((current_lang(),) + key, build)


def with_data(skeleton: dict, frame, title: str | None = None) -> dict:
    out = dict(skeleton)
    out["datasets"] = {"data": frame}
    if title is not None:
        out["title"] = title
    return out


def runs() -> list[dict]:
    return st.session_state.setdefault("_train_runs", [])


# ------------------------------------------------------------------ controls
def controls() -> dict | None:
    """The run's settings (all in the URL); None after a message about the probe."""
    c1, c2, c3 = st.columns([3, 2, 2])
    task = c1.segmented_control(t(f"{NS}.task"), list(TASKS), default="dates", required=True,
                                format_func=TASKS.get, key="task", bind="query-params", help=t(f"{NS}.task_help"))
    task = task if task in TASKS else "dates"
    attention = c2.toggle(t(f"{NS}.attention"), value=True, key="attn", bind="query-params",
                          help=t(f"{NS}.attention_help"))
    with c3:
        seed = seed_control()
    c4, c5 = st.columns(2)
    steps = c4.slider(t(f"{NS}.steps"), *STEPS, step=10, key="steps", bind="query-params",
                      help=t(f"{NS}.steps_help", cap=f"{TIME_CAP:.0f}"))
    every = c5.slider(t(f"{NS}.every"), *EVERY, step=5, key="every", bind="query-params",
                      help=t(f"{NS}.every_help"))
    if task == "dates":
        typed = st.text_input(t(f"{NS}.probe_dates"), value=LIVE_PROBES["dates"], key="probe_dates",
                              bind="query-params", max_chars=400, help=t(f"{NS}.probe_help"))
        probe = normalize_date_text(typed)
        bad = unknown_chars(probe)
        if not probe:
            anatomy.problem(f"{NS}.err_empty")
            return None
        if len(probe) > MAX_DATE_INPUT:
            anatomy.problem(f"{NS}.err_long", n=len(probe), max=MAX_DATE_INPUT)
            return None
        if bad:
            anatomy.problem(f"{NS}.err_unknown", chars=quoted(bad))
            return None
    else:
        typed = st.text_input(t(f"{NS}.probe_reverse"), value=LIVE_PROBES["reverse"], key="probe_reverse",
                              bind="query-params", max_chars=400, help=t(f"{NS}.probe_help"))
        probe, bad = clean_digits(typed)
        if bad:
            anatomy.problem(f"{NS}.err_digits", chars=quoted(bad))
            return None
        if not probe:
            anatomy.problem(f"{NS}.err_empty")
            return None
        if len(probe) > MAX_REVERSE_PROBE:
            anatomy.problem(f"{NS}.err_long", n=len(probe), max=MAX_REVERSE_PROBE)
            return None
    return {"task": task, "attention": bool(attention), "seed": int(seed), "steps": int(steps),
            "every": int(every), "probe": probe}


def quoted(chars: list[str], limit: int = 8) -> str:
    shown = t(f"{NS}.sep").join(f"«{anatomy.md_escape(c)}»" for c in visible_chars("".join(chars[:limit])))
    return shown + ("…" if len(chars) > limit else "")


def run_name(cfg: dict, number: int) -> str:
    return t(f"{NS}.run_name", n=number, task=t(f"{NS}.task_{cfg['task']}"),
             attn=t(f"{NS}.with_attn") if cfg["attention"] else t(f"{NS}.without_attn"),
             seed=cfg["seed"], steps=cfg["steps"])


def is_right(cfg: dict, out: str) -> bool:
    """Reversal: the digits backwards. Dates: the answer is a date that the probe is a supported form of."""
    if cfg["task"] == "reverse":
        return out == cfg["probe"][::-1]
    return matching_form(cfg["probe"], out) is not None


@st.cache_data(max_entries=16, show_spinner=False)
def untrained(task: str, seed: int, probe: str) -> dict:
    """The probe through a freshly initialised attention model (step 0): how attention starts out."""
    run = live_run(task, attention=True, seed=seed, lr=LR, warmup_steps=WARMUP, probe=probe)
    with torch.inference_mode():
        snap = run.snapshot(run.model)
    w = snap.alignment.numpy()
    return {"peak": float(w.max(-1).mean()) if w.size else float("nan"), "uniform": 1 / max(len(probe), 1)}


# ------------------------------------------------------------------ the run (only on the button)
def train(cfg: dict, number: int) -> dict | None:
    """A capped run with live progress; returns what the page keeps (plain lists and arrays)."""
    lock = run_lock()
    if not lock.acquire(blocking=False):
        anatomy.problem(f"{NS}.err_busy")
        return None
    try:
        run = live_run(cfg["task"], attention=cfg["attention"], seed=cfg["seed"], lr=LR, warmup_steps=WARMUP,
                       probe=cfg["probe"])
        bar = st.progress(0.0, text=t(f"{NS}.progress_start"))
        loss_box, snap_box = st.empty(), st.empty()
        losses, lrs, snaps = [], [], []
        name = run_name(cfg, number)
        skeleton = chart(("loss_live", cfg["steps"], name), lambda: tc.loss_chart(   # built once per run
            [(name, [1.0])], title="", x_title=t(f"{NS}.step_axis"), y_title=t(f"{NS}.loss_axis"),
            smooth_title=t(f"{NS}.smooth", k=tc.SMOOTH), max_step=cfg["steps"]))
        source = visible_chars(run.probe)

        def on_step(p) -> None:
            losses.append(p.loss)
            lrs.append(p.lr)
            bar.progress(min(p.step / p.steps, 1.0), text=t(f"{NS}.progress", step=p.step, steps=p.steps,
                                                            loss=f"{p.loss:.3f}", s=f"{p.elapsed:.1f}"))
            if p.snapshot is not None:
                out = p.snapshot.output
                w = p.snapshot.alignment.numpy() if p.snapshot.alignment is not None else None
                snaps.append((p.step, out, w))
                if w is not None and len(out):
                    snap_box.vega_lite_chart(to_spec(heatmap(
                        w, list(out), source, title=t(f"{NS}.snap_title", step=p.step, out=out),
                        x_title=t(f"{NS}.input_axis"), y_title=t(f"{NS}.output_axis"),
                        value_title=t("common.weight"), selectable=False, show_numbers=False,
                        height=320)), width="stretch")
                else:
                    snap_box.caption(t(f"{NS}.snap_plain", step=p.step, out=anatomy.md_escape(out) or "—"))
            if p.step % 10 == 0 or p.step == p.steps:
                loss_box.vega_lite_chart(with_data(skeleton, tc.loss_frame([(name, losses)]),
                                                   t(f"{NS}.loss_live")), width="stretch")

        start = time.perf_counter()
        run.trainer.fit(run.batches, cfg["steps"], on_step, snapshot_fn=run.snapshot,
                        snapshot_every=cfg["every"], max_seconds=TIME_CAP)
        seconds = time.perf_counter() - start
        if not snaps or snaps[-1][0] != len(losses):          # a capped run: one last look at the probe
            final = run.snapshot(run.model)
            snaps.append((len(losses), final.output,
                          final.alignment.numpy() if final.alignment is not None else None))
        bar.progress(1.0, text=t(f"{NS}.progress_done", steps=len(losses), s=f"{seconds:.1f}"))
        loss_box.empty()
        snap_box.empty()
        return {"cfg": cfg, "name": name, "losses": losses, "lrs": lrs, "snaps": snaps, "seconds": seconds,
                "capped": len(losses) < cfg["steps"], "source": run.probe}
    finally:
        lock.release()


# ------------------------------------------------------------------ results (from the session: cheap)
def results_section(run: dict) -> dict:
    kept = runs()
    st.subheader(t(f"{NS}.loss_title"))
    series = [(r["name"], r["losses"]) for r in kept]
    longest = max(len(r["losses"]) for r in kept)
    anatomy.show_chart(chart(("loss", tuple(r["name"] for r in kept), tuple(len(r["losses"]) for r in kept)),
                             lambda: tc.loss_chart(series, title=t(f"{NS}.loss_chart"), x_title=t(f"{NS}.step_axis"),
                                                   y_title=t(f"{NS}.loss_axis"),
                                                   smooth_title=t(f"{NS}.smooth", k=tc.SMOOTH), max_step=longest)),
                       key="loss")
    st.caption(t(f"{NS}.loss_caption", k=tc.SMOOTH))

    st.subheader(t(f"{NS}.snaps_title", name=run["name"]))
    snaps = run["snaps"]
    steps = [s for s, _, _ in snaps]
    with_w = [(s, o, w) for s, o, w in snaps if w is not None and len(o)]
    if st.session_state.get("snap_pick") not in steps:                  # a new run: show its last snapshot
        st.session_state["snap_pick"] = steps[-1]
    picked = st.select_slider(t(f"{NS}.snap_pick"), steps, key="snap_pick") if len(steps) > 1 else steps[0]
    step, out, w = next(x for x in snaps if x[0] == picked)
    source = visible_chars(run["source"])
    if w is not None and len(out):
        skeleton = chart(("snap", w.shape), lambda: heatmap(          # one spec per shape, the data swapped in
            w, list(out), source, title="", x_title=t(f"{NS}.input_axis"), y_title=t(f"{NS}.output_axis"),
            value_title=t("common.weight"), selectable=False, show_numbers=len(source) <= 16,
            height=28 * len(out) + 150))
        anatomy.show_matrix(heatmap_like(skeleton, w, list(out), source, t(f"{NS}.snap_title", step=step, out=out)),
                            w, list(out), source, key="snap", selectable=False, file_name=f"alignment_step_{step}.csv")
    else:
        st.info(t(f"{NS}.no_alignment", out=anatomy.md_escape(out) or "—"), icon=":material/info:")
    if len(with_w) > 1:
        st.markdown(f"**{t(f'{NS}.grid_title')}**")
        anatomy.show_chart(chart(("grid", run["name"]), lambda: tc.snapshots_chart(
            with_w[-12:], run["source"], label=t(f"{NS}.panel"), weight_title=t("common.weight"),
            x_title=t(f"{NS}.input_axis"), y_title=t(f"{NS}.output_axis"))), key="grid")
    table = {t(f"{NS}.col_step"): steps, t(f"{NS}.col_output"): [o or "—" for _, o, _ in snaps],
             t(f"{NS}.col_right"): ["✓" if is_right(run["cfg"], o) else "✗" for _, o, _ in snaps]}
    if with_w:
        peaks = {s: float(w_.max(-1).mean()) for s, _, w_ in with_w}
        table[t(f"{NS}.col_peak")] = [round(peaks[s], 3) if s in peaks else None for s in steps]
    st.dataframe(table, hide_index=True, width="stretch")
    return {"step": step, "out": out, "w": w}


def notices(run: dict) -> None:
    losses = np.asarray(run["losses"])
    k = min(10, max(1, len(losses) // 4))
    items = [t(f"{NS}.notice_loss", first=f"{losses[:k].mean():.3f}", last=f"{losses[-k:].mean():.3f}", k=k,
               n=len(losses), s=f"{run['seconds']:.1f}")]
    if run["capped"]:
        items.append(t(f"{NS}.notice_capped", n=len(losses), steps=run["cfg"]["steps"], cap=f"{TIME_CAP:.0f}"))
    with_w = [(s, o, w) for s, o, w in run["snaps"] if w is not None and len(o)]
    if len(with_w) >= 2:
        (s0, _, w0), (s1, _, w1) = with_w[0], with_w[-1]
        items.append(t(f"{NS}.notice_sharp", s0=s0, p0=f"{w0.max(-1).mean():.2f}", s1=s1,
                       p1=f"{w1.max(-1).mean():.2f}", uniform=f"{1 / w1.shape[1]:.2f}"))
    final = run["snaps"][-1][1]
    first_right = next((s for s, o, _ in run["snaps"] if is_right(run["cfg"], o)), None)
    probe = anatomy.md_escape(run["source"])
    if first_right is not None:
        items.append(t(f"{NS}.notice_right", step=first_right, probe=probe,
                       out=anatomy.md_escape(next(o for s, o, _ in run["snaps"] if s == first_right))))
    else:
        items.append(t(f"{NS}.notice_not_yet", out=anatomy.md_escape(final) or "—", probe=probe))
    if not run["cfg"]["attention"]:
        items.append(t(f"{NS}.notice_try_attention"))
    others = [r for r in runs() if r is not run and r["cfg"]["task"] == run["cfg"]["task"]
              and r["cfg"]["attention"] != run["cfg"]["attention"]]
    if others:
        o = others[-1]
        n = min(len(o["losses"]), len(losses))
        items.append(t(f"{NS}.notice_compare", a=run["name"], b=o["name"], n=n,
                       la=f"{smooth(losses[:n], tc.SMOOTH)[-1]:.3f}",
                       lb=f"{smooth(o['losses'][:n], tc.SMOOTH)[-1]:.3f}"))
    same = [r for r in runs() if r is not run and r["cfg"] == run["cfg"]]
    if same:
        n = min(len(same[-1]["losses"]), len(losses))
        diff = float(np.abs(np.asarray(same[-1]["losses"][:n]) - losses[:n]).max())
        items.append(t(f"{NS}.notice_repeat", name=same[-1]["name"], diff=f"{diff:.2g}"))
    anatomy.notice(items)


def schedule_demo(steps: int) -> None:
    ours = [warmup_cosine(s, min(WARMUP, steps), steps) for s in range(steps)]
    theirs = [seed_warmup_cosine(s, WARMUP) for s in range(steps)]
    names = (t(f"{NS}.sched_ours"), t(f"{NS}.sched_tutorial"))
    anatomy.show_chart(chart(("sched", steps), lambda: tc.schedule_chart(
        ours, theirs, names=names, title=t(f"{NS}.sched_chart", steps=steps), x_title=t(f"{NS}.step_axis"),
        y_title=t(f"{NS}.sched_axis"))), key="sched")
    st.caption(t(f"{NS}.sched_caption", steps=steps, ours=f"{ours[-1]:.4f}", theirs=f"{theirs[-1]:.5f}",
                 first=f"{theirs[0]:.0f}"))


# ------------------------------------------------------------------ the page
anatomy.header(NS)
anatomy.intuition(NS)
st.markdown(lesson(f"{NS}/run"))
anatomy.formula(FORMULA, t(f"{NS}.formula_caption"))

cfg = controls()
st.caption(t(f"{NS}.facts", cap=f"{TIME_CAP:.0f}", lr=LR, warmup=WARMUP))
if cfg is not None and st.button(t(f"{NS}.train"), key="train", type="primary", icon=":material/play_arrow:"):
    number = st.session_state.get("_train_count", 0) + 1
    result = train(cfg, number)
    if result is not None:
        st.session_state["_train_count"] = number
        kept = runs()
        kept.append(result)
        del kept[:-KEEP_RUNS]
        st.session_state["show_run"] = result["name"]      # show the new run (set before the box is drawn)
        st.session_state.pop("snap_pick", None)

kept = runs()
if not kept:
    st.info(t(f"{NS}.press"), icon=":material/play_circle:")
else:
    names = [r["name"] for r in kept]
    if st.session_state.get("show_run") not in names:
        st.session_state["show_run"] = names[-1]
    pick = st.selectbox(t(f"{NS}.show_run"), names, key="show_run", help=t(f"{NS}.show_run_help", k=KEEP_RUNS))
    run = next(r for r in kept if r["name"] == pick)
    results_section(run)
    notices(run)

start = untrained(cfg["task"], cfg["seed"], cfg["probe"]) if cfg else None
explain = t(f"{NS}.ex_explain")
if start is not None:
    explain += " " + t(f"{NS}.ex_numbers", peak=f"{start['peak']:.3f}", uniform=f"{start['uniform']:.3f}")
anatomy.exercise("tr_ex", t(f"{NS}.ex_question"), [t(f"{NS}.ex_a"), t(f"{NS}.ex_b"), t(f"{NS}.ex_c")], 1, explain)
anatomy.pitfall(t(f"{NS}.pit_title"), t(f"{NS}.pit_body"), code=TUTORIAL_SCHEDULE,
                demo=lambda: schedule_demo(cfg["steps"] if cfg else STEPS[2]))
anatomy.show_code(live_run, TransformerTrainer.fit, TransformerTrainer.train_step, warmup_cosine, seq2seq_loss)

"""Training live: a short, capped training run of a small model in the app, with the loss curve and
attention snapshots, so the learner watches attention learn where to look.

Second tutorial's TransformerTrainer (fixed: AdamW, a schedule that ends with the run, seeded) on
the first tutorial's Seq2Seq with Bahdanau attention (dates, reversal: the snapshot is the alignment)
or on the "it" page's encoder with its word readout (pronoun: the snapshot is the attention from "it"
in every layer and head, and nothing but the answer's word is supervised). A run starts only when the
button is pressed, never on a rerun; its results stay in the session so the page stays responsive. Runs go
through the server's queue (ui.training_queue): one at a time, identical trainings of different sessions
shared, a live place in the queue for everyone waiting.
"""
from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pandas as pd
import streamlit as st
import torch
from streamlit.runtime import Runtime
from streamlit.runtime.scriptrunner import get_script_run_ctx

from attention_core.labs import seed_bugs
from attention_core.labs.alignment import matching_form
from attention_core.labs.bottleneck import clean_digits
from attention_core.labs.training import smooth
from attention_core.models.pronoun import pronoun_loss
from attention_core.models.recipes import LIVE_PROBES, live_run
from attention_core.models.seq2seq import seq2seq_loss
from attention_core.models.tasks import (
    MAX_DATE_INPUT,
    PronounExample,
    normalize_date_text,
    parse_pronoun_sentence,
    pronoun_text,
    sentence_language,
    unknown_chars,
)
from attention_core.models.trainer import TransformerTrainer, seed_warmup_cosine, warmup_cosine
from ui import anatomy
from ui import training_charts as tc
from ui import training_queue as tq
from ui.alignment_charts import visible_chars
from ui.cache import MB, cache_data
from ui.charts import heatmap_spec, respec, unique_labels
from ui.controls import seed as seed_control
from ui.i18n import lesson, t

NS = "training"
TASKS = {"dates": "march 5, 2017 → 2017-03-05", "reverse": "12345 → 54321",     # same label in both languages
         "pronoun": "it / 它 → ?"}
TIME_CAP = tq.TIME_CAP    # seconds of training: the run stops here whatever the step count (2-core machine)
POLL = 1.0                # seconds between two looks at a queued or running run
STEPS = (10, 600, 250)    # min, max, default
EVERY = (5, 100, 25)
MAX_REVERSE_PROBE = 20
KEEP_RUNS = 4             # runs kept in the session for comparison
LR, WARMUP = 1e-2, 20     # live_run's defaults: a fast schedule for a short run
LRS = {"dates": LR, "reverse": LR, "pronoun": 3e-3}   # the encoder learns less steadily at 1e-2 (loss ~1.7 after
#                                                      300 steps, against ~0.5 at 3e-3, seeds 0-2 measured)
PRONOUN_PARSE_ERRORS = {"empty": "err_empty", "too_long": "err_too_long", "unknown_word": "err_unknown_word",
                        "no_template": "err_no_template", "bad_noun": "err_bad_noun",
                        "bad_adjective": "err_bad_adjective", "same_noun": "err_same_noun"}
FORMULA = (r"\mathcal{L} = -\frac{1}{T}\sum_{t=1}^{T}\log p_\theta\big(y_t \mid y_{<t},\, x\big),\qquad "
           r"\eta_s = \eta\cdot\begin{cases}\dfrac{s+1}{w} & s < w\\[4pt]"
           r"\tfrac12\big(1+\cos\big(\pi\,\frac{s-w}{S-1-w}\big)\big) & s \ge w\end{cases}")


# ------------------------------------------------------------------ this session's runs
def runs() -> list[dict]:
    return st.session_state.setdefault("_train_runs", [])


# ------------------------------------------------------------------ controls
def controls() -> dict | None:
    """The run's settings (all in the URL); None after a message about the probe."""
    c1, c2, c3 = st.columns([4, 2, 2])     # the three task buttons fit on one line
    task = c1.segmented_control(t(f"{NS}.task"), list(TASKS), default="dates", required=True,
                                format_func=TASKS.get, key="task", bind="query-params", help=t(f"{NS}.task_help"))
    task = task if task in TASKS else "dates"
    attention = c2.toggle(t(f"{NS}.attention"), value=True, key="attn", bind="query-params",
                          help=t(f"{NS}.attention_help_pronoun" if task == "pronoun" else f"{NS}.attention_help"),
                          disabled=task == "pronoun")
    attention = True if task == "pronoun" else attention      # the encoder is made of attention
    with c3:
        seed = seed_control()
    c4, c5 = st.columns(2)
    steps = c4.slider(t(f"{NS}.steps"), *STEPS, step=10, key="steps", bind="query-params",
                      help=t(f"{NS}.steps_help", cap=f"{TIME_CAP:.0f}"))
    every = c5.slider(t(f"{NS}.every"), *EVERY, step=5, key="every", bind="query-params",
                      help=t(f"{NS}.every_help"))
    if task == "dates":
        typed = st.text_input(t(f"{NS}.probe_dates"), value=t(f"{NS}.probe_dates_default"), key="probe_dates",
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
    elif task == "pronoun":
        typed = st.text_input(t(f"{NS}.probe_pronoun"), value=t(f"{NS}.probe_pronoun_default"), key="probe_pronoun",
                              bind="query-params", max_chars=400, help=t(f"{NS}.probe_pronoun_help"))
        example = pronoun_probe(typed)
        if example is None:
            return None
        return {"task": task, "attention": True, "seed": int(seed), "steps": int(steps), "every": int(every),
                "probe": typed, "referent": example.tokens[example.referent]}
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


def pronoun_probe(text: str) -> PronounExample | None:
    """The typed probe sentence parsed by the grammar; None after the "it" page's message for it."""
    lang = sentence_language(text)
    parsed = parse_pronoun_sentence(text, lang)
    if parsed.ok:
        return parsed.example
    anatomy.problem(f"pronoun.{PRONOUN_PARSE_ERRORS[parsed.error]}", word=anatomy.md_escape(parsed.detail),
                    max=parsed.detail, lang=t(f"pronoun.lang_{lang}"))
    return None


def quoted(chars: list[str], limit: int = 8) -> str:
    shown = t(f"{NS}.sep").join(t("common.quoted", text=anatomy.md_escape(c))
                                for c in visible_chars("".join(chars[:limit])))
    return shown + ("…" if len(chars) > limit else "")


def snap_title(task: str, step: int, out: str) -> str:
    return t(f"{NS}.snap_title_pronoun" if task == "pronoun" else f"{NS}.snap_title", step=step, out=out)


def axis(task: str, which: str) -> str:
    """Axis titles of the snapshot heatmaps: input x output characters, or tokens x heads."""
    if task == "pronoun":
        return t(f"{NS}.token_axis") if which == "x" else t(f"{NS}.head_axis")
    return t(f"{NS}.input_axis") if which == "x" else t(f"{NS}.output_axis")


def run_name(cfg: dict, number: int) -> str:
    return t(f"{NS}.run_name", n=number, task=t(f"{NS}.task_{cfg['task']}"),
             attn=t(f"{NS}.with_attn") if cfg["attention"] else t(f"{NS}.without_attn"),
             seed=cfg["seed"], steps=cfg["steps"])


def is_right(cfg: dict, out: str) -> bool:
    """Reversal: the digits backwards. Dates: the answer is a date that the probe is a supported form of.
    Pronoun: the referent's word."""
    if cfg["task"] == "pronoun":
        return out == cfg["referent"]
    if cfg["task"] == "reverse":
        return out == cfg["probe"][::-1]
    return matching_form(cfg["probe"], out) is not None


def head_rows(n_layers: int, n_heads: int) -> list[str]:
    return [t("pronoun.head_label", layer=a + 1, head=b + 1) for a in range(n_layers) for b in range(n_heads)]


@cache_data(max_entries=16, max_bytes=4 * MB)
def untrained(task: str, seed: int, probe: str) -> dict:
    """The probe through a freshly initialised attention model (step 0): how attention starts out."""
    run = live_run(task, attention=True, seed=seed, lr=LRS[task], warmup_steps=WARMUP, probe=probe)
    with torch.inference_mode():
        snap = run.snapshot(run.model)
    _, w = tq.snap_of(task, snap)
    n = w.shape[-1] if task == "pronoun" else len(probe)
    out = {"peak": float(w.max(-1).mean()) if w.size else float("nan"), "uniform": 1 / max(n, 1)}
    if task == "pronoun":
        e = run.probe
        out.update(ref=float(w[:, e.referent].mean()), other=float(w[:, e.nouns[1 - e.label]].mean()),
                   ref_word=e.tokens[e.referent])
    return out


# ------------------------------------------------------------------ the run (only on the button; in the server's queue)
def session_alive() -> Callable[[], bool]:
    """True while this browser session is connected: closing the tab frees its place in the queue."""
    ctx = get_script_run_ctx()
    if ctx is None or not Runtime.exists():
        return lambda: True                 # no server (AppTest): the queue's lease alone decides
    runtime, session = Runtime.instance(), ctx.session_id
    return lambda: runtime.is_active_session(session)


def job_of(cfg: dict) -> tuple[tq.TrainingSpec, tq.View]:
    """What the server's queue shares (the training) and what this session watches (its probe)."""
    task = cfg["task"]
    return (tq.TrainingSpec(task, cfg["attention"], cfg["seed"], cfg["steps"], LRS[task], WARMUP, TIME_CAP),
            tq.View(cfg["probe"], cfg["every"]))


def pending() -> tuple[tq.Ticket, dict] | None:
    return st.session_state.get("_train_ticket")


def start(cfg: dict) -> None:
    """Queue the run (or join the same one another session started); the live panel shows where it is."""
    spec, view = job_of(cfg)
    held = pending()
    if held is not None:                   # one place in the queue per session: a new press replaces it
        tq.QUEUE.release(held[0])
        del st.session_state["_train_ticket"]
    # a run this session already has is trained again (pressing twice shows that a seeded run is reproducible);
    # a run another session finished is shared
    again = any(job_of(r["cfg"])[0] == spec for r in runs())
    ticket = tq.submit_training(spec, view, alive=session_alive(), reuse_done=not again)
    if ticket is None:
        anatomy.problem(f"{NS}.err_queue_full", n=tq.QUEUE.max_waiting, s=f"{tq.WALL_CAP:.0f}")
        return
    st.session_state["_train_ticket"] = (ticket, cfg)


def labels(task: str, record: dict, heads: tuple[int, int] | None) -> tuple[str, list[str], list[str] | None]:
    """(the probe as shown, the snapshot's column labels, its row labels or None for output characters)."""
    if task == "pronoun":
        e = record["probe"]
        return pronoun_text(e.tokens, e.lang), unique_labels(list(e.tokens)), head_rows(*heads)
    return record["probe"], visible_chars(record["probe"]), None


def harvest() -> None:
    """A finished ticket of this session becomes one of its kept runs (or a message if it was stopped)."""
    held = pending()
    if held is None:
        return
    ticket, cfg = held
    status = tq.QUEUE.status(ticket)
    if status.state in ("queued", "running"):
        return
    del st.session_state["_train_ticket"]
    tq.QUEUE.release(ticket)
    record = status.record or {}
    if status.state != "done" or "snaps" not in record or not status.result["losses"]:
        anatomy.problem(f"{NS}.err_stopped" if status.state == "cancelled" else f"{NS}.err_failed")
        return
    number = st.session_state.get("_train_count", 0) + 1
    result = status.result
    shown, cols, rows = labels(cfg["task"], record, result["heads"])
    kept = runs()
    kept.append({"cfg": cfg, "name": run_name(cfg, number), "losses": list(result["losses"]),
                 "lrs": list(result["lrs"]), "snaps": list(record["snaps"]), "seconds": result["seconds"],
                 "capped": result["capped"], "source": shown, "cols": cols, "rows": rows, "probe": record["probe"]})
    del kept[:-KEEP_RUNS]
    st.session_state["_train_count"] = number
    st.session_state["show_run"] = kept[-1]["name"]         # show the new run (set before the box is drawn)
    st.session_state.pop("snap_pick", None)
    st.caption(t(f"{NS}.progress_done", steps=len(result["losses"]), s=f"{result['seconds']:.1f}"))


@st.fragment(run_every=POLL)
def live_panel() -> None:
    """Where this session's run is, redrawn every POLL s: its place in the queue and an upper bound of the
    wait, or the shared run's progress, loss so far and the latest snapshot of this session's probe."""
    held = pending()
    if held is None:
        return
    ticket, cfg = held
    status = tq.QUEUE.status(ticket)
    if status.state not in ("queued", "running"):
        st.rerun()                                            # the whole page: harvest() keeps the run
    if status.state == "queued":
        st.info(t(f"{NS}.queue_position", pos=status.position, s=f"{status.wait_bound:.0f}",
                  cap=f"{tq.WALL_CAP:.0f}", workers=tq.QUEUE.workers), icon=":material/hourglass_top:")
        return
    p = status.progress
    if status.watchers > 1:
        st.caption(t(f"{NS}.queue_shared", n=status.watchers - 1))
    if not p.get("step"):
        st.progress(0.0, text=t(f"{NS}.progress_start"))
        return
    st.progress(min(p["step"] / p["steps"], 1.0), text=t(f"{NS}.progress", step=p["step"], steps=p["steps"],
                                                            loss=f"{p['loss']:.3f}", s=f"{p['elapsed']:.1f}"))
    name = run_name(cfg, st.session_state.get("_train_count", 0) + 1)
    skeleton = anatomy.cached_spec(("loss_live", cfg["steps"], name), lambda: tc.loss_chart(   # built once per run
        [(name, [1.0])], title="", x_title=t(f"{NS}.step_axis"), y_title=t(f"{NS}.loss_axis"),
        smooth_title=t(f"{NS}.smooth", k=tc.SMOOTH), max_step=cfg["steps"]))
    st.vega_lite_chart(respec(skeleton, tc.loss_frame([(name, list(p["losses"]))]), title=t(f"{NS}.loss_live")),
                       width="stretch")
    record = status.record or {}
    snaps = list(record.get("snaps", ()))
    if not snaps:
        return
    step, out, w = snaps[-1]
    if w is not None and len(out):
        _, cols, rows = labels(cfg["task"], record, p.get("heads"))
        st.vega_lite_chart(heatmap_spec(
            w, rows or list(out), cols, title=snap_title(cfg["task"], step, out),
            x_title=axis(cfg["task"], "x"), y_title=axis(cfg["task"], "y"), value_title=t("common.weight"),
            selectable=False, show_numbers=False, height=320), width="stretch")
    else:
        st.caption(t(f"{NS}.snap_plain", step=step, out=anatomy.md_escape(out) or "—"))


# ------------------------------------------------------------------ results (from the session: cheap)
def results_section(run: dict) -> dict:
    kept = runs()
    st.subheader(t(f"{NS}.loss_title"))
    series = [(r["name"], r["losses"]) for r in kept]
    longest = max(len(r["losses"]) for r in kept)
    anatomy.show_chart(lambda: tc.loss_chart(series, title=t(f"{NS}.loss_chart"), x_title=t(f"{NS}.step_axis"),
                                             y_title=t(f"{NS}.loss_axis"),
                                             smooth_title=t(f"{NS}.smooth", k=tc.SMOOTH), max_step=longest),
                       key="loss", cache=(tc.fingerprint([(n, np.asarray(x)) for n, x in series]),))  # data, not names
    st.caption(t(f"{NS}.loss_caption", k=tc.SMOOTH))

    task = run["cfg"]["task"]
    st.subheader(t(f"{NS}.snaps_title_pronoun" if task == "pronoun" else f"{NS}.snaps_title", name=run["name"]))
    snaps = run["snaps"]
    steps = [s for s, _, _ in snaps]
    with_w = [(s, o, w) for s, o, w in snaps if w is not None and len(o)]
    if st.session_state.get("snap_pick") not in steps:                  # a new run: show its last snapshot
        st.session_state["snap_pick"] = steps[-1]
    picked = st.select_slider(t(f"{NS}.snap_pick"), steps, key="snap_pick") if len(steps) > 1 else steps[0]
    step, out, w = next(x for x in snaps if x[0] == picked)
    source = run["cols"]
    rows = run["rows"] or list(out)
    if w is not None and len(out):
        anatomy.show_matrix(heatmap_spec(
            w, rows, source, title=snap_title(task, step, out), x_title=axis(task, "x"), y_title=axis(task, "y"),
            value_title=t("common.weight"), selectable=False, show_numbers=len(source) <= 16,
            height=28 * len(rows) + 150), w, rows, source, key="snap", selectable=False,
            file_name=f"attention_step_{step}.csv")
    else:
        st.info(t(f"{NS}.no_alignment", out=anatomy.md_escape(out) or "—"), icon=":material/info:")
    if len(with_w) > 1:
        st.markdown(f"**{t(f'{NS}.grid_title')}**")
        grid_id = tc.fingerprint(task, with_w[-12:], run["cols"], run["rows"])   # the data, not the run's name
        anatomy.show_chart(anatomy.cached_spec(("grid", grid_id), lambda: tc.snapshots_chart(
            with_w[-12:], run["cols"], label=t(f"{NS}.panel"), weight_title=t("common.weight"),
            x_title=axis(task, "x"), y_title=axis(task, "y"), row_labels=run["rows"])), key="grid")
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
    if run["cfg"]["task"] == "pronoun" and with_w:
        e, (s1, _, w1) = run["probe"], with_w[-1]
        ref, other = w1[:, e.referent], w1[:, e.nouns[1 - e.label]]
        best = int((ref - other).argmax())
        items.append(t(f"{NS}.notice_pronoun_head", step=s1, head=run["rows"][best], ref=anatomy.md_escape(
            e.tokens[e.referent]), w=f"{ref[best]:.2f}", other=anatomy.md_escape(e.tokens[e.nouns[1 - e.label]]),
            wo=f"{other[best]:.2f}"))
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
    anatomy.show_chart(anatomy.cached_spec(("sched", steps), lambda: tc.schedule_chart(
        ours, theirs, names=names, title=t(f"{NS}.sched_chart", steps=steps), x_title=t(f"{NS}.step_axis"),
        y_title=t(f"{NS}.sched_axis"))), key="sched")
    st.caption(t(f"{NS}.sched_caption", steps=steps, ours=f"{ours[-1]:.4f}", theirs=f"{theirs[-1]:.5f}",
                 first=f"{theirs[0]:.0f}"))


# ------------------------------------------------------------------ pitfalls of the tutorial's train_step
@cache_data(max_entries=1, max_bytes=1 * MB)
def trainer_bugs() -> dict:
    torch.set_num_threads(1)
    loss = seed_bugs.tutorial_loss_on_encoder_states()
    decay = {g: (seed_bugs.weight_decay_effect("adam", g), seed_bugs.weight_decay_effect("adamw", g))
             for g in DECAY_GRADS}
    return {"loss": loss, "decay": decay}


DECAY_GRADS = (0.0, 0.01, 1.0, 100.0)


def loss_head_demo() -> None:
    r = trainer_bugs()["loss"]
    st.markdown(t(f"{NS}.pit_head_now", states=r["states"], targets=r["targets"], err=(r["error"] or "—").replace(
        "`", "'"), logits=r["logits"], loss=f"{r['fixed_loss']:.2f}", chance=f"{r['chance']:.2f}"))


def adamw_demo() -> None:
    decay = trainer_bugs()["decay"]
    st.dataframe(pd.DataFrame([{t(f"{NS}.pit_decay_grad"): f"{g:g}", t(f"{NS}.pit_decay_adam"): f"{a:.2e}",
                                t(f"{NS}.pit_decay_adamw"): f"{w:.2e}"} for g, (a, w) in decay.items()]),
                 hide_index=True)
    st.markdown(t(f"{NS}.pit_decay_now", a0=f"{decay[0.0][0]:.3f}", a001=f"{decay[0.01][0]:.1e}",
                  a100=f"{decay[100.0][0]:.1e}",
                  w=f"{decay[1.0][1]:.2e}"))


# ------------------------------------------------------------------ the page
anatomy.header(NS)
anatomy.intuition(NS)
st.markdown(lesson(f"{NS}/run"))
anatomy.formula(FORMULA, t(f"{NS}.formula_caption"))

cfg = controls()
task_now = cfg["task"] if cfg else None
st.caption(t(f"{NS}.facts_pronoun" if task_now == "pronoun" else f"{NS}.facts", cap=f"{TIME_CAP:.0f}",
             lr=LRS.get(task_now, LR), warmup=WARMUP))
harvest()                    # before the button: a finished run enables it again
if cfg is not None and st.button(t(f"{NS}.train"), key="train", type="primary", icon=":material/play_arrow:",
                                 disabled=pending() is not None):
    start(cfg)
    harvest()                # a run another session just finished answers at once
    if pending() is not None:
        st.rerun()           # draw the button disabled while the run is queued or running
if pending() is not None:    # only then: the panel's timer stops with the run
    live_panel()

kept = runs()
if not kept:
    if pending() is None:
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
if task_now == "pronoun":
    explain = t(f"{NS}.ex_explain_pronoun", peak=f"{start['peak']:.3f}", uniform=f"{start['uniform']:.3f}",
                ref=anatomy.md_escape(start["ref_word"]), wr=f"{start['ref']:.3f}", wo=f"{start['other']:.3f}")
    anatomy.exercise("tr_ex_pr", t(f"{NS}.ex_question_pronoun"),
                     [t(f"{NS}.ex_pr_a"), t(f"{NS}.ex_pr_b"), t(f"{NS}.ex_pr_c")], 1, explain)
else:
    explain = t(f"{NS}.ex_explain")
    if start is not None:
        explain += " " + t(f"{NS}.ex_numbers", peak=f"{start['peak']:.3f}", uniform=f"{start['uniform']:.3f}")
    anatomy.exercise("tr_ex", t(f"{NS}.ex_question"), [t(f"{NS}.ex_a"), t(f"{NS}.ex_b"), t(f"{NS}.ex_c")], 1,
                     explain)
anatomy.pitfall(t(f"{NS}.pit_title"), t(f"{NS}.pit_body"), code=t(f"{NS}.pit_code"),
                demo=lambda: schedule_demo(cfg["steps"] if cfg else STEPS[2]))
anatomy.pitfall(t(f"{NS}.pit_head_title"), t(f"{NS}.pit_head_body"), code=t(f"{NS}.pit_head_code"),
                demo=loss_head_demo)
anatomy.pitfall(t(f"{NS}.pit_decay_title"), t(f"{NS}.pit_decay_body"), code=t(f"{NS}.pit_decay_code"),
                demo=adamw_demo)
anatomy.show_code(live_run, TransformerTrainer.fit, TransformerTrainer.train_step, warmup_cosine,
                  pronoun_loss if task_now == "pronoun" else seq2seq_loss,
                  seed_bugs.tutorial_loss_on_encoder_states, seed_bugs.weight_decay_effect)

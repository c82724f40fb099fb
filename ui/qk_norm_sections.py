"""The QK-norm page's sections: the recorded runs (read once per file version) and their curves, the exercise, the
learning-rate sweep, the grown weights and the saturated softmax, the live run in the server's queue (its job, what a
session keeps, its curves, its section) and the pitfall's demo."""
from __future__ import annotations

import math
import time

import pandas as pd
import streamlit as st

from attention_core.labs import qk_norm as lab
from serving import training_queue as tq
from serving.cache import MB, cache_data
from ui import anatomy, live_run
from ui import format as fmt
from ui.i18n import t
from ui.models import Unavailable, show_unavailable, why_of
from ui.qk_norm_charts import lr_frame, lr_sweep, saturation_frame, saturation_lines, step_frame, step_lines

NS = "qk_norm"
SHOWN, COMMAND = "assets/models/qk_norm_runs.json", lab.RECORD_COMMAND
EX_LR = 0.3                          # the rate of the exercise (and the page's default)
FACTORS = (1, 2, 3, 5, 10, 20, 30)   # how much W_Q and W_K grew
LIVE_LRS = (0.01, 0.03, 0.1, 0.3, 1.0)
KEEP_RUNS = 4                        # live runs kept in the session
FAILED = 0.5                         # a final loss above this fraction of the chance loss: the run did not learn


# ------------------------------------------------------------------ the recorded runs (read once per file version)
@cache_data(max_entries=2, max_bytes=2 * MB)
def _recorded(path: str, stamp: tuple[int, int]):
    try:
        return lab.read_record(lab.RECORD_FILE)
    except FileNotFoundError:
        return Unavailable(SHOWN, True, COMMAND)
    except Exception as err:           # damaged: JSON, UTF-8 or content errors
        return Unavailable(SHOWN, False, COMMAND, why_of(err, lab.RECORD_FILE))


def stamp() -> tuple[int, int] | None:
    try:
        s = lab.RECORD_FILE.stat()
    except OSError:
        return None
    return s.st_mtime_ns, s.st_size


def recorded():
    """The recorded runs (dict), or Unavailable: keyed on the file's time and size."""
    s = stamp()
    return Unavailable(SHOWN, True, COMMAND) if s is None else _recorded(str(lab.RECORD_FILE), s)


def run_of(doc: dict, lr: float, seed: int, qk: bool) -> dict | None:
    return next((r for r in doc["runs"] if math.isclose(r["lr"], lr) and r["seed"] == seed
                 and r["qk_norm"] == qk), None)


def run_label(qk: bool) -> str:
    return t(f"{NS}.run_on") if qk else t(f"{NS}.run_off")


def layer_label(i: int) -> str:
    return t(f"{NS}.layer", i=i + 1)


def series(runs: list[tuple[str, dict]], measure: str, layers: tuple[str, ...]) -> list:
    """(label, run) -> step_frame series of ``measure``: "loss" (every step), "max_logit" or "entropy" (per
    layer, named by ``layers``, at every look)."""
    out = []
    for label, run in runs:
        if measure == "loss":
            out.append((label, "", range(1, len(run["losses"]) + 1), run["losses"]))
            continue
        col = 1 if measure == "max_logit" else 2
        probes = run["probes"]
        for i in range(len(probes[0][col])):
            out.append((label, layers[i], [p[0] for p in probes], [p[col][i] for p in probes]))
    return out


@cache_data(max_entries=48, max_bytes=4 * MB)
def recorded_frames(stamp_: tuple[int, int], lr: float, seed: int, labels: tuple[str, str],
                    layers: tuple[str, ...]) -> dict[str, pd.DataFrame] | None:
    """The three frames (loss, max_logit, entropy) of both runs at ``lr`` and ``seed`` (None: not recorded)."""
    doc = _recorded(str(lab.RECORD_FILE), stamp_)
    pair = [run_of(doc, lr, seed, qk) for qk in (False, True)]
    if None in pair:
        return None
    runs = list(zip(labels, pair))
    return {m: step_frame(series(runs, m, layers)) for m in ("loss", "max_logit", "entropy")}


@cache_data(max_entries=8, max_bytes=1 * MB)
def sweep_frame(stamp_: tuple[int, int], labels: tuple[str, str]) -> pd.DataFrame:
    doc = _recorded(str(lab.RECORD_FILE), stamp_)
    return lr_frame([(labels[int(r["qk_norm"])], r["lr"], r["seed"], lab.final_loss(r["losses"]))
                     for r in doc["runs"]])


def sensitivity(frame: pd.DataFrame, label: str, initial: float) -> float:
    """Wortsman et al.'s LR sensitivity of one model, on the mean final loss over the seeds, against the best
    mean final loss of either model (the same reference for both)."""
    means = frame.groupby(["run", "lr"])["loss"].mean()
    return lab.lr_sensitivity(list(means[label]), initial, float(means.min()))


def curve_charts(frames: dict[str, pd.DataFrame], runs: list[str], key: str, *, layers_shown: bool = True) -> None:
    common = dict(x_title=t(f"{NS}.axis_step"), run_title=t(f"{NS}.axis_run"), layer_title=t(f"{NS}.axis_layer"),
                  runs=runs)
    anatomy.show_chart(step_lines(frames["max_logit"], y_title=t(f"{NS}.axis_max_logit"), log_y=True,
                                  layers=layers_shown, title=t(f"{NS}.chart_max_logit"), **common), key=f"{key}_logit")
    anatomy.show_chart(step_lines(frames["entropy"], y_title=t(f"{NS}.axis_entropy"), layers=layers_shown,
                                  title=t(f"{NS}.chart_entropy"), **common), key=f"{key}_entropy")
    anatomy.show_chart(step_lines(frames["loss"], y_title=t(f"{NS}.axis_loss"), layers=False,
                                  title=t(f"{NS}.chart_loss"), **common), key=f"{key}_loss")


# ------------------------------------------------------------------ sections, in lesson order
def question_section(doc) -> None:
    """At EX_LR without QK-norm, how far does the largest logit grow? The answer is the recorded run's."""
    if isinstance(doc, Unavailable):
        return
    off = run_of(doc, EX_LR, 0, False)
    on = run_of(doc, EX_LR, 0, True)
    if off is None or on is None:
        return
    start, end = max(off["probes"][0][1]), max(off["probes"][-1][1])
    answer = 0 if end < 10 * start else (1 if end < 1000 * start else 2)
    explain = t(f"{NS}.ex_explain", lr=fmt.exact(EX_LR), start=fmt.sig(start), end=fmt.sig(end),
                ratio=fmt.sig(end / start), on=fmt.sig(max(on["probes"][-1][1])),
                ent=fmt.fixed(max(off["probes"][-1][2]), 3), steps=len(off["losses"]))
    anatomy.exercise(f"{NS}_ex", t(f"{NS}.ex_question", lr=fmt.exact(EX_LR), start=fmt.sig(start),
                                   steps=len(off["losses"])),
                     [t(f"{NS}.ex_a"), t(f"{NS}.ex_b"), t(f"{NS}.ex_c")], answer=answer, explanation=explain)


def controls_section(doc) -> tuple[float, int]:
    lrs = sorted({r["lr"] for r in doc["runs"]}) if isinstance(doc, dict) else list(lab.RECORD_LRS)
    seeds = sorted({r["seed"] for r in doc["runs"]}) if isinstance(doc, dict) else list(lab.RECORD_SEEDS)
    left, right = st.columns([3, 1])
    with left:
        lr = st.select_slider(t(f"{NS}.ctl_lr"), options=lrs, value=EX_LR if EX_LR in lrs else lrs[-1], key="lr",
                              bind="query-params", format_func=lambda v: f"{v:g}")
    with right:
        seed = st.selectbox(t(f"{NS}.ctl_seed"), seeds, index=0, key="run_seed", bind="query-params")
    return float(lr), int(seed)


COLLAPSED = 0.1          # nats: every layer below this counts as collapsed (one-hot rows)


def collapse_item(run: dict, chance: float) -> str:
    """When every layer's entropy first fell below COLLAPSED, and the loss then (mean of the steps up to it,
    at most 5)."""
    step = next((p[0] for p in run["probes"] if p[0] > 0 and max(p[2]) < COLLAPSED), None)
    if step is None:
        return t(f"{NS}.notice_no_collapse", limit=fmt.fixed(COLLAPSED, 1))
    recent = run["losses"][max(0, step - 5):step]
    return t(f"{NS}.notice_collapse", limit=fmt.fixed(COLLAPSED, 1), step=step,
             loss=fmt.fixed(sum(recent) / len(recent), 2), chance=fmt.fixed(chance, 2))


def evidence_section(doc, lr: float, seed: int) -> None:
    st.subheader(t(f"{NS}.evidence_heading"))
    st.markdown(t(f"{NS}.evidence_intro"))
    if isinstance(doc, Unavailable):
        show_unavailable(doc)
        return
    labels = (run_label(False), run_label(True))
    layers = tuple(layer_label(i) for i in range(doc["settings"]["num_layers"]))
    frames = recorded_frames(stamp(), lr, seed, labels, layers)
    if frames is None:
        anatomy.problem(f"{NS}.err_not_recorded", lr=fmt.exact(lr), seed=seed, command=COMMAND)
        return
    curve_charts(frames, list(labels), "rec")
    s = doc["settings"]
    st.caption(t(f"{NS}.recorded_caption", d=s["d_model"], L=s["num_layers"], h=s["num_heads"],
                 d_head=s["d_model"] // s["num_heads"], seq=s["seq"], symbols=s["vocab"] - 2, steps=s["steps"],
                 batch=s["batch"], warmup=s["warmup"], every=s["every"], probe=s["probe_size"],
                 date=anatomy.md_escape(str(doc.get("date", "?"))), command=COMMAND))
    off, on = run_of(doc, lr, seed, False), run_of(doc, lr, seed, True)
    chance = s["chance_loss"]
    items = [
        t(f"{NS}.notice_logit", start=fmt.sig(max(off["probes"][0][1])), off=fmt.sig(max(off["probes"][-1][1])),
          on=fmt.sig(max(on["probes"][-1][1])), steps=len(off["losses"]), lr=fmt.exact(lr)),
        t(f"{NS}.notice_entropy", e0=fmt.fixed(sum(off["probes"][0][2]) / len(off["probes"][0][2]), 2),
          off=", ".join(fmt.fixed(v, 3) for v in off["probes"][-1][2]),
          on=", ".join(fmt.fixed(v, 3) for v in on["probes"][-1][2]),
          uniform=fmt.fixed(lab.uniform_entropy(2 * s["seq"]), 2)),
        collapse_item(off, chance),
        t(f"{NS}.notice_loss", off=fmt.fixed(lab.final_loss(off["losses"]), 3),
          on=fmt.fixed(lab.final_loss(on["losses"]), 3), chance=fmt.fixed(chance, 2)),
    ]
    bounds = [b for b in on["bounds"] if b is not None]
    if bounds:
        d_head = s["d_model"] // s["num_heads"]
        items.append(t(f"{NS}.notice_bound", bound=fmt.sig(max(bounds)), on=fmt.sig(max(on["probes"][-1][1])),
                       d_head=d_head, plain=fmt.fixed(math.sqrt(d_head), 2)))
    anatomy.notice(items)


def sweep_section(doc) -> None:
    st.subheader(t(f"{NS}.sweep_heading"))
    if isinstance(doc, Unavailable):
        show_unavailable(doc)
        return
    st.markdown(t(f"{NS}.sweep_intro"))
    labels = (run_label(False), run_label(True))
    frame = sweep_frame(stamp(), labels)
    chance = doc["settings"]["chance_loss"]
    anatomy.show_chart(lr_sweep(frame, x_title=t(f"{NS}.axis_lr"), y_title=t(f"{NS}.axis_final_loss"),
                                run_title=t(f"{NS}.axis_run"), seed_title=t(f"{NS}.ctl_seed"), runs=list(labels),
                                chance=chance, title=t(f"{NS}.chart_sweep")), key="sweep")
    seeds = len(doc["settings"]["seeds"])
    st.caption(t(f"{NS}.sweep_caption", seeds=seeds, chance=fmt.fixed(chance, 2), command=COMMAND))
    means = frame.groupby(["run", "lr"])["loss"].mean()
    learned = {lb: [lr for lr, v in means[lb].items() if v < FAILED * chance] for lb in labels}
    fmt_lrs = {lb: ", ".join(f"{v:g}" for v in learned[lb]) or "—" for lb in labels}
    anatomy.notice([
        t(f"{NS}.notice_sweep_range", off=fmt_lrs[labels[0]], on=fmt_lrs[labels[1]],
          limit=fmt.fixed(FAILED * chance, 2), seeds=seeds),
        t(f"{NS}.notice_sensitivity", off=fmt.fixed(sensitivity(frame, labels[0], chance), 3),
          on=fmt.fixed(sensitivity(frame, labels[1], chance), 3), chance=fmt.fixed(chance, 2)),
    ] + slower_item(means, labels, doc["settings"]))


def slower_item(means: pd.Series, labels: tuple[str, str], settings: dict) -> list[str]:
    """The rate at which QK-norm costs the most (its mean final loss above the plain model's), if any."""
    gaps = {lr: means[labels[1]][lr] - means[labels[0]][lr] for lr in means[labels[0]].index}
    lr, gap = max(gaps.items(), key=lambda kv: kv[1])
    if gap <= 0.05:
        return []
    d_head = settings["d_model"] // settings["num_heads"]
    return [t(f"{NS}.notice_slower", lr=f"{lr:g}", on=fmt.fixed(means[labels[1]][lr], 3),
              off=fmt.fixed(means[labels[0]][lr], 3), d_head=d_head, bound=fmt.fixed(math.sqrt(d_head), 2))]


@cache_data(max_entries=32, max_bytes=1 * MB)
def grown(qk: bool, factor: float) -> lab.Grown:
    return lab.grown_weights(qk, factor)


@cache_data(max_entries=2, max_bytes=1 * MB)
def saturation_data(names: tuple[str, str]) -> tuple[pd.DataFrame, tuple]:
    rows = lab.saturation()
    frame = saturation_frame([r.scale for r in rows], [r.top_weight for r in rows], [r.jacobian_norm for r in rows],
                             names)
    return frame, tuple(rows)


def why_section() -> None:
    st.subheader(t(f"{NS}.why_heading"))
    st.markdown(t(f"{NS}.why_intro"))
    factor = st.select_slider(t(f"{NS}.ctl_factor"), options=FACTORS, value=10, key="factor", bind="query-params")
    off, on = grown(False, float(factor)), grown(True, float(factor))
    base_off, base_on = grown(False, 1.0), grown(True, 1.0)
    top = [fmt.sig(max(st_.max_logit for st_ in g.stats)) for g in (base_off, base_on, off, on)]
    ent = [fmt.fixed(min(st_.entropy for st_ in g.stats), 3) for g in (off, on)]
    st.markdown("\n".join([
        "- " + t(f"{NS}.why_row_off", run=run_label(False), before=top[0], after=top[2], f=factor, ent=ent[0]),
        "- " + t(f"{NS}.why_row_on", run=run_label(True), before=top[1], after=top[3], f=factor, ent=ent[1],
                 bound=fmt.sig(max(on.bounds))),
    ]))
    before = max(s.max_logit for s in base_off.stats)
    after = max(s.max_logit for s in off.stats)
    st.markdown(t(f"{NS}.why_growth", f=factor, f2=factor * factor, ratio=fmt.sig(after / before),
                  on_before=fmt.sig(max(s.max_logit for s in base_on.stats)),
                  on_after=fmt.sig(max(s.max_logit for s in on.stats))))


def saturation_section() -> None:
    """What a saturated softmax does to the gradient (the untrained model: no control drives it)."""
    names = (t(f"{NS}.sat_top"), t(f"{NS}.sat_norm"))
    frame, rows = saturation_data(names)
    anatomy.formula(r"\frac{\partial\, \mathrm{softmax}(z)}{\partial z} = \operatorname{diag}(p) - p\,p^{\top}",
                    t(f"{NS}.sat_formula_caption"))
    anatomy.show_chart(saturation_lines(frame, x_title=t(f"{NS}.axis_scale"), y_title=t(f"{NS}.axis_value"),
                                        quantity_title=t(f"{NS}.axis_quantity"), names=list(names),
                                        title=t(f"{NS}.chart_saturation")), key="saturation")
    peak = max(rows, key=lambda r: r.jacobian_norm)
    st.caption(t(f"{NS}.sat_caption", row=", ".join(fmt.exact(v) for v in lab.SAT_ROW),
                 peak=fmt.sig(peak.jacobian_norm), c_peak=fmt.exact(peak.scale), c=fmt.exact(rows[-1].scale),
                 top=fmt.fixed(rows[-1].top_weight, 6), norm=fmt.sig(rows[-1].jacobian_norm)))


# ------------------------------------------------------------------ the live run (in the server's queue)
def live_runs() -> list[dict]:
    return st.session_state.setdefault("_qk_runs", [])


def live_work(spec: lab.RunSpec, wall_cap: float):
    """The queue's job: one train_run, its curves published in ``ctx.progress`` at every look."""
    def work(ctx: tq.JobContext) -> dict:
        begun = time.perf_counter()
        ctx.progress.update(step=0, steps=spec.steps, losses=[], probes=[])

        def on_probe(losses, probes) -> bool:
            ctx.progress.update(step=len(losses), losses=list(losses), probes=list(probes),
                                elapsed=time.perf_counter() - begun)
            return not ctx.stopped() and time.perf_counter() - begun + 1.0 < wall_cap

        run = lab.train_run(spec, on_probe=on_probe, max_seconds=tq.TIME_CAP)
        doc = run.to_json()
        doc["capped"] = len(run.losses) < spec.steps
        return doc
    return work


def live_name(spec: lab.RunSpec, number: int) -> str:
    return t(f"{NS}.live_name", n=number, run=t(f"{NS}.live_on") if spec.qk_norm else t(f"{NS}.live_off"),
             lr=fmt.exact(spec.lr))


def keep(spec: lab.RunSpec, status: tq.Status) -> None:
    number = st.session_state.get("_qk_count", 0) + 1
    st.session_state["_qk_count"] = number
    kept = live_runs()
    kept.append({"spec": spec, "name": live_name(spec, number), **status.result})
    del kept[:-KEEP_RUNS]


def live_frames(runs: list[tuple[str, dict]]) -> dict[str, pd.DataFrame]:
    layers = tuple(layer_label(i) for i in range(lab.MODEL["num_layers"]))
    return {m: step_frame(series(runs, m, layers)) for m in ("loss", "max_logit", "entropy")}


def progress_text(spec: lab.RunSpec, p: dict) -> str:
    return t(f"{NS}.progress", step=p["step"], steps=p["steps"], loss=fmt.fixed(p["losses"][-1], 3),
             logit=fmt.sig(max(p["probes"][-1][1])), s=fmt.fixed(p.get("elapsed", 0.0), 1))


def draw_live(spec: lab.RunSpec, status: tq.Status) -> None:
    p = status.progress
    name = live_name(spec, st.session_state.get("_qk_count", 0) + 1)
    run = {"losses": p["losses"], "probes": [[q.step, list(q.max_logit), list(q.entropy)] for q in p["probes"]]}
    curve_charts(live_frames([(name, run)]), [name], "live_now")


def job(spec: lab.RunSpec) -> live_run.Job:
    return ("qk_norm", spec), "curves", live_work(spec, tq.QUEUE.wall_cap)


def live_section(seed: int, live: live_run.LiveRun) -> None:
    """The live run's controls, its Train button and panel (``live``: the page's client of the queue), the runs
    kept in the session and what to notice."""
    st.subheader(t(f"{NS}.live_heading"))
    st.markdown(t(f"{NS}.live_intro", steps=lab.STEPS, cap=fmt.fixed(tq.TIME_CAP, 0)))
    left, right = st.columns([1, 2])
    with left:
        qk = st.toggle(t(f"{NS}.ctl_live_qk"), value=False, key="live_qk", bind="query-params")
    with right:
        lr = st.select_slider(t(f"{NS}.ctl_live_lr"), options=LIVE_LRS, value=EX_LR, key="live_lr",
                              bind="query-params", format_func=lambda v: f"{v:g}")
    spec = lab.RunSpec(float(lr), bool(qk), seed, lab.STEPS)
    live.button(spec, label=t(f"{NS}.train"), key="qk_train")
    kept = live_runs()
    if not kept:
        if live.pending() is None:
            st.info(t(f"{NS}.press"), icon=":material/play_circle:")
        return
    names = [r["name"] for r in kept]
    curve_charts(live_frames([(r["name"], r) for r in kept]), names, "live", layers_shown=len(kept) == 1)
    last = kept[-1]
    items = [t(f"{NS}.notice_live", name=last["name"], steps=len(last["losses"]), s=fmt.fixed(last["seconds"], 1),
               logit=fmt.sig(max(last["probes"][-1][1])), ent=fmt.fixed(min(last["probes"][-1][2]), 3),
               loss=fmt.fixed(lab.final_loss(last["losses"]), 3))]
    if last.get("capped"):
        items.append(t(f"{NS}.notice_capped", n=len(last["losses"]), steps=last["spec"].steps,
                       cap=fmt.fixed(tq.TIME_CAP, 0)))
    doc = recorded()
    if isinstance(doc, dict):
        rec = run_of(doc, last["spec"].lr, last["spec"].seed, last["spec"].qk_norm)
        if rec is not None and rec["steps"] == len(last["losses"]):      # a whole run, not one the cap stopped
            items.append(t(f"{NS}.notice_live_recorded", logit=fmt.sig(max(rec["probes"][-1][1])),
                           loss=fmt.fixed(lab.final_loss(rec["losses"]), 3)))
    if len(kept) > 1 and any(r["spec"].qk_norm != last["spec"].qk_norm for r in kept[:-1]):
        items.append(t(f"{NS}.notice_live_compare"))
    anatomy.notice(items)


# ------------------------------------------------------------------ pitfall
def gains_demo() -> None:
    doc = recorded()
    if isinstance(doc, Unavailable):
        show_unavailable(doc)
        return
    rows = sorted((r for r in doc["runs"] if r["qk_norm"] and r["seed"] == 0), key=lambda r: r["lr"])
    d_head = doc["settings"]["d_model"] // doc["settings"]["num_heads"]
    st.markdown("\n".join(
        "- " + t(f"{NS}.pit_row", lr=f"{r['lr']:g}", bound=fmt.sig(max(b for b in r["bounds"] if b is not None)),
                 logit=fmt.sig(max(r["probes"][-1][1])), loss=fmt.fixed(lab.final_loss(r["losses"]), 3))
        for r in rows))
    st.caption(t(f"{NS}.pit_demo", start=fmt.fixed(math.sqrt(d_head), 2), d_head=d_head, command=COMMAND))


def pitfall_section() -> None:
    anatomy.pitfall(t(f"{NS}.pit_title"), t(f"{NS}.pit_body"), code=t(f"{NS}.pit_code"), demo=gains_demo,
                    key="pit_run")         # drawn only when opened

"""Efficient attention: what each approximation does to the weights, what it buys (measured), flash
attention tile by tile, causal linear attention as an RNN, and the first tutorial's other performance tips
(section 10.2: gradient checkpointing and mixed precision, measured).

Section 8 of the first tutorial (linear attention, strided sparse attention, the complexity table
with Linformer, Performer and Flash Attention) and the second tutorial's block-local + global
``SparseAttention``, with their bugs fixed and shown in the pitfall boxes.
"""
from __future__ import annotations

import numpy as np
import pandas as pd
import streamlit as st
import torch

from attention_core import efficient as eff
from attention_core.functional import masked_softmax, scaled_dot_product_attention
from attention_core.labs import efficiency as el
from attention_core.labs import efficiency_bench as bench
from attention_core.labs import seed_bugs
from attention_core.masks import causal_mask
from ui import anatomy, models
from ui import efficiency_charts as ec
from ui.cache import MB, cache_data, shared_arrays
from ui.charts import bars, heatmap_spec, unique_labels
from ui.controls import seed as seed_control
from ui.controls import sentence
from ui.i18n import current_lang, lesson, t

NS = "efficiency"
MAX_TOKENS = 32          # the learner's sentence: two 32 x 32 heatmaps side by side stay readable
N_RANDOM = (4, 64, 16)   # random inputs: min, max, default n
SWEEP_SEEDS = (0, 1, 2, 3)
GAINS = (0.25, 0.5, 1.0, 2.0, 4.0)
RECORDED = ("full", "sparse_masked", "torch_sdpa", "flash", "linear", "performer", "linformer", "window")
LRA_NAMES = {"linear": "Linear Transformer", "performer": "Performer", "linformer": "Linformer",
             "window": "Local Attention"}
LRA_N = (1024, 2048, 4096)
FORMULA = (r"\underbrace{\operatorname{softmax}\!\Big(\tfrac{QK^\top}{\sqrt{d}}\Big)V}_{O(n^2 d)}"
           r"\;\approx\;\frac{\phi(Q)\,\big(\phi(K)^\top V\big)}{\phi(Q)\,\phi(K)^\top\mathbf 1}"
           r"\;\;\text{or}\;\;\operatorname{softmax}\!\Big(\tfrac{Q\,(EK)^\top}{\sqrt d}\Big)FV"
           r"\;\;\text{or}\;\;\operatorname{softmax}\!\Big(\tfrac{QK^\top}{\sqrt d}+M_{\text{pattern}}\Big)V")


# ------------------------------------------------------------------ drawing: Altair once, then only new data
@cache_data(max_entries=256, max_bytes=4 * MB)
def _skeleton(kind: str, options: tuple, _build) -> str:
    return ec.skeleton(_build())    # runs on a cache miss only (new language, new labels, new option)


def draw(kind: str, options: tuple, build, frame: pd.DataFrame, key: str, *, select: bool = False):
    """Draw ``build()`` (built once per kind + options + language) with this run's ``frame`` as data."""
    skel = _skeleton(kind, (current_lang(), *options), build)
    return st.vega_lite_chart(ec.filled(skel, frame), width="stretch", key=key,
                              on_select="rerun" if select else "ignore")


def draw_heatmap(matrix: np.ndarray, labels: list[str], *, key: str, title: str, masked=None,
                 kind: str = "weights", domain=None, select: bool = True, col_labels: list[str] | None = None,
                 x_title: str | None = None, y_title: str | None = None, value_title: str | None = None,
                 numbers: bool | None = None) -> int | None:
    """ui.charts.heatmap_spec with a CSV download (ui.anatomy.show_matrix); returns the clicked query row."""
    cols = labels if col_labels is None else col_labels
    spec = heatmap_spec(matrix, labels, cols, kind=kind, masked=masked, title=title,
                        x_title=x_title or t("common.key"), y_title=y_title or t("common.query"),
                        value_title=value_title or t("common.weight"), selectable=select, domain=domain,
                        show_numbers=numbers, height=hm_height(len(labels)))
    return anatomy.show_matrix(spec, matrix, labels, cols, key=key, selectable=select, file_name=f"{key}.csv")


def hm_height(n: int) -> int:
    return (30 if n <= 16 else max(10, 520 // n)) * n + 130


def f(x: float) -> str:
    return ec.fmt(x)


def pct(x: float) -> str:
    return f"{100 * float(x):.1f}%"


# ------------------------------------------------------------------ cached computations on plain values
Inputs = tuple  # (tokens tuple or None, n, seed, gain)


def lab_qkv(inp: Inputs):
    tokens, n, seed, gain = inp
    return el.lab_inputs(tokens, n, seed, gain=gain)


def knobs_of(items: tuple) -> el.Knobs:
    return el.Knobs(**dict(items))


@cache_data(max_entries=128, max_bytes=16 * MB)
def variant_view(inp: Inputs, variant: str, knob_items: tuple) -> dict:
    torch.set_num_threads(1)   # tiny tensors: one thread avoids thread-pool stalls on a shared CPU
    q, k, v = lab_qkv(inp)
    knobs = knobs_of(knob_items)
    run = el.run_variant(variant, q, k, v, knobs)
    n = q.size(-2)
    return {"w": run.weights.numpy(), "exact": run.exact_weights.numpy(), "rel_error": run.rel_error,
            "tv": run.row_tv.numpy(), "mask": None if run.mask is None else run.mask.numpy(),
            "cost": el.multiply_adds(variant, n, q.size(-1), knobs, run.mask) / (2 * n * n * q.size(-1)),
            "reproduce": float((run.weights @ v[0, 0] - run.output).abs().max()),
            "max_abs_out": float((run.output - run.exact_output).abs().max())}


@cache_data(max_entries=64, max_bytes=8 * MB)
def sweep_view(tokens, n: int, gain: float, variant: str, knob_items: tuple) -> dict:
    """Error vs the knob, averaged over SWEEP_SEEDS (inputs and random parts); the knob's own value and the
    seed do not enter (so moving the knob does not recompute the sweep)."""
    torch.set_num_threads(1)
    if not el.knob_values(variant, n):
        return {"value": [], "mean": [], "lo": [], "hi": [], "tv": [], "cost": []}
    return el.knob_sweep(variant, tokens, n, knobs_of(knob_items), SWEEP_SEEDS, gain=gain)


@shared_arrays(max_entries=32, max_bytes=24 * MB)
def flash_view(inp: Inputs, bq: int, bk: int, causal: bool) -> dict:
    """Shared and read-only (a resource, not copied per rerun): the trace can hold thousands of tiles."""
    torch.set_num_threads(1)
    q, k, v = lab_qkv(inp)
    res = eff.flash_attention(q, k, v, block_q=bq, block_k=bk, causal=causal, trace=True)
    mask = causal_mask(q.size(-2)) if causal else None
    exact = scaled_dot_product_attention(q, k, v, mask)
    torch_ref = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)
    return {"trace": res.trace, "max_diff": float((res.output - exact.output).abs().max()),
            "max_diff_torch": float((res.output - torch_ref).abs().max()),
            "out": res.output[0, 0].numpy(), "exact": exact.output[0, 0].numpy()}


@cache_data(max_entries=128, max_bytes=8 * MB)
def flash_step_view(inp: Inputs, bq: int, bk: int, causal: bool, index: int) -> dict:
    q, k, v = lab_qkv(inp)
    trace = flash_view(inp, bq, bk, causal)["trace"]
    step = el.flash_step(q, k, v, trace, index, causal=causal)
    n = q.size(-2)
    exact_rows = flash_view(inp, bq, bk, causal)["exact"][step.tile.q_start:step.tile.q_end]
    last_of_block = all(tl.q_start != step.tile.q_start for tl in trace[index + 1:])
    return {"step": step, "status": el.tile_status(n, n, trace, index, causal=causal).numpy(),
            "partial_vs_final": float(np.abs(step.partial.numpy() - exact_rows).max()),
            "last_of_block": last_of_block}


@cache_data(max_entries=64, max_bytes=8 * MB)
def rnn_view(inp: Inputs) -> dict:
    torch.set_num_threads(1)
    q, k, v = lab_qkv(inp)
    states = eff.linear_attention_states(q, k, v)
    parallel = eff.linear_attention(q, k, v, causal=True).output
    w = eff.effective_weights("linear", q, k, causal=True)
    return {"S": states.S[0, 0].numpy(), "z": states.z[0, 0].numpy(), "y_rnn": states.output[0, 0].numpy(),
            "y_par": parallel[0, 0].numpy(), "w": w[0, 0].numpy(), "wv": (w @ v)[0, 0].numpy()}


def recorded() -> dict | None:
    """assets/bench/efficient.json (ui.models reads it once, checks it, shares it: read-only); None if it
    is missing or damaged, and models.unavailable("bench") says so."""
    return models.bench()


@cache_data(max_entries=16, max_bytes=1 * MB)
def loop_mask_check(n: int, stride: int) -> bool:
    loops = el.tutorial_strided_mask_loops(n, stride).bool()
    return bool(torch.equal(loops, eff.strided_sparse_mask(n, stride, 2)))


# ------------------------------------------------------------------ inputs
def read_inputs() -> tuple[Inputs | None, list[str]]:
    """The learner's sentence or n random tokens; the seed and the sharpness (gain on q and k)."""
    c_src, c_text, c_seed, c_gain = st.columns([2.3, 3.0, 1.1, 1.6], vertical_alignment="bottom")
    with c_src:
        src = st.segmented_control(t("efficiency.src"), ["text", "random"], default="text", required=True,
                                   format_func=lambda s: t(f"efficiency.src_{s}"), key="src",
                                   bind="query-params")
    with c_seed:
        seed = seed_control()
    with c_gain:
        gain = float(st.select_slider(t("efficiency.gain"), options=list(GAINS), value=1.0, key="gain",
                                      bind="query-params", help=t("efficiency.gain_help"),
                                      format_func=lambda g: f"×{g:g}"))
    with c_text:
        if src == "random":
            lo, hi, default = N_RANDOM
            n = int(st.slider(t("efficiency.n_tokens"), lo, hi, default, key="n", bind="query-params"))
            labels = [f"t{i}" for i in range(n)]
            return (None, n, seed, gain), labels
        tokens = sentence(key="text", max_tokens=MAX_TOKENS, min_tokens=2)
    if tokens is None:
        return None, []
    return (tuple(tokens), len(tokens), seed, gain), list(tokens)


# ------------------------------------------------------------------ 1. the approximations
KNOB_LABEL = {"m": "efficiency.knob_m", "k": "efficiency.knob_k", "stride": "efficiency.knob_stride",
              "window": "efficiency.knob_window", "block": "efficiency.knob_block"}


def knob_controls(variant: str, n: int) -> tuple[el.Knobs, list[str]]:
    """The variant's knob (and its secondary settings), clamped to n; notes about clamping."""
    kw, notes = {}, []
    cols = st.columns(3)
    if variant == "performer":
        with cols[0]:
            kw["m"] = int(st.select_slider(t("efficiency.knob_m"), options=list(el.FEATURES), value=16,
                                           key="m", bind="query-params", help=t("efficiency.knob_m_help")))
    elif variant == "linformer":
        with cols[0]:
            k = int(st.slider(t("efficiency.knob_k"), 1, N_RANDOM[1], 4, key="k", bind="query-params",
                              help=t("efficiency.knob_k_help")))
        with cols[1]:
            kw["proj"] = st.segmented_control(t("efficiency.proj"), ["pool", "gauss"], default="pool",
                                              required=True, format_func=lambda p: t(f"efficiency.proj_{p}"),
                                              key="proj", bind="query-params", help=t("efficiency.proj_help"))
        kw["k"] = min(k, n)
        if k > n:
            notes.append(t("efficiency.note_clamped", what="k", value=k, n=n))
    elif variant in ("strided", "longformer", "bigbird"):
        if variant == "strided":
            with cols[0]:
                stride = int(st.slider(t("efficiency.knob_stride"), 1, 32, 4, key="stride",
                                       bind="query-params", help=t("efficiency.knob_stride_help")))
            kw["stride"] = min(stride, n)
        with cols[1 if variant == "strided" else 0]:
            kw["window"] = int(st.slider(t("efficiency.knob_window"), 0, 32, 2, key="win",
                                         bind="query-params", help=t("efficiency.knob_window_help")))
    if variant in ("block_global", "flash"):
        with cols[0]:
            kw["block"] = int(st.slider(t("efficiency.knob_block"), 1, 32, 4, key="block",
                                        bind="query-params", help=t(f"efficiency.knob_block_help_{variant}")))
    if variant in ("block_global", "longformer", "bigbird"):
        with cols[1]:
            kw["n_global"] = int(st.slider(t("efficiency.n_global"), 0, 4, 1, key="glob", bind="query-params",
                                           help=t("efficiency.n_global_help")))
    if variant == "bigbird":
        with cols[2]:
            kw["n_random"] = int(st.slider(t("efficiency.n_random"), 0, 8, 2, key="rnd", bind="query-params",
                                           help=t("efficiency.n_random_help")))
    if variant in ("longformer", "bigbird") and kw["window"] >= n - 1:
        notes.append(t("efficiency.note_covers", what=t("efficiency.knob_window"), value=kw["window"], n=n))
    if variant == "block_global" and kw["block"] >= n:
        notes.append(t("efficiency.note_covers", what=t("efficiency.knob_block"), value=kw["block"], n=n))
    return el.Knobs(**kw), notes


KNOB = el.KNOB


def knob_value(variant: str, knobs: el.Knobs):
    name = KNOB[variant]
    return None if name is None else getattr(knobs, name)


def approximations(inp: Inputs, labels: list[str]) -> str:
    st.markdown(lesson("efficiency/variants"))
    variant = st.segmented_control(t("efficiency.variant"), list(el.VARIANTS), default="performer",
                                   required=True, format_func=lambda v: t(f"efficiency.v_{v}"), key="v",
                                   bind="query-params")
    variant = variant if variant in el.VARIANTS else "performer"
    st.caption(t(f"efficiency.about_{variant}"))
    n = inp[1]
    knobs, notes = knob_controls(variant, n)
    knobs = el.Knobs(**{**knobs.__dict__, "seed": inp[2]})
    for note in notes:
        st.caption(note)
    items = tuple(sorted(knobs.__dict__.items()))
    view = variant_view(inp, variant, items)

    mask = view["mask"]
    left, right = st.columns(2)
    with left:
        row_a = draw_heatmap(view["exact"], labels, key="w_exact", title=t("efficiency.h_exact"))
    with right:
        signed = variant == "linformer" and knobs.proj == "gauss"
        row_b = draw_heatmap(view["w"], labels, key="w_method", title=t("efficiency.h_method",
                                                                           name=t(f"efficiency.v_{variant}")),
                             masked=None if mask is None else ~mask, kind="scores" if signed else "weights",
                             domain=(-1.0, 1.0) if signed else None)
        if mask is not None:
            st.caption(t("efficiency.masked_legend"))
        if signed:
            st.caption(t("efficiency.signed_legend"))
    tv = view["tv"]
    default_row = int(np.argmax(tv)) if tv.max() > 0 else 0
    row = next((r for r in (row_b, row_a) if r is not None and r < n), default_row)

    c1, c2, c3, c4 = st.columns(4)
    c1.metric(t("efficiency.m_error"), f(view["rel_error"]), help=t("efficiency.m_error_help"))
    c2.metric(t("efficiency.m_tv"), pct(tv.mean()), help=t("efficiency.m_tv_help"))
    c3.metric(t("efficiency.m_cost"), f"{f(view['cost'])}×", help=t("efficiency.m_cost_help"))
    if mask is not None:
        c4.metric(t("efficiency.m_pairs"), f"{int(mask.sum())} / {n * n}", help=t("efficiency.m_pairs_help"))
    else:
        c4.metric(t("efficiency.m_reproduce"), f(view["reproduce"]), help=t("efficiency.m_reproduce_help"))

    left, right = st.columns(2)
    name = t(f"efficiency.v_{variant}")
    with left:
        names = (t("efficiency.series_exact"), name)
        frame = ec.pair_frame(view["exact"][row], view["w"][row], labels, names)
        lab = unique_labels(labels)
        draw("pair", (tuple(labels), names, t("efficiency.row_title"), signed),
             lambda: ec.pair_chart(frame, labels, title=t("efficiency.row_title"),
                                   label_title=t("common.key"), value_title=t("common.weight"),
                                   series_title=t("efficiency.series"), names=names,
                                   domain=None if signed else (0.0, 1.0)),
             frame, "row_pair")
        st.caption(t("efficiency.row_caption", q=anatomy.md_escape(lab[row]), tv=pct(tv[row])))
    with right:
        knob_chart_section(inp, variant, knobs, view)
    notice_approx(variant, knobs, view, n, labels)
    return variant


def knob_chart_section(inp: Inputs, variant: str, knobs: el.Knobs, view: dict) -> None:
    name = KNOB[variant]
    if name is None:
        st.info(t(f"efficiency.no_knob_{variant}"), icon=":material/tune:")
        return
    tokens, n, _, gain = inp
    base = {k: v for k, v in knobs.__dict__.items() if k not in (name, "seed")}
    sweep = sweep_view(tokens, n, gain, variant, tuple(sorted(base.items())))
    names = {"err": t("efficiency.series_err"), "tv": t("efficiency.series_tv"),
             "cost": t("efficiency.series_cost"), "dot": t("efficiency.series_dot")}
    frame = ec.knob_frame(sweep, current=knob_value(variant, knobs), this_error=view["rel_error"],
                          names=names)
    title = t("efficiency.knob_title", knob=t(KNOB_LABEL[name]), seeds=len(SWEEP_SEEDS))
    draw("knob", (title, tuple(sorted(names.items())), name == "m", name),
         lambda: ec.knob_chart(frame, title=title, x_title=t(KNOB_LABEL[name]),
                               error_title=t("efficiency.err_axis"), cost_title=t("efficiency.cost_axis"),
                               series_title=t("efficiency.series"), names=names, log_x=name == "m"),
         frame, "knob_chart")
    st.caption(t("efficiency.knob_caption", seeds=len(SWEEP_SEEDS), seed=inp[2]))


def notice_approx(variant: str, knobs: el.Knobs, view: dict, n: int, labels: list[str]) -> None:
    items = []
    err, tv = view["rel_error"], float(view["tv"].mean())
    if variant in ("softmax", "flash"):
        items.append(t(f"efficiency.notice_{variant}", err=f(err), rep=f(view["reproduce"]),
                       cost=f(view["cost"])))
    elif variant == "linear":
        items.append(t("efficiency.notice_linear", err=f(err), tv=pct(tv), cost=f(view["cost"]), n=n, d=el.D))
    elif variant == "performer":
        items.append(t("efficiency.notice_performer", m=knobs.m, err=f(err), tv=pct(tv), cost=f(view["cost"]),
                       n=n))
    elif variant == "linformer":
        items.append(t(f"efficiency.notice_linformer_{knobs.proj}", k=knobs.k, n=n, err=f(err), tv=pct(tv)))
    else:
        mask = view["mask"]
        items.append(t("efficiency.notice_sparse", v=int(mask.sum()), total=n * n, share=pct(mask.mean()),
                       err=f(err), tv=pct(tv)))
        dead = [unique_labels(labels)[i] for i in range(n) if not mask[i].any()]
        if dead:
            items.append(t("efficiency.notice_dead", rows=", ".join(anatomy.md_escape(x) for x in dead)))
    if variant not in ("softmax", "flash"):
        items.append(t("efficiency.notice_reproduce", rep=f(view["reproduce"])))
        if view["cost"] > 1:
            items.append(t("efficiency.notice_costly", cost=f(view["cost"]), n=n))
    anatomy.notice(items)


# ------------------------------------------------------------------ 2. cost, measured
def method_names() -> dict[str, str]:
    """Short names for the chart legends (the tables use the long ones)."""
    return {m: t(f"efficiency.rs_{m}") for m in RECORDED}


def cost_section() -> None:
    st.markdown(lesson("efficiency/cost"))
    doc = recorded()
    if models.unavailable("bench"):
        return
    names = method_names()
    frame = ec.scaling_frame(doc, names, t("efficiency.slope_label"))   # legend labels carry the slopes
    left, right = st.columns(2)
    for col, y, title, y_title in ((left, "time_ms", "efficiency.rec_time", "efficiency.rec_time_y"),
                                   (right, "memory_mib", "efficiency.rec_mem", "efficiency.rec_mem_y")):
        with col:
            draw("scaling", (y,), lambda y=y, title=title, y_title=y_title: ec.scaling_chart(
                frame, y=y, title=t(title), x_title=t("efficiency.n_axis"), y_title=t(y_title),
                method_title=t("efficiency.method"), order=RECORDED), frame, f"rec_{y}")
    m = doc["machine"]
    st.caption(t("efficiency.rec_caption", cpu=m["cpu"], cores=m["logical_cores"], torch=m["torch"],
                 threads=m.get("torch_threads", 1), d=doc["settings"]["d"], mm=round(doc["wall_s"] / 60)))

    st.subheader(t("efficiency.table_title"))
    st.table(complexity_table(doc))
    st.caption(t("efficiency.table_caption"))

    st.subheader(t("efficiency.lra_title"))
    st.markdown(t("efficiency.lra_intro"))
    if not models.unavailable("lra"):
        lra = lra_table(doc)
        st.dataframe(lra, hide_index=True, width="stretch", height=35 * (len(lra) + 1) + 3)
    st.warning(lesson("efficiency/lra_caveat"), icon=":material/balance:")

    st.subheader(t("efficiency.live_title"))
    live_section(doc)
    notice_cost(doc)


def by_method(doc: dict) -> dict:
    return {(r["method"], r["n"]): r for r in doc["results"] if r.get("time_s")}


def complexity_table(doc: dict) -> pd.DataFrame:
    """The first tutorial's table (section 8.4) with what we measured beside each row."""
    rows = (("standard", "full"), ("linear", "linear"), ("sparse", "window"),
            ("sparse_dense", "sparse_masked"), ("linformer", "linformer"), ("performer", "performer"),
            ("flash", "flash"))
    by = by_method(doc)
    slopes = doc["slopes"]
    out = []
    for row, method in rows:
        s = slopes[method]
        big = by.get((method, 16384))
        speed = by[("full", 16384)]["time_s"] / big["time_s"] if big else None
        mem = by.get((method, 8192)) or by.get((method, 4096))
        out.append({
            t("efficiency.col_variant"): t(f"efficiency.cx_{row}"),
            t("efficiency.col_time"): t(f"efficiency.cx_{row}_time"),
            t("efficiency.col_space"): t(f"efficiency.cx_{row}_space"),
            t("efficiency.col_idea"): t(f"efficiency.cx_{row}_idea"),
            t("efficiency.col_measured"): names_short(method),
            t("efficiency.col_tslope"): ec.fmt_slope(s["time_slope"]),
            t("efficiency.col_mslope"): ec.fmt_slope(s["memory_slope"]),
            t("efficiency.col_speed"): "—" if speed is None else f"{speed:.3g}×",
            t("efficiency.col_mem"): "—" if mem is None else
            f"{mem['peak_extra_bytes'] / 2 ** 20:.3g} MiB (n = {mem['n']})",
        })
    return pd.DataFrame(out).set_index(t("efficiency.col_variant"))


def names_short(method: str) -> str:
    return t(f"efficiency.r_{method}")


def lra_table(doc: dict) -> pd.DataFrame:
    ours = {(r["method"], r["n"]): r for r in bench.measured_ratios(doc, LRA_N)}
    lra = {(r["model"], r["seq_len"]): r for r in models.lra()}
    out = []
    for method, model in LRA_NAMES.items():
        for n in LRA_N:
            ref, base, mine = lra.get((model, n)), lra.get(("Transformer", n)), ours.get((method, n))
            out.append({
                t("efficiency.lra_method"): f"{names_short(method)} ↔ {model}",
                "n": n,
                t("efficiency.lra_speed_paper"): None if ref is None else ref["speed_ratio"],
                t("efficiency.lra_speed_ours"): None if mine is None else round(mine["speed_ratio"], 2),
                t("efficiency.lra_mem_paper"): None if ref is None or base is None else
                round(ref["peak_memory_gb"] / base["peak_memory_gb"], 3),
                t("efficiency.lra_mem_ours"): None if mine is None or mine["memory_ratio"] is None else
                round(mine["memory_ratio"], 3),
            })
    return pd.DataFrame(out)


def live_section(doc: dict) -> None:
    st.markdown(t("efficiency.live_intro", sizes=", ".join(map(str, el.LIVE_SIZES)),
                  methods=", ".join(names_short(m) for m in el.LIVE_METHODS)))
    if st.button(t("efficiency.live_run"), key="live_run", icon=":material/timer:", type="primary"):
        torch.set_num_threads(1)       # as the recorded run: one thread, the work of the call
        jobs = [(m, n) for n in el.LIVE_SIZES for m in el.LIVE_METHODS]
        bar = st.progress(0.0, text=t("efficiency.live_progress", i=0, total=len(jobs)))
        results = []
        for i, (method, n) in enumerate(jobs):
            results.append({"method": method, "n": n, "time_s": el.time_method(method, n)})
            bar.progress((i + 1) / len(jobs), text=t("efficiency.live_progress", i=i + 1, total=len(jobs)))
        bar.empty()
        st.session_state["eff_live"] = results
    results = st.session_state.get("eff_live")
    if not results:
        st.caption(t("efficiency.live_none"))
        return
    names = {m: names_short(m) for m in el.LIVE_METHODS}
    frame = ec.live_frame(results, names)
    draw("live", (), lambda: ec.live_chart(frame, title=t("efficiency.live_chart"),
                                           x_title=t("efficiency.n_axis"), y_title=t("efficiency.rec_time_y"),
                                           method_title=t("efficiency.method"), order=el.LIVE_METHODS,
                                           names=names), frame, "live_chart")
    by = by_method(doc)
    n_top = max(el.LIVE_SIZES)
    rows = []
    for method in el.LIVE_METHODS[1:]:
        mine = frame[(frame["method"] == method) & (frame["n"] == n_top)]["speedup"].iloc[0]
        rec = by[("full", n_top)]["time_s"] / by[(method, n_top)]["time_s"]
        rows.append({t("efficiency.method"): names_short(method),
                     t("efficiency.live_yours"): round(float(mine), 2),
                     t("efficiency.live_recorded"): round(float(rec), 2)})
    st.markdown(t("efficiency.live_table", n=n_top))
    st.dataframe(pd.DataFrame(rows), hide_index=True)


def notice_cost(doc: dict) -> None:
    by = by_method(doc)
    s = doc["slopes"]
    full, lin = by[("full", 16384)], by[("linear", 16384)]
    f8, fl8 = by[("full", 8192)], by[("flash", 8192)]
    anatomy.notice([
        t("efficiency.notice_slopes", full=ec.fmt_slope(s["full"]["time_slope"]),
          lin=ec.fmt_slope(s["linear"]["time_slope"]), perf=ec.fmt_slope(s["performer"]["time_slope"]),
          lf=ec.fmt_slope(s["linformer"]["time_slope"]), win=ec.fmt_slope(s["window"]["time_slope"])),
        t("efficiency.notice_speedup", full=f"{full['time_s']:.2f}", lin=f"{1e3 * lin['time_s']:.1f}",
          x=f"{full['time_s'] / lin['time_s']:.0f}"),
        t("efficiency.notice_flash_mem", full=f"{f8['peak_extra_bytes'] / 2 ** 20:.0f}",
          flash=f"{fl8['peak_extra_bytes'] / 2 ** 20:.1f}",
          ratio=f"{f8['peak_extra_bytes'] / fl8['peak_extra_bytes']:.0f}",
          diff=f"{fl8['max_abs_diff_vs_exact']:.1e}", ft=f"{fl8['time_s']:.2f}", fft=f"{f8['time_s']:.2f}",
          fs=ec.fmt_slope(s["flash"]["time_slope"])),
        t("efficiency.notice_masked", slope=ec.fmt_slope(s["sparse_masked"]["time_slope"]),
          t4=f"{1e3 * by[('sparse_masked', 4096)]['time_s']:.0f}",
          w4=f"{1e3 * by[('window', 4096)]['time_s']:.0f}"),
    ])


# ------------------------------------------------------------------ 3. flash attention, tile by tile
def flash_section(inp: Inputs, labels: list[str]) -> None:
    st.markdown(lesson("efficiency/flash"))
    n = inp[1]
    c1, c2, c3 = st.columns([2, 2, 1.4], vertical_alignment="bottom")
    with c1:
        bq = int(st.slider(t("efficiency.bq"), 1, 16, 4, key="bq", bind="query-params",
                           help=t("efficiency.bq_help")))
    with c2:
        bk = int(st.slider(t("efficiency.bk"), 1, 16, 4, key="bk", bind="query-params",
                           help=t("efficiency.bk_help")))
    with c3:
        causal = bool(st.toggle(t("efficiency.causal"), value=False, key="fc", bind="query-params",
                                help=t("efficiency.causal_help")))
    bq, bk = min(bq, n), min(bk, n)
    fv = flash_view(inp, bq, bk, causal)
    trace = fv["trace"]
    total = len(trace)
    step_no = int(st.slider(t("efficiency.tile"), 1, max(total, 2), min(2, total), key="tile",
                            bind="query-params", help=t("efficiency.tile_help", total=total)))
    step_no = min(max(step_no, 1), total)
    if total > 400:
        st.caption(t("efficiency.many_tiles", total=total))
    sv = flash_step_view(inp, bq, bk, causal, step_no - 1)
    step = sv["step"]
    tile = step.tile
    lab = unique_labels(labels)
    span_q, span_k = token_span(lab, tile.q_start, tile.q_end), token_span(lab, tile.k_start, tile.k_end)
    qa, kb = tile.q_start // bq + 1, tile.k_start // bk + 1
    status_names = [t(f"efficiency.st_{s}") for s in ("done", "current", "todo", "skipped", "hidden")]
    left, right = st.columns([1.1, 1])
    with left:
        frame = ec.tile_frame(sv["status"], labels, labels, status_names, bq, bk, t("efficiency.tile_text"))
        title = t("efficiency.tile_chart")
        draw("tiles", (tuple(labels), title, tuple(status_names)),
             lambda: ec.tile_chart(frame, labels, labels, title=title, x_title=t("efficiency.keys_values"),
                                   y_title=t("common.query"), status_title=t("efficiency.status"),
                                   status_names=status_names, tile_title=t("efficiency.tile_word")),
             frame, "tile_chart")
    with right:
        key = "efficiency.step_skipped" if tile.skipped else "efficiency.step_now"
        st.markdown(t(key, i=step_no, total=total, a=qa, b=kb, q0=tile.q_start, q1=tile.q_end - 1,
                      k0=tile.k_start, k1=tile.k_end - 1, qs=span_q, ks=span_k))
        cols = {c: t(f"efficiency.fc_{c}")
                for c in ("query", "m_old", "tile_max", "m_new", "rescale", "l_old", "l_new")}
        st.dataframe(ec.flash_table(step, labels, cols), hide_index=True, width="stretch")
        st.caption(t("efficiency.flash_table_caption"))
        alpha = step.tile.rescale[0, 0]
        had_state = torch.isfinite(step.m_old)                  # rows that had seen a key before this tile
        shrunk = int((had_state & (alpha < 1)).sum())
        if not tile.skipped:
            st.markdown(t("efficiency.step_partial", k1=tile.k_end - 1, diff=f(sv["partial_vs_final"])))
            if had_state.any():
                st.markdown(t("efficiency.step_rescaled", shrunk=shrunk, rows=int(had_state.sum()),
                              amin=f(float(alpha[had_state].min()))))
            else:
                st.markdown(t("efficiency.step_first", a=qa))
        if sv["last_of_block"]:
            st.success(t("efficiency.step_block_done", a=qa), icon=":material/done_all:")
    final_key = "efficiency.flash_final" if step_no == total else "efficiency.flash_final_preview"
    st.success(t(final_key, total=total, diff=f"{fv['max_diff']:.2e}", torch=f"{fv['max_diff_torch']:.2e}"),
               icon=":material/check_circle:")
    floats = el.flash_extra_floats(n, el.D, bq, bk)
    skipped = sum(tl.skipped for tl in trace)
    items = [t("efficiency.notice_tile_memory", tile=floats["tile"], acc=floats["acc"], stats=floats["stats"],
               full=floats["full_matrix"], n=n),
             t("efficiency.notice_flash_exact", diff=f"{fv['max_diff']:.1e}", total=total)]
    if causal:
        items.append(t("efficiency.notice_skipped", skipped=skipped, total=total))
    anatomy.notice(items)


def token_span(labels: list[str], start: int, end: int) -> str:
    first, last = anatomy.md_escape(labels[start]), anatomy.md_escape(labels[end - 1])
    return first if end - start == 1 else f"{first} … {last}"


# ------------------------------------------------------------------ 4. causal linear attention as an RNN
def rnn_section(inp: Inputs, labels: list[str]) -> None:
    st.markdown(lesson("efficiency/rnn"))
    n = inp[1]
    i = int(st.slider(t("efficiency.step"), 1, MAX_TOKENS if inp[0] is not None else N_RANDOM[1],
                      min(4, n), key="step", bind="query-params", help=t("efficiency.step_help")))
    i = min(max(i, 1), n)
    rv = rnn_view(inp)
    lab = unique_labels(labels)
    S = rv["S"][i - 1]
    bound = float(np.abs(rv["S"]).max()) or 1.0
    feat = [f"φ{j + 1}" for j in range(S.shape[0])]
    dims = [f"v{j + 1}" for j in range(S.shape[1])]
    st.markdown(t("efficiency.rnn_now", i=i, tok=anatomy.md_escape(lab[i - 1]), n=n))
    left, right = st.columns([1.2, 1])
    with left:
        draw_heatmap(S, feat, col_labels=dims, key="rnn_S", title=t("efficiency.rnn_S", i=i), kind="scores",
                     domain=(-round(bound, 6), round(bound, 6)), select=False, x_title=t("efficiency.rnn_v"),
                     y_title=t("efficiency.rnn_phi"), value_title=t("common.value"), numbers=False)
    with right:
        z = rv["z"][i - 1]
        zmax = float(rv["z"].max()) or 1.0
        zframe_title = t("efficiency.rnn_z", i=i)
        zchart = bars(z, feat, value_title=t("common.value"), label_title=t("efficiency.rnn_phi"),
                      domain=(0.0, round(zmax, 6)))
        draw("zbars", (tuple(feat), round(zmax, 6), zframe_title),
             lambda: zchart.properties(title=zframe_title), ec.bars_frame(z, feat), "rnn_z")
        names = (t("efficiency.series_rnn"), t("efficiency.series_parallel"))
        frame = ec.pair_frame(rv["y_rnn"][i - 1], rv["y_par"][i - 1], dims, names)
        ytitle = t("efficiency.rnn_y", i=i)
        draw("ypair", (tuple(dims), names, ytitle),
             lambda: ec.pair_chart(frame, dims, title=ytitle, label_title=t("efficiency.rnn_v"),
                                   value_title=t("common.value"), series_title=t("efficiency.series"),
                                   names=names),
             frame, "rnn_y")
    diff_par = float(np.abs(rv["y_rnn"][: i] - rv["y_par"][: i]).max())
    diff_w = float(np.abs(rv["y_rnn"][: i] - rv["wv"][: i]).max())
    d = S.shape[0]
    future = float(np.abs(rv["w"][i - 1, i:]).max()) if i < n else 0.0
    anatomy.notice([
        t("efficiency.notice_rnn_equal", i=i, par=f"{diff_par:.1e}", w=f"{diff_w:.1e}"),
        t("efficiency.notice_rnn_state", state=d * S.shape[1] + d, i=i, cache=2 * i * d, per=2 * d,
          cross=(d * S.shape[1] + d) // (2 * d) + 1),
        t("efficiency.notice_rnn_future", i=i, later=n - i, zero=f"{future:.1g}"),
    ])


# ------------------------------------------------------------------ 5. the tutorial's performance tips (10.2)
CK_N = (16, 32, 64)           # tokens of the checkpointing demo (a new setting reruns it: keep it small)
CK_LAYERS = (1, 4, 4)         # min, max, default encoder layers
PREC_GAINS = (0.5, 1.0, 2.0, 4.0, 8.0)
PREC_N, PREC_D = 64, 32


@cache_data(max_entries=64, max_bytes=2 * MB)
def checkpoint_view(n: int, layers: int, bf16: bool) -> dict:
    torch.set_num_threads(1)
    return el.checkpoint_report(n, layers, autocast=bf16)._asdict()


@cache_data(max_entries=64, max_bytes=2 * MB)
def precision_view(gain: float, seed: int) -> dict:
    torch.set_num_threads(1)
    return {"rows": [r._asdict() for r in el.precision_table(PREC_N, PREC_D, gain, seed)],
            "top": el.largest_score(PREC_N, PREC_D, gain, seed)}


def size(b: float) -> str:
    """Bytes as MiB from 1 MiB up, else KiB (what a checkpointed small encoder keeps is a few KiB)."""
    return f"{b / 2 ** 20:.2f} MiB" if b >= 2 ** 20 else f"{b / 2 ** 10:.1f} KiB"


def tips_section(seed: int) -> None:
    st.markdown(lesson("efficiency/tips"))
    st.subheader(t("efficiency.tips_ck_heading"))
    anatomy.formula(r"\text{%s} \approx L \cdot A_{\text{layer}}\;\;\longrightarrow\;\;"
                    r"L \cdot \underbrace{b\,n\,d}_{\text{%s}} + A_{\text{layer}}"
                    % (t("efficiency.tips_ck_saved"), t("efficiency.tips_ck_input")),
                    t("efficiency.tips_ck_formula_caption"))
    c1, c2, c3 = st.columns([2, 2, 1.6], vertical_alignment="bottom")
    with c1:
        n = st.segmented_control(t("efficiency.tips_ck_n"), list(CK_N), default=32, required=True,
                                 key="ck_n", bind="query-params")
    with c2:
        lo, hi, default = CK_LAYERS
        layers = int(st.slider(t("efficiency.tips_ck_layers"), lo, hi, default, key="ck_L", bind="query-params"))
    with c3:
        bf16 = bool(st.toggle(t("efficiency.tips_ck_bf16"), value=False, key="ck_bf16", bind="query-params",
                              help=t("efficiency.tips_ck_bf16_help")))
    n = n if n in CK_N else 32
    layers = min(max(layers, lo), hi)
    anatomy.exercise("tips_ck_ex", t("efficiency.tips_ck_ex_question", layers=layers, n=n),
                     [t(f"efficiency.tips_ck_ex_opt{i}", layers=layers) for i in range(3)], answer=2,
                     explanation=t("efficiency.tips_ck_ex_explain"))
    r = checkpoint_view(int(n), layers, bf16)
    c1, c2, c3, c4 = st.columns(4)
    c1.metric(t("efficiency.tips_ck_m_plain"), size(r["plain_bytes"]))
    c2.metric(t("efficiency.tips_ck_m_ckpt"), size(r["ckpt_bytes"]))
    c3.metric(t("efficiency.tips_ck_m_forwards"), f"{r['plain_forwards']} → {r['ckpt_forwards']}")
    c4.metric(t("efficiency.tips_ck_m_grad"), f"{r['grad_max_diff']:.1e}")
    anatomy.notice([
        t("efficiency.tips_ck_notice_saved", plain=size(r["plain_bytes"]), events=r["plain_count"],
          layers=layers, layer=size(r["layer_bytes"]), ckpt=size(r["ckpt_bytes"]), ck_events=r["ckpt_count"],
          ratio=f"{r['plain_bytes'] / r['ckpt_bytes']:.0f}"),
        t("efficiency.tips_ck_notice_peak", peak=size(r["ckpt_bytes"] + r["layer_bytes"]),
          plain=size(r["plain_bytes"])),
        t("efficiency.tips_ck_notice_compute", a=r["plain_forwards"], b=r["ckpt_forwards"],
          diff=f"{r['grad_max_diff']:.1e}"),
    ])

    st.subheader(t("efficiency.tips_mp_heading"))
    gain = float(st.select_slider(t("efficiency.tips_mp_gain"), options=list(PREC_GAINS), value=1.0,
                                  key="mp_gain", bind="query-params", help=t("efficiency.tips_mp_gain_help"),
                                  format_func=lambda g: f"×{g:g}"))
    anatomy.exercise("tips_mp_ex", t("efficiency.tips_mp_ex_question"),
                     [t(f"efficiency.tips_mp_r_{name}") for name in el.RECIPES[1:]], answer=0,
                     explanation=t("efficiency.tips_mp_ex_explain"))
    pv = precision_view(gain, seed)
    rows = pv["rows"]
    table = pd.DataFrame([{t("efficiency.tips_mp_c_recipe"): t(f"efficiency.tips_mp_r_{r['recipe']}"),
                           t("efficiency.tips_mp_c_bytes"): r["bytes_per_number"],
                           t("efficiency.tips_mp_c_eps"): f"{r['eps']:.1e}",
                           t("efficiency.tips_mp_c_max"): f"{r['max_value']:.3g}",
                           t("efficiency.tips_mp_c_werr"): f"{r['weight_error']:.1e}",
                           t("efficiency.tips_mp_c_oerr"): f"{r['output_error']:.1e}"} for r in rows])
    st.dataframe(table, hide_index=True, width="stretch")
    st.caption(t("efficiency.tips_mp_caption", n=PREC_N, d=PREC_D, seed=seed))
    by = {r["recipe"]: r for r in rows}
    anatomy.notice([
        t("efficiency.tips_mp_notice_bf16", bf=f"{by['bfloat16']['output_error']:.1e}",
          f32=f"{by['float32']['output_error']:.1e}",
          x=f"{by['bfloat16']['output_error'] / max(by['float32']['output_error'], 1e-300):,.0f}"),
        t("efficiency.tips_mp_notice_mixed", mixed=f"{by['bf16_inputs']['output_error']:.1e}",
          bf=f"{by['bfloat16']['output_error']:.1e}"),
        t("efficiency.tips_mp_notice_gain", top=f"{pv['top']:.1f}", gain=f"{gain:g}",
          eps=f"{by['bfloat16']['eps']:.1e}", f16=f"{by['float16']['output_error']:.1e}"),
    ])


def pitfall_fp16_underflow() -> None:
    tiny = 1e-8
    st.markdown(t("efficiency.tips_pit_now", g=f"{tiny:g}",
                  f16=f"{float(torch.tensor(tiny).half()):g}",
                  bf16=f"{float(torch.tensor(tiny).bfloat16()):.3g}",
                  scaled=f"{float(torch.tensor(tiny * 65536).half()) / 65536:.3g}"))


# ------------------------------------------------------------------ pitfalls
def pitfall_second_tutorial(n: int, block: int) -> None:
    chunks = el.tutorial_chunks(n, block)
    if isinstance(chunks, str):
        st.markdown(t("efficiency.pit2_now_error", n=n, block=block, err=chunks.replace("`", "'")))
    else:
        st.markdown(t("efficiency.pit2_now", n=n, block=block, k=n // block,
                      sizes=", ".join(map(str, chunks))))
    example = el.tutorial_chunks(100, 32)
    st.markdown(t("efficiency.pit2_example", sizes=", ".join(map(str, example)), k=len(example),
                  wrong=sum(size != 32 for size in example)))
    g = el.tutorial_global_branch(n)
    sh = g["shapes"]
    st.markdown(t("efficiency.pit2_global", gq=sh["global_q"], gw=sh["global_weights"],
                  gc=sh["global_context"],
                  lo=sh["local_output"], err=(g["error"] or "—").replace("`", "'"),
                  used=f"{g['scale_used']:.2f}", right=f"{g['scale_right']:.2f}"))


def pitfall_first_tutorial(inp: Inputs) -> None:
    n = inp[1]
    same = loop_mask_check(n, 4)
    q, k, _ = lab_qkv(inp)
    nan = el.tutorial_nan_patch(q[0, 0], k[0, 0], eff.strided_sparse_mask(n, 4, 2))
    st.markdown(t("efficiency.pit1_now", n=n, same=t("efficiency.yes") if same else t("efficiency.no"),
                  nan=nan["nan_patched"], empty=nan["empty_rows"]))
    if st.button(t("efficiency.pit1_time", n=256), key="time_masks", icon=":material/timer:"):
        st.session_state["eff_masks"] = el.time_mask_builders(256)
    timing = st.session_state.get("eff_masks")
    if timing:
        st.markdown(t("efficiency.pit1_timing", loops=f"{1e3 * timing['loops']:.1f}",
                      vec=f"{1e3 * timing['vectorised']:.3f}",
                      x=f"{timing['loops'] / timing['vectorised']:.0f}"))


def pitfall_flash_space() -> None:
    doc = recorded()
    if models.unavailable("bench"):
        return
    by = by_method(doc)
    s = doc["slopes"]["flash"]
    rows = [(n, by[("flash", n)]["peak_extra_bytes"] / 2 ** 20, by[("full", n)]["peak_extra_bytes"] / 2 ** 20)
            for n in (2048, 4096, 8192, 16384)]
    st.markdown(t("efficiency.pit3_numbers", slope=ec.fmt_slope(s["memory_slope"]),
                  tslope=ec.fmt_slope(s["time_slope"]),
                  rows=t("efficiency.pit3_sep").join(
                      t("efficiency.pit3_row", n=n, a=f"{a:.1f}", b=f"{b:,.0f}") for n, a, b in rows)))


@cache_data(max_entries=64, max_bytes=2 * MB)
def linear_mask_view(inp: Inputs | None) -> dict:
    torch.set_num_threads(1)
    if inp is None:
        x = torch.randn(1, 12, el.D, generator=torch.Generator().manual_seed(0))
    else:
        x = lab_qkv(inp)[0][0]                      # the tokens' queries as the layer's input (1, n, D)
    return seed_bugs.linear_mask_demo(x, num_heads=2)


def pitfall_linear_mask(inp: Inputs | None) -> None:
    r = linear_mask_view(inp)
    st.markdown(t("efficiency.pit_lin_now", n=r["n"], theirs=f"{r['theirs_first']:.3f}",
                  ours=f"{r['ours_first']:.1e}", all=f"{r['theirs_all']:.3f}"))
    if r["cross_error"]:
        st.markdown(t("efficiency.pit_lin_cross", n=r["n"], m=2 * r["n"], err=r["cross_error"].replace("`", "'")))


@cache_data(max_entries=64, max_bytes=2 * MB)
def block_mask_view(n: int, block: int) -> dict:
    torch.set_num_threads(1)
    return seed_bugs.block_mask_demo(n, block)


def pitfall_block_mask(n: int, block: int) -> None:
    r = block_mask_view(n, block)
    for name in ("padding", "causal"):
        if r[name] is None:
            st.markdown(t("efficiency.pit_bm_ok", what=t(f"efficiency.pit_bm_{name}"), n=n, block=block))
        else:
            st.markdown(t("efficiency.pit_bm_now", what=t(f"efficiency.pit_bm_{name}"), n=n, block=block,
                          err=r[name].replace("`", "'")))


# ------------------------------------------------------------------ the page
anatomy.header(NS)
anatomy.intuition(NS)
anatomy.formula(FORMULA.replace(r"\text{or}", r"\text{%s}" % t("efficiency.formula_or"))
                .replace(r"\text{pattern}", r"\text{%s}" % t("efficiency.formula_pattern")),
                t("efficiency.formula_caption"))

inp, labels = read_inputs()
tab_names = [t(f"efficiency.tab_{x}") for x in ("approx", "cost", "flash", "rnn", "tips")]
tabs = st.tabs(tab_names, key="tab", bind="query-params")
ran = []
if inp is None:
    with tabs[0]:
        st.caption(t("efficiency.need_input"))
else:
    if tabs[0].open is not False:
        with tabs[0]:
            variant = approximations(inp, labels)
            ran += [el.run_variant, el.lab_inputs, eff.effective_weights]
            ran += {"linear": [eff.linear_attention, eff.linear_attention_weights, eff.elu_feature_map],
                    "performer": [eff.orthogonal_random_features, eff.favor_features,
                                  eff.performer_attention],
                    "linformer": [el.pooling_projection, eff.linformer_attention,
                                  eff.linformer_attention_weights],
                    "strided": [eff.strided_sparse_mask, eff.sparse_attention],
                    "block_global": [eff.block_local_global_mask, eff.sparse_attention],
                    "longformer": [eff.longformer_mask, eff.sparse_attention],
                    "bigbird": [eff.bigbird_mask, eff.sparse_attention],
                    "flash": [eff.flash_attention]}.get(variant, [scaled_dot_product_attention])
            ran += [el.knob_sweep, el.multiply_adds, eff.relative_error]
    if tabs[2].open:
        with tabs[2]:
            flash_section(inp, labels)
            ran += [eff.flash_attention, el.flash_step, el.tile_status, masked_softmax]
    if tabs[3].open:
        with tabs[3]:
            rnn_section(inp, labels)
            ran += [eff.linear_attention_states, eff.linear_attention, eff.linear_attention_weights]
if tabs[1].open:
    with tabs[1]:
        cost_section()
        ran += [bench.measure, bench.fit_slope, bench.summarise, bench.measured_ratios, bench.lra_reference,
                el.time_method]
if tabs[4].open:
    with tabs[4]:
        tips_section(inp[2] if inp is not None else 0)
        anatomy.pitfall(t("efficiency.tips_pit_title"), t("efficiency.tips_pit_body"), t("efficiency.tips_pit_code"),
                        demo=pitfall_fp16_underflow)
        ran += [el.saved_tensor_bytes, el.run_encoder, el.checkpoint_report, el.attention_in, el.precision_table]

doc = recorded()
if doc is None:
    models.unavailable("bench")        # the exercise's answer is in the recorded figures
else:
    by = by_method(doc)
    r_full = by[("full", 8192)]["time_s"] / by[("full", 4096)]["time_s"]
    r_lin = by[("linear", 8192)]["time_s"] / by[("linear", 4096)]["time_s"]
    anatomy.exercise("eff_ex", t("efficiency.ex_question"), [t(f"efficiency.ex_opt{i}") for i in range(4)],
                     answer=1, explanation=t("efficiency.ex_explain", full=f"{r_full:.1f}", lin=f"{r_lin:.1f}"))

n_now = inp[1] if inp is not None else 12
block_now = int(st.session_state.get("block", 4) or 4)
anatomy.pitfall(t("efficiency.pit2_title"), t("efficiency.pit2_body"), t("efficiency.pit2_code"),
                demo=lambda: pitfall_second_tutorial(n_now, block_now))
if inp is not None:
    anatomy.pitfall(t("efficiency.pit1_title"), t("efficiency.pit1_body"), t("efficiency.pit1_code"),
                    demo=lambda: pitfall_first_tutorial(inp))
anatomy.pitfall(t("efficiency.pit3_title"), t("efficiency.pit3_body"), None, demo=pitfall_flash_space)
anatomy.pitfall(t("efficiency.pit_bm_title"), t("efficiency.pit_bm_body"), t("efficiency.pit_bm_code"),
                demo=lambda: pitfall_block_mask(n_now, block_now))
anatomy.pitfall(t("efficiency.pit_lin_title"), t("efficiency.pit_lin_body", tab=t("efficiency.tab_rnn")),
                t("efficiency.pit_lin_code"),
                demo=lambda: pitfall_linear_mask(inp))

anatomy.show_code(*dict.fromkeys(ran), el.tutorial_strided_mask_loops, el.tutorial_chunks,
                  el.tutorial_global_branch, seed_bugs.tutorial_block_local_attention,
                  seed_bugs.tutorial_linear_attention, seed_bugs.linear_mask_demo)

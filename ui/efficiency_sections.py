"""The efficiency page's sections: its controls (the inputs, each variant's knobs, the seed beside them), the
cached computations, and what each tab draws (the approximations' evidence and sparse pitfalls, the measured cost
and the learner's live run, flash attention tile by tile, linear attention as an RNN, checkpointing and mixed
precision), each taking the page's ``presenter.Lesson`` where it draws steps."""
from __future__ import annotations

import dataclasses

import numpy as np
import streamlit as st
from streamlit.delta_generator import DeltaGenerator

from attention_core import efficient as eff
from attention_core.labs import efficiency as lab
from attention_core.labs import efficiency_bench as bench
from attention_core.labs import seed_bugs
from serving.cache import MB, cache_data, shared_arrays
from ui import anatomy, charts, controls, models, presenter
from ui import efficiency_charts as ec
from ui import format as fmt
from ui.i18n import lesson, t
from ui.wrap import title_lines

MAX_TOKENS = 32          # the learner's sentence: two 32 x 32 heatmaps side by side stay readable
N_RANDOM = (4, 64, 16)   # random inputs: min, max, default n
SWEEP_SEEDS = (0, 1, 2, 3)
GAINS = (0.25, 0.5, 1.0, 2.0, 4.0)
RECORDED = ("full", "sparse_masked", "torch_sdpa", "flash", "linear", "performer", "linformer", "window")
LRA_NAMES = {"linear": "Linear Transformer", "performer": "Performer", "linformer": "Linformer",
             "window": "Local Attention"}
LRA_N = (1024, 2048, 4096)
CK_N = (16, 32, 64)           # tokens of the checkpointing demo (a new setting reruns it: keep it small)
CK_LAYERS = (1, 4, 4)         # min, max, default encoder layers
PREC_GAINS = (0.5, 1.0, 2.0, 4.0, 8.0)
PREC_N, PREC_D = 64, 32
PITFALL_N = 12           # n of the pitfall demos while there is no input
# the approximations' integer knobs: Knobs field -> (URL key, label, min, max, default); each variant's, by column
SLIDERS = {"k": ("k", "knob_k", 1, N_RANDOM[1], 4), "stride": ("stride", "knob_stride", 1, 32, 4),
           "window": ("win", "knob_window", 0, 32, 2), "block": ("block", "knob_block", 1, 32, 4),
           "n_global": ("glob", "n_global", 0, 4, 1), "n_random": ("rnd", "n_random", 0, 8, 2)}
VARIANT_SLIDERS = {"linformer": ("k",), "strided": ("stride", "window"), "longformer": ("window", "n_global"),
                   "bigbird": ("window", "n_global", "n_random"), "block_global": ("block", "n_global"),
                   "flash": ("block",)}

# ------------------------------------------------------------------ computations, cached on plain arguments
variant_view = cache_data(max_entries=128, max_bytes=16 * MB)(lab.variant_view)
knob_sweep = cache_data(max_entries=64, max_bytes=8 * MB)(lab.knob_sweep)
flash_run = shared_arrays(max_entries=32, max_bytes=24 * MB)(lab.flash_run)   # a trace can hold 1000s of tiles
rnn_view = cache_data(max_entries=64, max_bytes=8 * MB)(lab.rnn_view)
checkpoint_report = cache_data(max_entries=64, max_bytes=2 * MB)(lab.checkpoint_report)
precision_table = cache_data(max_entries=64, max_bytes=2 * MB)(lab.precision_table)
loop_mask_matches = cache_data(max_entries=16, max_bytes=1 * MB)(lab.loop_mask_matches)
block_mask_demo = cache_data(max_entries=64, max_bytes=2 * MB)(seed_bugs.block_mask_demo)


@cache_data(max_entries=128, max_bytes=8 * MB)
def flash_step_view(inputs: lab.LabInputs, bq: int, bk: int, causal: bool, index: int) -> lab.FlashStepView:
    return lab.flash_step_view(inputs, flash_run(inputs, bq, bk, causal), index, causal)


@cache_data(max_entries=64, max_bytes=2 * MB)
def linear_mask_demo(inputs: lab.LabInputs | None) -> dict:
    return seed_bugs.linear_mask_demo(lab.linear_mask_input(inputs), num_heads=2)


def escaped(labels: list[str]) -> list[str]:
    """Axis labels (repeated tokens kept apart) made inert for Markdown: the learner's text is never markup."""
    return [anatomy.md_escape(x) for x in charts.unique_labels(labels)]


def say(lines: list[str]) -> None:
    for line in lines:
        st.markdown(line)


def metrics(items: list[tuple]) -> None:
    """A row of metrics that wraps on a phone: one horizontal container, not a column each (fewer elements to
    re-send on a rerun)."""
    with st.container(horizontal=True):
        for label, value, help_text in items:
            st.metric(label, value, help=help_text)


def heatmap(matrix, labels: list[str], *, key: str, title: str, **options) -> int | None:
    """An attention heatmap with its CSV download; returns the clicked query row."""
    spec = charts.attention_heatmap(matrix, labels, title=title, **options)
    return anatomy.show_matrix(spec, matrix, labels, key=key, file_name=f"{key}.csv")


def read_inputs() -> tuple[lab.LabInputs | None, list[str]]:
    """The learner's sentence or n random tokens and the sharpness (gain on q and k). The seed is read in each tab,
    next to the controls it drives (``with_seed``): a new seed redraws only that tab's fragment."""
    c_src, c_text, c_gain = st.columns([2.3, 3.0, 1.6], vertical_alignment="bottom")
    src = c_src.segmented_control(t("efficiency.src"), ["text", "random"], default="text", required=True,
                                  format_func=lambda s: t(f"efficiency.src_{s}"), key="src", bind="query-params")
    seed = 0                            # set by with_seed() in the tab that uses it
    gain = float(c_gain.select_slider(t("efficiency.gain"), options=list(GAINS), value=1.0, key="gain",
                                      bind="query-params", help=t("efficiency.gain_help"),
                                      format_func=lambda g: f"×{g:g}"))
    with c_text:
        if src == "random":
            lo, hi, default = N_RANDOM
            n = int(st.slider(t("efficiency.n_tokens"), lo, hi, default, key="n", bind="query-params"))
            return lab.LabInputs(None, n, seed, gain), [f"t{i}" for i in range(n)]
        tokens = controls.sentence(key="text", max_tokens=MAX_TOKENS, min_tokens=2)
    if tokens is None:
        return None, []
    return lab.LabInputs(tuple(tokens), len(tokens), seed, gain), list(tokens)


def with_seed(inputs: lab.LabInputs) -> lab.LabInputs:
    """The inputs with the seed of the number input drawn here (in the tab's fragment, beside its controls)."""
    return inputs._replace(seed=controls.seed())


# Each tab's controls and what they drive run as an st.fragment (the redraw budget): a control (the seed too) reruns and
# redraws only that part (``steps.part``); the tab's lesson, question and pitfalls stay outside and are not re-sent.


def tab_lesson(steps: presenter.Lesson, tab: str, lesson_name: str, n_options: int, answer: int, body, *args,
               follow=None) -> None:
    """A tab's lesson text and its question, static and so outside the fragment; then ``body`` (the tab's controls
    and the evidence they redraw) as a fragment; ``follow``: what the page outside it was drawn for
    (``Lesson.part``)."""
    with steps.step(f"{tab}_lesson"):
        st.markdown(lesson(f"efficiency/{lesson_name}"))
    with steps.step(f"{tab}_question"):
        anatomy.exercise(f"{tab}_ex", t(f"efficiency.{tab}_ex_question"),
                         [t(f"efficiency.{tab}_ex_opt{i}") for i in range(n_options)], answer=answer,
                         explanation=t(f"efficiency.{tab}_ex_explain"))
    steps.part(body, steps, *args, follow=follow)


# ------------------------------------------------------------------ 1. the approximations
def knob_controls(variant: str, inputs: lab.LabInputs) -> tuple[lab.Knobs, list[str], DeltaGenerator]:
    """The variant's knob (and its secondary settings), clamped to n; notes about clamping; the column of the
    seed (drawn there by the seed's own fragment, ``seeded_evidence``)."""
    n, notes = inputs.n, []
    knobs = len(VARIANT_SLIDERS.get(variant, ())) + (variant in ("performer", "linformer"))   # m; the projection
    *cols, c_seed = st.columns([1] * max(knobs, 1) + [0.8], vertical_alignment="bottom")   # no empty columns
    kw = {}
    for col, field in zip(cols, VARIANT_SLIDERS.get(variant, ())):
        key, label, lo, hi, default = SLIDERS[field]
        helps = f"knob_block_help_{variant}" if field == "block" else f"{label}_help"
        kw[field] = int(col.slider(t(f"efficiency.{label}"), lo, hi, default, key=key, bind="query-params",
                                   help=t(f"efficiency.{helps}")))
    if variant == "performer":
        kw["m"] = int(cols[0].select_slider(t("efficiency.knob_m"), options=list(lab.FEATURES), value=16, key="m",
                                            bind="query-params", help=t("efficiency.knob_m_help")))
    elif variant == "linformer":
        kw["proj"] = cols[1].segmented_control(t("efficiency.proj"), ["pool", "gauss"], default="pool", required=True,
                                               format_func=lambda p: t(f"efficiency.proj_{p}"), key="proj",
                                               bind="query-params", help=t("efficiency.proj_help"))
        notes += [t("efficiency.note_clamped", what="k", value=kw["k"], n=n)] if kw["k"] > n else []
    kw.update({field: min(kw[field], n) for field in ("k", "stride") if field in kw})      # at most n
    covered = {"longformer": "window", "bigbird": "window", "block_global": "block"}.get(variant)
    if covered and kw[covered] >= n - (covered == "window"):             # the pattern is the whole matrix
        notes.append(t("efficiency.note_covers", what=t(f"efficiency.knob_{covered}"), value=kw[covered], n=n))
    return lab.Knobs(**kw), notes, c_seed


def approximations_section(steps: presenter.Lesson, inputs: lab.LabInputs, labels: list[str]) -> None:
    """The question; the variant, its knob and the seed; exact weights beside the method's, metrics, one row,
    the sweep. The sparse pitfalls below the tab's fragment are drawn for its block slider: they follow it."""
    tab_lesson(steps, "approx", "variants", 4, 2, approximations_part, inputs, labels,
               follow=lambda _: pitfall_block())


def approximations_part(steps: presenter.Lesson, inputs: lab.LabInputs, labels: list[str]) -> None:
    with steps.step("approx_controls", keep=True):
        variant = st.segmented_control(t("efficiency.variant"), list(lab.VARIANTS), default="performer",
                                       required=True, format_func=lambda v: t(f"efficiency.v_{v}"), key="v",
                                       bind="query-params")
        variant = variant if variant in lab.VARIANTS else "performer"
        st.caption(t(f"efficiency.about_{variant}"))
        knobs, notes, c_seed = knob_controls(variant, inputs)
        for note in notes:
            st.caption(note)
    with steps.step("approx_evidence"):
        evidence = st.container()
    with c_seed:
        seeded_evidence(evidence, inputs, labels, variant, knobs)


@st.fragment
def seeded_evidence(evidence, inputs: lab.LabInputs, labels: list[str], variant: str, knobs: lab.Knobs) -> None:
    """The seed (in its column of the knob row) and the evidence it redraws, written into the evidence step:
    a fragment nested in the tab's, so a new seed re-sends neither the variant, its caption nor the knobs."""
    inputs = with_seed(inputs)
    with evidence:
        approximations_evidence(inputs, labels, variant, dataclasses.replace(knobs, seed=inputs.seed))


def approximations_evidence(inputs: lab.LabInputs, labels: list[str], variant: str, knobs: lab.Knobs) -> None:
    n, name = inputs.n, t(f"efficiency.v_{variant}")
    view = variant_view(inputs, variant, knobs)
    presenter.shows(*view.code)                 # the method's own code, as it ran
    signed = variant == "linformer" and knobs.proj == "gauss"     # an untrained projection: weights < 0
    left, right = st.columns(2)
    with left:
        row_a = heatmap(view.exact, labels, key="w_exact", title=t("efficiency.h_exact"))
    with right:
        row_b = heatmap(view.weights, labels, key="w_method", title=t("efficiency.h_method", name=name),
                        masked=None if view.mask is None else ~view.mask, kind="scores" if signed else "weights",
                        domain=(-1.0, 1.0) if signed else None)
        if view.mask is not None:
            st.caption(t("efficiency.masked_legend"))
        if signed:
            st.caption(t("efficiency.signed_legend"))
    tv = view.row_tv
    row = next((r for r in (row_b, row_a) if r is not None and r < n), int(np.argmax(tv)) if tv.max() > 0 else 0)

    table, helps = ec.metric_table(ec.approx_metrics(view, n))   # one element, not a block and four metrics
    st.markdown(table, help=helps)
    left, right = st.columns(2)
    with left:
        anatomy.show_chart(ec.pair(view.exact[row], view.weights[row], labels, (t("efficiency.series_exact"), name),
                                   title=t("efficiency.row_title"), label_title=t("common.key"),
                                   value_title=t("common.weight"), domain=None if signed else (0.0, 1.0)),
                           key="row_pair")
        st.caption(t("efficiency.row_caption", q=escaped(labels)[row], tv=fmt.pct(tv[row], 1)))
    with right:
        knob_chart(inputs, variant, knobs, view)
    anatomy.notice(ec.approx_notes(variant, knobs, view, escaped(labels), lab.D))


def knob_chart(inputs: lab.LabInputs, variant: str, knobs: lab.Knobs, view: lab.VariantView) -> None:
    """Error and cost against the variant's knob, over SWEEP_SEEDS."""
    name = lab.KNOB[variant]
    if name is None:
        st.info(t(f"efficiency.no_knob_{variant}"), icon=":material/tune:")
        return
    presenter.shows(lab.knob_sweep)
    sweep = knob_sweep(variant, inputs.tokens, inputs.n, knobs.for_sweep(variant), SWEEP_SEEDS, gain=inputs.gain)
    knob_title = t(f"efficiency.knob_{name}")
    anatomy.show_chart(ec.knob(sweep, current=getattr(knobs, name), this_error=view.rel_error, knob_title=knob_title,
                               title=title_lines(t("efficiency.knob_title", knob=knob_title, seeds=len(SWEEP_SEEDS))),
                               log_x=name == "m"), key="knob_chart")
    st.caption(t("efficiency.knob_caption", seeds=len(SWEEP_SEEDS), seed=inputs.seed))


def pitfall_first_tutorial(inputs: lab.LabInputs) -> None:
    # seed 0 whatever the tab's seed (this demo lies outside its fragment): the NaNs the patch replaces are the
    # rows with no visible key times n, a property of the pattern, not of the values of q and k
    q, k, _ = inputs._replace(seed=0).qkv()
    nan = lab.tutorial_nan_patch(q[0, 0], k[0, 0], eff.strided_sparse_mask(inputs.n, 4, 2))
    st.markdown(ec.first_tutorial_note(inputs.n, loop_mask_matches(inputs.n, 4), nan))
    if st.button(t("efficiency.pit1_time", n=256), key="time_masks", icon=":material/timer:"):
        st.session_state["eff_masks"] = lab.time_mask_builders(256)
    if st.session_state.get("eff_masks"):
        st.markdown(ec.mask_timing_note(st.session_state["eff_masks"]))


def pitfall_block() -> int:
    return int(st.session_state.get("block", 4) or 4)


def sparse_pitfalls(inputs: lab.LabInputs | None) -> None:
    """The tutorials' sparse attention layers, run as written on this input."""
    n, block = inputs.n if inputs is not None else PITFALL_N, pitfall_block()
    anatomy.pitfall(t("efficiency.pit2_title"), t("efficiency.pit2_body"), t("efficiency.pit2_code"),
                    demo=lambda: say(ec.second_tutorial_notes(n, block, lab.tutorial_chunks(n, block),
                                                              lab.tutorial_chunks(100, 32),
                                                              lab.tutorial_global_branch(n))),
                    shows=(lab.tutorial_chunks, lab.tutorial_global_branch))
    if inputs is not None:
        anatomy.pitfall(t("efficiency.pit1_title"), t("efficiency.pit1_body"), t("efficiency.pit1_code"),
                        demo=lambda: pitfall_first_tutorial(inputs), shows=(lab.tutorial_strided_mask_loops,))
    anatomy.pitfall(t("efficiency.pit_bm_title"), t("efficiency.pit_bm_body"), t("efficiency.pit_bm_code"),
                    demo=lambda: say(ec.block_mask_notes(block_mask_demo(n, block), n, block)),
                    shows=(seed_bugs.tutorial_block_local_attention,))


# ------------------------------------------------------------------ 2. cost, measured
def cost_section(steps: presenter.Lesson) -> None:
    """The question; the recorded run (time, memory against n), the tutorial's table, the LRA paper, a live run."""
    with steps.step("cost_lesson"):
        st.markdown(lesson("efficiency/cost"))
        doc = models.bench()
        if models.unavailable("bench"):
            return
    with steps.step("cost_question", shows=(bench.doubling_ratios, bench.measured_ratios, bench.lra_reference,
                                            bench.quoted_sizes)):
        a, b, ratio = bench.doubling_ratios(doc)
        anatomy.exercise("eff_ex", t("efficiency.ex_question", a=a, b=b),
                         [t(f"efficiency.ex_opt{i}") for i in range(4)],
                         1, t("efficiency.ex_explain", full=f"{ratio['full']:.1f}", lin=f"{ratio['linear']:.1f}"))
    sizes = bench.quoted_sizes(doc)
    with steps.step("cost_recorded"):
        for col, (key, spec) in zip(st.columns(2), ec.recorded(doc, RECORDED).items()):
            with col:
                anatomy.show_chart(spec, key=key)
        st.caption(ec.recorded_caption(doc))
        anatomy.notice(ec.cost_notes(doc, sizes))
    with steps.step("cost_table"):
        st.subheader(t("efficiency.table_title"))
        table = ec.complexity_table(doc, sizes)     # four narrow tables (the tutorial's cost; its idea and use;
        for cols in (slice(0, 2), slice(2, 4), slice(4, 7), slice(7, None)):   # what ran and its slopes; speed
            st.table(table[table.columns[cols]])                                # and memory): each fits a phone
        st.caption(t("efficiency.table_caption"))
        anatomy.pitfall(t("efficiency.pit3_title"), t("efficiency.pit3_body"), None,
                        demo=lambda: st.markdown(ec.flash_space_note(doc, sizes.memory_rows)))
    with steps.step("cost_lra"):
        st.subheader(t("efficiency.lra_title"))
        st.markdown(t("efficiency.lra_intro"))
        if not models.unavailable("lra"):
            lra = ec.lra_table(doc, models.lra(), LRA_NAMES, LRA_N)
            lra = lra.set_index(lra.columns[0])     # two wrapping tables (speed; memory): each fits a phone
            st.table(lra[lra.columns[:3]])
            st.table(lra[lra.columns[[0, 3, 4]]])
        st.warning(lesson("efficiency/lra_caveat"), icon=":material/balance:")
    with steps.step("cost_live"):
        st.subheader(t("efficiency.live_title"))
        live_section(doc)


def live_section(doc: dict) -> None:
    """The learner's own timings, on request (kept in the session)."""
    st.markdown(t("efficiency.live_intro", sizes=", ".join(map(str, lab.LIVE_SIZES)),
                  methods=", ".join(t(f"efficiency.r_{m}") for m in lab.LIVE_METHODS)))
    if st.button(t("efficiency.live_run"), key="live_run", icon=":material/timer:", type="primary"):
        bar = st.progress(0.0, text=t("efficiency.live_progress", i=0, total=lab.LIVE_RUNS))
        for done, total, results in lab.live_timings():
            bar.progress(done / total, text=t("efficiency.live_progress", i=done, total=total))
        bar.empty()
        st.session_state["eff_live"] = results
    results = st.session_state.get("eff_live")
    if not results:
        st.caption(t("efficiency.live_none"))
        return
    presenter.shows(lab.live_timings, lab.time_method)
    frame = ec.live_frame(results, {m: t(f"efficiency.r_{m}") for m in lab.LIVE_METHODS})
    anatomy.show_chart(ec.live(frame, lab.LIVE_METHODS), key="live_chart")
    st.markdown(t("efficiency.live_table", n=max(lab.LIVE_SIZES)))
    st.dataframe(ec.live_table(frame, doc, lab.LIVE_METHODS[1:], max(lab.LIVE_SIZES)), hide_index=True)


# ------------------------------------------------------------------ 3. flash attention, tile by tile
def flash_section(steps: presenter.Lesson, inputs: lab.LabInputs, labels: list[str]) -> None:
    """The tile sizes and the tile to look at; the question; the tiles, the running statistics, the result."""
    tab_lesson(steps, "flash", "flash", 3, 0, flash_part, inputs, labels)


def flash_part(steps: presenter.Lesson, inputs: lab.LabInputs, labels: list[str]) -> None:
    n = inputs.n
    with steps.step("flash_controls", keep=True):
        c1, c2, c3, c4 = st.columns([2, 2, 1.4, 1.1], vertical_alignment="bottom")
        with c4:
            inputs = with_seed(inputs)
        bq = int(c1.slider(t("efficiency.bq"), 1, 16, 4, key="bq", bind="query-params", help=t("efficiency.bq_help")))
        bk = int(c2.slider(t("efficiency.bk"), 1, 16, 4, key="bk", bind="query-params", help=t("efficiency.bk_help")))
        causal = bool(c3.toggle(t("efficiency.causal"), value=False, key="fc", bind="query-params",
                                help=t("efficiency.causal_help")))
        bq, bk = min(bq, n), min(bk, n)
        run = flash_run(inputs, bq, bk, causal)
        total = len(run.trace)
        step_no = int(st.slider(t("efficiency.tile"), 1, max(total, 2), min(2, total), key="tile",
                                bind="query-params", help=t("efficiency.tile_help", total=total)))
        step_no = min(max(step_no, 1), total)
        if total > 400:
            st.caption(t("efficiency.many_tiles", total=total))
    with steps.step("flash_evidence", shows=(eff.flash_attention, lab.flash_step, lab.tile_status,
                                             lab.flash_extra_floats)):
        view = flash_step_view(inputs, bq, bk, causal, step_no - 1)
        where, after = ec.flash_step_notes(view, step_no, total, bq, bk, escaped(labels))
        left, right = st.columns([1.1, 1])
        with left:
            anatomy.show_chart(ec.tiles(view.status, labels, bq, bk), key="tile_chart")
        with right:
            st.markdown(where)
            st.table(ec.flash_table(view.step, labels).set_index(t("efficiency.fc_query")))   # wraps: a phone
            st.caption(t("efficiency.flash_table_caption"))
            say(after)
            if view.last_of_block:
                st.success(t("efficiency.step_block_done", a=view.step.tile.q_start // bq + 1),
                           icon=":material/done_all:")
        st.success(ec.flash_final(run, at_last_tile=step_no == total), icon=":material/check_circle:")
        anatomy.notice(ec.flash_notes(run, n, lab.flash_extra_floats(n, lab.D, bq, bk), causal))


# ------------------------------------------------------------------ 4. causal linear attention as an RNN
def rnn_section(steps: presenter.Lesson, inputs: lab.LabInputs, labels: list[str]) -> None:
    """The step i; the question; the state S_i, the normaliser z_i and the output both ways; the tutorial's mask."""
    tab_lesson(steps, "rnn", "rnn", 3, 0, rnn_part, inputs, labels)


def rnn_part(steps: presenter.Lesson, inputs: lab.LabInputs, labels: list[str]) -> None:
    n = inputs.n
    with steps.step("rnn_controls", keep=True):
        c1, c2 = st.columns([4, 1], vertical_alignment="bottom")
        with c2:
            inputs = with_seed(inputs)
        i = int(c1.slider(t("efficiency.step"), 1, MAX_TOKENS if inputs.tokens is not None else N_RANDOM[1],
                          min(4, n), key="rnn_step", bind="query-params", help=t("efficiency.step_help")))
        i = min(max(i, 1), n)
    with steps.step("rnn_evidence", shows=(eff.linear_attention_states, eff.linear_attention,
                                           eff.linear_attention_weights)):
        rnn_evidence(inputs, labels, i)
    with steps.step("rnn_pitfall"):           # in the fragment: its demo runs on this seed's queries
        anatomy.pitfall(t("efficiency.pit_lin_title"), t("efficiency.pit_lin_body", tab=t("efficiency.tab_rnn")),
                        t("efficiency.pit_lin_code"), demo=lambda: say(ec.linear_mask_notes(linear_mask_demo(inputs))),
                        shows=(seed_bugs.tutorial_linear_attention, seed_bugs.linear_mask_demo))


def rnn_evidence(inputs: lab.LabInputs, labels: list[str], i: int) -> None:
    rv = rnn_view(inputs)
    shown = ec.rnn_charts(rv, i)
    st.markdown(t("efficiency.rnn_now", i=i, tok=escaped(labels)[i - 1], n=inputs.n))
    left, right = st.columns([1.2, 1])
    with left:
        anatomy.show_matrix(shown.state, rv.S[i - 1], shown.features, shown.dims, key="rnn_S", selectable=False,
                            file_name="rnn_S.csv")
    with right:
        anatomy.show_chart(shown.z, key="rnn_z")
        anatomy.show_chart(shown.y, key="rnn_y")
    anatomy.notice(ec.rnn_notes(rv, i))


# ------------------------------------------------------------------ 5. the tutorial's performance tips (10.2)
def checkpointing_section(steps: presenter.Lesson) -> None:
    with steps.step("ck_question"):
        st.subheader(t("efficiency.tips_ck_heading"))
        anatomy.formula(ec.checkpoint_formula(), t("efficiency.tips_ck_formula_caption"))
        c1, c2, c3 = st.columns([2, 2, 1.6], vertical_alignment="bottom")
        n = c1.segmented_control(t("efficiency.tips_ck_n"), list(CK_N), default=32, required=True, key="ck_n",
                                 bind="query-params")
        lo, hi, default = CK_LAYERS
        layers = int(c2.slider(t("efficiency.tips_ck_layers"), lo, hi, default, key="ck_L", bind="query-params"))
        bf16 = bool(c3.toggle(t("efficiency.tips_ck_bf16"), value=False, key="ck_bf16", bind="query-params",
                              help=t("efficiency.tips_ck_bf16_help")))
        n, layers = n if n in CK_N else 32, min(max(layers, lo), hi)
        anatomy.exercise("tips_ck_ex", t("efficiency.tips_ck_ex_question", layers=layers, n=n),
                         [t(f"efficiency.tips_ck_ex_opt{i}", layers=layers) for i in range(3)], answer=2,
                         explanation=t("efficiency.tips_ck_ex_explain"))
    with steps.step("ck_evidence",
                    shows=(lab.checkpoint_report, lab.saved_tensor_bytes, lab.run_encoder, lab.checkpoint)):
        r = checkpoint_report(int(n), layers, autocast=bf16)
        metrics(ec.checkpoint_metrics(r))
        anatomy.notice(ec.checkpoint_notes(r, layers))


def precision_section(steps: presenter.Lesson) -> None:
    with steps.step("mp_question"):
        st.subheader(t("efficiency.tips_mp_heading"))
        c1, c2 = st.columns([4, 1], vertical_alignment="bottom")
        gain = float(c1.select_slider(t("efficiency.tips_mp_gain"), options=list(PREC_GAINS), value=1.0,
                                      key="mp_gain", bind="query-params", help=t("efficiency.tips_mp_gain_help"),
                                      format_func=lambda g: f"×{g:g}"))
        with c2:
            seed = controls.seed()
        anatomy.exercise("tips_mp_ex", t("efficiency.tips_mp_ex_question"),
                         [t(f"efficiency.tips_mp_r_{name}") for name in lab.RECIPES[1:]], answer=0,
                         explanation=t("efficiency.tips_mp_ex_explain"))
    with steps.step("mp_evidence", shows=(lab.precision_table, lab.attention_in, lab.largest_score)):
        rows = precision_table(PREC_N, PREC_D, gain, seed)
        table = ec.precision_table(rows).set_index(t("efficiency.tips_mp_c_recipe"))   # two wrapping tables (the
        st.table(table[table.columns[:3]])                                      # format; its errors): fit a phone
        st.table(table[table.columns[3:]])
        st.caption(t("efficiency.tips_mp_caption", n=PREC_N, d=PREC_D, seed=seed))
        anatomy.notice(ec.precision_notes(rows, gain, lab.largest_score(PREC_N, PREC_D, gain, seed)))

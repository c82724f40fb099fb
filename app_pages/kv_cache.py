"""Generating with a KV cache: prefill, then one token at a time, reusing every past key and value.

A small decoder-only model (attention_core.decoder.DecoderLM: CausalSelfAttention layers with RoPE and
grouped K/V heads; untrained, random weights) generates greedily twice, without and with the cache: the chart
shows which K/V rows each forward pass computes and which it reads from the cache, the notice the measured
difference of the two outputs; the time per token is measured live for short contexts and read from the
recorded benchmark (scripts/bench_kv_cache.py) for long ones; the size formula runs on sliders and on the
published configurations of real models.
"""
from __future__ import annotations

from typing import NamedTuple

import pandas as pd
import streamlit as st

from attention_core.decoder import CausalSelfAttention, KVCache
from attention_core.labs import kv_cache as lab
from serving.cache import MB, cache_data
from ui import anatomy, controls, presenter
from ui.format import approx, count, fixed, pct, sig
from ui.i18n import t
from ui.kv_cache_charts import cache_grid, grid_frame, timing_frame, timing_lines
from ui.models import Unavailable, show_unavailable, why_of

NS = "kv_cache"
PROMPTS = tuple(range(1, 17))
LIVE_CONTEXTS = (16, 32, 64, 128, 256)
D_HEADS = (32, 64, 80, 96, 128, 256)
DTYPES = tuple(lab.DTYPE_BYTES)
TOKENS = tuple(2 ** i for i in range(10, 21))          # 1K .. 1M
BENCH_SHOWN, BENCH_COMMAND = "assets/bench/kv_cache.json", "python scripts/bench_kv_cache.py"


class Inputs(NamedTuple):
    prompt: int
    new: int
    seed: int


class Size(NamedTuple):
    layers: int
    kv_heads: int
    d_head: int
    dtype: str
    tokens: int


# ------------------------------------------------------------------ computation: cached on plain arguments
@cache_data(max_entries=64, max_bytes=1 * MB)
def comparison(prompt: int, seed: int) -> lab.Report:
    return lab.report(prompt, lab.MAX_NEW, seed)


def generation(prompt: int, new: int, seed: int) -> lab.Summary:
    return comparison(prompt, seed).upto(new)     # greedy: every length is a prefix of the longest run


@cache_data(max_entries=2, max_bytes=1 * MB)
def live_timing(contexts: tuple[int, ...]) -> list:
    return [tuple(r) for r in lab.timing_curve(contexts, repeats=5)]


@cache_data(max_entries=64, max_bytes=2 * MB)
def grid_data(inputs: Inputs, labels: tuple[str, ...], statuses: tuple[str, ...]) -> pd.DataFrame:
    """The chart's frame: built once per inputs and language, like the generation itself."""
    run = generation(*inputs)
    return grid_frame(run.steps, inputs.prompt + inputs.new - 1, labels, statuses)   # the last token is not fed


@cache_data(max_entries=8, max_bytes=1 * MB)
def live_frame(methods: tuple[str, str]) -> tuple[pd.DataFrame, tuple]:
    contexts, plain, cached = (list(col) for col in zip(*live_timing(LIVE_CONTEXTS)))
    ends = (contexts[0], plain[0], cached[0], contexts[-1], plain[-1], cached[-1])
    return timing_frame(contexts, plain, cached, methods), ends


@cache_data(max_entries=8, max_bytes=1 * MB)
def recorded_frame(rows: tuple, methods: tuple[str, str]) -> pd.DataFrame:
    return timing_frame([r[0] for r in rows], [r[1] for r in rows], [r[2] for r in rows], methods)


@cache_data(max_entries=8, max_bytes=1 * MB)
def published_table(columns: tuple[str, ...], at_columns: tuple[str, ...], gib_label: str) -> pd.DataFrame:
    rows = lab.published_sizes()
    values = [[m.name for m, _ in rows], [m.layers for m, _ in rows], [m.heads for m, _ in rows],
              [m.kv_heads for m, _ in rows], [m.d_head for m, _ in rows], [m.dtype for m, _ in rows],
              [count(m.context) for m, _ in rows]]
    sizes = [[gib_label.format(v=gib(s[i])) for _, s in rows] for i in range(len(lab.TABLE_TOKENS))]
    return pd.DataFrame(dict(zip(columns + at_columns, values + sizes)))


@cache_data(max_entries=2, max_bytes=1 * MB)
def offset_demo(context: int) -> lab.OffsetDemo:
    return lab.forgotten_offset(context=context)


@cache_data(max_entries=4, max_bytes=1 * MB)
def _recorded(path: str, stamp: tuple[int, int]):
    try:
        return lab.read_bench(path)
    except FileNotFoundError:
        return Unavailable(BENCH_SHOWN, True, BENCH_COMMAND)
    except Exception as err:       # damaged: JSON, UTF-8 or content errors
        return Unavailable(BENCH_SHOWN, False, BENCH_COMMAND, why_of(err, lab.BENCH_FILE))


def recorded_curve():
    """The recorded benchmark (dict), or Unavailable: keyed on the file's time and size, so a rebuilt file is
    read again and a damaged one is diagnosed once."""
    try:
        s = lab.BENCH_FILE.stat()
    except OSError:
        return Unavailable(BENCH_SHOWN, True, BENCH_COMMAND)
    return _recorded(str(lab.BENCH_FILE), (s.st_mtime_ns, s.st_size))


# ------------------------------------------------------------------ sections, in lesson order
def controls_section() -> Inputs:
    left, mid, right = st.columns([3, 3, 1])
    with left:
        prompt = st.select_slider(t(f"{NS}.ctl_prompt"), options=PROMPTS, value=6, key="prompt",
                                  bind="query-params")
    with mid:
        new = st.slider(t(f"{NS}.ctl_new"), min_value=1, max_value=lab.MAX_NEW, value=10, key="new",
                        bind="query-params")
    with right:
        seed = controls.seed()
    return Inputs(int(prompt), int(new), seed)


def question_section() -> None:
    anatomy.exercise(f"{NS}_ex", t(f"{NS}.ex_question"), [t(f"{NS}.ex_a"), t(f"{NS}.ex_b"), t(f"{NS}.ex_c")],
                     answer=1, explanation=t(f"{NS}.ex_explain"))


def evidence_section(inputs: Inputs) -> lab.Summary:
    run = generation(*inputs)
    labels = [t(f"{NS}.pass_prefill")] + [t(f"{NS}.pass_step", k=k) for k in range(1, len(run.steps))]
    statuses = [t(f"{NS}.status_reused"), t(f"{NS}.status_computed"), t(f"{NS}.status_future")]
    frame = grid_data(inputs, tuple(labels), tuple(statuses))
    anatomy.show_chart(cache_grid(frame, x_title=t(f"{NS}.axis_position"), y_title=t(f"{NS}.axis_pass"),
                                  status_title=t(f"{NS}.axis_status"), order=labels, statuses=statuses,
                                  height=max(160, 22 * len(labels) + 60),
                                  title=t(f"{NS}.grid_title", prompt=inputs.prompt, new=inputs.new)), key="grid")
    st.caption(t(f"{NS}.grid_caption", prompt=inputs.prompt, new=inputs.new, L=lab.DEMO["layers"],
                 d=lab.DEMO["d_model"], h=lab.DEMO["num_heads"],
                 h_kv=lab.DEMO["num_kv_heads"]))
    return run


def notice_section(inputs: Inputs, run: lab.Summary) -> None:
    same = t(f"{NS}.same_yes") if run.same_tokens else t(f"{NS}.same_no")
    anatomy.notice([
        t(f"{NS}.notice_diff", diff=sig(run.max_abs_diff), new=inputs.new, same=same),
        t(f"{NS}.notice_rows", plain=count(run.rows_plain), cached=count(run.rows_cached),
          ratio=fixed(run.rows_plain / run.rows_cached, 1)),
        t(f"{NS}.notice_bytes", bytes=count(run.cache_bytes), tokens=len(run.tokens) - 1, L=lab.DEMO["layers"],
          h_kv=lab.DEMO["num_kv_heads"], d_head=lab.DEMO["d_model"] // lab.DEMO["num_heads"]),
    ])


def timing_section() -> None:
    st.subheader(t(f"{NS}.timing_heading"))
    st.markdown(t(f"{NS}.timing_intro"))
    methods = [t(f"{NS}.method_plain"), t(f"{NS}.method_cached")]
    frame, (n0, plain0, cached0, n, plain, cached) = live_frame(tuple(methods))
    anatomy.show_chart(timing_lines(frame, x_title=t(f"{NS}.axis_context"),
                                    y_title=t(f"{NS}.axis_ms"), method_title=t(f"{NS}.axis_method"),
                                    methods=methods, title=t(f"{NS}.live_title")), key="live")
    st.caption(t(f"{NS}.live_caption", n=n, plain=approx(1e3 * plain), cached=approx(1e3 * cached),
                 ratio=approx(plain / cached), n0=n0, ratio0=approx(plain0 / cached0)))
    doc = recorded_curve()
    if isinstance(doc, Unavailable):
        show_unavailable(doc)
        return
    rows = sorted(doc["results"], key=lambda r: r["context"])
    recorded = recorded_frame(tuple((r["context"], r["plain_s"], r["cached_s"]) for r in rows), tuple(methods))
    anatomy.show_chart(timing_lines(recorded,
                                    x_title=t(f"{NS}.axis_context"), y_title=t(f"{NS}.axis_ms"),
                                    method_title=t(f"{NS}.axis_method"), methods=methods,
                                    title=t(f"{NS}.recorded_title")), key="recorded")
    first, last = rows[0], rows[-1]
    settings, machine = doc["settings"], doc["machine"]
    st.caption(t(f"{NS}.recorded_caption", layers=settings.get("layers", "?"), d=settings.get("d_model", "?"),
                 cpu=anatomy.md_escape(str(machine.get("cpu", "?"))), date=anatomy.md_escape(str(doc.get("date", "?"))),
                 load=anatomy.md_escape(str(round(machine["load_avg_1min"], 1)) if isinstance(
                     machine.get("load_avg_1min"), (int, float)) else "?"),
                 command=BENCH_COMMAND))
    anatomy.notice([
        t(f"{NS}.notice_recorded", n0=count(first["context"]), r0=approx(first["plain_s"] / first["cached_s"]),
          n1=count(last["context"]), r1=approx(last["plain_s"] / last["cached_s"]),
          plain=approx(1e3 * last["plain_s"]), cached=approx(1e3 * last["cached_s"])),
        t(f"{NS}.notice_growth", grow_plain=approx(last["plain_s"] / first["plain_s"]),
          grow_cached=approx(last["cached_s"] / first["cached_s"]),
          times=fixed(last["context"] / first["context"], 0)),
    ])


def size_heading() -> None:
    st.subheader(t(f"{NS}.size_heading"))
    bytes_word = r"\text{" + t(f"{NS}.formula_bytes") + "}"
    anatomy.formula(bytes_word + r" = 2 \times L \times h_{kv} \times d_{head} \times b \times n",
                    t(f"{NS}.size_caption"))


def size_controls() -> Size:
    a, b, c = st.columns(3)
    with a:
        layers = st.slider(t(f"{NS}.ctl_layers"), 1, 128, 32, key="layers", bind="query-params")
        d_head = st.select_slider(t(f"{NS}.ctl_d_head"), options=D_HEADS, value=128, key="d_head",
                                  bind="query-params")
    with b:
        kv_heads = st.slider(t(f"{NS}.ctl_kv_heads"), 1, 128, 8, key="kv_heads", bind="query-params")
        dtype = st.selectbox(t(f"{NS}.ctl_dtype"), DTYPES, index=1, key="dtype", bind="query-params")
    with c:
        tokens = st.select_slider(t(f"{NS}.ctl_tokens"), options=TOKENS, value=32768, key="tokens",
                                  bind="query-params")     # no format_func: the URL holds the number itself
    return Size(int(layers), int(kv_heads), int(d_head), str(dtype), int(tokens))


def gib(n: int) -> str:
    return fixed(n / 2 ** 30, 2)


def size_section(size: Size) -> None:
    per_token = lab.kv_cache_bytes(size.layers, size.kv_heads, size.d_head, lab.DTYPE_BYTES[size.dtype], 1)
    total = per_token * size.tokens
    st.metric(t(f"{NS}.size_metric", k=size.tokens // 1024), t(f"{NS}.gib", v=gib(total)))
    st.markdown(t(f"{NS}.size_explain", L=size.layers, h=size.kv_heads, d=size.d_head, b=lab.DTYPE_BYTES[size.dtype],
                  per=count(per_token), n=count(size.tokens), total=count(total)))


def published_section() -> None:
    """The cache of published models (static: outside the size sliders' fragment)."""
    rows = lab.published_sizes()
    names = ("model", "layers", "heads", "kv_heads", "d_head", "dtype", "context")
    table = published_table(tuple(t(f"{NS}.col_{c}") for c in names),
                            tuple(t(f"{NS}.col_at", k=n // 1024) for n in lab.TABLE_TOKENS), t(f"{NS}.gib"))
    table = table.set_index(table.columns[0])       # three wrapping tables, a model a row (fit a phone's 358 px):
    for cols in (slice(0, 4), slice(4, 6), slice(6, None)):   # the shapes, the number format and context,
        st.table(table[table.columns[cols]])                  # the cache at 4K / 32K / 128K tokens
    st.caption(t(f"{NS}.table_caption") + " " + " · ".join(f"`{m.source.removeprefix('https://')}`" for m, _ in rows))
    llama2, mistral = rows[1], rows[2]
    anatomy.notice([t(f"{NS}.notice_gqa", a=llama2[0].name, b=mistral[0].name, ga=gib(llama2[1][1]),
                      gb=gib(mistral[1][1]), ratio=fixed(llama2[1][1] / mistral[1][1], 0))])


def forgotten_offset_demo() -> None:
    demo = offset_demo(32)
    st.markdown(t(f"{NS}.pit_demo", n=demo.context, diff=fixed(demo.max_weight_diff, 3), moved=pct(demo.moved, 1)))


def pitfall_section() -> None:
    anatomy.pitfall(t(f"{NS}.pit_title"), t(f"{NS}.pit_body"), code=t(f"{NS}.pit_code"), demo=forgotten_offset_demo)


# ------------------------------------------------------------------ the page
# Fragments (the redraw budget, docs/performance.md): a control redraws only the part it drives. The generation's
# controls (prompt, new tokens, seed) rerun only the grid and its notice; the size sliders only the metric and its
# sentence.
def generation_part(lesson: presenter.Lesson) -> None:
    with lesson.step("controls", keep=True):
        chosen = controls_section()
    with lesson.step("evidence", shows=(lab.generate_with_cache, lab.generate_without_cache,
                                        CausalSelfAttention.forward, KVCache.append)):
        shown = evidence_section(chosen)
        notice_section(chosen, shown)


@st.fragment
def size_part() -> None:
    size_section(size_controls())


anatomy.header(NS)
lesson = presenter.Lesson(NS)
with lesson.step("intuition"):
    anatomy.intuition(NS)
    anatomy.formula(r"\mathrm{out}_t = \operatorname{softmax}\!\Big(\frac{q_t\,[k_1 \dots k_t]^\top}{\sqrt{d}}\Big)"
                    r"\,[v_1 \dots v_t]", t(f"{NS}.formula_caption"))
with lesson.step("question"):          # static: posed before the controls, outside the fragment they redraw
    question_section()
lesson.part(generation_part, lesson)
with lesson.step("timing"):
    timing_section()
with lesson.step("size", shows=(lab.kv_cache_bytes,)):
    size_heading()
    size_part()
    published_section()
with lesson.step("pitfall", shows=(lab.forgotten_offset,)):
    pitfall_section()
lesson.end()          # and "Show the code": what the steps declared

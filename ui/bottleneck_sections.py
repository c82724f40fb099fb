"""The bottleneck page's sections: the models and the computations cached on plain values (both answers to one
string, many fresh strings of one length, the tutorial's batching), the example's controls, each section's body (the
recorded curves, the answers with their alignment, the decoder's diagrams, accuracy by position, what to notice), the
question's numbers, the pitfall's demo and the slots the example's fragment fills (``Slots``)."""
from __future__ import annotations

from typing import NamedTuple

import numpy as np
import streamlit as st
from streamlit.delta_generator import DeltaGenerator

from attention_core.labs import bottleneck as lab
from attention_core.models.tasks import REVERSE_MAX_LEN, REVERSE_MIN_LEN
from serving.cache import MB, cache_data
from ui import anatomy, charts, controls, models
from ui import bottleneck_charts as bc
from ui import format as fmt
from ui.i18n import lesson as lesson_text
from ui.i18n import t
from ui.models import curves, model
from ui.wrap import title_lines

SUBSCRIPTS = str.maketrans("0123456789", "₀₁₂₃₄₅₆₇₈₉")


def positioned(chars) -> list[str]:
    """Characters labelled with their 1-based position as a subscript: "6₁", "6₂", "1₁₀"."""
    return [f"{c}{str(i + 1).translate(SUBSCRIPTS)}" for i, c in enumerate(chars)]


NS = "bottleneck"
MODELS = {"attention": "reverse_attn", "no_attention": "reverse_noattn"}
MAX_LEN = 60                 # longest string the page runs (the models were trained on 5..40)
DEFAULT_LEN = 30
CHECK_N = 100                # fresh strings per "check many" batch
PITFALL_SHORT = "12345"


# ------------------------------------------------------------------ models and cached computations
@cache_data(max_entries=256, max_bytes=4 * MB)
def answers(digits: str) -> lab.Answers:
    """Both models' answers (and the attention model's alignment) for one digit string."""
    plain, attentive = model(MODELS["no_attention"]), model(MODELS["attention"])
    return lab.answers(plain.model, attentive.model, digits, attentive.src_vocab)


@cache_data(max_entries=64, max_bytes=4 * MB)
def check_many(length: int, seed: int) -> dict[str, lab.LengthCheck]:
    """Both models on CHECK_N fresh strings of one length (on request: ~0.3 s at length 30)."""
    return {kind: lab.reverse_check(model(name).model, length, CHECK_N, seed) for kind, name in MODELS.items()}


@cache_data(max_entries=8, max_bytes=2 * MB)
def tutorial_batch(long: str) -> dict[str, lab.BatchedAnswer]:
    """PITFALL_SHORT alone and batched the tutorial's way with ``long``, through both models."""
    return {kind: lab.batched_as_tutorial(model(name).model, PITFALL_SHORT, long, model(name).src_vocab)
            for kind, name in MODELS.items()}


# ------------------------------------------------------------------ helpers
def names() -> dict[str, str]:
    return {k: t(f"{NS}.model_{k}") for k in MODELS}


def quoted(chars: list[str], limit: int = 8) -> str:
    """The first ``limit`` offending characters, quoted and made inert for Markdown."""
    shown = t(f"{NS}.sep").join(t("common.quoted", text=anatomy.md_escape(c)) for c in chars[:limit])
    return shown + ("…" if len(chars) > limit else "")


def facts() -> None:
    """Say plainly what these models are."""
    a, n = model(MODELS["attention"]), model(MODELS["no_attention"])
    count = lambda m: sum(p.numel() for p in m.model.parameters())  # noqa: E731
    st.caption(t(f"{NS}.facts", hidden=a.config["hidden_dim"], p_no=fmt.count(count(n)), p_at=fmt.count(count(a)),
                 steps=a.meta["recipe"]["steps"], s_no=f"{n.meta['train_seconds']:.0f}",
                 s_at=f"{a.meta['train_seconds']:.0f}", lo=REVERSE_MIN_LEN, hi=REVERSE_MAX_LEN,
                 seed=curves().get("eval_seed", "—")))


class Choice(NamedTuple):
    """The example's controls as the full run drew them."""
    row: DeltaGenerator    # the controls' row: the fragment draws the length and the seed in it
    typed: str | None      # the learner's own digits (valid), None when generated from (length, seed)


def example_controls() -> Choice | None:
    """The own-string toggle and the typed digits (they rerun the page: a bad string stops it, with a message,
    before the sections it would feed); None after a message. The length and the seed are drawn in the same row by
    the example's fragment (``generated_digits``): they rerun only the fragment (the redraw budget)."""
    row = st.container(horizontal=True)      # one flex row, not three columns: fewer messages per rerun
    own = row.toggle(t(f"{NS}.own"), value=False, key="own", bind="query-params", help=t(f"{NS}.own_help"))
    if not own:
        return Choice(row, None)
    typed = row.text_input(t(f"{NS}.digits"), value="1234567890", key="digits", bind="query-params",
                           max_chars=400, help=t(f"{NS}.digits_help"))
    check = lab.check_digits(typed, MAX_LEN)
    if check.problem is not None:
        fields = {"chars": {"chars": quoted(check.bad)}, "long": {"n": len(check.digits), "max": MAX_LEN}}
        anatomy.problem(f"{NS}.err_{check.problem}", **fields.get(check.problem, {}))
        return None
    return Choice(row, check.digits)


def generated_digits(row: DeltaGenerator) -> str:
    """The length and the seed, in the controls' row (drawn there by the fragment), and their digit string."""
    with row:
        length = st.slider(t(f"{NS}.length"), 1, MAX_LEN, DEFAULT_LEN, key="len", bind="query-params",
                           help=t(f"{NS}.length_help", lo=REVERSE_MIN_LEN, hi=REVERSE_MAX_LEN))
        seed = controls.seed()
    return lab.random_digits(length, seed)


# ------------------------------------------------------------------ sections
def curves_section() -> dict | None:
    st.header(t(f"{NS}.curves_title"))
    data = curves()
    if models.unavailable("curves"):
        return None
    if "reverse" not in data:
        anatomy.problem(f"{NS}.err_no_curves")
        return None
    per_char = st.toggle(t(f"{NS}.per_char"), value=False, key="per_char", bind="query-params",
                         help=t(f"{NS}.per_char_help"))
    metric = "char" if per_char else "exact"
    anatomy.show_chart(bc.accuracy_curves(data, metric, names=names(), title=t(f"{NS}.curves_chart_{metric}"),
                                          x_title=t(f"{NS}.length_axis"), y_title=t(f"{NS}.acc_{metric}")),
                       key="curves")
    rev = data["reverse"]
    st.caption(t(f"{NS}.curves_caption", n=rev["n_per_length"], seed=data.get("eval_seed", "—")))
    dates = data.get("dates", {})
    if "attention" in dates and "no_attention" in dates:
        st.caption(t(f"{NS}.dates_caption", at=fmt.pct(dates["attention"]["exact"]),
                     no=fmt.pct(dates["no_attention"]["exact"])))
    return rev


def answers_section(digits: str, res: lab.Answers) -> dict:
    """Both answers marked against the reversal, and the attention model's alignment."""
    if not REVERSE_MIN_LEN <= len(digits) <= REVERSE_MAX_LEN:
        anatomy.problem(f"{NS}.warn_range", n=len(digits), lo=REVERSE_MIN_LEN, hi=REVERSE_MAX_LEN)
    target = digits[::-1]
    said = res._asdict()
    marks = {k: [m.ok for m in lab.compare_chars(said[k], target)] for k in MODELS}
    rows = [(t(f"{NS}.line_input"), digits, None), (t(f"{NS}.line_target"), target, None),
            (t(f"{NS}.line_no_attention"), res.no_attention, marks["no_attention"]),
            (t(f"{NS}.line_attention"), res.attention, marks["attention"])]
    status = {k: t(f"{NS}.status_{k}") for k in ("reference", "right", "wrong", "missing")}
    anatomy.show_chart(bc.tapes(rows, status_names=status, x_title=t(f"{NS}.position_axis")), key="tapes")
    verdict = {k: t(f"{NS}.exact_yes") if said[k] == target else t(f"{NS}.exact_no") for k in MODELS}
    right = {k: sum(marks[k][:len(target)]) for k in MODELS}
    # the verdict, the next heading and its text in one element: fewer messages per rerun of the fragment
    st.markdown(t(f"{NS}.verdict", no=verdict["no_attention"], at=verdict["attention"], k_no=right["no_attention"],
                  k_at=right["attention"], n=len(target))
                + f"\n\n### {t(f'{NS}.align_title')}\n\n{lesson_text(f'{NS}/alignment')}")

    w = res.alignment
    # each digit with its position as a subscript ("6₁ 6₂"): readable where "6·0 6·1" was not, and unique
    out_labels, in_labels = positioned(res.attention), positioned(digits)
    if not out_labels:                                   # the model stopped at once: no row to draw
        st.caption(t(f"{NS}.empty_answer"))
        return {"marks": marks, "right": right}
    anatomy.show_matrix(charts.attention_heatmap(
        w, out_labels, in_labels, title=t(f"{NS}.align_chart", n=len(digits)), x_title=t(f"{NS}.input_axis"),
        y_title=t(f"{NS}.output_axis"), selectable=False),
        w, out_labels, in_labels, key="align", selectable=False, file_name="reversal_alignment.csv")
    return {"marks": marks, "right": right}


def mirror_offsets(w: np.ndarray, n: int) -> np.ndarray:
    """For each output row i (i < n): position of its largest weight minus n - 1 - i, the input digit
    it copies (0 = on the anti-diagonal, +1 = one to the right)."""
    rows = min(w.shape[0], n)
    return w[:rows].argmax(-1) - (n - 1 - np.arange(rows))


def diagram_section(digits: str, res: lab.Answers) -> int:
    """The step slider and both diagrams at that step (the last step of a shorter answer); the heading and the
    lesson above are drawn in the full run."""
    out = res.attention
    m = max(len(out), 1)
    step = st.slider(t(f"{NS}.step"), 1, MAX_LEN + 5, 1, key="dec_step", bind="query-params", help=t(f"{NS}.step_help"))
    step = min(step, m) - 1
    hidden = model(MODELS["attention"]).config["hidden_dim"]
    common = dict(encoder_title=t(f"{NS}.encoder"), decoder_title=t(f"{NS}.decoder"),
                  weight_title=t("common.weight"))
    plain = res.no_attention
    anatomy.show_chart(bc.architecture(digits, plain, len(plain),
                                       title=title_lines(t(f"{NS}.arch_no", note=2 * hidden)), **common),
                       key="arch_no")
    weights = res.alignment[step] if len(out) else None
    # the title stays the same for every new string of this length (the character written is in the caption):
    # the browser then swaps the diagram's data instead of rebuilding the chart (the redraw budget, docs/performance.md)
    anatomy.show_chart(bc.architecture(digits, out, step, weights, **common,
                                       title=title_lines(t(f"{NS}.arch_at", t=step + 1,
                                                           big=fmt.count(len(digits) * hidden)))), key="arch_at")
    writing = t(f"{NS}.arch_writing", t=step + 1, ch=anatomy.md_escape(out[step])) if out else ""
    st.caption(writing + t(f"{NS}.arch_caption"))
    return step


def check_section(digits: str) -> dict[str, lab.LengthCheck] | None:
    """Many fresh strings of this length, on request (kept for the session); the heading and the hint above the
    button are drawn in the full run."""
    length = len(digits)
    seed = int(st.session_state.get("seed", 0) or 0)
    done = st.session_state.setdefault("_bn_checked", set())
    if length > MAX_LEN:
        return None
    if st.button(t(f"{NS}.check_button", n=CHECK_N, length=length), key="check", icon=":material/fact_check:"):
        done.add((length, seed))
    if (length, seed) not in done:
        return None
    res = check_many(length, seed)
    by_pos = {k: res[k].by_position for k in MODELS}
    anatomy.show_chart(bc.accuracy_by_position(by_pos, names=names(), title=title_lines(t(f"{NS}.pos_chart", n=CHECK_N,
                                                                                           length=length)),
                                               x_title=t(f"{NS}.written_axis"), y_title=t(f"{NS}.share_right")),
                       key="pos")
    st.caption(t(f"{NS}.check_caption", n=CHECK_N, length=length,
                 ex_no=fmt.pct(res["no_attention"].exact), ex_at=fmt.pct(res["attention"].exact),
                 ch_no=fmt.pct(res["no_attention"].char), ch_at=fmt.pct(res["attention"].char)))
    return res


def notices(digits: str, res: lab.Answers, marked: dict, rev: dict | None,
            checked: dict[str, lab.LengthCheck] | None) -> None:
    """What to notice: the list of ``anatomy.notice`` under its heading, which is drawn in the full run (a new
    string re-sends only the list)."""
    n = len(digits)
    hidden = model(MODELS["attention"]).config["hidden_dim"]
    items = []
    if rev is not None:
        lengths, no, at = rev["lengths"], rev["no_attention"]["exact"], rev["attention"]["exact"]
        below = next((L for L, a in zip(lengths, no) if a < 0.5), None)
        items.append(t(f"{NS}.notice_curves", lo=lengths[0], hi=lengths[-1], a_lo=fmt.pct(no[0]),
                       a_hi=fmt.pct(no[-1]), b_min=fmt.pct(min(at)), half=below if below is not None else "—"))
    items.append(t(f"{NS}.notice_example", n=n, k_no=marked["right"]["no_attention"],
                   k_at=marked["right"]["attention"]))
    items.append(t(f"{NS}.notice_note", note=2 * hidden, n=n, big=fmt.count(n * hidden), hidden=hidden))
    off = mirror_offsets(res.alignment, n)
    if len(off):
        items.append(t(f"{NS}.notice_mirror", share=fmt.pct(float((np.abs(off) <= 1).mean())),
                       peak=fmt.fixed(float(res.alignment.max(-1).mean()))))
        exact, right = float((off == 0).mean()), float((off == 1).mean())
        if right > exact:
            items.append(t(f"{NS}.notice_shift", exact=fmt.pct(exact), right=fmt.pct(right)))
    if checked is not None:
        pos = checked["no_attention"].by_position
        worst = int(np.argmin(pos))
        items.append(t(f"{NS}.notice_positions", first=fmt.pct(pos[0]), last=fmt.pct(pos[-1]), worst=worst + 1,
                       w=fmt.pct(pos[worst]), n=n))
    anatomy.notice_items(items)


@cache_data(max_entries=2, max_bytes=1 * MB)
def exercise_numbers() -> tuple[dict, int]:
    """The three thirds' accuracies, formatted, and the answer the data gives: the index of the best third
    (options a, b, c are the first, middle and last digits written)."""
    r = lab.reverse_check(model(MODELS["no_attention"]).model, 30, CHECK_N, 0)
    third = 10
    parts = [float(r.by_position[:third].mean()), float(r.by_position[third:-third].mean()),
             float(r.by_position[-third:].mean())]
    return dict(zip(("first", "middle", "last"), map(fmt.pct, parts))), parts.index(max(parts))


def pitfall_demo() -> None:
    long = lab.random_digits(30, 0)
    r = tutorial_batch(long)
    for kind in ("no_attention", "attention"):
        st.markdown(t(f"{NS}.pit_{kind}", short=PITFALL_SHORT, alone=r[kind].alone,
                      batched=anatomy.md_escape(r[kind].batched) or "—", n=len(long)))
    if r["attention"].pad_mass is not None:
        st.caption(t(f"{NS}.pit_pad_mass", mass=fmt.pct(r["attention"].pad_mass)))


class Slots(NamedTuple):
    """Containers drawn in the full run (each in its presenter step, after that step's static heading and lesson);
    the example's fragment fills them on each of its reruns."""
    controls: DeltaGenerator       # the controls' row: the length and the seed
    answers: DeltaGenerator
    diagram: DeltaGenerator
    check: DeltaGenerator


"""Bahdanau alignment: a trained attention Seq2Seq model normalises dates typed in English or Chinese,
and its attention weights show which input characters each output character was read from.

First tutorial, sections 3.2 and 4.1 (additive attention, v^T tanh(W_q q + W_k k)) inside the
Seq2Seq decoder of section 2. Order: the question (where does the model look for the century?) -> the
learner's date (or the gallery of supported forms) -> the answer, checked -> the alignment heatmap (click a
row) -> what to notice -> one date in several forms side by side -> the padding pitfall. The date and what it
drives are one st.fragment: a new date redraws only them (the redraw budget, docs/performance.md).
"""
from __future__ import annotations

import datetime as dt

import streamlit as st

from attention_core.labs import alignment as lab
from attention_core.models import seq2seq
from attention_core.models.tasks import DATE_FORMAT_IDS, DATE_MAX, DATE_MIN, MAX_DATE_INPUT, normalize_date_text
from serving.cache import MB, cache_data
from ui import alignment_charts as ac
from ui import anatomy, charts, controls, models, presenter
from ui import format as fmt
from ui.i18n import lesson as lesson_text
from ui.i18n import t
from ui.models import curves, model

NS = "alignment"
GALLERY_DATE = dt.date(2017, 3, 5)
EXERCISE_INPUT = "5 mar 17"
PITFALL_PARTNER = "wednesday, september 27th 2017"       # a long date to batch with (the tutorial's way)
MAX_LEN = 12                                              # decoding steps: "YYYY-MM-DD" + <eos> + 1
PARTS = {"year": range(0, 4), "month": range(5, 7), "day": range(8, 10)}  # rows of "YYYY-MM-DD"
# the forms, as patterns that read the same in both languages (the URL keeps them)
PATTERNS = {
    "en_mdy_long": "Month D, YYYY", "en_dmy_long": "D Month YYYY", "en_mdy_abbr": "Mon D, YYYY",
    "en_dmy_abbr_yy": "D Mon YY", "en_weekday_ordinal": "Weekday, Month Dth YYYY",
    "en_ordinal_of": "the Dth of Month YYYY", "en_weekday_abbr": "Wkd D Mon YYYY",
    "num_ymd_slash": "YYYY/MM/DD", "num_ymd_dot": "YYYY.M.D", "num_compact": "YYYYMMDD",
    "zh_ymd": "YYYY年M月D日", "zh_ymd_padded": "YYYY年MM月DD日", "zh_ymd_hao": "YYYY年M月D号",
    "zh_numerals": "YYYY年M月D日 · 〇一二三", "zh_yy": "YY年M月D日", "zh_weekday": "YYYY年M月D日星期W",
    "zh_zhou": "YYYY年M月D日(周W)",
}
DEFAULT_FORMS = ("en_mdy_long", "en_dmy_abbr_yy", "num_ymd_slash", "zh_numerals")
MAX_FORMS = 6
# one equation a row (a phone is 358 px wide); the thin space: KaTeX's last column overhangs its box by 2 px
FORMULA = (r"\begin{gathered}e_{tj} = v^{\top}\tanh\big(W_q\, s_{t-1} + W_k\, h_j\big)\\ "
           r"\alpha_{tj} = \frac{\exp(e_{tj})}{\sum_{k=1}^{n}\exp(e_{tk})},\qquad "
           r"c_t = \sum_{j=1}^{n} \alpha_{tj}\, h_j\end{gathered}\,")
assert set(PATTERNS) == set(DATE_FORMAT_IDS)


# ------------------------------------------------------------------ models and cached computations
@cache_data(max_entries=256, max_bytes=4 * MB)
def read(text: str) -> lab.DateReading:
    """The attention model's answer and alignment for one normalised input, and the plain model's answer."""
    return lab.read_date(model("dates"), model("dates_noattn"), text, MAX_LEN)


@cache_data(max_entries=32, max_bytes=4 * MB)
def read_forms(date: dt.date, forms: tuple[str, ...]) -> list[lab.FormReading]:
    return lab.read_forms(model("dates"), date, forms, MAX_LEN)


@cache_data(max_entries=64, max_bytes=2 * MB)
def tutorial_batch(text: str) -> lab.BatchedDate:
    return lab.batched_as_tutorial(model("dates"), text, PITFALL_PARTNER, MAX_LEN)


# ------------------------------------------------------------------ helpers
def chars(text: str) -> list[str]:
    return ac.visible_chars(text)


def quoted(items: list[str], limit: int = 8) -> str:
    shown = t(f"{NS}.sep").join(t("common.quoted", text=anatomy.md_escape(c))
                                for c in ac.visible_chars("".join(items[:limit])))
    return shown + ("…" if len(items) > limit else "")


def load_form(fmt: str) -> None:
    """Gallery click: put the form's example into the (URL-bound) text box."""
    st.session_state["date"] = dict(lab.date_forms(GALLERY_DATE, [fmt]))[fmt]


def on_gallery() -> None:
    picked = st.session_state.get("gallery")
    if picked in PATTERNS:
        load_form(picked)
    st.session_state["gallery"] = None


def facts() -> None:
    m = model("dates")
    ev = curves().get("dates", {}).get("attention") or m.meta.get("eval", {})
    by = ev.get("by_lang", {})
    params = sum(p.numel() for p in m.model.parameters())
    st.caption(t(f"{NS}.facts", hidden=m.config["hidden_dim"], params=fmt.count(params),
                 steps=m.meta["recipe"]["steps"], secs=fmt.fixed(m.meta["train_seconds"], 0), n=ev.get("n", "—"),
                 **{k: fmt.pct(by.get(k, float("nan")), 1) for k in ("en", "zh", "num")}, forms=len(PATTERNS)))


def date_input() -> str | None:
    """The learner's date, normalised; None after a message."""
    # the gallery writes the box's value through session state: then the box gets no default of its own
    default = {} if "date" in st.session_state else {"value": t(f"{NS}.default_date")}
    typed = st.text_input(t(f"{NS}.date"), key="date", bind="query-params", max_chars=400,
                          help=t(f"{NS}.date_help", max=MAX_DATE_INPUT), **default)
    st.pills(t(f"{NS}.gallery"), list(PATTERNS), format_func=lambda f: dict(lab.date_forms(GALLERY_DATE, [f]))[f],
             key="gallery", on_change=on_gallery, help=t(f"{NS}.gallery_help"))
    check = lab.check_date_text(typed, MAX_DATE_INPUT)
    if check.problem is not None:
        fields = {"long": {"n": len(check.text), "max": MAX_DATE_INPUT}, "unknown": {"chars": quoted(check.bad)}}
        anatomy.problem(f"{NS}.err_{check.problem}", **fields.get(check.problem, {}))
        return None
    return check.text


# ------------------------------------------------------------------ sections
def answer_section(text: str, r: lab.DateReading) -> None:
    out = r.output
    c1, c2 = st.columns([1, 2])
    c1.metric(t(f"{NS}.answer"), out or "—")
    with c2:
        if r.form is not None:
            st.success(t(f"{NS}.verified", out=out, form=PATTERNS[r.form]), icon=":material/check_circle:")
        elif lab.parse_iso(out) is None:
            st.warning(t(f"{NS}.not_a_date", out=anatomy.md_escape(out) or "—"), icon=":material/help:")
        else:
            st.info(t(f"{NS}.unconfirmed", out=out), icon=":material/help:")
        if r.plain is not None:
            st.caption(t(f"{NS}.plain_answer", out=anatomy.md_escape(r.plain) or "—"))
    if text != st.session_state.get("date", ""):
        st.caption(t(f"{NS}.normalised", text=anatomy.md_escape(text)))


def default_row(out: str) -> int:
    """The month's last digit (row 6 of YYYY-MM-DD) when the answer has one, else the first row."""
    return 6 if len(out) > 6 else 0


def heatmap_section(text: str, r: lab.DateReading) -> int:
    out, w = r.output, r.weights
    rows, cols = list(out), chars(text)
    st.subheader(t(f"{NS}.map_title"))
    selected = controls.kept_row("row_map", len(rows))          # no fading until a click (kept in the URL)
    picked = anatomy.show_matrix(charts.attention_heatmap(
        w, rows, cols, title=t(f"{NS}.map_chart", n_out=len(rows), n_in=len(cols)), x_title=t(f"{NS}.input_axis"),
        y_title=t(f"{NS}.output_axis"), selected_row=selected,
        height=28 * len(rows) + 150), w, rows, cols, key="map", file_name="date_alignment.csv")
    row = controls.keep_row("row_map", picked, len(rows), default_row(out))
    st.caption(t(f"{NS}.map_caption"))
    labels = ac.unique(rows)
    best = int(w[row].argmax())
    anatomy.show_chart(charts.bars(
        w[row], cols, value_title=t("common.weight"), label_title=t(f"{NS}.input_axis"), highlight=best,
        height=250, title=t(f"{NS}.row_chart", ch=labels[row], t=row + 1)), key="row")
    st.dataframe(ac.reading_table(w, out, text, t(f"{NS}.col_out"), t(f"{NS}.col_reads"), t(f"{NS}.col_weight")),
                 hide_index=True, width="stretch")
    return row


def forms_section() -> tuple[dt.date, list[lab.FormReading]]:
    st.header(t(f"{NS}.forms_title"))
    st.markdown(lesson_text(f"{NS}/forms"))
    c1, c2 = st.columns([1, 3])
    day = c1.date_input(t(f"{NS}.cmp_date"), value=GALLERY_DATE, min_value=DATE_MIN, max_value=DATE_MAX,
                        key="day", bind="query-params")
    day = day if isinstance(day, dt.date) else GALLERY_DATE
    by_label = {v: k for k, v in PATTERNS.items()}
    controls.cap_selection("forms", MAX_FORMS)
    chosen = c2.multiselect(t(f"{NS}.cmp_forms"), list(PATTERNS.values()),
                            default=[PATTERNS[f] for f in DEFAULT_FORMS], max_selections=MAX_FORMS, key="forms",
                            bind="query-params", help=t(f"{NS}.cmp_forms_help", max=MAX_FORMS),
                            wrap=True)                      # a phone: the chosen forms wrap, no sideways scroll
    forms = tuple(by_label[c] for c in chosen if c in by_label)
    if not forms:
        anatomy.problem(f"{NS}.err_no_forms")
        return day, []
    res = read_forms(day, forms)
    cols = st.columns(2)
    for i, r in enumerate(res):
        with cols[i % 2]:
            # one title: ui.charts shrinks a long title to the chart's width and wraps a very long one
            anatomy.show_chart(charts.attention_heatmap(
                r.weights, list(r.output), chars(r.text), show_numbers=False, selectable=False,
                title=f"{PATTERNS[r.form]} · {t(f'{NS}.form_chart_io', text=r.text, out=r.output)}",
                x_title=t(f"{NS}.input_axis"), y_title=t(f"{NS}.output_axis"), height=340),
                key=f"form_{r.form}")
    st.markdown(f"**{t(f'{NS}.moves_title')}**")
    moves = ac.moves_table(res, PARTS, {k: t(f"{NS}.part_{k}") for k in PARTS}, PATTERNS, t(f"{NS}.col_part"),
                           t(f"{NS}.col_form"))
    st.table(moves.set_index(t(f"{NS}.col_part")).T)     # a form a row, a part a column: fits a phone
    return day, res


def notices(text: str, r: lab.DateReading, row: int) -> None:
    """What to notice in the learner's date: its heatmap, the clicked row, the parts, the peaks."""
    out, w = r.output, r.weights
    cols, labels = chars(text), ac.unique(list(out))
    items = [t(f"{NS}.notice_rows", n_out=len(out), n_in=len(cols), err=fmt.sum_error(w.sum(1)))]
    best = int(w[row].argmax())
    items.append(t(f"{NS}.notice_row", ch=labels[row], src=anatomy.md_escape(ac.unique(cols)[best]),
                   w=fmt.fixed(w[row, best]), uniform=fmt.fixed(1 / len(cols))))
    if len(out) == 10:
        focus = lab.part_focus(w, PARTS)
        items.append(t(f"{NS}.notice_parts", **{k: quoted([text[j] for j in focus[k][0]]) for k in PARTS},
                       **{f"{k}_w": fmt.fixed(focus[k][1]) for k in PARTS}))
    peak = w.max(1)
    items.append(t(f"{NS}.notice_peaks", mean=fmt.fixed(peak.mean()), low=labels[int(peak.argmin())],
                   low_w=fmt.fixed(peak.min())))
    anatomy.notice(items)


def forms_notices(forms: list[lab.FormReading]) -> None:
    """What to notice across the forms: where the month digit reads in each (nothing to say for fewer than two
    complete answers)."""
    items = []
    month = [f for f in forms if len(f.output) == 10]
    if len(month) >= 2:
        reads = [f"{PATTERNS[f.form]} → "
                 + t("common.quoted", text=anatomy.md_escape(chars(f.text)[int(f.weights[6].argmax())])) for f in month]
        items.append(t(f"{NS}.notice_moves", reads=t(f"{NS}.sep").join(reads)))
        for f in month:
            ch = f.text[int(f.weights[6].argmax())]
            if "a" <= ch <= "z":
                items.append(t(f"{NS}.notice_letter", text=anatomy.md_escape(f.text), ch=ch))
                break
    if items:
        anatomy.notice(items)


@cache_data(max_entries=2, max_bytes=1 * MB)
def exercise_facts() -> dict:
    """Where the model looks when it writes the century of "5 mar 17": the answer of the exercise."""
    r = lab.read_date(model("dates"), None, EXERCISE_INPUT, MAX_LEN)
    w0 = r.weights[0]
    regions = {"day": [0], "month": [2, 3, 4], "year": [6, 7]}
    mass = {k: float(w0[v].sum()) for k, v in regions.items()}
    answer = ["day", "month", "year"].index(max(mass, key=mass.get)) if w0.max() >= 0.3 else 3
    return {"answer": answer, "out": r.output, **{k: fmt.fixed(v) for k, v in mass.items()}}


PIT_KEY, PIT_SHOWN = "al_pit", "_al_pit_text"      # the demo's expander (?al_pit=true opens it); the date it ran


def pitfall_demo(text: str | None) -> None:
    st.session_state[PIT_SHOWN] = text
    text = text or normalize_date_text(t(f"{NS}.default_date"))
    alone = read(text).output
    if len(text) >= len(PITFALL_PARTNER):
        st.caption(t(f"{NS}.pit_too_long"))
        return
    r = tutorial_batch(text)
    st.markdown(t(f"{NS}.pit_result", text=anatomy.md_escape(text), alone=alone,
                  batched=anatomy.md_escape(r.output) or "—", partner=PITFALL_PARTNER, pad=fmt.pct(r.pad)))
    if r.output != alone:
        st.error(t(f"{NS}.pit_changed"), icon=":material/error:")
    else:
        st.caption(t(f"{NS}.pit_same"))


def date_fragment(lesson: presenter.Lesson) -> None:
    """The learner's date and everything it drives (answer, alignment, row, what to notice), as a fragment
    (``lesson.part``): a new date reruns and redraws only this part. The pitfall's demo batches this date too: while
    it is open (it ran with another date), a new date reruns the whole page so the demo follows."""
    with lesson.step("controls", keep=True):
        text = date_input()
    if st.session_state.get(PIT_SHOWN, text) != text:    # the open demo ran with another date: rerun the page
        st.session_state[PIT_SHOWN] = text               # (once: the full run finds them equal)
        st.rerun()
    if text is None:
        return
    res = read(text)
    # the additive attention that ran: W_k h_j once per sentence, then v^T tanh(W_q s + W_k h_j) at each step
    # (AdditiveAttention.forward computes the same, but decoding takes this faster path, so it never runs here)
    with lesson.step("answer", shows=(seq2seq.AttentionDecoder.project_keys, seq2seq.AttentionDecoder.attend,
                                      seq2seq.AttentionDecoder.step, seq2seq.translate)):
        answer_section(text, res)
        if not res.output:
            return
        row = heatmap_section(text, res)
    with lesson.step("notice"):
        notices(text, res, row)


# ------------------------------------------------------------------ the page
anatomy.header(NS)
lesson = presenter.Lesson(NS)          # presenter mode (?present=1) shows one step at a time
with lesson.step("intuition"):
    anatomy.intuition(NS)
    st.markdown(lesson_text(f"{NS}/decoder"))
    anatomy.formula(FORMULA, t(f"{NS}.formula_caption"))

if not models.unavailable("dates"):
    models.unavailable("dates_noattn")    # the page runs without it (no comparison), and says why
    with lesson.step("question"):          # before the answer, the heatmap and the forms that show where it looks
        facts()
        ex = exercise_facts()
        anatomy.exercise("al_ex", t(f"{NS}.ex_question", text=EXERCISE_INPUT),
                         [t(f"{NS}.ex_{k}") for k in ("day", "month", "year", "even")], ex["answer"],
                         t(f"{NS}.ex_explain", text=EXERCISE_INPUT,
                           **{k: ex[k] for k in ("out", "day", "month", "year")}))
    lesson.part(date_fragment, lesson)
    with lesson.step("forms"):
        _, forms = forms_section()
        forms_notices(forms)
    with lesson.step("pitfall"):
        check = lab.check_date_text(str(st.session_state.get("date", "")), MAX_DATE_INPUT)
        text = check.text if check.problem is None else None      # the date the fragment above read
        if not anatomy.pitfall(t(f"{NS}.pit_title"), t(f"{NS}.pit_body"), code=t(f"{NS}.pit_code"),
                               demo=lambda: pitfall_demo(text), key=PIT_KEY):
            st.session_state.pop(PIT_SHOWN, None)
lesson.end()          # and "Show the code": what the steps declared

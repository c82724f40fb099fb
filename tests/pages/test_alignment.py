"""The alignment page in AppTest: the heatmap is the shipped date model's alignment (recomputed here,
rows sum to 1), the answer is checked against the input, the gallery loads every kind of form, one
date in several forms gives the model's alignments, unknown characters and overlong input are named
in the learner's language, and the URL reproduces the view."""
import datetime as dt
import re

import numpy as np
import pytest

from attention_core.labs.alignment import date_forms, part_focus
from attention_core.models.recipes import load_model
from attention_core.models.seq2seq import decode_as_tutorial, translate
from attention_core.models.tasks import normalize_date_text
from tests import apptest_util as au
from ui.alignment_charts import visible_chars
from ui.anatomy import md_escape
from ui.i18n import catalog

EN, ZH = catalog("en"), catalog("zh")
M = load_model("dates")


def oracle(text: str):
    r = translate(M.model, [normalize_date_text(text)], M.src_vocab, M.tgt_vocab, max_len=12)[0]
    return r.output, r.alignment.numpy()


def frame(chart):
    return au.chart_data(chart)["data"]


def title_of(chart):
    """A chart's title; a title of several lines as one text, its lines joined by newlines."""
    got = au.chart_spec(chart).get("title")
    got = got.get("text") if isinstance(got, dict) else got
    return "\n".join(got) if isinstance(got, list) else got


def titled(at, title: str):
    found = [c for c in au.charts(at) if title_of(c) == title]
    assert found, f"no chart titled {title!r}: {[title_of(c) for c in au.charts(at)]}"
    return found[0]


def grid(df) -> np.ndarray:
    return df.pivot(index="query_pos", columns="key_pos", values="value").to_numpy()


def notices(at) -> str:
    return "\n".join(m.value for m in at.markdown if m.value.startswith("- "))


def warnings(at) -> str:
    return "\n".join(w.value for w in at.warning)


# ---------------------------------------------------------------- the default view, both languages
@pytest.mark.parametrize("lang", ["en", "zh"])
def test_heatmap_is_the_models_alignment(lang):
    cat = catalog(lang)
    at = au.open_page("alignment", lang)
    assert au.exceptions(at) == []
    assert cat["alignment.title"] in [x.value for x in at.title]
    text = normalize_date_text(cat["alignment.default_date"])
    out, w = oracle(text)
    assert out == "2017-03-05" and at.metric[0].value == out
    hm = frame(titled(at, cat["alignment.map_chart"].format(n_out=10, n_in=len(text))))
    g = grid(hm)
    assert np.allclose(g.sum(1), 1.0, atol=1e-5)                    # rows sum to 1
    assert np.allclose(g, w, atol=1e-6)                              # and are the model's weights
    labels = list(dict.fromkeys(hm.sort_values("key_pos")["key"]))
    assert [lab.split("·")[0] for lab in labels] == visible_chars(text)
    assert list(dict.fromkeys(hm.sort_values("query_pos")["query"]))[0] == "2"
    # the default drill-down: step 7 (the month's last digit)
    row = frame(titled(at, cat["alignment.row_chart"].format(ch="3", t=7)))
    assert np.allclose(row.sort_values("pos")["value"], w[6], atol=1e-6)
    assert cat["alignment.verified"].split("{")[0] in "\n".join(s.value for s in at.success)


def test_clicked_row_and_notices_quote_the_numbers():
    at = au.open_page("alignment", "en", {"row_map": "2"})                # a click on row 3 keeps ?row_map=2
    out, w = oracle(EN["alignment.default_date"])
    row = frame(titled(at, EN["alignment.row_chart"].format(ch="1", t=3)))
    assert np.allclose(row.sort_values("pos")["value"], w[2], atol=1e-6)
    text = notices(at)
    best = int(w[2].argmax())
    m = re.search(au.label_pattern("alignment.notice_row", ch="1", w=r"[\d.]+", src=".+?"), text)
    assert m and float(m.group("w")) == pytest.approx(w[2, best], abs=0.005)
    assert m.group("src").split("·")[0] == visible_chars(normalize_date_text(EN["alignment.default_date"]))[best]
    m = re.search(au.label_pattern("alignment.notice_peaks", mean=r"[\d.]+"), text)
    assert m and float(m.group("mean")) == pytest.approx(w.max(1).mean(), abs=0.005)
    table = at.dataframe[0].value
    assert table[EN["alignment.col_weight"]].tolist() == pytest.approx(np.round(w.max(1), 3).tolist())


# ---------------------------------------------------------------- the gallery and the forms
@pytest.mark.parametrize("fmt", ["en_weekday_ordinal", "zh_numerals", "num_compact", "zh_zhou"])
def test_gallery_loads_a_form_and_the_answer_is_verified(fmt):
    at = au.open_page("alignment", "zh")
    gallery = next(b for b in at.get("button_group") if b.key == "gallery")
    gallery.set_value(fmt).run()
    assert au.exceptions(at) == []
    text = dict(date_forms(dt.date(2017, 3, 5), [fmt]))[fmt]
    assert at.text_input(key="date").value == text
    assert next(b for b in at.get("button_group") if b.key == "gallery").value is None   # ready for another
    out, w = oracle(text)
    assert at.metric[0].value == out == "2017-03-05"
    assert np.allclose(grid(frame(titled(at, ZH["alignment.map_chart"].format(n_out=10, n_in=len(text))))), w,
                       atol=1e-6)
    assert at.success                                                   # "right: ... the form ..."


def test_one_date_in_several_forms():
    at = au.open_page("alignment", "en", params={"day": "1998-11-23"})
    assert au.exceptions(at) == [] and at.date_input(key="day").value == dt.date(1998, 11, 23)
    patterns = {"en_mdy_long": "Month D, YYYY", "en_dmy_abbr_yy": "D Mon YY", "num_ymd_slash": "YYYY/MM/DD",
                "zh_numerals": "YYYY年M月D日 · 〇一二三"}
    forms = tuple(patterns)
    rendered = date_forms(dt.date(1998, 11, 23), forms)
    outs = translate(M.model, [s for _, s in rendered], M.src_vocab, M.tgt_vocab, max_len=12)
    spans = {"year": range(0, 4), "month": range(5, 7), "day": range(8, 10)}
    moves = at.table[0].value                 # a form a row (fits a phone)
    for (fmt, text), o in zip(rendered, outs):
        charts_ = [c for c in au.charts(at) if f"“{text}” → {o.output}" in (title_of(c) or "")]
        assert len(charts_) == 1
        # the pattern, then the date and the answer (ui.charts shrinks or wraps it to the chart's width)
        assert title_of(charts_[0]).replace("\n", " ") == f"{patterns[fmt]} · “{text}” → {o.output}"
        g = grid(frame(charts_[0]))
        assert np.allclose(g, o.alignment.numpy(), atol=1e-6) and np.allclose(g.sum(1), 1, atol=1e-5)
        column = next(c for c in moves.index if c.endswith(f": {text}"))
        focus = part_focus(o.alignment.numpy(), spans)
        want = [" ".join(visible_chars(text)[j] for j in focus[k][0]) + f"  ({focus[k][1]:.2f})" for k in spans]
        assert moves.loc[column].tolist() == want
    at.multiselect(key="forms").set_value([]).run()
    assert au.exceptions(at) == [] and EN["alignment.err_no_forms"] in warnings(at)


# ---------------------------------------------------------------- bad input
@pytest.mark.parametrize("text, expect", [
    ("5 März 2017", "«ä», «z»"),
    ("😀 5 mar 17", "«😀»"),
    ("<script>alert(1)</script>", "«\\<», «\\>»"),
    ("2017年3月5日 你好", "«你», «好»"),
])
def test_unknown_characters_are_named(text, expect):
    at = au.open_page("alignment", "en")
    at.text_input(key="date").set_value(text).run()
    assert au.exceptions(at) == []
    shown = warnings(at)
    assert au.shows_label(shown, "alignment.err_unknown") and expect in shown
    assert not [c for c in au.charts(at) if (title_of(c) or "").startswith(au.label_parts("alignment.map_chart")[0])]


def test_unknown_characters_in_chinese():
    at = au.open_page("alignment", "zh", params={"date": "2017年3月5日 😀"})
    assert au.exceptions(at) == []
    assert "模型从没见过 " + catalog("zh")["common.quoted"].format(text="😀") in warnings(at)


@pytest.mark.parametrize("text, key, fields", [
    ("", "err_empty", {}),
    ("   ", "err_empty", {}),
    ("1" * 41, "err_long", {"n": 41, "max": 40}),
    ("1" * 300, "err_long", {"n": 300, "max": 40}),
])
def test_empty_and_overlong_input(text, key, fields):
    at = au.open_page("alignment", "en")
    at.text_input(key="date").set_value(text).run()
    assert au.exceptions(at) == []
    assert EN[f"alignment.{key}"].format(**fields) in warnings(at)


def test_text_that_is_not_a_date_gets_an_honest_message():
    at = au.open_page("alignment", "en")
    at.text_input(key="date").set_value("the moon").run()           # every character is known
    assert au.exceptions(at) == []
    out, w = oracle("the moon")
    assert at.metric[0].value == (out or "—")
    shown = au.all_text(at)
    assert EN["alignment.unconfirmed"].format(out=out) in shown or au.shows_label(shown, "alignment.not_a_date")


# ---------------------------------------------------------------- URL, exercise, pitfall
def test_url_reproduces_date_and_forms():
    at = au.open_page("alignment", "zh", params={"date": "5 MAR 17", "day": "2049-12-31"})
    assert au.exceptions(at) == []
    out, w = oracle("5 mar 17")
    assert at.metric[0].value == out
    assert np.allclose(grid(frame(titled(at, ZH["alignment.map_chart"].format(n_out=10, n_in=8)))), w, atol=1e-6)
    assert any("→ 2049-12-31" in (title_of(c) or "") for c in au.charts(at))


def test_exercise_answer_is_where_the_model_looks():
    _, w = oracle("5 mar 17")
    mass = {"day": w[0, [0]].sum(), "month": w[0, [2, 3, 4]].sum(), "year": w[0, [6, 7]].sum()}
    answer = ["day", "month", "year"].index(max(mass, key=mass.get)) if w[0].max() >= 0.3 else 3
    at = au.open_page("alignment", "en")
    at.radio(key="al_ex_guess").set_value(answer).run()
    at.button(key="al_ex_reveal").click().run()
    assert at.success and au.shows_label(au.all_text(at), "alignment.ex_explain", year=f"{mass['year']:.2f}")


def test_pitfall_batches_the_learners_date_the_tutorials_way():
    at = au.open_page("alignment", "en", params={"date": "5 mar 17"})
    assert not au.shows_label(au.all_text(at), "alignment.pit_result")      # the demo runs only when opened
    at = au.open_page("alignment", "en", params={"date": "5 mar 17", "al_pit": "true"})
    batched = decode_as_tutorial(M.model, ["5 mar 17", "wednesday, september 27th 2017"], M.src_vocab,
                                 M.tgt_vocab, 12)[0]
    pad = float(batched.alignment[:, 8:].sum(-1).mean())
    text = au.all_text(at)
    assert au.shows_label(text, "alignment.pit_result", batched=md_escape(batched.output), pad=f"{100 * pad:.0f}%")


def test_more_forms_than_the_multiselect_allows_are_cut_with_a_message():
    """A crash once: a client sending all 17 forms (the multiselect allows 6) raised
    StreamlitSelectionCountExceedsMaxError in the session; now the first 6 are used and the learner is told. 4 s."""
    at = au.open_page("alignment", "en")
    box = at.multiselect(key="forms")
    every = list(box.options)
    assert len(every) == 17 and box.max_selections == 6
    box.set_value(every).run()
    assert au.exceptions(at) == []
    assert EN["common.err_too_many"].format(n=17, max=6) in warnings(at)
    assert at.multiselect(key="forms").value == every[:6]
    assert sum(1 for c in au.charts(at) if " → " in (title_of(c) or "")) >= 6


def test_the_open_pitfall_demo_follows_a_new_date():
    """The date sits in a fragment (the redraw budget); while the pitfall's demo is open, a new date reruns the page
    once so the demo batches the new date (a full run, as AppTest runs, must not rerun again and again). 3 s."""
    at = au.open_page("alignment", "en", params={"al_pit": "true"})
    at.text_input(key="date").set_value("12 jan 99").run(timeout=20)
    assert au.exceptions(at) == []
    shown = au.all_text(at)
    assert au.shows_label(shown, "alignment.pit_result", alone=oracle("12 jan 99")[0]) and "“12 jan 99”" in shown
    assert at.metric[0].value == oracle("12 jan 99")[0]

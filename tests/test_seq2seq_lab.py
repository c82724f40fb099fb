"""labs.bottleneck, labs.alignment, labs.training and the inference helpers of models.seq2seq: marks,
reversal checks, date forms, the tutorial's batching, smoothing — each against a direct computation."""
import datetime as dt
import random

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from attention_core.labs.alignment import (
    date_forms,
    matching_form,
    parse_iso,
    part_focus,
)
from attention_core.labs.bottleneck import (
    char_accuracy,
    clean_digits,
    compare_chars,
    random_digits,
    reverse_check,
)
from attention_core.labs.training import smooth
from attention_core.models.seq2seq import (
    Seq2Seq,
    Seq2SeqConfig,
    decode_as_tutorial,
    translate,
    translate_one,
)
from attention_core.models.tasks import (
    DATE_FORMAT_IDS,
    DATE_FORMATS,
    DATE_SOURCE_VOCAB,
    DATE_TARGET_VOCAB,
    REVERSE_VOCAB,
    make_date_example,
    make_reverse_example,
    normalize_date_text,
)

V = REVERSE_VOCAB


def tiny(attention: bool, seed: int = 0, src=V, tgt=V) -> Seq2Seq:
    torch.manual_seed(seed)
    return Seq2Seq(Seq2SeqConfig(len(src), len(tgt), embed_dim=8, hidden_dim=16, attention=attention,
                                 attn_dim=12)).eval()


# ---------------------------------------------------------------- marks
def test_compare_chars_by_hand():
    assert [m.ok for m in compare_chars("12345", "12045")] == [True, True, False, True, True]
    marks = compare_chars("12", "123")
    assert [(m.expected, m.got, m.ok) for m in marks] == [("1", "1", True), ("2", "2", True), ("3", None, False)]
    marks = compare_chars("1234", "12")
    assert [m.ok for m in marks] == [True, True, False, False] and marks[3].expected is None
    assert compare_chars("", "") == [] and char_accuracy("", "") == 0.0


@given(st.text("0123", max_size=12), st.text("0123", max_size=12))
def test_char_accuracy_is_the_evaluations_definition(out, target):
    direct = sum(a == b for a, b in zip(out, target)) / max(len(target), len(out), 1)
    assert char_accuracy(out, target) == pytest.approx(direct)
    assert len(compare_chars(out, target)) == max(len(out), len(target))


def test_clean_digits():
    assert clean_digits(" 12 34\t5 ") == ("12345", [])
    assert clean_digits("１２３") == ("123", [])                     # full-width digits (NFKC)
    assert clean_digits("12a3😀a<") == ("", ["a", "😀", "<"])
    assert clean_digits("") == ("", [])


def test_random_digits_is_the_task_generator():
    assert random_digits(17, 3) == make_reverse_example(random.Random(3), 17)[0]
    assert len(random_digits(40, 0)) == 40 and random_digits(40, 0) != random_digits(40, 1)


# ---------------------------------------------------------------- reversal check
def test_reverse_check_against_a_direct_loop():
    model = tiny(True)
    got = reverse_check(model, 6, n=20, seed=5)
    rng = random.Random(5)
    pairs = [make_reverse_example(rng, 6) for _ in range(20)]
    outs = [translate(model, [s], V, V, max_len=11)[0].output for s, _ in pairs]
    exact = np.mean([o == t for o, (_, t) in zip(outs, pairs)])
    pos = np.array([[i < len(o) and o[i] == t[i] for i in range(6)] for o, (_, t) in zip(outs, pairs)]).mean(0)
    char = np.mean([sum(a == b for a, b in zip(o, t)) / max(len(o), len(t)) for o, (_, t) in zip(outs, pairs)])
    assert got.length == 6 and got.n == 20
    assert got.exact == pytest.approx(exact) and got.char == pytest.approx(char)
    assert np.allclose(got.by_position, pos)


# ---------------------------------------------------------------- dates
@settings(max_examples=60, deadline=None)
@given(st.integers(0, 2**31), st.sampled_from(DATE_FORMAT_IDS))
def test_every_generated_example_is_recognised(seed, fmt):
    e = make_date_example(random.Random(seed), fmt=fmt)
    found = matching_form(e.source, e.target)
    assert found is not None
    # the format found writes this date exactly as the example (two formats can coincide,
    # e.g. 2017年12月15日 is both zh_ymd and zh_ymd_padded)
    assert dict(date_forms(e.date, [found]))[found] == e.source or any(
        normalize_date_text(f.render(e.date, random.Random(s))) == e.source
        for f in DATE_FORMATS if f.id == found for s in range(20))


def test_matching_form_rejects_wrong_answers_and_non_dates():
    assert matching_form("March 5, 2017", "2017-03-05") == "en_mdy_long"
    assert matching_form("二零一七年三月五日", "2017-03-05") == "zh_numerals"   # the 零 variant
    assert matching_form("2017年3月5日星期天", "2017-03-05") == "zh_weekday"      # the 天 variant
    assert matching_form("March 5, 2017", "2017-03-06") is None
    assert matching_form("March 5, 2017", "2017-3-5") is None
    assert matching_form("hello", "2017-03-05") is None
    assert parse_iso("2017-02-30") is None and parse_iso("2099-01-01") is None
    assert parse_iso("2017-02-28") == dt.date(2017, 2, 28)


def test_date_forms_render_every_format():
    forms = date_forms(dt.date(2017, 3, 5))
    assert [f for f, _ in forms] == list(DATE_FORMAT_IDS)
    d = dict(forms)
    assert d["en_mdy_long"] == "march 5, 2017" and d["zh_ymd"] == "2017年3月5日" and d["num_compact"] == "20170305"
    for fmt, text in forms:
        assert matching_form(text, "2017-03-05") is not None


# ---------------------------------------------------------------- the tutorial's batching
def test_tutorial_batching_equals_translate_without_padding():
    model = tiny(True, src=DATE_SOURCE_VOCAB, tgt=DATE_TARGET_VOCAB)
    texts = ["march 5, 2017", "5 march, 2017"]                        # same length: no pads at all
    mine = decode_as_tutorial(model, texts, DATE_SOURCE_VOCAB, DATE_TARGET_VOCAB, 12)
    ref = translate(model, texts, DATE_SOURCE_VOCAB, DATE_TARGET_VOCAB, max_len=12)
    for a, b in zip(mine, ref):
        assert a.output == b.output
        assert torch.allclose(a.alignment, b.alignment, atol=1e-6)


def test_tutorial_batching_leaks_attention_onto_pads():
    model = tiny(True)
    short, long = "12345", "1234567890123456"
    mine = decode_as_tutorial(model, [short, long], V, V, 10)[0]
    alone = translate_one(model, short, V, V, 10)
    assert mine.alignment.shape[1] == len(long)                        # the padded columns are kept
    assert torch.allclose(mine.alignment.sum(-1), torch.ones(len(mine.output)), atol=1e-5)
    assert float(mine.alignment[:, len(short):].sum(-1).min()) > 0     # every step puts weight on <pad>
    assert alone.alignment.shape[1] == len(short)
    # without attention the context vector is the state after the pads: it differs from the real one
    plain = tiny(False)
    src = torch.tensor([V.encode(list(short)) + [0] * 11])
    _, (h_pad, _) = plain.encoder(src, torch.tensor([16]))
    _, (h_real, _) = plain.encoder(src, torch.tensor([5]))
    assert not torch.allclose(h_pad, h_real)


# ---------------------------------------------------------------- smoothing
@given(st.lists(st.floats(-1e3, 1e3), max_size=40), st.integers(1, 12))
def test_smooth_is_a_trailing_mean(values, window):
    got = smooth(values, window)
    direct = [np.mean(values[max(0, i - window + 1):i + 1]) for i in range(len(values))]
    assert np.allclose(got, direct, atol=1e-6)


def test_smooth_rejects_a_bad_window():
    with pytest.raises(ValueError):
        smooth([1.0], 0)


def test_part_focus_by_hand():
    w = np.array([[0.7, 0.2, 0.1], [0.1, 0.8, 0.1], [0.5, 0.3, 0.2], [0.0, 0.1, 0.9]])
    got = part_focus(w, {"a": [0, 1], "b": [2], "c": [3, 7], "d": [9]})
    assert got["a"] == ([0, 1], pytest.approx(0.75))
    assert got["b"] == ([0], pytest.approx(0.5))
    assert got["c"] == ([2], pytest.approx(0.9))               # rows past the end are skipped
    assert got["d"][0] == [] and np.isnan(got["d"][1])

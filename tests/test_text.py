import torch

from attention_core.text import embed_tokens, projection, tokenize


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

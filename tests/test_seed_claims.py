"""What the pages say about the tutorials' code is true, where a number is involved (issue 11, section 1):
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

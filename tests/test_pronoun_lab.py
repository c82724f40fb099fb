"""labs.pronoun and labs.analysis against independent oracles: the grammar's parser, per-sentence forward passes without
padding, explicit loops over rows, the second tutorial's analyser typed out, and the model's own weights."""
import math

import pytest
import torch

from attention_core.analysis import PATTERNS, classify_heads
from attention_core.labs.analysis import (
    batch_weights,
    head_qk,
    head_stats,
    label_counts,
    seed_analyzer_stats,
    sentence_labels,
    unpadded,
)
from attention_core.labs.pronoun import (
    adjective_ids,
    build_example,
    example_ids,
    flipped,
    fresh_examples,
    prefix_rows,
    profile_of,
    pronoun_profile,
    pronoun_rows,
)
from attention_core.models.pronoun import (
    PronounConfig,
    PronounResolver,
    make_pronoun_batch,
    referent_agreement,
    resolve,
)
from attention_core.models.tasks import PRONOUN_TEMPLATES, PRONOUN_VOCAB, parse_pronoun_sentence, pronoun_text


@pytest.fixture(scope="module")
def model():
    torch.manual_seed(0)
    return PronounResolver(PronounConfig(len(PRONOUN_VOCAB), d_model=32, num_layers=2, num_heads=4, d_ff=64)).eval()


@pytest.fixture(scope="module")
def mixed():
    return fresh_examples(3, 24)           # English and Chinese alternate: lengths 10..13, padding


# ------------------------------------------------------------------ sentences from the grammar
@pytest.mark.parametrize("lang", ["en", "zh"])
def test_build_example_equals_the_parser_for_every_template_and_adjective(lang):
    for t in PRONOUN_TEMPLATES:
        first, second = adjective_ids(t)
        a = t.nouns_a[0][0]
        b = next(n[0] for n in t.nouns_b if n[0] != a)
        for adj in first + second:
            ex = build_example(t.id, lang, a, b, adj)
            parsed = parse_pronoun_sentence(pronoun_text(ex.tokens, lang), lang)
            assert parsed.ok and parsed.example == ex, (t.id, adj)
            assert ex.label == (0 if adj in first else 1)
            assert example_ids(ex) == (a, b, adj)


def test_the_tutorial_sentence_and_its_flip():
    ex = build_example("cross", "en", "animal", "street", "tired")
    assert pronoun_text(ex.tokens, "en") == "The animal didn't cross the street because it was too tired."
    assert ex.referent == 1 and ex.tokens[ex.pronoun] == "it"
    wide = flipped(ex)
    assert wide.adjective == "wide" and wide.label == 1 and wide.tokens[wide.referent] == "street"
    assert [i for i, (x, y) in enumerate(zip(ex.tokens, wide.tokens)) if x != y] == [ex.tokens.index("tired")]
    zh = build_example("cross", "zh", "animal", "street", "tired")
    assert pronoun_text(zh.tokens, "zh") == "动物没有过马路，因为它太累了。"
    assert flipped(zh, "slippery").adjective == "滑"
    with pytest.raises(ValueError):
        flipped(ex, "old")                 # same group: no flip
    with pytest.raises(ValueError):
        build_example("cross", "en", "dog", "dog", "tired")
    with pytest.raises(ValueError):
        build_example("cross", "en", "street", "dog", "tired")   # a place cannot fill the animal slot


def test_fresh_examples_are_seeded_heldout_and_alternate_languages():
    a, b = fresh_examples(5, 10), fresh_examples(5, 10)
    assert a == b and a != fresh_examples(6, 10)
    assert [e.lang for e in a] == ["en", "zh"] * 5
    from attention_core.models.tasks import is_heldout_pair
    for e in a:
        first, second = (e.tokens[i] for i in e.nouns)
        ida, idb, _ = example_ids(e)
        assert is_heldout_pair(e.template, ida, idb)
    assert {e.lang for e in fresh_examples(1, 4, ("zh",))} == {"zh"}


# ------------------------------------------------------------------ the profile from the pronoun
def test_profile_matches_a_per_sentence_loop(model, mixed):
    prof = pronoun_profile(model, mixed, PRONOUN_VOCAB)
    ref = torch.zeros(2, 4)
    oth = torch.zeros(2, 4)
    adj = torch.zeros(2, 4)
    correct = []
    for e in mixed:
        r = resolve(model, e, PRONOUN_VOCAB)                  # unpadded, one sentence
        ref += r.from_pronoun[:, :, e.referent]
        oth += r.from_pronoun[:, :, e.nouns[1 - e.label]]
        adj += r.from_pronoun[:, :, e.tokens.index(e.adjective)]
        correct.append(r.answer == e.label)
    n = len(mixed)
    assert torch.allclose(prof.referent, ref / n, atol=1e-5)
    assert torch.allclose(prof.other, oth / n, atol=1e-5)
    assert torch.allclose(prof.adjective, adj / n, atol=1e-5)
    assert prof.correct.tolist() == correct
    assert prof.accuracy == pytest.approx(sum(correct) / n)


def test_fresh_examples_are_prefix_stable():
    for langs in (("en", "zh"), ("zh",)):
        for split in ("heldout", None):
            long = fresh_examples(11, 50, langs, split=split)
            for b in (1, 7, 49):
                assert fresh_examples(11, b, langs, split=split) == long[:b]


def test_rows_of_chunks_average_to_the_profile_and_agreement_of_the_prefix(model, mixed):
    """Per-sentence rows from separate runs over consecutive chunks, cut to a prefix, give the batch
    means that pronoun_profile and pronoun.referent_agreement compute on that prefix in one run."""
    chunks = [pronoun_rows(model, mixed[i:i + 8], PRONOUN_VOCAB) for i in range(0, len(mixed), 8)]
    for b in (3, 8, 13, 24):
        rows = prefix_rows(chunks, b)
        prof, ref = profile_of(rows), pronoun_profile(model, mixed[:b], PRONOUN_VOCAB)
        for field in ("referent", "other", "adjective"):
            assert torch.allclose(getattr(prof, field), getattr(ref, field), atol=1e-6)
        assert torch.equal(prof.correct, ref.correct)
        agree = referent_agreement(model, mixed[:b], PRONOUN_VOCAB)
        assert torch.equal(rows.agree.float().mean(0), agree.encoder)
        assert torch.allclose(prof.referent, agree.referent, atol=1e-6)
        assert torch.allclose(prof.other, agree.other, atol=1e-6)
    whole = pronoun_rows(model, mixed, PRONOUN_VOCAB)
    w, lengths = batch_weights(model, mixed, PRONOUN_VOCAB)
    assert torch.equal(whole.lengths, lengths) and all(torch.equal(a, c) for a, c in zip(whole.weights, w))


# ------------------------------------------------------------------ the analyser, corrected
def _row_entropy(p: torch.Tensor) -> torch.Tensor:
    """float64 rows -> entropy of each, 0 log 0 = 0, typed out."""
    return -torch.where(p > 0, p * torch.log(torch.where(p > 0, p, 1.0)), 0.0).sum(-1)


def test_head_stats_equal_an_explicit_loop_over_real_rows_of_unpadded_runs(model, mixed):
    some = mixed[:10]
    w, lengths = batch_weights(model, some, PRONOUN_VOCAB)
    assert len(set(lengths.tolist())) > 1                     # there is padding to leave out
    runs = [(len(e.tokens), resolve(model, e, PRONOUN_VOCAB).weights) for e in some]  # no padding at all
    for threshold, normalize in ((0.1, False), (0.05, True), (0.5, False)):
        stats = head_stats(w, lengths, threshold, normalize)
        ent = torch.zeros(2, 4, dtype=torch.float64)
        spa = torch.zeros(2, 4, dtype=torch.float64)
        rows = 0
        for n, weights in runs:
            for layer, lw in enumerate(weights):
                for head in range(4):
                    p = lw[head].double()                     # (n, n), one sentence, one head
                    ent[layer, head] += (_row_entropy(p) / (math.log(n) if normalize else 1.0)).sum()
                    spa[layer, head] += ((p < threshold).double().sum(-1) / n).sum()
            rows += n
        assert stats.rows == rows
        assert torch.allclose(stats.entropy.double(), ent / rows, atol=1e-5)
        assert torch.allclose(stats.sparsity.double(), spa / rows, atol=1e-5)


def test_seed_analyzer_is_the_tutorials_code_and_differs_where_padding_enters(model, mixed):
    # the formula alone, on the masked model's weights (the run the tutorial makes: tests/test_seed_analyzer.py)
    w, lengths = batch_weights(model, mixed, PRONOUN_VOCAB)
    seed = seed_analyzer_stats(w, 0.1)
    b, h, n, _ = w[0].shape
    for layer, attn in enumerate(w):
        flat = attn.reshape(-1, n).double()                   # every row, padded ones included
        total = float(-(flat * torch.log(flat + 1e-8)).sum())
        assert float(seed.entropy[layer]) == pytest.approx(total / (b * h * n), abs=1e-5)
        assert float(seed.sparsity[layer]) == pytest.approx(float((attn < 0.1).double().mean()), abs=1e-7)
    assert seed.rows == b * h * n
    ours = head_stats(w, lengths, 0.1)
    # on a masked model padded keys have weight 0 < 0.1 and the formula counts them as sparse
    assert (seed.sparsity > ours.sparsity.mean(1)).all()
    # without padding the tutorial's entropy differs only by the +1e-8 (about n * 1e-8 per row)
    same = [e for e in mixed if len(e.tokens) == len(mixed[0].tokens)]
    ws, ls = batch_weights(model, same, PRONOUN_VOCAB)
    assert (ls == ls[0]).all()
    gap = head_stats(ws, ls).entropy.mean(1) - seed_analyzer_stats(ws).entropy
    assert (gap >= -1e-6).all() and (gap < 1e-5).all()


def test_label_counts_equal_classifying_each_unpadded_sentence(model, mixed):
    some = mixed[:12]
    w, lengths = batch_weights(model, some, PRONOUN_VOCAB)
    counts = label_counts(w, lengths)
    assert counts.shape == (2, 4, len(PATTERNS)) and (counts.sum(-1) == len(some)).all()
    expected = torch.zeros(2, 4, len(PATTERNS), dtype=torch.long)
    for i, e in enumerate(some):
        r = resolve(model, e, PRONOUN_VOCAB)                 # the sentence alone, no padding
        per = unpadded(w, lengths)[i]
        for layer in range(2):
            assert per[layer].shape == (4, len(e.tokens), len(e.tokens))
            assert torch.allclose(per[layer], r.weights[layer], atol=1e-5)
            for head, (label, _) in enumerate(classify_heads(r.weights[layer])):
                expected[layer, head, PATTERNS.index(label)] += 1
    assert torch.equal(counts, expected)
    # per sentence: the label of each head, equal to classifying the sentence alone
    labels = sentence_labels(w, lengths)
    assert labels.shape == (len(some), 2, 4)
    for i, e in enumerate(some[:4]):
        r = resolve(model, e, PRONOUN_VOCAB)
        for layer in range(2):
            assert labels[i, layer].tolist() == [PATTERNS.index(lab) for lab, _ in classify_heads(r.weights[layer])]


# ------------------------------------------------------------------ queries and keys of a trained head
@pytest.mark.parametrize("norm_first", [False, True])
def test_head_qk_gives_back_the_models_weights(norm_first):
    torch.manual_seed(1)
    m = PronounResolver(PronounConfig(len(PRONOUN_VOCAB), d_model=32, num_heads=4, d_ff=64,
                                      norm_first=norm_first)).eval()
    e = build_example("fit", "zh", "trophy", "suitcase", "big")
    r = resolve(m, e, PRONOUN_VOCAB)
    for layer in range(2):
        qk = head_qk(m, e, PRONOUN_VOCAB, layer)
        assert qk.q.shape == (4, len(e.tokens), 8) == qk.k.shape
        assert torch.allclose(qk.weights, r.weights[layer], atol=1e-5)
        scores = torch.einsum("hqd,hkd->hqk", qk.q, qk.k) / math.sqrt(8)
        assert torch.allclose(torch.softmax(scores, -1), r.weights[layer], atol=1e-5)
    with pytest.raises(ValueError):
        head_qk(m, e, PRONOUN_VOCAB, 2)


def test_batch_weights_rows_of_real_queries_sum_to_one_and_padded_keys_weigh_zero(model, mixed):
    w, lengths = batch_weights(model, mixed, PRONOUN_VOCAB)
    batch = make_pronoun_batch(mixed, PRONOUN_VOCAB)
    assert torch.equal(lengths, batch.lengths)
    for layer in w:
        for i, m in enumerate(lengths.tolist()):
            assert torch.allclose(layer[i, :, :m].sum(-1), torch.ones(4, m), atol=1e-5)
            assert (layer[i, :, :, m:] == 0).all()

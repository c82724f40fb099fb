"""attention_core.labs.masking against independent oracles: loops, torch SDPA, float64 softmax."""
import math

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from attention_core.functional import masked_softmax, scaled_dot_product_attention
from attention_core.labs.masking import (
    PAD,
    attend_batch,
    batch_mask,
    batch_qkv,
    convention_mixups,
    fill_then_cast,
    int_mask_error,
    key_padding_mask,
    masked_attention_stages,
    masked_fill_outcome,
    pad_batch,
    padding_facts,
    pitfall_naive_masked_softmax,
    stored_as,
)
from ui.masking_state import (
    attend_mask_text,
    decode_mask,
    encode_mask,
)

ATOL = 1e-5
SENTS = [["the", "cat", "sat"], ["a", "dog", "barked", "at", "me"], ["hi"]]


def loop_keep(lengths, n, side, causal):
    """Oracle: the mask written cell by cell, as the tutorials would."""
    out = torch.zeros(len(lengths), 1, n, n, dtype=torch.bool)
    for b, length in enumerate(lengths):
        first = 0 if side == "right" else n - length
        for i in range(n):
            for j in range(n):
                out[b, 0, i, j] = first <= j < first + length and (not causal or j <= i)
    return out


# ---------------------------------------------------------------- padding
@pytest.mark.parametrize("side", ["right", "left"])
def test_pad_batch_pads_to_longest(side):
    b = pad_batch(SENTS, side=side)
    assert b.n == 5 and b.lengths == [3, 5, 1]
    for toks, sent in zip(b.tokens, SENTS):
        assert len(toks) == 5
        real = [t for t in toks if t != PAD]
        assert real == sent
        pads = toks[len(sent):] if side == "right" else toks[:5 - len(sent)]
        assert pads == [PAD] * (5 - len(sent))
    with pytest.raises(ValueError):
        pad_batch(SENTS, side="middle")
    assert pad_batch([]).n == 0


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(0, 7), min_size=1, max_size=5), st.sampled_from(["right", "left"]), st.booleans())
def test_batch_mask_matches_loops_and_marks_the_pads(lengths, side, causal):
    n = max(lengths)
    keep = batch_mask(lengths, n, side=side, causal=causal)
    assert torch.equal(keep.expand(len(lengths), 1, n, n), loop_keep(lengths, n, side, causal))
    b = pad_batch([["w"] * m for m in lengths], side=side)
    kp = key_padding_mask(lengths, n, side=side)[:, 0, 0]
    assert kp.tolist() == [[t != PAD for t in row] for row in b.tokens]


@settings(max_examples=30, deadline=None)
@given(st.lists(st.integers(1, 6), min_size=1, max_size=4), st.sampled_from(["right", "left"]),
       st.booleans(), st.integers(0, 50))
def test_masked_stages_rows_sum_to_one_and_pads_weigh_exactly_zero(lengths, side, causal, seed):
    b = pad_batch([[f"w{i}" for i in range(m)] for m in lengths], side=side)
    q, k, v = batch_qkv(b, d_k=4, seed=seed)
    keep = batch_mask(b.lengths, b.n, side=side, causal=causal)
    s = masked_attention_stages(q, k, v, keep)
    full = keep.expand_as(s.weights)
    assert torch.isfinite(s.weights).all()
    assert (s.weights[~full] == 0).all()                       # hidden keys: exactly 0, not 1e-9
    assert torch.isneginf(s.masked_scores[~full]).all()
    assert torch.equal(s.masked_scores[full], s.scores[full])
    any_visible = full.any(-1)
    sums = s.weights.sum(-1)
    assert torch.allclose(sums[any_visible], torch.ones_like(sums[any_visible]), atol=ATOL)
    assert (sums[~any_visible] == 0).all()                     # fully masked rows: zeros, not NaN
    # oracle: torch SDPA (recent torch also returns zeros for fully masked rows)
    ref = F.scaled_dot_product_attention(q, k, v, attn_mask=keep)
    assert torch.allclose(s.output, torch.nan_to_num(ref), atol=ATOL)


@pytest.mark.parametrize("side", ["right", "left"])
@pytest.mark.parametrize("s", [0, 1, 2])
def test_padding_facts_against_a_loop_over_the_batch(side, s):
    sentences = [["the", "cat", "sat", "down"], ["a", "dog"], ["birds", "sing", "at", "dawn", "today"]]
    run = attend_batch(sentences, side, seed=3)
    row = 1
    f = padding_facts(run, s, row)
    n, real = run.batch.n, len(sentences[s])
    pads = [j for j in range(n) if (j >= real if side == "right" else j < n - real)]     # where the pads are
    w, scores = run.stages.weights[:, 0].double(), run.stages.scores[s, 0].double()
    assert f.pads == n - real
    assert f.sum_error == pytest.approx(max(abs(float(w[s, i].sum()) - 1) for i in range(n)), abs=1e-6)
    assert f.pad_max == (max(float(w[s, i, j]) for i in range(n) for j in pads) if pads else 0.0) == 0.0
    batch_pads = [(b, j) for b, sent in enumerate(sentences) for j in range(n)
                  if (j >= len(sent) if side == "right" else j < n - len(sent))]
    assert f.batch_pad_max == max(float(w[b, i, j]) for b, j in batch_pads for i in range(n)) == 0.0
    plain = torch.softmax(scores[row], -1)                       # no mask at all: the pads take their share
    assert f.share_unmasked == pytest.approx(float(plain[pads].sum()) if pads else 0.0, rel=1e-5, abs=1e-7)
    assert f.pad_score == pytest.approx(max((abs(float(scores[row, j])) for j in pads), default=0.0), abs=1e-6)
    if pads:
        assert f.share_unmasked > 0.01                           # padding takes a visible share without the mask


def test_pad_embeds_to_zero_so_its_unmasked_score_is_zero_not_minus_inf():
    b = pad_batch(SENTS)
    q, k, _ = batch_qkv(b, d_k=8, seed=3)
    s = masked_attention_stages(q, k, k, None)
    pads = torch.tensor([[t == PAD for t in row] for row in b.tokens])
    assert (k[:, 0][pads] == 0).all()
    assert (s.scores[:, 0].transpose(-1, -2)[pads] == 0).all()  # score column of a PAD key is 0
    assert (s.weights[:, 0].transpose(-1, -2)[pads] > 0).all()  # so without a mask it gets weight


# ---------------------------------------------------------------- custom mask text
@settings(max_examples=40, deadline=None)
@given(st.integers(1, 8), st.data())
def test_encode_decode_roundtrip(n, data):
    bits = data.draw(st.lists(st.booleans(), min_size=n * n, max_size=n * n))
    m = torch.tensor(bits).reshape(n, n)
    text = encode_mask(m)
    assert len(text) == n * n + n - 1 and set(text) <= {"0", "1", "-"}
    back, exact = decode_mask(text, n)
    assert exact and torch.equal(back, m)


def test_decode_resizes_and_rejects_garbage():
    fb = torch.eye(3, dtype=torch.bool)
    m, exact = decode_mask("10-01", 3, fb)          # 2x2 given, 3x3 wanted: rest from fallback
    assert not exact and m.tolist() == [[True, False, False], [False, True, False], [False, False, True]]
    m, exact = decode_mask("0000-0000-0000-0000", 2)
    assert not exact and not m.any()
    m, exact = decode_mask("", 2)
    assert not exact and m.all()
    for bad in ("12-01", "<script>", "1,0"):
        with pytest.raises(ValueError):
            decode_mask(bad, 2)


# ---------------------------------------------------------------- pitfall 1: NaN
def test_naive_softmax_nan_on_fully_masked_row_safe_gives_zeros():
    scores = torch.randn(2, 3, 4)
    keep = torch.tensor([[1, 1, 0, 0], [0, 0, 0, 0], [1, 1, 1, 1]])  # tutorials' 0/1 convention
    naive = pitfall_naive_masked_softmax(scores, keep)
    safe = masked_softmax(scores, keep.bool())
    assert torch.isnan(naive[:, 1]).all()                       # the fully masked row
    assert (safe[:, 1] == 0).all()
    ok = torch.tensor([0, 2])
    assert torch.allclose(naive[:, ok], safe[:, ok], atol=1e-6)
    # oracle in float64 with explicit exp / sum for the partially masked rows
    e = torch.exp(scores.double()) * keep.double()
    assert torch.allclose(safe[:, ok].double(), (e / e.sum(-1, keepdim=True))[:, ok], atol=1e-6)
    # the NaN spreads: one bad row makes the output (and any loss over it) NaN
    v = torch.randn(2, 4, 5)
    assert torch.isnan((naive @ v).sum()) and torch.isfinite((safe @ v).sum())


# ---------------------------------------------------------------- pitfall 2: -1e9 in float16
def test_minus_1e9_in_float16():
    assert stored_as(-1e9, torch.float16) == -math.inf
    assert stored_as(-1e9, torch.bfloat16) > -math.inf
    assert stored_as(torch.finfo(torch.float16).min, torch.float16) == -65504.0
    scores = torch.randn(2, 4)
    keep = torch.tensor([[1, 1, 0, 0], [0, 0, 0, 0]])
    out = masked_fill_outcome(scores, keep, "-1e9", "float16")
    assert out.weights is None and "overflow" in out.error
    cast = fill_then_cast(scores, keep, "-1e9", "float16")      # fill in fp32, cast: -1e9 -> -inf
    assert torch.isnan(cast[1]).all() and torch.isfinite(cast[0]).all()
    for dtype in ("float32", "bfloat16", "float16"):
        fm = masked_fill_outcome(scores, keep, "finfo.min", dtype)
        assert fm.error is None and torch.isfinite(fm.weights).all()
        assert (fm.weights[0, 2:] == 0).all()                   # partial row: hidden keys 0
        assert torch.allclose(fm.weights[1].float(), torch.full((4,), 0.25))  # full row: uniform, not 0
        inf = masked_fill_outcome(scores, keep, "-inf", dtype)
        assert torch.isnan(inf.weights[1]).all()
    m9 = masked_fill_outcome(scores, keep, "-1e9", "float32")
    assert torch.allclose(m9.weights[1], torch.full((4,), 0.25))


# ---------------------------------------------------------------- pitfall 3: conventions
def test_convention_mixups_match_torch_sdpa():
    b = pad_batch(SENTS)
    q, k, v = batch_qkv(b, d_k=8, seed=1)
    keep = key_padding_mask(b.lengths, b.n)                     # (b, 1, 1, n)
    w = convention_mixups(q, k, v, keep)
    pads = ~keep.expand_as(w["correct"])
    assert (w["correct"][pads] == 0).all()
    assert (w["float01"][pads] > 0).all()                        # added, not hidden
    assert (w["inverted"][~pads] == 0).all()                     # only PAD visible
    assert (w["inverted"][1] == 0).all()                         # the longest sentence has no PAD at all
    for name, mask in {"correct": keep, "float01": keep.float(), "inverted": ~keep}.items():
        ref = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        ours = scaled_dot_product_attention(q, k, v, mask).output
        assert torch.allclose(ours, torch.nan_to_num(ref), atol=ATOL), name
        assert torch.allclose(w[name] @ v, ours, atol=ATOL)
    # float01 is exactly SDPA with +1 added to the scores of real keys
    ref = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(8) + keep.float(), dim=-1)
    assert torch.allclose(w["float01"], ref.expand_as(w["float01"]), atol=ATOL)
    assert "dtype" in int_mask_error(q, k, v, keep)


# ---------------------------------------------------------------- the page's end-to-end helpers
def test_presets_and_default_custom_mask():
    from attention_core.labs.masking import PRESETS, default_custom_mask, preset_mask
    from ui.masking_state import apply_edits
    n = 4
    assert preset_mask("all", n).all() and not preset_mask("none", n).any()
    assert torch.equal(preset_mask("causal", n), torch.ones(n, n, dtype=torch.bool).tril())
    assert torch.equal(preset_mask("window", n), (torch.arange(n)[:, None] - torch.arange(n)).abs() <= 1)
    assert set(PRESETS) == {"all", "causal", "window", "none"}
    with pytest.raises(ValueError):
        preset_mask("diagonal", n)
    d = default_custom_mask(5)
    assert not d[2].any() and d[[0, 1, 3, 4]].any(-1).all()
    assert default_custom_mask(2).all()
    labels = ["a", "b", "c"]
    assert apply_edits("100-110-111", labels, {}) == "100-110-111"
    assert apply_edits("100-110-111", labels, {"1": {"c": True}, 2: {"a": False, "zz": True}, 7: {"a": 1}}) \
        == "100-111-011"


def test_fully_masked_demo_numbers():
    from attention_core.labs.masking import fully_masked_demo
    d = fully_masked_demo(SENTS, seed=2)
    assert d.sentence == 2 and not d.by_hand and d.tokens[0] == PAD
    assert all(math.isnan(x) for x in d.naive) and all(x == 0 for x in d.safe)
    assert d.nan > 0 and math.isnan(d.naive_sum) and math.isfinite(d.safe_sum)
    assert d.fills["-1e9", "float16"].status == "error" and d.fills["-inf", "float32"].status == "nan"
    assert d.fills["finfo.min", "float16"].status == "uniform" and math.isnan(d.cast)
    same = fully_masked_demo([["a", "b"], ["c", "d"]])
    assert same.by_hand and all(x == 0 for x in same.safe)
    mask, out, naive = attend_mask_text(["x", "y", "z"], "110-000-011", seed=1)
    assert (out.weights[0, 0, 1] == 0).all() and torch.isnan(naive[0, 0, 1]).all()
    assert torch.allclose(out.weights[0, 0, [0, 2]].sum(-1), torch.ones(2))

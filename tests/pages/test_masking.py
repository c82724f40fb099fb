"""The masking page, run in AppTest: what its charts contain, its notices, its pitfalls, bad input, URL."""
import math
import re

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from attention_core.functional import masked_softmax
from attention_core.labs import masking as ml
from attention_core.text import tokenize
from tests.apptest_util import (
    all_text,
    chart_data,
    chart_spec,
    charts,
    exceptions,
    label_parts,
    label_pattern,
    open_page,
    shows_label,
    title_text,
)
from ui import masking_charts as mc
from ui import masking_state as ms
from ui.i18n import catalog

EN, ZH = catalog("en"), catalog("zh")


def parse_sci(text: str) -> float:
    """ "1.2 × 10⁻⁷" (ui.format.sci) as a float."""
    if text == "0":
        return 0.0
    mantissa, power = text.split(" × 10")
    return float(mantissa) * 10 ** int(power.translate(str.maketrans("⁻⁰¹²³⁴⁵⁶⁷⁸⁹", "-0123456789")))
DEFAULT = [tokenize(line) for line in EN["masking.default_batch"].splitlines()]
TAB_CAUSAL = {"en": EN["masking.tab_causal"], "zh": ZH["masking.tab_causal"]}
TAB_CUSTOM = {"en": EN["masking.tab_custom"], "zh": ZH["masking.tab_custom"]}


def chart_by_title(at, prefix: str):
    found = [c for c in charts(at) if (title_text(chart_spec(c)) or "").startswith(prefix)]
    assert found, f"no chart titled {prefix!r}: {[title_text(chart_spec(c)) for c in charts(at)]}"
    return found[0]


def heatmap_matrix(chart):
    """The heatmap's long-form data back as (values, masked) matrices, indexed by query/key position."""
    frame = next(iter(chart_data(chart).values()))
    n_q, n_k = frame["query_pos"].max() + 1, frame["key_pos"].max() + 1
    values = np.full((n_q, n_k), np.nan)
    masked = np.zeros((n_q, n_k), dtype=bool)
    values[frame["query_pos"], frame["key_pos"]] = frame["value"].astype(float)
    masked[frame["query_pos"], frame["key_pos"]] = frame["masked"].astype(bool)
    return values, masked, frame


def oracle(sentences, side="right", causal=False, seed=0, d_k=8):
    """Independent reference: mask written cell by cell, torch's own softmax over visible keys."""
    batch = ml.pad_batch(sentences, side=side)
    q, k, _ = ml.batch_qkv(batch, d_k, seed)
    n = batch.n
    keep = torch.zeros(len(sentences), n, n, dtype=torch.bool)
    for b, length in enumerate(batch.lengths):
        first = 0 if side == "right" else n - length
        for i in range(n):
            for j in range(n):
                keep[b, i, j] = first <= j < first + length and (not causal or j <= i)
    scores = (q[:, 0] @ k[:, 0].transpose(-1, -2)) / math.sqrt(d_k)
    w = torch.zeros_like(scores)
    for b in range(len(sentences)):
        for i in range(n):
            if keep[b, i].any():
                w[b, i, keep[b, i]] = torch.softmax(scores[b, i, keep[b, i]].double(), -1).float()
    return batch, keep, scores, w


# ---------------------------------------------------------------- opens, and the padding charts
@pytest.mark.parametrize("lang", ["en", "zh"])
def test_opens_and_padded_keys_weigh_exactly_zero(lang):
    at = open_page("masking", lang)
    assert exceptions(at) == []
    cat = catalog(lang)
    assert cat["masking.title"] in [t.value for t in at.title]
    sentences = [tokenize(line) for line in cat["masking.default_batch"].splitlines()]
    batch, keep, _, w_ref = oracle(sentences)
    s = next(i for i, n in enumerate(batch.lengths) if n < batch.n)       # default: first padded sentence
    values, masked, _ = heatmap_matrix(chart_by_title(at, cat["masking.weights_title"].format(i=s + 1)))
    assert (masked == ~keep[s].numpy()).all()                            # masked cells = the padded keys
    assert (values[masked] == 0.0).all()                                 # exactly 0, not 1e-9
    assert np.allclose(values.sum(-1), 1.0, atol=1e-6)                   # every row sees a real key
    assert np.allclose(values, w_ref[s].numpy(), atol=1e-5)              # the numbers of an oracle
    # the batch grid: one cell per (sentence, position), mask value 1 exactly on real tokens
    grid = chart_data(chart_by_title(at, cat["masking.batch_title"].format(b=len(sentences), n=batch.n)))["data"]
    assert len(grid) == len(sentences) * batch.n
    assert (grid["mask"].to_numpy() == (grid["token"] != ml.PAD).to_numpy()).all()


def test_notice_quotes_the_numbers_of_the_chart():
    at = open_page("masking", "en")
    values, masked, _ = heatmap_matrix(chart_by_title(at, "Attention weights of sentence 1"))
    text = all_text(at)
    sums = values.sum(-1)
    m = re.search(label_pattern("masking.notice_pad_zero", i="1", err=r"0|[\d.]+ × 10[⁻⁰-⁹¹²³]+"), text)
    err = parse_sci(m.group("err"))               # "within float precision": the largest |sum − 1|, 1.2 × 10⁻⁷
    assert err < 1e-6 and abs(err - np.abs(sums - 1).max()) < 3e-7
    assert float(values[masked].max()) == 0.0
    assert shows_label(text, "masking.notice_pad_zero", pad_max=repr(float(values[masked].max())))
    batch, keep, scores, _ = oracle(DEFAULT)
    unmasked = masked_softmax(scores[0])                                 # no mask: the PAD share of row 0
    assert f"**{100 * float(unmasked[0][~keep[0, 0]].sum()):.1f}%**" in text
    assert "4 hidden key(s) get exactly 0" in text
    bars = chart_data(charts(at)[-1])["data"]                                # the drill-down bars of row 0
    assert np.allclose(bars["value"], values[0]) and (bars.loc[~bars["visible"], "value"] == 0).all()


def test_scores_before_and_after_masking():
    before = open_page("masking", "en", {"sc": EN["masking.stage_before"]})
    after = open_page("masking", "en", {"sc": EN["masking.stage_after"]})
    assert exceptions(before) == [] and exceptions(after) == []
    raw, raw_masked, _ = heatmap_matrix(chart_by_title(before, EN["masking.scores_before"]))
    cut, cut_masked, frame = heatmap_matrix(chart_by_title(after, EN["masking.scores_after"]))
    _, keep, scores, _ = oracle(DEFAULT)
    assert not raw_masked.any() and np.allclose(raw, scores[0].numpy(), atol=1e-5)
    assert (raw[:, ~keep[0, 0].numpy()] == 0).all()                      # PAD's zero vector scores 0
    assert (cut_masked == ~keep[0].numpy()).all()
    assert np.isnan(cut[cut_masked]).all() and (frame.loc[frame["masked"], "exact"] == "−∞").all()
    assert np.allclose(cut[~cut_masked], raw[~cut_masked])


# ---------------------------------------------------------------- causal
@pytest.mark.parametrize("side", ["right", "left"])
def test_decoder_weights_hide_padding_and_the_future(side):
    at = open_page("masking", "en", {"tab": TAB_CAUSAL["en"], "side": EN[f"masking.side_{side}"]})
    assert exceptions(at) == []
    batch, keep, _, w_ref = oracle(DEFAULT, side=side, causal=True)
    values, masked, _ = heatmap_matrix(chart_by_title(at, "Decoder weights of sentence 1"))
    assert (masked == ~keep[0].numpy()).all()
    assert (values[masked] == 0.0).all()
    visible = keep[0].any(-1).numpy()
    assert np.allclose(values[visible].sum(-1), 1.0, atol=1e-6)
    assert (values[~visible] == 0).all() and not np.isnan(values).any()  # fully masked rows: zeros, not NaN
    assert np.allclose(values, w_ref[0].numpy(), atol=1e-5)
    panels = chart_data(charts(at)[0])["data"]                               # padding | look-ahead | AND
    both = panels[panels["panel"] == EN["masking.panel_both"]]
    assert (both["visible"].to_numpy() == keep[0].numpy().ravel()).all()
    text = all_text(at)
    if side == "left":
        assert (~visible).sum() == 4 and shows_label(text, "masking.notice_empty_rows")
    else:
        assert visible.all() and shows_label(text, "masking.notice_try_left")


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_causal_tab_asks_before_it_shows(lang):
    """The question before the answer, on the tab that holds the exercise (tests/test_lesson_order.py opens the first
    tab only): with left padding the decoder's notice says the empty rows give NaN, so the question must come before the
    mask panels, the weights and that notice — and the first tab, whose evidence does not answer it, holds none. ~2
    s."""
    at = open_page("masking", lang, {"tab": TAB_CAUSAL[lang], "side": catalog(lang)["masking.side_left"]})
    assert exceptions(at) == []

    def drawn(node) -> list[tuple[str, str]]:
        kind = getattr(node, "type", None)
        value = getattr(node, "value", None)
        here = [(kind, getattr(node, "key", None) or (value if isinstance(value, str) else ""))] if kind else []
        return here + [item for child in getattr(node, "children", {}).values() for item in drawn(child)]

    tab = next(tab for tab in at.tabs if tab.label == TAB_CAUSAL[lang])
    items = drawn(tab)
    asked = items.index(("radio", "mask_ex_guess"))
    evidence = [i for i, (kind, text) in enumerate(items)
                if kind == "vega_lite_chart" or (kind == "subheader" and text == catalog(lang)["common.notice"])]
    assert len(evidence) >= 4 and asked < min(evidence), items        # panels, weights, row bars, notice
    assert shows_label(all_text(at), "masking.notice_empty_rows", lang)
    first = open_page("masking", lang)
    assert [r for r in first.radio if r.key == "mask_ex_guess"] == []


def test_encoder_uses_the_padding_mask_only():
    at = open_page("masking", "zh", {"tab": TAB_CAUSAL["zh"], "use": ZH["masking.use_encoder"]})
    assert exceptions(at) == []
    sentences = [tokenize(line) for line in ZH["masking.default_batch"].splitlines()]
    _, keep, _, w_ref = oracle(sentences)
    values, masked, _ = heatmap_matrix(chart_by_title(at, ZH["masking.weights_encoder"].format(i=1)))
    assert (masked == ~keep[0].numpy()).all() and (values[masked] == 0).all()
    assert np.allclose(values, w_ref[0].numpy(), atol=1e-5)


# ---------------------------------------------------------------- custom mask
def test_custom_mask_from_the_url_with_an_empty_row():
    code = "11000-01100-00000-00011-10001"
    at = open_page("masking", "en", {"tab": TAB_CUSTOM["en"], "cm": code})
    assert exceptions(at) == []
    mask, _ = ms.decode_mask(code, 5)
    values, masked, _ = heatmap_matrix(chart_by_title(at, EN["masking.weights_custom"]))
    assert (masked == ~mask.numpy()).all() and (values[masked] == 0).all()
    assert (values[2] == 0).all() and not np.isnan(values).any()         # the fully masked row: zeros
    assert np.allclose(np.delete(values, 2, 0).sum(-1), 1.0, atol=1e-6)
    # the checkbox grid shows the same mask, and the naive softmax's NaNs are counted in the notice
    grid = [d.value for d in at.dataframe if d.value.dtypes.eq(bool).all()][0]
    assert (grid.to_numpy() == mask.numpy()).all()
    _, out, naive = ms.attend_mask_text(DEFAULT[0], code)
    assert torch.isnan(naive[0, 0, 2]).all() and int(torch.isnan(naive).sum()) == 5
    assert shows_label(all_text(at), "masking.notice_custom_empty", nan=5)


def test_custom_mask_presets_and_edits_update_the_url():
    at = open_page("masking", "en", {"tab": TAB_CUSTOM["en"]})
    assert at.text_input(key="cm").value == ms.encode_mask(ml.default_custom_mask(5))
    at.button(key="preset_causal").click().run()
    assert at.query_params["cm"] in ("10000-11000-11100-11110-11111", ["10000-11000-11100-11110-11111"])
    values, masked, _ = heatmap_matrix(chart_by_title(at, EN["masking.weights_custom"]))
    assert (masked == ~np.tril(np.ones((5, 5), dtype=bool))).all()
    labels = ["The", "cat", "sat", "down", "."]
    assert ms.apply_edits("10000-11000-11100-11110-11111", labels, {0: {"sat": True}, "4": {"The": False}}) \
        == "10100-11000-11100-11110-01111"


@pytest.mark.parametrize("code,message", [("12x-<b>", "may only contain 0, 1"),
                                          ("1-11", "did not have 5 rows of 5 cells")])
def test_bad_mask_text_gets_a_message(code, message):
    at = open_page("masking", "en", {"tab": TAB_CUSTOM["en"], "cm": code})
    assert exceptions(at) == [] and message in all_text(at)


# ---------------------------------------------------------------- pitfalls, live
def test_pitfall_tables_nan_versus_safe_and_fp16():
    at = open_page("masking", "en", {"nanx": "true", "fp16x": "true"})     # the demos are drawn only when open
    nan_table, fp_table = at.table[0].value, at.table[1].value
    assert (nan_table[EN["masking.row_naive"]] == "NaN").all()           # tutorials: a NaN row (a column here)
    assert (nan_table[EN["masking.row_safe"]] == "0").all()              # safe softmax: zeros
    assert fp_table.loc["float16", EN["masking.fill_1e9"]] == "RuntimeError"     # a row per dtype
    assert fp_table[EN["masking.fill_inf"]].str.endswith("NaN").all()
    assert fp_table.loc["float16", EN["masking.fill_finfo"]].startswith("−65504 →")
    # the same row computed here: naive NaN, safe zeros
    batch, keep, (q, k, v), stages = ml.attend_batch(DEFAULT, "left", 0, True)
    s = int(np.argmin(batch.lengths))
    assert not keep[s, 0, 0].any()
    row = stages.scores[s, 0, 0]
    assert torch.isnan(ml.pitfall_naive_masked_softmax(row, keep[s, 0, 0])).all()
    assert (masked_softmax(row, keep[s, 0, 0]) == 0).all()
    ref = F.scaled_dot_product_attention(q, k, v, attn_mask=keep)       # torch agrees on the outputs
    assert torch.allclose(stages.output, torch.nan_to_num(ref), atol=1e-5)


@pytest.mark.parametrize("mix", ml.MIXUPS)
def test_convention_mixup_demo(mix):
    at = open_page("masking", "en", {"mixx": "true", "mix": EN[f"masking.mix_{mix}"]})
    assert exceptions(at) == []
    values, masked, _ = heatmap_matrix(chart_by_title(at, EN["masking.mix_title"].split("{")[0].strip()))
    pads = np.array([t == ml.PAD for t in ml.pad_batch(DEFAULT).tokens[0]])
    if mix == "correct":
        assert (values[:, pads] == 0).all() and np.allclose(values.sum(-1), 1, atol=1e-6)
    elif mix == "float01":
        assert not masked.any() and (values[:, pads] > 0).all()          # silently not hidden
    else:
        assert (values[:, ~pads] == 0).all() and np.allclose(values.sum(-1), 1, atol=1e-6)
    assert "Expected attn_mask dtype to be bool or float" in all_text(at)


# ---------------------------------------------------------------- bad input, extremes, the URL
@pytest.mark.parametrize("text,message", [
    ("", "masking.err_empty"),
    ("\n  \n", "masking.err_empty"),
    ("only one sentence here", "masking.note_one"),
    ("a b\nc d", "masking.note_same_length"),
    ("\n".join(f"line {i}" + " x" * i for i in range(7)), "masking.warn_too_many"),
    (" ".join(["tok"] * 300) + "\nshort", "masking.warn_truncated"),
    ("😀 🎉 👍🏽\n👨‍👩‍👧 ok\n\nsee", "masking.note_blank"),
    ("注意力机制很有趣\n你好", None),
    ("<script>alert(1)</script>\n<b>bold</b> **x**", None),
], ids=["empty", "blank", "one", "same-length", "seven", "300-tokens", "emoji", "chinese", "html"])
def test_bad_input_never_crashes(text, message):
    """Every tab, in both languages: no exception, and the message in the page's language."""
    for lang, tab in (("en", None), ("en", TAB_CAUSAL["en"]), ("en", TAB_CUSTOM["en"]), ("zh", None),
                      ("zh", TAB_CAUSAL["zh"])):
        params = {"batch": text} | ({"tab": tab} if tab else {})
        at = open_page("masking", lang, params)
        assert exceptions(at) == [], (text, lang, tab)
        if message and tab is None:              # the batch's messages sit with the batch, on the first tab
            fixed = max(re.split(r"\{[^}]*\}", catalog(lang)[message]), key=len).strip()   # text between fields
            assert fixed and fixed in all_text(at), (lang, fixed)
        assert "<script>" not in "".join(m.value for m in at.markdown)   # user text never becomes HTML


def test_html_tokens_stay_text_in_the_charts():
    at = open_page("masking", "en", {"batch": "<script>alert(1)</script>\nhi"})
    grid = chart_data(charts(at)[0])["data"]
    assert "<" in set(grid["token"]) and "script" in set(grid["token"])


@pytest.mark.parametrize("seed", ["0", "9999"])
def test_seed_extremes_and_out_of_range_choices(seed):
    at = open_page("masking", "zh", {"seed": seed, "s": "9", "side": "nonsense", "sc": "??", "use": "x"})
    assert exceptions(at) == []


def test_url_reproduces_the_view():
    params = {"batch": "a b c d\ne f", "s": "2", "side": EN["masking.side_left"], "tab": TAB_CAUSAL["en"],
              "use": EN["masking.use_decoder"], "seed": "7"}
    at = open_page("masking", "en", params)
    assert exceptions(at) == []
    assert at.text_area(key="batch").value == "a b c d\ne f"
    assert at.number_input(key="seed").value == 7
    assert at.segmented_control(key="s").value == 1
    assert at.segmented_control(key="side").value == "left"
    values, masked, frame = heatmap_matrix(chart_by_title(at, "Decoder weights of sentence 2"))
    assert list(frame["key"].unique()) == ["[PAD]·0", "[PAD]·1", "e", "f"]
    _, keep, _, w_ref = oracle([["a", "b", "c", "d"], ["e", "f"]], side="left", causal=True, seed=7)
    assert np.allclose(values, w_ref[1].numpy(), atol=1e-5) and (masked == ~keep[1].numpy()).all()


def test_a_clicked_row_is_kept_in_the_url():
    """?row_pad_w=2 (what a click on the third row writes) opens the page on that row, in the caption, the bars
    and the heatmap's selection; an index outside the sentence falls back to the first visible row."""
    at = open_page("masking", "en", {"row_pad_w": "2"})
    assert exceptions(at) == []
    captions = [c.value for c in at.caption if c.value.startswith(label_parts("masking.row_caption")[0])]
    assert captions and captions[0].startswith(label_parts("masking.row_caption", q="sat")[0]), captions
    heat = next(c for c in charts(at) if title_text(chart_spec(c)) == EN["masking.weights_title"].format(i=1))
    assert chart_spec(heat)["params"][0]["value"] == [{"query_pos": 2}]
    at = open_page("masking", "en", {"row_pad_w": "99"})
    row_of_the = label_parts("masking.row_caption", q="The")[0]          # "Row of query “The”: ..."
    assert exceptions(at) == [] and any(c.value.startswith(row_of_the) for c in at.caption)


def test_phone_layout_properties():
    """Legible on a 390 px phone: the three mask panels wrap one per row when side by side they would not fit a phone (3
    x 9 tokens x 22 px), three short tokens stay side by side; no axis lets Vega hide a token the page quotes; the
    formula is split into lines and the NaN table is a static table (it wraps)."""
    at = open_page("masking", "en", {"tab": TAB_CAUSAL["en"], "nanx": "true", "fp16x": "true"})
    panels = chart_spec(charts(at)[0])
    assert panels["columns"] == 1 and "facet" in panels and panels["facet"]["field"] == "panel"
    layer = panels["spec"]["layer"][0]["encoding"]
    assert layer["x"]["axis"]["labelOverlap"] is False and layer["y"]["axis"]["labelOverlap"] is False
    bars = [chart_spec(c) for c in charts(at) if "row_bars" in chart_spec(c)["usermeta"]["chart_kind"]][0]
    assert bars["layer"][0]["encoding"]["x"]["axis"]["labelOverlap"] is False
    small = mc.mask_panels([("a", np.eye(3, dtype=bool)), ("b", np.eye(3, dtype=bool)), ("c", np.eye(3, dtype=bool))],
                           ["x", "y", "z"], x_title="k", y_title="q", mask_title="m")
    assert small["columns"] == 3
    assert r"\\" in at.latex[0].proto.body
    assert len(at.table) == 2 and not [d for d in at.dataframe if not d.value.dtypes.eq(bool).all()]

"""The cross-attention page: opens in both languages, its charts hold what the formulas give
(recomputed here by hand from the inputs), its notices quote them, the URL reproduces it, the
tutorial's gate bug is shown live, and no control value crashes it."""
import math

import numpy as np
import pytest
import torch

from attention_core.crossmodal import (
    CrossModalAttention,
    align_text_to_image_,
    grounded_features,
    image_to_patches,
    patch_coverage,
    synthetic_scene,
)
from attention_core.labs.cross_attention import gloss, scene_word
from attention_core.text import embed_tokens, tokenize
from tests.apptest_util import all_text, chart_data, chart_spec, charts, exceptions, open_page, shows_label
from ui.i18n import catalog

ORDER = ("xa", "xa_row", "cm", "spot", "gate")
EN, ZH = catalog("en"), catalog("zh")
SRC = tokenize(EN["cross_attention.default_source_sentence"])
TGT = tokenize(EN["cross_attention.default_target_sentence"])
CAPTION = tokenize(EN["cross_attention.default_caption"])


TAB_CHARTS = (2, 3, 0)       # charts drawn in each tab (the tabs are lazy: only the open one runs)


def open_tab(at, i: int):
    """Open the i-th tab (as a click on it does) and rerun."""
    at.session_state["tab"] = at.tabs[i].label
    return at.run()


def by_name(at) -> dict:
    """Every chart of the page, by name: each tab opened in turn, then the first one again."""
    found = []
    for i, n in enumerate(TAB_CHARTS):
        open_tab(at, i)
        assert exceptions(at) == [] and len(charts(at)) == n, (i, len(charts(at)))
        found += charts(at)
    open_tab(at, 0)
    assert len(found) == len(ORDER), len(found)
    return dict(zip(ORDER, found))


def frame(chart):
    return chart_data(chart)["data"]


def grid(df) -> np.ndarray:
    return df.pivot(index="query_pos", columns="key_pos", values="value").to_numpy()


def softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def decoder_oracle(src, tgt, d=64, seed=0) -> np.ndarray:
    # trained stand-in by hand: target rows sit at their gloss's embedding, identity projections, 1 head
    keys = [m if m is not None else f"\x00zh:{tok}" for m, tok in zip(gloss(tgt), tgt)]
    t = embed_tokens(keys, d, seed).double().numpy()
    s = embed_tokens(src, d, seed).double().numpy()
    return softmax(t @ s.T / math.sqrt(d))


def crossmodal_oracle(kind, words, patch=4, heads=2, sharp=20.0, seed=0):
    # text -> image weights by hand: softmax(sharp * q_h . k_h / sqrt(d_k)) per head, mean over heads
    scene = synthetic_scene(kind, 32, seed)
    torch.manual_seed(seed)
    m = align_text_to_image_(CrossModalAttention(patch * patch * 3, 32, heads).eval(), sharp)
    inp = grounded_features(m, scene, [scene_word(w) for w in words], patch)
    with torch.no_grad():
        k = m.visual_proj(inp.visual)[0].double().numpy()               # (n_p, 32)
    q = inp.text[0].double().numpy()                                    # (n_w, 32)
    dk = 32 // heads
    w = np.stack([softmax(sharp * q[:, h * dk:(h + 1) * dk] @ k[:, h * dk:(h + 1) * dk].T / math.sqrt(dk))
                  for h in range(heads)]).mean(0)
    return scene, w


@pytest.fixture(scope="module")
def en():
    at = open_page("cross_attention", "en")
    assert exceptions(at) == []
    return at


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_opens_without_exception(lang):
    at = open_page("cross_attention", lang)
    assert exceptions(at) == []
    assert at.title[0].value == catalog(lang)["cross_attention.title"]
    assert len(charts(at)) == TAB_CHARTS[0]          # lazy tabs: the other tabs' charts are not drawn
    by_name(at)


def test_decoder_heatmap_is_the_non_square_alignment(en):
    c = by_name(en)
    w = grid(frame(c["xa"]))
    assert w.shape == (len(TGT), len(SRC)) == (17, 12)
    np.testing.assert_allclose(w, decoder_oracle(SRC, TGT), atol=1e-5)
    np.testing.assert_allclose(w.sum(1), 1.0, atol=1e-5)
    assert SRC[int(w[TGT.index("动")].argmax())] == "animal"
    assert SRC[int(w[TGT.index("累")].argmax())] == "tired"
    # the default drilled row is 这 (the): its bars are that row, split between "The" and "the"
    bars = frame(c["xa_row"])["value"].to_numpy()
    np.testing.assert_allclose(bars, w[0], atol=1e-6)
    text = all_text(en)
    assert shows_label(text, "cross_attention.notice_twins", a="The", wa=f"{w[0, 0]:.4f}", b="the", wb=f"{w[0, 4]:.4f}")
    assert shows_label(text, "cross_attention.notice_shape", n_t=17, n_s=12)
    col = w.sum(0)
    assert shows_label(text, "cross_attention.notice_column", src=SRC[int(col.argmin())], mass=f"{col.min():.2f}")


def test_random_weights_do_not_align():
    at = open_page("cross_attention", "en", {"mode": EN["cross_attention.mode_random"]})
    assert exceptions(at) == []
    w = grid(frame(by_name(at)["xa"]))
    np.testing.assert_allclose(w.sum(1), 1.0, atol=1e-5)
    assert w.max(1).mean() < 0.4 < decoder_oracle(SRC, TGT).max(1).mean()
    assert f"is {w.max(1).mean():.2f} on average" in all_text(at)


def test_words_over_patches_and_the_picture(en):
    c = by_name(en)
    w = grid(frame(c["cm"]))
    scene, ref = crossmodal_oracle("circle_square", CAPTION)
    assert w.shape == (7, 64)
    np.testing.assert_allclose(w, ref, atol=1e-5)
    np.testing.assert_allclose(w.sum(1), 1.0, atol=1e-5)
    np.testing.assert_allclose(w[CAPTION.index("a")], 1 / 64, atol=1e-6)          # a word not in the picture
    red = CAPTION.index("red")
    named = patch_coverage(scene.regions["red"], 4).numpy() > 0.5
    assert w[red][named].sum() > 0.8
    # the picture: 1024 pixels with the scene's colours, 64 patches with the red row's weights
    spot = frame(c["spot"])
    pix = spot[spot["part"] == "pixel"].sort_values(["y0", "x0"])
    assert len(pix) == 32 * 32
    img = np.clip(np.round(scene.image.numpy().reshape(-1, 3) * 255), 0, 255).astype(int)
    assert list(pix["rgb"]) == [f"#{r:02x}{g:02x}{b:02x}" for r, g, b in img]
    pat = spot[spot["part"] == "patch"].sort_values("patch")
    np.testing.assert_allclose(pat["weight"].to_numpy(), w[red], atol=1e-6)
    assert list(pat["named"]) == list(named)
    assert (pat["shade"] >= 0).all() and pat.loc[pat["weight"].idxmax(), "shade"] == 0
    open_tab(en, 1)
    mass = w[red][named].sum()
    assert shows_label(all_text(en), "cross_attention.notice_mass", w="red", mass=f"{mass:.2f}", k=named.sum())
    assert image_to_patches(scene.image, 4).shape == (64, 48)


def test_gate_values(en):
    c = by_name(en)
    g = grid(frame(c["gate"]))
    assert g.shape == (7, 32) and (g >= 0).all() and (g <= 1).all()
    spec = chart_spec(c["gate"])
    assert spec["layer"][0]["encoding"]["color"]["scale"]["domain"] == [0.0, 1.0]
    red = CAPTION.index("red")
    open_tab(en, 1)
    assert shows_label(all_text(en), "cross_attention.notice_gate", w="red", g=f"{g[red].mean():.2f}")


def test_tutorial_gate_bug_is_shown_live(en):
    open_tab(en, 1)
    errors = " ".join(e.value for e in en.error)
    assert shows_label(errors, "cross_attention.gate_error", n=7) and "Expected size 7" in errors
    assert shows_label(" ".join(s.value for s in en.success), "cross_attention.gate_fixed", n=7, d=32)


def test_exercise_feedback():
    at = open_tab(open_page("cross_attention", "en"), 1)
    at.radio(key="xa_ex_guess").set_value(1).run()
    at.button(key="xa_ex_reveal").click().run()
    assert exceptions(at) == []
    assert EN["common.correct"] in " ".join(s.value for s in at.success)


def test_url_reproduces_the_view():
    params = {"src": "the cat sat on the mat", "tgt": "猫坐在垫子上",
              "mode": EN["cross_attention.mode_trained"], "dm": "32", "seed": "3",
              "img": EN["cross_attention.img_sun_grass"], "words": "yellow sun",
              "patch": EN["cross_attention.patch_option"].format(p=8, g=4), "heads": "1", "sharp": "10"}
    at = open_page("cross_attention", "en", params)
    assert exceptions(at) == []
    assert at.slider(key="dm").value == 32 and at.number_input(key="seed").value == 3
    c = by_name(at)
    open_tab(at, 1)
    assert at.segmented_control(key="img").value == "sun_grass"
    assert at.segmented_control(key="patch").value == 8
    assert at.segmented_control(key="heads").value == 1 and at.slider(key="sharp").value == 10
    ref = decoder_oracle(tokenize(params["src"]), tokenize(params["tgt"]), 32, 3)
    np.testing.assert_allclose(grid(frame(c["xa"])), ref, atol=1e-5)
    _, ref = crossmodal_oracle("sun_grass", ["yellow", "sun"], patch=8, heads=1, sharp=10.0, seed=3)
    np.testing.assert_allclose(grid(frame(c["cm"])), ref, atol=1e-5)


SWEEP = [   # every widget at its extremes, several per run
    {"src": "", "words": ""},
    {"tgt": "", "dm": "8", "sharp": "0", "heads": "4"},
    {"src": " ".join(["tok"] * 300), "tgt": "字" * 300, "words": " ".join(["red"] * 300)},
    {"src": "😀 🎉 👍🏽", "tgt": "<script>alert(1)</script>", "dm": "128", "sharp": "40"},
    {"src": "猫坐在垫子上", "tgt": "The cat sat on the mat", "mode": EN["cross_attention.mode_random"]},
    {"img": EN["cross_attention.img_stripes"], "words": "green",
     "patch": EN["cross_attention.patch_option"].format(p=16, g=2)},
    {"img": EN["cross_attention.img_checker"], "words": "<b>red</b> 蓝", "seed": "9999"},
    {"img": EN["cross_attention.img_two_circles"], "words": "circles"},
    {"mode": "bogus", "img": "bogus", "patch": "bogus", "heads": "3", "dm": "12", "sharp": "-5"},
]


@pytest.mark.parametrize("params", SWEEP, ids=lambda p: ",".join(f"{k}={v[:10]}" for k, v in p.items()))
def test_every_control_at_its_extremes(params):
    at = open_page("cross_attention", "en", params)
    assert exceptions(at) == []
    warnings = " ".join(w.value for w in at.warning)
    open_tab(at, 1)                                   # the caption's words are read in the second tab
    assert exceptions(at) == []
    warnings += " ".join(w.value for w in at.warning)
    if "" in (params.get("src"), params.get("tgt"), params.get("words")):
        assert EN["common.err_empty"] in warnings
    if params.get("src", "").startswith("tok tok"):
        assert EN["common.warn_truncated"].format(n=300, max=24) in warnings
        assert EN["common.warn_truncated"].format(n=300, max=32) in warnings
        assert EN["common.warn_truncated"].format(n=300, max=12) in warnings
    if params.get("words") == "green":
        assert shows_label(all_text(at), "cross_attention.notice_absent", w="green")
        w = grid(frame(charts(at)[0]))
        np.testing.assert_allclose(w, 1 / 4, atol=1e-6)                         # 2 x 2 patches, uniform
    if "<script>" in params.get("tgt", ""):
        assert all("<script>" not in m.value for m in at.markdown)


def test_zh_defaults_use_chinese_caption():
    at = open_page("cross_attention", "zh")
    assert exceptions(at) == []
    words = tokenize(ZH["cross_attention.default_caption"])
    w = grid(frame(by_name(at)["cm"]))
    _, ref = crossmodal_oracle("circle_square", words)
    np.testing.assert_allclose(w, ref, atol=1e-5)
    open_tab(at, 1)
    assert "把 " in all_text(at) and "红" in all_text(at)


def test_a_clicked_row_is_kept_in_the_url():
    """?row_xa=1 (what a click on the second target row writes) opens the page on that row."""
    at = open_page("cross_attention", "en")
    first = [c.value for c in at.caption if c.value.startswith("Where")][0]
    at = open_page("cross_attention", "en", {"row_xa": "1"})
    assert exceptions(at) == []
    second = [c.value for c in at.caption if c.value.startswith("Where")][0]
    assert second != first
    heat = charts(at)[0]
    assert chart_spec(heat)["params"][0]["value"] == [{"query_pos": 1}]



def test_row_bars_keep_every_source_label(en):
    """Legible on a phone: the drilled row is horizontal bars, one label per source token, none hidden for overlap (the
    notices quote source tokens; a phone hid "animal" and "it" when they were rotated labels under vertical bars)."""
    spec = chart_spec(by_name(en)["xa_row"])
    y = spec["encoding"]["y"]
    assert y["field"] == "label" and y["axis"]["labelOverlap"] is False
    assert spec["encoding"]["x"]["field"] == "value"
    assert list(frame(by_name(en)["xa_row"])["label"]) == SRC

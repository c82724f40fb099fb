"""The positional-encoding page: opens in both languages, its charts hold the numbers attention_core
computes (checked against independent formulas here), its notices quote them, its URL reproduces it,
and no control value crashes it."""
import json
import math
import re

import numpy as np
import pytest

from attention_core.labs.positional import random_qk, shuffle_permutation, shuffle_test
from attention_core.positional import rotary_matrix, sinusoidal_encoding
from attention_core.text import tokenize
from tests.apptest_util import (
    all_text,
    chart_data,
    chart_spec,
    charts,
    exceptions,
    open_page,
    shows_label,
    title_text,
)
from ui.i18n import catalog

# the page's charts, in the order they are drawn when the sentence is usable
ORDER = ("pe", "bits", "wave", "offset", "gaps", "w_orig", "w_shuf", "gap_bars", "cmp_grid", "toeplitz",
         "rotation")
EN = catalog("en")
SENTENCE = EN["common.default_sentence"]


def by_name(at) -> dict:
    found = charts(at)
    assert len(found) == len(ORDER), [title_text(chart_spec(c)) for c in found]
    return dict(zip(ORDER, found))


def frame(chart):
    return chart_data(chart)["data"]


def grid(df, rows="query_pos", cols="key_pos") -> np.ndarray:
    return df.pivot(index=rows, columns=cols, values="value").to_numpy()


@pytest.fixture(scope="module")
def en():
    at = open_page("positional", "en")
    assert exceptions(at) == []
    return at


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_opens_without_exception(lang):
    at = open_page("positional", lang)
    assert exceptions(at) == []
    assert at.title[0].value == catalog(lang)["positional.title"]
    assert len(charts(at)) == len(ORDER)
    labels = [tab.label for tab in at.tabs]                   # the three sections are tabs, all drawn
    assert labels == [catalog(lang)[f"positional.{key}_title"] for key in ("table", "shuffle", "compare")]


def test_table_and_counter_charts_hold_the_formula(en):
    c = by_name(en)
    pe = grid(frame(c["pe"]))
    assert pe.shape == (48, 64)
    # oracle: the paper's formula cell by cell, in numpy
    pos = np.arange(48)[:, None]
    j = np.arange(64)[None, :]
    angle = pos / 10000.0 ** ((j - j % 2) / 64)
    np.testing.assert_allclose(pe, np.where(j % 2 == 0, np.sin(angle), np.cos(angle)), atol=1e-6)
    bits = grid(frame(c["bits"]))
    assert bits.shape == (48, 6)
    assert [int("".join(str(int(b)) for b in row[::-1]), 2) for row in bits] == list(range(48))  # it counts
    spec = chart_spec(c["pe"])
    assert spec["layer"][0]["encoding"]["color"]["scale"]["domain"] == [-1.0, 1.0]


def test_wave_and_offset_curves(en):
    c = by_name(en)
    wave = frame(c["wave"])
    sin = wave[wave["series"] == "sin · 4"].sort_values("position")["value"].to_numpy()
    np.testing.assert_allclose(sin, np.sin(np.arange(48) / 10000.0 ** (4 / 64)), atol=1e-6)
    bit = wave[wave["series"] == "bit 2"].sort_values("position")["value"].to_numpy()
    np.testing.assert_array_equal(bit, [1 if (p >> 2) & 1 else -1 for p in range(48)])
    off = frame(c["offset"])
    refs = sorted(off["reference"].unique())
    assert refs == ["reference p = 12", "reference p = 36"]
    a = off[off["reference"] == refs[0]].set_index("offset")["dot"]
    b = off[off["reference"] == refs[1]].set_index("offset")["dot"]
    common = a.index.intersection(b.index)
    assert len(common) > 20
    np.testing.assert_allclose(a[common].to_numpy(), b[common].to_numpy(), atol=1e-5)   # offset only
    # closed form sum_i cos(k w_i)
    w = 10000.0 ** (-np.arange(0, 64, 2) / 64)
    np.testing.assert_allclose(a.to_numpy(), np.cos(np.outer(a.index.to_numpy(), w)).sum(1), atol=1e-4)
    text = all_text(en)
    assert f"PE[12]·PE[12+3] = {a[3]:.4f}" in text and f"PE[36]·PE[36+3] = {b[3]:.4f}" in text


def test_shuffle_test_numbers(en):
    c = by_name(en)
    gaps = frame(c["gaps"]).set_index("name")["value"]
    tokens = tokenize(SENTENCE)
    ref = {e: float(shuffle_test(tokens, 32, e, seed=0, shuffle_seed=1, gain=2.0).gap.max())
           for e in ("none", "sinusoidal", "learned", "rotary")}
    assert gaps["none"] < 1e-5 and ref["none"] < 1e-5
    for e in ("sinusoidal", "rotary", "learned"):
        label = EN[f"positional.enc_{e}"]
        assert gaps[label] == pytest.approx(ref[e], rel=1e-5)
        assert gaps[label] > 1e-3
    text = all_text(en)
    assert shows_label(text, "positional.notice_none", sin=f"{ref['sinusoidal']:.3f}")
    # without positions the shuffled weights are the original ones with rows and columns permuted
    w = grid(frame(c["w_orig"]))
    ws = grid(frame(c["w_shuf"]))
    perm = shuffle_permutation(len(tokens), 1).numpy()
    np.testing.assert_allclose(ws, w[perm][:, perm], atol=1e-6)
    np.testing.assert_allclose(ws.sum(1), 1.0, atol=1e-5)
    assert (ws >= 0).all()
    per_word = frame(c["gap_bars"])["value"].to_numpy()
    assert per_word.max() == pytest.approx(gaps["none"], rel=1e-6)


def test_rotary_depends_on_offset_only(en):
    c = by_name(en)
    g = grid(frame(c["cmp_grid"]))
    assert g.shape == (32, 32)
    for off in range(-31, 32):
        d = np.diagonal(g, off)
        assert d.max() - d.min() < 1e-9
    q, k = random_qk(16, 0)
    expected = float((rotary_matrix(3, 16) @ q) @ (rotary_matrix(7, 16) @ k))
    metrics = {m.label: float(m.value) for m in en.metric}
    assert metrics["rotary q·k at (3, 7)"] == pytest.approx(expected, abs=1e-4)
    assert metrics["rotary q·k at (103, 107)"] == pytest.approx(expected, abs=1e-4)
    assert abs(metrics["added-PE q·k at (103, 107)"] - metrics["added-PE q·k at (3, 7)"]) > 0.1
    toe = frame(c["toeplitz"]).set_index("name")["value"]
    assert toe["rotary: q·k"] < 1e-9 and toe["learned (untrained)"] > 0.1


def test_url_reproduces_the_view():
    # option widgets keep their displayed label in the URL (Streamlit's binding), numbers their value
    params = {"n": "20", "d": "10", "base": "100", "pair": "1", "enc": EN["positional.enc_rotary"],
              "shuf": "3", "seed": "5", "text": "one two three four", "cmp": EN["positional.grid_learned"],
              "m": "10", "j": "4", "s": "7"}
    at = open_page("positional", "en", params)
    assert exceptions(at) == []
    assert at.slider(key="n").value == 20 and at.slider(key="d").value == 10
    assert at.select_slider(key="base").value == 100
    assert at.number_input(key="shuf").value == 3 and at.number_input(key="seed").value == 5
    assert at.text_input(key="text").value == "one two three four"
    assert at.segmented_control(key="enc").value == "rotary"
    assert at.segmented_control(key="cmp").value == "learned"
    c = by_name(at)
    pe = grid(frame(c["pe"]))
    np.testing.assert_allclose(pe, sinusoidal_encoding(20, 10, 100.0).numpy(), atol=1e-6)
    ws = grid(frame(c["w_shuf"]))
    ref = shuffle_test(["one", "two", "three", "four"], 32, "rotary", seed=5, shuffle_seed=3, gain=2.0)
    np.testing.assert_allclose(ws, ref.shuffled.weights.numpy(), atol=1e-6)
    assert title_text(chart_spec(c["cmp_grid"])) == EN["positional.grid_learned_title"]
    assert {m.label for m in at.metric} >= {"rotary q·k at (10, 4)", "rotary q·k at (17, 11)"}


def test_odd_d_model_shows_the_tutorial_error_and_works():
    at = open_page("positional", "en", {"d": "7"})
    assert exceptions(at) == []
    errors = [e.value for e in at.error]
    assert any("d_model = 7" in e and "3" in e for e in errors)           # the tutorial's RuntimeError
    assert "sinusoidal_encoding(4, 7) works: shape (4, 7)." in all_text(at)
    pe = grid(frame(by_name(at)["pe"]))
    np.testing.assert_allclose(pe, sinusoidal_encoding(48, 7).numpy(), atol=1e-6)
    assert "odd d_model = 7" in all_text(at)


def test_clicked_position_becomes_the_reference():
    """A clicked position is kept in the URL (?row_pe=5), so a link opens with that reference position."""
    at = open_page("positional", "en", {"row_pe": "5"})
    assert exceptions(at) == []
    refs = set(frame(by_name(at)["offset"])["reference"])
    assert refs == {"reference p = 5", "reference p = 29"}


SWEEP = [   # every widget at its extremes, several per run
    {"n": "2", "d": "1", "base": "10", "text": "", "m": "200", "j": "0", "s": "1000"},
    {"n": "128", "d": "128", "base": "100000", "text": " ".join(["tok"] * 300),
     "enc": EN["positional.enc_learned"], "shuf": "9999", "seed": "9999"},
    {"d": "2", "pair": "63", "text": "word", "m": "0", "j": "200", "s": "0",
     "cmp": EN["positional.grid_added"]},
    {"pair": "63", "text": "😀 🎉 👍🏽 ok", "enc": EN["positional.enc_sinusoidal"], "shuf": "0"},
    {"text": "猫坐在垫子上。", "base": "12345", "enc": "bogus", "cmp": "bogus"},
    {"text": "<script>alert(1)</script>", "enc": EN["positional.enc_rotary"]},
    {"text": "a a a", "n": "3", "d": "127"},
]


@pytest.mark.parametrize("params", SWEEP, ids=lambda p: ",".join(f"{k}={v[:12]}" for k, v in p.items()))
def test_every_control_at_its_extremes(params):
    at = open_page("positional", "en", params)
    assert exceptions(at) == []
    warnings = " ".join(w.value for w in at.warning)
    text = params.get("text")
    if text == "":
        assert EN["common.err_empty"] in warnings
    elif text == "word":
        assert EN["common.err_too_few"].format(n=1, min=2) in warnings
    elif text is not None and text.startswith("tok tok"):
        assert EN["common.warn_truncated"].format(n=300, max=24) in warnings
    if params.get("pair") == "63":
        d = int(params.get("d", 64))
        assert EN["positional.err_pair"].format(i=63, pairs=math.ceil(d / 2), d=d) in warnings
    if text == "a a a":
        assert EN["positional.err_same_order"] in warnings
    if text and "<script>" in text:
        assert "<script>" not in " ".join(m.value for m in at.markdown if "**" in m.value)


def test_zh_notices_quote_numbers():
    at = open_page("positional", "zh")
    text = all_text(at)
    assert shows_label(text, "positional.notice_offset", "zh")
    tokens = tokenize(catalog("zh")["common.default_sentence"])
    gap = float(shuffle_test(tokens, 32, "sinusoidal", seed=0, shuffle_seed=1, gain=2.0).gap.max())
    assert shows_label(text, "positional.notice_none", "zh", sin=f"{gap:.3f}")


# ------------------------------------------------------------------ every chart a verified chart kind
@pytest.mark.parametrize("params", [
    {"n": "100", "d": "7", "pair": "3", "row_pe": "70", "enc": "rotary", "cmp": "learned", "m": "0", "s": "0"},
    {"n": "2", "d": "1", "base": "10", "text": "a b", "enc": "learned", "row_shuf": "1"},
], ids=["long-odd", "tiny"])
def test_other_shapes_draw_verified_chart_kinds(params, monkeypatch):
    """Shapes the default run does not reach (more than 64 positions, odd d, 2 tokens): each chart is a
    chart kind whose filled spec equals the direct Altair build (ui.charts.VERIFY raises in the page
    otherwise). About 3 s."""
    from ui import charts as ui_charts
    monkeypatch.setattr(ui_charts, "VERIFY", True)
    at = open_page("positional", "en", params)
    assert exceptions(at) == []
    assert all("chart_kind" in chart_spec(c).get("usermeta", {}) for c in charts(at))
    assert len(charts(at)) == len(ORDER)


@pytest.mark.parametrize("n, row", [("4", None), ("2", None), ("16", "15")])
def test_the_offset_notice_quotes_two_real_dot_products(n, row):
    """A bug once: /positional?n=4 printed PE[3]·PE[3+1] = nan (the second reference had no position k
    further on). Whatever n and clicked reference, the notice quotes one offset k both positions can take,
    and the two dot products it quotes equal the formula's. About 4 s."""
    params = {"n": n} if row is None else {"n": n, "row_pe": row}
    at = open_page("positional", "en", params)
    assert exceptions(at) == []
    text = all_text(at)
    assert "nan" not in text
    (a, ka, dot_a, b, kb, dot_b) = re.search(
        r"PE\[(\d+)\]·PE\[\d+([+−]\d+)\] = (-?[\d.]+) and PE\[(\d+)\]·PE\[\d+([+−]\d+)\] = (-?[\d.]+)", text).groups()
    assert ka == kb
    k = int(ka.replace("−", "-"))
    pe = sinusoidal_encoding(int(n), 64).double().numpy()
    for p, dot in ((int(a), dot_a), (int(b), dot_b)):
        assert 0 <= p + k < int(n)
        assert float(dot) == pytest.approx(pe[p] @ pe[p + k], abs=1e-3)


# ------------------------------------------------------------------ legible: honest bars, legends, a phone
def test_gap_bars_are_linear_and_the_rope_legend_shows_the_dashes(en):
    """The gap bars are on a linear axis from 0 (a log axis made 2.4e-07 of rounding look 60 % as long as a
    real gap), the exact number next to each bar; the rotation's legend shows which arrows are dashed
    (shifted by s), in one column so "k at position 107" is not cut; the column pair is a number input."""
    c = by_name(en)
    for name in ("gaps", "gap_bars", "toeplitz"):
        spec = json.dumps(chart_spec(c[name]))
        assert '"log"' not in spec
        assert chart_spec(c[name])["layer"][0]["encoding"]["x"]["scale"]["domain"][0] == 0.0
    rot = chart_spec(c["rotation"])["layer"][0]["encoding"]
    assert rot["strokeDash"]["field"] == rot["color"]["field"] == "name"
    assert rot["strokeDash"]["scale"]["range"] == [[1, 0], [1, 0], [5, 3], [5, 3]]
    assert rot["color"]["legend"]["columns"] == 1
    assert en.number_input(key="pair").value == 2


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_presenter_mode_opens_the_tab_that_holds_the_current_step(lang):
    """Every tab of this page runs and holds steps (table 2-4, shuffle test 5-7, three encodings 8-9): in
    presenter mode the step's tab is the one open, from a lesson-plan link or after Next; opening another tab goes
    to its first step; the pitfalls after the tabs leave the tab as it is."""
    cat = catalog(lang)
    labels = [cat["positional.table_title"], cat["positional.shuffle_title"], cat["positional.compare_title"]]
    for step, tab in ((3, 0), (5, 1), (7, 1), (8, 2), (9, 2)):
        at = open_page("positional", lang, {"present": "1", "step": str(step)})
        assert exceptions(at) == []
        assert at.session_state["tab"] == labels[tab], step
        assert any(m.value == cat["common.present_step"].format(i=step, n=11) for m in at.markdown)
    at.session_state["tab"] = labels[1]        # the learner opens the shuffle tab while on step 9
    at.run()
    assert exceptions(at) == [] and at.query_params["step"] in ("5", ["5"])
    assert any(m.value == cat["common.present_step"].format(i=5, n=11) for m in at.markdown)
    at.query_params["step"] = "10"             # a pitfall after the tabs: no tab to open, no rerun loop
    at.run()
    assert exceptions(at) == [] and at.session_state["tab"] == labels[1]
    assert any(m.value == cat["common.present_step"].format(i=10, n=11) for m in at.markdown)

"""The long-context page shows what the checkpoints recorded and what the library computes: the accuracy-vs-length
charts hold the checkpoints' meta["eval"] figures, the wavelength chart 2 pi / theta_i' from the papers' formulas,
the logit chart the decoder's own first-layer logits, the ALiBi bias the formula; the notices quote those numbers;
the question comes before the evidence; URL values are clamped with a message; a missing checkpoint gets a message
and the rest still works. Runtime: about 30-60 s on the shared machine."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from attention_core.labs import long_context as lab
from attention_core.models import long_context_lm as lm
from attention_core.models import recipes
from tests.apptest_util import (
    all_text,
    chart_data,
    chart_spec,
    charts,
    exceptions,
    kinds_in_order,
    open_page,
    shows_label,
)
from ui.format import fixed, pct
from ui.i18n import catalog

L = lm.TRAIN_LEN
RECIPES = ("longctx_rope", "longctx_alibi", "longctx_nope", "longctx_learned")


def charts_of(at, kind: str) -> list:
    """The (chart, data) of every chart drawn by the chart kind ``kind``, in drawing order."""
    out = []
    for c in charts(at):
        if chart_spec(c).get("usermeta", {}).get("chart_kind", "").endswith(kind):
            out.append((c, next(iter(chart_data(c).values()))))
    return out


def series_names(lang: str) -> dict[str, str]:
    cat = catalog(lang)
    names = {f"longctx_rope:{m}": cat[f"long_context.method_{m}"] for m in lm.SCALINGS}
    names.update({f"longctx_{k}:none": cat[f"long_context.model_{k}"] for k in ("alibi", "nope", "learned")})
    return names


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_accuracy_charts_hold_the_recorded_figures_of_every_checkpoint(lang):
    at = open_page("long_context", lang)
    assert exceptions(at) == [] and not at.warning
    cat = catalog(lang)
    assert at.title[0].value == cat["long_context.title"]
    evals = {r: recipes.load_model(r).meta["eval"] for r in RECIPES}
    names = series_names(lang)
    lines = charts_of(at, "lines_chart")
    for (chart, frame), kind in zip(lines[:2], ("far", "near")):
        for key, name in names.items():
            recipe, method = key.split(":")
            shown = frame[(frame["series"] == name) & (frame["part"] == "line")].sort_values("x")
            accuracy = evals[recipe]["methods"][method][f"{kind}_accuracy"]
            recorded = [(n, a) for n, a in zip(evals[recipe]["lengths"], accuracy) if a is not None]
            assert shown["x"].tolist() == [n for n, _ in recorded]
            assert shown["y"].tolist() == pytest.approx([a for _, a in recorded])
        assert frame[frame["part"] == "rule"]["x"].tolist() == [L]
    # the question is posed before the first chart
    kinds = kinds_in_order(at)
    assert kinds.index("radio") < next(i for i, k in enumerate(kinds) if "vega_lite_chart" in k)
    options = at.radio[0].options
    assert len(options) == 3 and not any("{" in o for o in options) and str(L) in options[1]


def test_the_notice_quotes_the_recorded_accuracy_at_4L():
    at = open_page("long_context", "en")
    ev = recipes.load_model("longctx_rope").meta["eval"]
    i2, i4 = ev["lengths"].index(2 * L), ev["lengths"].index(4 * L)
    m = ev["methods"]
    assert shows_label(all_text(at), "long_context.notice_rope", n2=2 * L, n4=4 * L,
                       far2=pct(m["none"]["far_accuracy"][i2], 1), far4=pct(m["none"]["far_accuracy"][i4], 1),
                       near4=pct(m["none"]["near_accuracy"][i4], 1))
    assert shows_label(all_text(at), "long_context.notice_pi", n4=4 * L, far_pi=pct(m["linear"]["far_accuracy"][i4], 1),
                       near_pi=pct(m["linear"]["near_accuracy"][i4], 1), far_yarn=pct(m["yarn"]["far_accuracy"][i4], 1),
                       near_yarn=pct(m["yarn"]["near_accuracy"][i4], 1))


def test_the_wavelengths_follow_the_formulas_for_the_length_in_the_url():
    n = 128
    at = open_page("long_context", "zh", {"n": str(n), "method": "RoPE+NTK"})
    assert exceptions(at) == []
    loaded = recipes.load_model("longctx_rope")
    d_head = loaded.config["d_model"] // loaded.config["num_heads"]
    assert d_head == 16                                                    # the page's D_HEAD
    (_, frame), = charts_of(at, "wavelength_chart")
    cat = catalog("zh")
    s = n / L
    theta = np.array([10000.0 ** (-2 * i / d_head) for i in range(d_head // 2)])
    ntk = (10000.0 * s ** (d_head / (d_head - 2))) ** (-2 * np.arange(d_head // 2) / d_head)
    for method, expect in (("none", theta), ("linear", theta / s), ("ntk", ntk)):
        shown = frame[frame["method"] == cat[f"long_context.method_{method}"]].sort_values("pair")
        assert shown["wavelength"].to_numpy() == pytest.approx(2 * math.pi / expect)
    limits = frame[frame["part"] == "limit"]["wavelength"].tolist()
    assert sorted(limits) == [L, n]


def test_the_logit_chart_is_the_first_layer_of_the_shipped_model():
    at = open_page("long_context", "en", {"method": "RoPE+YaRN", "n": "192"})
    assert exceptions(at) == []
    lines = charts_of(at, "lines_chart")
    _, frame = lines[2]                                                   # far, near, then the logit chart
    model = lab.scaled_copy(recipes.load_model("longctx_rope").model, "yarn", 192 / L)
    vocab = lm.TASK.vocab
    block = model.blocks[0]
    with torch.no_grad():
        expect = torch.stack([block.attn.logits(block.ln1(model.embed(torch.tensor(
            [[vocab.stoi[c]] + [vocab.stoi["?"]] * 192]))))[0, :, 1:, 0] for c in lm.TOPICS]).mean(0)
    head1 = frame[(frame["series"] == "head 1") & (frame["part"] == "line")].sort_values("x")
    assert head1["x"].tolist() == list(range(1, 193))
    assert head1["y"].to_numpy() == pytest.approx(expect[0].numpy(), abs=1e-4)


def test_the_alibi_bias_follows_the_head_in_the_url():
    at = open_page("long_context", "en", {"head": "2"})
    assert exceptions(at) == []
    heat = [c for c in charts(at) if "heatmap" in chart_spec(c)["usermeta"]["chart_kind"]]
    frame = next(iter(chart_data(heat[0]).values()))
    assert recipes.load_model("longctx_alibi").config["num_heads"] == 4     # the page's ALIBI_HEADS
    visible = frame[~frame["masked"]]
    assert len(visible) == 12 * 13 // 2
    assert (visible["value"] == -(visible["query_pos"] - visible["key_pos"]) / 16).all()   # m_2 = 1/16 of 4 heads
    assert shows_label(all_text(at), "long_context.notice_alibi", m1=fixed(0.25, 3), m4=fixed(1 / 256, 4),
                       r1=fixed(4 * math.log(10), 0), r4=fixed(256 * math.log(10), 0), d=4 * L - 1,
                       pen=fixed((4 * L - 1) / 256, 2), fac=fixed(math.exp((4 * L - 1) / 256), 1))


def test_a_missing_checkpoint_gets_a_message_and_the_rest_still_works(tmp_path, monkeypatch):
    import shutil
    for r in RECIPES[1:]:
        shutil.copy(recipes.checkpoint_path(r), tmp_path / f"{r}.pt")
    (tmp_path / "longctx_rope.pt").write_bytes(b"damaged")
    monkeypatch.setattr(recipes, "MODELS_DIR", tmp_path)
    at = open_page("long_context", "en")
    assert exceptions(at) == []
    assert any("longctx_rope" in w.value for w in at.warning)
    assert charts_of(at, "wavelength_chart") and len(charts(at)) == 3   # wavelengths, slopes, bias


def test_bad_url_values_get_a_message_not_a_traceback():
    at = open_page("long_context", "zh", {"method": "<b>x</b>", "n": "1e400", "head": "-7"})
    assert exceptions(at) == []
    assert at.warning and any("\u4e00" <= ch <= "\u9fff" for ch in at.warning[0].value)
    assert all("<b>" not in m.value for m in at.markdown)
    assert charts_of(at, "wavelength_chart")


def test_presenter_mode_steps_through_the_lesson():
    at = open_page("long_context", "en", {"present": "1", "step": "4"})
    assert exceptions(at) == []
    steps = at.session_state["_present_steps_long_context"]
    assert steps == 8 and any(m.value == f"Step 4 of {steps}" for m in at.markdown)


def test_the_live_chart_is_the_shipped_model_measured_now_with_the_chosen_method():
    at = open_page("long_context", "en", {"method": "RoPE+PI", "n": "128"})
    assert exceptions(at) == []
    _, frame = charts_of(at, "lines_chart")[3]                            # far, near, logit, then the live chart
    live = lab.live_positions(recipes.load_model("longctx_rope").model, "linear", 128, sequences=16)
    mids = [(a + b - 1) / 2 for a, b in zip(live.edges[:-1], live.edges[1:])]
    for name, values in (("far: topic recall", live.far), ("near: digit rule", live.near)):
        shown = frame[(frame["series"] == name) & (frame["part"] == "line")].sort_values("x")
        kept = [(x, v) for x, v in zip(mids, values) if v is not None]
        assert shown["x"].tolist() == [x for x, _ in kept]
        assert shown["y"].tolist() == pytest.approx([v for _, v in kept], abs=1e-6)
    assert shows_label(all_text(at), "long_context.live_caption", method=catalog("en")["long_context.method_linear"],
                       seq=16, n=128, far=pct(live.far_all, 1), near=pct(live.near_all, 1), L=L)


def test_the_pitfall_demo_runs_only_when_opened_and_measures_pi_on_short_inputs():
    """Closed (the default) the demo computes and draws nothing (a rerun of the page does not redraw it: the
    redraw budget); opened (?pit_run=true) it shows near accuracy at the training length, plain and with PI at s = 4."""
    closed = open_page("long_context", "en")
    assert exceptions(closed) == []
    assert "(the training length)" not in all_text(closed)       # the demo's sentence
    at = open_page("long_context", "en", {"pit_run": "true"})
    assert exceptions(at) == []
    model = recipes.load_model("longctx_rope").model
    plain = lm.summary(lm.scores(model, L, sequences=16, seed=0), lm.Kinds.NEAR)[0]
    squeezed = lm.summary(lm.scores(lab.scaled_copy(model, "linear", 4.0), L, sequences=16, seed=0),
                          lm.Kinds.NEAR)[0]
    assert squeezed < plain - 0.2                                   # PI on short inputs squeezes the near rule
    assert shows_label(all_text(at), "long_context.pit_demo", L=L, plain=pct(plain, 1), squeezed=pct(squeezed, 1),
                       seq=16)


def test_a_change_of_method_or_length_sends_new_data_to_the_same_charts():
    """The browser re-embeds a chart whose spec changed (Vega parses and lays it out anew) and only swaps the
    data of one whose spec stayed the same (the redraw budget): the three charts the method and length drive keep their
    spec, titles included (the length and the method are in the captions and notices)."""
    specs, rows = [], []
    for params in ({"method": "RoPE", "n": "128"}, {"method": "RoPE+YaRN", "n": "256"}):
        at = open_page("long_context", "en", params)
        assert exceptions(at) == []
        drawn = charts_of(at, "wavelength_chart") + charts_of(at, "lines_chart")[2:]     # waves, logit, live
        specs.append([chart_spec(c) for c, _ in drawn])
        rows.append([len(frame) for _, frame in drawn])
        assert shows_label(all_text(at), "long_context.live_caption", method=catalog("en")[
            "long_context.method_" + ("none" if params["n"] == "128" else "yarn")], n=int(params["n"]))
    assert len(specs[0]) == 3 and specs[0] == specs[1]
    assert rows[0][1:] != rows[1][1:]                                   # new data: 128 and 256 distances

"""The attention-analysis page in AppTest: entropy and sparsity per head equal a computation done here
sentence by sentence without padding; the tutorial's analyser equals its code typed out on the padded
batch; pattern shares equal the classifier run here; geometry, every head and rollout equal the model's
weights recomputed here; notices quote the charts; every widget at its extremes; the URL."""
import math
import random
import re

import numpy as np
import pandas as pd
import pytest
import torch

from attention_core.analysis import PATTERNS, classify_heads, qk_geometry
from attention_core.models.pronoun import make_pronoun_batch, resolve
from attention_core.models.recipes import load_model
from attention_core.models.tasks import make_pronoun_example, pronoun_text
from tests.apptest_util import (
    all_text,
    chart_data,
    chart_spec,
    chart_titled,
    charts,
    exceptions,
    open_page,
    shows_label,
    title_text,
)
from ui.i18n import catalog

EN, ZH = catalog("en"), catalog("zh")


@pytest.fixture(scope="module")
def lm():
    return load_model("pronoun")


def examples(seed, b, langs=("en", "zh")):
    """The page's batch, generated here from the task's own generator."""
    rng = random.Random(seed)
    return [make_pronoun_example(rng, lang=langs[i % len(langs)]) for i in range(b)]


def per_sentence(lm, exs):
    """Each sentence run alone (no padding): list of (L, h, n, n) float64 arrays."""
    return [torch.stack(resolve(lm.model, e, lm.src_vocab).weights).double().numpy() for e in exs]


def oracle_stats(runs, tau, normalize=False):
    ent = sum(_entropy(w).sum(-1) / (math.log(w.shape[-1]) if normalize else 1) for w in runs)
    spa = sum((w < tau).mean(-1).sum(-1) for w in runs)
    rows = sum(w.shape[-1] for w in runs)
    return ent / rows, spa / rows


def _entropy(w):
    return -np.where(w > 0, w * np.log(np.where(w > 0, w, 1.0)), 0.0).sum(-1)


titled = chart_titled          # the shared lookup (tests.apptest_util)
STATS, PATTERNS_TAB, SENTENCE = range(3)   # the page's tabs (lazy: only the open one runs and draws)


def tab(at, i: int):
    """Open the page's i-th tab (as a click does) and rerun."""
    at.session_state["tab"] = at.tabs[i].label
    at.run()
    assert exceptions(at) == []
    return at


def frame(chart):
    frames = [f for f in chart_data(chart).values() if len(f)]
    return frames[0] if len(frames) == 1 else frames


def matrix(chart):
    f = frame(chart)
    out = np.full((f["query_pos"].max() + 1, f["key_pos"].max() + 1), np.nan)
    out[f["query_pos"], f["key_pos"]] = f["value"].astype(float)
    return out


def notice(at):
    return "\n".join(m.value for m in at.markdown if m.value.startswith("- "))


# ---------------------------------------------------------------- per-head statistics
@pytest.mark.parametrize("lang", ["en", "zh"])
def test_entropy_and_sparsity_equal_a_sentence_by_sentence_computation(lm, lang):
    at = open_page("analysis", lang)
    assert exceptions(at) == []
    cat = catalog(lang)
    assert cat["analysis.title"] in [x.value for x in at.title]
    exs = examples(0, 64)
    ent, spa = oracle_stats(per_sentence(lm, exs), 0.1)
    top = math.log(max(len(e.tokens) for e in exs))
    e_chart = matrix(titled(at, cat["analysis.entropy_title"].format(top=f"{top:.2f}")))
    s_chart = matrix(titled(at, cat["analysis.sparsity_title"].format(tau="0.10")))
    assert e_chart.shape == (2, 4) and np.allclose(e_chart, ent, atol=1e-5)
    assert np.allclose(s_chart, spa, atol=1e-5)
    # the notice quotes the most focused head and its entropy from the chart
    lo = int(e_chart.argmin())
    m = re.search(r"\*\*(L\d·H\d)\*\*[^*]*\*\*([\d.]+)\*\*", notice(at))
    assert m and m.group(1) == f"L{lo // 4 + 1}·H{lo % 4 + 1}" and float(m.group(2)) == pytest.approx(
        e_chart.min(), abs=0.005)


def test_url_sets_batch_language_threshold_and_normalisation(lm):
    at = open_page("analysis", "en", {"b": "16", "seed": "3", "mix": "中文", "tau": "0.3", "norm": "true"})
    assert exceptions(at) == []
    assert (at.slider(key="b").value, at.number_input(key="seed").value, at.slider(key="tau").value) == (16, 3, 0.3)
    assert at.button_group(key="mix").value == "zh" and at.toggle(key="norm").value is True
    exs = examples(3, 16, ("zh",))
    ent, spa = oracle_stats(per_sentence(lm, exs), 0.3, normalize=True)
    assert np.allclose(matrix(titled(at, EN["analysis.entropy_title_norm"].format(top="1.00"))), ent, atol=1e-5)
    assert np.allclose(matrix(titled(at, EN["analysis.sparsity_title"].format(tau="0.30"))), spa, atol=1e-5)
    assert tab(at, SENTENCE).selectbox(key="ex").options[0].startswith("#1 · " + pronoun_text(exs[0].tokens, "zh"))


def test_the_tutorials_analyser_is_its_code_on_the_padded_batch(lm):
    at = open_page("analysis", "en")
    compare = [EN[f"analysis.compare_{kind}"].format(tau="0.10") for kind in ("entropy", "sparsity")]
    assert not [c for c in charts(at) if title_text(chart_spec(c)) in compare]    # the demo: drawn when opened
    assert not [c for c in charts(at) if any("version_pos" in f for f in chart_data(c).values())]
    at = open_page("analysis", "en", {"an_pit": "true"})
    exs = examples(0, 64)
    batch = make_pronoun_batch(exs, lm.src_vocab)
    with torch.no_grad():
        weights = lm.model.encoder(batch.tokens).weights     # self.model(batch[0]): no mask, as the tutorial
    seed_e, seed_s = [], []
    for attn in weights:                                      # the second tutorial, typed out
        attn_flat = attn.view(-1, attn.size(-1))
        seed_e.append((-torch.sum(attn_flat * torch.log(attn_flat + 1e-8), dim=-1)).mean().item())
        seed_s.append((attn < 0.1).float().mean().item())
    ent, spa = oracle_stats(per_sentence(lm, exs), 0.1)
    for kind, seed_vals, ours in (("entropy", seed_e, ent.mean(1)), ("sparsity", seed_s, spa.mean(1))):
        f = frame(titled(at, EN[f"analysis.compare_{kind}"].format(tau="0.10")))
        got = f.pivot_table(index="version_pos", columns="layer_pos", values="value").to_numpy()
        assert np.allclose(got[0], seed_vals, atol=1e-5) and np.allclose(got[1], ours, atol=1e-5)
    text = all_text(at)
    # the weight real query rows give the padded keys without a mask, per layer: the page quotes the largest
    real = torch.arange(batch.tokens.size(1)) < batch.lengths[:, None]                     # (b, n)
    on_pad = [float((w.sum(1) * (~real)[:, None, :]).sum(-1)[real].sum() / (4 * real.sum())) for w in weights]
    assert max(on_pad) > 0.05                                  # padding takes a visible share of the attention
    assert shows_label(text, "analysis.pit_body", seed_rows=64 * 4 * batch.tokens.size(1),
                       real=int(batch.lengths.sum()) * 4, pad=f"{100 * max(on_pad):.0f}%")


# ---------------------------------------------------------------- patterns, every head, geometry, rollout
def test_pattern_shares_and_every_head_of_one_sentence(lm):
    at = open_page("analysis", "en")
    exs = examples(0, 64)
    runs = per_sentence(lm, exs)
    counts = np.zeros((8, len(PATTERNS)))
    for w in runs:
        for layer in range(2):
            for head, (label, _) in enumerate(classify_heads(torch.from_numpy(w[layer]).float())):
                counts[layer * 4 + head, PATTERNS.index(label)] += 1
    assert not [c for c in charts(at) if "facet" in chart_spec(c)]       # lazy tabs: only the first one drew
    shares = matrix(titled(tab(at, PATTERNS_TAB), EN["analysis.patterns_title"].format(b=64)))
    assert np.allclose(shares, counts / 64, atol=1e-9)
    table = at.dataframe[0].value
    assert list(table[EN["analysis.col_label"]]) == [EN[f"analysis.pattern_{PATTERNS[k]}"]
                                                      for k in counts.argmax(1)]
    grid = [c for c in charts(tab(at, SENTENCE)) if "facet" in chart_spec(c)][0]
    f = frame(grid)
    n = len(exs[0].tokens)
    for panel in range(8):
        one = f[f["head"] == panel + 1]
        m = np.full((n, n), np.nan)
        m[one["query_pos"], one["key_pos"]] = one["value"]
        assert np.allclose(m, runs[0][panel // 4, panel % 4], atol=1e-5)


def test_a_new_batch_size_beyond_the_first_chunk_shows_that_prefix_of_the_batch(lm):
    """The page classifies and runs the largest batch once and cuts a prefix: after moving the slider
    to a size that spans two chunks, every chart equals that batch computed here from scratch."""
    at = open_page("analysis", "en", {"an_pit": "true"})         # the pitfall's demo open: its charts too
    at.slider(key="b").set_value(70).run()
    assert exceptions(at) == []
    exs = examples(0, 70)
    runs = per_sentence(lm, exs)
    ent, spa = oracle_stats(runs, 0.1)
    top = math.log(max(len(e.tokens) for e in exs))
    assert np.allclose(matrix(titled(at, EN["analysis.entropy_title"].format(top=f"{top:.2f}"))), ent, atol=1e-5)
    assert np.allclose(matrix(titled(at, EN["analysis.sparsity_title"].format(tau="0.10"))), spa, atol=1e-5)
    counts = np.zeros((8, len(PATTERNS)))
    for w in runs:
        for layer in range(2):
            for head, (label, _) in enumerate(classify_heads(torch.from_numpy(w[layer]).float())):
                counts[layer * 4 + head, PATTERNS.index(label)] += 1
    f = frame(titled(at, EN["analysis.compare_sparsity"].format(tau="0.10")))
    assert np.allclose(matrix(titled(tab(at, PATTERNS_TAB), EN["analysis.patterns_title"].format(b=70))),
                       counts / 70, atol=1e-9)
    batch = make_pronoun_batch(exs, lm.src_vocab)             # the tutorial's analyser on this padded batch
    with torch.no_grad():
        weights = lm.model.encoder(batch.tokens).weights      # run as the tutorial runs it: no mask
    seed_s = [(attn < 0.1).float().mean().item() for attn in weights]
    got = f.pivot_table(index="version_pos", columns="layer_pos", values="value").to_numpy()
    assert np.allclose(got[0], seed_s, atol=1e-6) and np.allclose(got[1], spa.mean(1), atol=1e-5)


def test_geometry_of_a_trained_head_from_the_models_own_projections(lm):
    at = open_page("analysis", "en", {"head": "L1·H3"})
    assert exceptions(at) == []
    e = examples(0, 1)[0]
    enc = lm.model.encoder
    tokens = torch.tensor([lm.src_vocab.encode(e.tokens)])
    with torch.no_grad():
        x = enc.embed(tokens) + enc.pe[: tokens.size(1)]      # the first layer's input (post-LN)
        mha = enc.layers[0].self_attn
        q = mha.W_query(x)[0].view(-1, 4, 16)[:, 2]           # head 3: dimensions 32..47
        k = mha.W_key(x)[0].view(-1, 4, 16)[:, 2]
    w = torch.softmax(q @ k.T / 4.0, -1)
    g = qk_geometry(q, k)
    tab(at, SENTENCE)
    assert f'**{EN["analysis.geo_title"].format(head="L1·H3", q="it")}**' in [m.value for m in at.markdown]
    chart = next(c for c in charts(at) if "link" in chart_data(c))          # the q/k plane
    frame = pd.concat(chart_data(chart).values())  # one frame: layers filter their piece
    keys = frame[(frame["kind"] == "key") & (frame.get("piece", "keys") == "keys")].sort_values("pos")
    assert np.allclose(keys[["x", "y"]].to_numpy(), g.keys.numpy(), atol=1e-4)
    assert np.allclose(keys["weight"].to_numpy(), w[e.pronoun].numpy(), atol=1e-5)
    assert np.allclose(w.numpy(), resolve(lm.model, e, lm.src_vocab).weights[0][2].numpy(), atol=1e-5)


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_default_head_is_the_one_that_finds_the_referent_over_the_batch(lm, lang):
    """Without a choice, the geometry shows the head whose attention from "it" most often weighs the
    referent more than the other noun over the page's batch (recomputed here sentence by sentence), and
    the patterns notice quotes it and its fraction."""
    at = open_page("analysis", lang)
    assert exceptions(at) == []
    agree = np.zeros((2, 4))
    exs = examples(0, 64)
    for e in exs:
        f = resolve(lm.model, e, lm.src_vocab).from_pronoun
        agree += (f[..., e.referent] > f[..., e.nouns[1 - e.label]]).double().numpy()
    agree /= len(exs)
    layer, head = divmod(int(agree.argmax()), 4)
    assert agree.max() >= 0.9 and layer == 1
    name = f"L{layer + 1}·H{head + 1}"
    text = "\n".join(m.value for m in tab(at, PATTERNS_TAB).markdown if m.value.startswith("- "))
    assert f"**{name}**" in text and f"**{100 * agree.max():.0f}%**" in text
    tab(at, SENTENCE)
    assert at.selectbox(key="head").placeholder == catalog(lang)["analysis.auto"].format(x=name)
    assert f'**{catalog(lang)["analysis.geo_title"].format(head=name, q="it")}**' in [m.value for m in at.markdown]


def test_rollout_equals_a_numpy_rollout_of_the_models_weights(lm):
    at = open_page("analysis", "en")
    w = per_sentence(lm, examples(0, 1))[0]                  # (L, h, n, n)
    n = w.shape[-1]
    r = np.eye(n)
    for layer in w:
        a = layer.mean(0) + np.eye(n)
        r = (a / a.sum(-1, keepdims=True)) @ r
    roll = matrix(titled(tab(at, SENTENCE), EN["analysis.rollout_title"].format(n=2)))
    assert np.allclose(roll, r, atol=1e-5) and np.allclose(roll.sum(-1), 1, atol=1e-5)
    last = matrix(titled(at, EN["analysis.last_title"].format(n=2)))
    assert np.allclose(last, w[-1].mean(0), atol=1e-5)
    it = examples(0, 1)[0].pronoun
    m = re.search(r"keeps \*\*([\d.]+)\*\* on", notice(at))
    assert m and float(m.group(1)) == pytest.approx(r[it, it], abs=0.005)


def test_the_exercise_answer_follows_the_batch():
    at = open_page("analysis", "en")          # tau 0.1, lengths 10..13: an even head is sparse on 11+ tokens
    lengths = np.array([len(e.tokens) for e in examples(0, 64)])
    share = (lengths * (lengths > 10)).sum() / lengths.sum()
    answer = 0 if share == 0 else 2 if share == 1 else 1
    m = re.search(r"would score \*\*([\d.]+)\*\*", notice(at))
    assert m and float(m.group(1)) == pytest.approx(share, abs=0.005)
    at.radio(key="an_ex_guess").set_value(answer).run()
    at.button(key="an_ex_reveal").click().run()
    assert [s.value for s in at.success] == [EN["common.correct"]]


# ---------------------------------------------------------------- every widget at its extremes
def test_sweep_every_widget_over_its_extremes():
    at = open_page("analysis", "en")
    steps = [("slider", "b", 1), ("slider", "b", 512), ("slider", "tau", 0.01), ("slider", "tau", 0.5),
             ("number_input", "seed", 9999), ("button_group", "mix", "en"), ("button_group", "mix", "zh"),
             ("toggle", "norm", True), ("slider", "b", 64), ("number_input", "seed", 0),
             ("button_group", "mix", "both"), ("slider", "tau", 0.1)]
    for kind, key, value in steps:
        getattr(at, kind)(key=key).set_value(value).run()
        assert exceptions(at) == [], (key, value)
    for i in (PATTERNS_TAB, STATS):
        tab(at, i)                                   # each tab at the last settings
    tab(at, SENTENCE)
    for key in ("ex", "head", "q"):
        box = at.selectbox(key=key)
        for index in (0, len(box.options) - 1):
            at.selectbox(key=key).select_index(index).run()
            assert exceptions(at) == [], (key, index)
    at.slider(key="b").set_value(1).run()
    assert exceptions(at) == [] and len(at.selectbox(key="ex").options) == 1


def test_a_link_in_one_language_opens_in_the_other():
    at = open_page("analysis", "zh", {"mix": "English", "b": "8", "head": "L2·H1"})
    assert exceptions(at) == []
    assert at.button_group(key="mix").value == "en" and tab(at, SENTENCE).selectbox(key="head").value == 4
    assert ZH["analysis.title"] in [x.value for x in at.title]


def test_compare_chart_is_valid_vega_lite(monkeypatch):
    from ui import charts as ui_charts
    from ui.analysis_charts import compare_bars
    monkeypatch.setattr(ui_charts, "VERIFY", True)     # also built directly by Altair and validated by the schema
    spec = compare_bars([[1.0, 2.0], [0.5, 1.5]], ["a", "b"], ["l1", "l2"], title="t", layer_title="l",
                        value_title="v", version_title="ver", domain=(0, 1))
    assert list(spec["datasets"]["data"]["value"]) == [1.0, 2.0, 0.5, 1.5]
    assert spec["layer"][0]["encoding"]["x"]["sort"] == ["l1", "l2"] and spec["title"] == "t"


def test_every_head_grid_fits_a_phone_and_hides_no_label():
    """Legible on a phone (fast, no page): two columns of panels (2 x 132 px for 12 tokens, within a phone's 358 px with
    the labels), vertical key labels 11 px apart, none hidden for overlap, the legend below."""
    from ui.analysis_charts import heads_grid
    tokens = "The animal didn't cross the street because it was too tired .".split()
    spec = heads_grid(np.full((8, 12, 12), 1 / 12), tokens, titles=[f"h{i}" for i in range(8)], x_title="key",
                      y_title="query", value_title="weight", panel_title="head")
    assert spec["columns"] == 2 and spec["spec"]["width"] == spec["spec"]["height"] == 132
    enc = spec["spec"]["encoding"]
    assert enc["x"]["axis"]["labelAngle"] == -90 and enc["x"]["axis"]["labelOverlap"] is False
    assert enc["y"]["axis"]["labelOverlap"] is False and enc["color"]["legend"]["orient"] == "bottom"

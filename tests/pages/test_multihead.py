"""The multi-head attention page in AppTest: what its charts contain (checked against
torch.nn.MultiheadAttention with the same weights and against attention_core.analysis computed
here), its notices, the divisibility message, every widget at its extremes, and the URL."""
import json
import re

import numpy as np
import pytest
import torch
from torch import nn

from attention_core.analysis import PATTERNS, classify_heads, head_similarity, qk_geometry, synthetic_pattern
from attention_core.labs.multihead import build_mha, model_input
from attention_core.modules import MultiHeadAttention
from attention_core.text import tokenize
from tests.apptest_util import (
    all_text,
    chart_data,
    chart_spec,
    chart_titled,
    charts,
    exceptions,
    label_pattern,
    open_page,
    presenter_steps,
    shows_label,
    title_text,
)
from ui.i18n import catalog

EN, ZH = catalog("en"), catalog("zh")
TOKENS = tokenize(EN["common.default_sentence"])
IT = TOKENS.index("it")


def tab(lang: str, name: str) -> dict:
    return {"tab": catalog(lang)[f"multihead.{name}"]}


def frame_of(chart):
    return next(iter(chart_data(chart).values()))


def pieces(chart) -> dict:
    """A chart's datasets; a frame that keeps several pieces (column ``piece``) split into one frame each."""
    out = {}
    for name, frame in chart_data(chart).items():
        if "piece" not in frame.columns:
            out[name] = frame
            continue
        for piece in frame["piece"].unique():
            out[piece] = frame[frame["piece"] == piece].dropna(axis=1, how="all").reset_index(drop=True)
    return out


def grid_chart(at):
    found = [c for c in charts(at) if "facet" in chart_spec(c)
             and any(p.get("name") == "head" for p in chart_spec(c).get("params", []))]
    assert len(found) == 1
    return found[0]


def matrix(frame, n_q=None, n_k=None) -> np.ndarray:
    n_q = n_q or frame["query_pos"].max() + 1
    n_k = n_k or frame["key_pos"].max() + 1
    out = np.full((n_q, n_k), np.nan)
    out[frame["query_pos"], frame["key_pos"]] = frame["value"].astype(float)
    return out


def oracle(mode="structured", d_model=64, heads=8, seed=0, tokens=TOKENS):
    """Weights of the page's model recomputed by torch.nn.MultiheadAttention with copied weights."""
    mine, recipes = build_mha(mode, d_model, heads, seed)
    t = nn.MultiheadAttention(d_model, heads, batch_first=True)
    with torch.no_grad():
        t.in_proj_weight.copy_(torch.cat([mine.W_query.weight, mine.W_key.weight, mine.W_value.weight]))
        t.in_proj_bias.copy_(torch.cat([mine.W_query.bias, mine.W_key.bias, mine.W_value.bias]))
        t.out_proj.weight.copy_(mine.W_output.weight)
        t.out_proj.bias.copy_(mine.W_output.bias)
    x = model_input(tokens, d_model, seed)
    _, w = t.eval()(x, x, x, need_weights=True, average_attn_weights=False)
    return w[0].detach(), mine, x, recipes


# ---------------------------------------------------------------- the default view, both languages
@pytest.mark.parametrize("lang", ["en", "zh"])
def test_every_head_matches_torch_and_the_enlarged_head_and_drill_agree(lang):
    at = open_page("multihead", lang)
    assert exceptions(at) == []
    cat = catalog(lang)
    assert cat["multihead.title"] in [x.value for x in at.title]
    tokens = tokenize(cat["common.default_sentence"])                  # each language has its own sentence
    it = tokens.index({"en": "it", "zh": "它"}[lang])
    w, *_ = oracle(tokens=tokens)
    n = len(tokens)
    grid = frame_of(grid_chart(at))
    assert sorted(grid["head"].unique()) == list(range(1, 9))            # ALL heads, not four
    assert len(grid) == 8 * n * n
    for h in range(8):
        m = matrix(grid[grid["head"] == h + 1])
        assert np.allclose(m.sum(-1), 1.0, atol=1e-5)
        assert np.allclose(m, w[h].numpy(), atol=1e-5)
    # the panel titles carry the classifier's label of each head
    labels = [label for label, _ in classify_heads(w)]
    panels = list(dict.fromkeys(grid.sort_values("head")["panel"]))
    for h, (title, label) in enumerate(zip(panels, labels)):
        assert f"{h + 1}" in title and cat[f"multihead.short_{label}"] in title     # small panels: short names
    # enlarged head 1 (previous token) and the drill-down of the default query "it"
    big = chart_titled(at, cat["multihead.big_title"].format(head=1, recipe=cat["multihead.recipe_previous"]))
    assert np.allclose(matrix(frame_of(big)), w[0].numpy(), atol=1e-5)
    assert (matrix(frame_of(big))[1:].argmax(-1) == np.arange(n - 1)).all()   # each token -> the one before
    drill = chart_titled(at, cat["multihead.drill_title"].format(q=tokens[it]))
    assert np.allclose(matrix(frame_of(drill)), w[:, it, :].numpy(), atol=1e-5)
    text = all_text(at)
    assert cat["multihead.mode_structured_banner"].split("**")[0] in text  # the mode shown is said plainly


def test_notice_quotes_the_numbers_on_screen():
    at = open_page("multihead", "en")
    w, *_ = oracle()
    notice = "\n".join(m.value for m in at.markdown if m.value.startswith("- "))
    # averaging: head 1, "it" -> "because"
    k = int(w[0, IT].argmax())
    assert TOKENS[k] == "because"
    m = re.search(label_pattern("multihead.notice_average", head="1", q="it", k="because", w_head=r"[\d.]+",
                                w_avg=r"[\d.]+"), notice)
    assert m and float(m.group("w_head")) == pytest.approx(float(w[0, IT, k]), abs=0.005)
    assert float(m.group("w_avg")) == pytest.approx(float(w.mean(0)[IT, k]), abs=0.005)
    # what the average hides, row by row: the notice quotes it (the averaging pitfall below points to it)
    m = re.search(label_pattern("multihead.notice_average", avg_max=r"[\d.]+", head_max=r"[\d.]+"), notice)
    assert m and float(m.group("avg_max")) == pytest.approx(float(w.mean(0).max(-1).values.mean()), abs=0.005)
    assert float(m.group("head_max")) == pytest.approx(float(w.max(-1).values.mean(-1).max()), abs=0.005)
    assert float(m.group("head_max")) > float(m.group("avg_max"))
    # parameters: one head = h heads = 4 (d^2 + d)
    total = MultiHeadAttention(64, 1).parameter_count()
    assert total == 4 * (64 * 64 + 64) and f"**{total:,}** parameters, 8 heads have **{total:,}**" in notice
    # head similarity: the most / least alike pair
    js = head_similarity(w).numpy()
    off = js + np.diag(np.full(8, np.inf))
    a, b = np.unravel_index(off.argmin(), off.shape)
    m = re.search(label_pattern("multihead.notice_js", a=r"\d+", b=r"\d+", near=r"[\d.]+", c=r"\d+", d=r"\d+",
                                far=r"[\d.]+"), notice)
    assert m and {int(m.group("a")), int(m.group("b"))} == {a + 1, b + 1}
    assert float(m.group("near")) == pytest.approx(js[a, b], abs=0.005)
    assert float(m.group("far")) == pytest.approx((js - np.diag(np.full(8, np.inf))).max(), abs=0.005)
    # the classifier recognises the five heads built as gallery patterns
    assert shows_label(notice, "multihead.notice_classifier_structured", ok=5, planted=5)
    assert "`(1, 8, 12, 8)`" in notice and "`(1, 12, 64)`" in notice


# ---------------------------------------------------------------- the other tabs
def test_shapes_tab_live_shapes_split_and_parameters():
    at = open_page("multihead", "en", tab("en", "tab_shapes") | {"d": "48", "h": "6"})
    assert exceptions(at) == []
    shapes = at.table[0].value
    got = list(shapes[EN["multihead.col_shape"]])
    n = len(TOKENS)
    assert got == [str(s) for s in [(1, n, 48), (1, n, 48), (1, n, 6, 8), (1, 6, n, 8), (1, 6, n, n),
                                    (1, 6, n, n), (1, 6, n, 8), (1, n, 48), (1, n, 48)]]
    params = at.table[1].value
    totals = params[params[""] == EN["multihead.param_module"]].iloc[0].tolist()[1:]
    assert totals == [f"{MultiHeadAttention(48, h).parameter_count():,}" for h in (1, 6)]
    assert totals[0] == totals[1]
    # the split chart: the query vector of "it", 48 numbers, block of 8 per head
    _, mine, x, _ = oracle(d_model=48, heads=6)
    split = [c for c in charts(at) if "vconcat" in chart_spec(c)][0]
    frames = [f for f in pieces(split).values() if "dim" in f.columns]
    f = frames[0].sort_values("dim")
    assert len(f) == 48 and (f["head"].to_numpy() == np.arange(48) // 8 + 1).all()
    q_it = mine.W_query(x)[0, IT].detach().numpy()
    assert np.allclose(f["value"].to_numpy(), q_it, atol=1e-5)


def test_compare_tab_js_distance_and_average():
    at = open_page("multihead", "en", tab("en", "tab_compare"))
    assert exceptions(at) == []
    w, *_ = oracle()
    js = matrix(frame_of(chart_titled(at, EN["multihead.js_title"])))
    assert np.allclose(js, head_similarity(w).numpy(), atol=1e-5)
    assert np.allclose(np.diag(js), 0.0, atol=1e-6) and np.allclose(js, js.T, atol=1e-6)
    avg = matrix(frame_of(chart_titled(at, EN["multihead.avg_title"].format(h=8))))
    assert np.allclose(avg, w.mean(0).numpy(), atol=1e-5) and np.allclose(avg.sum(-1), 1.0, atol=1e-5)


def test_gallery_tab_patterns_and_classifier_scores():
    at = open_page("multihead", "en", tab("en", "tab_gallery"))
    assert exceptions(at) == []
    n = len(TOKENS)
    facets = [c for c in charts(at) if "facet" in chart_spec(c)]
    gallery = frame_of(facets[0])
    for i, name in enumerate(PATTERNS):
        assert np.allclose(matrix(gallery[gallery["head"] == i + 1]), synthetic_pattern(name, n).numpy())
    w, _, _, recipes = oracle()
    scores = matrix(frame_of(chart_titled(at, EN["multihead.scores_title"])))   # patterns x heads
    classes = classify_heads(w)
    assert np.allclose(scores, np.array([[s[p] for p in PATTERNS] for _, s in classes]).T, atol=1e-6)
    table = at.table[0].value
    assert list(table[EN["multihead.col_label"]]) == [EN[f"multihead.pattern_{lab}"] for lab, _ in classes]
    assert list(table[EN["multihead.col_planted"]]) == [EN[f"multihead.recipe_{r}"] for r in recipes]


def test_geometry_tab_query_sits_on_its_most_weighted_key():
    at = open_page("multihead", "en", tab("en", "tab_geometry"))
    assert exceptions(at) == []
    w, mine, x, _ = oracle()
    title = EN["multihead.geo_chart"].format(head=1, q="it").split("; ")      # drawn as two lines
    data = pieces(chart_titled(at, title))
    keys = [f for f in data.values() if "kind" in f.columns and (f["kind"] == "key").all()][0]
    keys = keys.sort_values("pos")
    me = [f for f in data.values() if "chosen" in f.columns and len(f) == 1][0]
    q = mine.split_heads(mine.W_query(x))[0, 0].detach()
    k = mine.split_heads(mine.W_key(x))[0, 0].detach()
    g = qk_geometry(q, k)
    assert np.allclose(keys[["x", "y"]].to_numpy(), g.keys.numpy(), atol=1e-4)
    assert np.allclose(keys["weight"].to_numpy(), w[0, IT].numpy(), atol=1e-5)
    assert bool(me["chosen"].iloc[0]) and me["token"].iloc[0] == "it"
    because = keys[keys["token"] == "because"]
    # the planted "previous token" head: q_it equals k_because, so they coincide in the plane
    assert np.allclose(me[["x", "y"]].to_numpy(), because[["x", "y"]].to_numpy(), atol=1e-3)
    assert "number 1 by distance" in all_text(at)


# ---------------------------------------------------------------- bad settings, bad input, extremes
@pytest.mark.parametrize("lang", ["en", "zh"])
def test_heads_not_dividing_d_model_is_explained_not_a_traceback(lang):
    at = open_page("multihead", lang, {"d": "62", "h": "8"})
    assert exceptions(at) == []
    warning = " ".join(w.value for w in at.warning)
    cat = catalog(lang)
    expected = cat["multihead.err_divisible"].format(
        d_model=62, h=8, ratio="7.75",
        heads=cat["multihead.or"].join([cat["multihead.heads_option"].format(h=2, d_k=31),
                                        cat["multihead.heads_option"].format(h=31, d_k=2)]),
        dims=cat["multihead.or"].join([cat["multihead.dims_option"].format(d=56, d_k=7),
                                       cat["multihead.dims_option"].format(d=64, d_k=8)]))
    assert expected in warning
    assert charts(at) == []
    assert cat["multihead.pit_div_title"] in all_text(at)


@pytest.mark.parametrize("params,message", [
    ({"text": ""}, "common.err_empty"),
    ({"text": " ".join(f"w{i}" for i in range(300))}, "common.warn_truncated"),
    ({"text": "🙂🙃 😀 👍🏽 ❤️"}, None),
    ({"text": "我们今天学习多头注意力机制"}, None),
    ({"text": "<script>alert(1)</script>"}, None),
    ({"text": "a"}, None),
    ({"d": "4", "h": "4"}, None),                       # d_k = 1: only "first" and "broad" can be built
    ({"d": "256", "h": "32", "mode": "Random"}, None),
    ({"d": "256", "h": "1", "seed": "9999"}, None),
    ({"d": "4", "h": "32"}, "multihead.err_divisible"),
    ({"d": "5", "h": "1"}, None),
], ids=["empty", "300-tokens", "emoji", "chinese", "html", "one-token", "dk1", "max", "one-head", "h>d",
        "odd"])
def test_bad_input_and_extremes(params, message):
    for name in ("tab_heads", "tab_shapes", "tab_compare", "tab_gallery", "tab_geometry"):
        at = open_page("multihead", "en", params | tab("en", name))
        assert exceptions(at) == [], (params, name)
        if message:
            head = EN[message].split("{")[0]
            assert any(w.value.startswith(head) for w in at.warning), [w.value for w in at.warning]
    assert "<script>" not in " ".join(m.value for m in at.markdown)


def test_sweep_every_widget_over_its_extremes():
    at = open_page("multihead", "en")
    for key, values in [("d", [4, 256, 64]), ("h", [1, 32, 8]), ("seed", [0, 9999]),
                        ("mode", ["random", "structured"])]:
        for value in values:
            widget = at.button_group(key="mode") if key == "mode" else (
                at.number_input(key=key) if key == "seed" else at.slider(key=key))
            widget.set_value(value).run()
            assert exceptions(at) == [], (key, value)
    for head in (1, 8):
        at.selectbox(key="head").set_value(head).run()
        assert exceptions(at) == []
    for q in (0, len(TOKENS) - 1):
        at.selectbox(key="q").set_value(q).run()
        assert exceptions(at) == []
    drill = chart_titled(at, EN["multihead.drill_title"].format(q="."))
    assert matrix(frame_of(drill)).shape == (8, len(TOKENS))
    at.text_input(key="text").set_value("").run()
    assert exceptions(at) == [] and any(w.value == EN["common.err_empty"] for w in at.warning)


# ---------------------------------------------------------------- the URL reproduces the view
def test_url_reproduces_the_view():
    tokens = TOKENS
    params = {"d": "32", "h": "4", "seed": "3", "mode": "Random", "head": "3", "q": f"2: {tokens[2]}"}
    at = open_page("multihead", "en", params)
    assert exceptions(at) == []
    assert at.slider(key="d").value == 32 and at.slider(key="h").value == 4
    assert at.number_input(key="seed").value == 3 and at.button_group(key="mode").value == "random"
    assert at.selectbox(key="head").value == 3 and at.selectbox(key="q").value == 2
    w, *_ = oracle("random", 32, 4, 3)
    big = chart_titled(at, EN["multihead.big_title"].format(head=3, recipe=EN["multihead.recipe_random"]))
    assert np.allclose(matrix(frame_of(big)), w[2].numpy(), atol=1e-5)
    drill = chart_titled(at, EN["multihead.drill_title"].format(q=tokens[2]))
    assert np.allclose(matrix(frame_of(drill)), w[:, 2].numpy(), atol=1e-5)
    assert EN["multihead.mode_random_banner"].format(seed=3).split("**")[0] in all_text(at)


def test_a_link_made_in_english_keeps_its_choices_in_chinese():
    at = open_page("multihead", "zh", {"mode": EN["multihead.mode_random"],
                                       "tab": EN["multihead.tab_compare"]})
    assert exceptions(at) == []
    assert at.button_group(key="mode").value == "random"
    assert ZH["multihead.js_title"] in [title_text(chart_spec(c)) for c in charts(at)]



# ---------------------------------------------------------------- the page's chart kinds
def test_chart_kinds_fill_like_a_direct_altair_build(monkeypatch):
    """Every chart of the page is a chart kind; drawn again with other data, titles, sizes and selections it is
    filled into the first one's skeleton. VERIFY rebuilds each with Altair, validates it against the Vega-Lite
    schema and raises on any difference."""
    from ui import charts as ui_charts
    from ui import multihead_charts as mc

    monkeypatch.setattr(ui_charts, "VERIFY", True)
    w, mine, x, _ = oracle()
    g = qk_geometry(*(mine.split_heads(m(x))[0, 0].detach() for m in (mine.W_query, mine.W_key, mine.W_value)))
    split = dict(top_title="a", bottom_title="b", dim_title="d", head_title="h", within_title="i", value_title="v")
    built = [
        mc.split_chart(mine.W_query(x)[0, IT].detach(), 8, **split),
        mc.split_chart(torch.randn(64), 1, **split),                                   # d_k = 64 > 32
        mc.split_chart(torch.randn(96), 32, **dict(split, top_title="“它”")),
        mc.small_multiples(w, TOKENS, titles=[f"h{i}" for i in range(8)], selected=2),
        mc.small_multiples(w.repeat(4, 1, 1), TOKENS * 1, titles=["same"] * 32, selectable=False),
        mc.small_multiples(torch.rand(2, 200, 200), [str(i) for i in range(200)], titles=["a", "b"], selected=1),
    ]
    rng = np.random.default_rng(0)
    for n in (2, 5, 13):
        q, k, v = rng.standard_normal((n, 2)), rng.standard_normal((n, 2)), rng.standard_normal((n, 2))
        wn = rng.random(n) / n
        tokens = [["it", "猫", "<b>", "it"][i % 4] for i in range(n)]
        built.append(mc.geometry_chart(q, k, tokens, wn, n - 1, title=f"T{n}", x_title=f"PC1 ({n}%)",
                                       y_title="PC2", key_name="key", query_name="query", weight_title="w",
                                       token_title="t"))
        built.append(mc.values_chart(v, tokens, wn, title=f"V{n}", x_title=f"PC1 {n}", y_title="PC2",
                                     value_name="value", output_name="out", weight_title="w", token_title="t"))
    assert all(spec["usermeta"]["chart_kind"].startswith("ui.multihead_charts.") for spec in built)
    assert built[3]["params"][0]["value"] == [{"head": 2}]
    assert built[4]["datasets"]["data"]["panel"].nunique() == 32          # repeated titles still give 32 panels
    assert built[5]["datasets"]["data"]["query"].nunique() == 23          # 200 tokens: 23 tiles of 9
    geo = mc.geometry_chart(g.queries, g.keys, TOKENS, w[0, IT], IT, title="g", x_title="x", y_title="y",
                            key_name="k", query_name="q", weight_title="w", token_title="t")
    assert geo["datasets"]["chosen"]["pos"].tolist() == [IT]
    values = mc.values_chart(g.values, TOKENS, w[0, IT], title="v", x_title="x", y_title="y", value_name="v",
                             output_name="o", weight_title="w", token_title="t")
    out = np.asarray(w[0, IT]) @ g.values.numpy()                # the diamond: weighted mean of the values
    star = values["datasets"]["star"]
    assert (star["x"][0], star["y"][0]) == pytest.approx((out[0], out[1]), abs=1e-5)


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_one_head_parameter_table_has_distinct_columns(lang):
    """With h = 1 the 'one head' and 'h heads' columns were the same name: the browser refused the table
    (Arrow: duplicate column names). AppTest does not serialise it, so check the columns directly."""
    at = open_page("multihead", lang, {"h": "1"} | tab(lang, "tab_shapes"))
    assert exceptions(at) == []
    for frame in at.table:
        assert frame.value.columns.is_unique, list(frame.value.columns)


# ---------------------------------------------------------------- presenter mode (?present=1)
@pytest.mark.parametrize("lang", ["en", "zh"])
def test_presenter_steps_ask_before_they_show(lang):
    """Steps: intuition, controls (kept), the parameter question alone, the tabs, the notice, two pitfalls."""
    at = open_page("multihead", lang, {"present": "1", "step": "3"})
    assert exceptions(at) == []
    steps = presenter_steps(at)
    names, items = list(steps), list(steps.values())
    assert names == ["present_step_1", "present_keep_1"] + [f"present_step_{i}" for i in range(2, 7)]
    assert catalog(lang)["common.present_step"].format(i=3, n=6) in [m.value for m in at.markdown]   # kept: no step
    assert any(kind == "selectbox" for kind, _ in items[1])                           # head and query pickers
    assert [key for kind, key in items[2] if kind == "radio"] == ["mh_ex_guess"]      # the question, alone
    assert not any(kind in ("vega_lite_chart", "metric", "subheader") for kind, _ in items[2])
    assert any(kind == "vega_lite_chart" for kind, _ in items[3])                     # the open tab's charts
    assert ("subheader", catalog(lang)["common.notice"]) in items[4]                   # then what to notice


def test_presenter_steps_with_heads_not_dividing_d_model():
    """The message sits in the kept controls step; no question is asked, the divisibility pitfall stays."""
    at = open_page("multihead", "en", {"present": "1", "d": "30", "h": "8"})
    assert exceptions(at) == []
    steps = presenter_steps(at)
    assert list(steps) == ["present_step_1", "present_keep_1", "present_step_2"]
    assert any(kind == "warning" for kind, _ in steps["present_keep_1"])
    assert not any(key.endswith("_guess") for items in steps.values() for _, key in items)


# ---------------------------------------------------------------- legible on a phone's column (358 px)
@pytest.mark.parametrize("h", ["1", "4", "8", "16", "32"])
def test_head_grid_fits_a_phone_and_hides_no_quoted_label(h):
    """The small multiples are laid out for 340 px whatever h (columns x panel + gaps), with no token labels
    on their axes (Vega hid "it" and "because" for overlap; the tooltip names every cell) and the colour
    legend below; the shapes tab's tables are static tables that wrap. About 2 s each."""
    at = open_page("multihead", "en", {"h": h, "d": "64"})
    assert exceptions(at) == []
    spec = chart_spec(grid_chart(at))
    panel, columns, gap = spec["spec"]["width"], spec["columns"], spec["spacing"]
    assert columns * panel + (columns - 1) * gap <= 340
    assert spec["spec"]["encoding"]["x"]["axis"]["labels"] is False
    assert spec["spec"]["encoding"]["color"]["legend"]["orient"] == "bottom"
    grid = frame_of(grid_chart(at))                          # small payload: float32, labels as dictionaries
    assert grid["value"].dtype == np.float32 and str(grid["panel"].dtype) == "category"
    assert "exact" not in grid.columns


def test_shapes_tables_wrap_and_planes_label_two_points():
    at = open_page("multihead", "en", tab("en", "tab_shapes"))
    assert exceptions(at) == [] and len(at.table) == 2 and len(at.dataframe) == 0
    at = open_page("multihead", "en", tab("en", "tab_geometry"))
    assert exceptions(at) == []
    for chart in charts(at):
        spec = chart_spec(chart)
        assert spec["width"] <= 300
        texts = [layer for layer in spec["layer"] if layer["mark"]["type"] == "text"]
        assert texts and all("named" in json.dumps(layer.get("transform", [])) or layer["data"]["name"] == "star"
                             or "chosen" in layer["data"]["name"] for layer in texts), texts

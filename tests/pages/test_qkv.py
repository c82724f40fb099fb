"""The Query-Key-Value page: what its charts contain, checked against independent computations.

Oracles: an explicit Gaussian-kernel average in numpy (kernel regression), numpy dot products and
softmax (library), torch's scaled_dot_product_attention on embeddings built here (tokens),
hand-counted parameters (similarity functions).
"""
import functools
import json
import math
import re

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from attention_core.labs import qkv as lab
from attention_core.text import embed_tokens, projection, tokenize
from tests.apptest_util import all_text, chart_data, chart_spec, charts, exceptions, open_page, presenter_steps
from ui.i18n import catalog

EN, ZH = catalog("en"), catalog("zh")
TAB_KEYS = ("tab_kernel", "tab_library", "tab_tokens", "tab_similarity")
TAB = {i: EN[f"qkv.{name}"] for i, name in enumerate(TAB_KEYS)}
SENTENCE = EN["common.default_sentence"]
BOOK_COLUMNS = list(lab.KEY_AXES) + list(lab.VALUE_AXES)


def _frames(at, *columns, piece=None):
    """Every chart dataset holding all ``columns``; with ``piece``, only the datasets of that name (a chart
    drawn from several frames ships each as a named dataset)."""
    return [f for c in charts(at) for name, f in chart_data(c).items()
            if set(columns) <= set(f.columns) and (piece is None or name == piece)]


def _matrix(frame) -> np.ndarray:
    f = frame.sort_values(["query_pos", "key_pos"])
    return f["value"].to_numpy().reshape(f["query_pos"].nunique(), f["key_pos"].nunique())


def _notice(at) -> str:
    return "\n".join(m.value for m in at.markdown if str(m.value).startswith("- "))


def _numbers(text: str) -> list[float]:
    return [float(x) for x in re.findall(r"-?\d+\.\d+", text)]


def _shown(at, key: str) -> bool:
    """Whether the message ``key`` (any values in its placeholders) is among the warnings on screen."""
    pattern = ".*".join(re.escape(part) for part in re.split(r"\{[^}]*\}", EN[key]))
    return any(re.search(pattern, w.value, flags=re.S) for w in at.warning)


def _titles(spec) -> set[str]:
    """Every chart, axis, legend and tooltip title in a Vega-Lite spec."""
    found = set()
    if isinstance(spec, dict):
        for k, v in spec.items():
            if k == "title" and isinstance(v, str):
                found.add(v)
            found |= _titles(v)
    elif isinstance(spec, list):
        for v in spec:
            found |= _titles(v)
    return found


def _softmax(s: np.ndarray) -> np.ndarray:
    e = np.exp(s - s.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def _tokens_oracle(text: str, d_model: int, d_k: int, seed: int = 0):
    """Q, K, V and the weights of the step-through, rebuilt here and run through torch SDPA."""
    tokens = tokenize(text)
    x = embed_tokens(tokens, d_model, seed)
    q, k, v = (x @ projection(d_model, d_k, seed, name) for name in ("W_Q", "W_K", "W_V"))
    out = F.scaled_dot_product_attention(q[None], k[None], v[None])[0]
    w = torch.softmax(q @ k.T / math.sqrt(d_k), dim=-1)
    return tokens, q.numpy(), k.numpy(), w.numpy(), out.numpy()


@pytest.fixture(scope="module")
def kernel_en():
    return open_page("qkv", "en")


@pytest.fixture(scope="module")
def tokens_en():
    return open_page("qkv", "en", params={"tab": TAB[2], "stage": "④ softmax", "qkv_norm_demo": "true"})


# --- opening ------------------------------------------------------------------------------------

@pytest.mark.parametrize("lang", ["en", "zh"])
@pytest.mark.parametrize("tab,n_charts", [(0, 2), (1, 4), (2, 7), (3, 3)])
def test_every_tab_opens_in_both_languages(lang, tab, n_charts):
    """n_charts with the pitfall demos open (?qkv_norm_demo=true: the tokens tab's pitfall bars); closed, the
    demo is not drawn (a rerun does not redraw it: the redraw budget)."""
    cat = catalog(lang)
    demos = {"qkv_norm_demo": "true", "qkv_add_demo": "true"}
    if tab == 2:
        closed = open_page("qkv", lang, params={"tab": TAB[tab]})
        assert exceptions(closed) == [] and len(charts(closed)) == n_charts - 1
    at = open_page("qkv", lang, params={"tab": TAB[tab]} | demos)   # an English label still opens the tab in zh
    assert exceptions(at) == []
    assert cat["qkv.title"] in [t.value for t in at.title]
    assert [t.label for t in at.tabs] == [cat[f"qkv.{n}"] for n in TAB_KEYS]
    assert len(charts(at)) == n_charts
    assert _notice(at), "no what-to-notice"
    other = EN if lang == "zh" else ZH
    key = {0: "qkv.k_keys_axis", 1: "qkv.l_book", 2: "qkv.t_dim", 3: "common.key"}[tab]
    titles = set().union(*(_titles(chart_spec(c)) for c in charts(at)))   # axis titles in this language
    assert cat[key] in titles and (other[key] == cat[key] or other[key] not in titles)


def test_a_tab_label_of_the_other_language_opens_the_same_tab():
    """Tab labels are the URL value and differ by language; a link or a language switch keeps the tab."""
    at = open_page("qkv", "zh", params={"tab": TAB[2]})
    assert exceptions(at) == []
    assert at.session_state["tab"] == ZH["qkv.tab_tokens"]
    assert at.get("button_group")[0].key == "stage"        # the step-through is what is on screen


# --- tab 1: kernel regression ----------------------------------------------------------------

def test_kernel_heatmap_is_the_gaussian_kernel_average(kernel_en):
    heat = _matrix(_frames(kernel_en, "query_pos", "key_pos", "value")[0])
    x, y = (a.double().numpy() for a in lab.kernel_regression_data(40, 0.5, seed=0))
    grid = np.linspace(0, 5, 21)
    kern = np.exp(-(grid[:, None] - x[None, :]) ** 2 / (2 * 0.4 ** 2))
    expected = kern / kern.sum(axis=1, keepdims=True)
    assert heat.shape == (21, 40)
    np.testing.assert_allclose(heat, expected, atol=1e-5)
    np.testing.assert_allclose(heat.sum(axis=1), 1.0, atol=1e-5)
    points = _frames(kernel_en, "x", "y", "weight", piece="points")[0]    # the dots of the fit chart
    np.testing.assert_allclose(points["weight"], expected[10], atol=1e-5)   # query x = 2.5 is row 10
    pred = _frames(kernel_en, "x", "y", "exact", piece="query")
    pred = [f for f in pred if len(f) == 1 and "weight" not in f.columns][0]
    assert float(pred["y"][0]) == pytest.approx(float(expected[10] @ y), abs=1e-4)
    notice = _notice(kernel_en)
    w_top = max(expected[10])
    assert f"{w_top:.3f}" in notice and f"{1 / (expected[10] ** 2).sum():.1f}" in notice
    assert f"f(2.5) = {expected[10] @ y:.2f}" in notice


def test_kernel_charts_keep_their_spec_for_a_new_sample():
    """The colour scales end at the sample's largest weight without the spec naming it (the heatmap's domain is
    Vega's 0 .. max of its data; the dots read ``top`` from the query's data set): a new seed keeps both specs, so
    Streamlit swaps the data instead of rebuilding the two charts (the redraw budget). The dots' colour scale ends where
    the heatmap's does."""
    def kernel_specs(seed):
        at = open_page("qkv", "en", params={"kseed": str(seed)})
        assert exceptions(at) == []
        specs = []
        for c in charts(at)[:2]:
            spec = dict(chart_spec(c))
            spec.pop("datasets", None)
            specs.append(json.dumps(spec, sort_keys=True))
        return at, specs

    a, specs_a = kernel_specs(3)
    b, specs_b = kernel_specs(4)
    assert specs_a == specs_b
    for at, seed in ((a, 3), (b, 4)):
        top = float(lab.kernel_lesson(40, 0.5, seed, 0.4, 21).weights.max())
        heat = _matrix(_frames(at, "query_pos", "key_pos", "value")[0])
        assert heat.max() == pytest.approx(top, abs=1e-6)           # Vega's data domain ends here
        query = [f for f in _frames(at, "x", "y", "exact", piece="query") if "top" in f.columns][0]
        assert float(query["top"][0]) == pytest.approx(top, abs=1e-9)
    heat_scale = json.loads(specs_a[0])["layer"][0]["encoding"]["color"]["scale"]
    assert heat_scale.get("domainMin") == 0 and "domain" not in heat_scale
    dots = [layer for layer in json.loads(specs_a[1])["layer"] if layer.get("mark", {}).get("type") == "circle"][0]
    assert dots["encoding"]["color"]["scale"]["domainMax"] == {"expr": "length(data('query')) ? data('query')[0].top : 1"}


def test_kernel_url_reproduces_bandwidth_and_query():
    at = open_page("qkv", "en", params={"h": "0.1", "x": "4", "n": "20", "noise": "0", "kseed": "3"})
    assert exceptions(at) == []
    assert at.slider(key="h").value == pytest.approx(0.1) and at.slider(key="x").value == pytest.approx(4.0)
    heat = _matrix(_frames(at, "query_pos", "key_pos", "value")[0])
    x, y = (a.double().numpy() for a in lab.kernel_regression_data(20, 0.0, seed=3))
    kern = np.exp(-(4.0 - x) ** 2 / (2 * 0.1 ** 2))
    np.testing.assert_allclose(heat[16], kern / kern.sum(), atol=1e-5)      # 4 / 0.25 = row 16
    outlined = [layer["transform"][0]["filter"] for c in charts(at) for layer in chart_spec(c).get("layer", [])
                if layer.get("mark", {}).get("stroke") == "#e66101"]            # the orange frame of the query row
    assert outlined == ["(datum.query_pos === 16)"]


def test_kernel_exercise_explanation_quotes_this_samples_mean():
    """The question sits outside the seed's fragment (the redraw budget); revealed, its explanation is written by the
    fragment into the exercise's slot, once, with the mean of the sample now on screen (a new seed: a new mean)."""
    at = open_page("qkv", "en", params={"n": "20", "noise": "0.8", "kseed": "3"})
    at.radio(key="qkv_ex_kernel_guess").set_value(1).run()
    at.button(key="qkv_ex_kernel_reveal").click().run()
    assert exceptions(at) == []
    for seed in (3, 4):
        if seed == 4:
            at.number_input(key="kseed").set_value(4).run()
        y = lab.kernel_regression_data(20, 0.8, seed=seed)[1].double().numpy()
        why = [m.value for m in at.markdown if str(m.value).startswith(EN["qkv.k_ex_why"][:20])]
        assert len(why) == 1 and f"{y.mean():.2f}" in why[0], why


# --- tab 2: the library ----------------------------------------------------------------------

def _library(params=None, edits=None):
    at = open_page("qkv", "en", params={"tab": TAB[1], **(params or {})})
    if edits is not None:
        at.session_state["books"] = {"edited_rows": {}, "added_rows": [], "deleted_rows": []} | edits
        at.run()
    return at


def _book_bars(at):
    """(scores, weights) as drawn, in table order."""
    frames = _frames(at, "book", "value", "text")
    assert len(frames) == 2
    return frames[0]["value"].to_numpy(), frames[1]["value"].to_numpy()


def test_library_scores_weights_and_mix_match_numpy():
    at = _library()
    assert exceptions(at) == []
    keys, values = lab.library_arrays()
    q = np.array([2.0, 2.0, 0.0])
    s = keys @ q
    w = _softmax(s)
    scores, weights = _book_bars(at)
    np.testing.assert_allclose(scores, s, atol=1e-9)
    np.testing.assert_allclose(weights, w, atol=1e-9)
    mix = _frames(at, "feature", "part", piece="bars")[0]
    totals = mix.groupby("feature", sort=False)["part"].sum().to_numpy()
    np.testing.assert_allclose(totals, w @ values, atol=1e-9)
    assert "Kitchen Chemistry" in _notice(at) and f"{w.max():.2f}" in _notice(at)
    assert f"{(w @ values)[0]:.2f}" in _notice(at)


def test_library_query_from_the_url():
    at = _library({"qs": "-1", "qc": "0", "qh": "3"})
    scores, weights = _book_bars(at)
    keys, _ = lab.library_arrays()
    np.testing.assert_allclose(scores, keys @ np.array([-1.0, 0.0, 3.0]), atol=1e-9)
    assert "Great Battles" in _notice(at)


def test_changing_a_value_leaves_the_weights_alone():
    before = _book_bars(_library())[1]
    after_at = _library(edits={"edited_rows": {2: {"formulas": 0.0, "recipes": 0.0, "dates": 0.0}}})
    np.testing.assert_allclose(_book_bars(after_at)[1], before, atol=1e-12)
    mix = _frames(after_at, "feature", "part", piece="bars")[0]
    assert (mix[mix["book"] == "Kitchen Chemistry"]["part"] == 0).all()


@pytest.mark.parametrize("edits,message,n_charts", [
    ({"edited_rows": {0: {"science": None}}}, "qkv.err_cells", 0),
    ({"edited_rows": {1: {"dates": float("inf")}}}, "qkv.err_cells", 0),
    ({"edited_rows": {1: {"dates": 1e6}}}, "qkv.err_cells", 0),
    ({"added_rows": [{"title": "new", "science": 1.0}]}, "qkv.err_cells", 0),
    ({"deleted_rows": [0, 1, 2, 3, 4, 5]}, "qkv.err_no_books", 0),
    ({"added_rows": [dict(title="<script>alert(1)</script>", **{c: 1.0 for c in BOOK_COLUMNS})] * 7},
     "qkv.err_many_books", 4),
])
def test_bad_table_edits_give_a_message_not_a_crash(edits, message, n_charts):
    at = _library(edits=edits)
    assert exceptions(at) == []
    assert _shown(at, message)
    assert len(charts(at)) == n_charts
    assert "<script>" not in all_text(at).replace("\\<script\\>", "")


# --- tab 3: tokens ---------------------------------------------------------------------------

def test_step_through_weights_match_torch(tokens_en):
    at = tokens_en
    tokens, q, k, w, out = _tokens_oracle(SENTENCE, 32, 8)
    heat = _matrix(_frames(at, "query_pos", "key_pos", "value")[0])
    np.testing.assert_allclose(heat, w, atol=1e-5)
    np.testing.assert_allclose(heat.sum(axis=1), 1.0, atol=1e-5)
    it = tokens.index("it")
    assert at.selectbox(key="q").value == "it"
    row = _frames(at, "pos", "label", "value")[0]["value"].to_numpy()
    np.testing.assert_allclose(row, w[it], atol=1e-5)
    j = int(np.argmax(w[it]))                                      # default key of the neuron view
    prods = _frames(at, "dim", "product")[0]["product"].to_numpy()
    np.testing.assert_allclose(prods, q[it] * k[j], atol=1e-5)
    neuron = next(m.value for m in at.markdown if "Σ" in m.value)
    assert f"**{(q[it] @ k[j]):.3f}**" in neuron and f"**{w[it, j]:.3f}**" in neuron
    assert f"{w[it].max():.3f}" in _notice(at) and "1.0000" in _notice(at)
    spec = chart_spec(charts(at)[0])
    assert {"query_pos": it} in spec["params"][0]["value"]           # the selected row is the drawn one


def test_neuron_view_shows_the_code_that_ran(monkeypatch):
    """The neuron view's "show the code" lists lab.neuron_view: the page must call it (it once computed the
    products inline and showed a function that never ran). A new key makes sure nothing comes from a cache."""
    calls = []
    original = lab.neuron_view

    @functools.wraps(original)          # show_code prints the wrapped function's source
    def counted(q_row, k_row):
        calls.append((q_row.clone(), k_row.clone()))
        return original(q_row, k_row)

    monkeypatch.setattr(lab, "neuron_view", counted)
    from ui.presenter import code_key
    opened = code_key("qkv")                    # ?code_qkv=true opens "Show the code"
    at = open_page("qkv", "en", params={"tab": TAB[2], "kt": "tired", opened: "true"})
    assert exceptions(at) == []
    assert calls, "the neuron view did not call lab.neuron_view"
    prods = _frames(at, "dim", "product")[0]["product"].to_numpy()
    np.testing.assert_allclose(prods, (calls[-1][0] * calls[-1][1]).numpy(), atol=1e-6)
    assert any("def neuron_view" in c.value for c in at.code)


@pytest.mark.parametrize("stage,attr", [(1, None), (2, "scores"), (3, "scaled"), (5, "output")])
def test_every_stage_draws_its_matrix(stage, attr):
    label = {1: "① X → Q, K, V", 2: "② Q Kᵀ", 3: "③ ÷ √d_k", 5: "⑤ × V"}[stage]
    at = open_page("qkv", "en", params={"tab": TAB[2], "stage": label, "dk": "4", "dm": "16", "q": "animal"})
    assert exceptions(at) == []
    tokens, q, k, w, out = _tokens_oracle(SENTENCE, 16, 4)
    mats = [_matrix(f) for f in _frames(at, "query_pos", "key_pos", "value")]
    expected = {2: q @ k.T, 3: q @ k.T / 2.0, 5: out}
    if stage == 1:
        assert [m.shape for m in mats[:4]] == [(12, 16), (12, 4), (12, 4), (12, 4)]
        np.testing.assert_allclose(mats[1], q, atol=1e-5)
    else:
        np.testing.assert_allclose(mats[0], expected[stage], atol=1e-4)
    assert at.selectbox(key="q").value == "animal"
    assert at.get("button_group")[0].value == stage


def test_pitfall_demo_compares_the_right_rows(tokens_en):
    tokens, q, k, w, _ = _tokens_oracle(SENTENCE, 32, 8)
    it = tokens.index("it")
    frame = _frames(tokens_en, "key", "series", "weight")[0]
    series = list(dict.fromkeys(frame["series"]))
    rows = {s: frame[frame["series"] == s]["weight"].to_numpy() for s in series}
    np.testing.assert_allclose(rows[series[0]], w[it], atol=1e-5)
    np.testing.assert_allclose(rows[series[1]], _softmax(q[it] @ k.T / math.sqrt(32)), atol=1e-5)
    np.testing.assert_allclose(rows[series[2]], _softmax(w[it]), atol=1e-5)
    assert rows[series[2]].max() / rows[series[2]].min() <= math.e + 1e-6
    assert rows[series[1]].max() < rows[series[0]].max()


# --- tab 4: three similarity functions --------------------------------------------------------

def test_similarity_functions_side_by_side():
    at = open_page("qkv", "en", params={"tab": TAB[3], "cdk": "64", "hid": "16"})
    assert exceptions(at) == []
    tokens, q, k, _, _ = _tokens_oracle(SENTENCE, 32, 64)
    add, dot, scaled = (_matrix(f) for f in _frames(at, "query_pos", "key_pos", "value"))
    np.testing.assert_allclose(dot, _softmax(q @ k.T), atol=1e-5)
    np.testing.assert_allclose(scaled, _softmax(q @ k.T / 8.0), atol=1e-5)
    for m in (add, dot, scaled):
        np.testing.assert_allclose(m.sum(axis=1), 1.0, atol=1e-5)
    table = at.table[0].value         # a column per function, a row per measure (it fits a phone)
    assert list(table.iloc[1]) == [f"{16 * (64 + 64 + 1):,}", "0", "0"]
    assert dot.max(axis=1).mean() > scaled.max(axis=1).mean() > add.max(axis=1).mean()
    assert f"{dot.max(axis=1).mean():.3f}" in _notice(at) and "2,064" in _notice(at)


# --- every widget at its extremes --------------------------------------------------------------

SWEEP = {
    0: [("slider", "h", [0.05, 3.0]), ("slider", "n", [2, 100]), ("slider", "noise", [0.0, 1.5]),
        ("slider", "x", [0.0, 5.0]), ("number_input", "kseed", [9999])],
    1: [("slider", "qs", [-3.0, 3.0]), ("slider", "qc", [-3.0]), ("slider", "qh", [3.0]),
        ("selectbox", "plane", [(1, 2)])],
    2: [("select_slider", "dm", [2, 64]), ("select_slider", "dk", [2, 64]), ("number_input", "seed", [9999]),
        ("button_group", "stage", [2, 3, 4, 5, 1]), ("selectbox", "kt", ["tired"])],
    3: [("select_slider", "cdk", [2, 1024]), ("select_slider", "hid", [2, 64])],
}


@pytest.mark.parametrize("tab", sorted(SWEEP))
def test_widget_extremes(tab):
    """Every control of a tab, one after another, to its ends: no exception, the charts stay."""
    at = open_page("qkv", "en", params={"tab": TAB[tab]})
    for kind, key, values in SWEEP[tab]:
        for value in values:
            widget = next(w for w in at.get(kind) if w.key == key)
            widget.set_value(value).run()
            assert exceptions(at) == [], (key, value)
            assert charts(at), (key, value)
    assert len(at.get("slider")) + len(at.get("select_slider")) + len(at.get("number_input")) >= 2


TEXTS = [
    ("", "common.err_empty"),
    (" ".join(f"w{i}" for i in range(300)), "common.warn_truncated"),
    ("hi", "qkv.t_one_token"),
    ("I ❤️ attention 🚀🚀 👍🏽", None),
    ("这只动物没有过马路，因为它太累了。", None),
    ("<script>alert(1)</script> **bold** $x$", None),
]


@pytest.mark.parametrize("tab", [2, 3])
def test_sentences_that_could_break_the_page(tab):
    at = open_page("qkv", "en", params={"tab": TAB[tab], "qkv_norm_demo": "true", "qkv_add_demo": "true"})
    for text, message in TEXTS:
        at.text_input(key="text").set_value(text).run()
        assert exceptions(at) == [], text
        if message:
            assert _shown(at, message), message
        if message == "common.err_empty":
            assert charts(at) == []
            continue
        n = min(len(tokenize(text)), 48)
        if tab == 2:                             # the pitfall bars: the correct row sums to 1
            frame = _frames(at, "key", "series", "weight")[0]
            correct = frame[frame["series"] == frame["series"].iloc[0]]["weight"]
            assert len(correct) == n and correct.sum() == pytest.approx(1.0, abs=1e-5)
        else:
            heat = _matrix(_frames(at, "query_pos", "key_pos", "value")[0])
            assert heat.shape == (n, n)
            np.testing.assert_allclose(heat.sum(axis=1), 1.0, atol=1e-5)
        for md in at.markdown:                   # user text is quoted inertly, never as HTML
            assert "<script>" not in md.value


# --- every chart of the page is a chart kind whose fill equals a direct Altair build -------------------

@pytest.mark.parametrize("case", range(3))
def test_qkv_chart_kinds_fill_like_a_direct_altair_build(case, monkeypatch):
    """Two different inputs per chart: the second is filled into the first one's skeleton; VERIFY rebuilds
    each with Altair, validates it against the Vega-Lite schema and raises on any difference."""
    from ui import charts as ui_charts
    from ui import qkv_charts as qc

    monkeypatch.setattr(ui_charts, "VERIFY", True)
    rng = np.random.default_rng(case)
    n = [6, 3, 12][case]
    keys, values = rng.normal(size=(n, 3)), rng.normal(size=(n, 3)) * 5
    books = [["a", "b", "猫", "a", "<b>", "it's"][i % 6] + str(i // 6) for i in range(n)]
    w = _softmax(keys @ rng.normal(size=3))
    x, y = lab.kernel_regression_data(10 + case, 0.5, case)
    curve = lab.query_grid(21)
    kl = qc.KernelLabels("x", "y", f"weight for {case}", "truth", f"fit (h = {case})", "q", "p", "series")
    ll = qc.LibraryLabels(*"feature contribution book weight value total score query projection".split())
    specs = [
        qc.kernel_fit(x, y, curve, curve, curve * case, query_x=2.5, query_weights=rng.random(10 + case),
                      query_pred=1.0, labels=kl, weight_max=0.3 + case),
        qc.book_bars(keys @ np.ones(3), books, value_title="s", book_title="b"),
        qc.book_bars(w, books, value_title="w", book_title="b", domain=(0.0, 1.0)),
        qc.library_mix(w[:, None] * values, w, values, books, ["f", "r", "d"], labels=ll),
        qc.library_plane(keys[:, :2], rng.normal(size=2) * case, books, keys @ np.ones(3), w, labels=ll,
                         x_title=f"x{case}", y_title="y"),
        qc.products(rng.normal(size=4 + case), dim_title="dim", product_title="product"),
        qc.grouped_rows({"right": w, f"wrong {case}": w[::-1], "twice": w}, books, key_title="k",
                        weight_title="w", series_title="s"),
    ]
    assert all(spec["usermeta"]["chart_kind"].startswith("ui.qkv_charts.") for spec in specs)
    plane = specs[4]
    assert plane["layer"][0]["encoding"]["x"]["title"] == f"x{case}"
    assert plane["datasets"]["keys"]["book"].tolist() == ui_charts.unique_labels(books)


def test_kernel_heatmap_outlines_the_query_row(monkeypatch):
    """The outlined row is a fill of ui.charts.heatmap (``outline_row``): it follows the query, pooled or not."""
    from ui import charts as ui_charts

    monkeypatch.setattr(ui_charts, "VERIFY", True)
    rows = [str(i) for i in range(41)]
    for row in (0, 20, 40):
        spec = ui_charts.heatmap(np.eye(41), rows, kind="weights", outline_row=row, width=380, fit_x=False)
        frame = [layer for layer in spec["layer"] if layer["mark"].get("stroke") == ui_charts.OUTLINE_ORANGE]
        assert frame[0]["transform"][0] == {"filter": f"(datum.query_pos === {row})"}
    pooled = ui_charts.heatmap(np.eye(300), [str(i) for i in range(300)], outline_row=7)
    assert "(datum.query_pos === 6)" in str(pooled["layer"])          # 300 rows: tiles of 3, row 7 is in 6-8


# ---------------------------------------------------------------- presenter mode (?present=1)
EVIDENCE = ("vega_lite_chart", "arrow_vega_lite_chart", "metric")


def asks(items) -> bool:
    return any(kind == "radio" and text.endswith("_guess") for kind, text in items)


def shows_evidence(items, lang="en") -> bool:
    return any(kind in EVIDENCE or (kind == "subheader" and text == catalog(lang)["common.notice"])
               for kind, text in items)


@pytest.mark.parametrize("tab", ["tab_kernel", "tab_library", "tab_tokens", "tab_similarity"])
def test_presenter_steps_ask_before_they_show(tab):
    """Every tab runs as steps: the page's intuition, origin (its own question) and formula, then the tab's intro,
    its controls (kept under every step), its question alone, then the evidence that answers it."""
    at = open_page("qkv", "en", {"present": "1", "step": "1", "tab": EN[f"qkv.{tab}"]})
    assert exceptions(at) == []
    steps = presenter_steps(at)
    names = list(steps)
    kept = [n for n in names if n.startswith("present_keep_")]
    assert f"Step 1 of {len(names) - len(kept)}" in [m.value for m in at.markdown]   # kept controls are no step
    assert names[4].startswith("present_keep_") and [n.startswith("present_keep_") for n in names].count(True) == 1
    questions = [i for i, items in enumerate(steps.values()) if asks(items)]
    assert questions[0] == 1 and len(questions) == 2          # the origin's question, then the tab's
    for i in questions:
        assert not shows_evidence(steps[names[i]])
        assert any(shows_evidence(steps[n]) for n in names[i + 1:]) or i == 1
    assert shows_evidence(steps[names[questions[1] + 1]])     # the step after the tab's question answers it


# --- legible at 1280 and 390 px: properties of what the page sends --------------------------------

def test_phone_layout_properties(tokens_en):
    """Every key of the pitfall bars stays labelled (thinned by width, never hidden by Vega's labelOverlap), legends
    list one entry per line, the library editor's columns fit a phone's 356 px, the similarity table is a static
    table, and no formula line is longer than a phone holds (each is split into aligned lines)."""
    pitfall = [chart_spec(c) for c in charts(tokens_en) if "xOffset" in chart_spec(c).get("encoding", {})][0]
    axis = pitfall["encoding"]["x"]["axis"]
    assert axis["labelOverlap"] is False and "indexof(domain('x')" in axis["labelExpr"]
    assert pitfall["encoding"]["color"]["legend"]["direction"] == "vertical"
    lib = open_page("qkv", "en", params={"tab": TAB[1]})
    config = json.loads(lib.dataframe[0].proto.columns)          # the editable table of books
    widths = [c.get("width") for name, c in config.items() if name != "_index"]
    assert len(widths) == 7 and all(isinstance(w, int) for w in widths) and sum(widths) <= 356 - 32, config
    sim = open_page("qkv", "en", params={"tab": TAB[3]})
    assert len(sim.table) == 1 and not sim.dataframe
    assert lib.latex and tokens_en.latex
    for at in (lib, tokens_en):
        for latex in at.latex:
            for line in latex.proto.body.split(r"\\"):
                assert len(re.sub(r"\\[a-zA-Z]+|[{}&]", "", line)) <= 60, line

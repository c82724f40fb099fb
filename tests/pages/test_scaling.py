"""The scaling page: what its charts contain, checked against independent computations.

Oracles: Var(q.k) = d_k (theory), torch.softmax, torch.autograd.functional.jacobian.
"""
import math

import numpy as np
import pandas as pd
import pytest
import torch

from attention_core.labs import scaling as sl
from tests.apptest_util import all_text, chart_data, chart_spec, charts, exceptions, open_page, shows_label, title_text
from ui import format as fmt
from ui import scaling_charts as sc
from ui.i18n import catalog

N_Q, N_K, N_SHOW, N_PAIRS = 256, 16, 8, 1024


def _frame(at, *columns, without=()):
    """The data of the chart whose dataset has all ``columns`` and none of ``without``.

    The three sweep charts each get their own metric's rows: several matches are then put together (and must not
    repeat a metric: no chart ships another chart's data).
    """
    found = []
    for chart in charts(at):
        for frame in chart_data(chart).values():
            if set(columns) <= set(frame.columns) and not set(without) & set(frame.columns):
                found.append(frame)
    assert found, f"no chart with columns {columns}"
    if len(found) > 1:
        assert "metric" in columns and all(f["metric"].nunique() == 1 for f in found), columns
        assert len({f["metric"].iloc[0] for f in found}) == len(found), "a sweep's rows sent twice"
        return pd.concat(found, ignore_index=True)
    return found[0]


def _heatmap(at):
    return _frame(at, "query_pos", "key_pos", "value").sort_values(["query_pos", "key_pos"])


def _notice(at) -> str:
    """Every "What to notice" list of the page (one per section), joined."""
    return "\n".join(m.value for m in at.markdown if str(m.value).startswith("- "))


def _jacobian_median(scores: torch.Tensor) -> float:
    """Median (lower middle, as torch.median) over rows of ||d softmax / d s||_F, by autograd."""
    norms = []
    for row in scores:
        jac = torch.autograd.functional.jacobian(lambda s: torch.softmax(s, dim=-1), row, vectorize=True)
        norms.append(float(torch.linalg.matrix_norm(jac)))
    return sorted(norms)[(len(norms) - 1) // 2]


@pytest.fixture(scope="module")
def default_en():
    return open_page("scaling", "en")


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_opens_in_both_languages(lang):
    at = open_page("scaling", lang)
    assert exceptions(at) == []
    assert catalog(lang)["scaling.title"] in [t.value for t in at.title]
    assert len(charts(at)) == 9
    text = all_text(at)
    for key in ("sec_variance", "sec_softmax", "sec_gradient", "sec_temperature", "pitfall_title"):
        assert str(catalog(lang)[f"scaling.{key}"]) in text
    titles = set()

    def collect(node):
        if isinstance(node, dict):
            if isinstance(title_text(node), str):
                titles.add(title_text(node))
            for value in node.values():
                collect(value)
        elif isinstance(node, list):
            for value in node:
                collect(value)

    for chart in charts(at):
        assert "data" in chart_data(chart)
        collect(chart_spec(chart))
    # every axis / chart title is in the page's language: the histogram's y axis is, the other one's is not
    assert catalog(lang)["scaling.hist_y"] in titles
    assert catalog("en" if lang == "zh" else "zh")["scaling.hist_y"] not in titles


def test_variance_curve_follows_d_k(default_en):
    frame = _frame(default_en, "series", "kind", "value")
    measured = frame[frame["kind"] == "measured"]
    raw = measured[~measured["scaled"]].sort_values("d_k")
    scaled = measured[measured["scaled"]].sort_values("d_k")
    assert list(raw["d_k"]) == list(sl.D_K_STEPS)
    for d, v_raw, v_scaled in zip(raw["d_k"], raw["value"], scaled["value"]):
        tol = 4 * math.sqrt((2 + 6 / d) / N_PAIRS)     # relative s.d. of a sample variance of q.k
        assert abs(v_raw / d - 1) < tol, (d, v_raw)
        assert abs(v_scaled - 1) < tol, (d, v_scaled)
        assert v_scaled == pytest.approx(v_raw / d, rel=1e-9)
    theory = frame[(frame["kind"] == "theory") & ~frame["scaled"]]
    np.testing.assert_allclose(theory["value"], theory["d_k"])
    assert frame.loc[frame["is_now"], "d_k"].unique().tolist() == [64]


def test_histogram_counts_and_variance(default_en):
    frame = _frame(default_en, "bin_start", "bin_end", "density")
    var = _frame(default_en, "series", "kind", "value")
    now = var[var["is_now"] & (var["kind"] == "measured")]
    for scaled in (False, True):
        bars = frame[frame["scaled"] == scaled]                  # the bars' own dataset: nothing else in it
        assert bars["count"].sum() == N_PAIRS
        assert float((bars["density"] * (bars["bin_end"] - bars["bin_start"])).sum()) == pytest.approx(1.0)
        measured = float(now.loc[now["scaled"] == scaled, "value"].iloc[0])
        assert bars["variance"].iloc[0] == pytest.approx(measured)
    assert len(frame) == 2 * sc.HIST_BINS
    raw_width = frame[~frame["scaled"]]["bin_end"].max()
    scaled_width = frame[frame["scaled"]]["bin_end"].max()
    assert raw_width / scaled_width == pytest.approx(8.0)        # same bins, divided by sqrt(64)


@pytest.mark.parametrize("tau", [1.0, 4.0])
def test_jacobian_norm_in_chart_matches_autograd(tau):
    at = open_page("scaling", "en", {"tau": sc.fmt_tau(tau)})     # the URL holds the slider's label
    assert exceptions(at) == [] and at.select_slider(key="tau").value == tau
    frame = _frame(at, "metric", "plotted", "value")
    q, k = sl.sample_qk(N_Q, N_K, 1024, seed=0)
    for d in (1, 64, 1024):
        raw = q[:, :d] @ k[:, :d].T
        for scaled in (False, True):
            expected = _jacobian_median(raw / (tau * (math.sqrt(d) if scaled else 1.0)))
            row = frame[(frame["metric"] == "jacobian_norm") & (frame["d_k"] == d)
                        & (frame["scaled"] == scaled)]
            assert float(row["value"].iloc[0]) == pytest.approx(expected, abs=1e-7, rel=1e-6), (d, scaled)
    jac = frame[frame["metric"] == "jacobian_norm"]
    unscaled = jac[~jac["scaled"]].sort_values("d_k")["value"].to_numpy()
    if tau == 1.0:
        assert unscaled[-1] < 0.01 * unscaled[0]      # the gradient vanishes without scaling ...
        assert jac[jac["scaled"]]["value"].min() > 0.1  # ... and not with it


def test_heatmap_and_bars_are_the_softmax_of_q_k(default_en):
    at = default_en
    heat = _heatmap(at)
    weights = heat["value"].to_numpy().reshape(N_SHOW, N_K)
    q, k = sl.sample_qk(N_Q, N_K, 64, seed=0)
    expected = torch.softmax(q[:N_SHOW] @ k.T / 8.0, dim=-1).numpy()
    np.testing.assert_allclose(weights, expected, atol=1e-12)
    np.testing.assert_allclose(weights.sum(axis=1), 1.0, atol=1e-12)
    bars = _frame(at, "key", "weight", "is_max", without=("d_k",))
    np.testing.assert_allclose(bars["weight"].to_numpy(), expected[0], atol=1e-12)
    assert bars.loc[bars["is_max"], "key"].tolist() == [f"k{int(expected[0].argmax()) + 1}"]


def test_strip_shows_the_same_query_as_d_k_grows(default_en):
    strip = _frame(default_en, "d_k", "mode", "weight")
    q, k = sl.sample_qk(N_Q, N_K, 1024, seed=0)
    assert sorted(strip["d_k"].unique()) == list(sl.STRIP_D_K)
    for d in sl.STRIP_D_K:
        for scaled in (False, True):
            got = strip[(strip["d_k"] == d) & (strip["scaled"] == scaled)]["weight"].to_numpy()
            s = q[0, :d] @ k[:, :d].T / (math.sqrt(d) if scaled else 1.0)
            np.testing.assert_allclose(got, torch.softmax(s, -1).numpy(), atol=1e-12)


def test_notice_quotes_the_chart_numbers(default_en):
    at = default_en
    text = _notice(at)
    var = _frame(at, "series", "kind", "value")
    now = var[var["is_now"] & (var["kind"] == "measured")]
    assert f"**{fmt.sig(now.loc[~now['scaled'], 'value'].iloc[0])}**" in text
    assert f"**{fmt.sig(now.loc[now['scaled'], 'value'].iloc[0])}**" in text
    sweep = _frame(at, "metric", "plotted", "value")
    here = sweep[sweep["is_now"]]
    for metric in ("max_weight", "entropy", "jacobian_norm"):
        for scaled in (False, True):
            value = here[(here["metric"] == metric) & (here["scaled"] == scaled)]["value"].iloc[0]
            assert f"**{fmt.sig(value)}**" in text, (metric, scaled)
    jac = here[here["metric"] == "jacobian_norm"].set_index("scaled")["value"]
    assert f"**{sc.fmt_short(jac[True] / jac[False])}× smaller**" in text


def test_url_reproduces_view_and_temperature_equals_scaling():
    a = open_page("scaling", "en", {"dk": "256", "scale": "false", "tau": "16", "seed": "3"})
    b = open_page("scaling", "en", {"dk": "256", "scale": "true", "tau": "1", "seed": "3"})
    assert exceptions(a) == [] and exceptions(b) == []
    assert a.select_slider(key="dk").value == 256 and a.toggle(key="scale").value is False
    assert a.select_slider(key="tau").value == 16.0 and a.number_input(key="seed").value == 3
    # dividing by sqrt(d_k) IS temperature sqrt(d_k): the two heatmaps are the same numbers
    np.testing.assert_allclose(_heatmap(a)["value"], _heatmap(b)["value"], atol=1e-12)
    assert "unscaled, d_k = 256, τ = 16" in all_text(a)


@pytest.mark.parametrize("params, message", [
    ({"dk": "1024", "scale": "false", "tau": "1/8"}, "scaling.warn_saturated"),
    ({"dk": "1024", "scale": "true", "tau": "32"}, "scaling.warn_flat"),
    ({"dk": "1", "scale": "false", "tau": "1/8", "seed": "9999"}, None),
    ({"dk": "1", "scale": "true", "tau": "32", "seed": "9999"}, "scaling.warn_flat"),
    ({"dk": "3", "tau": "abc", "seed": "-5", "scale": "maybe"}, "common.url_rejected"),   # ignored, and said so
])
def test_extremes_give_messages_not_exceptions(params, message):
    at = open_page("scaling", "en", params)
    assert exceptions(at) == []
    warnings = " ".join(w.value for w in at.warning)
    if message:
        assert str(catalog("en")[message]).split("{")[0][:30] in warnings
    else:
        assert warnings == ""
    frame = _frame(at, "metric", "plotted", "value")
    assert np.isfinite(frame["value"]).all() and (frame["plotted"] >= sc.FLOOR).all()
    heat = _heatmap(at)["value"].to_numpy().reshape(N_SHOW, N_K)
    np.testing.assert_allclose(heat.sum(axis=1), 1.0, atol=1e-9)


def test_every_widget_at_its_extremes():
    at = open_page("scaling", "zh")
    for value in (1, 1024, 64):
        at.select_slider(key="dk").set_value(value).run()
        assert exceptions(at) == []
    for value in (0.125, 32.0, 1.0):
        at.select_slider(key="tau").set_value(value).run()
        assert exceptions(at) == []
    at.toggle(key="scale").set_value(False).run()
    assert exceptions(at) == [] and "不缩放" in all_text(at)
    for value in (9999, 0):
        at.number_input(key="seed").set_value(value).run()
        assert exceptions(at) == []


def test_clicked_row_drives_bars_strip_and_temperature():
    """A clicked row is kept in the URL (?row=5): a link opens on that row, and the bars, the strip and the
    temperature chart follow it."""
    at = open_page("scaling", "en", {"row": "5"})
    assert exceptions(at) == []
    heat = _heatmap(at)["value"].to_numpy().reshape(N_SHOW, N_K)
    bars = _frame(at, "key", "weight", "is_max", without=("d_k",))
    np.testing.assert_allclose(bars["weight"], heat[5], atol=1e-12)
    temp = _frame(at, "tau", "max_weight")
    now = temp[temp["is_now"] & temp["scaled"]]
    assert float(now["max_weight"].iloc[0]) == pytest.approx(heat[5].max(), abs=1e-12)
    assert "Query q6" in all_text(at)


def test_exercises_reveal_feedback(default_en):
    at = default_en
    at.radio(key="ex_var_guess").set_value(2).run()
    at.button(key="ex_var_reveal").click().run()
    assert any("Right" in s.value for s in at.success)
    at.radio(key="ex_tau_guess").set_value(0).run()
    at.button(key="ex_tau_reveal").click().run()
    assert any("τ = 16" in e.value for e in at.error)


def test_the_revealed_explanation_quotes_this_seeds_measured_variance():
    """The exercise is drawn outside the seed's fragment; its explanation (a slot that fragment fills) quotes the
    measured Var(q.k) at d_k = 256 of the seed now shown, and follows a new seed."""
    at = open_page("scaling", "en", {"seed": "4"})
    at.radio(key="ex_var_guess").set_value(2).run()
    at.button(key="ex_var_reveal").click().run()
    for seed in (4, 11):
        if seed != 4:
            at.number_input(key="seed").set_value(seed).run()
        assert exceptions(at) == []
        measured = float(sl.variance_sweep(seed, sl.D_K_STEPS, N_PAIRS).var_raw[sl.D_K_STEPS.index(256)])
        assert abs(measured - 256) < 0.15 * 256
        assert shows_label(all_text(at), "scaling.ex1_explanation", measured=fmt.sig(measured)), seed


def test_the_gradient_sweep_is_one_fixed_sample_and_the_seed_redraws_the_rest():
    """The sweep's three charts are medians over one fixed sample of 256 queries (its caption says so): a new seed
    leaves their data as it was and redraws the histogram, the heatmap and the temperature curve."""
    a = open_page("scaling", "en", {"seed": "0"})
    b = open_page("scaling", "en", {"seed": "7"})
    assert exceptions(a) == [] and exceptions(b) == []
    sweep = ("metric", "plotted", "value")
    pd.testing.assert_frame_equal(_frame(a, *sweep), _frame(b, *sweep))
    direct = sl.saturation_sweep(0)                                   # the fixed sample: seed 0
    here = _frame(a, *sweep)
    got = here[(here["metric"] == "max_weight") & here["scaled"]]["value"].to_numpy()
    np.testing.assert_allclose(got, direct.scaled.max_weight.numpy(), atol=1e-12)
    assert not np.allclose(_heatmap(a)["value"], _heatmap(b)["value"])
    assert not _frame(a, "tau", "max_weight")["max_weight"].equals(_frame(b, "tau", "max_weight")["max_weight"])
    assert not _frame(a, "bin_start", "density")["density"].equals(_frame(b, "bin_start", "density")["density"])
    assert shows_label(all_text(a), "scaling.sweep_caption", n=N_Q, k=N_K, tau="1", dk=64)


def test_pitfall_numbers_match_a_direct_computation():
    """The demo is drawn only while its expander is open (?pitx=true)."""
    at = open_page("scaling", "en", {"pitx": "true"})
    assert exceptions(at) == []
    text = all_text(at)
    q, k = sl.sample_qk(N_Q, N_K, 64, seed=0)
    raw = q @ k.T

    def nan_rows(s, dtype):
        e = torch.exp(s.to(dtype))
        return int(torch.isnan(e / e.sum(-1, keepdim=True)).any(-1).sum())

    counts = (nan_rows(raw, torch.float16), nan_rows(raw, torch.float32),
              nan_rows(raw / 8, torch.float16), nan_rows(raw / 8, torch.float32))
    assert counts[0] > 100 and counts[2] == 0                  # float16 overflows without scaling only
    fields = ("nan16_raw", "nan32_raw", "nan16_scaled", "nan32_scaled")
    assert shows_label(text, "scaling.pitfall_live", **dict(zip(fields, counts)))

    def typical_max(s):
        return sorted(torch.softmax(s, -1).max(-1).values.tolist())[(N_Q - 1) // 2]

    assert shows_label(text, "scaling.pitfall_which_d", mw_dk=fmt.sig(typical_max(raw / 8)),
                       mw_dmodel=fmt.sig(typical_max(raw / math.sqrt(512))))


def test_every_chart_is_a_verified_chart_kind_in_another_setting(monkeypatch):
    """Unscaled, high temperature, another row and seed, in Chinese: each of the nine charts is drawn by a
    ui.charts.chart_kind whose filled spec equals the direct Altair build (VERIFY raises otherwise). ~2 s."""
    from ui import charts as ui_charts
    monkeypatch.setattr(ui_charts, "VERIFY", True)
    at = open_page("scaling", "zh", {"dk": "1024", "scale": "false", "tau": "32", "seed": "5", "row": "7"})
    assert exceptions(at) == []
    kinds = [chart_spec(c).get("usermeta", {}).get("chart_kind", "") for c in charts(at)]
    assert len(kinds) == 9 and all(kinds), kinds

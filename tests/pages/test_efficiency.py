"""The efficiency page in AppTest: what its charts and tables contain, checked against independent oracles
(torch softmax / SDPA, elu + 1 by hand, masks written cell by cell, the recorded JSON and the LRA CSV)."""
import json
import math
import re

import numpy as np
import pandas as pd
import pytest
import torch
import torch.nn.functional as TF

from attention_core import efficient as eff
from attention_core.labs import efficiency as el
from attention_core.text import tokenize
from tests.apptest_util import ROOT, all_text, chart_data, chart_spec, charts, exceptions, open_page, shows_label
from ui.i18n import catalog

EN, ZH = catalog("en"), catalog("zh")
TOKENS = tokenize(EN["common.default_sentence"])
N = len(TOKENS)
DOC = json.loads((ROOT / "assets/bench/efficient.json").read_text(encoding="utf-8"))
TAB = {name: EN[f"efficiency.tab_{name}"] for name in ("approx", "cost", "flash", "rnn")}


def title_of(chart) -> str:
    spec = chart_spec(chart)
    title = spec.get("title", "")
    title = title.get("text", "") if isinstance(title, dict) else title
    return " ".join(title) if isinstance(title, list) else str(title)     # a long title: several lines


def chart_by_title(at, prefix: str):
    found = [c for c in charts(at) if title_of(c).startswith(prefix)]
    assert found, f"no chart titled {prefix!r}: {[title_of(c) for c in charts(at)]}"
    return found[0]


def frame_of(chart):
    return next(iter(chart_data(chart).values()))


def heatmap_matrix(chart):
    frame = frame_of(chart)
    n_q, n_k = frame["query_pos"].max() + 1, frame["key_pos"].max() + 1
    values = np.full((n_q, n_k), np.nan)
    masked = np.zeros((n_q, n_k), dtype=bool)
    values[frame["query_pos"], frame["key_pos"]] = frame["value"].astype(float)
    masked[frame["query_pos"], frame["key_pos"]] = frame["masked"].astype(bool)
    return values, masked


def softmax_oracle(q, k, mask=None):
    """Row by row with torch.softmax over the visible keys (float64)."""
    s = (q.double() @ k.double().T) / math.sqrt(q.size(-1))
    w = torch.zeros_like(s)
    for i in range(s.size(0)):
        keep = torch.ones(s.size(1), dtype=torch.bool) if mask is None else mask[i]
        w[i, keep] = torch.softmax(s[i, keep], -1)
    return w.numpy()


def metric_table(at) -> tuple[dict[str, str], str]:
    """The approximations tab's metrics: one Markdown table (a row of labels, the rule, a row of values; a "|"
    inside a cell escaped) as {label: value}, and the table's help."""
    for m in at.markdown:
        rows = m.value.split("\n")
        if len(rows) >= 3 and re.fullmatch(r"\|( --- \|)+", rows[1]):
            assert rows[3:] == ["", EN['efficiency.m_help_line']], rows    # the help icon's paragraph
            cells = [[c.strip().replace("\\|", "|") for c in re.split(r"(?<!\\)\|", row)[1:-1]]
                     for row in (rows[0], rows[2])]
            assert len(cells[0]) == len(cells[1]), rows
            return {label: value.strip("*") for label, value in zip(*cells)}, m.proto.help
    raise AssertionError("no metrics table")


def metric(at, label: str) -> str:
    return metric_table(at)[0][label]


def inputs(seed=0, tokens=TOKENS, gain=1.0):
    q, k, v = el.lab_inputs(tokens, len(tokens), seed, gain=gain)
    return q[0, 0], k[0, 0], v[0, 0]


# ---------------------------------------------------------------- opening, both languages
@pytest.mark.parametrize("lang", ["en", "zh"])
def test_opens_with_exact_and_performer_weights(lang):
    at = open_page("efficiency", lang)
    assert exceptions(at) == []
    cat = catalog(lang)
    assert cat["efficiency.title"] in [t.value for t in at.title]
    tokens = tokenize(cat["common.default_sentence"])
    q, k, v = inputs(tokens=tokens)
    exact, masked = heatmap_matrix(chart_by_title(at, cat["efficiency.h_exact"]))
    assert not masked.any() and np.allclose(exact, softmax_oracle(q, k), atol=1e-6)
    perf, _ = heatmap_matrix(chart_by_title(at, cat["efficiency.h_method"].format(name="Performer")))
    assert np.allclose(perf.sum(-1), 1.0, atol=1e-5) and (perf >= 0).all()
    # the drawn Performer matrix reproduces the method's own output (m = 16, projection seeded as the page)
    proj = eff.orthogonal_random_features(16, el.D, torch.Generator().manual_seed(0 + el.FEATURES_STREAM))
    out = eff.performer_attention(q[None, None], k[None, None], v[None, None], proj).output[0, 0]
    assert np.allclose(perf @ v.numpy(), out.numpy(), atol=1e-5)


def test_metrics_and_notice_quote_the_chart():
    at = open_page("efficiency", "en")
    q, k, v = inputs()
    perf, _ = heatmap_matrix(chart_by_title(at, "Performer: effective weights"))
    exact = softmax_oracle(q, k)
    ref = TF.scaled_dot_product_attention(q[None, None], k[None, None], v[None, None])[0, 0].double().numpy()
    err = np.linalg.norm(perf @ v.double().numpy() - ref) / np.linalg.norm(ref)
    tv = 0.5 * np.abs(perf - exact).sum(-1).mean()
    shown_err = float(metric(at, EN["efficiency.m_error"]))
    assert shown_err == pytest.approx(err, rel=2e-3)
    assert metric(at, EN["efficiency.m_tv"]) == f"{100 * tv:.1f}%"
    assert metric(at, EN["efficiency.m_cost"]) == f"{2 * 16 / N:.3g}×"       # 4 n m d / (2 n^2 d)
    text = all_text(at)
    assert shows_label(text, "efficiency.notice_performer", m=16, err=f"{shown_err:.3g}")
    # the four metrics are one table: each label over its value (a "|" in a label kept), each help in its tooltip
    shown, helps = metric_table(at)
    assert list(shown) == [EN[f"efficiency.m_{m}"] for m in ("error", "tv", "cost", "reproduce")]
    assert float(shown[EN["efficiency.m_reproduce"]]) < 1e-5
    assert all(EN[f"efficiency.m_{m}_help"] in helps for m in ("error", "tv", "cost", "reproduce"))
    # the knob chart: a diamond at m = 16 with this run's error; cost = 2 m / n exactly
    knob = frame_of(chart_by_title(at, "Error and cost against Random features m"))
    dot = knob[knob["kind"] == "dot"]
    assert float(dot["x"].iloc[0]) == 16 and float(dot["y"].iloc[0]) == pytest.approx(err, rel=2e-3)
    cost = knob[knob["kind"] == "cost"]
    assert np.allclose(cost["y"], 2 * cost["x"] / N)
    errs = knob[knob["kind"] == "err"].set_index("x")["y"]
    assert errs.index.tolist() == [float(m) for m in el.FEATURES]
    assert errs[512.0] < errs[1.0]                                             # more features, less error
    # the row chart: the exact row and the Performer row of the query with the most misplaced attention
    row = int(np.argmax(0.5 * np.abs(perf - exact).sum(-1)))
    pair = frame_of(chart_by_title(at, EN["efficiency.row_title"]))
    assert np.allclose(pair[pair["series"] == "exact softmax"]["value"], exact[row], atol=1e-6)
    assert np.allclose(pair[pair["series"] == "Performer"]["value"], perf[row], atol=1e-6)


def _linear_oracle(q, k):
    a = (TF.elu(q.double()) + 1) @ (TF.elu(k.double()) + 1).T
    return (a / a.sum(-1, keepdim=True)).numpy()


def _strided_oracle(n, stride, window):
    return np.array([[abs(i - j) <= window or j % stride == 0 for j in range(n)] for i in range(n)])


def _block_global_oracle(n, block, g):
    return np.array([[i // block == j // block or i < g or j < g for j in range(n)] for i in range(n)])


def _longformer_oracle(n, window, g):
    return np.array([[abs(i - j) <= window or i < g or j < g for j in range(n)] for i in range(n)])


@pytest.mark.parametrize("params,check", [
    ({"v": "Linear (elu+1)"}, "linear"),
    ({"v": "Linformer", "k": "5"}, "linformer"),
    ({"v": "Strided sparse", "stride": "3", "win": "1"}, "strided"),
    ({"v": "Block-local + global", "block": "5", "glob": "2"}, "block_global"),
    ({"v": "Longformer", "win": "2", "glob": "1"}, "longformer"),
    ({"v": "Flash", "block": "5"}, "flash"),
], ids=["linear", "linformer", "strided", "block_global", "longformer", "flash"])
def test_effective_weights_match_oracles_and_reproduce_the_output(params, check):
    at = open_page("efficiency", "en", params)
    assert exceptions(at) == []
    q, k, v = inputs()
    w, masked = heatmap_matrix(chart_by_title(at, f"{params['v']}: effective weights"))
    if check == "linear":
        assert np.allclose(w, _linear_oracle(q, k), atol=1e-6)
        out = eff.linear_attention(q[None, None], k[None, None], v[None, None]).output[0, 0]
    elif check == "linformer":
        seg = np.arange(N) * 5 // N
        P = (seg[None, :] == np.arange(5)[:, None]).astype(float)
        P /= P.sum(-1, keepdims=True)                                 # segment means, written out
        kp, vp = P @ k.double().numpy(), P @ v.double().numpy()
        s = q.double().numpy() @ kp.T / math.sqrt(el.D)
        p = np.exp(s - s.max(-1, keepdims=True))
        p /= p.sum(-1, keepdims=True)
        assert np.allclose(w, p @ P, atol=1e-6)
        out = torch.from_numpy(p @ vp)
    elif check == "flash":
        assert np.allclose(w, softmax_oracle(q, k), atol=1e-6)
        out = TF.scaled_dot_product_attention(q[None, None], k[None, None], v[None, None])[0, 0]
    else:
        mask = {"strided": lambda: _strided_oracle(N, 3, 1),
                "block_global": lambda: _block_global_oracle(N, 5, 2),
                "longformer": lambda: _longformer_oracle(N, 2, 1)}[check]()
        assert (masked == ~mask).all() and (w[masked] == 0).all()
        assert np.allclose(w, softmax_oracle(q, k, torch.from_numpy(mask)), atol=1e-6)
        assert np.allclose(w.sum(-1), 1.0, atol=1e-6)
        out = torch.from_numpy(softmax_oracle(q, k, torch.from_numpy(mask))) @ v.double()
        assert f"keeps **{int(mask.sum())}** of {N * N}" in all_text(at)
    assert np.allclose(w @ v.double().numpy(), out.double().numpy(), atol=1e-5)


def test_sparse_knob_chart_reaches_zero_error_when_the_window_covers_everything():
    at = open_page("efficiency", "en", {"v": "Longformer", "glob": "0"})
    knob = frame_of(chart_by_title(at, "Error and cost against Window"))
    err = knob[knob["kind"] == "err"].set_index("x")["y"]
    cost = knob[knob["kind"] == "cost"].set_index("x")["y"]
    assert err.index.tolist() == [float(w) for w in range(N)]
    assert err[float(N - 1)] < 1e-6 and cost[float(N - 1)] == pytest.approx(1.0)
    for w in range(N):                                    # cost = share of visible pairs, counted here
        assert cost[float(w)] == pytest.approx(_longformer_oracle(N, w, 0).mean())


def test_url_reproduces_a_bigbird_view_with_random_keys():
    params = {"v": "BigBird", "win": "1", "glob": "2", "rnd": "3", "seed": "7", "gain": "×2"}
    at = open_page("efficiency", "en", params)
    assert exceptions(at) == []
    assert at.slider(key="win").value == 1 and at.slider(key="rnd").value == 3
    assert at.number_input(key="seed").value == 7 and at.select_slider(key="gain").value == 2.0
    mask = eff.bigbird_mask(N, 1, (0, 1), 3, torch.Generator().manual_seed(7 + el.RANDOM_KEYS_STREAM)).numpy()
    _, masked = heatmap_matrix(chart_by_title(at, "BigBird: effective weights"))
    assert (masked == ~mask).all()
    assert metric(at, EN["efficiency.m_pairs"]) == f"{int(mask.sum())} / {N * N}"    # the seed's random keys
    q, k, _ = inputs(seed=7, gain=2.0)
    exact, _ = heatmap_matrix(chart_by_title(at, EN["efficiency.h_exact"]))
    assert np.allclose(exact, softmax_oracle(q, k), atol=1e-6)


# ---------------------------------------------------------------- cost, measured
def test_recorded_scaling_chart_matches_the_json():
    at = open_page("efficiency", "en", {"tab": TAB["cost"]})
    assert exceptions(at) == []
    for title, y, slope in ((EN["efficiency.rec_time"], "time_ms", "time_slope"),
                            (EN["efficiency.rec_mem"], "memory_mib", "memory_slope")):
        frame = frame_of(chart_by_title(at, title))
        for method, s in DOC["slopes"].items():
            rows = frame[frame["method"] == method].sort_values("n")
            measured = [r for r in DOC["results"] if r["method"] == method and r.get("time_s")]
            assert len(rows) == len(measured)
            assert np.allclose(rows["time_ms"], [1e3 * r["time_s"] for r in measured])
            assert np.allclose(rows[slope], s[slope])
            top = rows.tail(4)                              # independent refit: numpy over the 4 largest n
            fit = np.polyfit(np.log(top["n"]), np.log(top[y]), 1)[0]
            assert fit == pytest.approx(s[slope], abs=1e-9)
            label = rows["label_time" if y == "time_ms" else "label_memory"].iloc[0]
            assert label.endswith(f"slope {s[slope]:.2f}")
    # the tutorial's table (cost; idea and use case), then what we measured (slopes; speed and memory)
    tutorial, table = at.table[0].value.join(at.table[1].value), at.table[2].value.join(at.table[3].value)
    assert tutorial.loc[EN["efficiency.cx_linear"], EN["efficiency.col_use"]] == EN["efficiency.cx_linear_use"]
    assert "✗" in tutorial.loc[EN["efficiency.cx_flash"], EN["efficiency.col_space"]]
    assert table.loc[EN["efficiency.cx_standard"], EN["efficiency.col_tslope"]] == \
        f"{DOC['slopes']['full']['time_slope']:.2f}"
    by = {(r["method"], r["n"]): r for r in DOC["results"] if r.get("time_s")}
    speed = by[("full", 16384)]["time_s"] / by[("linear", 16384)]["time_s"]
    assert table.loc[EN["efficiency.cx_linear"], EN["efficiency.col_speed"].format(n=16384)] == f"{speed:.3g}×"
    assert f"**{speed:.0f}×** faster" in all_text(at)


def test_lra_table_beside_ours():
    shipped = (ROOT / "assets/bench/lra_table2.csv").read_text(encoding="utf-8")
    assert shipped.startswith("# Long Range Arena (Tay et al., ICLR 2021") and "Table 2" in shipped
    lines = shipped.splitlines()
    csv_rows = [line.split(",") for line in lines if line and not line.startswith(("#", "model"))]
    lra = {(m, int(n)): (float(ratio), float(mem)) for m, n, _, ratio, mem in csv_rows}
    at = open_page("efficiency", "en", {"tab": TAB["cost"]})
    speed = next(d.value for d in at.table if EN["efficiency.lra_speed_paper"] in d.value.columns).reset_index()
    memory = next(d.value for d in at.table if EN["efficiency.lra_mem_paper"] in d.value.columns).reset_index()
    assert list(speed[EN["efficiency.lra_method"]]) == list(memory[EN["efficiency.lra_method"]])
    table = pd.concat([speed, memory.drop(columns=[EN["efficiency.lra_method"], "n"])], axis=1)
    by = {(r["method"], r["n"]): r for r in DOC["results"] if r.get("time_s")}
    assert len(table) == 12
    for _, row in table.iterrows():
        ours, model = row[EN["efficiency.lra_method"]].split(" ↔ ")
        method = {"linear (elu+1)": "linear", "Performer (m = 256)": "performer",
                  "Linformer (k = 256)": "linformer", "sliding window ±64 (banded)": "window"}[ours]
        n = int(row["n"])
        assert row[EN["efficiency.lra_speed_paper"]] == lra[(model, n)][0]
        paper_mem = lra[(model, n)][1] / lra[("Transformer", n)][1]
        assert row[EN["efficiency.lra_mem_paper"]] == pytest.approx(paper_mem, abs=1e-3)
        assert row[EN["efficiency.lra_speed_ours"]] == pytest.approx(
            by[("full", n)]["time_s"] / by[(method, n)]["time_s"], abs=0.006)
    assert "TPU" in all_text(at) and "one shared CPU core" in all_text(at)


def test_live_benchmark_runs_only_on_request():
    at = open_page("efficiency", "en", {"tab": TAB["cost"]})
    assert "eff_live" not in at.session_state and EN["efficiency.live_none"] in all_text(at)
    assert not [c for c in charts(at) if title_of(c) == EN["efficiency.live_chart"]]
    at.button(key="live_run").click().run()
    assert exceptions(at) == []
    results = at.session_state["eff_live"]
    assert len(results) == len(el.LIVE_SIZES) * len(el.LIVE_METHODS) and all(r["time_s"] > 0 for r in results)
    live = frame_of(chart_by_title(at, EN["efficiency.live_chart"]))
    full = {r["n"]: r["time_s"] for r in results if r["method"] == "full"}
    for r in results:
        row = live[(live["method"] == r["method"]) & (live["n"] == r["n"])]
        assert float(row["speedup"].iloc[0]) == pytest.approx(full[r["n"]] / r["time_s"])
    at.select_slider(key="gain").set_value(2.0).run()    # a rerun does not time again (the cost tab has no seed)
    assert at.session_state["eff_live"] == results


# ---------------------------------------------------------------- flash step-through
@pytest.mark.parametrize("causal", [False, True])
def test_flash_tiles_state_and_final_difference(causal):
    params = {"tab": TAB["flash"], "bq": "4", "bk": "5", "tile": "2", "fc": "true" if causal else "false"}
    at = open_page("efficiency", "en", params)
    assert exceptions(at) == []
    q, k, v = inputs()
    n_qb, n_kb = math.ceil(N / 4), math.ceil(N / 5)                 # 5 does not divide 12: blocks 5, 5, 2
    grid = frame_of(chart_by_title(at, EN["efficiency.tile_chart"]))
    codes = np.zeros((N, N), dtype=int)
    codes[grid["query_pos"], grid["key_pos"]] = grid["code"]
    i, j = np.arange(N)[:, None], np.arange(N)[None, :]
    current = (i < 4) & (j >= 5) & (j < 10)                           # tile 2: Q block 1 x K/V block 2
    if causal:
        assert ((codes == 1) == (current & (j <= i))).all()
        skipped = [(a, b) for a in range(n_qb) for b in range(n_kb) if 5 * b > min(4 * a + 3, N - 1)]
        assert int((codes == 3).sum()) == sum(min(4, N - 4 * a) * min(5, N - 5 * b) for a, b in skipped)
        assert f"{len(skipped)} of {n_qb * n_kb} tiles skipped" in all_text(at)
    else:
        assert ((codes == 1) == current).all() and not (codes == 3).any()
    assert ((codes == 0) == ((i < 4) & (j < 5) & ((j <= i) if causal else True))).all()
    # the running max and sum of the table, against scores computed here
    s = (q.double() @ k.double().T / math.sqrt(el.D)).numpy()
    if causal:
        s = np.where(j > i, -np.inf, s)
    seen = s[0:4, :10]
    m = seen.max(-1)
    table = next(d.value for d in at.table if EN["efficiency.fc_m_new"] in d.value.columns)
    shown_m = table[EN["efficiency.fc_m_new"]].astype(float).to_numpy()
    shown_l = table[EN["efficiency.fc_l_new"]].astype(float).to_numpy()
    assert np.allclose(shown_m, m, rtol=6e-3, atol=1e-3)
    assert np.allclose(shown_l, np.exp(seen - m[:, None]).sum(-1), rtol=6e-3)
    alpha = table[EN["efficiency.fc_rescale"]].astype(float).to_numpy()
    assert np.allclose(alpha, np.exp(s[0:4, :5].max(-1) - m), rtol=6e-3, atol=1e-3)
    # the final difference, printed and recomputed with torch's SDPA
    diff = float(re.search(r"max \|flash − exact\| = \*\*([0-9.e+-]+)\*\*", all_text(at)).group(1))
    assert diff < 1e-5
    ref = TF.scaled_dot_product_attention(q[None, None], k[None, None], v[None, None], is_causal=causal)
    out = eff.flash_attention(q[None, None], k[None, None], v[None, None], block_q=4, block_k=5,
                              causal=causal)
    assert float((out.output - ref).abs().max()) < 1e-5


def test_flash_last_tile_and_out_of_range_tile():
    n = len(tokenize(ZH["common.default_sentence"]))                  # one query block, n key blocks of 1
    params = {"tab": ZH["efficiency.tab_flash"], "bq": "16", "bk": "1"}
    last = open_page("efficiency", "zh", params | {"tile": str(n)})
    assert exceptions(last) == []
    text = all_text(last)
    assert shows_label(text, "efficiency.flash_final", "zh", total=n)
    assert shows_label(text, "efficiency.step_block_done", "zh", a=1)
    wild = open_page("efficiency", "zh", params | {"tile": "999"})     # not a tile: the default view
    assert exceptions(wild) == [] and f"全部 {n} 个分块完成后" in all_text(wild)


def test_flash_first_tile_starts_from_minus_infinity():
    """Before a row's first tile the running max is −∞ (written so, as the lesson writes it) and the sum 0."""
    at = open_page("efficiency", "en", {"tab": TAB["flash"], "bq": "4", "bk": "4", "tile": "1"})
    table = next(d.value for d in at.table if EN["efficiency.fc_m_old"] in d.value.columns)
    assert list(table[EN["efficiency.fc_m_old"]]) == ["−∞"] * 4 and list(table[EN["efficiency.fc_l_old"]]) == ["0"] * 4


# ---------------------------------------------------------------- linear attention as an RNN
def test_rnn_state_and_output_against_the_recurrence():
    at = open_page("efficiency", "en", {"tab": TAB["rnn"], "rnn_step": "5"})
    assert exceptions(at) == []
    q, k, v = (x.double() for x in inputs())
    phi_k, phi_q = TF.elu(k) + 1, TF.elu(q) + 1
    S = sum(torch.outer(phi_k[j], v[j]) for j in range(5))           # sum_{j <= 5} phi(k_j) v_j^T
    z = phi_k[:5].sum(0)
    y = (phi_q[4] @ S) / (phi_q[4] @ z)
    heat, _ = heatmap_matrix(chart_by_title(at, "State S_5"))
    assert np.allclose(heat, S.numpy(), atol=1e-4)
    zbars = frame_of(chart_by_title(at, "Normaliser z_5"))
    assert np.allclose(zbars["value"], z.numpy(), atol=1e-4)
    pair = frame_of(chart_by_title(at, "Output y_5"))
    for series in (EN["efficiency.series_rnn"], EN["efficiency.series_parallel"]):
        assert np.allclose(pair[pair["series"] == series]["value"], y.numpy(), atol=1e-5)
    assert shows_label(all_text(at), "efficiency.notice_rnn_state", state=272)


# ---------------------------------------------------------------- pitfalls
def test_pitfalls_quote_live_numbers():
    at = open_page("efficiency", "en", {"v": "Block-local + global", "block": "5"})
    text = all_text(at)
    sizes = [c.size(2) for c in torch.zeros(1, 1, N, 1).chunk(N // 5, dim=2)]
    assert shows_label(text, "efficiency.pit2_now", n=N, block=5, k=N // 5, sizes=", ".join(map(str, sizes)))
    assert "34, 34, 32" in text and "must match the existing size" in text   # the docstring and the error
    assert shows_label(text, "efficiency.pit1_now", same=EN["efficiency.yes"])
    text = all_text(open_page("efficiency", "en", {"tab": TAB["cost"]}))     # beside the complexity table
    recorded = f"{DOC['slopes']['flash']['time_slope']:.2f}"                          # from the recorded run
    assert shows_label(text, "efficiency.pit3_numbers", tslope=recorded)


def test_each_tab_carries_its_own_exercise_and_pitfalls():
    """A tab is one lesson: an exercise and the pitfalls of a tab appear under that tab only (no SparseAttention
    pitfall under the flash tab, no doubling question under the approximations)."""
    own = {"approx": ("approx_ex", ("pit2_title", "pit1_title", "pit_bm_title")), "cost": ("eff_ex", ("pit3_title",)),
           "flash": ("flash_ex", ()), "rnn": ("rnn_ex", ("pit_lin_title",))}
    pitfalls = {p for _, titles in own.values() for p in titles}
    for tab, (exercise, titles) in own.items():
        at = open_page("efficiency", "en", {"tab": TAB[tab]})
        text = all_text(at)
        assert exceptions(at) == [] and [r.key for r in at.radio if r.key.endswith("_guess")] == [f"{exercise}_guess"]
        assert {p for p in pitfalls if EN[f"efficiency.{p}"] in text} == set(titles), tab


# ---------------------------------------------------------------- bad input, extremes
@pytest.mark.parametrize("text,message", [
    ("", "Type a sentence first"),
    ("one", "This needs at least 2 tokens"),
    (" ".join(f"w{i}" for i in range(300)), "only the first 32 are used"),
    ("😀 🎉 👍🏽 👨‍👩‍👧 ok", None),
    ("注意力机制很有趣", None),
    ("<script>alert(1)</script> **x**", None),
], ids=["empty", "one-token", "300-tokens", "emoji", "chinese", "html"])
def test_bad_text_never_crashes(text, message):
    for tab in (None, TAB["flash"], TAB["rnn"]):
        at = open_page("efficiency", "en", {"text": text} | ({"tab": tab} if tab else {}))
        assert exceptions(at) == [], (text, tab)
        if message:
            assert message in all_text(at)
        assert "<script>" not in "".join(m.value for m in at.markdown)
        if message and tab is None:
            break


@pytest.mark.parametrize("params", [
    {"src": "Random vectors", "n": "4", "v": "Linformer", "k": "64", "proj": "random (untrained)",
     "seed": "9999"},
    {"src": "Random vectors", "n": "64", "v": "Performer", "m": "512", "gain": "×4"},
    {"v": "Performer", "m": "1", "gain": "×0.25"},
    {"v": "Strided sparse", "stride": "32", "win": "32"},
    {"v": "Strided sparse", "stride": "1", "win": "0"},
    {"v": "Block-local + global", "block": "32", "glob": "4"},
    {"v": "BigBird", "win": "0", "glob": "0", "rnd": "8"},
    {"v": "Flash", "block": "1"},
    {"v": "Exact softmax"},
    {"v": "nonsense", "m": "777", "gain": "??", "src": "??"},
    {"tab": TAB["flash"], "src": "Random vectors", "n": "64", "bq": "1", "bk": "16", "fc": "true",
     "tile": "1"},
    {"tab": TAB["rnn"], "rnn_step": "1"},
    {"tab": TAB["rnn"], "src": "Random vectors", "n": "64", "rnn_step": "64"},
], ids=["lf-n4-k64-gauss", "perf-n64-m512", "perf-m1", "strided-max", "strided-min", "block-max", "bigbird",
        "flash-b1", "exact", "garbage", "flash-b1-causal-n64", "rnn-1", "rnn-64"])
def test_widget_extremes(params):
    at = open_page("efficiency", "en", params)
    assert exceptions(at) == [], params
    assert charts(at)


def test_linformer_random_projection_is_signed_and_clamped():
    at = open_page("efficiency", "en", {"v": "Linformer", "k": "40", "proj": "random (untrained)"})
    text = all_text(at)
    assert shows_label(text, "efficiency.note_clamped", what="k", value=40, n=N)
    w, _ = heatmap_matrix(chart_by_title(at, "Linformer: effective weights"))
    assert (w < 0).any()
    spec = json.dumps(chart_spec(chart_by_title(at, "Linformer: effective weights")))
    assert "blueorange" in spec


# ---------------------------------------------------------------- show the code that ran
SMALL = {"src": "Random vectors", "n": "4"}          # small inputs: every function runs once under the profiler


@pytest.mark.parametrize("params", [SMALL | {"v": "Linear (elu+1)"}, {"tab": TAB["cost"]},
                                    SMALL | {"tab": TAB["flash"]}, SMALL | {"tab": TAB["rnn"]}],
                         ids=["linear", "cost", "flash", "rnn"])
def test_show_code_shows_only_functions_that_ran(params, monkeypatch):
    """Every function in "Show the code" was called while the page ran (caches emptied first, so a function
    behind a cache hit counts too): the expander prints the code that drew the picture, not a list. ~1-3 s each."""
    import sys
    import threading

    from serving import cache
    from ui import code_view, models

    for c in list(cache._BY_FUNCTION.values()):
        c.clear()
    models._cached.clear()                           # the recorded benchmark and the LRA table are read again
    called, shown = set(), []
    monkeypatch.setattr(code_view, "show_code", lambda *objects, **kw: shown.extend(objects))

    def profile(frame, event, arg):
        if event == "call":
            called.add(frame.f_code)

    threading.setprofile(profile)
    try:
        at = open_page("efficiency", "en", params)
    finally:
        threading.setprofile(None)
        sys.setprofile(None)
    assert exceptions(at) == [] and shown
    not_run = [f"{f.__module__}.{f.__qualname__}" for f in shown if f.__code__ not in called]
    assert not_run == []


def test_phone_legibility_of_the_efficiency_charts():
    """Legible on a phone (fast, no page): flash's three greys differ clearly in lightness, tile and pair labels are
    never hidden for overlap (thinned evenly instead), legends list one entry a row so nothing is cut."""
    from ui import efficiency_charts as ec

    def lightness(hex_colour: str) -> float:          # CIE L* of an sRGB colour
        c = [int(hex_colour[i:i + 2], 16) / 255 for i in (1, 3, 5)]
        lin = [x / 12.92 if x <= 0.04045 else ((x + 0.055) / 1.055) ** 2.4 for x in c]
        y = 0.2126 * lin[0] + 0.7152 * lin[1] + 0.0722 * lin[2]
        return 116 * y ** (1 / 3) - 16 if y > 0.008856 else 903.3 * y
    todo, skipped, hidden = (lightness(ec.STATUS_COLOURS[i]) for i in (2, 3, 4))
    assert min(abs(todo - skipped), abs(todo - hidden), abs(skipped - hidden)) >= 15
    status = np.array([[0, 1, 2], [3, 4, 2], [2, 2, 2]])
    spec = ec.tiles(status, ["a", "b", "c"], 1, 1)
    enc = spec["layer"][0]["encoding"]
    assert enc["x"]["axis"]["labelOverlap"] is False and "bandwidth('x')" in enc["x"]["axis"]["labelExpr"]
    assert enc["color"]["legend"]["columns"] == 1
    pair = ec.pair([0.2, 0.8], [0.3, 0.7], ["it", "was"], ("exact", "approx"), title="t", label_title="k",
                   value_title="w")
    assert pair["encoding"]["y"]["field"] == "label" and pair["encoding"]["y"]["axis"]["labelOverlap"] is False


# ---------------------------------------------------------------- the seed, read in each tab (the redraw budget)
def test_the_seed_in_the_url_reaches_each_tab_that_reads_it():
    """The seed moved from the page's input row into each tab's fragment (beside the controls it drives): ?seed=7
    still drives the RNN tab's state and the precision table of the tips tab; the cost tab has no seed. ~3 s."""
    at = open_page("efficiency", "en", {"tab": TAB["rnn"], "rnn_step": "5", "seed": "7"})
    assert exceptions(at) == [] and at.number_input(key="seed").value == 7
    q, k, v = (x.double() for x in inputs(seed=7))
    S = sum(torch.outer(TF.elu(k[j]) + 1, v[j]) for j in range(5))
    assert np.allclose(heatmap_matrix(chart_by_title(at, "State S_5"))[0], S.numpy(), atol=1e-4)
    at = open_page("efficiency", "en", {"tab": EN["efficiency.tab_tips"], "seed": "7"})
    assert exceptions(at) == [] and at.number_input(key="seed").value == 7
    assert EN["efficiency.tips_mp_caption"].format(n=64, d=32, seed=7) in all_text(at)
    errors = [x.output_error for x in el.precision_table(64, 32, 1.0, 7)]
    assert all(f"{e:.1e}" in all_text(at) for e in errors)
    at = open_page("efficiency", "en", {"tab": TAB["cost"], "seed": "7"})
    assert exceptions(at) == [] and not at.number_input

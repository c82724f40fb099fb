"""The sliding-window and attention-sink page shows what its lab and model compute, checked against independent
oracles: the window mask is sliding_window_mask's definition written out, the receptive-field picture matches a
search over paths and the notice quotes the L x (W - 1) rule; the first-token share heatmap and the streaming
charts show the checkpoint's recorded figures; the head heatmap equals the lab's weights and the streaming bars
the recorded grid's cell for the URL's values, with the live token-by-token check; a missing, damaged or stale
grid gets the one missing/damaged-file message; the question comes before the evidence; bad URL values and a
missing checkpoint get a message. Runtime: about 10 s on the shared machine."""
from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

import attention_core.models.recipes as train
from attention_core.labs import attention_sinks as lab
from attention_core.models import attention_sinks_lm as sinks_lm
from tests.apptest_util import (
    ROOT,
    all_text,
    chart_data,
    chart_titled,
    charts,
    exceptions,
    open_page,
    shows_label,
    title_text,
)
from tests.test_attention_sinks_lab import brute_reach
from ui.format import fixed, sig
from ui.i18n import catalog

NS = "attention_sinks"


def data(chart):
    return next(iter(chart_data(chart).values()))


def title(lang, key, **fields):
    return catalog(lang)[f"{NS}.{key}"].format(**fields)


@pytest.fixture(scope="module")
def loaded():
    return train.load_model(lab.RECIPE)


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_window_mask_and_the_receptive_field(lang):
    n, W, L = 14, 3, 4
    at = open_page(NS, lang, {"n": str(n), "window": str(W), "layers": str(L), "sinks": "0"})
    assert exceptions(at) == []
    assert at.title[0].value == catalog(lang)[f"{NS}.title"]
    mask = data(chart_titled(at, title(lang, "mask_title", n=n, W=W, s=0)))
    seen, hidden = catalog(lang)[f"{NS}.mask_window"], catalog(lang)[f"{NS}.mask_hidden"]
    for row in mask.itertuples():                    # the definition: j <= i and i - j < W
        assert row.reach == (seen if row.input <= row.output and row.output - row.input < W else hidden)
    assert len(mask) == n * n
    reach = data(chart_titled(at, title(lang, "reach_title", L=L)))
    brute = brute_reach(n, W, L, 0)
    cat = catalog(lang)
    for row in reach.itertuples():
        first = next((k + 1 for k in range(L) if row.input in brute[k][row.output]), 0)
        want = (cat[f"{NS}.reach_never"].format(L=L) if first == 0 else cat[f"{NS}.reach_layer_1"] if first == 1
                else cat[f"{NS}.reach_layer"].format(l=first))
        assert row.reach == want
    assert len(reach) == n * n
    assert shows_label(all_text(at), f"{NS}.notice_reach", lang, L=L, i=n - 1, far=L * (W - 1), w1=W - 1,
                       rule=L * (W - 1))


def test_the_first_token_share_is_the_recorded_one(loaded):
    at = open_page(NS, "en")
    assert exceptions(at) == []
    ev = loaded.meta["eval"]
    share = np.array(ev["first_share"])
    frame = data(chart_titled(at, title("en", "share_title")))
    got = np.zeros_like(share)
    got[frame["query_pos"], frame["key_pos"]] = frame["value"]
    assert np.allclose(got, share, atol=1e-6)
    best = np.unravel_index(share.argmax(), share.shape)
    assert shows_label(all_text(at), f"{NS}.notice_share", max=fixed(float(share.max()), 3), l=best[0] + 1,
                       h=best[1] + 1, uniform=fixed(ev["uniform_first_share"], 3))
    # the head shown by default is the recorded strongest one; its heatmap is the lab's weights
    view = lab.head_view(loaded.model, 0)
    head = data(chart_titled(at, title("en", "head_title", l=best[0] + 1, h=best[1] + 1, n=len(view.tokens))))
    w = np.zeros_like(view.weights[best])
    w[head["query_pos"], head["key_pos"]] = head["value"]
    assert np.abs(w - view.weights[best]).max() < 1e-6


def test_the_streaming_charts_show_the_recorded_losses(loaded):
    at = open_page(NS, "en")
    s = loaded.meta["eval"]["stream"]
    bars = data(chart_titled(at, title("en", "recorded_title", T=s["long_len"])))
    assert bars["loss"].tolist() == pytest.approx([s["loss"][m] for m in sinks_lm.STREAM_METHODS])
    lines = data(chart_titled(at, title("en", "lines_title")))
    label = catalog("en")[f"{NS}.method_window"]
    assert lines[lines["method"] == label]["loss"].tolist() == pytest.approx(s["loss_by_bin"]["window"])
    text = all_text(at)
    assert shows_label(text, f"{NS}.notice_eviction", cache=s["cache"], window=fixed(s["loss"]["window"], 3),
                       sinks=fixed(s["loss"]["sinks"], 3), diff=fixed(s["loss"]["window"] - s["loss"]["sinks"], 3))
    assert "python -m attention_core.models sinks_lm" in text


def test_the_streams_for_the_url_values(loaded):
    """The bars are the recorded grid's cell for the URL's cache and length; the check under them is the lab's
    for that cache; the head heatmap is the lab's weights for the URL's seed."""
    at = open_page(NS, "zh", {"cache": "8", "length": "128", "seed": "2", "layer": "2", "head": "3"})
    assert exceptions(at) == []
    grid = lab.read_grid(lab.GRID_FILE, loaded.meta)
    bars = data(chart_titled(at, title("zh", "live_title", T=128, cache=8, crops=lab.GRID_CROPS)))
    cell = grid["loss"][lab.cell(128, 8)]
    assert bars["loss"].tolist() == pytest.approx([cell[m] for m in sinks_lm.STREAM_METHODS], abs=1e-6)
    text = all_text(at)
    assert shows_label(text, f"{NS}.notice_live", lang="zh", window=fixed(cell["window"], 3),
                       sinks=fixed(cell["sinks"], 3), diff=fixed(cell["window"] - cell["sinks"], 3),
                       dense=fixed(cell["dense"], 3), recompute=fixed(cell["recompute"], 3))
    assert lab.GRID_COMMAND in text
    check = lab.token_by_token_check(loaded.model, lab.CHECK_SEED, 8)
    assert shows_label(text, f"{NS}.live_check", lang="zh", seed=lab.CHECK_SEED, cache=8, k=2,
                       diff=sig(check.max_diff))
    view = lab.head_view(loaded.model, 2)
    head = data(chart_titled(at, title("zh", "head_title", l=2, h=3, n=len(view.tokens))))
    assert head["value"].max() == pytest.approx(float(view.weights[1, 2].max()), abs=1e-6)


@pytest.mark.parametrize("damage", ["missing", "other_checkpoint", "not_json"])
def test_a_missing_or_stale_grid_gets_the_one_message(tmp_path, monkeypatch, damage):
    path = tmp_path / "sinks_lm_streams.json"
    record = json.loads(lab.GRID_FILE.read_text(encoding="utf-8"))
    if damage == "other_checkpoint":
        path.write_text(json.dumps(dict(record, checkpoint={"train_seconds": 1.0, "loss": 3.0})), encoding="utf-8")
    elif damage == "not_json":
        path.write_text("{ no", encoding="utf-8")
    monkeypatch.setattr(lab, "GRID_FILE", path)
    at = open_page(NS, "en")
    assert exceptions(at) == []
    key = "common.file_missing" if damage == "missing" else "common.file_damaged"
    first = catalog("en")[key].split("{")[0]
    msgs = [w.value for w in at.warning if "sinks_lm_streams.json" in w.value]
    assert len(msgs) == 1 and msgs[0].startswith(first) and lab.GRID_COMMAND in msgs[0]
    if damage == "other_checkpoint":
        assert "another checkpoint" in msgs[0]
    titles = [title_text(json.loads(c.proto.spec)) for c in charts(at)]
    assert title("en", "recorded_title", T=512) in titles               # the recorded case still shows ...
    assert title("en", "live_title", T=96, cache=16, crops=lab.GRID_CROPS) not in titles   # ... no bars of a grid
    assert shows_label(all_text(at), f"{NS}.live_check", seed=0, cache=16, k=2,   # ... the live check still runs
                       diff=sig(lab.token_by_token_check(train.load_model(lab.RECIPE).model, 0, 16).max_diff))


def test_the_questions_come_before_their_evidence():
    at = open_page(NS, "en")
    order = []

    def walk(node):
        kind = getattr(node, "type", None)
        if kind == "radio":
            order.append(node.key)
        elif kind == "vega_lite_chart" and '"picture": true' not in node.proto.spec:   # not the intuition's
            order.append(chart_title_of(node))
        for child in getattr(node, "children", {}).values():
            walk(child)

    def chart_title_of(node):
        import json
        t = json.loads(node.proto.spec).get("title")
        return t.get("text") if isinstance(t, dict) else t

    walk(at.main)
    s = train.load_model(lab.RECIPE).meta["eval"]["stream"]
    first_chart = next(i for i, x in enumerate(order) if x and not str(x).endswith("_guess"))
    assert order.index(f"{NS}_ex_guess") < first_chart
    recorded = title("en", "recorded_title", T=s["long_len"])
    assert order.index(f"{NS}_ex2_guess") < order.index(recorded)


def test_bad_url_values_get_a_message_not_a_traceback():
    at = open_page(NS, "zh", {"n": "1e400", "window": "-3", "layers": "abc", "cache": "<b>x</b>", "length": "7",
                              "layer": "99", "head": "inf"})
    assert exceptions(at) == []
    assert at.warning and any("\u4e00" <= ch <= "\u9fff" for ch in at.warning[0].value)
    assert all("<b>" not in m.value for m in at.markdown)
    assert len(charts(at)) >= 6


def test_a_missing_checkpoint_gets_a_message_and_the_windows_still_work(tmp_path, monkeypatch):
    shutil.copytree(ROOT / "assets" / "models", tmp_path / "models")
    (tmp_path / "models" / f"{lab.RECIPE}.pt").unlink()
    monkeypatch.setattr(train, "MODELS_DIR", tmp_path / "models")
    at = open_page(NS, "en")
    assert exceptions(at) == []
    assert any("sinks_lm.pt" in w.value and "python -m attention_core.models sinks_lm" in w.value for w in at.warning)
    assert len(charts(at)) == 2                # the mask and the receptive field


def test_presenter_mode_steps_through_the_lesson():
    at = open_page(NS, "en", {"present": "1", "step": "3"})
    assert exceptions(at) == []
    steps = at.session_state[f"_present_steps_{NS}"]
    assert steps == 7 and any(m.value == f"Step 3 of {steps}" for m in at.markdown)   # streaming: question, then evidence

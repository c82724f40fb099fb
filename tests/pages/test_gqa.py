"""The GQA page shows what its lab computes, checked against independent oracles: the sharing picture's lines
join query head i to K/V head i // (h / h_kv) (torch's enable_gqa grouping), the cache metric is the formula, a
h_kv that does not divide h gets a message; the quality table and charts are the checkpoints' recorded
evaluation (meta["eval"]), and a missing checkpoint, or one without its evaluation, gets the one rebuild message
while the rest still works; the MLA absorption metric is the lab's measured difference for the latent size in the
URL (absorbed equals explicit to float precision), the latent cache's bytes per token are the formula written out,
and the page says its MLA layer has random weights; the question comes before the evidence. Runtime: about 15 s
on the shared machine."""
from __future__ import annotations

import shutil

import pytest
import torch

import attention_core.models.recipes as train
from attention_core.labs import gqa as lab
from tests.apptest_util import (
    ROOT,
    all_text,
    chart_data,
    chart_spec,
    charts,
    exceptions,
    kinds_in_order,
    open_page,
    shows_label,
)
from ui.anatomy import md_escape
from ui.format import count, fixed, pct, sig
from ui.i18n import catalog


def charts_of(at, kind: str) -> list:
    return [c for c in charts(at) if chart_spec(c).get("usermeta", {}).get("chart_kind", "")
            .endswith(kind)]


def frame_of(chart):
    return next(iter(chart_data(chart).values()))




@pytest.mark.parametrize("lang, h, h_kv", [("en", 8, 2), ("zh", 32, 8), ("en", 4, 1)])
def test_the_picture_joins_each_query_head_to_its_kv_head_and_the_metric_is_the_formula(lang, h, h_kv):
    at = open_page("gqa", lang, {"heads": str(h), "kv_heads": str(h_kv)})
    assert exceptions(at) == []
    cat = catalog(lang)
    assert at.title[0].value == cat["gqa.title"]
    (chart,) = charts_of(at, "sharing_picture")
    frame = frame_of(chart)
    group = h // h_kv
    assert len(frame) == h
    assert frame["kv"].tolist() == [cat["gqa.kv_head"].format(i=i // group + 1) for i in range(h)]   # oracle
    assert frame["kvx"].tolist() == [(i // group) * group + (group - 1) / 2 for i in range(h)]
    per = 2 * 32 * h_kv * 128 * 2
    metrics = {m.label: m.value for m in at.metric}
    assert metrics[cat["gqa.metric_bytes"]] == cat["gqa.kib"].format(v=fixed(per / 1024, 0))
    assert metrics[cat["gqa.metric_ratio"]] == cat["gqa.times"].format(v=fixed(h / h_kv, 0))
    assert shows_label(all_text(at), "gqa.notice_bytes", lang, per=count(per), mha=count(per * group),
                       ratio=fixed(h / h_kv, 0))


def test_too_many_kv_heads_get_a_message_and_the_largest_divisor():
    at = open_page("gqa", "zh", {"heads": "4", "kv_heads": "16"})
    assert exceptions(at) == []
    assert at.warning[0].value == catalog("zh")["gqa.kv_too_many"].format(h_kv=16, h=4, used=4)
    frame = frame_of(charts_of(at, "sharing_picture")[0])
    assert frame["kv"].nunique() == 4


def test_bad_url_values_get_a_message_not_a_traceback():
    at = open_page("gqa", "zh", {"heads": "<b>x</b>", "kv_heads": "1e400", "d_latent": "-3"})
    assert exceptions(at) == []
    assert at.warning and any("\u4e00" <= ch <= "\u9fff" for ch in at.warning[0].value)
    assert charts_of(at, "sharing_picture") and all("<b>" not in m.value for m in at.markdown)


def test_the_quality_table_and_charts_are_the_recorded_evaluation():
    rows = [lab.quality_row(r, train.load_model(r).meta) for r in lab.RECIPES]
    at = open_page("gqa", "en")
    assert exceptions(at) == []
    table = at.dataframe[0].value
    cat = catalog("en")
    assert table[cat["gqa.col_model"]].tolist() == ["MHA (4)", "GQA (2)", "MQA (1)"]
    assert table[cat["gqa.col_bytes"]].tolist() == [r.kv_bytes_per_token for r in rows] == [2 * 1 * k * 8 * 4 for k in (4, 2, 1)]
    assert table[cat["gqa.col_acc"]].tolist() == [f"{pct(r.accuracy, 1)} ± {pct(r.accuracy_ci95, 1)}" for r in rows]
    acc, loss = (frame_of(c) for c in charts_of(at, "quality_points"))
    assert acc["value"].tolist() == pytest.approx([r.accuracy for r in rows])
    assert (acc["hi"] - acc["lo"]).tolist() == pytest.approx([2 * r.accuracy_ci95 for r in rows])
    assert loss["value"].tolist() == pytest.approx([r.loss for r in rows])
    d = lab.difference(rows[0].accuracy, rows[0].accuracy_ci95, rows[2].accuracy, rows[2].accuracy_ci95)
    verdict = cat["gqa.beyond_noise"] if d.beyond_noise else cat["gqa.within_noise"]
    assert shows_label(all_text(at), "gqa.notice_quality", "en", diff=fixed(100 * d.value, 1),
                       hw=fixed(100 * d.half_width, 1), verdict=verdict, ratio="4")


def test_a_missing_checkpoint_gets_the_rebuild_message_and_the_rest_still_works(tmp_path, monkeypatch):
    models_dir = tmp_path / "models"
    models_dir.mkdir()
    for recipe in ("gqa_kv4", "gqa_kv2"):
        shutil.copy(ROOT / "assets" / "models" / f"{recipe}.pt", models_dir)
    monkeypatch.setattr(train, "MODELS_DIR", models_dir)
    at = open_page("gqa", "en")
    assert exceptions(at) == []
    expected = catalog("en")["common.file_missing"].format(file="assets/models/gqa_kv1.pt",
                                                           command="python -m attention_core.models gqa_kv1")
    assert [w.value for w in at.warning] == [expected]
    assert not at.dataframe and not charts_of(at, "quality_points")
    assert charts_of(at, "sharing_picture") and charts_of(at, "cache_bars")


def test_a_checkpoint_without_its_evaluation_gets_the_one_damaged_file_message(tmp_path, monkeypatch):
    models_dir = tmp_path / "models"
    models_dir.mkdir()
    for recipe in lab.RECIPES:
        shutil.copy(ROOT / "assets" / "models" / f"{recipe}.pt", models_dir)
    ckpt = torch.load(models_dir / "gqa_kv2.pt", weights_only=True)
    del ckpt["meta"]["eval"]["accuracy_ci95"]
    torch.save(ckpt, models_dir / "gqa_kv2.pt")
    monkeypatch.setattr(train, "MODELS_DIR", models_dir)
    at = open_page("gqa", "zh")
    assert exceptions(at) == []
    cat = catalog("zh")
    expected = cat["common.file_damaged"].format(file="assets/models/gqa_kv2.pt", detail=md_escape(cat["gqa.no_eval"]),
                                                 command="python -m attention_core.models gqa_kv2")
    assert [w.value for w in at.warning] == [expected]
    assert not at.dataframe and not charts_of(at, "quality_points")
    assert charts_of(at, "sharing_picture") and charts_of(at, "cache_bars")


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_mla_numbers_are_the_absorbed_run_and_the_formula_and_say_the_weights_are_random(lang):
    """The page's MLA numbers: absorbed decoding equals the explicit forward to float precision (the metric and the
    notice quote the lab's run), the latent cache holds (d_c + d_R) x 4 bytes per token (float32), written out
    here, and the page says in the learner's language that this layer's weights are random, not trained."""
    c = 32
    at = open_page("gqa", lang, {"d_latent": str(c)})
    assert exceptions(at) == []
    demo = lab.absorption(c)
    assert demo.max_diff < 1e-5 and demo.max_weight_diff < 1e-6              # the same computation, rounded
    r, n, h, d = lab.DEMO["d_rope"], lab.DEMO["tokens"], lab.DEMO["num_heads"], lab.DEMO["d_head"]
    cat = catalog(lang)
    metrics = {m.label: m.value for m in at.metric}
    assert metrics[cat["gqa.metric_diff"]] == sig(demo.max_diff)
    text = all_text(at)
    assert shows_label(text, "gqa.notice_absorb", lang, n=n, diff=sig(demo.max_diff),
                       wdiff=sig(demo.max_weight_diff))
    assert shows_label(text, "gqa.notice_absorb_cache", lang, bytes=count(n * (c + r) * 4), c=c, r=r, per=c + r,
                       mha=2 * h * d, h=h, d=d)
    assert cat["gqa.mla_not_trained"] in text
    assert ("random weights" if lang == "en" else "随机权重") in cat["gqa.absorb_intro"] + cat["gqa.mla_not_trained"]


def test_the_absorption_metric_is_the_measured_difference_for_the_latent_in_the_url():
    at = open_page("gqa", "en", {"d_latent": "64"})
    demo = lab.absorption(64)
    cat = catalog("en")
    metrics = {m.label: m.value for m in at.metric}
    assert metrics[cat["gqa.metric_diff"]] == sig(demo.max_diff) and demo.max_diff < 1e-5
    assert metrics[cat["gqa.metric_latent"]] == cat["gqa.numbers"].format(v=64 + lab.DEMO["d_rope"])
    bars = frame_of(charts_of(at, "cache_bars")[0])
    assert dict(zip(bars["variant"], bars["numbers"])) == {"MHA": 32768, "GQA": 2048, "MQA": 256, "MLA": 576}


def test_the_question_comes_before_the_evidence_and_presenter_mode_steps():
    at = open_page("gqa", "en")
    kinds = kinds_in_order(at)
    assert kinds.index("radio") < next(i for i, k in enumerate(kinds) if "vega_lite_chart" in k)
    at = open_page("gqa", "en", {"present": "1", "step": "4"})
    assert exceptions(at) == []
    steps = at.session_state["_present_steps_gqa"]
    assert steps == 7 and any(m.value == f"Step 4 of {steps}" for m in at.markdown)

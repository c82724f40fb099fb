"""The KV-cache page shows what its lab computes, checked against closed forms: which K/V rows each pass reads
from the cache or computes (the chart's data), the rows saved and the identical output (the notice), the cache size
for the sliders in the URL, the recorded curve (or a message when its file is missing or damaged); the question
comes before the evidence; bad URL values get a message. Runtime: about 20-30 s on the shared machine."""
from __future__ import annotations

import json

import pytest

from attention_core.labs import kv_cache as lab
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
from ui.format import count, fixed
from ui.i18n import catalog


def chart(at, kind: str):
    """The first chart drawn by the chart kind ``ui.kv_cache_charts.<kind>``, and its data."""
    for c in charts(at):
        if chart_spec(c).get("usermeta", {}).get("chart_kind", "").endswith(kind):
            return c, next(iter(chart_data(c).values()))
    raise AssertionError(f"no {kind} chart")




@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_grid_shows_prefill_then_one_computed_row_per_step(lang):
    prompt, new = 4, 6
    at = open_page("kv_cache", lang, {"prompt": str(prompt), "new": str(new), "seed": "2"})
    assert exceptions(at) == []
    cat = catalog(lang)
    assert at.title[0].value == cat["kv_cache.title"]
    _, frame = chart(at, "cache_grid")
    total = prompt + new - 1
    reused, computed, future = (cat[f"kv_cache.status_{s}"] for s in ("reused", "computed", "future"))
    passes = [cat["kv_cache.pass_prefill"]] + [cat["kv_cache.pass_step"].format(k=k) for k in range(1, new)]
    assert sorted(set(frame["pass"])) == sorted(passes) and len(frame) == new * total
    for k, label in enumerate(passes):           # oracle: pass k reads prompt+k-1 rows and computes 1 (prefill: prompt)
        row = frame[frame["pass"] == label].sort_values("position")["status"].tolist()
        cached, made = (0, prompt) if k == 0 else (prompt + k - 1, 1)
        assert row == [reused] * cached + [computed] * made + [future] * (total - cached - made)
    kinds = kinds_in_order(at)
    assert kinds.index("radio") < next(i for i, k in enumerate(kinds) if "vega_lite_chart" in k)


def test_the_notice_quotes_identical_output_and_the_rows_saved():
    prompt, new = 5, 8
    at = open_page("kv_cache", "en", {"prompt": str(prompt), "new": str(new)})
    text = all_text(at)
    plain, cached = new * prompt + new * (new - 1) // 2, prompt + new - 1              # closed forms
    assert shows_label(text, "kv_cache.notice_rows", plain=count(plain), cached=count(cached),
                       ratio=fixed(plain / cached, 1))
    assert shows_label(text, "kv_cache.notice_diff", new=new, same=catalog("en")["kv_cache.same_yes"])
    d_head = lab.DEMO["d_model"] // lab.DEMO["num_heads"]
    held = 2 * lab.DEMO["layers"] * lab.DEMO["num_kv_heads"] * d_head * 4 * (prompt + new - 1)
    assert count(held) in text


def test_the_size_sliders_in_the_url_give_the_formula():
    at = open_page("kv_cache", "zh", {"layers": "80", "kv_heads": "8", "d_head": "128", "dtype": "float16",
                                      "tokens": "131072"})
    assert exceptions(at) == []
    (metric,) = at.metric
    assert metric.value == catalog("zh")["kv_cache.gib"].format(v="40.00")     # 2*80*8*128*2*128K = 40 GiB
    config, sizes = at.table[0].value, at.table[2].value             # a model a row in each
    assert "Llama-2-7B" in config.index.tolist() and len(config) == len(sizes) == len(lab.PUBLISHED)
    assert list(sizes.columns) == [catalog("zh")["kv_cache.col_at"].format(k=n // 1024) for n in lab.TABLE_TOKENS]


def test_the_recorded_curve_is_the_shipped_file():
    doc = lab.read_bench(lab.BENCH_FILE)
    at = open_page("kv_cache", "en")
    timing = [c for c in charts(at) if chart_spec(c)["usermeta"]["chart_kind"].endswith("timing_lines")]
    assert len(timing) == 2                                  # live, then recorded
    frame = next(iter(chart_data(timing[1]).values()))
    rows = sorted(doc["results"], key=lambda r: r["context"])
    assert frame["context"].tolist() == [r["context"] for r in rows] * 2
    expected = [1e3 * r["plain_s"] for r in rows] + [1e3 * r["cached_s"] for r in rows]
    assert frame["ms"].tolist() == pytest.approx(expected)


@pytest.mark.parametrize("content, key", [(None, "common.file_missing"), ("{damaged", "common.file_damaged"),
                                          (json.dumps({"machine": {}}), "common.file_damaged")])
def test_a_missing_or_damaged_recording_gets_a_message_and_the_rest_still_works(tmp_path, monkeypatch, content, key):
    path = tmp_path / "kv_cache.json"
    if content is not None:
        path.write_text(content, encoding="utf-8")
    monkeypatch.setattr(lab, "BENCH_FILE", path)
    at = open_page("kv_cache", "en")
    assert exceptions(at) == []
    head = catalog("en")[key].split("`")[0]
    assert any(w.value.startswith(head) and "bench_kv_cache.py" in w.value for w in at.warning)
    assert len(charts(at)) == 2               # the grid and the live timing are still drawn
    assert len(at.metric) == 1


def test_bad_url_values_get_a_message_not_a_traceback():
    at = open_page("kv_cache", "zh", {"prompt": "abc", "new": "1e400", "dtype": "<b>x</b>", "tokens": "7",
                                      "d_head": "-3", "layers": "inf"})
    assert exceptions(at) == []
    assert at.warning and any("\u4e00" <= ch <= "\u9fff" for ch in at.warning[0].value)
    assert len(charts(at)) >= 2
    assert all("<b>" not in m.value for m in at.markdown)


def test_presenter_mode_steps_through_the_lesson():
    at = open_page("kv_cache", "en", {"present": "1", "step": "3"})
    assert exceptions(at) == []
    steps = at.session_state["_present_steps_kv_cache"]
    assert steps == 6 and any(m.value == f"Step 3 of {steps}" for m in at.markdown)   # the kept controls are no step

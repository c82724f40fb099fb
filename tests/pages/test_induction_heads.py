"""The induction-heads page shows what its files and lab give: the recorded run's curves and the phase change read
from it (the notice quotes them), every head's pattern at the snapshot in the URL, the head removal recomputed on the
shipped model for the URL's test sequences; the question comes before the evidence; a missing or damaged recording
gets a message and the rest works; bad URL values get a message; a live run (shortened) goes through the server's
queue and is drawn. Runtime: about 40-70 s on the shared machine."""
from __future__ import annotations

import json
import random

import numpy as np
import pytest

from attention_core.labs import induction_heads as lab
from attention_core.models import induction_heads_lm as ih
from attention_core.models import recipes
from tests.apptest_util import all_text, chart_data, chart_titled, charts, exceptions, open_page, shows_label
from ui.format import fixed
from ui.i18n import catalog


def recorded():
    record = lab.read_run()
    snaps = lab.snapshots_of(record)
    return record, snaps, lab.phase_change(snaps)


def lines(chart):
    return chart_data(chart)["lines"]


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_curves_are_the_recorded_run_and_the_notice_quotes_the_phase_change(lang):
    at = open_page("induction_heads", lang)
    assert exceptions(at) == []
    cat = catalog(lang)
    assert at.title[0].value == cat["induction_heads.title"]
    record, snaps, phase = recorded()
    loss = lines(chart_titled(at, cat["induction_heads.loss_title"]))
    rep = loss[loss["series"] == cat["induction_heads.series_repeated"]].sort_values("step")
    first = loss[loss["series"] == cat["induction_heads.series_first"]].sort_values("step")
    assert rep["step"].tolist() == [s.step for s in snaps]
    assert np.allclose(rep["value"], [s.repeated_loss for s in snaps]) and np.allclose(
        first["value"], [s.first_loss for s in snaps])
    rule = chart_data(chart_titled(at, cat["induction_heads.loss_title"]))["rule"]
    assert rule["step"].tolist() == [phase.step]
    scores = lines(chart_titled(at, cat["induction_heads.score_title"]))
    ind = scores[scores["series"] == cat["induction_heads.series_induction"]].sort_values("step")
    assert np.allclose(ind["value"], [float(np.max(s.induction[1])) for s in snaps], atol=1e-6)   # oracle: max over L2
    text = all_text(at)
    assert shows_label(text, "induction_heads.notice_phase", lang, step=phase.step, before=phase.before,
                       after=phase.after, l0=fixed(phase.loss_before, 2), l1=fixed(phase.loss_after, 2),
                       i0=fixed(phase.induction_before, 2), i1=fixed(phase.induction_after, 2))
    assert "python -m attention_core.labs.induction_heads" in text           # the command in the caption


def test_the_heads_at_the_snapshot_in_the_url():
    record, snaps, _ = recorded()
    shown = [s for s in snaps if s.patterns is not None]
    pick = shown[len(shown) // 2]
    at = open_page("induction_heads", "zh", {"train_step": str(pick.step)})
    assert exceptions(at) == []
    cat = catalog("zh")
    grids = [c for c in charts(at) if "facet" in json.loads(c.proto.spec)]
    frame = next(iter(chart_data(grids[0]).values()))
    for layer in range(2):
        for head in range(4):
            title = cat["induction_heads.panel"].format(
                name=cat["induction_heads.head"].format(layer=layer + 1, head=head + 1),
                prev=fixed(pick.previous[layer, head], 2), ind=fixed(pick.induction[layer, head], 2))
            part = frame[frame["panel"] == title]
            grid = part.pivot(index="query_pos", columns="key_pos", values="value").to_numpy()
            assert np.allclose(grid, pick.patterns[layer, head], atol=1e-6)
            assert np.allclose(grid.sum(1), 1.0, atol=0.05)                   # rows of attention (rounded to 0.01)
    assert at.select_slider(key="train_step").value == pick.step
    # the two heads over training: the last row is the end of the run, the best heads of the end
    end = snaps[-1]
    over = next(iter(chart_data(grids[1]).values()))
    prev_head, ind_head = int(np.argmax(end.previous[0])), int(np.argmax(end.induction[1]))
    last = over[over["panel"] == cat["induction_heads.panel_step"].format(
        step=end.step, name=cat["induction_heads.head"].format(layer=2, head=ind_head + 1))]
    assert np.allclose(last.pivot(index="query_pos", columns="key_pos", values="value").to_numpy(),
                       end.patterns[1, ind_head], atol=1e-6)
    first = over[over["panel"] == cat["induction_heads.panel_step"].format(
        step=end.step, name=cat["induction_heads.head"].format(layer=1, head=prev_head + 1))]
    assert np.allclose(first.pivot(index="query_pos", columns="key_pos", values="value").to_numpy(),
                       end.patterns[0, prev_head], atol=1e-6)


def test_the_removal_table_is_the_shipped_model_on_the_urls_sequences():
    at = open_page("induction_heads", "en", {"half": "9", "data_seed": "3"})
    assert exceptions(at) == []
    model = recipes.load_model(ih.RECIPE_NAME).model
    oracle = ih.ablation(model, ih.repeated_tokens(random.Random(3), 64, 9))
    table = at.table[0].value
    cat = catalog("en")
    assert table[cat["induction_heads.col_repeated"]].tolist() == [
        fixed(oracle[k]["repeated_loss"], 2) for k in ("none", "previous", "all_previous", "control", "induction",
                                                       "all_induction")]
    assert shows_label(all_text(at), "induction_heads.notice_ablation", half=9,
                       base=fixed(oracle["none"]["repeated_loss"], 2),
                       all_prev=fixed(oracle["all_previous"]["repeated_loss"], 2))


@pytest.mark.parametrize("content, key", [(None, "common.file_missing"), ("{damaged", "common.file_damaged"),
                                          (json.dumps({"format": 1}), "common.file_damaged")])
def test_a_missing_or_damaged_recording_gets_a_message_and_the_rest_still_works(tmp_path, monkeypatch, content, key):
    path = tmp_path / "induction_heads_run.json"
    if content is not None:
        path.write_text(content, encoding="utf-8")
    monkeypatch.setattr(lab, "RUN_FILE", path)
    at = open_page("induction_heads", "en")
    assert exceptions(at) == []
    head = catalog("en")[key].split("`")[0]
    assert any(w.value.startswith(head) and lab.RUN_COMMAND in w.value for w in at.warning)
    assert len(at.table) == 1                                             # the removal table is still there


def test_bad_url_values_get_a_message_not_a_traceback():
    at = open_page("induction_heads", "zh", {"train_step": "abc", "half": "1e400", "data_seed": "-5",
                                             "train_seed": "<b>x</b>"})
    assert exceptions(at) == []
    assert at.warning and any("\u4e00" <= ch <= "\u9fff" for ch in at.warning[0].value)
    assert len(charts(at)) >= 4
    assert all("<b>" not in m.value for m in at.markdown)


def test_a_live_run_goes_through_the_queue_and_is_drawn(monkeypatch):
    """A shortened live run (30 steps) of seed 2: the queue runs it, the page keeps it and draws its curves, equal
    to the same run of the lab; the trainer's code is then listed as code that ran."""
    import time

    import ui.code_view
    monkeypatch.setattr(lab, "LIVE_STEPS", 30)
    shown_objects, original = [], ui.code_view.show_code        # "Show the code" is lazy: record what it lists
    monkeypatch.setattr(ui.code_view, "show_code",
                        lambda *objs, **kw: (shown_objects.append(objs), original(*objs, **kw))[1])
    at = open_page("induction_heads", "en", {"train_seed": "2"})
    cat = catalog("en")
    assert cat["induction_heads.press"] in [i.value for i in at.info]
    at.button(key="train").click().run()
    deadline = time.monotonic() + 180
    while "_ih_ticket" in at.session_state:
        assert time.monotonic() < deadline, "the run did not finish"
        time.sleep(0.3)
        at.run()
        assert exceptions(at) == []
    oracle = lab.train_run(seed=2, steps=30, every=lab.EVERY)
    loss = lines(chart_titled(at, cat["induction_heads.live_loss_title"].format(seed=2)))
    rep = loss[loss["series"] == cat["induction_heads.series_repeated"]].sort_values("step")
    assert rep["step"].tolist() == [s.step for s in oracle.snaps]
    assert np.allclose(rep["value"], [s.repeated_loss for s in oracle.snaps], atol=1e-4)
    shown = {f"{o.__module__}.{o.__qualname__}" for o in shown_objects[-1]}
    assert "attention_core.labs.induction_heads.train_run" in shown

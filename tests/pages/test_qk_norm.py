"""The QK-norm page shows the recorded runs as recorded (the curves' data equal to the JSON, the notices' numbers
recomputed here from it), the learning-rate sweep with Wortsman et al.'s sensitivity recomputed independently,
the weight-growth demo (logits x factor^2 without QK-norm), the exercise's answer from the recording, a live run
through the server's queue (its curves and the code that ran), a message when the recording is missing or
damaged, and bad URL values answered with a message. Runtime: about 60-90 s on the shared 2-core machine
(one live run of 30 steps)."""
from __future__ import annotations

import json
import math
import time

import pytest

from attention_core.labs import qk_norm as lab
from tests.apptest_util import all_text, chart_data, chart_spec, charts, exceptions, open_page, shows_label
from ui import charts as ui_charts
from ui.format import fixed, sig
from ui.i18n import catalog


def drawn(at, kind: str) -> list:
    """(title, data) of every chart drawn by the chart kind ``ui.qk_norm_charts.<kind>``, in order."""
    out = []
    for c in charts(at):
        spec = chart_spec(c)
        if spec.get("usermeta", {}).get("chart_kind", "").endswith(kind):
            title = spec.get("title")
            out.append((title.get("text") if isinstance(title, dict) else title, next(iter(chart_data(c).values()))))
    return out


def runs_by_key() -> dict:
    return {(r["lr"], r["seed"], r["qk_norm"]): r for r in lab.read_record()["runs"]}


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_recorded_curves_are_the_shipped_runs_and_the_notices_quote_them(lang):
    at = open_page("qk_norm", lang)
    assert exceptions(at) == []
    cat = catalog(lang)
    assert at.title[0].value == cat["qk_norm.title"]
    runs = runs_by_key()
    off, on = runs[(0.3, 0, False)], runs[(0.3, 0, True)]
    lines = dict(drawn(at, "step_lines"))
    logit = lines[cat["qk_norm.chart_max_logit"]]
    for run, label in ((off, cat["qk_norm.run_off"]), (on, cat["qk_norm.run_on"])):
        for i in range(2):
            rows = logit[(logit["run"] == label) & (logit["layer"] == cat["qk_norm.layer"].format(i=i + 1))]
            assert rows["step"].tolist() == [p[0] for p in run["probes"]]
            assert rows["value"].tolist() == pytest.approx([p[1][i] for p in run["probes"]])
        loss = lines[cat["qk_norm.chart_loss"]]
        assert loss[loss["run"] == label]["value"].tolist() == pytest.approx(run["losses"])
    ent = lines[cat["qk_norm.chart_entropy"]]
    assert ent[ent["run"] == cat["qk_norm.run_off"]]["value"].min() < 0.05       # the collapse is in the data
    text = all_text(at)
    assert shows_label(text, "qk_norm.notice_logit", lang, start=sig(max(off["probes"][0][1])),
                       off=sig(max(off["probes"][-1][1])), on=sig(max(on["probes"][-1][1])))
    assert shows_label(text, "qk_norm.notice_loss", lang, off=fixed(sum(off["losses"][-10:]) / 10, 3),
                       on=fixed(sum(on["losses"][-10:]) / 10, 3), chance=fixed(math.log(30), 2))
    assert lab.RECORD_COMMAND in text


def test_the_url_picks_another_recorded_run():
    at = open_page("qk_norm", "en", {"lr": "0.01", "run_seed": "2"})
    assert exceptions(at) == []
    run = runs_by_key()[(0.01, 2, True)]
    loss = dict(drawn(at, "step_lines"))["Loss"]
    assert loss[loss["run"] == "with QK-norm"]["value"].tolist() == pytest.approx(run["losses"])


def test_the_sweep_shows_every_final_loss_and_the_sensitivity_recomputed():
    at = open_page("qk_norm", "en")
    ((_, frame),) = drawn(at, "lr_sweep")
    runs = lab.read_record()["runs"]
    assert len(frame) == len(runs)
    chance = math.log(30)
    means = {}
    for r in runs:
        label = "with QK-norm" if r["qk_norm"] else "without QK-norm"
        row = frame[(frame["run"] == label) & (frame["lr"] == r["lr"]) & (frame["seed"] == r["seed"])]
        assert row["loss"].tolist() == pytest.approx([sum(r["losses"][-10:]) / 10])
        means.setdefault(label, {}).setdefault(r["lr"], []).append(sum(r["losses"][-10:]) / 10)
    mean = {lb: {lr: sum(v) / len(v) for lr, v in d.items()} for lb, d in means.items()}
    best = min(min(d.values()) for d in mean.values())
    sens = {lb: sum(min(v, chance) for v in d.values()) / len(d) - best for lb, d in mean.items()}
    assert shows_label(all_text(at), "qk_norm.notice_sensitivity", off=fixed(sens["without QK-norm"], 3),
                       on=fixed(sens["with QK-norm"], 3), chance=fixed(chance, 2))


def test_the_exercise_answer_and_explanation_come_from_the_recording():
    at = open_page("qk_norm", "en")
    off = runs_by_key()[(0.3, 0, False)]
    start, end = max(off["probes"][0][1]), max(off["probes"][-1][1])
    at.radio(key="qk_norm_ex_guess").set_value(2).run()
    at.button(key="qk_norm_ex_reveal").click().run()
    assert exceptions(at) == [] and at.success                      # > 1000 times: the recorded answer
    assert shows_label(all_text(at), "qk_norm.ex_explain", end=sig(end), ratio=sig(end / start))


def test_the_weight_growth_demo_squares_the_logits_without_qk_norm():
    at = open_page("qk_norm", "zh", {"factor": "10"})
    assert exceptions(at) == []
    base, grown = lab.grown_weights(False, 1.0), lab.grown_weights(False, 10.0)
    ratio = max(s.max_logit for s in grown.stats) / max(s.max_logit for s in base.stats)
    assert 80 < ratio < 120                                          # about 10^2 (layer 2 sees a changed input)
    assert shows_label(all_text(at), "qk_norm.why_growth", "zh", f=10, f2=100, ratio=sig(ratio))
    on = lab.grown_weights(True, 10.0)
    assert shows_label(all_text(at), "qk_norm.why_row_on", "zh", f=10, bound=sig(max(on.bounds)),
                       after=sig(max(s.max_logit for s in on.stats)))
    ((_, sat),) = drawn(at, "saturation_lines")
    assert sat["scale"].nunique() == len(lab.SAT_SCALES)


def test_a_live_run_trains_through_the_queue_and_draws_its_curves(monkeypatch):
    monkeypatch.setattr(lab, "STEPS", 30)
    monkeypatch.setattr(ui_charts, "VERIFY", True)      # every chart also built directly by Altair
    from ui import presenter
    # "Show the code" draws its source only while open: ?code_qk_norm=true opens it, before and after the training
    opened = {presenter.code_key("qk_norm"): "true"}
    at = open_page("qk_norm", "en", {"live_lr": "0.3", "live_qk": "false", **opened})
    assert exceptions(at) == []
    assert any(c.value == "`attention_core.labs.qk_norm.grown_weights`" for c in at.caption)      # open
    assert not any(c.value.endswith("qk_norm.train_run`") for c in at.caption)   # nothing trained yet
    at.button(key="qk_train").click().run()
    assert exceptions(at) == []
    deadline = time.monotonic() + 150
    while "_qk_ticket" in at.session_state:
        assert time.monotonic() < deadline, "the live run did not finish"
        time.sleep(0.3)
        at.run()
        assert exceptions(at) == []
    (kept,) = at.session_state["_qk_runs"]
    assert len(kept["losses"]) == 30 and kept["spec"] == lab.RunSpec(0.3, False, 0, 30)
    assert [p[0] for p in kept["probes"]] == list(range(0, 31, lab.EVERY))
    assert max(kept["probes"][-1][1]) > 30 * max(kept["probes"][0][1])        # the runaway, live
    name = kept["name"]
    lines = [(title, data) for title, data in drawn(at, "step_lines") if name in set(data["run"])]
    assert len(lines) == 3
    assert shows_label(all_text(at), "qk_norm.notice_live", name=name, steps=30,
                       logit=sig(max(kept["probes"][-1][1])))
    assert any(c.value == "`attention_core.labs.qk_norm.train_run`" for c in at.caption)


@pytest.mark.parametrize("content, key", [(None, "common.file_missing"), ("{damaged", "common.file_damaged"),
                                          (json.dumps({"runs": []}), "common.file_damaged")])
def test_a_missing_or_damaged_recording_gets_a_message_and_the_rest_still_works(tmp_path, monkeypatch, content, key):
    path = tmp_path / "qk_norm_runs.json"
    if content is not None:
        path.write_text(content, encoding="utf-8")
    monkeypatch.setattr(lab, "RECORD_FILE", path)
    at = open_page("qk_norm", "en")
    assert exceptions(at) == []
    head = catalog("en")[key].split("`")[0]
    assert any(w.value.startswith(head) and lab.RECORD_COMMAND in w.value for w in at.warning)
    assert drawn(at, "saturation_lines") and not drawn(at, "lr_sweep")


def test_bad_url_values_get_a_message_not_a_traceback():
    at = open_page("qk_norm", "zh", {"lr": "abc", "run_seed": "<b>9</b>", "factor": "1e400", "live_lr": "-1",
                                     "live_qk": "maybe"})
    assert exceptions(at) == []
    assert len(drawn(at, "step_lines")) == 3                           # the defaults are shown instead
    assert all("<b>" not in m.value for m in at.markdown)


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_a_queued_live_run_shows_its_place_and_the_wait_bound(lang, monkeypatch):
    """Another job holds the server's worker: the press shows the place in the queue and the bound of the wait,
    the button stays disabled; once the worker is free the run trains and is kept."""
    import threading

    from serving import training_queue as tq

    monkeypatch.setattr(lab, "STEPS", 10)
    gate = threading.Event()

    def hold(ctx):
        while not gate.is_set() and not ctx.stopped():
            time.sleep(0.005)

    blocker = tq.QUEUE.submit(("qk_blocker", lang), "v", hold)
    try:
        deadline = time.monotonic() + 30
        while tq.QUEUE.status(blocker).state != "running":
            assert time.monotonic() < deadline
            time.sleep(0.01)
        lr = "0.1" if lang == "en" else "0.03"          # another training each: a finished one would be shared
        at = open_page("qk_norm", lang, {"live_qk": "true", "live_lr": lr})
        at.button(key="qk_train").click().run()
        assert exceptions(at) == []
        head = catalog(lang)["common.queue_position"].split("{pos}")[0]
        shown = "\n".join(i.value for i in at.info)
        assert head + "1" in shown and f"{tq.WALL_CAP:.0f}" in shown
        assert at.button(key="qk_train").disabled
    finally:
        gate.set()
        tq.QUEUE.release(blocker)
    deadline = time.monotonic() + 120
    while "_qk_ticket" in at.session_state:
        assert time.monotonic() < deadline
        time.sleep(0.2)
        at.run()
    assert exceptions(at) == [] and len(at.session_state["_qk_runs"]) == 1
    assert at.session_state["_qk_runs"][0]["spec"] == lab.RunSpec(float(lr), True, 0, 10)
    assert not at.button(key="qk_train").disabled


def test_presenter_mode_steps_through_the_lesson():
    at = open_page("qk_norm", "en", {"present": "1", "step": "3"})
    assert exceptions(at) == []
    steps = at.session_state["_present_steps_qk_norm"]
    assert steps == 8 and any(m.value == f"Step 3 of {steps}" for m in at.markdown)   # the kept controls are no step; saturation is its own


def test_the_pitfall_demo_runs_only_when_opened_and_lists_the_recorded_gains():
    """Closed (the default) the demo draws nothing (a rerun of the page does not redraw it: redraw budget); opened
    (?pit_run=true) it lists, per learning rate, the recorded QK-norm run's bound, largest logit and final loss."""
    closed = open_page("qk_norm", "en")
    assert exceptions(closed) == []
    assert "At initialisation the bound is" not in all_text(closed)
    at = open_page("qk_norm", "en", {"pit_run": "true"})
    assert exceptions(at) == []
    text = all_text(at)
    rows = sorted((r for r in lab.read_record()["runs"] if r["qk_norm"] and r["seed"] == 0), key=lambda r: r["lr"])
    assert len(rows) > 3
    for r in rows:
        assert shows_label(text, "qk_norm.pit_row", lr=f"{r['lr']:g}",
                           bound=sig(max(b for b in r["bounds"] if b is not None)),
                           logit=sig(max(r["probes"][-1][1])), loss=fixed(sum(r["losses"][-10:]) / 10, 3))
    assert shows_label(text, "qk_norm.pit_demo", start=fixed(math.sqrt(8), 2), d_head=8)


def test_another_rate_or_seed_sends_new_data_to_the_same_charts():
    """The browser re-embeds a chart whose spec changed and only swaps the data of one whose spec stayed the same
    (the redraw budget): the recorded curves keep their spec, titles included, when the rate and the seed change."""
    specs, values = [], []
    for params in ({"lr": "0.01", "run_seed": "0"}, {"lr": "1", "run_seed": "2"}):
        at = open_page("qk_norm", "en", params)
        assert exceptions(at) == []
        lines = [c for c in charts(at) if chart_spec(c)["usermeta"]["chart_kind"].endswith("step_lines")]
        specs.append([chart_spec(c) for c in lines])
        values.append([next(iter(chart_data(c).values()))["value"].tolist() for c in lines])
    assert len(specs[0]) == 3 and specs[0] == specs[1]
    assert all(a != b for a, b in zip(*values))                         # other runs: other curves

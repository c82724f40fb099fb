"""Missing or damaged shipped files: the page that needs the file says which file, that it
is missing or damaged, and the command that rebuilds it, in the learner's language, with no traceback; the
other pages are unaffected. Every case works on a copy of assets/models and assets/bench in a temporary
folder (attention_core.models.recipes.MODELS_DIR and ui.models.BENCH_DIR point there), never on the real files."""
import os
import shutil
from types import SimpleNamespace

import pytest

import attention_core.models.recipes as train
import ui.models
from tests.apptest_util import ROOT, all_text, charts, exceptions, open_page, shows_label
from ui.i18n import catalog

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


@pytest.fixture
def assets(tmp_path, monkeypatch):
    return copy_assets(tmp_path, monkeypatch)


def copy_assets(tmp_path, monkeypatch) -> SimpleNamespace:
    """Copies of assets/models and assets/bench that the loaders read instead of the real ones."""
    models_dir, bench_dir = tmp_path / "models", tmp_path / "bench"
    shutil.copytree(ROOT / "assets" / "models", models_dir)
    shutil.copytree(ROOT / "assets" / "bench", bench_dir)
    monkeypatch.setattr(train, "MODELS_DIR", models_dir)
    monkeypatch.setattr(ui.models, "BENCH_DIR", bench_dir)
    return SimpleNamespace(models=models_dir, bench=bench_dir)


def truncate(path, keep=0.5):
    data = path.read_bytes()
    path.write_bytes(data[: int(len(data) * keep)])


def garbage(path):
    path.write_bytes(os.urandom(4096))


def file_messages(at) -> list[str]:
    """The warnings that are a missing/damaged-file message in some language."""
    heads = [catalog(lang)[f"common.file_{k}"].split("`")[0] for lang in ("en", "zh") for k in ("missing", "damaged")]
    return [w.value for w in at.warning if any(w.value.startswith(h) for h in heads)]


def assert_says(at, lang: str, state: str, file: str, command: str) -> str:
    """The page ran without an exception and shows the ``common.file_<state>`` message for ``file``;
    returns the detail (the reader's complaint) of a damaged-file message."""
    assert exceptions(at) == []
    template = catalog(lang)[f"common.file_{state}"].replace("{file}", file).replace("{command}", command)
    shown = file_messages(at)
    if state == "missing":
        assert template in shown, shown
        return ""
    head, _, tail = template.partition("{detail}")
    found = [w for w in shown if w.startswith(head) and w.endswith(tail)]
    assert found and len(set(found)) == 1, (template, shown)
    detail = found[0][len(head):len(found[0]) - len(tail)]
    assert detail.strip(), "the complaint must not be blank"
    return detail


def assert_fine(key: str, lang: str = "en", params=None):
    """An unaffected page: it runs, shows no file message and shows its content."""
    at = open_page(key, lang, params)
    assert exceptions(at) == [] and file_messages(at) == []
    assert catalog(lang)[f"{key}.title"] in all_text(at)
    return at


# ---------------------------------------------------------------- checkpoints

@pytest.mark.parametrize("damage", [truncate, garbage])
def test_a_damaged_date_model_is_reported_on_alignment_and_bottleneck_is_unaffected(assets, damage):
    damage(assets.models / "dates.pt")
    at = open_page("alignment", "en")
    assert_says(at, "en", "damaged", "assets/models/dates.pt", "python -m attention_core.models dates")
    assert not at.text_input and not charts(at)     # nothing of the model's is drawn
    assert_fine("bottleneck")


def test_a_truncated_reversal_model_is_reported_on_bottleneck_in_chinese_and_alignment_is_unaffected(assets):
    truncate(assets.models / "reverse_attn.pt")
    at = open_page("bottleneck", "zh")
    detail = assert_says(at, "zh", "damaged", "assets/models/reverse_attn.pt",
                         "python -m attention_core.models reverse_attn")
    assert str(assets.models) not in detail and str(ROOT) not in all_text(at)     # no server path shown
    assert len(file_messages(at)) == 1                                                 # reverse_noattn is fine
    assert_fine("alignment", "zh")


@pytest.mark.parametrize("key", ["pronoun", "analysis"])
def test_a_zero_byte_pronoun_model_is_reported_on_pronoun_and_analysis(assets, key):
    (assets.models / "pronoun.pt").write_bytes(b"")
    at = open_page(key, "en")
    detail = assert_says(at, "en", "damaged", "assets/models/pronoun.pt", "python -m attention_core.models pronoun")
    assert detail == catalog("en")["common.why_empty"]      # was a blank red EOFError box
    assert not charts(at)
    if key == "pronoun":
        assert_fine("alignment")


@pytest.mark.parametrize("content", [b"", b"[1]", b'{"runs": [{"readout": "word"}, {"readout": "two_way"}]}'])
def test_a_damaged_readout_ablation_leaves_the_pronoun_pitfall_unrecorded(assets, content):
    """assets/models/pronoun_ablation.json only feeds the readout pitfall: damaged, the pitfall says how to
    record it (pronoun.pit_body_unrecorded) and the rest of the page is there."""
    (assets.models / "pronoun_ablation.json").write_bytes(content)
    at = open_page("pronoun", "en")
    assert exceptions(at) == [] and file_messages(at) == [] and charts(at)
    assert shows_label(all_text(at), "pronoun.pit_body_unrecorded")
    assert ui.models.readout_ablation() is None and not ui.models.load("ablation").missing


def test_a_missing_model_without_attention_is_reported_and_alignment_still_reads_dates(assets):
    (assets.models / "dates_noattn.pt").unlink()
    at = open_page("alignment", "en")
    assert_says(at, "en", "missing", "assets/models/dates_noattn.pt", "python -m attention_core.models dates_noattn")
    assert charts(at)                 # the attention model's alignment is still drawn


def test_the_loader_reports_missing_and_damaged_checkpoints_with_the_command(assets):
    """attention_core.models.recipes.load_model: FileNotFoundError for a missing file, DamagedFile (a ValueError) with
    the rebuild command for every way a file can be damaged; weights_only=True stays."""
    (assets.models / "dates.pt").unlink()
    with pytest.raises(FileNotFoundError):
        train.load_model("dates")
    for name, damage in (("dates_noattn", truncate), ("reverse_attn", garbage),
                         ("pronoun", lambda p: p.write_bytes(b"")),
                         ("reverse_noattn", lambda p: p.write_bytes(b"not a checkpoint"))):
        damage(assets.models / f"{name}.pt")
        with pytest.raises(train.DamagedFile) as err:
            train.load_model(name)
        assert err.value.command == f"python -m attention_core.models {name}" and isinstance(err.value, ValueError)
    got = ui.models.load("reverse_attn")
    assert got == ui.models.load("reverse_attn") and not got.missing and got.file == "assets/models/reverse_attn.pt"
    assert ui.models.model("dates") is None and ui.models.load("dates").missing


# ---------------------------------------------------------------- recorded curves

@pytest.mark.parametrize("content", [b'{"eval_seed": 777001, "reverse": {"lengths": [5,', b"\xff\xfe garbage", b"[]"])
def test_an_invalid_curves_file_is_reported_on_bottleneck_and_alignment_still_runs(assets, content):
    (assets.models / "curves.json").write_bytes(content)
    at = open_page("bottleneck", "en")
    assert_says(at, "en", "damaged", "assets/models/curves.json", "python -m attention_core.models curves")
    assert at.slider(key="len") is not None and charts(at)   # the rest of the page runs
    at = open_page("alignment", "en")                    # its facts fall back to the checkpoint's own evaluation
    assert exceptions(at) == [] and charts(at) and file_messages(at) == []
    en = train.load_model("dates").meta["eval"]["by_lang"]["en"]
    assert f"{100 * en:.1f}%" in all_text(at)


def test_a_missing_curves_file_is_reported_on_bottleneck(assets):
    (assets.models / "curves.json").unlink()
    at = open_page("bottleneck", "en")
    assert_says(at, "en", "missing", "assets/models/curves.json", "python -m attention_core.models curves")


# ---------------------------------------------------------------- recorded benchmarks

COST_TAB = {lang: catalog(lang)["efficiency.tab_cost"] for lang in ("en", "zh")}


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_a_missing_benchmark_is_reported_on_efficiency_and_the_live_parts_still_run(assets, lang):
    (assets.bench / "efficient.json").unlink()
    at = open_page("efficiency", lang, {"tab": COST_TAB[lang]})
    assert_says(at, lang, "missing", "assets/bench/efficient.json", "python -m attention_core.labs.efficiency_bench")
    assert not at.table                                  # the recorded complexity table is not drawn
    at = open_page("efficiency", lang)                   # the first tab computes live and draws
    assert exceptions(at) == [] and charts(at)
    if lang == "en":
        assert_fine("alignment")


@pytest.mark.parametrize("content", [b'{"results": [', b'{"about": "a --quick run"}'])
def test_a_damaged_or_partial_benchmark_is_reported_on_efficiency(assets, content):
    (assets.bench / "efficient.json").write_bytes(content)
    at = open_page("efficiency", "en", {"tab": COST_TAB["en"]})
    assert_says(at, "en", "damaged", "assets/bench/efficient.json", "python -m attention_core.labs.efficiency_bench")


def test_a_benchmark_of_a_quick_run_is_read_and_one_too_small_is_reported(assets):
    """`python -m attention_core.labs.efficiency_bench --quick` stops at n = 2048: the page quotes the sizes it
    finds in the data (the speed-up at 2048, not 16384). A run of one size has no n and 2n to quote: reported."""
    import json
    path = assets.bench / "efficient.json"
    doc = json.loads(path.read_text(encoding="utf-8"))
    results = doc["results"]
    doc["results"] = [r for r in results if r["n"] <= 2048]
    path.write_text(json.dumps(doc), encoding="utf-8")
    at = open_page("efficiency", "en", {"tab": COST_TAB["en"]})
    assert exceptions(at) == [] and not at.error and at.table
    text = all_text(at)
    assert shows_label(text, "efficiency.notice_speedup", n=2048) and not shows_label(text, "efficiency.notice_speedup",
                                                                                      n=16384)
    doc["results"] = [r for r in results if r["n"] == 256]
    path.write_text(json.dumps(doc), encoding="utf-8")
    at = open_page("efficiency", "en", {"tab": COST_TAB["en"]})
    detail = assert_says(at, "en", "damaged", "assets/bench/efficient.json",
                         "python -m attention_core.labs.efficiency_bench")
    assert "n and 2n" in detail


@pytest.mark.parametrize("damage", ["missing", "garbage"])
def test_a_missing_or_damaged_lra_table_is_reported_and_the_rest_of_the_cost_tab_stays(assets, damage):
    path = assets.bench / "lra_table2.csv"
    path.unlink() if damage == "missing" else path.write_text("model,seq_len\nTransformer,oops\n", encoding="utf-8")
    at = open_page("efficiency", "en", {"tab": COST_TAB["en"]})
    assert_says(at, "en", "missing" if damage == "missing" else "damaged", "assets/bench/lra_table2.csv",
                "git checkout -- assets/bench/lra_table2.csv")
    assert at.table                                      # the complexity table (from efficient.json) is there


def test_the_training_page_needs_no_shipped_file(assets):
    """It trains from scratch: with every checkpoint and recorded file gone it still runs."""
    for path in list(assets.models.iterdir()) + list(assets.bench.iterdir()):
        path.unlink()
    assert_fine("training")

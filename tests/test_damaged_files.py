"""Damaged files that used to take pages down (tests/test_corrupt_files.py covers truncated, empty, wrong-shape and
folder cases of the recorded files):

1. a valid checkpoint of another model in a file's place: attention_core.models.recipes.load_model checks what the
   file holds (model name, kind, configuration, vocabularies, weight names and shapes) against the recipe, and the
   page shows its damaged-file message;
2. a broken label file (assets/i18n/<lang>/<page>.toml), lesson file or glossary affects only what it holds: the
   other language's copy is used and the page names the file, the router and every other page keep working;
3. the reason inside a Chinese damaged-file message is Chinese (no English reader message, no exception name).

Every case works on copies in a temporary folder (recipes.MODELS_DIR, ui.models.BENCH_DIR, ui.i18n.ASSETS point
there), never on the real files."""
from __future__ import annotations

import itertools
import re
import shutil

import pytest
import torch

import attention_core.models.recipes as train
import ui.i18n as i18n
from tests.apptest_util import ROOT, all_text, exceptions, open_page
from tests.test_corrupt_files import COST_TAB, assert_fine, assert_says, copy_assets
from ui.i18n import Why, catalog

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

LANGS = ("en", "zh")
REAL = {lang: dict(catalog(lang)) for lang in LANGS}       # the shipped labels, read before any test damages a copy
SHIPPED = train.TASKS


@pytest.fixture
def assets(tmp_path, monkeypatch):
    return copy_assets(tmp_path, monkeypatch)


def command(name: str) -> str:
    return f"python -m attention_core.models {name}"


# pages that stop after the message of their one model (st.stop): the router's footer, drawn after the page, is not
STOPPING = {"analysis", "pronoun"}


def router_ran(at, lang: str, page: str = "") -> bool:
    """The router drew its language switch, ran the page through st.navigation (the page's title is there) and,
    unless the page stops early, drew its footer after the page."""
    return (any(w.key == "_lang_switch" for w in at.sidebar.button_group) and bool(at.title)
            and (page in STOPPING or any(c.value == REAL[lang]["common.footer"] for c in at.sidebar.caption)))


LATIN = re.compile(r"[A-Za-z]+")
# words a Chinese reason may keep: the names of formats and of the library
ZH_LATIN_OK = {"JSON", "TOML", "UTF", "PyTorch", "n"}


def english_outside_code(text: str) -> list[str]:
    """Latin words of ``text`` outside inline `code` (file names, model names, shapes) and the allowed names."""
    return [w for w in LATIN.findall(re.sub(r"`[^`]*`", " ", text)) if w not in ZH_LATIN_OK]


# ---------------------------------------------------------------- 1. another model's checkpoint

def test_every_shipped_checkpoint_in_the_place_of_another_is_reported_by_the_loader(tmp_path):
    """All ordered pairs of shipped checkpoints: the copy is a DamagedFile naming both models, never a model."""
    for name, other in itertools.permutations(SHIPPED, 2):
        shutil.copy(ROOT / "assets" / "models" / f"{other}.pt", tmp_path / f"{name}.pt")
        with pytest.raises(train.DamagedFile) as err:
            train.load_model(name, tmp_path)
        assert (err.value.code, err.value.facts) == ("other_model", {"found": other, "expected": name}), (name, other)
        assert err.value.command == command(name)


def test_a_relabelled_checkpoint_of_another_model_is_reported_by_what_it_holds(tmp_path):
    """The name is not all that is checked: another model's checkpoint carrying this one's name differs in kind or
    configuration (every ordered pair), and a checkpoint of the right model with one vocabulary, weight or setting
    changed is reported with that difference."""
    ckpts = {name: torch.load(ROOT / "assets" / "models" / f"{name}.pt", weights_only=True) for name in SHIPPED}
    path = lambda name: tmp_path / f"{name}.pt"  # noqa: E731
    for name, other in itertools.permutations(SHIPPED, 2):
        torch.save(dict(ckpts[other], name=name), path(name))
        with pytest.raises(train.DamagedFile) as err:
            train.load_model(name, tmp_path)
        assert err.value.code in {"kind", "config"}, (name, other, err.value.code)
    dates = ckpts["dates"]
    state = dates["state_dict"]
    first = next(iter(state))
    cases = [
        ("vocab", dict(dates, src_vocab=dates["src_vocab"][::-1])),
        ("config", dict(dates, config=dict(dates["config"], hidden_dim=64))),
        ("config", dict(dates, config={k: v for k, v in dates["config"].items() if k != "src_vocab_size"})),
        ("config", dict(dates, config=dict(dates["config"], heads=2))),
        ("weights_missing", dict(dates, state_dict={k: v for k, v in state.items() if k != first})),
        ("weights_extra", dict(dates, state_dict=dict(state, extra=torch.zeros(2)))),
        ("weights_shape", dict(dates, state_dict=dict(state, **{first: state[first][:1]}))),
        ("format", dict(dates, format=0)),
        ("meta", dict(dates, meta=None)),
    ]
    for code, ckpt in cases:
        torch.save(ckpt, path("dates"))
        with pytest.raises(train.DamagedFile) as err:
            train.load_model("dates", tmp_path)
        assert err.value.code == code, (code, err.value.reason)
    shutil.copy(ROOT / "assets" / "models" / "dates.pt", path("dates"))
    assert train.load_model("dates", tmp_path).name == "dates"           # the shipped file passes every check


# (file, replaced by, page that reads it, a page that does not)
SWAPS = [("reverse_noattn", "sinks_lm", "bottleneck", "alignment"),
         ("reverse_attn", "reverse_noattn", "bottleneck", "alignment"),
         ("dates", "dates_noattn", "alignment", "bottleneck"),
         ("pronoun", "reverse_attn", "analysis", "bottleneck"),
         ("longctx_rope", "pronoun", "long_context", "positional"),
         ("induction_heads", "longctx_alibi", "induction_heads", "long_context")]


@pytest.mark.parametrize("lang", LANGS)
@pytest.mark.parametrize("name, other, page, unaffected", SWAPS, ids=[f"{s[0]}<-{s[1]}" for s in SWAPS])
def test_another_models_checkpoint_gives_the_pages_damaged_file_message(assets, lang, name, other, page, unaffected):
    shutil.copy(assets.models / f"{other}.pt", assets.models / f"{name}.pt")
    at = open_page(page, lang)
    detail = assert_says(at, lang, "damaged", f"assets/models/{name}.pt", command(name))
    assert detail == Why("other_model", (("found", other), ("expected", name))).text(lang)
    assert router_ran(at, lang, page)
    if lang == "zh":
        assert english_outside_code(detail) == []
    else:
        assert_fine(unaffected)


# ---------------------------------------------------------------- 2. label, lesson and glossary files

@pytest.fixture
def texts(tmp_path):
    """A copy of the label, lesson and glossary files that ui.i18n reads instead of the real ones."""
    root = tmp_path / "assets"
    for folder in ("i18n", "lessons"):
        shutil.copytree(ROOT / "assets" / folder, root / folder)
    shutil.copy(ROOT / "assets" / "glossary.toml", root / "glossary.toml")
    real = i18n.ASSETS
    i18n.ASSETS = root
    i18n.reload()
    try:
        yield root
    finally:
        i18n.ASSETS = real
        i18n.reload()


def cut_in_half(path, *, in_a_character: bool = False) -> None:
    """The first half of the file: cut between two characters (a TOML syntax error), or at its middle byte, which
    may fall inside a character (not UTF-8)."""
    data = path.read_bytes()
    half = data[: len(data) // 2]
    path.write_bytes(half if in_a_character else half.decode("utf-8", "ignore").encode("utf-8") + b" = \n")


def label_notice(lang: str, file: str, missing: bool = False) -> tuple[str, str]:
    """The start and end of the message naming a label file of ``lang``, as shown in ``lang``."""
    other = REAL[lang][f"common.lang_name_{i18n.other_lang(lang)}"]
    template = REAL[lang]["common.labels_missing" if missing else "common.labels_damaged"]
    filled = template.replace("{file}", file).replace("{other}", other).replace("{command}",
                                                                                f"git checkout -- {file}")
    head, _, tail = filled.partition("{detail}")
    return head, tail


def notices(at, lang: str, file: str, missing: bool = False) -> list[str]:
    head, tail = label_notice(lang, file, missing)
    return [w.value for w in at.warning if w.value.startswith(head) and w.value.endswith(tail)]


@pytest.mark.parametrize("in_a_character", [False, True], ids=["toml_syntax", "cut_in_a_character"])
def test_a_chinese_label_file_cut_in_half_only_affects_its_page(texts, in_a_character):
    """zh/qkv.toml cut in half used to replace all 22 Chinese pages with a TOMLDecodeError and no navigation. Now
    the qkv page shows its English labels under a Chinese message naming the file, the router runs, the other
    Chinese pages are Chinese and do not mention the file, and English is untouched."""
    file = "assets/i18n/zh/qkv.toml"
    cut_in_half(texts / "i18n" / "zh" / "qkv.toml", in_a_character=in_a_character)
    at = open_page("qkv", "zh")
    assert exceptions(at) == [] and router_ran(at, "zh")
    shown = notices(at, "zh", file)
    assert len(shown) == 1, [w.value for w in at.warning]
    assert english_outside_code(shown[0]) == []              # the reason is Chinese too
    why = "why_encoding" if in_a_character else "why_toml"
    assert REAL["zh"][f"common.{why}"].split("，")[0] in shown[0]
    assert at.title[0].value == REAL["en"]["qkv.title"]      # the page's own labels fall back to English
    assert catalog("zh")["qkv.title"] == REAL["en"]["qkv.title"] and catalog("zh")["nav.qkv"] == REAL["zh"]["nav.qkv"]
    for key in ("home", "masking", "glossary"):
        other = open_page(key, "zh")
        assert exceptions(other) == [] and router_ran(other, "zh")
        assert not notices(other, "zh", file) and REAL["zh"][f"{key}.title"] in all_text(other)
    english = open_page("qkv", "en")
    assert exceptions(english) == [] and not english.warning and english.title[0].value == REAL["en"]["qkv.title"]


def test_a_missing_english_label_file_falls_back_to_chinese_with_an_english_message(texts):
    file = "assets/i18n/en/masking.toml"
    (texts / "i18n" / "en" / "masking.toml").unlink()
    at = open_page("masking", "en")
    assert exceptions(at) == [] and router_ran(at, "en")
    assert len(notices(at, "en", file, missing=True)) == 1
    assert at.title[0].value == REAL["zh"]["masking.title"]
    assert_fine("qkv")


@pytest.mark.parametrize("lang", LANGS)
def test_a_broken_common_or_navigation_file_never_breaks_the_router(texts, lang):
    """The router's own labels (nav.toml) and every page's shared labels (common.toml): broken, the navigation and
    the pages still run, on the other language's labels, and each page names the file."""
    for ns in ("nav", "common"):
        cut_in_half(texts / "i18n" / lang / f"{ns}.toml")
    i18n.reload()
    for key in ("home", "qkv"):
        at = open_page(key, lang)
        assert exceptions(at) == []
        other = i18n.other_lang(lang)
        assert any(c.value == REAL[other]["common.footer"] for c in at.sidebar.caption)   # the router finished
        for ns in ("nav", "common"):
            # common.toml is one of the broken files: the message itself is the other language's
            head = REAL[other]["common.labels_damaged"].split("`")[0]
            assert any(w.value.startswith(head) and f"assets/i18n/{lang}/{ns}.toml" in w.value for w in at.warning)


def test_a_label_file_broken_in_both_languages_shows_keys_and_says_so(texts):
    for lang in LANGS:
        cut_in_half(texts / "i18n" / lang / "scaling.toml")
    at = open_page("scaling", "zh")
    assert exceptions(at) == [] and router_ran(at, "zh")
    assert at.title[0].value == "scaling.title"
    head = REAL["zh"]["common.labels_lost"].split("`")[0]
    assert any(w.value.startswith(head) and "assets/i18n/zh/scaling.toml" in w.value for w in at.warning)


@pytest.mark.parametrize("lang", LANGS)
def test_a_deleted_lesson_file_is_shown_in_the_other_language_under_a_message(texts, lang):
    """assets/lessons/en/qkv/kernel.md deleted used to be a FileNotFoundError with the server's absolute path."""
    file = f"assets/lessons/{lang}/qkv/kernel.md"
    (texts / "lessons" / lang / "qkv" / "kernel.md").unlink()
    at = open_page("qkv", lang)
    assert exceptions(at) == [] and router_ran(at, lang)
    text = all_text(at)
    other = i18n.other_lang(lang)
    message = REAL[lang]["common.lesson_missing"].format(file=file, other=REAL[lang][f"common.lang_name_{other}"],
                                                         command=f"git checkout -- {file}")
    assert message in text
    fallback = i18n.lesson_text(other, "qkv/kernel").strip().splitlines()[-1]
    assert fallback in text                                 # the other language's lesson is there
    assert str(texts) not in text and str(ROOT) not in text   # no server path
    assert_fine("masking", lang)


def test_a_lesson_unreadable_in_both_languages_gives_the_message_alone(texts):
    for lang in LANGS:
        path = texts / "lessons" / lang / "qkv" / "kernel.md"
        path.write_bytes(b"\xff\xfe not text")
    at = open_page("qkv", "zh")
    assert exceptions(at) == [] and router_ran(at, "zh")
    file = "assets/lessons/zh/qkv/kernel.md"
    message = REAL["zh"]["common.lesson_lost"].format(file=file, other=REAL["zh"]["common.lang_name_en"],
                                                      detail=REAL["zh"]["common.why_encoding"],
                                                      command=f"git checkout -- {file}")
    assert message in all_text(at)


GLOSSARY = ("assets/glossary.toml", "git checkout -- assets/glossary.toml")


@pytest.mark.parametrize("lang", LANGS)
@pytest.mark.parametrize("damage", ["garbled", "entry_without_definition", "missing"])
def test_a_damaged_glossary_gives_the_glossary_page_a_message(texts, lang, damage):
    path = texts / "glossary.toml"
    if damage == "garbled":
        cut_in_half(path)
    elif damage == "entry_without_definition":
        path.write_text(path.read_text(encoding="utf-8").replace('def_zh = "', 'zh_def = "', 1), encoding="utf-8")
    else:
        path.unlink()
    at = open_page("glossary", lang)
    assert exceptions(at) == [] and router_ran(at, lang)
    if damage == "missing":
        expected = REAL[lang]["common.file_missing"].format(file=GLOSSARY[0], command=GLOSSARY[1])
        assert [w.value for w in at.warning] == [expected]
        return
    detail = assert_says(at, lang, "damaged", *GLOSSARY)
    if damage == "garbled":
        assert REAL[lang]["common.why_toml"].split(",")[0].split("，")[0] in detail
    else:
        assert detail == REAL[lang]["common.why_entry"].format(n=1, fields="`def_zh`")
    if lang == "zh":
        assert english_outside_code(detail) == []
    from ui.course import neighbours                          # under every page: its previous / next pages
    around = {spec.key for spec in neighbours("glossary") if spec is not None}
    assert {link.proto.page for link in at.get("page_link")} <= around   # no entries are drawn
    assert_fine("qkv", lang)


# ---------------------------------------------------------------- 3. the reason, in the learner's language

def assert_reason(at, lang: str, file: str, name: str, why: str, **facts) -> None:
    detail = assert_says(at, lang, "damaged", file, name)
    assert detail == Why(why, tuple(facts.items())).text(lang)
    assert "Error" not in detail                          # an exception's name is not a reason
    if lang == "zh":
        assert english_outside_code(detail) == [], detail


@pytest.mark.parametrize("lang", LANGS)
def test_the_reason_of_a_damaged_checkpoint_is_said_in_the_learners_language(assets, lang):
    """Empty (was `EOFError`), cut short (was PytorchStreamReader's message), not a checkpoint, and a sinks model
    without its recorded evaluation (was `meta['eval'] lacks the recorded figures`)."""
    (assets.models / "pronoun.pt").write_bytes(b"")
    assert_reason(open_page("analysis", lang), lang, "assets/models/pronoun.pt", command("pronoun"), "empty")
    data = (assets.models / "reverse_attn.pt").read_bytes()
    (assets.models / "reverse_attn.pt").write_bytes(data[: len(data) // 2])
    assert_reason(open_page("bottleneck", lang), lang, "assets/models/reverse_attn.pt", command("reverse_attn"),
                  "truncated")
    (assets.models / "dates.pt").write_bytes(b"not a checkpoint")
    assert_reason(open_page("alignment", lang), lang, "assets/models/dates.pt", command("dates"), "not_checkpoint")
    path = assets.models / "sinks_lm.pt"
    ckpt = torch.load(path, weights_only=True)
    del ckpt["meta"]["eval"]["first_share"]
    torch.save(ckpt, path)
    assert_reason(open_page("attention_sinks", lang), lang, "assets/models/sinks_lm.pt", command("sinks_lm"),
                  "no_eval")


@pytest.mark.parametrize("lang", LANGS)
def test_the_reason_of_a_damaged_recording_is_said_in_the_learners_language(assets, lang):
    (assets.models / "curves.json").write_text('{"eval_seed": 1,\n "reverse": {', encoding="utf-8")
    assert_reason(open_page("bottleneck", lang), lang, "assets/models/curves.json",
                  "python -m attention_core.models curves", "json", line=2)
    import json
    bench = assets.bench / "efficient.json"
    doc = json.loads(bench.read_text(encoding="utf-8"))
    doc["results"] = [r for r in doc["results"] if r["n"] == 256]
    bench.write_text(json.dumps(doc), encoding="utf-8")
    assert_reason(open_page("efficiency", lang, {"tab": COST_TAB[lang]}), lang, "assets/bench/efficient.json",
                  "python -m attention_core.labs.efficiency_bench", "bench_doubling")


@pytest.mark.parametrize("lang", LANGS)
def test_a_recording_a_page_reads_itself_gives_a_reason_in_the_learners_language(tmp_path, monkeypatch, lang):
    """The pages with their own recorded file (here the QK-norm runs) use the same reasons."""
    from attention_core.labs import qk_norm as lab
    path = tmp_path / "qk_norm_runs.json"
    path.write_text("{damaged", encoding="utf-8")
    monkeypatch.setattr(lab, "RECORD_FILE", path)
    at = open_page("qk_norm", lang)
    assert_reason(at, lang, "assets/models/qk_norm_runs.json", lab.RECORD_COMMAND, "json", line=1)


def test_the_english_reason_keeps_the_readers_words_and_the_chinese_one_does_not():
    """A reader's own complaint (here a CSV value) is added on English pages only, as code; never a server path."""
    err = ValueError(f"could not convert string to float: 'oops' in {ROOT / 'assets' / 'bench' / 'x.csv'}")
    why = i18n.why_of(err, ROOT / "assets" / "bench" / "x.csv")
    assert why.code == "content" and str(ROOT) not in why.note
    assert why.text("en") == f"{REAL['en']['common.why_content']}: `{why.note}`"
    assert why.text("zh") == REAL["zh"]["common.why_content"]
    for key in REAL["en"]:
        if key.startswith("common.why_"):
            assert key in REAL["zh"] and english_outside_code(re.sub(r"\{\w+\}", "", str(REAL["zh"][key]))) == [], key

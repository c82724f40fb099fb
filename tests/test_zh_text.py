"""Chinese is Chinese: one term per concept (assets/glossary.toml), Chinese punctuation, and no English
left on a page shown in Chinese except code, symbols, formulas, names and the English the glossary sanctions.

1. Every zh file (assets/i18n/zh/*.toml, assets/lessons/zh/**) uses the glossary's Chinese term for a concept,
   never one of its rejected variants; Chinese text has “” (not ASCII "…" or «»), and no ASCII colon next to a
   Chinese character. Code (keys rendered with st.code), inline `code` and $math$ are left alone.
2. Every page run in zh with AppTest, every tab of it opened in turn (the shared walk of tests/sweep.py; a tab
   that renders lazily is drawn only when open): the rendered text (titles, Markdown, captions, alerts, widget labels,
   help and options, text box values, tabs, expanders, metrics, tables and dataframes, chart titles, \\text{}
   in formulas) has no English word outside the allow-lists below, the same punctuation rules hold, and the
   comments of the lesson code (pitfall code, not the "show the code" source) are Chinese. The English data
   words (the sentence the cross-attention page translates, the pronoun grammar, the date formats) are allowed
   only on the pages that show that data, and never in a text box's value, except the English source sentence
   of the cross-attention page.
"""
from __future__ import annotations

import functools
import json
import keyword
import pathlib
import re
import tomllib

import pytest

from tests.apptest_util import open_page
from tests.sweep import walk
from ui import i18n
from ui.registry import available_pages

ROOT = pathlib.Path(__file__).resolve().parent.parent
CJK = r"\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
CJK_TEXT = CJK + r"\u3000-\u303f\uff00-\uffef“”‘’"          # Chinese characters and full-width punctuation


@functools.cache
def glossary() -> tuple[dict, ...]:
    with (ROOT / "assets" / "glossary.toml").open("rb") as fh:
        return tuple(tomllib.load(fh)["term"])


# labels shown with st.code: code, not prose (their comments are checked on the rendered pages, test 2)
CODE_KEYS = {"cross_attention.shapes", "cross_attention.cm_shapes"}


def is_code_key(key: str) -> bool:
    return key.endswith("_code") or "_code_" in key or key in CODE_KEYS


def zh_texts() -> dict[str, str]:
    """Every zh label (not code) and lesson, by name."""
    texts = {}
    for key, value in i18n.catalog("zh").items():
        if not is_code_key(key):
            for i, text in enumerate(value if isinstance(value, list) else [value]):
                texts[f"{key}[{i}]" if isinstance(value, list) else key] = str(text)
    for name in sorted(i18n.lesson_names("zh")):
        texts[f"lessons/zh/{name}.md"] = i18n.lesson_text("zh", name)
    return texts


def prose(text: str) -> str:
    """Text without fenced code, inline `code`, $math$ and emoji shortcodes (:warning:, :material/x:)."""
    text = re.sub(r"```.*?```", " ", text, flags=re.S)
    text = re.sub(r"`[^`\n]*`", " ", text)
    text = re.sub(r"\$\$.*?\$\$|\$[^$\n]*\$", " ", text, flags=re.S)
    return re.sub(r":(?:material/)?[a-z_]+:", " ", text)


def variants_used(text: str) -> list[str]:
    """Rejected variants of glossary terms in ``text`` (an occurrence inside the accepted term itself,
    e.g. "one-hot" in "独热（one-hot）", is not a variant)."""
    found = []
    for term in glossary():
        accepted = [(m.start(), m.end()) for m in re.finditer(re.escape(term["zh"]), text)]
        for variant in term["reject"]:
            for m in re.finditer(re.escape(variant), text):
                if not any(a <= m.start() and m.end() <= b for a, b in accepted):
                    found.append(f"{variant} (use {term['zh']})")
    return found


def punctuation_faults(text: str) -> list[str]:
    """ASCII double quotes or «» in Chinese text, and ASCII colons next to a Chinese character."""
    text = prose(text)
    faults = []
    for para in re.split(r"\n\s*\n", text):
        if not re.search(f"[{CJK}]", para):
            continue                                           # an English or symbols-only paragraph
        faults += [f"ASCII quote in …{para[max(0, m.start() - 12):m.end() + 12]}…"
                   for m in re.finditer(r'"', para)]
        faults += [f"{m.group()} in …{para[max(0, m.start() - 12):m.end() + 12]}…" for m in re.finditer("[«»]", para)]
        faults += [f"ASCII colon in …{para[max(0, m.start() - 12):m.end() + 12]}…"
                   for m in re.finditer(rf"(?<=[{CJK_TEXT}*_])\s*:|:(?=\s*[*_]*[{CJK_TEXT}])", para)]
    return faults


def ascii_punctuation_faults(text: str) -> list[str]:
    """ASCII commas, semicolons and sentence ends between Chinese words, and ASCII brackets that hold a Chinese
    aside right after a Chinese word (“输出(打乱后)”, where Chinese writes “输出（打乱后）”). A formula keeps its
    ASCII signs: function arguments after a Latin name (cos(两角之差), max(…)), inner products ⟨词, 图块⟩."""
    para_text = re.sub(r"⟨[^⟩\n]*⟩", " ", prose(text))
    show = lambda m: f"…{para_text[max(0, m.start() - 10):m.end() + 10]}…"      # noqa: E731
    faults = [f"ASCII {m.group(1)!r} in {show(m)}" for m in re.finditer(rf"[{CJK}]\s*([,;])\s*[{CJK}]", para_text)]
    faults += [f"ASCII {m.group(1)!r} in {show(m)}" for m in re.finditer(rf"[{CJK}]([.!?])(?=\s|$|[{CJK}])", para_text)]
    faults += [f"ASCII brackets in {show(m)}" for m in re.finditer(rf"(?<=[{CJK}])\([{CJK}][^()\n]*\)", para_text)]
    return faults


# ---------------------------------------------------------------------------------------------
# 1. the zh files
# ---------------------------------------------------------------------------------------------

def test_zh_files_use_the_glossary_terms():
    bad = {name: v for name, text in zh_texts().items() if (v := variants_used(prose(text)))}
    assert bad == {}, f"non-glossary variants in zh files: {bad}"


def test_zh_files_use_chinese_punctuation():
    bad = {name: f for name, text in zh_texts().items() if (f := punctuation_faults(text))}
    assert bad == {}, f"ASCII quotes/colons in Chinese text: {bad}"


def test_zh_files_use_chinese_commas_and_brackets():
    bad = {name: f for name, text in zh_texts().items() if (f := ascii_punctuation_faults(text))}
    assert bad == {}, f"ASCII commas/brackets in Chinese text: {bad}"


def test_the_checks_catch_what_they_look_for():
    """The two checks above are not vacuous: they flag the kinds of text a review found."""
    assert variants_used("编码器块") and variants_used("注意力 rollout 的每一行")
    assert variants_used("几乎成了 one-hot。")
    assert not variants_used("注意力展开（rollout）与独热（one-hot）的编码器层")
    assert punctuation_faults('每个词找到的"搭档"还是那几个') and punctuation_faults("给了«5»")
    assert punctuation_faults("避坑: 整行都被遮住") and punctuation_faults("**避坑:** 整行")
    assert not punctuation_faults("“搭档”：`mask == 0` 与 $a:b$，d_model = 64 (10:40)")
    # the kinds of text a later review found: a sliding-window word for the running max, log-odds for logit, a cache
    # for SRAM, glossary variants, ASCII commas and brackets
    assert variants_used("m：滑动最大值；l：滑动和") == ["滑动最大值 (use 运行最大值)", "滑动和 (use 运行和)"]
    assert variants_used("把对数几率乘以 2") and variants_used("外加片上高速缓存里的一个分块")
    assert variants_used("切成正方形小块") and variants_used("正弦位置表") and variants_used("词嵌入、前馈层")
    assert not variants_used("运行最大值 m、运行和 l、片上 SRAM、图块、正弦位置编码、前馈网络（FFN）、滑动窗口")
    assert ascii_punctuation_faults("张量的形状（批量, 词元数, 特征数）")
    assert ascii_punctuation_faults("max |输出(打乱后) − 打乱(输出)|") and ascii_punctuation_faults("结束了.")
    assert not ascii_punctuation_faults("cos(两角之差)，⟨词, 图块⟩，min(最终损失, {chance})，`a, b`，(b, n, d)")


# ---------------------------------------------------------------------------------------------
# 2. every page in zh, rendered
# ---------------------------------------------------------------------------------------------

# Names (people, papers' models, libraries, hardware), kept in English in Chinese text as is usual.
NAMES = {
    "Vaswani", "Bahdanau", "Nadaraya", "Watson", "Abnar", "Zuidema", "Xiong", "Katharopoulos", "Choromanski",
    "Wang", "Beltagy", "Zaheer", "Child", "Dao", "Tay", "Press", "Jain", "Wallace", "Frobenius", "Transformer",
    "Transformers", "PyTorch", "torch", "Python", "Flax", "harvardnlp", "Annotated", "Loshchilov", "Hutter",
    "Glorot", "Bengio", "Xavier",
}
# Phrases quoted as they are: paper and benchmark titles and the language switch that must be readable in both
# languages.
PHRASES = ("Attention is not Explanation", "Transformers are RNNs", "Long Range Arena", "The Annotated Transformer",
           "Local Attention", "Linear Transformer", "Language / 语言")
# The first tutorial's own (English) example sentence (§5.2): quoted by the pronoun lesson, and the English
# source sentence the cross-attention page translates into Chinese. Nowhere else.
SEED_SENTENCE = "The animal didn't cross the street because it was too tired."
SEED_PAGES = {"pronoun", "cross_attention", "pretrained"}   # pretrained: the English model reads it
# Function names of formulas written in text (max |…|, log n, 2 sin x …) and a formula's variable names.
MATH = {"sin", "cos", "exp", "log", "max", "min", "softmax", "argmax", "tanh", "elu", "diag", "cumsum", "Var",
        "sqrt", "ceil", "inf", "act", "base", "pos", "block", "stride", "window", "acc", "out", "logit", "ln",
        "lr", "wd"}                                      # ln(…); lr, wd: the optimiser's learning rate, weight decay
# The name of the language itself (the switch, "English + 中文" batches of the analysis page).
LANGUAGE = {"English"}


@functools.cache
def data_words(kinds: tuple[str, ...]) -> frozenset[str]:
    """Words that are a page's data, not its prose. ``source``: the English sentence the cross-attention page
    translates and the words its images know; ``pronoun``: the pronoun grammar's English words (the "it" model
    reads both languages); ``dates``: the English month and weekday names and format names the date model
    reads."""
    from attention_core.labs.cross_attention import ZH_SCENE_WORDS
    from attention_core.models import tasks
    from attention_core.text import tokenize

    words = set()
    if "source" in kinds:
        words |= set(tokenize(i18n.catalog("en")["cross_attention.default_source_sentence"]))
        words |= set(ZH_SCENE_WORDS.values())
    if "pronoun" in kinds:
        words |= set(tasks.PRONOUN_LEXICON["en"])
        words |= {w for phrase in tasks._EN_CONTRACTIONS for w in phrase.split()}      # "did not" = "didn't"
    if "dates" in kinds:
        words |= set(tasks.MONTHS + tasks.MONTHS_ABBR + tasks.WEEKDAYS + tasks.WEEKDAYS_ABBR) | {"th"}
        for fmt in tasks.DATE_FORMATS:
            if fmt.lang == "en":
                words |= set(re.findall(r"[A-Za-z]+", fmt.description))
    return frozenset(w.lower() for w in words)


# The pages that show each kind of data (the training page trains the pronoun and date models; the analysis
# page runs the pronoun model on an "English + 中文" batch of its sentences).
DATA_PAGES = {"cross_attention": ("source",), "pronoun": ("pronoun",), "alignment": ("dates",),
              "training": ("pronoun", "dates"), "analysis": ("pronoun",)}


@functools.cache
def allowed() -> frozenset[str]:
    ok = NAMES | MATH | LANGUAGE
    for term in glossary():
        ok |= set(term["english_ok"])
    return frozenset(ok)


@functools.cache
def code_headers() -> frozenset[str]:
    """Column headers that announce code (e.g. the "code" column of the multi-head shapes table)."""
    return frozenset(str(v) for k, v in i18n.catalog("zh").items() if is_code_key(k) and isinstance(v, str))


def table_text(element) -> list[str]:
    """Column headers (a column_config label replaces the column's name), index labels and text cells of a
    dataframe or table element; a column headed as code is left out."""
    frame = element.value
    config = json.loads(element.proto.columns or "{}") if hasattr(element.proto, "columns") else {}
    texts = [str(i) for i in frame.index if isinstance(i, str)]
    for column in frame.columns:
        header = str((config.get(str(column)) or {}).get("label") or column)
        texts.append(header)
        if header not in code_headers():
            texts += [v for v in frame[column].tolist() if isinstance(v, str)]
    return texts


def rendered(at) -> tuple[list[str], list[str], list[str]]:
    """(text a learner reads, values of the text boxes, lesson code) of one AppTest run; the "show the code"
    source is left out."""
    texts = []
    for kind in ("title", "header", "subheader", "markdown", "caption", "info", "warning", "error", "success",
                 "text"):
        texts += [str(e.value) for e in at.get(kind)]
    for e in at.get("latex"):
        texts += re.findall(r"(?<![_^]\{)(?<![_^])\\text\{([^}]*)\}", str(e.value))   # words, not subscripts
    for kind in ("selectbox", "radio", "slider", "select_slider", "text_input", "number_input", "toggle",
                 "checkbox", "multiselect", "button", "button_group", "text_area"):
        for e in at.get(kind):
            texts += [str(getattr(e, "label", "") or ""), str(getattr(e.proto, "help", "") or "")]
            texts += [str(o) for o in (getattr(e, "options", None) or [])]
    texts += [str(e.label) for kind in ("tab", "expander") for e in at.get(kind)]
    texts += [str(e.proto.label) for e in at.get("metric")]
    for kind in ("dataframe", "table"):
        for e in at.get(kind):
            texts += table_text(e)
    inputs = [str(e.value) for kind in ("text_input", "text_area") for e in at.get(kind) if e.value]

    def titles(node):
        if isinstance(node, dict):
            for key, value in node.items():
                if key == "title":
                    text = value.get("text") if isinstance(value, dict) else value
                    texts.extend(str(x) for x in (text if isinstance(text, list) else [text]) if x)
                elif key not in ("data", "datasets"):
                    titles(value)
        elif isinstance(node, list):
            for value in node:
                titles(value)

    for chart in at.get("vega_lite_chart"):
        titles(json.loads(chart.proto.spec))
    source = i18n.catalog("zh")["common.show_code"]
    shown_source = {id(c.proto) for x in at.get("expander") if x.label == source for c in x.get("code")}
    code = [str(c.value) for c in at.get("code") if id(c.proto) not in shown_source]
    return texts, inputs, code


def english_words(text: str, extra: frozenset[str] = frozenset(), phrases: tuple[str, ...] = ()) -> list[str]:
    """English words of a rendered Chinese text that no allow-list covers. Not words: identifiers and symbols
    (with a digit, _, . or ^, or glued to one: d_model, W_Q, α_tj, fp16, nn.Embedding), special tokens
    (<pad>), single letters, CamelCase names (LayerNorm, NaN, RoPE), acronyms (FFN, CSV), and English given in
    brackets after its Chinese term (前馈网络（FFN）, 预热（warm-up）)."""
    text = re.sub(r"\s+", " ", prose(text))
    for phrase in PHRASES + phrases:
        text = text.replace(phrase, " ")
    text = re.sub(r"（[A-Za-z][A-Za-z \-’']*）", " ", text)
    text = re.sub(r"<[a-z]+>", " ", text)
    found = []
    for m in re.finditer(r"(?<![\w/\\])[A-Za-z][A-Za-z0-9_'’\-.^/]*", text):
        word = m.group().rstrip(".-")
        if (re.search(r"[0-9_.^/]", word) or len(word) == 1 or re.search(r"[a-z][A-Z]", word) or word.isupper()
                or word in allowed() or word.lower() in allowed() or word.lower() in extra):
            continue
        found.append(word)
    return found


def comment_words(code: str) -> list[str]:
    """English words in the # comments of a code block (code quoted in a comment, a call such as
    ``forward(query, keys)`` or a Python keyword, is code)."""
    words = []
    for line in code.splitlines():
        m = re.search(r"(?:^|\s)#\s?(.*)$", line)
        if m:
            comment = re.sub(r"[\w.]+\([^()]*\)", " ", m.group(1))
            words += [w for w in english_words(comment) if w not in keyword.kwlist]
    return words


def lazy_tabs(at) -> list[str]:
    """Labels of the tabs a run left empty: those pages draw a tab only when it is open (``tab.open``)."""
    return [str(tab.label) for tab in at.get("tab") if not tab.children]


# Other states of a page that show other text boxes (the training page's probe box depends on its task).
MORE_RUNS = {"training": ({"task": "12345 → 54321"}, {"task": "it / 它 → ?"}),
             "masking": ({"mixx": "true"}, {"nanx": "true", "fp16x": "true"}),    # pitfall demos: drawn only when open
             "scaling": ({"pitx": "true"},),
             "alignment": ({"al_pit": "true"},),   # the pitfall's demo, drawn only when open
             "analysis": ({"an_pit": "true"},),    # the pitfall's demo, drawn only when open
             "long_context": ({"pit_run": "true"},),   # the pitfall's demo, drawn only when open
             "qk_norm": ({"pit_run": "true"},),
             "qkv": ({"tab": "3 · Q, K, V", "qkv_norm_demo": "true"},       # the pitfalls' demos, drawn only when open
                     {"tab": "4 · Similarity", "qkv_add_demo": "true"})}


def page_runs(key: str) -> list[tuple[str, object]]:
    """(what, AppTest run) of the page in zh, then with each other tab opened (the shared walk of tests/sweep.py:
    a tab that renders lazily is drawn only when open), then in each state of MORE_RUNS."""
    runs = [(run.where, run.at) for run in walk(key, "zh")]
    return runs + [(str(params), open_page(key, "zh", params)) for params in MORE_RUNS.get(key, ())]


def check_zh_run(at, key: str) -> dict[str, list[str]]:
    """The faults of one zh run of page ``key``: English words in its text and in its text boxes' values,
    ASCII punctuation, English in the lesson code's comments."""
    texts, inputs, code = rendered(at)
    extra = data_words(DATA_PAGES.get(key, ()))
    if key == "glossary":        # the glossary page shows each term's English next to the Chinese
        extra |= {w.lower() for term in glossary() for w in re.findall(r"[A-Za-z]+(?:-[A-Za-z]+)*", term["en"])}
    phrases = (SEED_SENTENCE,) if key in SEED_PAGES else ()
    # a text box's default value: only the cross-attention page's English source sentence is English by design
    input_extra = data_words(("source",)) if key == "cross_attention" else frozenset()
    input_phrases = (SEED_SENTENCE,) if key in ("cross_attention", "pretrained") else ()
    return {
        "exceptions": [e.value for e in at.exception],
        "english": sorted({w for text in texts for w in english_words(text, extra, phrases)}),
        "english in text boxes": sorted({w for text in inputs for w in english_words(text, input_extra,
                                                                                        input_phrases)}),
        "ASCII quotes/colons": [f for text in texts for f in punctuation_faults(text)],
        "English in lesson code comments": sorted({w for block in code for w in comment_words(block)}),
    }


@pytest.mark.parametrize("key", [p.key for p in available_pages()])
def test_zh_page_shows_no_english_and_chinese_punctuation(key):
    faults = {}
    for where, at in page_runs(key):
        for kind, found in check_zh_run(at, key).items():
            if found:
                faults[f"{where}: {kind}"] = found
    assert faults == {}, f"on the zh {key} page: {faults}"


def test_the_page_scan_sees_lazy_tabs_tables_and_text_boxes():
    """The scan is not blind where a review found it blind: the efficiency page's lazy tabs are
    opened and read, dataframes/tables are read, text box values are read, and the seed sentence as a text
    box's value is English outside the cross-attention page."""
    at = open_page("efficiency", "zh")
    labels = lazy_tabs(at)
    c = i18n.catalog("zh")
    assert c["efficiency.tab_tips"] in labels and c["efficiency.tab_cost"] in labels
    tips = open_page("efficiency", "zh", {"tab": c["efficiency.tab_tips"]})
    assert not any(tab.label == c["efficiency.tab_tips"] for tab in tips.get("tab") if not tab.children)
    texts, _, _ = rendered(tips)
    assert any(c["efficiency.tips_ck_bf16_help"] in text for text in texts)
    assert tips.get("table") or tips.get("dataframe")
    table = (list(tips.get("table")) + list(tips.get("dataframe")))[0]
    assert set(table_text(table)) <= set(texts)
    assert english_words(SEED_SENTENCE) and not english_words(SEED_SENTENCE, phrases=(SEED_SENTENCE,))
    assert english_words("因为它 was too tired", data_words(("dates",)))
    walked = [text for where, run in page_runs("efficiency") for text in rendered(run)[0]]   # the scan's own runs
    assert any(c["efficiency.tips_ck_bf16_help"] in text for text in walked)

"""AppTest of the tutorials' content, in both languages: the sections are there, nothing
raises, and the numbers on screen are those attention_core computes."""
import re

import pytest

from attention_core.labs import cross_attention as cl
from attention_core.labs import efficiency as el
from tests.apptest_util import all_text, exceptions, open_page
from ui.i18n import catalog

EN, ZH = catalog("en"), catalog("zh")
CAT = {"en": EN, "zh": ZH}


def table_with(at, column: str):
    """The table (st.table, or st.dataframe) that has ``column``, its index as a column: the pages draw wide tables
    as narrow static ones that wrap on a phone, keyed by their first column."""
    for element in list(at.table) + list(at.dataframe):
        frame = element.value
        frame = frame.reset_index() if frame.index.name else frame
        if column in frame.columns:
            return frame
    raise AssertionError(f"no table with a column {column!r}")


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_efficiency_tips_tab_shows_measured_numbers(lang):
    c = CAT[lang]
    at = open_page("efficiency", lang, {"tab": c["efficiency.tab_tips"], "ck_L": "3", "ck_n": "32",
                                        "mp_gain": "×2"})
    assert not exceptions(at)
    r = el.checkpoint_report(32, 3)
    metrics = {m.label: m.value for m in at.metric}
    assert metrics[c["efficiency.tips_ck_m_plain"]] == f"{r.plain_bytes / 2 ** 10:.1f} KiB"    # < 1 MiB here
    assert metrics[c["efficiency.tips_ck_m_ckpt"]] == f"{r.ckpt_bytes / 2 ** 10:.1f} KiB"
    assert r.ckpt_bytes == 3 * 32 * 64 * 4
    assert metrics[c["efficiency.tips_ck_m_forwards"]] == "3 → 6"
    table = table_with(at, c["efficiency.tips_mp_c_oerr"])
    rows = el.precision_table(64, 32, 2.0, 0)
    assert list(table[c["efficiency.tips_mp_c_oerr"]]) == [f"{x.output_error:.1e}" for x in rows]
    assert list(table[c["efficiency.tips_mp_c_recipe"]]) == [c[f"efficiency.tips_mp_r_{x.recipe}"] for x in rows]
    text = all_text(at)
    # predict first: each question comes before the numbers that answer it
    ck_q = c["efficiency.tips_ck_ex_question"].format(layers=3, n=32)
    assert text.index(ck_q) < text.index("saved_tensors_hooks")
    assert text.index(c["efficiency.tips_mp_ex_question"]) < text.index(f"{rows[1].output_error:.1e}")
    assert c["efficiency.tips_pit_title"] in text
    assert "**0**" in text            # a 1e-8 gradient in float16


# ------------------------------------------------------------------ the summary page (seed 000 §11)
@pytest.mark.parametrize("lang", ["en", "zh"])
def test_summary_page_every_formula_linked_to_the_page_that_runs_it(lang):
    from ui.registry import PAGES, ROOT, SECTIONS, available_pages

    c = CAT[lang]
    review = [p.key for p in PAGES if p.section == "review"]                   # the course ends with its review
    assert review[0] == "summary" and SECTIONS.index("review") > SECTIONS.index("modern")
    source = (ROOT / "app_pages" / "summary.py").read_text(encoding="utf-8")
    import ast
    node = next(n for n in ast.parse(source).body if isinstance(n, ast.Assign) and n.targets[0].id == "FORMULAS")
    formulas = ast.literal_eval(node.value)
    at = open_page("summary", lang)
    assert not exceptions(at)
    latex = [el.value.strip().removeprefix("$$").removesuffix("$$").strip() for el in at.get("latex")]
    assert len(latex) == len(formulas) >= 15
    for shown, (_, lines, _) in zip(latex, formulas):
        # the rows of a formula centred one under the other (a phone's box is 326 px wide), a thin space after
        tex = (lines[0] if len(lines) == 1 else r"\begin{gathered}" + r"\\ ".join(lines) + r"\end{gathered}") + r"\,"
        for word in ("visible", "hidden", "layers", "restricted", "self"):
            tex = tex.replace(f"@{word}@", c[f"summary.{word}"])
        assert shown == tex and "@" not in shown
    links = at.get("page_link")[:len(formulas)]        # then the course's previous / next (ui.course)
    keys = {p.key for p in available_pages()}
    assert [link.proto.page for link in links] == [page for _, _, page in formulas]
    assert all(page in keys for _, _, page in formulas)
    assert [link.proto.label for link in links] == [c["summary.run_it"].format(page=c[f"nav.{p}"])
                                                    for _, _, p in formulas]
    text = all_text(at)
    for key, _, _ in formulas:
        assert c[f"summary.f_{key}"] in text and c[f"summary.f_{key}_note"] in text
    assert c["summary.one_sentence_text"] in text
    assert ("Q-K-V 范式" if lang == "zh" else "The Q–K–V paradigm") in text


# ------------------------------------------------------------------ the tutorials' bugs as pitfalls
@pytest.mark.parametrize("lang", ["en", "zh"])
def test_qkv_additive_pairing_pitfall(lang):
    from attention_core.labs import qkv as lab
    from attention_core.labs import seed_bugs
    from attention_core.text import tokenize

    c = CAT[lang]
    at = open_page("qkv", lang, {"tab": c["qkv.tab_similarity"], "qkv_add_demo": "true"})   # the demo, opened
    assert not exceptions(at)
    tokens = tuple(tokenize(c["common.default_sentence"]))
    s = lab.qkv_step_through(tokens, 32, 64, seed=0)       # the tab's defaults: d_k 64, hidden 16, seed 0
    r = seed_bugs.additive_pairing_demo(lab.make_additive(64, 64, 16, 0), s.q[None], s.k[None])
    text = all_text(at)
    assert c["qkv.p_add_title"] in text
    assert c["qkv.p_add_now"].format(n=len(tokens), theirs=r.theirs_shape, ours=r.ours_shape,
                                     diff=f"{r.diag_diff:.1e}", missing=r.off_diag) in text
    assert c["qkv.p_add_error"].format(m=len(tokens) - 1, n=len(tokens), err=r.fewer_queries_error) in text


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_efficiency_block_mask_and_linear_mask_pitfalls(lang):
    from attention_core.labs import efficiency as el
    from attention_core.labs import seed_bugs
    from attention_core.text import tokenize

    c = CAT[lang]
    at = open_page("efficiency", lang)
    assert not exceptions(at)
    tokens = tuple(tokenize(EN["common.default_sentence"] if lang == "en" else ZH["common.default_sentence"]))
    n = len(tokens)
    text = all_text(at)
    bm = seed_bugs.block_mask_demo(n, 4)
    for name in ("padding", "causal"):
        assert c["efficiency.pit_bm_now"].format(what=c[f"efficiency.pit_bm_{name}"], n=n, block=4,
                                                 err=bm[name].replace("`", "'")) in text
    at = open_page("efficiency", lang, {"tab": c["efficiency.tab_rnn"]})     # the linear-mask pitfall: RNN tab
    assert not exceptions(at)
    text = all_text(at)
    q, _, _ = el.lab_inputs(tokens, n, 0, gain=1.0)
    lin = seed_bugs.linear_mask_demo(q[0], num_heads=2)
    assert lin.theirs_first > 1e-3 and lin.ours_first == 0.0
    assert c["efficiency.pit_lin_now"].format(n=n, theirs=f"{lin.theirs_first:.3f}",
                                              ours=f"{lin.ours_first:.1e}", all=f"{lin.theirs_all:.3f}") in text
    assert c["efficiency.pit_lin_body"].format(tab=c["efficiency.tab_rnn"]) in text


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_training_loss_head_and_adamw_pitfalls(lang):
    from attention_core.labs import seed_bugs

    c = CAT[lang]
    at = open_page("training", lang)
    assert not exceptions(at)
    text = all_text(at)
    r = seed_bugs.tutorial_loss_on_encoder_states()
    assert c["training.pit_head_now"].format(states=r.states, targets=r.targets, err=r.error,
                                             logits=r.logits, loss=f"{r.fixed_loss:.2f}",
                                             chance=f"{r.chance:.2f}") in text
    table = table_with(at, c["training.pit_decay_adamw"])
    assert list(table[c["training.pit_decay_adamw"]]) == [
        f"{seed_bugs.weight_decay_effect('adamw', g):.2e}" for g in (0.0, 0.01, 1.0, 100.0)]
    assert list(table[c["training.pit_decay_adam"]]) == [
        f"{seed_bugs.weight_decay_effect('adam', g):.2e}" for g in (0.0, 0.01, 1.0, 100.0)]
    assert c["training.pit_decay_title"] in text and c["training.pit_head_title"] in text


# ------------------------------------------------------------------ seed 000 §1.1 and §5.1
@pytest.mark.parametrize("lang", ["en", "zh"])
def test_qkv_opens_with_the_cognitive_origin_and_a_prediction(lang):
    from ui.i18n import lesson_text

    c = CAT[lang]
    at = open_page("qkv", lang)
    assert not exceptions(at)
    text = all_text(at)
    origin = lesson_text(lang, "qkv/origin")
    assert origin.split("\n")[0][:20] in text
    assert ("火车站" if lang == "zh" else "train station") in text
    # posed before the tabs' material, answered only after the learner commits
    assert text.index(c["qkv.origin_ex_q"]) < text.index(c["qkv.formula_caption"])
    assert c["qkv.origin_ex_why"] not in text
    at.radio(key="qkv_ex_origin_guess").set_value(1).run()
    at.button(key="qkv_ex_origin_reveal").click().run()
    assert c["qkv.origin_ex_why"] in all_text(at) and not exceptions(at)


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_cross_attention_table1_measured(lang):
    c = CAT[lang]
    at = open_page("cross_attention", lang, {"pl_n": "20", "pl_d": "16", "pl_k": "5", "pl_r": "3",
                                             "pl_i": "2", "pl_j": "50", "tab": c["cross_attention.tab_paths"]})
    assert not exceptions(at)
    rows = cl.table1(20, 16, 2, 19, kernel=5, neighbourhood=3)
    table = table_with(at, c["cross_attention.paths_c_steps"].format(i=2, j=19))
    assert list(table[c["cross_attention.paths_c_steps"].format(i=2, j=19)]) == [r.steps for r in rows]
    assert [r.steps for r in rows] == [1, 17, 9, 6]
    text = all_text(at)
    assert c["cross_attention.paths_clamped"].format(n=20) in text
    assert c["cross_attention.paths_notice_steps"].format(i=2, j=19, sa=1, rnn=17, conv=9, k=5, res=6, r=3) in text
    assert c["cross_attention.paths_dearer"] in text                 # n = 20 >= d = 16
    assert text.index(c["cross_attention.paths_ex_q"].format(n=20, last=19)) < text.index(
        c["cross_attention.paths_notice_steps"].format(i=2, j=19, sa=1, rnn=17, conv=9, k=5, res=6, r=3))


# ------------------------------------------------------------------ seed 000 §7.3: the pattern table
@pytest.mark.parametrize("lang", ["en", "zh"])
def test_analysis_maps_every_row_of_the_tutorials_pattern_table(lang):
    from attention_core.analysis import PATTERNS

    c = CAT[lang]
    at = open_page("analysis", lang, {"tab": c["analysis.tab_patterns"]})
    assert not exceptions(at)
    table = table_with(at, c["analysis.seedpat_c_seed"])
    rows = ("diagonal", "vertical", "horizontal", "block", "sparse")
    assert list(table[c["analysis.seedpat_c_seed"]]) == [c[f"analysis.seedpat_{r}"] for r in rows]
    app = list(table[c["analysis.seedpat_c_app"]])
    names = {p: c[f"analysis.pattern_{p}"] for p in PATTERNS}
    assert app[0] == c["analysis.seedpat_sep"].join(names[p] for p in ("diagonal", "previous", "next"))
    assert app[1:] == [names["vertical"], names["broad"], names["block"], names["broad"]]
    used = {p for p in PATTERNS if any(names[p] in cell for cell in app)}
    assert used == set(PATTERNS)                     # every classifier pattern is accounted for
    assert all(names["broad"] in note for note in table[c["analysis.seedpat_c_note"]][[2, 4]])


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_analysis_pattern_table_asks_first_and_quotes_the_batch(lang):
    """The tutorial's pattern table comes with a predict-first question, and its
    notice quotes the batch's label shares, which agree with the page's own pattern chart (per-head shares,
    every head labelled once per sentence), and 1/n for the batch's shortest sentence. About 4 s."""
    from attention_core.analysis import PATTERNS
    from tests.apptest_util import chart_data, chart_spec, charts, title_text

    c = CAT[lang]
    at = open_page("analysis", lang, {"tab": c["analysis.tab_patterns"]})
    assert not exceptions(at)
    text = "\n".join(str(e.value) for e in at.markdown)
    assert text.index(c["analysis.seedpat_intro"]) < text.index(c["analysis.seedpat_ex_q"])
    options = [c[f"analysis.seedpat_ex_a{i}"] for i in range(3)]
    assert any(list(r.options) == options for r in at.radio)
    b = int(at.slider[0].value)
    pattern_chart = next(ch for ch in charts(at) if title_text(chart_spec(ch)) ==
                         c["analysis.patterns_title"].format(b=b))
    data = chart_data(pattern_chart)["data"]
    names = {p: c[f"analysis.pattern_{p}"] for p in PATTERNS}
    share = {p: float(data[data["key"] == names[p]]["value"].mean()) for p in PATTERNS}
    heads = data["query"].nunique()

    def pct(x: float) -> str:
        return f"{100 * x:.0f}%"

    expected = c["analysis.seedpat_notice_shares"].format(
        pairs=heads * b, diag=pct(share["diagonal"] + share["previous"] + share["next"]),
        self_=pct(share["diagonal"]), prev=pct(share["previous"]), next_=pct(share["next"]),
        vertical=pct(share["vertical"]), block=pct(share["block"]), broad=pct(share["broad"]),
        broad_name=names["broad"])
    assert expected in text
    assert abs(sum(share.values()) - 1) < 1e-6
    pattern = re.escape(c["analysis.seedpat_notice_row"]).replace(r"\{n\}", r"(\d+)").replace(r"\{w\}", r"([0-9.]+)")
    found = re.findall(pattern, text)
    assert len(found) == 1
    n, w = int(found[0][0]), found[0][2]
    assert n >= 2 and w == f"{1 / n:.3f}"


# ------------------------------------------------------------------ URLs a learner may edit by hand
@pytest.mark.parametrize("lang", ["en", "zh"])
def test_new_controls_survive_bad_urls(lang):
    c = CAT[lang]
    at = open_page("efficiency", lang, {"tab": c["efficiency.tab_tips"], "ck_n": "999", "ck_L": "99",
                                        "mp_gain": "×3", "ck_bf16": "maybe"})
    assert not exceptions(at)
    metrics = {m.label: m.value for m in at.metric}
    assert metrics[c["efficiency.tips_ck_m_forwards"]] in {f"{L} → {2 * L}" for L in range(1, 5)}
    at = open_page("cross_attention", lang, {"pl_n": "1000", "pl_d": "7", "pl_k": "4", "pl_r": "0",
                                             "pl_i": "-3", "pl_j": "abc", "tab": c["cross_attention.tab_paths"]})
    assert not exceptions(at)
    assert len(table_with(at, c["cross_attention.paths_c_kind"])) == 4


def test_cross_attention_table1_defaults_need_no_clamping():
    at = open_page("cross_attention", "en", {"tab": EN["cross_attention.tab_paths"]})
    text = all_text(at)
    assert EN["cross_attention.paths_clamped"].format(n=32) not in text
    assert EN["cross_attention.paths_notice_steps"].format(i=0, j=31, sa=1, rnn=31, conv=31, k=3, res=8, r=4) in text


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_multihead_gallery_links_to_the_pattern_table(lang):
    c = CAT[lang]
    at = open_page("multihead", lang, {"tab": c["multihead.tab_gallery"]})
    assert not exceptions(at)
    links = [(link.proto.page, link.proto.label) for link in at.get("page_link")]
    assert ("analysis", c["multihead.seedpat_link"]) in links


# ------------------------------------------------------------------ seed 000 §8.4: every column of the table
# The first tutorial's comparison table, column "适用场景", row by row (standard, linear, sparse, Linformer,
# Performer, flash); the page's "sparse as a dense mask" row is the tutorial's code for its sparse row.
SEED_USES = {"standard": "短序列", "linear": "长序列生成", "sparse": "长文档处理", "sparse_dense": "长文档处理",
             "linformer": "长序列分类", "performer": "超长序列", "flash": "硬件优化"}


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_efficiency_complexity_table_keeps_the_tutorials_use_case_column(lang):
    c = CAT[lang]
    assert {k: ZH[f"efficiency.cx_{k}_use"] for k in SEED_USES} == SEED_USES
    at = open_page("efficiency", lang, {"tab": c["efficiency.tab_cost"]})
    assert not exceptions(at)
    table = table_with(at, c["efficiency.col_use"])
    shown = dict(zip(table[c["efficiency.col_variant"]], table[c["efficiency.col_use"]]))
    assert shown == {c[f"efficiency.cx_{k}"]: c[f"efficiency.cx_{k}_use"] for k in SEED_USES}
    for column in ("col_time", "col_space", "col_idea", "col_measured", "col_tslope"):    # the other columns stay
        table_with(at, c[f"efficiency.{column}"])

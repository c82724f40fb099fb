"""AppTest of the seed content added for issue 11 §2, in both languages: the sections are there, nothing
raises, and the numbers on screen are those attention_core computes."""
import pytest

from attention_core import perf_lab as pl
from tests.apptest_util import all_text, exceptions, open_page
from ui.i18n import catalog

EN, ZH = catalog("en"), catalog("zh")
CAT = {"en": EN, "zh": ZH}


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_efficiency_tips_tab_shows_measured_numbers(lang):
    c = CAT[lang]
    at = open_page("efficiency", lang, {"tab": c["efficiency.tab_tips"], "ck_L": "3", "ck_n": "32",
                                        "mp_gain": "×2"})
    assert not exceptions(at)
    r = pl.checkpoint_report(32, 3)
    metrics = {m.label: m.value for m in at.metric}
    assert metrics[c["efficiency.tips_ck_m_plain"]] == f"{r.plain_bytes / 2 ** 20:.2f} MiB"
    assert metrics[c["efficiency.tips_ck_m_ckpt"]] == f"{r.ckpt_bytes / 2 ** 20:.2f} MiB"
    assert metrics[c["efficiency.tips_ck_m_forwards"]] == "3 → 6"
    table = at.dataframe[-1].value
    rows = pl.precision_table(64, 32, 2.0, 0)
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
    assert PAGES[-1].key == "summary" and PAGES[-1].section == SECTIONS[-1]     # the end of the navigation
    source = (ROOT / "pages" / "summary.py").read_text(encoding="utf-8")
    import ast
    node = next(n for n in ast.parse(source).body if isinstance(n, ast.Assign) and n.targets[0].id == "FORMULAS")
    formulas = ast.literal_eval(node.value)
    at = open_page("summary", lang)
    assert not exceptions(at)
    latex = [el.value.strip().removeprefix("$$").removesuffix("$$").strip() for el in at.get("latex")]
    assert len(latex) == len(formulas) >= 15
    for shown, (_, tex, _) in zip(latex, formulas):
        assert shown == tex.replace("@visible@", c["summary.visible"]).replace("@hidden@", c["summary.hidden"])
    links = at.get("page_link")
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

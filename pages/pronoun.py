"""Attention that resolves "it": a small trained Transformer reads a template sentence and names
the noun "it"/"它" refers to, as a word read from the pronoun's final vector.

First tutorial, section 5.2 ("The animal didn't cross the street because it was too tired": self-
attention relates "it" to every word). Order: the model and what it is not -> the sentence (picked
from the grammar's word lists or typed) -> the answer -> attention from "it" in every layer and head,
the resolving head marked, next to the same sentence with the other adjective -> one head in full ->
fresh sentences: which head points at the referent, and how often -> why the readout matters.
"""
from __future__ import annotations

import numpy as np
import streamlit as st
import torch

from attention_core.labs.pronoun import (
    PronounRows,
    adjective_ids,
    build_example,
    example_ids,
    flipped,
    fresh_examples,
    prefix_rows,
    profile_of,
    pronoun_rows,
    word,
)
from attention_core.models.pronoun import PronounResolver, referent_agreement, resolve
from attention_core.models.tasks import (
    PRONOUN_TEMPLATES,
    PronounExample,
    parse_pronoun_sentence,
    pronoun_template,
    pronoun_text,
    sentence_language,
)
from ui import models
from ui import pronoun_charts as pc
from ui.anatomy import (
    exercise,
    formula,
    header,
    intuition,
    md_escape,
    notice,
    pitfall,
    problem,
    show_chart,
    show_code,
    show_matrix,
)
from ui.cache import MB, cache_data, shared_arrays
from ui.charts import ROW_SELECTION, heatmap_spec, to_spec
from ui.controls import MAX_CHARS, adopt_click
from ui.controls import seed as seed_control
from ui.i18n import LANGS, catalog, current_lang, lesson, t

NS = "pronoun"
TEMPLATE_IDS = tuple(tp.id for tp in PRONOUN_TEMPLATES)
DEFAULT_NOUNS = {"cross": ("animal", "street"), "fit": ("trophy", "suitcase")}
SOURCES = ("pick", "type")
N_DEFAULT, N_MIN, N_MAX = 100, 10, 500
CHUNK = 200               # fresh sentences per forward pass (the default, 100 per language, is one)
FORMULA = (r"a^{(\ell,i)}_{\text{it},j}=\mathrm{softmax}_j\Big(\frac{q^{(\ell,i)}_{\text{it}}\cdot k^{(\ell,i)}_j}"
           r"{\sqrt{d_k}}\Big)\qquad h=W_{\text{read}}\,x^{(L)}_{\text{it}}\qquad "
           r"P(w)=\mathrm{softmax}_w\big(h\cdot E_w+b_w\big)")
STAR = "★ "


# ---------------------------------------------------------------------------------------------
# the model and the cached computations (plain parameters in, numpy out)
# ---------------------------------------------------------------------------------------------

def shipped_model():
    return models.shipped_model("pronoun")


def model() -> PronounResolver:
    return shipped_model().model


def resolving_head() -> dict:
    """The encoder head that prefers the referent most often, chosen at training time on held-out
    sentences of ``models.recipes.EVAL_SEED`` (the checkpoint's meta), with its figures there."""
    ev = shipped_model().meta["eval"]
    layer, head = ev["best_encoder_head"]
    return {"layer": int(layer), "head": int(head), "fraction": float(ev["best_encoder_head_fraction"]),
            "n": 2 * int(ev["n_per_lang"]), "referent": float(ev["best_head_referent_weight"]),
            "other": float(ev["best_head_other_weight"])}


def example_key(e: PronounExample) -> tuple:
    return (e.template, e.lang, *example_ids(e))


def example_of(key: tuple) -> PronounExample:
    return build_example(*key)


@cache_data(max_entries=64, max_bytes=8 * MB)
def run(key: tuple) -> dict:
    """The model on one sentence: the answer and its probability, the most probable word of the whole
    vocabulary, the encoder's rows from "it"."""
    e = example_of(key)
    with torch.inference_mode():
        r = resolve(model(), e, shipped_model().src_vocab)
    return {"answer": r.answer, "token": r.token, "probs": r.probs.numpy(), "top_token": r.top_token,
            "top_prob": r.top_prob, "from_it": r.from_pronoun.numpy(),                      # (L, h, n)
            "weights": np.stack([w.numpy() for w in r.weights])}                            # (L, h, n, n)


@shared_arrays(max_entries=32, max_bytes=16 * MB)
def fresh_chunk(seed_: int, chunk: int) -> PronounRows:
    """Per-sentence rows of fresh sentences [chunk * CHUNK, (chunk + 1) * CHUNK) of ``seed_`` (one forward
    pass, run when a batch size first reaches them): shared, never mutated."""
    examples = fresh_examples(seed_, (chunk + 1) * CHUNK)[chunk * CHUNK:]
    with torch.inference_mode():
        rows = pronoun_rows(model(), examples, shipped_model().src_vocab)
    return prefix_rows(rows, CHUNK)                                # the weights are not kept


@cache_data(max_entries=16, max_bytes=4 * MB)
def fresh(seed_: int, n_per_lang: int) -> dict:
    """Agreement and mean weights from "it" over fresh sentences (noun pairs never trained on): the
    first 2 n of the seed's sequence (``fresh_examples`` is prefix-stable), averaged sentence by sentence."""
    n = 2 * n_per_lang
    rows = prefix_rows([fresh_chunk(seed_, c) for c in range((n - 1) // CHUNK + 1)], n)
    prof = profile_of(rows)
    return {"agreement": rows.agree.float().mean(0).numpy(), "accuracy": prof.accuracy,
            "referent": prof.referent.numpy(), "other": prof.other.numpy(), "adjective": prof.adjective.numpy(),
            "n": n}


def ablation() -> dict | None:
    """The recorded readout ablation (scripts/pronoun_readout_ablation.py); None if it is missing or damaged
    (the pitfall then says how to record it)."""
    return models.readout_ablation()


# ---------------------------------------------------------------------------------------------
# labels
# ---------------------------------------------------------------------------------------------

def head_label(layer: int, head: int) -> str:
    """"L2·H1", with a star for the resolving head."""
    best = resolving_head()
    star = STAR if (layer, head) == (best["layer"], best["head"]) else ""
    return star + t(f"{NS}.head_label", layer=layer + 1, head=head + 1)


def row_labels(num_layers: int, num_heads: int) -> list[str]:
    """The rows of the "from it" heatmaps: every encoder head, layer-major."""
    return [head_label(a, b) for a in range(num_layers) for b in range(num_heads)]


def template_label(template_id: str, lang: str) -> str:
    slots = {"A": "＿", "B": "＿", "ADJ": "＿"}
    return pronoun_text([slots.get(s, s) for s in pronoun_template(template_id).tokens(lang)], lang)


def sentence_text(e: PronounExample) -> str:
    return pronoun_text(e.tokens, e.lang)


def pct(x: float) -> str:
    return f"{100 * x:.0f}%"


def pct1(x: float) -> str:
    return f"{100 * x:.1f}%"


def adopt_url_choice(key: str, options, label_of) -> None:
    """A bound widget stores its displayed label in the URL; a link made in the other language
    (``?lang=zh&a=animal``) is mapped back to the option before the widget is drawn."""
    asked = st.query_params.get(key)
    if asked is None or key in st.session_state:
        return
    for lang in LANGS:
        for option in options:
            if label_of(option, lang) == asked:
                st.session_state[key] = option
                return


def choose(label: str, options: list, key: str, label_of, default=None, shown_in: str | None = None, **kwargs):
    """A URL-bound select box over language-neutral options, shown in ``shown_in`` (default: the
    page's language)."""
    adopt_url_choice(key, options, label_of)
    index = options.index(default) if default in options else 0
    return st.selectbox(label, options, index=index, key=key, bind="query-params",
                        format_func=lambda o: label_of(o, shown_in or current_lang()), **kwargs)


# ---------------------------------------------------------------------------------------------
# the controls
# ---------------------------------------------------------------------------------------------

PARSE_ERRORS = {"empty": "err_empty", "too_long": "err_too_long", "unknown_word": "err_unknown_word",
                "no_template": "err_no_template", "bad_noun": "err_bad_noun",
                "bad_adjective": "err_bad_adjective", "same_noun": "err_same_noun"}


def picked_sentence() -> PronounExample:
    lang = current_lang()
    c1, c2, c3, c4 = st.columns([3.2, 2, 2, 2])
    with c1:
        tpl = choose(t(f"{NS}.template"), list(TEMPLATE_IDS), "tpl", template_label,
                     help=t(f"{NS}.template_help"))
    template = pronoun_template(tpl)
    first, second = adjective_ids(template)
    default_a, default_b = DEFAULT_NOUNS.get(tpl, (template.nouns_a[0][0], None))
    with c2:
        a = choose(t(f"{NS}.noun_a"), [n[0] for n in template.nouns_a], "a",
                   lambda o, lg: word(template, "A", o, lg), default_a)
    with c3:
        b_options = [n[0] for n in template.nouns_b if n[0] != a]
        b = choose(t(f"{NS}.noun_b"), b_options, "b", lambda o, lg: word(template, "B", o, lg), default_b,
                   help=t(f"{NS}.noun_b_help"))
    with c4:
        adj = choose(t(f"{NS}.adjective"), list(first + second), "adj",
                     lambda o, lg: word(template, "ADJ", o, lg) + (" ①" if o in first else " ②"),
                     help=t(f"{NS}.adjective_help"))
    return build_example(tpl, lang, a, b, adj)


def typed_sentence() -> PronounExample | None:
    text = st.text_input(t(f"{NS}.typed"), value=t(f"{NS}.typed_default"), key="text", bind="query-params",
                         max_chars=MAX_CHARS, help=t(f"{NS}.typed_help"))
    lang = sentence_language(text)
    parsed = parse_pronoun_sentence(text, lang)
    if parsed.ok:
        return parsed.example
    problem(f"{NS}.{PARSE_ERRORS[parsed.error]}", word=md_escape(parsed.detail), max=parsed.detail,
            lang=t(f"{NS}.lang_{lang}"))
    with st.expander(t(f"{NS}.grammar_title"), icon=":material/menu_book:"):
        st.markdown(grammar_help(lang))
    return None


def grammar_help(lang: str) -> str:
    lines = []
    for tp in PRONOUN_TEMPLATES:
        k = 0 if lang == "en" else 1
        first, second = ([a[k] for a in group] for group in (tp.adj_first, tp.adj_second))
        lines.append(t(f"{NS}.grammar_line", shape=md_escape(template_label(tp.id, lang)),
                       a=md_escape(" · ".join(n[k] for n in tp.nouns_a)),
                       b=md_escape(" · ".join(n[k] for n in tp.nouns_b)),
                       first=md_escape(" · ".join(first)), second=md_escape(" · ".join(second))))
    return "\n".join(lines)


def contrast_choice(e: PronounExample) -> PronounExample:
    """The same sentence with an adjective of the other group (select box, default its first)."""
    first, second = adjective_ids(e.template)
    other = list(second if e.label == 0 else first)
    template = pronoun_template(e.template)
    with st.columns([1, 3])[0]:
        vs = choose(t(f"{NS}.contrast"), other, "vs", lambda o, lg: word(template, "ADJ", o, lg),
                    shown_in=e.lang, help=t(f"{NS}.contrast_help"))
    return flipped(e, vs)


# ---------------------------------------------------------------------------------------------
# the sections
# ---------------------------------------------------------------------------------------------

def model_card() -> None:
    lm = shipped_model()
    cfg, meta = lm.config, lm.meta
    params = sum(p.numel() for p in lm.model.parameters())
    acc = meta.get("eval", {}).get("accuracy", {})
    st.warning(t(f"{NS}.model_card", layers=cfg["num_layers"], heads=cfg["num_heads"], d=cfg["d_model"],
                 params=f"{params:,}", words=len(lm.src_vocab) - 4, templates=len(PRONOUN_TEMPLATES),
                 steps=meta.get("recipe", {}).get("steps", "?"), seconds=f"{meta.get('train_seconds', 0):.0f}",
                 en=pct(acc.get("en", float("nan"))), zh=pct(acc.get("zh", float("nan")))),
               icon=":material/smart_toy:")


def answer_box(e: PronounExample, r: dict) -> None:
    right = r["answer"] == e.label
    st.markdown(f"**{md_escape(sentence_text(e))}**")
    st.metric(t(f"{NS}.answer_metric", it=e.tokens[e.pronoun]), r["token"],
              t(f"{NS}.answer_prob", p=f"{float(r['probs'][r['answer']]):.3f}"), delta_color="off",
              delta_arrow="off")
    st.caption(t(f"{NS}.answer_top", w=md_escape(r["top_token"]), p=f"{r['top_prob']:.3f}"))
    if not right:
        st.error(t(f"{NS}.answer_wrong", right=md_escape(e.tokens[e.referent])), icon=":material/cancel:")


def from_it_matrix(r: dict) -> np.ndarray:
    """(L*h, n): the encoder rows from "it", layer-major."""
    f = r["from_it"]
    return f.reshape(-1, f.shape[-1])


@cache_data(max_entries=64, max_bytes=8 * MB)
def from_it_spec(key: tuple, lang: str, selected: int | None) -> dict:
    e, r = example_of(key), run(key)
    L, h = r["from_it"].shape[:2]
    return heatmap_spec(from_it_matrix(r), row_labels(L, h), list(e.tokens), title=sentence_text(e),
                        x_title=t(f"{NS}.token"), y_title=t(f"{NS}.head"), value_title=t("common.weight"),
                        selected_row=selected, height=30 * L * h + 120)


@cache_data(max_entries=64, max_bytes=8 * MB)
def flip_spec(key: tuple, other: tuple, lang: str) -> dict:
    es = [example_of(key), example_of(other)]
    rs = [run(key), run(other)]
    L, h = rs[0]["from_it"].shape[:2]
    weights = [from_it_matrix(r)[:, list(e.nouns)] for e, r in zip(es, rs)]
    return to_spec(pc.flip_chart(
        weights, row_labels(L, h), [t(f"{NS}.flip_panel", adj=e.adjective) for e in es],
        [[e.tokens[i] for i in e.nouns] for e in es], [e.label for e in es],
        head_title=t(f"{NS}.head"), weight_title=t(f"{NS}.weight_from_it", it=es[0].tokens[es[0].pronoun]),
        noun_title=t(f"{NS}.noun"), first_title=t(f"{NS}.first_noun", w=es[0].tokens[es[0].nouns[0]]),
        second_title=t(f"{NS}.second_noun", w=es[0].tokens[es[0].nouns[1]]),
        referent_title=t(f"{NS}.is_referent")))


@cache_data(max_entries=64, max_bytes=8 * MB)
def head_spec(key: tuple, layer: int, head: int, lang: str) -> dict:
    e, r = example_of(key), run(key)
    n = len(e.tokens)
    return heatmap_spec(r["weights"][layer, head], list(e.tokens), x_title=t("common.key"),
                        y_title=t("common.query"), value_title=t("common.weight"),
                        selected_row=e.pronoun, title=t(f"{NS}.head_title", head=head_label(layer, head)),
                        height=28 * n + 130)


def fresh_table(f: dict) -> np.ndarray:
    """(L*h, 4): per head, the fraction preferring the referent and the mean weights from "it"."""
    return np.column_stack([f[k].reshape(-1) for k in ("agreement", "referent", "other", "adjective")])


@cache_data(max_entries=16, max_bytes=2 * MB)
def fresh_spec(seed_: int, n_per_lang: int, lang: str) -> dict:
    """The agreement table of the learner's fresh sentences as a heatmap (heads x measures)."""
    f = fresh(seed_, n_per_lang)
    L, h = f["agreement"].shape
    cols = [t(f"{NS}.col_agree"), t(f"{NS}.col_referent"), t(f"{NS}.col_other"), t(f"{NS}.col_adjective")]
    return heatmap_spec(fresh_table(f), row_labels(L, h), cols, title=t(f"{NS}.fresh_title", n=f["n"], seed=seed_),
                        x_title=t(f"{NS}.measure"), y_title=t(f"{NS}.head"), value_title=t(f"{NS}.value"),
                        selectable=False, height=30 * L * h + 120)


def adopt_row_click(chart_key: str, widget_key: str, valid) -> None:
    """A click on a row of the "from it" heatmap becomes the drilled head (before its box is drawn)."""
    adopt_click(chart_key, ROW_SELECTION, "query_pos", widget_key, valid)


def facts_of(e: PronounExample, r: dict, e2: PronounExample, r2: dict, f: dict) -> dict:
    """The numbers the notice, the exercise and the pitfall quote."""
    L, h, n = r["from_it"].shape
    best = resolving_head()
    bl, bh = best["layer"], best["head"]
    a1, b1 = r["from_it"][bl, bh, list(e.nouns)]                       # the resolving head on the two nouns
    a2, b2 = r2["from_it"][bl, bh, list(e2.nouns)]
    first_change = np.abs(r["from_it"][0][:, list(e.nouns)] - r2["from_it"][0][:, list(e2.nouns)]).max()
    agree = f["agreement"]                                             # (L, h) on the fresh sentences
    first = agree[0]
    adj_first = f["adjective"][0]
    return {
        "it": e.tokens[e.pronoun], "answer": r["token"], "p": f"{float(r['probs'][r['answer']]):.3f}",
        "adj": e.adjective, "adj2": e2.adjective, "answer2": r2["token"],
        "p2": f"{float(r2['probs'][r2['answer']]):.3f}",
        "noun1": e.tokens[e.nouns[0]], "noun2": e.tokens[e.nouns[1]],
        "best_head": head_label(bl, bh), "w1": f"{a1:.2f}", "w2": f"{b1:.2f}", "w1_flip": f"{a2:.2f}",
        "w2_flip": f"{b2:.2f}",
        "first_change": f"{float(first_change):.2f}",
        "n": f["n"], "acc": pct(f["accuracy"]),
        "best_frac": pct(float(agree[bl, bh])), "best_value": float(agree[bl, bh]),
        "meta_frac": pct1(best["fraction"]), "meta_n": best["n"],
        "meta_ref": f"{best['referent']:.2f}", "meta_other": f"{best['other']:.3f}",
        "first_best": pct(float(first.max())), "first_head": head_label(0, int(first.argmax())),
        "adj_head": head_label(0, int(adj_first.argmax())), "adj_w": f"{float(adj_first.max()):.2f}",
        "last_min": pct(float(agree[L - 1].min())),
    }


WORDS = ("it", "answer", "adj", "adj2", "answer2", "noun1", "noun2")    # tokens of the sentence: escaped


def quoted(facts: dict) -> dict:
    """The facts for a Markdown text: the sentence's words made inert, numbers as they are."""
    return {k: md_escape(v) if k in WORDS else v for k, v in facts.items()}


def what_to_notice(facts: dict) -> None:
    q = quoted(facts)
    notice([t(f"{NS}.notice_answer", **q), t(f"{NS}.notice_where", **q), t(f"{NS}.notice_flip", **q),
            t(f"{NS}.notice_fresh", **q)])


BUCKETS = (0.9, 0.65, 0.35)    # > 90%, 65-90%, 35-65%, < 35%


def agreement_exercise(facts: dict) -> None:
    value = facts["best_value"]
    answer = next((i for i, edge in enumerate(BUCKETS) if value > edge), len(BUCKETS))
    q = quoted(facts)
    exercise("pr_ex", t(f"{NS}.ex_question", **q),
             [t(f"{NS}.ex_opt_always"), t(f"{NS}.ex_opt_mostly"), t(f"{NS}.ex_opt_coin"), t(f"{NS}.ex_opt_rarely")],
             answer=answer, explanation=t(f"{NS}.ex_explain", **q))


def ablation_facts(record: dict) -> dict | None:
    """The readout ablation in the words of the pitfall: each readout on the shipped seed, and the
    range over all recorded seeds."""
    runs = record.get("runs", [])
    by = {k: [x for x in runs if x["readout"] == k] for k in ("word", "two_way")}
    if not by["word"] or not by["two_way"]:
        return None
    seed = shipped_model().meta["recipe"]["seed"]
    main = {k: next((x for x in v if x["seed"] == seed), v[0]) for k, v in by.items()}
    span = lambda xs: pct(min(xs)) if pct(min(xs)) == pct(max(xs)) else f"{pct(min(xs))}–{pct(max(xs))}"  # noqa: E731
    out = {"seed": main["word"]["seed"], "steps": main["word"]["steps"], "command": record.get("command", ""),
           "seeds": ", ".join(str(x["seed"]) for x in by["two_way"])}
    for k, x in main.items():
        layer, head = x["best_encoder_head"]
        out[f"{k}_en"], out[f"{k}_zh"] = pct(x["accuracy"]["en"]), pct(x["accuracy"]["zh"])
        out[f"{k}_best"] = pct(x["best_encoder_head_fraction"])
        out[f"{k}_head"] = t(f"{NS}.head_label", layer=layer + 1, head=head + 1)
        out[f"{k}_acc_range"] = span([min(r["accuracy"].values()) for r in by[k]] +
                                     [max(r["accuracy"].values()) for r in by[k]])
        out[f"{k}_best_range"] = span([r["best_encoder_head_fraction"] for r in by[k]])
    return out


def readout_pitfall(facts: dict) -> None:
    record = ablation()
    ab = ablation_facts(record) if record else None
    body = t(f"{NS}.pit_body", **{**quoted(facts), **ab}) if ab else t(f"{NS}.pit_body_unrecorded", **quoted(facts))
    pitfall(t(f"{NS}.pit_title"), body)


# ---------------------------------------------------------------------------------------------
# the page
# ---------------------------------------------------------------------------------------------

header(NS)
intuition(NS)
if models.unavailable("pronoun"):
    st.stop()
try:
    resolving_head()
except (ValueError, TypeError, KeyError) as err:       # a readable checkpoint whose meta lacks the evaluation
    problem(f"{NS}.err_no_model", detail=md_escape(str(err)))
    st.stop()
model_card()
st.markdown(lesson(f"{NS}/tutorial"))
formula(FORMULA, t(f"{NS}.formula_caption", V=len(shipped_model().src_vocab)))

st.subheader(t(f"{NS}.sentence_title"))
adopt_url_choice("src", list(SOURCES), lambda o, lg: str(catalog(lg).get(f"{NS}.src_{o}")))
source = st.segmented_control(t(f"{NS}.source"), list(SOURCES), default=SOURCES[0], required=True, key="src",
                              bind="query-params", format_func=lambda o: t(f"{NS}.src_{o}")) or SOURCES[0]
example = picked_sentence() if source == "pick" else typed_sentence()

if example is not None:
    other = contrast_choice(example)
    key, other_key = example_key(example), example_key(other)
    result, result2 = run(key), run(other_key)
    lang = current_lang()
    best = resolving_head()

    left, right = st.columns(2)
    with left:
        answer_box(example, result)
    with right:
        answer_box(other, result2)
    st.caption(t(f"{NS}.answer_caption", V=len(shipped_model().src_vocab)))

    it = example.tokens[example.pronoun]
    st.subheader(t(f"{NS}.from_it_title", it=it))
    L, H = result["from_it"].shape[:2]
    adopt_row_click("pr_from_it", "head", range(L * H))
    default = best["layer"] * H + best["head"]
    with st.columns([1, 2])[0]:
        pick = st.selectbox(t(f"{NS}.pick_head"), list(range(L * H)), index=None, key="head",
                            bind="query-params", format_func=lambda i: head_label(*divmod(i, H)),
                            placeholder=t(f"{NS}.pick_head_auto", head=head_label(best["layer"], best["head"])),
                            help=t(f"{NS}.pick_head_help"))
    chosen = None if pick is None or not 0 <= int(pick) < L * H else int(pick)
    drilled = default if chosen is None else chosen
    show_matrix(from_it_spec(key, lang, drilled), from_it_matrix(result), row_labels(L, H), list(example.tokens),
                key="pr_from_it", file_name="from_it.csv")
    show_chart(from_it_spec(other_key, lang, drilled), key="pr_from_it_other")
    st.caption(t(f"{NS}.from_it_caption", it=it, best=head_label(best["layer"], best["head"]),
                 frac=pct1(best["fraction"]), n=best["n"]))

    st.subheader(t(f"{NS}.flip_title"))
    show_chart(flip_spec(key, other_key, lang), key="pr_flip")
    st.caption(t(f"{NS}.flip_caption", best=head_label(best["layer"], best["head"])))

    layer, head = divmod(drilled, H)
    st.subheader(t(f"{NS}.one_head_title", head=head_label(layer, head), it=it))
    show_matrix(head_spec(key, layer, head, lang), result["weights"][layer, head], list(example.tokens),
                key="pr_head", selectable=False, file_name=f"layer{layer + 1}_head{head + 1}.csv")
    st.caption(t(f"{NS}.one_head_caption", it=it))

    st.subheader(t(f"{NS}.fresh_heading"))
    st.markdown(lesson(f"{NS}/fresh"))
    c1, c2 = st.columns(2)
    with c1:
        seed_ = seed_control("seed")
    with c2:
        n_per_lang = int(st.slider(t(f"{NS}.n_per_lang"), N_MIN, N_MAX, N_DEFAULT, step=10, key="n",
                                   bind="query-params", help=t(f"{NS}.n_help")))
    f = fresh(seed_, n_per_lang)
    show_chart(fresh_spec(seed_, n_per_lang, lang), key="pr_fresh")
    st.caption(t(f"{NS}.fresh_caption", acc=pct(f["accuracy"]), n=f["n"]))
    m1, m2 = st.columns(2)
    m1.metric(t(f"{NS}.best_metric", head=head_label(best["layer"], best["head"]), n=f["n"]),
              pct1(float(f["agreement"][best["layer"], best["head"]])))
    m2.metric(t(f"{NS}.best_metric_meta", n=best["n"]), pct1(best["fraction"]))

    facts = facts_of(example, result, other, result2, f)
    what_to_notice(facts)
    agreement_exercise(facts)
    readout_pitfall(facts)

show_code(PronounResolver.forward, resolve, referent_agreement, build_example, flipped, parse_pronoun_sentence,
          pronoun_rows)

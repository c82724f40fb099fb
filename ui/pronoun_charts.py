"""Charts of the "it" page: the attention from the pronoun to the two nouns, head by head, for two
sentences that differ only in the adjective.

Pure functions (no Streamlit calls): arrays in, ``alt.Chart`` out; every title and label is passed in
already translated.
"""
from __future__ import annotations

from collections.abc import Sequence

import altair as alt
import numpy as np
import pandas as pd

NOUN_COLOURS = ("#e66101", "#3b528b")     # first noun orange, second noun blue (colour-blind safe pair)


def flip_frame(weights: Sequence, heads: Sequence[str], sentences: Sequence[str],
               nouns: Sequence[Sequence[str]], referents: Sequence[int]) -> pd.DataFrame:
    """Long form: one row per (sentence, head, noun). ``weights[s]`` is (heads, 2): the weight from
    the pronoun on the first and second noun in sentence ``s``; ``nouns[s]`` the two nouns' words;
    ``referents[s]`` which of them (0/1) "it" refers to."""
    rows = []
    for s, (w, title, pair, ref) in enumerate(zip(weights, sentences, nouns, referents)):
        w = np.asarray(w, dtype=np.float64)
        for h, head in enumerate(heads):
            for j in range(2):
                rows.append({"sentence_pos": s, "sentence": title, "head_pos": h, "head": head,
                             "noun_pos": j, "noun": f"{j + 1}: {pair[j]}", "weight": float(w[h, j]),
                             "exact": f"{w[h, j]:.6g}", "referent": j == ref})
    return pd.DataFrame(rows)


def flip_chart(weights: Sequence, heads: Sequence[str], sentences: Sequence[str],
               nouns: Sequence[Sequence[str]], referents: Sequence[int], *, head_title: str,
               weight_title: str, noun_title: str, first_title: str, second_title: str,
               referent_title: str, width: int = 330, height: int = 220) -> alt.FacetChart:
    """One panel per sentence: for every head (x) two bars, the weight from "it" on the first noun
    and on the second noun (same 0..1 axis in both panels); the referent's bar is outlined."""
    frame = flip_frame(weights, heads, sentences, nouns, referents)
    frame["slot"] = np.where(frame["noun_pos"] == 0, first_title, second_title)
    frame["role"] = np.where(frame["referent"], referent_title, "")
    colour = alt.Color("slot:N", title=noun_title, legend=alt.Legend(labelLimit=260),
                       scale=alt.Scale(domain=[first_title, second_title], range=list(NOUN_COLOURS)))
    return alt.Chart(frame).mark_bar(strokeWidth=2).encode(
        x=alt.X("head:N", sort=list(heads), title=head_title, axis=alt.Axis(labelAngle=-45, labelOverlap=False)),
        xOffset=alt.XOffset("slot:N", sort=[first_title, second_title]),
        y=alt.Y("weight:Q", title=weight_title, scale=alt.Scale(domain=[0, 1])),
        color=colour,
        stroke=alt.when(alt.datum.referent).then(alt.value("black")).otherwise(alt.value(None)),
        tooltip=[alt.Tooltip("sentence:N", title=""), alt.Tooltip("head:N", title=head_title),
                 alt.Tooltip("noun:N", title=noun_title), alt.Tooltip("exact:N", title=weight_title),
                 alt.Tooltip("role:N", title="")],
    ).properties(width=width, height=height).facet(
        column=alt.Column("sentence:N", sort=list(sentences), title=None,
                          header=alt.Header(labelFontSize=13, labelFontWeight="bold", labelLimit=width + 40)))

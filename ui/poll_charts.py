"""The projector's chart of a class poll: the count of each answer, round by round (pure: no Streamlit calls)."""
from __future__ import annotations

import string

import altair as alt
import pandas as pd

from .charts import chart_kind

LETTERS = string.ascii_uppercase


def votes_frame(counts: dict[int, list[int]], answer: int | None, round_label: str) -> pd.DataFrame:
    """One row per (round, option): its letter, the count, and whether it is the revealed answer."""
    rows = []
    for rnd in sorted(counts):
        for i, n in enumerate(counts[rnd]):
            rows.append({"option": LETTERS[i], "round": round_label.format(n=rnd), "count": int(n),
                         "answer": answer == i})
    return pd.DataFrame(rows, columns=["option", "round", "count", "answer"])


@chart_kind(fill=("height", "domain_max"))
def votes_chart(frame, *, option_title: str, count_title: str, round_title: str, rounds: list[str],
                height: int = 200, domain_max: int = 1) -> alt.Chart:
    """Horizontal bars, one per answer, one colour per round (the latest round darkest); the count at the end
    of each bar; the revealed answer's letter in bold orange."""
    y = alt.Y("option:N", title=option_title, sort=None,
              axis=alt.Axis(labelFontSize=20, titleFontSize=14, labelFontWeight="bold"))
    x = alt.X("count:Q", title=count_title, scale=alt.Scale(domain=[0, domain_max]),
              axis=alt.Axis(tickMinStep=1, format="d", labelFontSize=14, titleFontSize=14))
    y_offset = alt.YOffset("round:N", sort=rounds)
    colour = alt.Color("round:N", title=round_title, sort=rounds,
                       scale=alt.Scale(domain=rounds, range=["#b3cde3", "#6497b1", "#005b96", "#03396c",
                                                             "#011f4b"][-len(rounds):] if rounds else None),
                       legend=alt.Legend(orient="bottom", labelFontSize=14, titleFontSize=14))
    base = alt.Chart(frame).encode(y=y, yOffset=y_offset)
    bars = base.mark_bar().encode(
        x=x, color=colour,
        stroke=alt.when(alt.datum.answer).then(alt.value("#e66101")).otherwise(alt.value(None)),
        strokeWidth=alt.value(3),
        tooltip=[alt.Tooltip("round:N", title=round_title), alt.Tooltip("option:N", title=option_title),
                 alt.Tooltip("count:Q", title=count_title)])
    labels = base.mark_text(align="left", dx=4, fontSize=16).encode(x=x, text="count:Q")
    return alt.layer(bars, labels).properties(height=height, autosize=alt.AutoSizeParams(type="fit-x",
                                                                                      contains="padding"))


def votes(counts: dict[int, list[int]], *, answer: int | None, option_title: str, count_title: str,
          round_title: str, round_label: str) -> dict:
    """The finished spec: every round so far, the answer outlined once revealed."""
    frame = votes_frame(counts, answer, round_label)
    rounds = [round_label.format(n=r) for r in sorted(counts)]
    n_options = max((len(c) for c in counts.values()), default=0)
    top = int(frame["count"].max()) if len(frame) else 0
    return votes_chart(frame, option_title=option_title, count_title=count_title, round_title=round_title,
                       rounds=rounds, height=max(160, n_options * (28 + 18 * len(rounds))),
                       domain_max=max(5, top + max(1, top // 8)))

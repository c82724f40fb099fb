"""Presentation helpers of the alignment page (arrays in, tables out; no Streamlit calls).

The heatmaps and bars come from ``ui.charts``; here are the character labels (a space drawn as
"␣"), the table of where each output character reads most, and the table of how that moves when
the same date is written in several forms. Column titles are passed in already translated.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from attention_core.labs.alignment import FormReading, part_focus

from .charts import unique_labels

SPACE = "␣"


def visible_chars(text: str) -> list[str]:
    """One label per character, a space drawn as "␣" so an axis never shows an empty label."""
    return [SPACE if c == " " else c for c in text]


def unique(labels: Sequence[str]) -> list[str]:
    """Axis labels of ``ui.charts.heatmap`` (repeated characters told apart: "0·1", "0·5")."""
    return unique_labels(list(labels))


def reading_table(weights, output: str, source: str, col_out: str, col_reads: str, col_weight: str) -> pd.DataFrame:
    """For each output character: the input character it weighs most, and that weight."""
    w = np.asarray(weights, dtype=np.float64)
    src = unique(visible_chars(source))
    best = w.argmax(-1) if w.size else np.zeros(0, dtype=int)
    return pd.DataFrame({col_out: unique(list(output)), col_reads: [src[j] for j in best],
                         col_weight: np.round(w.max(-1), 3) if w.size else []})


def moves_table(results: Sequence[FormReading], parts: Mapping[str, Sequence[int]], part_names: Mapping[str, str],
                patterns: Mapping[str, str], col_part: str, col_form: str = "{form}: {text}") -> pd.DataFrame:
    """How the alignment moves between forms: for each part of the answer (year, month, day) and each
    form, the input characters its rows weigh most (``labs.alignment.part_focus``) with the mean peak.
    ``col_form`` titles a form's column (translated: its separator is the language's)."""
    table: dict[str, list[str]] = {col_part: [part_names[k] for k in parts]}
    for r in results:
        name = col_form.format(form=patterns[r.form], text=r.text)
        if len(r.output) != 10:
            table[name] = ["—"] * len(parts)
            continue
        focus = part_focus(r.weights, parts)
        chars = visible_chars(r.text)
        table[name] = [" ".join(chars[j] for j in focus[k][0]) + f"  ({focus[k][1]:.2f})" for k in parts]
    return pd.DataFrame(table)

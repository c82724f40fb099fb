"""The qkv page's widget state: the edited number table, heatmap clicks, the token pickers."""
from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import streamlit as st



def parse_number_table(rows: Sequence[Sequence[object]],
                       limit: float) -> tuple[np.ndarray, list[tuple[int, int]]]:
    """Cells of an edited table -> (float array, [(row, col) of every unusable cell]).

    A cell is unusable when it is empty (None, NaN, ""), not a number ("abc", True), not finite
    (inf), or larger than ``limit`` in magnitude. Unusable cells are 0 in the returned array,
    which is only meant to be used when the list of bad cells is empty.
    """
    n_cols = max((len(r) for r in rows), default=0)
    out = np.zeros((len(rows), n_cols), dtype=np.float64)
    bad: list[tuple[int, int]] = []
    for i, row in enumerate(rows):
        for j in range(n_cols):
            cell = row[j] if j < len(row) else None
            try:
                if cell is None or isinstance(cell, bool) or (isinstance(cell, str) and not cell.strip()):
                    raise ValueError
                value = float(cell)
            except (TypeError, ValueError):
                bad.append((i, j))
                continue
            if not math.isfinite(value) or abs(value) > limit:
                bad.append((i, j))
                continue
            out[i, j] = value
    return out, bad


def clicked_row(chart_keys: Sequence[str]) -> int | None:
    """The query row just clicked on one of these heatmaps (None if no new click since last run)."""
    for chart_key in chart_keys:
        try:
            points = st.session_state[chart_key]["selection"]["row"] or []
        except (KeyError, TypeError, AttributeError):
            continue
        pos = next((int(p["query_pos"]) for p in points if isinstance(p, dict) and "query_pos" in p), None)
        seen = f"_{chart_key}_seen"
        if pos is not None and st.session_state.get(seen) != pos:
            st.session_state[seen] = pos
            return pos
    return None


def pick_token(key: str, label: str, labels: list[str], default: int, clicked: int | None = None) -> int:
    """A select box over the tokens (the URL keeps the token's label); a heatmap click moves it."""
    if clicked is not None and 0 <= clicked < len(labels):
        st.session_state[key] = labels[clicked]
    elif st.session_state.get(key) is not None and st.session_state[key] not in labels:
        st.session_state[key] = labels[default]
    # a value set through st.session_state must not meet a default as well (Streamlit warns about both)
    start = {} if st.session_state.get(key) in labels else {"index": default}
    chosen = st.selectbox(label, labels, key=key, bind="query-params", **start)
    return labels.index(chosen) if chosen in labels else default

"""The qkv page's widget state: the library's editable table of books, heatmap clicks, the token pickers."""
from __future__ import annotations

import math
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np
import pandas as pd
import streamlit as st

from attention_core.labs import qkv as lab

from .anatomy import md_escape, problem
from .i18n import t


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


# ---------------------------------------------------------------------------------------------
# the library tab's editable table of books
# ---------------------------------------------------------------------------------------------

class Books(NamedTuple):
    """The books of the edited table, every cell a usable number."""

    titles: list[str]
    keys: np.ndarray       # (n, len(KEY_AXES)) what the label says
    values: np.ndarray     # (n, len(VALUE_AXES)) what is inside


def _default_books() -> pd.DataFrame:
    numbers = np.hstack(lab.library_arrays())                  # key features, then value features
    return pd.DataFrame({"title": [t(f"qkv.book_{b.id}") for b in lab.LIBRARY],
                         **dict(zip(lab.KEY_AXES + lab.VALUE_AXES, numbers.T))})


def _reset_books() -> None:
    st.session_state["_qkv_books_v"] = st.session_state.get("_qkv_books_v", 0) + 1


def book_table(limit: float) -> pd.DataFrame:
    """The editable table of books (title, key features, value features) and its reset button."""
    # pixel widths that fit a phone's column (96 + 6 x 42 px < 356 px): the number columns are titled k₁ ... v₃
    # (the caption and each title's tooltip name them), so no title is cut and the grid never scrolls sideways
    cols = {"title": st.column_config.TextColumn(t("qkv.l_col_title"), max_chars=60, width=96)}
    names = {}
    for axes, name, symbol, step, form in ((lab.KEY_AXES, "key", "k", 0.1, "%.1f"),
                                           (lab.VALUE_AXES, "value", "v", 0.5, "%.1f")):
        for i, axis in enumerate(axes):
            prefix = "axis" if name == "key" else "vaxis"
            names[f"{symbol}{i + 1}"] = t(f"qkv.{prefix}_{axis}")
            cols[axis] = st.column_config.NumberColumn(f"{symbol}{'₁₂₃'[i]}", min_value=-limit, max_value=limit,
                                                       help=t(f"qkv.l_col_{name}", axis=names[f"{symbol}{i + 1}"]),
                                                       step=step, format=form, width=42)
    st.caption(t("qkv.l_cols_caption", **names))
    version = st.session_state.get("_qkv_books_v", 0)
    edited = st.data_editor(_default_books(), key="books" if version == 0 else f"books{version}",
                            column_config=cols, num_rows="dynamic", hide_index=True, width="stretch")
    st.button(t("qkv.l_reset"), on_click=_reset_books, key="books_reset", icon=":material/restart_alt:",
              type="tertiary")
    return edited


def read_books(edited: pd.DataFrame, limit: float, max_books: int) -> Books | None:
    """The table as numbers; None after a message in the learner's language (no books, unusable cells).
    More than ``max_books`` rows: the first ones are used, with a message."""
    if len(edited) == 0:
        problem("qkv.err_no_books")
        return None
    if len(edited) > max_books:
        problem("qkv.err_many_books", n=len(edited), max=max_books)
        edited = edited.iloc[:max_books]
    titles = [str(x).strip() if isinstance(x, str) and x.strip() else t("qkv.l_untitled", i=i + 1)
              for i, x in enumerate(edited["title"].tolist())]
    columns = list(lab.KEY_AXES) + list(lab.VALUE_AXES)
    numbers, bad = parse_number_table(edited[columns].astype(object).values.tolist(), limit)
    if bad:
        names = {a: t(f"qkv.axis_{a}") for a in lab.KEY_AXES}
        names |= {a: t(f"qkv.vaxis_{a}") for a in lab.VALUE_AXES}
        cells = ", ".join(f"{md_escape(titles[i])} · {names[columns[j]]}" for i, j in bad[:8])
        problem("qkv.err_cells", n=len(bad), cells=cells + (" …" if len(bad) > 8 else ""), limit=f"{limit:g}")
        return None
    return Books(titles, numbers[:, :len(lab.KEY_AXES)], numbers[:, len(lab.KEY_AXES):])

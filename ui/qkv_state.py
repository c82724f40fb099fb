"""The qkv page's edited number table as widget state: cells -> numbers and the unusable cells."""
from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np


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

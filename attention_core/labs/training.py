"""The training page's computations (the live run itself is ``models.recipes.live_run``)."""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np

# ------------------------------------------------------------------------------------------------
# Training live
# ------------------------------------------------------------------------------------------------


def smooth(values: Sequence[float], window: int) -> np.ndarray:
    """Trailing moving average: element i is the mean of values[max(0, i - window + 1) .. i]."""
    x = np.asarray(values, dtype=np.float64)
    if window < 1:
        raise ValueError(f"window must be >= 1, got {window}")
    if x.size == 0:
        return x
    c = np.concatenate([[0.0], np.cumsum(x)])
    i = np.arange(1, x.size + 1)
    lo = np.maximum(0, i - window)
    return (c[i] - c[lo]) / (i - lo)

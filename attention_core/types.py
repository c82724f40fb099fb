"""The one result type every attention function returns."""
from __future__ import annotations

from typing import NamedTuple, Optional

import torch


class AttentionOutput(NamedTuple):
    """``out, w = f(...)`` works as in the tutorials.

    output:  (..., n_q, d_v)
    weights: (..., n_q, n_k), or None where a method never forms them
             (see ``attention_core.efficient.effective_weights``).
    """

    output: torch.Tensor
    weights: Optional[torch.Tensor]

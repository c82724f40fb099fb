"""The training page's computations (the live run itself is ``models.recipes.live_run``)."""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from ..models.tasks import PronounExample
from .alignment import matching_form

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


# ------------------------------------------------------------------------------------------------
# what a run is and what it shows
# ------------------------------------------------------------------------------------------------

class RunSettings(NamedTuple):
    """One training run as the learner set it up (all in the URL): ``probe`` the input watched at every
    snapshot (the typed sentence for "pronoun", whose referent's word ``referent`` is the right answer)."""

    task: str
    attention: bool
    seed: int
    steps: int
    every: int
    probe: str
    referent: str | None = None


@dataclass(frozen=True)
class KeptRun:
    """A finished run kept in the session: its name, per-step losses and learning rates, the snapshots
    (step, output, weights or None) of its probe, and the labels of the snapshot heatmaps (``cols`` the
    probe's characters or tokens, ``rows`` the heads for "pronoun", else None: the output's characters)."""

    settings: RunSettings
    name: str
    losses: list
    lrs: list
    snaps: list
    seconds: float
    capped: bool
    source: str
    cols: list
    rows: list | None
    probe: object

    def with_weights(self) -> list:
        """The snapshots that have weights to draw."""
        return [(s, o, w) for s, o, w in self.snaps if w is not None and len(o)]


def is_right(settings: RunSettings, out: str) -> bool:
    """Reversal: the digits backwards. Dates: the answer is a date that the probe is a supported form of.
    Pronoun: the referent's word."""
    if settings.task == "pronoun":
        return out == settings.referent
    if settings.task == "reverse":
        return out == settings.probe[::-1]
    return matching_form(settings.probe, out) is not None


def peak(w: np.ndarray) -> float:
    """How sharp a snapshot's attention is: the mean over its rows of the largest weight."""
    return float(w.max(-1).mean()) if w.size else float("nan")


class StartingPoint(NamedTuple):
    """The probe through a freshly initialised attention model (step 0): its ``peak`` against ``uniform``
    (1/n); for "pronoun", the mean weight from "it" on the referent and on the other noun."""

    peak: float
    uniform: float
    referent: float = float("nan")
    other: float = float("nan")
    referent_word: str = ""


def starting_point(w: np.ndarray, n: int, probe: PronounExample | None = None) -> StartingPoint:
    start = StartingPoint(peak(w), 1 / max(n, 1))
    if probe is None:
        return start
    return start._replace(referent=float(w[:, probe.referent].mean()),
                          other=float(w[:, probe.nouns[1 - probe.label]].mean()),
                          referent_word=probe.tokens[probe.referent])

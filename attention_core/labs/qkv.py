"""Query, key, value: the ideas of the first tutorial's sections 3-5, run step by step.

1. Attention pooling without learning: Nadaraya-Watson kernel regression (Nadaraya 1964,
   Watson 1964) is attention whose query is x, whose keys are the training inputs x_i and
   whose values are the training targets y_i; the Gaussian kernel's weights are
   softmax(-(x - x_i)^2 / (2 h^2)) over the training points.
2. The library analogy of the first tutorial (3.1): each book has a key (what its label says,
   a few interpretable feature axes) and a value (what is inside); a query is scored against
   every key by a dot product, softmax turns scores into weights, the answer mixes the values.
3. From analogy to tokens (section 5): deterministic token embeddings X, projections W_Q, W_K,
   W_V, then Q K^T, / sqrt(d_k), softmax, x V -- every intermediate kept for a step-through.
4. The three similarity functions of the tutorial's table (additive, dot, scaled dot) on the
   same inputs, with the number of parameters each one adds.

torch + numpy only. Softmax, scores and the additive module come from ``functional`` and
``modules``; nothing here re-implements them.
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
import torch

from ..diagnostics import attention_entropy
from ..functional import dot_scores, masked_softmax, scaled_dot_product_attention, scaled_dot_scores
from ..modules import AdditiveAttention
from ..text import embed_tokens, projection
from ..types import AttentionOutput
from . import seeded
from .seed_bugs import AdditivePairing, additive_pairing_demo

# ---------------------------------------------------------------------------------------------
# 1. Nadaraya-Watson kernel regression = attention pooling with a fixed (Gaussian) similarity
# ---------------------------------------------------------------------------------------------

X_LOW, X_HIGH = 0.0, 5.0


def true_function(x: torch.Tensor) -> torch.Tensor:
    """The curve the noisy training targets come from: 2 sin(x) + x^0.8 (as in d2l.ai, 11.2)."""
    return 2 * torch.sin(x) + x.clamp_min(0) ** 0.8


def kernel_regression_data(n_train: int, noise: float, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """Sorted training inputs x_i ~ U(0, 5) and targets y_i = f(x_i) + N(0, noise^2), both (n_train,)."""
    if n_train < 1:
        raise ValueError(f"need at least one training point, got {n_train}")
    g = torch.Generator().manual_seed(int(seed))
    x = torch.sort(torch.rand(n_train, generator=g) * (X_HIGH - X_LOW) + X_LOW).values
    y = true_function(x) + float(noise) * torch.randn(n_train, generator=g)
    return x, y


def query_grid(n: int) -> torch.Tensor:
    """n evenly spaced query positions covering [0, 5] (ends included)."""
    return torch.linspace(X_LOW, X_HIGH, n)


def gaussian_kernel_scores(x_query: torch.Tensor, x_train: torch.Tensor, bandwidth: float) -> torch.Tensor:
    """Attention scores of the Gaussian kernel, -(x_q - x_i)^2 / (2 h^2): (n_q,) x (n_k,) -> (n_q, n_k)."""
    if not bandwidth > 0:
        raise ValueError(f"the bandwidth h must be > 0, got {bandwidth}")
    diff = x_query.unsqueeze(-1) - x_train.unsqueeze(-2)  # (n_q, n_k)
    return -(diff ** 2) / (2 * float(bandwidth) ** 2)


def nadaraya_watson(x_query: torch.Tensor, x_train: torch.Tensor, y_train: torch.Tensor,
                    bandwidth: float) -> AttentionOutput:
    """f(x) = sum_i softmax_i(-(x - x_i)^2 / (2 h^2)) y_i: output (n_q,), weights (n_q, n_k).

    Query = x, keys = x_i, values = y_i. The softmax over a Gaussian kernel is exactly the
    kernel-weighted average K(x - x_i) / sum_j K(x - x_j) (the normalising constant cancels).
    """
    weights = masked_softmax(gaussian_kernel_scores(x_query, x_train, bandwidth))  # (n_q, n_k)
    return AttentionOutput(weights @ y_train, weights)


def effective_neighbours(weights: torch.Tensor) -> torch.Tensor:
    """1 / sum_i w_i^2 per row: how many training points a query really averages over (1 .. n_k)."""
    return 1.0 / (weights ** 2).sum(dim=-1)


# ---------------------------------------------------------------------------------------------
# 2. The library: keys are what the labels say, values are what is inside
# ---------------------------------------------------------------------------------------------

KEY_AXES = ("science", "cooking", "history")   # what a book's label says (key features)
VALUE_AXES = ("formulas", "recipes", "dates")  # what you carry home from it (value features)


@dataclass(frozen=True)
class Book:
    id: str                      # i18n name of the title: qkv.book_<id>
    key: tuple[float, ...]       # one number per KEY_AXES, 0 = not at all .. 1 = entirely
    value: tuple[float, ...]     # one number per VALUE_AXES, pages of each kind of content


LIBRARY: tuple[Book, ...] = (
    Book("ml", (1.0, 0.0, 0.0), (9.0, 0.0, 1.0)),
    Book("computing_history", (0.5, 0.0, 1.0), (3.0, 0.0, 8.0)),
    Book("kitchen_chemistry", (0.7, 0.8, 0.0), (5.0, 6.0, 1.0)),
    Book("grandma", (0.0, 1.0, 0.1), (0.0, 10.0, 2.0)),
    Book("rome_food", (0.0, 0.6, 0.9), (0.0, 4.0, 7.0)),
    Book("battles", (0.0, 0.0, 1.0), (0.0, 0.0, 10.0)),
)


def library_arrays(books: Sequence[Book] = LIBRARY) -> tuple[np.ndarray, np.ndarray]:
    """Keys (n_books, len(KEY_AXES)) and values (n_books, len(VALUE_AXES)) as float64 arrays."""
    return (np.array([b.key for b in books], dtype=np.float64).reshape(len(books), len(KEY_AXES)),
            np.array([b.value for b in books], dtype=np.float64).reshape(len(books), len(VALUE_AXES)))


@dataclass(frozen=True)
class LibraryResult:
    scores: torch.Tensor         # (n_books,)  q . k_i
    weights: torch.Tensor        # (n_books,)  softmax of the scores
    contributions: torch.Tensor  # (n_books, d_v)  w_i v_i: the parts the answer is mixed from
    output: torch.Tensor         # (d_v,)  sum_i w_i v_i
    cosines: torch.Tensor        # (n_books,)  cos of the angle between q and k_i (0 if either is 0)


def library_attention(query, keys, values) -> LibraryResult:
    """Look a query up in the library: scores q . k_i, weights softmax, answer sum_i w_i v_i.

    query (d_k,), keys (n, d_k), values (n, d_v); arrays or tensors, computed in float64.
    """
    q = torch.as_tensor(np.asarray(query, dtype=np.float64))
    k = torch.as_tensor(np.asarray(keys, dtype=np.float64))
    v = torch.as_tensor(np.asarray(values, dtype=np.float64))
    scores = dot_scores(q[None, :], k)[0]                   # (n,)
    weights = masked_softmax(scores)                         # (n,)
    contributions = weights[:, None] * v                     # (n, d_v)
    norms = q.norm() * k.norm(dim=-1)
    cosines = torch.where(norms > 0, scores / torch.where(norms > 0, norms, torch.ones_like(norms)),
                          torch.zeros_like(scores))
    return LibraryResult(scores, weights, contributions, contributions.sum(dim=0), cosines)


# ---------------------------------------------------------------------------------------------
# 3. From analogy to tokens: every stage of softmax(Q K^T / sqrt(d_k)) V
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class StepThrough:
    x: torch.Tensor        # (n, d_model)  token embeddings
    w_q: torch.Tensor      # (d_model, d_k)
    w_k: torch.Tensor      # (d_model, d_k)
    w_v: torch.Tensor      # (d_model, d_v)
    q: torch.Tensor        # (n, d_k)  X W_Q
    k: torch.Tensor        # (n, d_k)  X W_K
    v: torch.Tensor        # (n, d_v)  X W_V
    scores: torch.Tensor   # (n, n)    Q K^T
    scaled: torch.Tensor   # (n, n)    Q K^T / sqrt(d_k)
    weights: torch.Tensor  # (n, n)    softmax, each row sums to 1
    output: torch.Tensor   # (n, d_v)  weights V

    @property
    def d_k(self) -> int:
        return self.q.shape[-1]


def qkv_step_through(tokens: Sequence[str], d_model: int, d_k: int, d_v: int | None = None,
                     seed: int = 0) -> StepThrough:
    """Single-head self-attention on a sentence with every intermediate kept.

    X = embed_tokens(tokens), Q = X W_Q, K = X W_K, V = X W_V (seeded projections, untrained),
    S = Q K^T, S' = S / sqrt(d_k), A = softmax(S'), O = A V. O equals
    ``scaled_dot_product_attention(Q, K, V).output``.
    """
    d_v = d_k if d_v is None else d_v
    x = embed_tokens(list(tokens), d_model, seed)              # (n, d_model)
    w_q = projection(d_model, d_k, seed, "W_Q")                # (d_model, d_k)
    w_k = projection(d_model, d_k, seed, "W_K")                # (d_model, d_k)
    w_v = projection(d_model, d_v, seed, "W_V")                # (d_model, d_v)
    q, k, v = x @ w_q, x @ w_k, x @ w_v                        # (n, d_k), (n, d_k), (n, d_v)
    scores = dot_scores(q, k)                                  # (n, n)
    scaled = scaled_dot_scores(q, k)                           # (n, n), scale 1/sqrt(d_k)
    weights = masked_softmax(scaled)                           # (n, n)
    return StepThrough(x, w_q, w_k, w_v, q, k, v, scores, scaled, weights, weights @ v)


def neuron_view(q_row: torch.Tensor, k_row: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The element-wise products q_j k_j of one query and one key, and their sum (= the score q . k)."""
    products = q_row * k_row                                   # (d_k,)
    return products, products.sum()


@dataclass(frozen=True)
class NormalisationPitfalls:
    """One sentence's weights computed right and the two wrong ways the tutorials invite."""
    correct: torch.Tensor           # softmax(Q K^T / sqrt(d_k))
    sqrt_d_model: torch.Tensor      # softmax(Q K^T / sqrt(d_model)): the seed's scale; wrong if d_k < d_model
    softmax_twice: torch.Tensor     # softmax(softmax(...)): normalising weights that already sum to 1


def normalisation_pitfalls(st: StepThrough) -> NormalisationPitfalls:
    d_model = st.x.shape[-1]
    return NormalisationPitfalls(
        correct=st.weights,
        sqrt_d_model=masked_softmax(scaled_dot_scores(st.q, st.k, scale=1.0 / math.sqrt(d_model))),
        softmax_twice=masked_softmax(st.weights),
    )


# ---------------------------------------------------------------------------------------------
# 4. The three similarity functions of the tutorial's table, on the same inputs
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SimilarityResult:
    scores: torch.Tensor    # (n_q, n_k)
    weights: torch.Tensor   # (n_q, n_k)
    parameters: int         # parameters the similarity function itself adds


def make_additive(d_q: int, d_k: int, hidden: int, seed: int = 0) -> AdditiveAttention:
    """An ``AdditiveAttention`` initialised by PyTorch's own init under ``seed``, without
    touching the global random state."""
    with seeded(seed):
        return AdditiveAttention(d_q, d_k, hidden)


def compare_similarities(q: torch.Tensor, k: torch.Tensor, hidden: int,
                         seed: int = 0) -> dict[str, SimilarityResult]:
    """Additive v^T tanh(W_q q + W_k k), dot q . k and scaled dot q . k / sqrt(d_k) on the same q, k.

    q (n_q, d_k), k (n_k, d_k). Keys of the result: "additive", "dot", "scaled".
    """
    additive = make_additive(q.shape[-1], k.shape[-1], hidden, seed)
    with torch.no_grad():
        add_scores = additive.scores(q[None], k[None])[0]     # (n_q, n_k)
    dot = dot_scores(q, k)
    scaled = scaled_dot_scores(q, k)
    return {
        "additive": SimilarityResult(add_scores, masked_softmax(add_scores),
                                     sum(p.numel() for p in additive.parameters())),
        "dot": SimilarityResult(dot, masked_softmax(dot), 0),
        "scaled": SimilarityResult(scaled, masked_softmax(scaled), 0),
    }


def additive_score_bound(hidden: int, seed: int, d_q: int, d_k: int) -> float:
    """|v^T tanh(.)| <= sum_j |v_j|: additive scores are bounded whatever the size of q and k."""
    return float(make_additive(d_q, d_k, hidden, seed).v.weight.detach().abs().sum())


def check_against_reference(st: StepThrough) -> float:
    """Largest difference between the step-through's output and the reference SDPA (should be ~1e-7)."""
    ref = scaled_dot_product_attention(st.q, st.k, st.v).output
    return float((ref - st.output).abs().max()) if st.output.numel() else 0.0


# ---------------------------------------------------------------------------------------------
# What the page shows, one named result per tab (plain parameters in, so the page can cache them)
# ---------------------------------------------------------------------------------------------

class KernelLesson(NamedTuple):
    """Kernel regression on a grid of queries, as the kernel tab draws it (numpy arrays)."""
    x: np.ndarray            # (n_train,) training inputs: the keys
    y: np.ndarray            # (n_train,) training targets: the values
    grid: np.ndarray         # (n_grid,) the queries of the heatmap
    weights: np.ndarray      # (n_grid, n_train) attention weights of every grid query
    pred: np.ndarray         # (n_grid,) f(x) at the grid
    curve: np.ndarray        # (n_curve,) a fine grid for the fitted curve
    fit: np.ndarray          # (n_curve,) f(x) on it
    truth: np.ndarray        # (n_curve,) the true function on it
    neighbours: np.ndarray   # (n_grid,) effective number of training points per query
    rmse: float              # of the fit against the truth on the fine grid


def kernel_lesson(n_train: int, noise: float, seed: int, bandwidth: float, n_grid: int,
                  n_curve: int = 201) -> KernelLesson:
    x, y = kernel_regression_data(n_train, noise, seed)
    grid, curve = query_grid(n_grid), query_grid(n_curve)
    pred, w = nadaraya_watson(grid, x, y, bandwidth)
    fit, _ = nadaraya_watson(curve, x, y, bandwidth)
    truth = true_function(curve)
    rmse = float(((fit - truth) ** 2).mean().sqrt())
    return KernelLesson(x.numpy(), y.numpy(), grid.numpy(), w.numpy(), pred.numpy(), curve.numpy(), fit.numpy(),
                        truth.numpy(), effective_neighbours(w).numpy(), rmse)


class SentenceLesson(NamedTuple):
    """The tokens tab: every stage of one head, the two normalisation pitfalls, the check against SDPA."""
    steps: StepThrough
    pitfalls: NormalisationPitfalls
    reference_error: float


def sentence_lesson(tokens: Sequence[str], d_model: int, d_k: int, seed: int) -> SentenceLesson:
    steps = qkv_step_through(tokens, d_model, d_k, seed=seed)
    return SentenceLesson(steps, normalisation_pitfalls(steps), check_against_reference(steps))


class SimilarityStats(NamedTuple):
    scores: np.ndarray       # (n, n)
    weights: np.ndarray      # (n, n)
    parameters: int          # added by the similarity function
    max_weight: float        # mean over queries of the largest weight (1 = one key takes all)
    entropy: float           # mean entropy of a row of weights (nats)


class SimilarityLesson(NamedTuple):
    by_name: dict                # "additive" | "dot" | "scaled" -> SimilarityStats
    additive_bound: float        # |additive score| <= this, whatever q and k
    pairing: AdditivePairing


def similarity_lesson(tokens: Sequence[str], d_model: int, d_k: int, hidden: int, seed: int) -> SimilarityLesson:
    s = qkv_step_through(tokens, d_model, d_k, seed=seed)
    stats = {}
    for name, r in compare_similarities(s.q, s.k, hidden, seed).items():
        w = r.weights.detach()
        stats[name] = SimilarityStats(r.scores.detach().numpy(), w.numpy(), r.parameters,
                                      float(w.max(-1).values.mean()), float(attention_entropy(w).mean()))
    pairing = additive_pairing_demo(make_additive(d_k, d_k, hidden, seed), s.q[None], s.k[None])
    return SimilarityLesson(stats, additive_score_bound(hidden, seed, d_k, d_k), pairing)

"""The tutorials' instructive bugs, reproduced as written, for the pitfall boxes of the pages.

Each ``tutorial_*`` function is the tutorial's code (projections left out where they do not matter),
and each ``*_demo`` runs it next to the fixed version in this library and returns the numbers a page
quotes. Nothing here is used by the library itself.
"""
from __future__ import annotations

import math
from typing import NamedTuple

import torch
import torch.nn.functional as F

from ..efficient import linear_attention
from ..masks import causal_mask, padding_mask
from ..modules import AdditiveAttention
from . import seeded


def _error(err: Exception) -> str:
    return f"{type(err).__name__}: {str(err).splitlines()[0]}"


# ------------------------------------------------------------------ additive attention (first tutorial, 4.1)
def tutorial_additive_scores(module: AdditiveAttention, query: torch.Tensor, keys: torch.Tensor) -> torch.Tensor:
    """The tutorial's ``AdditiveAttention.forward`` up to the scores: with a (b, n_q, d) query it adds
    W_q q (b, n_q, h) and W_k k (b, n_k, h) position by position — query i meets key i only."""
    if query.dim() == 2:
        query = query.unsqueeze(1)
    query_transformed = module.W_query(query)            # (b, n_q, h)
    keys_transformed = module.W_key(keys)                # (b, n_k, h)
    combined = torch.tanh(query_transformed + keys_transformed)   # n_q == n_k: pairs (i, i) only
    return module.v(combined).squeeze(-1)                # (b, n) — one score per position


class AdditivePairing(NamedTuple):
    """The tutorial's additive scores next to this library's on the same sentence."""
    theirs_shape: tuple          # (b, n): one score per position, query i paired with key i only
    ours_shape: tuple            # (b, n, n): every query against every key
    diag_diff: float             # theirs equals our diagonal (largest difference)
    off_diag: int                # the pairs the tutorial never scores
    fewer_queries_error: str | None   # its error when there are fewer queries than keys


def additive_pairing_demo(module: AdditiveAttention, query: torch.Tensor, keys: torch.Tensor) -> AdditivePairing:
    """query (b, n, d_q), keys (b, n, d_k): the tutorial's scores against this library's (b, n, n)."""
    with torch.no_grad():
        theirs = tutorial_additive_scores(module, query, keys)
        ours = module.scores(query, keys)
        diag = torch.diagonal(ours, dim1=-2, dim2=-1)
        error = None
        if query.size(1) > 1:
            try:
                tutorial_additive_scores(module, query[:, :-1], keys)
            except RuntimeError as err:
                error = _error(err)
    return AdditivePairing(tuple(theirs.shape), tuple(ours.shape), float((theirs - diag).abs().max()),
                           int(ours.shape[-1] * ours.shape[-2] - ours.shape[-1]), error)


# ------------------------------------------------------------------ linear attention (first tutorial, 8.2)
def tutorial_linear_attention(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, num_heads: int,
                              mask: torch.Tensor | None = None) -> torch.Tensor:
    """The tutorial's ``LinearAttention.forward`` without its W projections: (b, n, d_model) in and out.
    ``mask`` is accepted and never read; K and V are reshaped with the *query's* length."""
    batch_size, seq_len = query.size(0), query.size(1)
    d_k = query.size(-1) // num_heads
    Q = query.view(batch_size, seq_len, num_heads, d_k)
    K = key.view(batch_size, seq_len, num_heads, d_k)          # fails unless n_k == n_q
    V = value.view(batch_size, seq_len, num_heads, d_k)
    Q = F.elu(Q) + 1
    K = F.elu(K) + 1
    Q, K, V = Q.transpose(1, 2), K.transpose(1, 2), V.transpose(1, 2)
    KV = torch.matmul(K.transpose(-2, -1), V)                  # sums over ALL keys: never causal
    Z = 1 / (torch.matmul(Q, K.sum(dim=2).unsqueeze(-1)) + 1e-6)
    output = torch.matmul(Q, KV) * Z
    return output.transpose(1, 2).contiguous().view(batch_size, seq_len, num_heads * d_k)


class LinearMaskDemo(NamedTuple):
    """The tutorial's causal mask on linear attention against this library's causal linear attention: how far
    position 0 (and every earlier position) moves when only the last token changes."""
    theirs_first: float
    ours_first: float
    theirs_all: float
    ours_all: float
    cross_error: str | None      # its error with n queries and 2n keys
    n: int


def linear_mask_demo(x: torch.Tensor, num_heads: int = 2, seed: int = 0) -> dict:
    """x (1, n, d_model). Change the last token and see whether position 0's output moves.

    The tutorial, given a causal mask, still lets position 0 read the future; this library's
    ``linear_attention(causal=True)`` does not. Also the error of a cross-attention call (n_k != n_q)."""
    n, d = x.size(1), x.size(2)
    g = torch.Generator().manual_seed(seed + 1)
    changed = x.clone()
    changed[:, -1] = torch.randn(d, generator=g) * 3
    mask = causal_mask(n)
    theirs = [tutorial_linear_attention(t, t, t, num_heads, mask=mask) for t in (x, changed)]
    heads = lambda t: t.view(1, n, num_heads, d // num_heads).transpose(1, 2)   # noqa: E731
    ours = [linear_attention(heads(t), heads(t), heads(t), causal=True).output for t in (x, changed)]
    error = None
    try:
        tutorial_linear_attention(x, torch.cat([x, x], 1), torch.cat([x, x], 1), num_heads)
    except RuntimeError as err:
        error = _error(err)
    return LinearMaskDemo(float((theirs[0][:, 0] - theirs[1][:, 0]).abs().max()),
                          float((ours[0][:, :, 0] - ours[1][:, :, 0]).abs().max()),
                          float((theirs[0][:, :-1] - theirs[1][:, :-1]).abs().max()),
                          float((ours[0][:, :, :-1] - ours[1][:, :, :-1]).abs().max()), error, n)


# ------------------------------------------------------------------ block-local attention (second tutorial)
def tutorial_block_local_attention(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, block_size: int,
                                   mask: torch.Tensor | None = None) -> torch.Tensor:
    """The second tutorial's ``SparseAttention.block_local_attention``: the whole mask is applied to every
    block's (block × block) scores."""
    seq_len, depth = query.size(2), query.size(3)
    num_blocks = seq_len // block_size
    outputs = []
    for q_block, k_block, v_block in zip(query.chunk(num_blocks, dim=2), key.chunk(num_blocks, dim=2),
                                         value.chunk(num_blocks, dim=2)):
        scores = torch.matmul(q_block, k_block.transpose(-2, -1)) / math.sqrt(depth)
        if mask is not None:
            scores = scores.masked_fill(mask == 0, -1e9)    # mask: (.., n) or (.., n, n), scores (.., b, b)
        outputs.append(torch.matmul(F.softmax(scores, dim=-1), v_block))
    return torch.cat(outputs, dim=2)


def block_mask_demo(n: int, block: int, d: int = 8, seed: int = 0) -> dict:
    """Run the tutorial's block-local attention on (1, 1, n, d) inputs with a padding mask (last two tokens
    padded) and with a causal mask: the error each raises, or how far the output is from the correct one."""
    g = torch.Generator().manual_seed(seed)
    q, k, v = (torch.randn(1, 1, n, d, generator=g) for _ in range(3))
    pad = padding_mask(torch.tensor([max(1, n - 2)]), n)            # (1, 1, 1, n)
    out = {}
    for name, mask in (("padding", pad), ("causal", causal_mask(n)[None, None])):
        try:
            tutorial_block_local_attention(q, k, v, block, mask.int())
            out[name] = None
        except RuntimeError as err:
            out[name] = _error(err)
    return out


# ------------------------------------------------------------------ the trainer (second tutorial)
class LossOnStates(NamedTuple):
    """The tutorial's loss on raw encoder states, and the fix with an output head."""
    states: tuple                # (b, n, d_model)
    targets: tuple               # (b, n)
    error: str | None            # what CrossEntropyLoss says
    fixed_loss: float            # with an output head (b, n, vocab)
    chance: float                # log(vocab)
    logits: tuple


def tutorial_loss_on_encoder_states(batch: int = 2, n: int = 10, d_model: int = 64, vocab: int = 100,
                                    seed: int = 0) -> LossOnStates:
    """``loss = criterion(outputs, targets)`` with the encoder's raw states (b, n, d_model) as logits and
    token targets (b, n): CrossEntropyLoss reads dim 1 — the positions — as the classes."""
    g = torch.Generator().manual_seed(seed)
    states = torch.randn(batch, n, d_model, generator=g)
    targets = torch.randint(0, vocab, (batch, n), generator=g)
    criterion = torch.nn.CrossEntropyLoss()
    try:
        criterion(states, targets)
        error = None
    except (RuntimeError, ValueError) as err:
        error = _error(err)
    with seeded(seed):
        head = torch.nn.Linear(d_model, vocab)
    logits = head(states)                                  # (b, n, vocab): what an output head gives
    fixed = float(criterion(logits.reshape(-1, vocab), targets.reshape(-1)).detach())
    return LossOnStates((batch, n, d_model), (batch, n), error, fixed, math.log(vocab), (batch, n, vocab))


def weight_decay_effect(optimizer: str, grad: float, *, steps: int = 100, lr: float = 1e-3,
                        weight_decay: float = 0.01, w0: float = 1.0) -> float:
    """How much weight decay moves one weight ``w0`` in ``steps`` steps under a constant loss gradient
    ``grad``: w(no decay) - w(decay), for "adam" (L2 added to the gradient, then normalised) or "adamw"
    (decoupled: w -= lr * wd * w).

    The two update rules written out (Kingma & Ba 2015, Algorithm 1; Loshchilov & Hutter 2019, Algorithm 2),
    with the betas and eps of the tutorial's optimizer; ``torch.optim.Adam`` and ``AdamW`` compute the same
    numbers (tests/test_seed_labs.py checks it), but building a torch optimizer imports torch's compiler
    (about 70 MB of server memory) for a table of eight numbers."""
    if optimizer not in ("adam", "adamw"):
        raise ValueError(f"optimizer must be 'adam' or 'adamw', not {optimizer!r}")
    beta1, beta2, eps = 0.9, 0.98, 1e-9
    final = []
    for wd in (0.0, weight_decay):
        w, m, v = float(w0), 0.0, 0.0
        for step in range(1, steps + 1):
            if optimizer == "adam":
                g = grad + wd * w                                     # Adam: L2 decay enters the gradient ...
            else:
                g = grad
                w -= lr * wd * w                                      # ... AdamW: decay applied to w directly
            m = beta1 * m + (1 - beta1) * g
            v = beta2 * v + (1 - beta2) * g * g
            m_hat, v_hat = m / (1 - beta1 ** step), v / (1 - beta2 ** step)
            w -= lr * m_hat / (math.sqrt(v_hat) + eps)                # ... and is divided by sqrt(v) with it
        final.append(w)
    return final[0] - final[1]

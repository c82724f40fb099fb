"""Performance tips of the first tutorial (section 10.2), measured on a CPU.

Gradient checkpointing: autograd keeps, for the backward pass, the tensors each operation saves
(inputs of matmuls, softmax outputs, dropout masks ...). ``torch.utils.checkpoint`` keeps only the
input of a checkpointed block and recomputes the block's forward during backward: less memory,
more compute. The memory is measured exactly with ``torch.autograd.graph.saved_tensors_hooks``
(the bytes of every distinct storage autograd saves), which is deterministic, unlike the RSS.

Mixed precision: bfloat16 / float16 halve the bytes of every tensor but round more coarsely. The
error of attention in each recipe is measured against a float64 oracle.
"""
from __future__ import annotations

from typing import NamedTuple

import torch
from torch.utils.checkpoint import checkpoint

from .functional import scaled_dot_product_attention
from .transformer import TransformerEncoder

VOCAB = 64


class SavedTensors(NamedTuple):
    bytes: int      # distinct storages saved for backward (a tensor saved twice counts once)
    count: int      # save events (how many times autograd asked to keep a tensor)


def saved_tensor_bytes(fn) -> tuple[object, SavedTensors]:
    """Run ``fn()`` and measure what autograd saves for the backward pass: (result, SavedTensors)."""
    storages: dict[tuple[int, int], int] = {}
    events = 0

    def pack(x: torch.Tensor) -> torch.Tensor:
        nonlocal events
        events += 1
        s = x.untyped_storage()
        storages[(s.data_ptr(), s.nbytes())] = s.nbytes()
        return x

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda x: x):
        out = fn()
    return out, SavedTensors(sum(storages.values()), events)


def make_encoder(num_layers: int, d_model: int = 64, num_heads: int = 4, d_ff: int = 256,
                 seed: int = 0) -> TransformerEncoder:
    """A small post-LN encoder (dropout 0, so the two runs below compute the same numbers)."""
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        return TransformerEncoder(VOCAB, d_model, num_layers, num_heads, d_ff, dropout=0.0)


def run_encoder(model: TransformerEncoder, x: torch.Tensor, *, use_checkpoint: bool) -> torch.Tensor:
    """The encoder's layers on embeddings ``x`` (b, n, d), each layer checkpointed or not."""
    h = model._prepare(x)
    for layer in model.layers:
        if use_checkpoint:
            h = checkpoint(lambda z, layer=layer: layer(z).output, h, use_reentrant=False)
        else:
            h = layer(h).output
    return h


class CheckpointReport(NamedTuple):
    plain_bytes: int            # saved for backward, no checkpointing
    ckpt_bytes: int             # saved for backward, every layer checkpointed
    layer_bytes: int            # one layer's saved tensors (recomputed, one layer at a time, in backward)
    plain_forwards: int         # layer forward calls during forward + backward
    ckpt_forwards: int
    grad_max_diff: float        # max |grad_plain - grad_ckpt| over the input and every parameter
    plain_count: int            # save events
    ckpt_count: int


def checkpoint_report(n: int, num_layers: int, *, batch: int = 1, d_model: int = 64, seed: int = 0,
                      autocast: bool = False) -> CheckpointReport:
    """Saved-tensor bytes and layer forward calls of the encoder with and without checkpointing.

    ``autocast``: run under ``torch.autocast("cpu", dtype=torch.bfloat16)`` (mixed precision)."""
    model = make_encoder(num_layers, d_model, seed=seed)
    calls = [0]
    hooks = [layer.register_forward_pre_hook(lambda *_: calls.__setitem__(0, calls[0] + 1))
             for layer in model.layers]
    g = torch.Generator().manual_seed(seed)
    tokens = torch.randint(0, VOCAB, (batch, n), generator=g)
    results = []
    for use in (False, True):
        model.zero_grad(set_to_none=True)
        x = model.embed(tokens).detach().requires_grad_(True)
        calls[0] = 0
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
            out, saved = saved_tensor_bytes(lambda: run_encoder(model, x, use_checkpoint=use))
        # a fixed, position-dependent loss so every gradient is non-trivial
        weights = torch.linspace(-1.0, 1.0, out.numel(), dtype=torch.float32).view_as(out)
        (out.float() * weights).sum().backward()
        grads = [x.grad.clone()] + [p.grad.clone() for p in model.parameters() if p.grad is not None]
        results.append((saved, calls[0], grads))
    for h in hooks:
        h.remove()
    one = make_encoder(1, d_model, seed=seed)
    x1 = one.embed(tokens).detach().requires_grad_(True)
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
        _, layer_saved = saved_tensor_bytes(lambda: one.layers[0](x1).output)
    diff = max(float((a - b).abs().max()) for a, b in zip(results[0][2], results[1][2]))
    (plain, plain_calls, _), (ckpt, ckpt_calls, _) = results
    return CheckpointReport(plain.bytes, ckpt.bytes, layer_saved.bytes, plain_calls, ckpt_calls, diff,
                            plain.count, ckpt.count)


# ------------------------------------------------------------------ mixed precision
RECIPES = ("float32", "bfloat16", "bf16_inputs", "float16")


def attention_in(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, recipe: str) -> torch.Tensor:
    """softmax(QK^T/sqrt d) V computed in a precision recipe; returns (output, weights) as float64.

    "float32" / "bfloat16" / "float16": every tensor and every operation in that type.
    "bf16_inputs": Q, K, V stored in bfloat16 (half the bytes), everything computed in float32 —
    what autocast does for softmax, which it keeps in float32."""
    if recipe == "bf16_inputs":
        q, k, v = (x.to(torch.bfloat16).to(torch.float32) for x in (q, k, v))
    else:
        dtype = getattr(torch, recipe)
        q, k, v = (x.to(dtype) for x in (q, k, v))
    out, w = scaled_dot_product_attention(q, k, v)
    return out.double(), w.double()


class PrecisionRow(NamedTuple):
    recipe: str
    bytes_per_number: int
    weight_error: float      # max |w - w_oracle|
    output_error: float      # max |out - out_oracle|
    eps: float               # machine epsilon of the storage type
    max_value: float         # largest finite number of the storage type


def precision_inputs(n: int, d: int, gain: float, seed: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Float64 q, k (scaled by ``gain``: larger scores, sharper softmax) and v, shape (1, 1, n, d)."""
    g = torch.Generator().manual_seed(seed)
    q, k, v = (torch.randn(1, 1, n, d, generator=g, dtype=torch.float64) for _ in range(3))
    return q * gain, k * gain, v


def precision_table(n: int, d: int, gain: float, seed: int) -> list[PrecisionRow]:
    """Error of each recipe against the float64 oracle on the same inputs."""
    q, k, v = precision_inputs(n, d, gain, seed)
    ref_out, ref_w = scaled_dot_product_attention(q, k, v)
    rows = []
    for recipe in RECIPES:
        out, w = attention_in(q, k, v, recipe)
        store = torch.bfloat16 if recipe == "bf16_inputs" else getattr(torch, recipe)
        info = torch.finfo(store)
        rows.append(PrecisionRow(recipe, info.bits // 8, float((w - ref_w).abs().max()),
                                 float((out - ref_out).abs().max()), float(info.eps), float(info.max)))
    return rows


def largest_score(n: int, d: int, gain: float, seed: int) -> float:
    """max |QK^T / sqrt(d)| of the precision inputs (what the softmax exponentiates)."""
    q, k, _ = precision_inputs(n, d, gain, seed)
    return float((q @ k.transpose(-2, -1) / d ** 0.5).abs().max())


"""Why self-attention connects any two positions in one step (Vaswani et al. 2017, Table 1; first
tutorial, section 5.1), measured as path lengths on the connection graph of each layer type.

The paper's measure is the path length: how many steps a signal takes from position j to position i. One
step moves information from j to i when ``connections[i, j]`` is True:

- self-attention: every pair, in one layer;
- recurrent: one time step carries the state from position t - 1 to t (and, read in both directions,
  t + 1 to t). A single RNN layer already links position 0 to position n - 1, through n - 1 time steps
  run one after another: here a step is a time step, not a layer;
- convolution with a contiguous kernel of width k: |i - j| <= (k - 1) // 2 per layer;
- restricted self-attention with a neighbourhood r: |i - j| <= r per layer.

Chaining steps multiplies the graphs, so the path length between i and j is the shortest path length in
the graph (time steps for the RNN, stacked layers for the convolution and restricted self-attention).
``path_lengths`` finds it by repeated boolean matrix products.
"""
from __future__ import annotations

import math
from typing import NamedTuple

import torch

KINDS = ("self_attention", "recurrent", "convolution", "restricted")


def layer_connections(n: int, kind: str, *, kernel: int = 3, neighbourhood: int = 2) -> torch.Tensor:
    """(n, n) bool: True where one step of ``kind`` (a layer; a time step for ``recurrent``) moves
    information from key j to position i."""
    dist = (torch.arange(n)[:, None] - torch.arange(n)[None, :]).abs()
    if kind == "self_attention":
        return torch.ones(n, n, dtype=torch.bool)
    if kind == "recurrent":
        return dist <= 1
    if kind == "convolution":
        if kernel < 3:
            raise ValueError(f"kernel must be >= 3 to reach a neighbour, got {kernel}")
        return dist <= (kernel - 1) // 2
    if kind == "restricted":
        if neighbourhood < 1:
            raise ValueError(f"neighbourhood must be >= 1, got {neighbourhood}")
        return dist <= neighbourhood
    raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")


def path_lengths(connections: torch.Tensor) -> torch.Tensor:
    """(n, n) long: the path length, the fewest steps after which position i has seen position j (0 on the diagonal);
    -1 where j never reaches i. Breadth-first by repeated boolean matrix products."""
    n = connections.size(0)
    step = connections.to(torch.float32)
    reach = torch.eye(n, dtype=torch.bool)
    lengths = torch.where(reach, 0, -1)
    for layers in range(1, n):
        reach = (reach.to(torch.float32) @ step.T > 0) | reach      # (R A^T)[i, j]: j reaches i in `layers`
        lengths = torch.where(reach & (lengths < 0), layers, lengths)
        if bool(reach.all()):
            break
    return lengths


class Table1Row(NamedTuple):
    kind: str
    ops_per_layer: int         # multiply-adds per layer at this n, d (the paper's complexity, constants 1)
    sequential: int            # operations that must run one after another inside a layer
    max_path: int              # longest shortest path, measured on the graph
    steps: int                 # path length between the two chosen positions, measured on the graph


def table1(n: int, d: int, i: int, j: int, *, kernel: int = 3, neighbourhood: int = 2) -> list[Table1Row]:
    """The Transformer paper's Table 1 evaluated at n, d (complexity: n²d, n d², k n d², r n d; sequential
    operations: 1, n, 1, 1) with path lengths measured on each layer type's connection graph."""
    ops = {"self_attention": n * n * d, "recurrent": n * d * d, "convolution": kernel * n * d * d,
           "restricted": neighbourhood * n * d}
    rows = []
    for kind in KINDS:
        lengths = path_lengths(layer_connections(n, kind, kernel=kernel, neighbourhood=neighbourhood))
        rows.append(Table1Row(kind, ops[kind], n if kind == "recurrent" else 1, int(lengths.max()),
                              int(lengths[i, j])))
    return rows


def closed_form_steps(distance: int, kind: str, *, kernel: int = 3, neighbourhood: int = 2) -> int:
    """Path length (steps) to cover ``distance`` positions: 1 (any distance > 0), distance, ⌈distance / ((k-1)/2)⌉,
    ⌈distance / r⌉ — the oracle of ``path_lengths``."""
    if distance == 0:
        return 0
    reach = {"self_attention": math.inf, "recurrent": 1, "convolution": (kernel - 1) // 2,
             "restricted": neighbourhood}[kind]
    return 1 if reach == math.inf else math.ceil(distance / reach)

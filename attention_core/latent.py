"""Multi-head latent attention (MLA, DeepSeek-V2: arXiv 2405.04434, section 2.1), with a latent KV cache.

GQA and MQA shrink the KV cache by keeping fewer K/V heads. MLA keeps every head but caches, for each token,
one small latent vector c from which all heads' keys and values are reconstructed (low-rank joint compression,
section 2.1.2). The equations of the paper, with h_t the token's input (d_model), n_h heads of size d_h:

    (9)   c_t^KV = W^DKV h_t                       down-projection to the latent, size d_c << n_h d_h
    (10)  k_t^C  = W^UK c_t^KV                     per-head keys   [k_t,1^C; ...; k_t,n_h^C]   (up-projection)
    (11)  v_t^C  = W^UV c_t^KV                     per-head values [v_t,1^C; ...; v_t,n_h^C]   (up-projection)
    (12)  c_t^Q  = W^DQ h_t                        (optional) queries compressed too, to save activations
    (13)  q_t^C  = W^UQ c_t^Q                      (without query compression: q_t^C = W^Q h_t)
    (14)  q_t^R  = RoPE(W^QR c_t^Q)                per-head rotary queries, size d_h^R each
    (15)  k_t^R  = RoPE(W^KR h_t)                  ONE rotary key of size d_h^R, shared by all heads
    (16)  q_t,i  = [q_t,i^C; q_t,i^R]
    (17)  k_t,i  = [k_t,i^C; k_t^R]
    (18)  o_t,i  = sum_{j<=t} softmax_j(q_t,i . k_j,i / sqrt(d_h + d_h^R)) v_j,i^C
    (19)  u_t    = W^O [o_t,1; ...; o_t,n_h]

Only c_t^KV and k_t^R are cached: (d_c + d_h^R) numbers per token and layer, against 2 n_h d_h for MHA.

Why the up-projections need not run at inference (section 2.1.2, "absorbed"): for head i,
    q_t,i^C . k_j,i^C = (W_i^Q h_t)^T (W_i^UK c_j) = (W_i^UK^T W_i^Q h_t)^T c_j
so the query can be mapped once into the latent space (W_i^UK folded into W^Q) and scored against the cached c_j
directly; and
    W^O [.. sum_j a_ij W_i^UV c_j ..] = sum_i (W_i^O W_i^UV) (sum_j a_ij c_j)
so W^UV folds into W^O and the weighted sum runs over the cached c_j. Rotary positions would sit between q and
k^C (a rotation that depends on t - j) and break the first identity: that is why RoPE gets its own small
decoupled q^R, k^R (section 2.1.3) instead of rotating k^C.

Shapes: b batch, n new tokens, t tokens in the cache, h heads, d_head (d_h), d_rope (d_h^R), d_latent (d_c).
"""
from __future__ import annotations

import math

import torch
from torch import nn

from .functional import masked_softmax
from .modules import HeadDivisibilityError
from .positional import rotary_embedding
from .types import AttentionOutput


class LatentCache:
    """What MLA keeps per layer for every token seen: the latent ``c`` (b, t, d_latent) and the shared rotated key
    ``k_rope`` (b, t, d_rope), or None while empty; ``len(cache) == t``."""

    def __init__(self) -> None:
        self.c: torch.Tensor | None = None
        self.k_rope: torch.Tensor | None = None

    def __len__(self) -> int:
        return 0 if self.c is None else self.c.size(-2)

    def append(self, c: torch.Tensor, k_rope: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Add the new tokens' c (b, n, d_latent) and k_rope (b, n, d_rope); return all of them."""
        if self.c is None:
            self.c, self.k_rope = c, k_rope
        else:
            self.c = torch.cat((self.c, c), dim=-2)
            self.k_rope = torch.cat((self.k_rope, k_rope), dim=-2)
        return self.c, self.k_rope

    def nbytes(self) -> int:
        """Memory held: b x t x (d_latent + d_rope) x bytes per element."""
        return 0 if self.c is None else self.c.nbytes + self.k_rope.nbytes


class MultiHeadLatentAttention(nn.Module):
    """Causal MLA (equations 9-19 above) with an optional latent cache.

    ``forward(x, cache)`` is the explicit computation: the per-head keys and values are rebuilt from the latents
    (10, 11); ``absorbed(x, cache)`` never forms them: W^UK is folded into the queries and W^UV into W^O, and
    attention runs on the cached latents. Both return the same ``AttentionOutput(output (b, n, d_model),
    weights (b, h, n, t))``; with a cache, ``x`` holds only the new tokens.
    ``d_q_latent`` (None: no query compression) is d_c' of (12); ``d_rope = 0`` drops the decoupled RoPE part.
    """

    def __init__(self, d_model: int, num_heads: int, d_latent: int, *, d_head: int | None = None,
                 d_rope: int = 0, d_q_latent: int | None = None, rope_base: float = 10000.0):
        super().__init__()
        if num_heads < 1 or (d_head is None and d_model % num_heads != 0):
            raise HeadDivisibilityError(d_model, num_heads)
        if d_latent < 1:
            raise ValueError(f"d_latent must be >= 1, got {d_latent}")
        if d_rope < 0 or d_rope % 2:
            raise ValueError(f"RoPE rotates pairs of dimensions: d_rope = {d_rope} must be even and >= 0")
        self.d_model, self.num_heads, self.d_latent, self.d_rope = d_model, num_heads, d_latent, d_rope
        self.d_head = d_model // num_heads if d_head is None else d_head
        self.rope_base = rope_base
        h, dh = num_heads, self.d_head
        self.W_DKV = nn.Linear(d_model, d_latent, bias=False)                        # (9)
        self.W_UK = nn.Parameter(torch.randn(h, dh, d_latent) / math.sqrt(d_latent))  # (10) one (d_h, d_c) per head
        self.W_UV = nn.Parameter(torch.randn(h, dh, d_latent) / math.sqrt(d_latent))  # (11)
        if d_q_latent is None:
            self.W_DQ = None
            self.W_Q = nn.Linear(d_model, h * dh, bias=False)                         # q^C = W^Q h
            q_in = d_model
        else:
            self.W_DQ = nn.Linear(d_model, d_q_latent, bias=False)                    # (12)
            self.W_Q = nn.Linear(d_q_latent, h * dh, bias=False)                      # (13) W^UQ
            q_in = d_q_latent
        self.W_QR = nn.Linear(q_in, h * d_rope, bias=False) if d_rope else None       # (14)
        self.W_KR = nn.Linear(d_model, d_rope, bias=False) if d_rope else None        # (15)
        self.W_O = nn.Linear(h * dh, d_model, bias=False)                             # (19)

    @property
    def scale(self) -> float:
        """1 / sqrt(d_h + d_h^R), equation (18)."""
        return 1.0 / math.sqrt(self.d_head + self.d_rope)

    def cache_bytes_per_token(self, dtype: torch.dtype = torch.float32) -> int:
        """(d_c + d_h^R) x bytes: what each token adds to this layer's latent cache."""
        return (self.d_latent + self.d_rope) * torch.empty(0, dtype=dtype).element_size()

    # ------------------------------------------------------------------ the shared parts
    def _queries(self, x: torch.Tensor, past: int) -> tuple[torch.Tensor, torch.Tensor | None]:
        """q^C (b, h, n, d_head) and the rotated q^R (b, h, n, d_rope) or None, equations (12)-(14)."""
        b, n, _ = x.shape
        cq = x if self.W_DQ is None else self.W_DQ(x)
        q = self.W_Q(cq).view(b, n, self.num_heads, self.d_head).transpose(1, 2)
        if not self.d_rope:
            return q, None
        qr = self.W_QR(cq).view(b, n, self.num_heads, self.d_rope).transpose(1, 2)
        return q, rotary_embedding(qr, torch.arange(past, past + n), self.rope_base)

    def _latents(self, x: torch.Tensor, past: int, cache: LatentCache | None):
        """c (b, t, d_latent) and the rotated shared k^R (b, t, d_rope), equations (9) and (15): the new tokens'
        appended to the cache if there is one."""
        n = x.size(1)
        c = self.W_DKV(x)
        kr = (rotary_embedding(self.W_KR(x), torch.arange(past, past + n), self.rope_base) if self.d_rope
              else x.new_zeros(x.size(0), n, 0))
        return cache.append(c, kr) if cache is not None else (c, kr)

    def _attend(self, scores: torch.Tensor, past: int) -> torch.Tensor:
        """Causal softmax of scores (b, h, n, t)."""
        n, t = scores.shape[-2:]
        mask = torch.arange(t)[None, :] <= torch.arange(past, past + n)[:, None]
        return masked_softmax(scores, mask)

    # ------------------------------------------------------------------ explicit: rebuild K and V (10, 11)
    def forward(self, x: torch.Tensor, cache: LatentCache | None = None) -> AttentionOutput:
        """x (b, n, d_model): the whole sequence, or with a cache only the new tokens (equations 9-19)."""
        b, n, _ = x.shape
        past = 0 if cache is None else len(cache)
        q, qr = self._queries(x, past)                                   # (b, h, n, d_head)
        c, kr = self._latents(x, past, cache)                            # (b, t, d_c), (b, t, d_rope)
        k = torch.einsum("hdc,btc->bhtd", self.W_UK, c)                  # (10): (b, h, t, d_head)
        v = torch.einsum("hdc,btc->bhtd", self.W_UV, c)                  # (11)
        scores = q @ k.transpose(-2, -1)                                 # q^C . k^C
        if qr is not None:
            scores = scores + qr @ kr.unsqueeze(1).transpose(-2, -1)     # + q^R . k^R, (16)-(17)
        weights = self._attend(scores * self.scale, past)                # (18)
        o = (weights @ v).transpose(1, 2).reshape(b, n, self.num_heads * self.d_head)
        return AttentionOutput(self.W_O(o), weights)                     # (19)

    # ------------------------------------------------------------------ absorbed: attention on the latents only
    def absorbed_weights(self) -> tuple[torch.Tensor, torch.Tensor]:
        """W^UK folded into the query map and W^UV into W^O:
        q-side (h, d_c, q_in) = W_i^UK^T W_i^Q, out-side (d_model, h, d_c) = W_i^O W_i^UV."""
        wq = self.W_Q.weight.view(self.num_heads, self.d_head, -1)                 # (h, d_head, q_in)
        wo = self.W_O.weight.view(self.d_model, self.num_heads, self.d_head)       # (d_model, h, d_head)
        return (torch.einsum("hdc,hdi->hci", self.W_UK, wq),
                torch.einsum("mhd,hdc->mhc", wo, self.W_UV))

    def absorbed(self, x: torch.Tensor, cache: LatentCache | None = None) -> AttentionOutput:
        """The same output as ``forward``, computed from the latents alone: no per-head K or V is ever formed,
        so a decoding step needs only the cached c and k^R."""
        b, n, _ = x.shape
        past = 0 if cache is None else len(cache)
        q_side, out_side = self.absorbed_weights()
        cq = x if self.W_DQ is None else self.W_DQ(x)
        q_lat = torch.einsum("hci,bni->bhnc", q_side, cq)                # (b, h, n, d_c): queries in latent space
        c, kr = self._latents(x, past, cache)
        scores = q_lat @ c.unsqueeze(1).transpose(-2, -1)                # (b, h, n, t): scored against c itself
        if self.d_rope:
            qr = self._queries(x, past)[1]
            scores = scores + qr @ kr.unsqueeze(1).transpose(-2, -1)
        weights = self._attend(scores * self.scale, past)
        mixed = weights @ c.unsqueeze(1)                                 # (b, h, n, d_c): weighted latents
        return AttentionOutput(torch.einsum("mhc,bhnc->bnm", out_side, mixed), weights)

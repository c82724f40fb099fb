"""The encoder-block page's experiments: the same stack in post-LN and pre-LN, activation scale per
layer, dropout on the attention weights in train vs eval mode, and the second tutorial's double
residual.

Sources: section 9 of the first tutorial (post-LN layer, ReLU FFN); the second tutorial's
``PositionWiseFFN`` / ``TransformerEncoderLayer`` / ``TransformerEncoder`` (GELU, its FFN's own
residual + LayerNorm, a final LayerNorm always). Xiong et al. (2020), "On Layer Normalization in the
Transformer Architecture", for why pre-LN's residual stream grows with depth.

Shapes: (batch, seq, d_model) in, attention weights (batch, heads, n, n). Everything here runs in
eval mode unless said otherwise, and never touches the global random state (``labs.seeded``).
"""
from __future__ import annotations

import copy
from typing import NamedTuple

import numpy as np
import torch
from torch import nn

from ..analysis import attention_rollout
from ..modules import MultiHeadAttention
from ..transformer import PositionWiseFFN, TransformerEncoder, TransformerEncoderLayer
from ..types import AttentionOutput
from . import seeded

VARIANTS = ("post", "pre")   # post-LN (first tutorial, Vaswani et al.), pre-LN (Xiong et al., GPT-2)
FFN_RATIO = 4                # d_ff = 4 d_model in both tutorials (512 -> 2048)


def rms(x: torch.Tensor, dim: int | None = None) -> torch.Tensor:
    """Root mean square sqrt(mean(x^2)), over ``dim`` (all entries if None): the activation scale.

    A LayerNorm output (default affine parameters) has RMS 1 per position, up to eps.
    """
    if dim is None:
        return x.pow(2).mean().sqrt()
    return x.pow(2).mean(dim).sqrt()


def encoder_for(variant: str, d_model: int, num_heads: int, num_layers: int, activation: str = "relu",
                seed: int = 0, max_len: int = 512) -> TransformerEncoder:
    """A freshly initialised (untrained) encoder in eval mode, dropout 0, d_ff = 4 d_model.

    The weights depend on (d_model, num_heads, num_layers, activation, seed) only, not on the
    variant: post-LN and pre-LN layers have the same parameters and consume the random stream in
    the same order, so the two variants can be compared weight for weight. The global random state
    is left untouched.
    """
    if variant not in VARIANTS:
        raise ValueError(f"variant must be one of {VARIANTS}, got {variant!r}")
    with seeded(seed):
        enc = TransformerEncoder(1, d_model=d_model, num_layers=num_layers, num_heads=num_heads,
                                 d_ff=FFN_RATIO * d_model, dropout=0.0, max_len=max_len,
                                 norm_first=variant == "pre", activation=activation)
    return enc.eval()


def residual_stream_rms(embeddings: torch.Tensor, layer_outputs: list[torch.Tensor]) -> torch.Tensor:
    """RMS of what flows between layers: [input of layer 1, output of layer 1, ..., of layer L], (L+1,).

    Post-LN: every layer ends with a LayerNorm, so the values after layer 1 are 1.
    Pre-LN: the stream is never normalised; each layer adds its sublayers' outputs, so it grows.
    """
    return torch.stack([rms(embeddings)] + [rms(y) for y in layer_outputs])


def final_layernorm_gap(x: torch.Tensor, eps: float = 1e-5) -> torch.Tensor:
    """max |LN(x) - x| for a fresh LayerNorm (gamma 1, beta 0): what a final LayerNorm changes.

    On a post-LN stack's output (already normalised by the last layer) it is ~eps-sized: the
    second tutorial's unconditional final LayerNorm is a no-op at initialisation and only a
    redundant affine map after training. On a pre-LN stack it rescales the grown stream.
    """
    return (nn.functional.layer_norm(x, x.shape[-1:], eps=eps) - x).abs().max()


# ---------------------------------------------------------------------------------------------
# dropout on the attention weights
# ---------------------------------------------------------------------------------------------


class DropoutView(NamedTuple):
    """eval_weights, train_weights: (b, h, n, n); keep: bool (b, h, n, n), True where an entry survived."""

    eval_weights: torch.Tensor
    train_weights: torch.Tensor
    keep: torch.Tensor


def attention_dropout(layer: TransformerEncoderLayer, x: torch.Tensor, p: float, seed: int = 0) -> DropoutView:
    """The self-attention weights of ``layer`` on its input ``x``, in eval mode and in train mode.

    In train mode nn.Dropout (inverted dropout) zeroes each weight with probability p and scales
    the survivors by 1/(1-p): train = eval * keep / (1-p). Each row's expected sum stays 1, but a
    single draw's row does not sum to 1 (the tutorials' ``self.dropout(attention_weights)``, as in
    torch and the annotated transformer). The module's mode and dropout are restored afterwards.
    """
    if not 0.0 <= p < 1.0:
        raise ValueError(f"dropout p must lie in [0, 1), got {p}")
    mha: MultiHeadAttention = layer.self_attn
    inp = layer.norm1(x) if layer.norm_first else x
    was_training, old_p = mha.training, mha.dropout
    try:
        mha.dropout = p
        mha.eval()
        with torch.no_grad():
            _, w_eval = mha(inp)
            mha.train()
            with seeded(seed):
                _, w_train = mha(inp)
    finally:
        mha.dropout = old_p
        mha.train(was_training)
    return DropoutView(w_eval, w_train, w_train != 0)


# ---------------------------------------------------------------------------------------------
# the second tutorial's double residual
# ---------------------------------------------------------------------------------------------


class TutorialEncoderLayer(nn.Module):
    """The second tutorial's encoder layer, transcribed with its bug (masks as booleans, True = may attend).

        # its PositionWiseFFN:           return ffn(layer_norm(x)) + x      <- residual + LN inside
        out1 = layernorm1(x + dropout1(mha(x)))
        out2 = layernorm2(out1 + dropout2(ffn(out1)))                         <- and again outside
             = LN2(2 out1 + FFN(LN(out1)))                                    (eval mode)

    The skip path is counted twice. LayerNorm ignores scale, LN(2a + f) = LN(a + f/2): the
    FFN's contribution is halved relative to the correct post-LN layer.
    """

    def __init__(self, d_model: int, num_heads: int, d_ff: int, dropout: float = 0.0,
                 activation: str = "gelu"):
        super().__init__()
        self.mha = MultiHeadAttention(d_model, num_heads, dropout)
        self.ffn = PositionWiseFFN(d_model, d_ff, dropout, activation)
        self.ffn_norm = nn.LayerNorm(d_model)     # PositionWiseFFN.layer_norm of the tutorial
        self.ffn_dropout = nn.Dropout(dropout)    # the last nn.Dropout inside its nn.Sequential
        self.layernorm1 = nn.LayerNorm(d_model)
        self.layernorm2 = nn.LayerNorm(d_model)
        self.dropout1 = nn.Dropout(dropout)
        self.dropout2 = nn.Dropout(dropout)

    def tutorial_ffn(self, x: torch.Tensor) -> torch.Tensor:
        """The tutorial's PositionWiseFFN.forward: ffn(layer_norm(x)) + x."""
        return self.ffn_dropout(self.ffn(self.ffn_norm(x))) + x

    def forward_trace(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> dict[str, torch.Tensor]:
        """out1, ffn_block (what its FFN returns, skip included), output."""
        attn, w = self.mha(x, mask=mask)
        out1 = self.layernorm1(x + self.dropout1(attn))
        block = self.dropout2(self.tutorial_ffn(out1))
        return {"out1": out1, "ffn_block": block, "output": self.layernorm2(out1 + block), "weights": w}

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> AttentionOutput:
        s = self.forward_trace(x, mask)
        return AttentionOutput(s["output"], s["weights"])

    @classmethod
    def from_layer(cls, layer: TransformerEncoderLayer) -> TutorialEncoderLayer:
        """The tutorial's layer with the weights of a (post-LN) ``layer``; its extra inner LN is fresh."""
        d, h = layer.self_attn.d_model, layer.self_attn.num_heads
        mine = cls(d, h, layer.ffn.linear1.out_features, layer.dropout1.p, layer.ffn.activation_name)
        mine.mha.load_state_dict(layer.self_attn.state_dict())
        mine.ffn.load_state_dict(layer.ffn.state_dict())
        mine.layernorm1.load_state_dict(layer.norm1.state_dict())
        mine.layernorm2.load_state_dict(layer.norm2.state_dict())
        return mine.train(layer.training)


class DoubleResidual(NamedTuple):
    """Per position (n,): how far the FFN sublayer moves each token, ||out2 - out1|| / ||out1||,
    in the correct post-LN layer and in the tutorial's; out2 of both, (n, d)."""

    correct_update: torch.Tensor
    tutorial_update: torch.Tensor
    correct_out: torch.Tensor
    tutorial_out: torch.Tensor


def double_residual_effect(layer: TransformerEncoderLayer, x: torch.Tensor) -> DoubleResidual:
    """Run a post-LN ``layer`` and the tutorial's version of it (same weights) on x (1, n, d)."""
    if layer.norm_first:
        raise ValueError("the tutorial's layer is post-LN; pass a post-LN layer")
    tut = TutorialEncoderLayer.from_layer(layer).eval()
    with torch.no_grad():
        mine = layer.forward_trace(x)
        theirs = tut.forward_trace(x)
    out1 = mine["norm1"][0]
    right, wrong = mine["output"][0], theirs["output"][0]
    size = out1.norm(dim=-1)
    return DoubleResidual((right - out1).norm(dim=-1) / size, (wrong - out1).norm(dim=-1) / size, right, wrong)


# ---------------------------------------------------------------------------------------------
# what the page draws: one stack run on a sentence, per variant (numpy, shared read-only)
# ---------------------------------------------------------------------------------------------


class EncoderSetup(NamedTuple):
    """Everything the weights and the input of the page's stacks depend on (a cache key by value)."""

    tokens: tuple[str, ...]
    activation: str
    d_model: int
    heads: int
    seed: int


class StackRun(NamedTuple):
    """One variant's stack on the sentence, as numpy arrays.

    steps: per layer, every intermediate tensor of ``TransformerEncoderLayer.forward_trace`` (n, width);
    weights (L, h, n, n); stream: RMS of the residual stream (L+1,); final_rms: RMS after a final
    LayerNorm on each layer's output (L,); final_gap: what that final LayerNorm changes (L,);
    rollout: cumulative attention rollout after each layer (L, n, n)."""

    steps: list[dict[str, np.ndarray]]
    weights: np.ndarray
    stream: np.ndarray
    final_rms: np.ndarray
    final_gap: np.ndarray
    rollout: np.ndarray


def encoders_for(d_model: int, num_heads: int, num_layers: int, activation: str, seed: int,
                 max_len: int) -> dict[str, TransformerEncoder]:
    """Both variants with the same weights (``encoder_for``), keyed by variant."""
    return {v: encoder_for(v, d_model, num_heads, num_layers, activation, seed, max_len=max_len) for v in VARIANTS}


def run_stack(enc: TransformerEncoder, x: torch.Tensor) -> StackRun:
    """Trace ``enc`` on x (1, n, d): every step of every layer, the stream's scale and the rollout."""
    with torch.no_grad():
        tr = enc.trace_embeddings(x)
        outputs = [layer.output for layer in tr.layers]
        stream = residual_stream_rms(tr.embeddings, outputs)
        finals = [float(rms(enc.final_norm(y) if enc.final_norm is not None else y)) for y in outputs]
        gaps = [float(final_layernorm_gap(y)) for y in outputs]
        rollout = attention_rollout([layer.weights for layer in tr.layers], cumulative=True)[:, 0]
    return StackRun(steps=[{k: v[0].numpy().copy() for k, v in layer.steps.items()} for layer in tr.layers],
                    weights=np.stack([layer.weights[0].numpy() for layer in tr.layers]),
                    stream=stream.numpy(), final_rms=np.array(finals), final_gap=np.array(gaps),
                    rollout=rollout.numpy())


class DropoutWeights(NamedTuple):
    """One layer's attention weights (h, n, n) in eval and in train mode (numpy)."""

    eval: np.ndarray
    train: np.ndarray

    def dropped(self, head: int) -> np.ndarray:
        """(n, n) True where dropout zeroed a weight that eval mode keeps (drawn grey)."""
        return (self.train[head] == 0) & (self.eval[head] > 0)


def dropout_weights(layer: TransformerEncoderLayer, x: torch.Tensor, p: float, seed: int) -> DropoutWeights:
    """``attention_dropout`` on a copy of ``layer`` (so a shared, cached layer stays in eval mode)."""
    view = attention_dropout(copy.deepcopy(layer), x, p, seed=seed)
    return DropoutWeights(view.eval_weights[0].numpy(), view.train_weights[0].numpy())

"""attention_core: the math and the models of the app. torch + numpy only.

Conventions (those of torch.nn.functional.scaled_dot_product_attention): functional
shapes (batch, heads, seq, dim); boolean masks True where a query may attend; default
scale 1/sqrt(d_k); a query with no visible key gets zero weights and a zero output.
"""
from .analysis import (
    PATTERNS,
    attention_rollout,
    classify_head,
    classify_heads,
    head_entropy,
    head_similarity,
    head_sparsity,
    js_distance,
    pca_2d,
    qk_geometry,
    synthetic_pattern,
)
from .crossmodal import CrossModalAttention, image_to_patches, synthetic_image, synthetic_scene
from .decoder import CausalSelfAttention, KVCache
from .diagnostics import attention_entropy, max_weight, softmax_jacobian_norm, sparsity
from .efficient import (
    FlashAttentionOutput,
    bigbird_mask,
    block_local_global_mask,
    effective_weights,
    flash_attention,
    linear_attention,
    linear_attention_states,
    linformer_attention,
    longformer_mask,
    orthogonal_random_features,
    performer_attention,
    relative_error,
    sliding_window_attention,
    sparse_attention,
    strided_sparse_mask,
)
from .functional import (
    apply_mask,
    default_scale,
    dot_scores,
    grouped_query_attention,
    masked_softmax,
    scaled_dot_product_attention,
    scaled_dot_scores,
)
from .masks import (
    block_mask,
    causal_mask,
    global_tokens_mask,
    local_mask,
    padding_mask,
    sliding_window_mask,
    strided_mask,
)
from .modules import AdditiveAttention, HeadDivisibilityError, MultiHeadAttention, SelfAttention
from .positional import (
    ROPE_SCALINGS,
    LearnedPositionalEmbedding,
    alibi_bias,
    alibi_slopes,
    apply_rotary,
    rope_linear_frequencies,
    rope_ntk_base,
    rope_ntk_frequencies,
    rope_scaled_frequencies,
    rope_yarn_frequencies,
    rotary_angles,
    rotary_embedding,
    rotary_frequencies,
    sinusoidal_encoding,
    yarn_attention_factor,
    yarn_ramp,
)
from .transformer import (
    EncoderOutput,
    PositionWiseFFN,
    TransformerEncoder,
    TransformerEncoderLayer,
)
from .types import AttentionOutput

__all__ = [
    "AttentionOutput",
    "causal_mask", "padding_mask", "local_mask", "strided_mask", "block_mask", "global_tokens_mask",
    "dot_scores", "scaled_dot_scores", "default_scale", "apply_mask", "masked_softmax",
    "scaled_dot_product_attention",
    "AdditiveAttention", "SelfAttention", "MultiHeadAttention", "HeadDivisibilityError",
    "sinusoidal_encoding", "rotary_embedding", "apply_rotary", "LearnedPositionalEmbedding",
    "PositionWiseFFN", "TransformerEncoderLayer", "TransformerEncoder", "EncoderOutput",
    "CrossModalAttention", "synthetic_image", "synthetic_scene", "image_to_patches",
    "linear_attention", "linear_attention_states", "orthogonal_random_features", "performer_attention",
    "linformer_attention", "sparse_attention", "sliding_window_attention", "strided_sparse_mask",
    "block_local_global_mask", "longformer_mask", "bigbird_mask", "flash_attention", "FlashAttentionOutput",
    "effective_weights", "relative_error",
    "PATTERNS", "synthetic_pattern", "classify_head", "classify_heads", "head_entropy", "head_sparsity",
    "js_distance", "head_similarity", "attention_rollout", "pca_2d", "qk_geometry",
    "attention_entropy", "max_weight", "softmax_jacobian_norm", "sparsity",
    # modern LLM attention
    "grouped_query_attention", "sliding_window_mask", "KVCache", "CausalSelfAttention",
    "alibi_slopes", "alibi_bias", "rotary_frequencies", "rotary_angles", "ROPE_SCALINGS",
    "rope_linear_frequencies", "rope_ntk_base", "rope_ntk_frequencies", "yarn_ramp", "rope_yarn_frequencies",
    "yarn_attention_factor", "rope_scaled_frequencies",
]

"""Print the largest error of each attention_core function against its independent oracle.

    python scripts/oracle_report.py

The unit tests assert these stay below 1e-5 (float32); this prints the measured figures.
"""
from __future__ import annotations

import sys
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import attention_core as ac  # noqa: E402


def main() -> None:
    g = torch.Generator().manual_seed(0)
    rows = []
    q, k, v = (torch.randn(4, 8, 257, 64, generator=g) for _ in range(3))
    mask = torch.rand(4, 1, 257, 257, generator=g) > 0.3
    mask[..., 0] = True
    rows.append(("scaled_dot_product_attention vs torch SDPA (masked)",
                 (ac.scaled_dot_product_attention(q, k, v, mask).output
                  - F.scaled_dot_product_attention(q, k, v, attn_mask=mask)).abs().max()))
    rows.append(("scaled_dot_product_attention vs torch SDPA (causal)",
                 (ac.scaled_dot_product_attention(q, k, v, ac.causal_mask(257)).output
                  - F.scaled_dot_product_attention(q, k, v, is_causal=True)).abs().max()))
    ref = torch.nn.MultiheadAttention(128, 8, batch_first=True).eval()
    mine = ac.MultiHeadAttention.from_torch(ref).eval()
    x = torch.randn(4, 100, 128, generator=g)
    with torch.no_grad():
        rows.append(("MultiHeadAttention.from_torch vs nn.MultiheadAttention",
                     (mine(x).output - ref(x, x, x)[0]).abs().max()))
        layer = torch.nn.TransformerEncoderLayer(128, 8, 256, dropout=0.0, batch_first=True).eval()
        ours = ac.TransformerEncoderLayer.from_torch(layer).eval()
        rows.append(("TransformerEncoderLayer.from_torch vs nn.TransformerEncoderLayer (post-LN)",
                     (ours(x).output - layer(x)).abs().max()))
    n, d = 512, 64
    pos = torch.arange(n, dtype=torch.float64)[:, None]
    i = torch.arange(d, dtype=torch.float64)[None, :]
    angle = pos / 10000 ** ((i - i % 2) / d)
    closed = torch.where(i % 2 == 0, torch.sin(angle), torch.cos(angle))
    rows.append(("sinusoidal_encoding vs closed form (float64 oracle)",
                 (ac.sinusoidal_encoding(n, d).double() - closed).abs().max()))
    out = ac.flash_attention(q, k, v, block_q=64, block_k=48, causal=True).output
    rows.append(("flash_attention (causal, n=257, blocks 64x48) vs torch SDPA",
                 (out - F.scaled_dot_product_attention(q, k, v, is_causal=True)).abs().max()))
    width = max(len(name) for name, _ in rows)
    for name, err in rows:
        print(f"{name:{width}s}  max |error| = {float(err):.2e}")


if __name__ == "__main__":
    torch.set_num_threads(1)
    main()

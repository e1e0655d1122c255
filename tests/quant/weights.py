"""The quantizer names, random weights with distinct per-channel magnitudes and a small
model that the quantization tests share."""

from __future__ import annotations

import torch
from torch import nn


BUILTIN = ["fp32", "int8", "int4", "int2", "ternary", "ternary-sparse50", "ternary-sparse90", "binary"]
ALL_NAMES = BUILTIN + ["ternary-sparse37"]  # plus one resolved, unregistered sparsity
INT_BITS = {"int8": 8, "int4": 4, "int2": 2}


def random_weights(rows: int = 16, cols: int = 200, seed: int = 0, dtype=torch.float32) -> torch.Tensor:
    """A (rows, cols) weight whose channels (rows) have distinct magnitudes."""
    g = torch.Generator().manual_seed(seed)
    # distinct per-channel magnitudes so a scale computed over the wrong axis shows up
    return (torch.randn(rows, cols, generator=g) * torch.linspace(0.1, 3.0, rows)[:, None]).to(dtype)


def level_count(row: torch.Tensor) -> int:
    """How many distinct values a quantized channel holds."""
    return int(torch.unique(row).numel())


class _Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.norm = nn.GroupNorm(2, 8)
        self.emb = nn.Embedding(10, 6)
        self.fc = nn.Linear(8 * 4 * 4 + 6, 5)
        self.register_buffer("num_updates", torch.tensor(7))
        # an integer tensor whose key ends with "weight" and ndim >= 2: must stay as is
        self.register_buffer("mask_weight", torch.arange(20).reshape(5, 4))

    def forward(self, x: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
        h = nn.functional.adaptive_avg_pool2d(self.norm(self.conv(x)).relu(), 4).flatten(1)
        return self.fc(torch.cat([h, self.emb(tokens).mean(dim=1)], dim=1))


def small_model() -> _Net:
    """A seeded model with a convolution, GroupNorm, an embedding, a linear layer and integer
    buffers: what quantize() must and must not touch."""
    torch.manual_seed(0)
    model = _Net()
    with torch.no_grad():  # non-trivial norm parameters, so "untouched" is a real check
        model.norm.weight.uniform_(0.5, 1.5)
        model.norm.bias.uniform_(-0.5, 0.5)
    return model


def bytes_equal(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Bit-identical (torch.equal would accept -0.0 == 0.0)."""
    if a.dtype != b.dtype or a.shape != b.shape:
        return False
    return bytes(a.contiguous().reshape(-1).view(torch.uint8).numpy()) == bytes(
        b.contiguous().reshape(-1).view(torch.uint8).numpy()
    )

"""The fp32 baseline and the uniform symmetric integer quantizers (int8, int4, int2).

Per output channel c, with R the reference (the weight itself without one):
scale_c = max|R_c| / qmax, Q(W) = clamp(round(W / scale_c), -qmax, qmax) * scale_c,
qmax = 2^(bits-1) - 1 (values beyond the reference's range clamp to +-max|R_c|).
docs/algorithms.md section 2; the contract of a quantizer is in
:mod:`fedaudit.quant.registry`.
"""

from __future__ import annotations

import torch

from fedaudit.quant.grid import _grid_rows, _restore, _round, _rows, _safe
from fedaudit.quant.registry import QUANTIZERS, register_quantizer

__all__ = ["fp32", "int2", "int4", "int8"]


def _uniform_symmetric(weight: torch.Tensor, bits: int, reference: torch.Tensor | None = None) -> torch.Tensor:
    """Uniform symmetric round-to-nearest, per output channel c.

    scale_c = max|R_c| / qmax,  qmax = 2^(bits-1) - 1,
    Q(W) = clamp(round(W / scale_c), -qmax, qmax) * scale_c,

    with R the reference (None = ``weight`` itself, R = W). The grid is symmetric with
    2*qmax + 1 levels: 255 for int8, 15 for int4 and only 3 ({-1, 0, 1} * max|R_c|) for
    int2; the code -2^(bits-1) is unused. With a reference, values of W beyond +-max|R_c|
    clamp to it.
    """
    qmax = 2 ** (bits - 1) - 1
    x = _rows(weight)
    r = _grid_rows(weight, x, reference)
    scale = r.abs().amax(dim=1, keepdim=True) / qmax
    q = torch.clamp(_round(x / _safe(scale)), -qmax, qmax)
    return _restore(q * scale, weight)


# Each is fn(weight, reference): the grid from ``reference`` (``weight`` itself by default),
# the values from ``weight``. R_c below is channel c of the reference.


@register_quantizer("fp32", bits=32)
def fp32(weight: torch.Tensor, reference: torch.Tensor) -> torch.Tensor:
    """Identity (the unquantized baseline): a copy in the input's own dtype; the reference
    is ignored."""
    return weight.clone()


@register_quantizer("int8", bits=8)
def int8(weight: torch.Tensor, reference: torch.Tensor) -> torch.Tensor:
    """Uniform symmetric 8-bit, qmax = 127 (255 levels per channel, step max|R_c| / 127)."""
    return _uniform_symmetric(weight, bits=8, reference=reference)


@register_quantizer("int4", bits=4)
def int4(weight: torch.Tensor, reference: torch.Tensor) -> torch.Tensor:
    """Uniform symmetric 4-bit, qmax = 7 (15 levels per channel, step max|R_c| / 7)."""
    return _uniform_symmetric(weight, bits=4, reference=reference)


@register_quantizer("int2", bits=2)
def int2(weight: torch.Tensor, reference: torch.Tensor) -> torch.Tensor:
    """Uniform symmetric 2-bit, qmax = 1: levels {-1, 0, 1} * max|R_c| (3 levels)."""
    return _uniform_symmetric(weight, bits=2, reference=reference)


QUANTIZERS.mark_builtin()

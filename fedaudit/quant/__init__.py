"""Post-training quantization (PTQ) and the r_Qn membership-inference-security indicator.

See docs/algorithms.md section 2 and Aubinais et al., arXiv 2502.06567. Typical use::

    from fedaudit.quant import quantize_trajectory, rqn

    # quantize every checkpoint on the FIXED grid of the released (last) checkpoint and
    # drop duplicates: neighbouring checkpoints collapse onto one grid configuration
    candidates, first = quantize_trajectory(trajectory, "ternary")
    losses = per_sample_test_losses(candidates)                 # (candidates x samples)
    r = rqn(losses)                                             # larger = more secure

which is ``quantize(sd, "ternary", reference=trajectory[-1])`` for every ``sd`` followed by
``distinct_candidates``. Without ``reference`` each checkpoint is quantized on its own
grid (the ordinary PTQ of one model).
"""

from fedaudit.quant.quantizers import (
    QUANTIZERS,
    TERNARY_BITS,
    QuantizerSpec,
    is_quantized_tensor,
    quantize,
    quantize_tensor,
    quantize_trajectory,
    quantizer_info,
    register_quantizer,
)
from fedaudit.quant.rqn import (RqnResult, RqnRuns, distinct_candidates, lowest_loss_rows, rqn,
                               rqn_details, rqn_over_runs)

__all__ = [
    "QUANTIZERS",
    "TERNARY_BITS",
    "QuantizerSpec",
    "RqnResult",
    "RqnRuns",
    "distinct_candidates",
    "is_quantized_tensor",
    "lowest_loss_rows",
    "quantize",
    "quantize_tensor",
    "quantize_trajectory",
    "quantizer_info",
    "register_quantizer",
    "rqn",
    "rqn_details",
    "rqn_over_runs",
]

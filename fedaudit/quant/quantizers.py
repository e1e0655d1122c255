"""Post-training quantizers (PTQ) and their registry.

Design reference: docs/algorithms.md section 2, after Aubinais, Formont, Piantanida, Gassiat,
"An Indicator of Membership Inference Security in Post-Training Quantized Models"
(arXiv 2502.06567, AISTATS 2026).

Every quantizer is *fake* quantization: it returns dequantized values ``q * scale`` in
the dtype of its input, so a quantized state_dict loads into the unmodified model. Scales
are per output channel: the weight is viewed as ``(C, n) = (W.shape[0], W[0].numel())``
and every row gets its own scale (for an Embedding that is one scale per token row).

Which tensors of a state_dict are quantized (:func:`is_quantized_tensor`): a floating
point tensor whose key ends with ``"weight"`` and whose ``ndim >= 2``. This selects the
weights of Linear, Conv and Embedding layers and leaves biases and normalisation
parameters (BatchNorm/GroupNorm/LayerNorm weights are 1-D) in float. Every other tensor is
copied unchanged, including non-float buffers (e.g. ``num_batches_tracked``).

Fixed grid (``reference``). By default every tensor is quantized on its own grid: the
per-channel scale comes from the tensor itself (max|W_c| or mean|W_c|), so two different
checkpoints almost never quantize to the same tensor. The r_Qn setting of Aubinais et al.
assumes a FIXED grid, a finite set of reachable configurations onto which neighbouring
checkpoints collapse. With ``reference=R`` (:func:`quantize`, :func:`quantize_tensor`,
:func:`quantize_trajectory`) the per-channel grid of each tensor is computed from the
reference's tensor of the same key and the candidate's own values are rounded onto it:

* ``intN``: scale_c = max|R_c| / qmax, Q(W) = clamp(round(W / scale_c), -qmax, qmax) *
  scale_c (values beyond the reference's range clamp to +-max|R_c|);
* ``ternary``: s_c = mean|R_c|, Q(W) = clip(round(W / s_c), -1, 1) * s_c;
* ``ternary-sparseXX``: the pruning mask comes from the candidate's own magnitudes, s_c =
  mean|R| over the entries the REFERENCE keeps under the same pruning rule, then the
  candidate's kept entries are ternarised on s_c;
* ``binary``: sign(W) * mean|R_c|;
* ``fp32``: identity (the reference is ignored).

A reference channel that is all zero has the grid {0}: the candidate's channel becomes 0.
Quantizing a tensor with itself as reference is exactly the default (own-grid) result.

The quantizers themselves: :mod:`fedaudit.quant.uniform` (fp32, intN) and
:mod:`fedaudit.quant.ternary` (ternary, ternary-sparseXX, binary), on the per-channel
grid helpers of :mod:`fedaudit.quant.grid`. A new quantizer is one function registered
with :func:`register_quantizer` (:mod:`fedaudit.quant.registry` gives its contract).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping, Sequence

import torch

from fedaudit.quant.registry import (QUANTIZERS, QuantizerFn, QuantizerSpec,  # noqa: F401
                                     quantizer_info, register_quantizer)
from fedaudit.quant.rqn import _state_dict_digest

# The built-in quantizers register on import, in this order (the order QUANTIZERS lists).
from fedaudit.quant.uniform import (  # noqa: F401  # isort: skip
    _uniform_symmetric, fp32, int2, int4, int8)
from fedaudit.quant.ternary import (  # noqa: F401  # isort: skip
    TERNARY_BITS, binary, ternary, ternary_sparse50, ternary_sparse90)

__all__ = [
    "QUANTIZERS",
    "QuantizerSpec",
    "is_quantized_tensor",
    "quantize",
    "quantize_tensor",
    "quantize_trajectory",
    "quantizer_info",
    "register_quantizer",
]


def is_quantized_tensor(key: str, tensor: torch.Tensor) -> bool:
    """The rule that decides, from a state_dict entry alone, whether it is quantized.

    True iff ``key`` ends with ``"weight"``, ``tensor`` is floating point and
    ``tensor.ndim >= 2``: weights of Linear/Conv/Embedding layers. Biases, 1-D norm
    weights and non-float buffers are left alone.
    """
    return key.endswith("weight") and tensor.is_floating_point() and tensor.ndim >= 2


def quantize_tensor(
    weight: torch.Tensor, name: str, *, reference: torch.Tensor | None = None
) -> torch.Tensor:
    """Quantize one weight tensor (``ndim >= 2``, output channels on dim 0) with ``name``.

    Args:
        weight: the float tensor to quantize.
        name: a key of :data:`QUANTIZERS` or ``ternary-sparseXX``.
        reference: None (default): the grid comes from ``weight`` itself. Otherwise a
            float tensor of ``weight``'s shape whose per-channel grid (scales) is used to
            round ``weight`` (fixed grid; see the module docstring). Ignored by ``fp32``
            apart from the shape check.

    Returns a new tensor of the same shape, dtype and device; ``weight`` is not modified.

    Raises:
        ValueError: unknown quantizer, non-float tensor, ``ndim < 2``, a reference of
            another shape or not floating point or, for every quantizer but the ``fp32``
            pass-through, non-finite values in ``weight`` or ``reference``.
        TypeError: ``weight`` or ``reference`` is not a tensor.
    """
    spec = quantizer_info(name)
    if not isinstance(weight, torch.Tensor):
        raise TypeError(f"weight must be a torch.Tensor, got {type(weight).__name__}")
    if not weight.is_floating_point():
        raise ValueError(f"weight must be a floating point tensor, got dtype {weight.dtype}")
    if weight.ndim < 2:
        raise ValueError(
            f"weight must have ndim >= 2 (output channels on dim 0), got shape {tuple(weight.shape)}"
        )
    weight = weight.detach()
    if reference is not None:
        reference = _check_reference(weight, reference)
    return _apply(spec, weight, reference)


def quantize(
    state_dict: Mapping[str, torch.Tensor],
    name: str,
    *,
    reference: Mapping[str, torch.Tensor] | None = None,
) -> OrderedDict[str, torch.Tensor]:
    """Post-training quantize a model's ``state_dict`` with the quantizer ``name``.

    Tensors selected by :func:`is_quantized_tensor` (key ends with ``"weight"``, float,
    ``ndim >= 2``) are replaced by their fake-quantized values in the same dtype; every
    other tensor is copied unchanged. The result is a new ``OrderedDict`` of new tensors
    (same key order; ``_metadata`` kept so ``load_state_dict`` behaves as with the
    original); the input is not modified.

    Args:
        state_dict: mapping from parameter/buffer names to tensors.
        name: a key of :data:`QUANTIZERS` or ``ternary-sparseXX``.
        reference: None (default): every tensor is quantized on its own grid. Otherwise a
            state_dict (typically the final, released checkpoint) that holds every key
            quantized here with a float tensor of the same shape; each tensor is rounded
            onto the per-channel grid of the reference's tensor of the same key (fixed
            grid, see the module docstring). Other keys of ``reference`` are ignored, and
            the tensors that are not quantized are copied from ``state_dict`` as always.
            ``fp32`` ignores the reference's values but still checks its keys and shapes.

    Raises:
        ValueError: unknown quantizer (lists the allowed names), a non-finite value in a
            tensor to be quantized (names the key), or a reference that lacks a quantized
            key, holds it with another shape or dtype kind, or with non-finite values
            (names the key).
        TypeError: ``state_dict`` or ``reference`` is not a mapping or holds a non-tensor
            value.
    """
    spec = quantizer_info(name)
    if not isinstance(state_dict, Mapping):
        raise TypeError(f"state_dict must be a mapping of str to Tensor, got {type(state_dict).__name__}")
    if reference is not None and not isinstance(reference, Mapping):
        raise TypeError(f"reference must be a mapping of str to Tensor, got {type(reference).__name__}")
    out: OrderedDict[str, torch.Tensor] = OrderedDict()
    for key, value in state_dict.items():
        if not isinstance(value, torch.Tensor):
            raise TypeError(f"state_dict[{key!r}] must be a torch.Tensor, got {type(value).__name__}")
        value = value.detach()
        if is_quantized_tensor(key, value):
            ref = None
            if reference is not None:
                if key not in reference:
                    raise ValueError(
                        f"reference has no tensor {key!r}; it must hold every quantized key "
                        f"of state_dict with the same shape"
                    )
                try:
                    ref = _check_reference(value, reference[key])
                except (TypeError, ValueError) as err:
                    raise type(err)(f"reference[{key!r}]: {err}") from None
            try:
                out[key] = _apply(spec, value, ref)
            except _ReferenceError as err:
                raise ValueError(f"reference[{key!r}]: {err}") from None
            except ValueError as err:
                raise ValueError(f"state_dict[{key!r}]: {err}") from None
        else:
            out[key] = value.clone()
    metadata = getattr(state_dict, "_metadata", None)
    if metadata is not None:
        out._metadata = metadata.copy()  # type: ignore[attr-defined]
    return out


def quantize_trajectory(
    state_dicts: Sequence[Mapping[str, torch.Tensor]],
    name: str,
    *,
    reference: Mapping[str, torch.Tensor] | None = None,
) -> tuple[list[OrderedDict[str, torch.Tensor]], list[int]]:
    """Quantize a trajectory of checkpoints on one FIXED grid and drop duplicates.

    Every ``state_dicts[t]`` is quantized with :func:`quantize` (``name``,
    ``reference=reference``); identical results are kept once, as by
    :func:`~fedaudit.quant.distinct_candidates`. These are the r_Qn candidates.

    The reference defaults to the LAST state_dict, the released model: a deployment
    quantizes the model it releases, so the grid that model defines is the one in use, and
    fixing it for every candidate makes the candidates the paper's finite set of reachable
    configurations (Aubinais et al., arXiv 2502.06567), onto which neighbouring checkpoints
    collapse. Without a fixed grid each checkpoint would get its own scales and almost no
    two checkpoints would coincide. The last checkpoint's own candidate is then exactly the
    ordinary quantization ``quantize(state_dicts[-1], name)``.

    Identity of a configuration: a candidate is the model as it would be released, its
    quantized tensors AND the tensors the quantizer leaves in float (biases, norm
    parameters, buffers). Two checkpoints are the same candidate only when all their
    tensors are identical after quantization; checkpoints whose quantized weights coincide
    but whose float tensors differ are distinct candidates with distinct losses. (Comparing
    only the quantized tensors would keep the first checkpoint's float tensors for the
    whole group, so the released model -- the last checkpoint's configuration -- could be
    missing from the candidates.) The last checkpoint's candidate is always
    ``quantize(state_dicts[-1], name)`` when the reference is the default.

    Args:
        state_dicts: the trajectory w_1..w_T (a sequence, not an iterator: the default
            reference is its last element).
        name: a key of :data:`QUANTIZERS` or ``ternary-sparseXX``.
        reference: the state_dict that defines the grid; None (default) = ``state_dicts[-1]``.

    Returns:
        ``(candidates, first)``: the distinct quantized state_dicts in trajectory order and,
        for each, the index into ``state_dicts`` of its first occurrence (the result of
        ``distinct_candidates`` on all quantized checkpoints).

    Raises:
        TypeError: ``state_dicts`` is not a sequence (a mapping or a string is rejected too),
            or an element is not a mapping of tensors (message gives its index).
        ValueError: ``state_dicts`` is empty, or as :func:`quantize` (message gives the
            index of the checkpoint).
    """
    quantizer_info(name)  # unknown name: fail before any work
    if not isinstance(state_dicts, Sequence) or isinstance(state_dicts, (str, bytes, Mapping)):
        raise TypeError(
            f"state_dicts must be a sequence of state_dicts, got {type(state_dicts).__name__}"
        )
    if len(state_dicts) == 0:
        raise ValueError("state_dicts is empty: no checkpoint to quantize")
    if reference is None:
        reference = state_dicts[-1]
    candidates: list[OrderedDict[str, torch.Tensor]] = []
    first: list[int] = []
    seen: set[bytes] = set()
    for t, sd in enumerate(state_dicts):
        if not isinstance(sd, Mapping):
            raise TypeError(f"state_dicts[{t}] must be a mapping of str to Tensor, got {type(sd).__name__}")
        try:
            q = quantize(sd, name, reference=reference)
        except (TypeError, ValueError) as err:
            raise type(err)(f"state_dicts[{t}]: {err}") from None
        # the digest of distinct_candidates, computed as we go so that only the distinct
        # quantized checkpoints are held in memory
        digest = _state_dict_digest(q, t)
        if digest not in seen:
            seen.add(digest)
            candidates.append(q)
            first.append(t)
    return candidates, first


def _check_reference(weight: torch.Tensor, reference: object) -> torch.Tensor:
    """The reference tensor for ``weight`` (detached, on its device) after the shape and
    dtype checks; finiteness is checked in :func:`_apply` (fp32 skips it)."""
    if not isinstance(reference, torch.Tensor):
        raise TypeError(f"reference must be a torch.Tensor, got {type(reference).__name__}")
    if not reference.is_floating_point():
        raise ValueError(f"reference must be a floating point tensor, got dtype {reference.dtype}")
    if reference.shape != weight.shape:
        raise ValueError(
            f"reference has shape {tuple(reference.shape)}, the tensor to quantize "
            f"{tuple(weight.shape)}: they must be equal"
        )
    return reference.detach().to(weight.device)


def _apply(spec: QuantizerSpec, weight: torch.Tensor, reference: torch.Tensor | None = None) -> torch.Tensor:
    if spec.name == "fp32" or weight.numel() == 0:
        return weight.clone()
    if not torch.isfinite(weight).all():
        bad = int((~torch.isfinite(weight)).sum())
        raise ValueError(f"{bad} non-finite value(s) of {weight.numel()} cannot be quantized")
    if reference is None:
        reference = weight
    elif not torch.isfinite(reference).all():
        bad = int((~torch.isfinite(reference)).sum())
        raise _ReferenceError(
            f"{bad} non-finite value(s) of {reference.numel()} in the reference cannot define a quantization grid"
        )
    return spec.fn(weight, reference)


class _ReferenceError(ValueError):
    """A ValueError about the reference tensor (so :func:`quantize` names ``reference[key]``)."""

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

A new quantizer is one function registered with :func:`register_quantizer`. It is called
as ``fn(weight, reference)`` with two finite float tensors of the same shape, ``ndim >=
2`` (output channels on dim 0); ``reference`` is ``weight`` itself (the same object) when
no reference is given, and may have another floating dtype. It takes the grid (scales)
from ``reference`` only, rounds the values of ``weight`` onto it and returns a tensor of
``weight``'s shape and dtype::

    @register_quantizer("int3", bits=3)
    def _int3(weight: torch.Tensor, reference: torch.Tensor) -> torch.Tensor:
        return _uniform_symmetric(weight, bits=3, reference=reference)
"""

from __future__ import annotations

import functools
import inspect
import math
import re
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import torch

from fedaudit.quant.rqn import _state_dict_digest
from fedaudit.registry import Entry, Registry

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

# fn(weight, reference) -> weight_q; reference is weight itself when none is given.
QuantizerFn = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]

# log2(3) = 1.58496...: the information content of a ternary weight, rounded as in
# "BitNet b1.58".
TERNARY_BITS = round(math.log2(3), 2)

_SPARSE_RE = re.compile(r"ternary-sparse([1-9][0-9]?)")


@dataclass(frozen=True)
class QuantizerSpec:
    """A registered quantizer.

    Attributes:
        name: registry name, e.g. ``"int8"`` or ``"ternary-sparse90"``.
        fn: ``fn(weight, reference) -> weight_q``: rounds ``weight`` onto the per-channel
            grid computed from ``reference`` (same shape, float, ``ndim >= 2``; the
            module docstring gives the contract).
        bits: nominal bits per weight (32, 8, 4, 2, 1.58 for ternary variants, 1).
        sparsity: nominal fraction of weights forced to zero before quantization
            (0.0, or XX/100 for ``ternary-sparseXX``).
    """

    name: str
    fn: QuantizerFn
    bits: float
    sparsity: float = 0.0

    def __call__(self, weight: torch.Tensor, *, reference: torch.Tensor | None = None) -> torch.Tensor:
        """``fn(weight, reference)``, with ``reference = weight`` when None (no validation;
        :func:`quantize_tensor` is the checked entry point)."""
        return self.fn(weight, weight if reference is None else reference)


#: name -> :class:`QuantizerSpec`; ``ternary-sparseXX`` (XX in 1..99) resolves by pattern
QUANTIZERS: Registry[str, QuantizerSpec] = Registry("quantizer")


def register_quantizer(
    name: str, bits: float, sparsity: float = 0.0
) -> Callable[[QuantizerFn], QuantizerFn]:
    """Decorator: register ``fn(weight, reference) -> weight_q`` under ``name`` in
    :data:`QUANTIZERS` (contract in the module docstring).

    Raises:
        ValueError: ``name`` already registered, ``bits <= 0`` or ``sparsity`` not in
            ``[0, 1)``.
        TypeError: (when decorating) ``fn`` cannot be called with the two positional
            arguments ``(weight, reference)``, e.g. a one-argument quantizer of the
            former ``fn(weight)`` form.
    """
    if not isinstance(name, str) or not name:
        raise ValueError(f"quantizer name must be a non-empty string, got {name!r}")
    if not bits > 0:
        raise ValueError(f"quantizer {name!r}: bits must be > 0, got {bits!r}")
    if not 0.0 <= sparsity < 1.0:
        raise ValueError(f"quantizer {name!r}: sparsity must be in [0, 1), got {sparsity!r}")

    def decorator(fn: QuantizerFn) -> QuantizerFn:
        if name in QUANTIZERS:
            raise ValueError(f"quantizer {name!r} is already registered")
        _check_signature(name, fn)
        QUANTIZERS.register(name, QuantizerSpec(name=name, fn=fn, bits=float(bits),
                                                sparsity=float(sparsity)),
                            bits=float(bits), sparsity=float(sparsity))
        return fn

    return decorator


def _check_signature(name: str, fn: Callable) -> None:
    if not callable(fn):
        raise TypeError(f"quantizer {name!r}: expected a function, got {type(fn).__name__}")
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):  # no introspectable signature (some builtins): trust it
        return
    try:
        signature.bind(None, None)
    except TypeError:
        raise TypeError(
            f"quantizer {name!r}: the function must accept two positional arguments "
            f"fn(weight, reference) -> weight_q, got signature {signature}"
        ) from None


def quantizer_info(name: str) -> QuantizerSpec:
    """The :class:`QuantizerSpec` registered under ``name``.

    Besides the registered names, every ``ternary-sparseXX`` (XX an integer 1..99 written
    without a leading zero) resolves to a ternary quantizer with XX% sparsity.

    Raises:
        ValueError: unknown name; the message lists the allowed names.
    """
    return QUANTIZERS.get(name)


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


# --------------------------------------------------------------------------- helpers


def _rows(weight: torch.Tensor) -> torch.Tensor:
    """``(C, n)`` float64 copy of the weight: one row per output channel."""
    return weight.detach().to(torch.float64).reshape(weight.shape[0], -1)


def _safe(scale: torch.Tensor) -> torch.Tensor:
    # An all-zero channel has scale 0; dividing by 1 instead keeps it exactly zero.
    return torch.where(scale > 0, scale, torch.ones_like(scale))


def _round(x: torch.Tensor) -> torch.Tensor:
    # torch.round is round-half-to-even; "+ 0.0" turns -0.0 into +0.0 so that identical
    # quantized models are byte-identical (see distinct_candidates).
    return torch.round(x) + 0.0


def _restore(values: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    # "+ 0.0": a code -1 on a zero scale (all-zero reference channel) would give -0.0.
    return values.reshape(like.shape).to(dtype=like.dtype) + 0.0


def _grid_rows(weight: torch.Tensor, x: torch.Tensor, reference: torch.Tensor | None) -> torch.Tensor:
    """Rows ``(C, n)`` of the tensor that defines the grid: ``x`` (the rows of ``weight``)
    when there is no reference or it is ``weight`` itself, else the reference's rows."""
    return x if reference is None or reference is weight else _rows(reference)


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


def _absmean(r: torch.Tensor, keep: torch.Tensor | None = None) -> torch.Tensor:
    """Per-row mean |r| over the kept entries (``keep`` None = all), shape ``(C, 1)``."""
    if keep is None:
        return r.abs().mean(dim=1, keepdim=True)
    kept_abs = torch.where(keep, r.abs(), 0.0)
    return kept_abs.sum(dim=1, keepdim=True) / keep.sum(dim=1, keepdim=True)


def _ternarize(x: torch.Tensor, scale: torch.Tensor, keep: torch.Tensor | None = None) -> torch.Tensor:
    """BitNet b1.58 absmean ternarisation of the rows of ``x`` (float64, ``(C, n)``) on the
    per-row scale ``scale`` (``(C, 1)``; s_c = mean|W_c| over the kept entries for the
    own grid, see :func:`_absmean`):  Q(W) = clip(round(W / s_c), -1, 1) * s_c.
    ``keep`` (bool, same shape as ``x``; None = all) marks the entries that survived
    pruning; the others are 0.
    """
    q = torch.clamp(_round(x / _safe(scale)), -1, 1)
    if keep is not None:
        q = torch.where(keep, q, 0.0)  # not q * keep: -1 * 0 would give -0.0
    return q * scale


def _prune_mask(x: torch.Tensor, percent: int) -> torch.Tensor:
    """Keep-mask of the magnitude pruning of ``percent``% per row of ``x`` (``(C, n)``):
    exactly k = floor(percent * n / 100) entries of smallest |x| are dropped, ties broken
    by position (earlier first, stable sort)."""
    n = x.shape[1]
    k = percent * n // 100  # integer arithmetic: 0.29 * 100 would floor to 28
    order = torch.argsort(x.abs(), dim=1, stable=True)
    keep = torch.ones_like(x, dtype=torch.bool)
    keep.scatter_(1, order[:, :k], False)
    return keep


def _ternary_sparse(weight: torch.Tensor, reference: torch.Tensor | None, percent: int) -> torch.Tensor:
    """Magnitude pruning of ``percent``% per output channel, then ternarisation.

    In each channel of n entries exactly k = floor(percent * n / 100) entries of smallest
    |W| are zeroed. Ties in |W| are broken by position: among equal magnitudes the entry
    earlier in row-major order of the channel is pruned first (stable sort), so the
    pruned count is exactly k. The n - k kept entries are ternarised with the scale
    s_c = mean|W| over the kept entries only; a kept entry with |W| < s_c / 2 rounds to 0
    and stays 0 (plain round-to-nearest, not forced to +-s_c), so the realised sparsity
    is at least the nominal one.

    With a reference R (not None and not ``weight`` itself) the mask still comes from
    W's own magnitudes, but s_c = mean|R| over the entries that R keeps under the same
    pruning rule, so the grid {-s_c, 0, s_c} is fixed by R.
    """
    x = _rows(weight)
    keep = _prune_mask(x, percent)
    r = _grid_rows(weight, x, reference)
    scale = _absmean(r, keep if r is x else _prune_mask(r, percent))
    return _restore(_ternarize(x, scale, keep), weight)


@functools.lru_cache(maxsize=None)
def _ternary_sparse_spec(percent: int) -> QuantizerSpec:
    if not 1 <= percent <= 99:
        raise ValueError(f"ternary-sparse percent must be an integer in 1..99, got {percent}")
    name = f"ternary-sparse{percent}"
    if name in QUANTIZERS:
        return QUANTIZERS[name]
    fn = functools.partial(_ternary_sparse, percent=percent)  # fn(weight, reference)
    return QuantizerSpec(name=name, fn=fn, bits=TERNARY_BITS, sparsity=percent / 100)


def _sparse_entry(match) -> Entry:
    spec = _ternary_sparse_spec(int(match.group(1)))
    return Entry(spec.name, spec, {"bits": spec.bits, "sparsity": spec.sparsity})


QUANTIZERS.add_family(_SPARSE_RE.pattern, _sparse_entry,
                      "ternary-sparseXX (XX an integer in 1..99)")


# ------------------------------------------------------------------------ quantizers


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


@register_quantizer("ternary", bits=TERNARY_BITS)
def ternary(weight: torch.Tensor, reference: torch.Tensor) -> torch.Tensor:
    """1.58-bit ternary (BitNet b1.58): clip(round(W / s_c), -1, 1) * s_c, s_c = mean|R_c|."""
    x = _rows(weight)
    return _restore(_ternarize(x, _absmean(_grid_rows(weight, x, reference))), weight)


@register_quantizer("ternary-sparse50", bits=TERNARY_BITS, sparsity=0.5)
def ternary_sparse50(weight: torch.Tensor, reference: torch.Tensor) -> torch.Tensor:
    """Prune the 50% smallest |W| per channel, then ternarise (see ``_ternary_sparse``)."""
    return _ternary_sparse(weight, reference, 50)


@register_quantizer("ternary-sparse90", bits=TERNARY_BITS, sparsity=0.9)
def ternary_sparse90(weight: torch.Tensor, reference: torch.Tensor) -> torch.Tensor:
    """Prune the 90% smallest |W| per channel, then ternarise (see ``_ternary_sparse``)."""
    return _ternary_sparse(weight, reference, 90)


@register_quantizer("binary", bits=1)
def binary(weight: torch.Tensor, reference: torch.Tensor) -> torch.Tensor:
    """1-bit: sign(W) * mean|R_c|, with sign(0) taken as +1.

    A channel with entries of both signs has exactly the two levels +-mean|R_c|; a channel
    whose grid channel R_c is all zero gives 0 (its scale is 0).
    """
    x = _rows(weight)
    scale = _absmean(_grid_rows(weight, x, reference))
    sign = torch.where(x >= 0, 1.0, -1.0).to(x.dtype)
    return _restore(sign * scale, weight)


QUANTIZERS.mark_builtin()

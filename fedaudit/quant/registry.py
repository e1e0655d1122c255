"""The quantizer registry: :class:`QuantizerSpec`, :data:`QUANTIZERS`, :func:`register_quantizer`.

The built-in quantizers register themselves in :mod:`fedaudit.quant.uniform` (fp32, intN)
and :mod:`fedaudit.quant.ternary` (ternary, ternary-sparseXX, binary);
:mod:`fedaudit.quant.quantizers` applies them to tensors and state_dicts.

A new quantizer is one function registered with :func:`register_quantizer`. It is called
as ``fn(weight, reference)`` with two finite float tensors of the same shape, ``ndim >=
2`` (output channels on dim 0); ``reference`` is ``weight`` itself (the same object) when
no reference is given, and may have another floating dtype. It takes the grid (scales)
from ``reference`` only, rounds the values of ``weight`` onto it and returns a tensor of
``weight``'s shape and dtype::

    from fedaudit.quant.uniform import _uniform_symmetric

    @register_quantizer("int3", bits=3)
    def _int3(weight: torch.Tensor, reference: torch.Tensor) -> torch.Tensor:
        return _uniform_symmetric(weight, bits=3, reference=reference)
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass

import torch

from fedaudit.registry import Registry

__all__ = ["QUANTIZERS", "QuantizerFn", "QuantizerSpec", "quantizer_info", "register_quantizer"]

# fn(weight, reference) -> weight_q; reference is weight itself when none is given.
QuantizerFn = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


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
        :func:`~fedaudit.quant.quantize_tensor` is the checked entry point)."""
        return self.fn(weight, weight if reference is None else reference)


#: name -> :class:`QuantizerSpec`; ``ternary-sparseXX`` (XX in 1..99) resolves by pattern
#: (the family added by :mod:`fedaudit.quant.ternary`)
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


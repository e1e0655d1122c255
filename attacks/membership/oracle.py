"""Black-box query access to a model: probabilities for a batch of inputs, nothing else.

The attacker in fedaudit never touches weights, gradients or logits. :class:`Oracle` wraps
a ``torch.nn.Module`` that returns logits and exposes only ``predict_proba`` (softmax
probabilities, or one-hot labels in label-only mode) plus a query counter.  A classifier
gives (N, classes); a model of token sequences (int64 inputs (N, L)) gives (N, L, V), the
next-token distribution at every position (the attacks score the target's probability
along the last axis, :mod:`attacks.membership.baselines`). The model is
kept in a closure rather than an attribute, so ``parameters``, ``state_dict``,
``named_parameters`` and gradients are not reachable through the oracle's public
attributes. (Python cannot truly hide an object: a determined caller can dig through
``__closure__`` of a private function. The point is that no attack can use the weights by
accident, and tests check that.)
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch
from torch import nn

__all__ = ["Oracle"]


def _reference_tensor(model: nn.Module) -> torch.Tensor | None:
    for t in model.parameters():
        if t.is_floating_point():
            return t
    for t in model.buffers():
        if t.is_floating_point():
            return t
    return None


def _make_query_fn(
    model: nn.Module, device: torch.device, dtype: torch.dtype, batch_size: int
) -> Callable[[torch.Tensor | np.ndarray], np.ndarray]:
    """Return ``f(x) -> (N, classes)`` (or ``(N, L, V)``) float64 probabilities; the
    model lives only here."""

    def query(x: torch.Tensor | np.ndarray) -> np.ndarray:
        model.eval()  # every query, in case the owner switched the model back to train()
        out: list[np.ndarray] = []
        with torch.inference_mode():
            for start in range(0, x.shape[0], batch_size):
                chunk = x[start : start + batch_size]
                if isinstance(chunk, np.ndarray):
                    chunk = torch.from_numpy(np.ascontiguousarray(chunk))
                # floating inputs take the model's dtype; integer inputs (token ids) are
                # left alone, so uint8 images fail loudly instead of being fed as 0..255
                chunk = chunk.to(device=device, dtype=dtype if chunk.is_floating_point() else None)
                logits = model(chunk)
                if not isinstance(logits, torch.Tensor) or logits.ndim not in (2, 3):
                    raise RuntimeError(
                        "the model must return a (batch, classes) or (batch, length, "
                        "vocabulary) tensor of logits, got "
                        + (
                            f"shape {tuple(logits.shape)}"
                            if isinstance(logits, torch.Tensor)
                            else type(logits).__name__
                        )
                    )
                # softmax in float64: members' confidences sit very close to 1
                out.append(torch.softmax(logits.to(torch.float64), dim=-1).cpu().numpy())
        return np.concatenate(out, axis=0)

    return query


class Oracle:
    """Black-box oracle around a classifier that returns logits.

    Parameters
    ----------
    model : torch.nn.Module
        Maps a batch ``(N, ...)`` (images: ``(N, C, H, W)``) to logits ``(N, classes)``.
        It is put in eval mode (at construction and before every query) and moved to
        ``device`` if one is given; ``nn.Module.to`` works in place, so this changes the
        caller's module too. Nothing else is changed or restored; no gradients are taken.
    batch_size : int
        Samples per forward pass.
    device : torch.device or str, optional
        Where to run the model; by default the device of its parameters (CPU if none).
    label_only : bool
        If True, ``predict_proba`` returns the one-hot vector of the predicted class only
        (a label-only attacker).
    num_classes : int, optional
        Number of classes. By default taken from the ``out_features`` of the model's last
        ``nn.Linear``; otherwise learned at the first query.

    Attributes
    ----------
    queries : int
        Number of samples queried so far (a batch of N counts N); ``reset_queries()``.
    """

    def __init__(
        self,
        model: nn.Module,
        *,
        batch_size: int = 256,
        device: torch.device | str | None = None,
        label_only: bool = False,
        num_classes: int | None = None,
    ) -> None:
        if not isinstance(model, nn.Module):
            raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise ValueError(f"batch_size must be a positive integer, got {batch_size!r}")
        if num_classes is not None and (
            isinstance(num_classes, bool) or not isinstance(num_classes, int) or num_classes < 2
        ):
            raise ValueError(f"num_classes must be an integer >= 2, got {num_classes!r}")
        ref = _reference_tensor(model)
        if device is None:
            dev = ref.device if ref is not None else torch.device("cpu")
        else:
            dev = torch.device(device)
            model.to(dev)
        dtype = ref.dtype if ref is not None else torch.float32
        if num_classes is None:
            linears = [m for m in model.modules() if isinstance(m, nn.Linear)]
            if linears:
                num_classes = linears[-1].out_features
        model.eval()
        self._query = _make_query_fn(model, dev, dtype, batch_size)
        self._queries = 0
        self._batch_size = batch_size
        self._label_only = bool(label_only)
        self._num_classes = num_classes

    @property
    def queries(self) -> int:
        """Number of samples queried since construction or the last ``reset_queries()``."""
        return self._queries

    def reset_queries(self) -> None:
        self._queries = 0

    @property
    def batch_size(self) -> int:
        return self._batch_size

    @property
    def label_only(self) -> bool:
        return self._label_only

    @property
    def num_classes(self) -> int:
        if self._num_classes is None:
            raise RuntimeError(
                "num_classes is unknown until the first query (pass num_classes= to Oracle)"
            )
        return self._num_classes

    def predict_proba(self, x: torch.Tensor | np.ndarray) -> np.ndarray:
        """Query the model on ``x`` (``(N, ...)``, e.g. ``(N, C, H, W)``).

        Returns an ``(N, classes)`` float64 array: ``softmax(logits)``, or in label-only
        mode the one-hot encoding of ``argmax(logits)``; for a model of token sequences
        (integer ``x`` (N, L)) ``(N, L, V)``, the softmax at every position (label-only:
        one-hot per position). Adds ``N`` to ``queries`` (a sequence is one query).
        """
        if not isinstance(x, (torch.Tensor, np.ndarray)):
            raise TypeError(f"x must be a torch.Tensor or numpy.ndarray, got {type(x).__name__}")
        if x.ndim < 2:
            raise ValueError(f"x must have a leading batch axis, got shape {tuple(x.shape)}")
        if isinstance(x, np.ndarray) and x.dtype.kind not in "biuf":
            raise ValueError(f"x must be numeric, got dtype {x.dtype}")
        n = int(x.shape[0])
        if n == 0:
            k = self._num_classes or 0
            tokens = x.ndim == 2 and not (x.is_floating_point() if isinstance(x, torch.Tensor)
                                          else x.dtype.kind == "f")
            return np.zeros((0, x.shape[1], k) if tokens else (0, k), dtype=np.float64)
        proba = self._query(x)
        self._queries += n
        if self._num_classes is None:
            self._num_classes = int(proba.shape[-1])
        elif proba.shape[-1] != self._num_classes:
            raise RuntimeError(
                f"the model returned {proba.shape[-1]} classes, expected {self._num_classes}"
            )
        if self._label_only:
            onehot = np.zeros_like(proba)
            np.put_along_axis(onehot, proba.argmax(axis=-1)[..., None], 1.0, axis=-1)
            return onehot
        return proba

    def __repr__(self) -> str:
        mode = "label_only" if self._label_only else "proba"
        return f"Oracle(mode={mode}, queries={self._queries}, batch_size={self._batch_size})"

    def __reduce__(self):  # pickling would have to serialise the model: refuse
        raise TypeError("an Oracle cannot be pickled (it would carry the model's weights)")

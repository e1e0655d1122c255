"""Models built by name, one module each.  No BatchNorm anywhere: per-sample gradients
(GNQ, DP-SGD) need GroupNorm, whose per-sample gradient exists.

* ``registry``: :data:`MODELS` (name -> ``fn(in_channels, image_size, num_classes, width)
  -> nn.Module``, or for text ``fn(vocab_size, seq_len, width, layers, heads)``),
  :func:`register_model`, :func:`build_model`, :func:`build_text_model`, :func:`model_for`.
* the built-in models: ``mlp``, ``cnn``, ``resnet`` (``resnet18``), ``transformer`` (a
  small causal transformer over characters).

Importing the package imports every public module in it (the built-ins in that order,
their registration order, then any others alphabetically), so a new model is a new file
with a ``@register_model`` line (or a builder registered anywhere, e.g. a notebook cell).
"""

from __future__ import annotations

from fedaudit.models.registry import (MODELS, build_model, build_text_model, model_for,
                                      reads_tokens, register_model)
from fedaudit.registry import import_submodules

import_submodules(__name__, __path__, first=("mlp", "cnn", "resnet", "transformer"))
MODELS.mark_builtin()

__all__ = ["MODELS", "build_model", "build_text_model", "model_for", "reads_tokens",
           "register_model"]

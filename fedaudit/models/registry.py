"""The model registry: :data:`MODELS` (name -> builder), :func:`register_model`,
:func:`build_model`, :func:`build_text_model` and :func:`model_for`.  The built-in models
are the other modules of this folder.  No BatchNorm anywhere: per-sample gradients (GNQ,
DP-SGD) need GroupNorm, whose per-sample gradient exists.

Two kinds of builder: image models ``fn(in_channels, image_size, num_classes, width,
**options)`` (the default) and models of token sequences, registered with
``inputs="tokens"``, ``fn(vocab_size, seq_len, width, **options)`` returning logits (B, L,
vocab_size).  ``options`` are the model's own keys of the scenario's ``[model]`` table,
declared where it registers (``options={"layers": option(int, 2, ...)}``, like an attack's):
a new model option is one file."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Callable

import torch
from torch import nn

from fedaudit.options import Field, check_options
from fedaudit.registry import Registry
from fedaudit.scenario import ModelConfig


def _check(name: str, fn: Any, meta: dict) -> None:
    if not callable(fn):
        raise TypeError(f"register_model({name!r}) must decorate a callable")
    check_options(f"model {name!r}", meta.get("options", {}))


#: name -> ``fn(in_channels, image_size, num_classes, width, **options) -> nn.Module``, or
#: with meta ``inputs="tokens"`` ``fn(vocab_size, seq_len, width, **options) -> nn.Module``;
#: meta ``options``: the model's keys of ``[model]`` (name -> Field)
MODELS: Registry[str, Callable[..., nn.Module]] = Registry(
    "model", name_pattern=r"[a-z0-9][a-z0-9_.-]*", check=_check)


def register_model(name: str, *, options: Mapping[str, Field] | None = None,
                   check: Callable[[ModelConfig], str | None] | None = None,
                   replace: bool = False, **meta):
    """Decorator: register a model builder ``fn(in_channels, image_size, num_classes,
    width, **options) -> nn.Module`` under ``name`` (no BatchNorm: see the module
    docstring); with ``inputs="tokens"`` a builder ``fn(vocab_size, seq_len, width,
    **options)`` of a model of token sequences (text data).  ``options`` declares the
    model's own keys (name -> :class:`fedaudit.options.Field`): they join the scenario's
    ``[model]`` table (``--set model.<key>=...``, read as ``scenario.model.<key>``) and
    reach ``fn`` as keyword arguments.  ``check(model_cfg)`` returns a one-line message
    when the ``[model]`` table does not suit the model (validation runs it when
    ``model.name`` is this model)."""
    return MODELS.register(name, replace=replace, options=dict(options or {}), check=check,
                           **meta)


def _declared(name: str) -> Mapping[str, Field]:
    return MODELS.meta(name).get("options") or {}


def model_options(name: str, given: Mapping[str, Any]) -> dict[str, Any]:
    """The keyword options that reach model ``name``'s builder: each option it declares, at
    its ``given`` value or else its default (``TypeError`` for one it does not declare)."""
    declared = _declared(name)
    unknown = [k for k in given if k not in declared]
    if unknown:
        raise TypeError(f"model {name!r} has no option {unknown[0]!r}; its options: "
                        + (", ".join(declared) or "none"))
    return {k: given.get(k, f.default) for k, f in declared.items()}


def reads_tokens(name: str) -> bool:
    """Whether model ``name`` reads token sequences (registered with ``inputs="tokens"``)."""
    return MODELS.meta(name).get("inputs") == "tokens"


def _seeded(fn: Callable[..., nn.Module], seed: int | None, options: Mapping[str, Any],
            *args: int) -> nn.Module:
    if seed is None:
        return fn(*args, **options)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return fn(*args, **options)


def build_model(name: str, *, in_channels: int, image_size: int, num_classes: int,
                width: int = 16, seed: int | None = None, **options: Any) -> nn.Module:
    """Build a registered image model (its declared options at their defaults unless
    given); with ``seed`` the initial weights are reproducible."""
    fn = MODELS.get(name)
    if reads_tokens(name):
        raise ValueError(f"model {name!r} reads token sequences (text data); build it with "
                         "build_text_model")
    return _seeded(fn, seed, model_options(name, options), in_channels, image_size,
                   num_classes, width)


def build_text_model(name: str, *, vocab_size: int, seq_len: int, width: int = 64,
                     seed: int | None = None, **options: Any) -> nn.Module:
    """Build a registered model of token sequences (``inputs="tokens"``; its declared
    options, e.g. the transformer's ``layers`` and ``heads``, at their defaults unless
    given); with ``seed`` the initial weights are reproducible."""
    fn = MODELS.get(name)
    if not reads_tokens(name):
        raise ValueError(f"model {name!r} reads images; text data needs a model registered "
                         "with inputs='tokens'")
    return _seeded(fn, seed, model_options(name, options), vocab_size, seq_len, width)


def model_for(cfg: ModelConfig, data, *, seed: int) -> nn.Module:
    """The ``[model]`` for ``data`` (a FederatedData), initialised from ``seed``: for text
    data (``data.text`` set) vocab_size = the number of classes (the vocabulary) and
    seq_len = the sequences' length; the model's own options from ``[model]``."""
    options = {k: getattr(cfg, k) for k in _declared(cfg.name)}
    if getattr(data, "text", None) is not None:
        return build_text_model(cfg.name, vocab_size=data.num_classes,
                                seq_len=data.x.shape[1], width=cfg.width, seed=seed, **options)
    return image_model(cfg, data.x.shape[1:], data.num_classes, seed=seed)


def image_model(cfg: ModelConfig, input_shape: tuple[int, ...], num_classes: int, *,
                seed: int | None) -> nn.Module:
    """The ``[model]`` for images of ``input_shape`` (C, H, W) and ``num_classes`` classes,
    initialised from ``seed`` (what :func:`model_for` builds without the data at hand)."""
    options = {k: getattr(cfg, k) for k in _declared(cfg.name)}
    return build_model(cfg.name, in_channels=input_shape[0], image_size=input_shape[1],
                       num_classes=num_classes, width=cfg.width, seed=seed, **options)

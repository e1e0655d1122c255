"""The model registry: :data:`MODELS` (name -> builder), :func:`register_model`,
:func:`build_model`, :func:`build_text_model` and :func:`model_for`.  The built-in models
are the other modules of this folder.  No BatchNorm anywhere: per-sample gradients (GNQ,
DP-SGD) need GroupNorm, whose per-sample gradient exists.

Two kinds of builder: image models ``fn(in_channels, image_size, num_classes, width)``
(the default) and models of token sequences, registered with ``inputs="tokens"``,
``fn(vocab_size, seq_len, width, layers, heads)`` returning logits (B, L, vocab_size)."""

from __future__ import annotations

from typing import Callable

import torch
from torch import nn

from fedaudit.registry import Registry
from fedaudit.scenario import ModelConfig

#: name -> ``fn(in_channels, image_size, num_classes, width) -> nn.Module``, or with meta
#: ``inputs="tokens"`` ``fn(vocab_size, seq_len, width, layers, heads) -> nn.Module``
MODELS: Registry[str, Callable[..., nn.Module]] = Registry(
    "model", name_pattern=r"[a-z0-9][a-z0-9_.-]*")


def register_model(name: str, *, replace: bool = False, **meta):
    """Decorator: register a model builder ``fn(in_channels, image_size, num_classes,
    width) -> nn.Module`` under ``name`` (no BatchNorm: see the module docstring); with
    ``inputs="tokens"`` a builder ``fn(vocab_size, seq_len, width, layers, heads)`` of a
    model of token sequences (text data)."""
    return MODELS.register(name, replace=replace, **meta)


def reads_tokens(name: str) -> bool:
    """Whether model ``name`` reads token sequences (registered with ``inputs="tokens"``)."""
    return MODELS.meta(name).get("inputs") == "tokens"


def _seeded(fn: Callable[..., nn.Module], seed: int | None, *args: int) -> nn.Module:
    if seed is None:
        return fn(*args)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return fn(*args)


def build_model(name: str, *, in_channels: int, image_size: int, num_classes: int,
                width: int = 16, seed: int | None = None) -> nn.Module:
    """Build a registered image model; with ``seed`` the initial weights are reproducible."""
    fn = MODELS.get(name)
    if reads_tokens(name):
        raise ValueError(f"model {name!r} reads token sequences (text data); build it with "
                         "build_text_model")
    return _seeded(fn, seed, in_channels, image_size, num_classes, width)


def build_text_model(name: str, *, vocab_size: int, seq_len: int, width: int = 64,
                     layers: int = 2, heads: int = 4, seed: int | None = None) -> nn.Module:
    """Build a registered model of token sequences (``inputs="tokens"``); with ``seed``
    the initial weights are reproducible."""
    fn = MODELS.get(name)
    if not reads_tokens(name):
        raise ValueError(f"model {name!r} reads images; text data needs a model registered "
                         "with inputs='tokens'")
    return _seeded(fn, seed, vocab_size, seq_len, width, layers, heads)


def model_for(cfg: ModelConfig, data, *, seed: int) -> nn.Module:
    """The ``[model]`` for ``data`` (a FederatedData), initialised from ``seed``: for text
    data (``data.text`` set) vocab_size = the number of classes (the vocabulary) and
    seq_len = the sequences' length."""
    if getattr(data, "text", None) is not None:
        return build_text_model(cfg.name, vocab_size=data.num_classes,
                                seq_len=data.x.shape[1], width=cfg.width, layers=cfg.layers,
                                heads=cfg.heads, seed=seed)
    _, c, h, _ = data.x.shape
    return build_model(cfg.name, in_channels=c, image_size=h, num_classes=data.num_classes,
                       width=cfg.width, seed=seed)

"""Registry of membership-inference attacks: name -> scoring function.

Every attack has the signature ``fn(oracle, x, y, **options) -> np.ndarray``: it may only
query ``oracle`` (an :class:`attacks.oracle.Oracle`), and returns one score per sample of
``x``, oriented so that higher means "more likely a member". ``y`` holds the true labels
(attacks that do not need them, such as Res-MIA, ignore them).

Adding an attack is one file in ``attacks/`` with one decorator line::

    from attacks.registry import register_attack

    @register_attack("my-attack")
    def my_attack(oracle, x, y, *, some_option=1.0):
        ...

``attacks/__init__.py`` imports every public module of the package, so the decorator runs
as soon as ``attacks`` (or anything inside it) is imported.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any, Protocol

import numpy as np

__all__ = ["ATTACKS", "AttackFn", "register_attack", "get_attack", "attack_names"]


class AttackFn(Protocol):
    def __call__(self, oracle: Any, x: Any, y: Any, /, **options: Any) -> np.ndarray: ...


#: name -> attack function. Filled by :func:`register_attack`.
ATTACKS: dict[str, Callable[..., np.ndarray]] = {}

_NAME = re.compile(r"^[a-z][a-z0-9_-]*$")


def register_attack(name: str) -> Callable[[Callable[..., np.ndarray]], Callable[..., np.ndarray]]:
    """Decorator: register ``fn`` under ``name`` (lowercase letters, digits, ``-``, ``_``).

    Registering a different function under a taken name raises ``ValueError``;
    re-registering the same function (same module and qualified name, e.g. after a
    module reload) replaces it.
    """
    if not isinstance(name, str) or not _NAME.match(name):
        raise ValueError(
            f"attack name must match {_NAME.pattern} (lowercase, digits, '-', '_'), got {name!r}"
        )

    def decorator(fn: Callable[..., np.ndarray]) -> Callable[..., np.ndarray]:
        if not callable(fn):
            raise TypeError(f"register_attack({name!r}) must decorate a callable")
        old = ATTACKS.get(name)
        if old is not None and (
            getattr(old, "__module__", None),
            getattr(old, "__qualname__", None),
        ) != (getattr(fn, "__module__", None), getattr(fn, "__qualname__", None)):
            raise ValueError(
                f"attack {name!r} is already registered by "
                f"{old.__module__}.{old.__qualname__}"
            )
        ATTACKS[name] = fn
        return fn

    return decorator


def attack_names() -> list[str]:
    """Sorted names of the registered attacks."""
    return sorted(ATTACKS)


def get_attack(name: str) -> Callable[..., np.ndarray]:
    """Return the attack registered under ``name``; ``ValueError`` listing allowed names."""
    try:
        return ATTACKS[name]
    except (KeyError, TypeError):
        raise ValueError(
            f"unknown attack {name!r}; allowed: {', '.join(attack_names())}"
        ) from None

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

from dataclasses import dataclass

from collections.abc import Callable, Mapping
from typing import Any, Protocol

import numpy as np

from fedaudit.options import Field
from fedaudit.registry import Registry

__all__ = ["ATTACKS", "AttackFn", "DATA_KINDS", "register_attack", "get_attack",
           "attack_names", "attack_label", "attack_options", "attack_data", "needs_references",
           "needs_vocabulary", "server_view", "trains_references"]

#: the kinds of data an attack can declare it scores (``Dataset.kind``)
DATA_KINDS = ("image", "text")


@dataclass(frozen=True)
class AttackScores:
    """What an attack may return instead of bare scores: the scores and what it chose on
    the way (RMIA's tuned ``a``, LiRA's queries per sample), which results.json records
    beside the attack's metrics."""

    scores: np.ndarray
    info: Mapping[str, Any]

    def __array__(self, dtype=None, copy=None):  # np.asarray(result) -> the scores
        return np.asarray(self.scores, dtype=dtype)


class AttackFn(Protocol):
    def __call__(self, oracle: Any, x: Any, y: Any, /, **options: Any) -> np.ndarray: ...


def _check(name: str, fn: Any, meta: dict) -> None:
    if not callable(fn):
        raise TypeError(f"register_attack({name!r}) must decorate a callable")
    opts = meta.get("options") or {}
    bad = [k for k, v in opts.items() if not isinstance(v, Field)]
    if bad:
        raise TypeError(f"attack {name!r}: option {bad[0]!r} must be a fedaudit.options.Field "
                        "(see fedaudit.options.option)")
    kinds = meta.get("data")
    if not kinds or any(k not in DATA_KINDS for k in kinds):
        raise TypeError(f"attack {name!r}: data = {kinds!r}; allowed: a non-empty tuple of "
                        f"{', '.join(DATA_KINDS)}")


#: name -> attack function, with meta ``label`` (for tables and figures) and ``options``
#: (name -> :class:`fedaudit.options.Field`: the scenario's ``[attack.<name>]`` table).
ATTACKS: Registry[str, Callable[..., np.ndarray]] = Registry(
    "attack", name_pattern=r"[a-z][a-z0-9_-]*", check=_check)


def register_attack(name: str, *, label: str | None = None,
                    options: Mapping[str, Field] | None = None,
                    cost: Callable[..., float] | None = None, references: bool = False,
                    server_view: bool = False, data: tuple[str, ...] = ("image",),
                    vocabulary: bool = False, replace: bool = False):
    """Decorator: register ``fn(oracle, x, y, **options)`` under ``name`` (lowercase
    letters, digits, ``-``, ``_``).  ``label`` names it in tables (default: the name);
    ``options`` declares its keyword options: they become the scenario table
    ``[attack.<name>]`` with these types, defaults and checks, and are passed to ``fn``.
    ``cost(sample_shape, **options)`` estimates oracle queries per sample (progress ETA;
    default 1).  ``references=True``: the attack also gets ``references=`` a
    :class:`attacks.reference.ReferenceSignals` (reference models' outputs; the run
    trains them, :mod:`fedaudit.audit.references`).  ``server_view=True``: the attack scores a
    client's model as the server received it, with the other clients' models of the round
    as its references (FedMIA); it runs on the ``clients`` target only.  ``data``: the
    kinds of data it scores, of :data:`DATA_KINDS` (default images only: an attack that
    says nothing is taken to assume class labels (N,); one that lists ``"text"`` also
    gets token sequences (N, L) with next-token targets (N, L) and the oracle's (N, L, V)
    probabilities); a scenario that lists it for other data is refused by validation.
    ``vocabulary=True``: the attack also gets ``vocabulary=`` the data's classes (text:
    one character per token id), e.g. to decode a sequence into its text (zlib).

    Registering a different function under a taken name raises ``ValueError`` (unless
    ``replace``); re-registering the same function (e.g. a module reload) replaces it.
    """
    return ATTACKS.register(name, replace=replace, label=label or name,
                            options=dict(options or {}), cost=cost, references=references,
                            server_view=server_view, data=tuple(data),
                            vocabulary=bool(vocabulary))


def attack_names() -> list[str]:
    """Sorted names of the registered attacks."""
    return list(ATTACKS.names())


def get_attack(name: str) -> Callable[..., np.ndarray]:
    """Return the attack registered under ``name``; ``ValueError`` listing allowed names."""
    return ATTACKS.get(name)


def attack_label(name: str) -> str:
    """The attack's display label (its name when unknown)."""
    return ATTACKS.meta(name).get("label", name) if name in ATTACKS else name


def needs_references(name: str) -> bool:
    """Whether the attack scores with reference models (``references=True``)."""
    return bool(ATTACKS.meta(name).get("references"))


def attack_data(name: str) -> tuple[str, ...]:
    """The kinds of data the attack scores (``data=`` at registration)."""
    return tuple(ATTACKS.meta(name).get("data", ("image",)))


def needs_vocabulary(name: str) -> bool:
    """Whether the attack takes ``vocabulary=`` (``vocabulary=True``)."""
    return bool(ATTACKS.meta(name).get("vocabulary"))


def server_view(name: str) -> bool:
    """Whether the attack needs the curious server's view (``server_view=True``)."""
    return bool(ATTACKS.meta(name).get("server_view"))


def trains_references(name: str) -> bool:
    """Whether the run must train reference models for the attack (a reference attack
    that is not a server-view one)."""
    return needs_references(name) and not server_view(name)


def attack_options(name: str) -> Mapping[str, Field]:
    """The options the attack declared (empty when none)."""
    return ATTACKS.meta(name).get("options", {})

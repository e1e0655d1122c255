"""Registry of gradient-inversion attacks: name -> reconstruction function.

Every attack has the signature ::

    fn(case, *, num_samples, labels, budget, seed, **options) -> Reconstruction

``case`` is an :class:`attacks.update_case.UpdateCase` (what the server holds of one
client in one round); ``num_samples`` the number of images to rebuild (the samples the
update was computed on: ``case.training.num_examples``); ``labels`` an (N,) array of class
ids the caller supplies (the label-leakage family's guess, or the truth -- the caller says
which) or None (the attack optimises them jointly, or refuses); ``budget`` the optimiser's
:class:`Budget`; ``seed`` makes the result reproducible (same seed, same CPU and thread
count: bit-identical images).  The attack returns a :class:`Reconstruction`.

One (client, round) job is one plain call of ``fn``: it holds no state beyond its
arguments, so it can be shipped to a worker process as it is.

Adding an attack is one file in ``attacks/reconstruction/`` with one decorator line::

    from attacks.reconstruction.registry import register_reconstruction

    @register_reconstruction("my-inversion", label="mine", options={...})
    def my_inversion(case, *, num_samples, labels, budget, seed, **options):
        ...
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from fedaudit.options import Field, check_options, check_value
from fedaudit.registry import Registry

__all__ = ["Budget", "RECONSTRUCTIONS", "Reconstruction", "ReconstructionFn",
           "get_reconstruction", "reconstruction_label", "reconstruction_names",
           "reconstruction_options", "register_reconstruction", "resolve_options"]


@dataclass(frozen=True)
class Budget:
    """How much optimisation one (client, round) job may spend, and where.

    ``iterations``: optimiser iterations per restart (each one simulated update and its
    backward through the matching loss: a double backward); ``restarts``: independent
    random initialisations, the one of lowest final matching loss is kept; ``lr``: the
    optimiser's step size (None: the attack's own default, from its paper); ``device``:
    the torch device the optimisation runs on (``cpu``, ``cuda`` or ``cuda:N``).  The
    random initialisations are drawn on the CPU whatever the device, so a GPU run starts
    from the same dummy data as a CPU run; its result differs only by the devices'
    floating-point arithmetic (bit-identical results hold on one CPU and thread count)."""

    iterations: int
    restarts: int = 1
    lr: float | None = None
    device: str = "cpu"

    def __post_init__(self) -> None:
        if isinstance(self.iterations, bool) or not isinstance(self.iterations, int) \
                or self.iterations < 1:
            raise ValueError(f"Budget.iterations = {self.iterations!r}: must be an integer >= 1")
        if isinstance(self.restarts, bool) or not isinstance(self.restarts, int) \
                or self.restarts < 1:
            raise ValueError(f"Budget.restarts = {self.restarts!r}: must be an integer >= 1")
        if self.lr is not None and not (isinstance(self.lr, (int, float))
                                        and np.isfinite(self.lr) and self.lr > 0):
            raise ValueError(f"Budget.lr = {self.lr!r}: must be a finite number > 0 (or None: "
                             "the attack's default)")
        if not isinstance(self.device, str) or not re.fullmatch(r"cpu|cuda(:\d+)?",
                                                                self.device):
            raise ValueError(f"Budget.device = {self.device!r}: allowed 'cpu', 'cuda' or "
                             "'cuda:N'")


@dataclass(frozen=True)
class Reconstruction:
    """What an attack rebuilt from one update.

    ``images``: (N, *input_shape) float32, inside ``case.box``; ``labels``: (N,) int64
    (the given ones, or the argmax of the jointly optimised soft labels); ``loss``: the
    matching loss (the attack's distance, without priors) of the kept restart at the
    returned images and labels; ``iterations``: optimiser iterations run per restart;
    ``info``: what the attack chose on the way (per-restart losses, the kept restart,
    whether labels were given, single gradient or unrolled steps...)."""

    images: np.ndarray
    labels: np.ndarray
    loss: float
    iterations: int
    info: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.images.dtype != np.float32 or self.labels.dtype != np.int64 \
                or self.labels.shape != self.images.shape[:1]:
            raise ValueError(f"Reconstruction needs float32 images (N, ...) and int64 labels "
                             f"(N,); got {self.images.dtype} {self.images.shape} and "
                             f"{self.labels.dtype} {self.labels.shape}")


class ReconstructionFn(Protocol):
    def __call__(self, case: Any, /, *, num_samples: int, labels: np.ndarray | None,
                 budget: Budget, seed: int, **options: Any) -> Reconstruction: ...


def _check(name: str, fn: Any, meta: dict) -> None:
    if not callable(fn):
        raise TypeError(f"register_reconstruction({name!r}) must decorate a callable")
    check_options(f"reconstruction {name!r}", meta.get("options", {}))


#: name -> attack function, with meta ``label`` (tables and figures), ``options`` (name ->
#: :class:`fedaudit.options.Field`) and ``joint_labels`` (whether it optimises labels itself
#: when none are given).
RECONSTRUCTIONS: Registry[str, ReconstructionFn] = Registry(
    "reconstruction", name_pattern=r"[a-z][a-z0-9_-]*", check=_check)


def register_reconstruction(name: str, *, label: str | None = None,
                            options: Mapping[str, Field] | None = None,
                            joint_labels: bool = False, replace: bool = False):
    """Decorator: register ``fn(case, *, num_samples, labels, budget, seed, **options)``
    under ``name`` (lowercase letters, digits, ``-``, ``_``).  ``label`` names it in tables
    (default: the name); ``options`` declares its keyword options (types, defaults,
    checks), which :func:`resolve_options` validates; ``joint_labels=True`` says it can
    run with ``labels=None`` (optimising labels jointly), otherwise it refuses them.
    Registering a different function under a taken name raises ``ValueError`` (unless
    ``replace``)."""
    return RECONSTRUCTIONS.register(name, replace=replace, label=label or name,
                                    options=dict(options or {}),
                                    joint_labels=bool(joint_labels))


def get_reconstruction(name: str) -> ReconstructionFn:
    """The attack registered under ``name``; ``ValueError`` listing the allowed names."""
    return RECONSTRUCTIONS.get(name)


def reconstruction_names() -> list[str]:
    """Sorted names of the registered attacks."""
    return list(RECONSTRUCTIONS.names())


def reconstruction_label(name: str) -> str:
    """The attack's display label (its name when unknown)."""
    return RECONSTRUCTIONS.meta(name).get("label", name) if name in RECONSTRUCTIONS else name


def reconstruction_options(name: str) -> Mapping[str, Field]:
    """The options the attack declared (empty when none)."""
    return RECONSTRUCTIONS.meta(name).get("options", {})


def resolve_options(name: str, given: Mapping[str, Any]) -> dict[str, Any]:
    """Every declared option of attack ``name`` at its ``given`` value (checked against its
    declaration: one-line :class:`fedaudit.errors.ScenarioError`) or else its default; an
    undeclared option is a ``TypeError`` naming the declared ones."""
    declared = reconstruction_options(name)
    unknown = [k for k in given if k not in declared]
    if unknown:
        raise TypeError(f"reconstruction {name!r} has no option {unknown[0]!r}; its options: "
                        + (", ".join(declared) or "none"))
    return {k: check_value(f"reconstruction {name!r} option {k}", f, given[k])
            if k in given else f.default for k, f in declared.items()}

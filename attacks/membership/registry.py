"""Registry of membership-inference attacks: name -> scoring function.

Every attack has the signature ``fn(oracle, x, y, **options) -> np.ndarray``: it may only
query ``oracle`` (an :class:`attacks.membership.oracle.Oracle`), and returns one score per sample of
``x``, oriented so that higher means "more likely a member". ``y`` holds the true labels
(attacks that do not need them, such as Res-MIA, ignore them).

Adding an attack is one file in ``attacks/`` with one decorator line::

    from attacks.membership.registry import register_attack

    @register_attack("my-attack")
    def my_attack(oracle, x, y, *, some_option=1.0):
        ...

``attacks/__init__.py`` imports every public module of the package, so the decorator runs
as soon as ``attacks`` (or anything inside it) is imported.
"""

from __future__ import annotations

from dataclasses import dataclass

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Protocol

import numpy as np

from fedaudit.options import Field
from fedaudit.registry import Registry

__all__ = ["ATTACKS", "AttackCurves", "AttackFn", "AttackScores", "DATA_KINDS",
           "ReferenceNeeds", "register_attack", "get_attack", "attack_names", "attack_order",
           "attack_label", "attack_options", "attack_data", "attack_curves", "gnq_linked",
           "needs_references", "needs_vocabulary", "reference_needs", "reference_summary",
           "resolve_options", "server_view", "trains_references"]

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


@dataclass(frozen=True)
class ReferenceNeeds:
    """What a reference attack needs of the reference signals
    (:class:`attacks.membership.reference_signals.ReferenceSignals`) beyond the references' outputs on the
    audit samples and the population: the references' outputs on the ``augment`` views of
    the audit samples (LiRA's augmented queries, :func:`attacks.membership.augment.augmented_views`)
    and, with ``tuning``, on the samples offline RMIA tunes its ``a`` on.  The run asks
    every listed reference attack (``reference_needs=`` at registration) and computes the
    union once per target (:meth:`union`)."""

    augment: str = "none"
    tuning: bool = False

    @staticmethod
    def union(needs: Iterable["ReferenceNeeds"]) -> "ReferenceNeeds":
        """One set of signals that serves every attack of ``needs``; ``ValueError`` when two
        attacks need the views of different augmentations (the signals hold one)."""
        needs = list(needs)
        views = sorted({n.augment for n in needs} - {"none"})
        if len(views) > 1:
            raise ValueError(f"the reference attacks need the views of different "
                             f"augmentations ({', '.join(views)}); the signals hold one")
        return ReferenceNeeds(views[0] if views else "none", any(n.tuning for n in needs))


@dataclass(frozen=True)
class AttackCurves:
    """A per-sample curve an attack's score summarises (Res-MIA: the confidence in the
    predicted class at each erosion step), declared with ``curves=`` at registration.  The
    ``attack-curves`` stage averages it over the members and over the non-members on the
    final global model (results.json ``<name>_curves``: ``members``, ``nonmembers``) and
    the report draws it with this title, guide and axes.

    ``compute(oracle, x, y, **options)``: the (N, K) curves of the N samples, with the
    attack's options.  ``ticks(sample_shape, options, k)``: the k x-tick labels (None: the
    step numbers); ``options`` are the scenario's ``[attack.<name>]`` table as recorded."""

    compute: Callable[..., np.ndarray]
    title: str
    guide: str
    xlabel: str
    ylabel: str
    ylim: tuple[float, float] | None = None
    ticks: Callable[[Sequence[int], Mapping[str, Any], int], list[str] | None] | None = None


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
    curves = meta.get("curves")
    if curves is not None and not isinstance(curves, AttackCurves):
        raise TypeError(f"attack {name!r}: curves must be an attacks.membership.registry.AttackCurves")
    needs = meta.get("reference_needs")
    if needs is not None and not meta.get("references"):
        raise TypeError(f"attack {name!r}: reference_needs needs references=True")
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
                    vocabulary: bool = False,
                    reference_needs: Callable[..., ReferenceNeeds] | None = None,
                    resolve: Callable[[dict[str, Any], Any], tuple[dict[str, Any], str | None]]
                    | None = None,
                    reference_summary: tuple[str, ...] = (), curves: AttackCurves | None = None,
                    gnq_link: bool = False, order: int = 900, replace: bool = False):
    """Decorator: register ``fn(oracle, x, y, **options)`` under ``name`` (lowercase
    letters, digits, ``-``, ``_``).  ``label`` names it in tables (default: the name);
    ``options`` declares its keyword options: they become the scenario table
    ``[attack.<name>]`` with these types, defaults and checks, and are passed to ``fn``.
    ``cost(sample_shape, **options)`` estimates oracle queries per sample (progress ETA;
    default 1).  ``references=True``: the attack also gets ``references=`` a
    :class:`attacks.membership.reference_signals.ReferenceSignals` (reference models' outputs; the run
    trains them, :mod:`fedaudit.audit.reference_models`).  ``server_view=True``: the attack scores a
    client's model as the server received it, with the other clients' models of the round
    as its references (FedMIA); it runs on the ``clients`` target only.  ``data``: the
    kinds of data it scores, of :data:`DATA_KINDS` (default images only: an attack that
    says nothing is taken to assume class labels (N,); one that lists ``"text"`` also
    gets token sequences (N, L) with next-token targets (N, L) and the oracle's (N, L, V)
    probabilities); a scenario that lists it for other data is refused by validation.
    ``vocabulary=True``: the attack also gets ``vocabulary=`` the data's classes (text:
    one character per token id), e.g. to decode a sequence into its text (zlib).

    What the audit prepares or reports for it, declared here so that nothing outside the
    attack's file switches on its name (LeakPro's habit: each attack says what it needs):
    ``reference_needs(**options)`` (a reference attack) returns the :class:`ReferenceNeeds`
    the attack has with these options (default: the references' outputs alone);
    ``resolve(options, train)`` fills in the options that follow the local training (the
    scenario's ``[train]`` table) and returns them with a warning or None (LiRA's
    ``augment = "auto"``: the views the models trained on);
    ``reference_summary``: keys of its reported ``info`` that results.json ``references``
    also records, as ``<name>_<key>``, from the final global model (RMIA's tuned ``a``);
    ``curves``: the per-sample curve its score summarises (:class:`AttackCurves`);
    ``gnq_link=True``: the ``gnq-link`` stage relates GNQ to its scores on the final
    global model (results.json ``gnq_vs_attack``).  ``order``: where tables and figures
    show it (:func:`attack_order`: by increasing ``order``, ties in registration order;
    the built-in attacks use 100-400).

    Registering a different function under a taken name raises ``ValueError`` (unless
    ``replace``); re-registering the same function (e.g. a module reload) replaces it.
    """
    return ATTACKS.register(name, replace=replace, label=label or name,
                            options=dict(options or {}), cost=cost, references=references,
                            server_view=server_view, data=tuple(data),
                            vocabulary=bool(vocabulary), reference_needs=reference_needs,
                            resolve=resolve,
                            reference_summary=tuple(reference_summary), curves=curves,
                            gnq_link=bool(gnq_link), order=int(order))


def attack_names() -> list[str]:
    """Sorted names of the registered attacks."""
    return list(ATTACKS.names())


def attack_order() -> tuple[str, ...]:
    """The registered attacks in the order tables and figures show them: by the ``order``
    each declared at registration, ties in registration order."""
    names = list(ATTACKS)
    return tuple(sorted(names, key=lambda m: (ATTACKS.meta(m).get("order", 900),
                                              names.index(m))))


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


def reference_needs(name: str, options: Mapping[str, Any]) -> ReferenceNeeds:
    """What the reference attack ``name`` needs of the reference signals with ``options``
    (its declared ``reference_needs``; none beyond the references' outputs by default)."""
    fn = ATTACKS.meta(name).get("reference_needs")
    return fn(**options) if fn is not None else ReferenceNeeds()


def resolve_options(name: str, options: Mapping[str, Any],
                    train: Any) -> tuple[dict[str, Any], str | None]:
    """The options of attack ``name`` with those that follow the local training (``train``,
    the scenario's ``[train]`` table) filled in, and a warning or None (its declared
    ``resolve``; the options unchanged by default)."""
    fn = ATTACKS.meta(name).get("resolve")
    return fn(dict(options), train) if fn is not None else (dict(options), None)


def reference_summary(name: str) -> tuple[str, ...]:
    """The keys of the attack's ``info`` that results.json ``references`` records."""
    return tuple(ATTACKS.meta(name).get("reference_summary", ()))


def attack_curves(name: str) -> AttackCurves | None:
    """The per-sample curve the attack declared (None: none)."""
    return ATTACKS.meta(name).get("curves")


def gnq_linked(name: str) -> bool:
    """Whether the ``gnq-link`` stage relates GNQ to this attack's scores."""
    return bool(ATTACKS.meta(name).get("gnq_link"))

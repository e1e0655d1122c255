"""Families of attacks on updates (issue 48): what a family declares, and their registry.

A family asks one question of what a client sent (:class:`attacks.update_case.UpdateCase`)
-- which labels it trained on (:mod:`attacks.label_leakage`), which images
(:mod:`attacks.reconstruction`) -- with its own registry of attacks.  Its
:class:`UpdateAttackFamily` declares everything the layers above need, so that they run
and show it without knowing it (like a membership attack, one package):

* its scenario table ``[<name>]``: the common keys (:data:`COMMON`: ``enabled``,
  ``methods``, ``clients``, ``rounds``) and its own (:attr:`~UpdateAttackFamily.options`),
  plus one ``[<name>.<attack>]`` table per attack that declares options;
* what its jobs need from the scenario (:meth:`~UpdateAttackFamily.settings`: plain
  values) and from the data (:meth:`~UpdateAttackFamily.inputs`: auxiliary arrays), both
  part of the job's cache key, and how one attack runs on one case
  (:meth:`~UpdateAttackFamily.attack`);
* how its outputs are scored against the clients' true samples, and pooled
  (:meth:`~UpdateAttackFamily.score`: results.json ``<name>``, optionally a ``.npz``);
* how its results read: a console line, ``compare`` / ``sweep`` columns, the
  threat-matrix cell (:class:`Headline`) and the report's blocks (:class:`ReportTable`
  and paragraphs), all from its results.json section alone, so old runs read too;
* which attacker positions can run it (:attr:`~UpdateAttackFamily.positions`).

The audit runs one job per (kept case, enabled family)
(:mod:`fedaudit.audit.update_attacks`): ``prepare`` once, then ``attack`` per method, each
timed, with one torch thread.  A new family is a package here with one class under
``@register_family`` (``tests/helpers/extension.py`` registers one from outside).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from fedaudit.options import Field, check_options, option
from fedaudit.registry import Registry, instance_registrar

__all__ = ["AGGREGATE_CLIENT", "AGGREGATE_ONLY", "COMMON", "EACH_UPDATE", "FAMILIES",
           "ON_VIEWS", "Block", "CaseOutput", "CaseTruth",
           "Headline", "JobSpec", "ReportTable", "Scored", "Scoring", "UpdateAttackFamily",
           "check_rounds", "enabled_families", "families", "first_pooled", "register_family"]

#: the position that holds each client's update as received (the threat matrix's row)
EACH_UPDATE = "curious server (each update)"
#: the position that holds only each round's aggregate (secure aggregation)
AGGREGATE_ONLY = "curious server (aggregate only)"
#: what a family's ``on`` may list: each client's update, or the round's aggregate (the
#: change of the global model over the round, which every client and a server under secure
#: aggregation see), with the words tables use
ON_VIEWS: Mapping[str, str] = {"updates": "each client's update",
                               "aggregate": "the round's aggregate"}
#: the ``client`` of a case that is a round's aggregate, not one client's update
AGGREGATE_CLIENT = -1


#: the words ``rounds`` takes beside round numbers (``every N`` too)
ROUND_WORDS = ("first", "middle", "last")


def check_rounds(value: Any) -> str | None:
    """``rounds``: ``first``, ``middle``, ``last``, ``all``, ``every N`` or a non-empty list
    of round numbers and the words ``first``, ``middle``, ``last``."""
    if isinstance(value, str):
        if value in (*ROUND_WORDS, "all") or re.fullmatch(r"every [1-9][0-9]*", value):
            return None
        return "must be 'first', 'middle', 'last', 'all', 'every N' or a list of rounds"
    if not value or any(isinstance(r, bool) or not (isinstance(r, int) and r >= 1
                                                     or r in ROUND_WORDS) for r in value):
        return ("a list of rounds must hold round numbers >= 1 or the words 'first', "
                "'middle', 'last'")
    return None


#: the keys every family's table has (``methods`` gets the family's registry as choices)
COMMON: Mapping[str, Field] = {
    "enabled": option(bool, False, "run this family's attacks on the clients' updates "
                      "(the server's view)"),
    "clients": option(list, [], "clients whose updates are attacked ([] = every client)",
                      item_types=(int,)),
    "rounds": option((str, list), "first", "rounds attacked: first, middle, last, all, "
                     "'every N' (rounds N, 2N, ...) or a list of round numbers and those words "
                     "(e.g. ['first', 'middle', 'last'])", check=check_rounds),
    "on": option(list, ["updates"], "what is attacked: updates (each selected client's update, "
                 "as the server receives it), aggregate (each selected round's aggregate: the "
                 "change of the global model, which every client and a server under secure "
                 "aggregation see; attacked as one client holding the round's samples)",
                 item_types=(str,), item_choices=tuple(ON_VIEWS)),
}


@dataclass(frozen=True)
class JobSpec:
    """What a family's job carries beyond its case: the attacks to run, in order, each
    one's options, the family's :meth:`~UpdateAttackFamily.settings`, the client's true
    labels (for an attack given them as an upper bound, said so in its results), the torch
    device, and the arrays the attacker holds beside the case
    (:meth:`~UpdateAttackFamily.inputs`: auxiliary data)."""

    methods: tuple[str, ...]
    options: Mapping[str, Mapping[str, Any]]
    settings: Mapping[str, Any]
    true_labels: np.ndarray
    device: str = "cpu"
    inputs: Mapping[str, np.ndarray] = field(default_factory=dict)


@dataclass(frozen=True)
class CaseOutput:
    """One job's outputs: per method, what its attack returned and the seconds it took."""

    client: int
    round: int
    outputs: Mapping[str, Any]
    seconds: Mapping[str, float]


@dataclass(frozen=True)
class CaseTruth:
    """What the audit knows of a case and no attack sees: the client's samples of the
    round (ids into the dataset, inputs, labels)."""

    client: int
    round: int
    ids: np.ndarray
    x: np.ndarray
    y: np.ndarray


@dataclass(frozen=True)
class Scoring:
    """What scoring needs beside the outputs: the methods the family ran (in the table's
    order), each output's truth (same order as the outputs), the number of classes, the
    data-free prior image (the train split's mean), the family's settings, the torch
    device the jobs ran on, the family's inputs and the class prior of the server's
    auxiliary data (the holdout split's label frequencies: what it knows of a client's
    labels without its update; None: uniform)."""

    methods: Sequence[str]
    truths: Sequence[CaseTruth]
    num_classes: int
    prior: np.ndarray
    settings: Mapping[str, Any]
    device: str = "cpu"
    inputs: Mapping[str, np.ndarray] = field(default_factory=dict)
    class_prior: np.ndarray | None = None


@dataclass(frozen=True)
class Scored:
    """A family's results: its results.json ``section`` and, optionally, per-sample
    ``arrays`` that the audit saves as the family's :attr:`~UpdateAttackFamily.file`."""

    section: dict[str, Any]
    arrays: dict[str, np.ndarray] | None = None


@dataclass(frozen=True)
class Headline:
    """A family's threat-matrix cell: the ``figure`` (None when there is no single number),
    a short ``text``, and where it has them its 95 % ``interval``, its ``verdict`` (one of
    :data:`fedaudit.verdicts.OUTCOMES`), the ``chance`` level the verdict is against and
    the verdict's ``detail`` (:meth:`fedaudit.verdicts.Verdict.as_dict`: delta, unit, the
    deciding estimate, the most exposed client)."""

    figure: float | None
    text: str
    interval: list[float] | None = None
    verdict: str | None = None
    #: the figure a guess without information reaches (the verdict is against it)
    chance: float | None = None
    detail: dict[str, Any] | None = None


@dataclass(frozen=True)
class ReportTable:
    """A table of the report: column names and rows of text (columns in ``text_cols`` are
    left-aligned words, the others numbers)."""

    header: Sequence[str]
    rows: Sequence[Sequence[str]]
    text_cols: tuple[int, ...] = (0,)


#: what a family's report section holds: a paragraph (text) or a table
Block = str | ReportTable


class UpdateAttackFamily:
    """One family of attacks on updates (module docstring).  Subclasses set the class
    attributes and implement :meth:`attack` and :meth:`score`; the reading methods default
    to nothing."""

    #: the scenario table and results.json key (``label_leakage``)
    name: ClassVar[str]
    #: the threat matrix's column (``label leakage``)
    title: ClassVar[str]
    #: its attacks (name -> callable; meta ``options`` declares each one's table)
    attacks: ClassVar[Registry]
    #: ``methods``' default
    default_methods: ClassVar[tuple[str, ...]] = ()
    #: the keys of ``[<name>]`` beside :data:`COMMON` and ``methods``
    options: ClassVar[Mapping[str, Field]] = {}
    #: the attacker positions that can run it (threat-matrix rows)
    positions: ClassVar[tuple[str, ...]] = (EACH_UPDATE,)
    #: what ``on`` may list for it (keys of :data:`ON_VIEWS`): an attack that models one
    #: client's update may not fit an average of several
    views: ClassVar[tuple[str, ...]] = ("updates",)
    #: the ``compare`` / ``sweep`` columns :meth:`columns` may give, in table order
    column_names: ClassVar[tuple[str, ...]] = ()
    #: the column :meth:`cell`'s verdict judges (``compare`` shows it there; None: the
    #: first of :attr:`column_names`)
    verdict_column: ClassVar[str | None] = None
    #: the run-directory file its per-sample arrays go to (None: none)
    file: ClassVar[str | None] = None
    #: families run and read in increasing order
    order: ClassVar[int] = 500

    # ---- the scenario -------------------------------------------------------------
    def table(self) -> dict[str, Field]:
        """``[<name>]``: :data:`COMMON`, ``methods`` and :attr:`options`."""
        methods = option(list, list(self.default_methods), f"{self.title} attacks "
                         "(registered)", item_types=(str,), item_choices=self.attacks.names)
        return {**COMMON, "methods": methods, **self.options}

    def tables(self) -> dict[str, dict[str, Field]]:
        """``[<name>]`` and ``[<name>.<attack>]`` for each attack that declares options (read
        each time: an attack registered later has its table at once)."""
        out = {self.name: self.table()}
        for attack in self.attacks.names():
            if opts := self.attacks.meta(attack).get("options"):
                out[f"{self.name}.{attack}"] = dict(opts)
        return out

    def check(self, scenario: Any) -> str | None:
        """What an enabled family needs of the scenario beyond its table's types (one line,
        or None)."""
        return None

    def methods_for(self, table: Mapping[str, Any], num_examples: int
                    ) -> tuple[tuple[str, ...], str | None]:
        """The methods run on an update of ``num_examples`` samples, and a note when some
        are left out."""
        return tuple(table["methods"]), None

    def settings(self, scenario: Any) -> dict[str, Any]:
        """What the jobs need from the scenario beyond the methods and their options: plain,
        JSON-friendly values (they key the cache)."""
        return {k: scenario.stages[self.name][k] for k in self.options}

    def inputs(self, scenario: Any, data: Any) -> dict[str, np.ndarray]:
        """Arrays the attacker holds beside each case (auxiliary data drawn from samples
        no client holds), built once in the driver from the run's
        :class:`fedaudit.data.FederatedData`; they travel with every job and key its cache
        (empty by default)."""
        return {}

    # ---- a job --------------------------------------------------------------------
    def prepare(self, case: Any, spec: JobSpec) -> Any:
        """What every method of a job shares, computed once (None by default)."""
        return None

    def attack(self, case: Any, method: str, spec: JobSpec, prepared: Any) -> Any:
        raise NotImplementedError

    # ---- scoring and reading ------------------------------------------------------
    def score(self, outputs: Sequence[CaseOutput], scoring: Scoring) -> Scored:
        raise NotImplementedError

    def console(self, section: Mapping[str, Any]) -> str | None:
        """One line for ``fedaudit run``'s summary (None: none)."""
        return None

    def columns(self, section: Mapping[str, Any]) -> dict[str, float | None]:
        """``compare`` / ``sweep`` columns (named in :attr:`column_names`)."""
        return {}

    def cell(self, section: Mapping[str, Any]) -> Headline | None:
        """The threat-matrix cell of the positions that ran it (None: not measured)."""
        return None

    def why_not(self, section: Mapping[str, Any]) -> str | None:
        """Why a section that ran has no cell (:meth:`cell` is None), in one line, when the
        family knows (None: the matrix says no update was attacked)."""
        return None

    def report(self, section: Mapping[str, Any]) -> list[Block]:
        """The report's paragraphs and tables."""
        return []


def _check(name: str, family: Any, meta: dict) -> None:
    if not isinstance(family, UpdateAttackFamily):
        raise TypeError(f"update-attack family {name!r} must be an UpdateAttackFamily")
    if not isinstance(getattr(family, "attacks", None), Registry):
        raise TypeError(f"update-attack family {name!r}: attacks must be a Registry")
    clash = sorted(set(family.options) & {*COMMON, "methods"})
    if clash:
        raise TypeError(f"update-attack family {name!r}: option {clash[0]!r} is a common key")
    check_options(f"update-attack family {name!r}", family.options)


#: name -> family
FAMILIES: Registry[str, UpdateAttackFamily] = Registry(
    "update-attack family", name_pattern=r"[a-z][a-z0-9_]*", check=_check)

register_family = instance_registrar(
    FAMILIES, "name", """Class decorator: register an instance of an
    :class:`UpdateAttackFamily` subclass under its ``name`` (a taken name needs
    ``replace=True``).""")


def first_pooled(section: Any) -> tuple[str, dict[str, Any]]:
    """A family's headline: its first method and that method's pooled results
    (``("", {})`` when the section lists no method)."""
    methods = section.get("methods") if isinstance(section, Mapping) else None
    if not methods:
        return "", {}
    return methods[0], (section.get("pooled") or {}).get(methods[0]) or {}


def families() -> list[UpdateAttackFamily]:
    """The registered families in order, the built-in ones included."""
    import attacks  # noqa: F401  (registers the built-in families)

    return sorted(FAMILIES.values(), key=lambda f: (f.order, f.name))


def enabled_families(scenario: Any) -> list[UpdateAttackFamily]:
    """The families ``scenario`` enables (``[<name>] enabled = true``), in order."""
    return [f for f in families() if (scenario.stages.get(f.name) or {}).get("enabled")]


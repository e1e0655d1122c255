"""Audit stages: the work after the last round, as registered steps run in order over one
:class:`~fedaudit.audit.context.AuditContext` (:func:`run_stages`).

A :class:`Stage` declares when it runs (:meth:`~Stage.enabled`, from the scenario alone),
what the scenario must satisfy then (:meth:`~Stage.check`, run by the scenario's
validation), the server-side probes it needs while training (:meth:`~Stage.probes`), the
scenario tables it adds (:attr:`~Stage.options`: ``{"table": {key:
Field}}``, read with ``scenario.stages["table"]``), the results.json paths it writes
(:attr:`~Stage.writes`, checked after it runs: :mod:`fedaudit.audit.writes`) and its place
(:attr:`~Stage.order`); its report section, if it wants one, is
:func:`fedaudit.report.sections.register_section` (and figures with
:func:`fedaudit.report.registry.figure`) in the same file.  A stage reads what earlier
stages produced from the context's typed products, never from results.json.  The built-in
stages, in order: quantization and r_Qn (100), reference models (200), the one-run DP
audit (300), the attacks on every listed target (400), the secrets (450), the attacks'
declared curves (500), the GNQ-attack link (600), the attacker positions (800), plug-ins
(default 900), scores.npz (1000).  A new stage is one class with ``@register_stage``, in a
file or a notebook cell.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, ClassVar

from fedaudit.audit.writes import check_declared, check_writes, snapshot
from fedaudit.options import Field
from fedaudit.registry import Registry, instance_registrar
from fedaudit.scenario import Scenario

if TYPE_CHECKING:
    from fedaudit.audit.context import AuditContext
    from fedaudit.data import FederatedData

__all__ = ["STAGES", "Stage", "check_stage_data", "ordered_stages", "register_stage",
           "run_stages"]


class Stage:
    """One step of the audit after training."""

    #: the registry key
    name: ClassVar[str]
    #: stages run by increasing order (ties: registration order)
    order: ClassVar[int] = 900
    #: scenario tables the stage declares: ``{"dotted.table": {key: Field}}``
    options: ClassVar[Mapping[str, Mapping[str, Field]]] = {}
    #: the results.json paths it adds or changes, e.g. ``("my_key",)``, ``"clients[].x"``
    #: (:mod:`fedaudit.audit.writes`); anything else it writes stops the run
    writes: ClassVar[tuple[str, ...]] = ()
    #: which results.json ``timing`` entry its seconds count towards
    timing: ClassVar[str] = "attack_seconds"

    def enabled(self, scenario: Scenario) -> bool:
        """Whether the stage runs for ``scenario``."""
        return True

    def check(self, scenario: Scenario) -> str | None:
        """What an enabled stage needs of the scenario (a one-line message, or None)."""
        return None

    def probes(self, scenario: Scenario) -> tuple[str, ...]:
        """The server-side probes an enabled stage needs while training
        (:mod:`fedaudit.probes`, by name)."""
        return ()

    def check_data(self, scenario: Scenario, data: "FederatedData") -> str | None:
        """What an enabled stage needs of the scenario's data, checked before training
        (``fedaudit run`` and ``fedaudit validate``; a one-line message, or None)."""
        return None

    def run(self, ctx: "AuditContext") -> None:
        raise NotImplementedError


def _check(name: str, stage: Any, meta: dict) -> None:
    if not isinstance(stage, Stage):
        raise TypeError(f"stage {name!r} must be a Stage instance")
    for table, fields in stage.options.items():
        bad = [k for k, f in fields.items() if not isinstance(f, Field)]
        if bad:
            raise TypeError(f"stage {name!r}: option {table}.{bad[0]} must be a "
                            "fedaudit.options.Field (see fedaudit.options.option)")
    check_declared(f"stage {name!r}", stage.writes)


#: name -> stage
STAGES: Registry[str, Stage] = Registry("audit stage", name_pattern=r"[a-z][a-z0-9_-]*",
                                        check=_check)


register_stage = instance_registrar(
    STAGES, "name", """Class decorator: register an instance of a :class:`Stage` subclass
    under its ``name`` (a taken name needs ``replace=True``).""")


def ordered_stages() -> list[Stage]:
    """Every registered stage in run order."""
    return sorted(STAGES.values(), key=lambda s: s.order)


def check_stage_data(scenario: Scenario, data: "FederatedData") -> str | None:
    """The first enabled stage's objection to ``data`` (one line), or None."""
    for stage in ordered_stages():
        if stage.enabled(scenario) and (msg := stage.check_data(scenario, data)):
            return msg
    return None


def run_stages(ctx: "AuditContext") -> dict[str, float]:
    """Run the enabled stages in order; the seconds spent per ``timing`` entry.  A stage
    that adds or changes a results.json path its :attr:`~Stage.writes` does not declare
    stops the run (``RuntimeError`` naming the stage and the path)."""
    timing = {"audit_seconds": 0.0, "attack_seconds": 0.0}
    for stage in ordered_stages():
        if not stage.enabled(ctx.scenario):
            continue
        before = snapshot(ctx.results)
        t0 = time.perf_counter()
        stage.run(ctx)
        timing[stage.timing] = timing.get(stage.timing, 0.0) + time.perf_counter() - t0
        check_writes(f"audit stage {stage.name!r}", stage.writes, before, ctx.results)
    return timing

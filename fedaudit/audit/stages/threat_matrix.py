"""The run's column of the threat-model matrix (:mod:`fedaudit.rundir.threat_matrix`):
results.json ``threat_matrix``, after every attack stage."""

from __future__ import annotations

from fedaudit.audit.context import AuditContext
from fedaudit.audit.stages.base import Stage, register_stage

__all__ = ["ThreatMatrix"]


@register_stage
class ThreatMatrix(Stage):
    name = "threat-matrix"
    order = 950
    writes = ("threat_matrix",)
    timing = "attack_seconds"

    def enabled(self, scenario):
        return True

    def run(self, ctx: AuditContext) -> None:
        from fedaudit.rundir.threat_matrix import matrix_json, threat_matrix

        ctx.results["threat_matrix"] = matrix_json(threat_matrix(ctx.results))

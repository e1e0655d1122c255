"""scores.npz: every score row the stages produced, last (docs/guide.md section 4)."""

from __future__ import annotations

from fedaudit.audit.attack_loop import write_scores
from fedaudit.audit.context import AuditContext
from fedaudit.audit.stages.base import Stage, register_stage


@register_stage
class Scores(Stage):
    name = "scores"
    order = 1000

    def enabled(self, scenario):
        return scenario.attack.enabled

    def run(self, ctx: AuditContext) -> None:
        write_scores(ctx)

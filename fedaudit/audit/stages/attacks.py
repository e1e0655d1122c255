"""The membership attacks on every target kind ``attack.targets`` lists (in the target
registry's order): each kind's targets through the one attack loop
(:func:`fedaudit.audit.attack_loop.attack`), their typed results left in ``ctx.attacked``,
then the kind records its results.json entries (the paths it declares in ``writes``,
checked here) and score rows (docs/algorithms.md sections 3-5, 9)."""

from __future__ import annotations

from attacks.membership.registry import server_view
from fedaudit.audit.attack_loop import AttackTracker, attack
from fedaudit.audit.context import AuditContext
from fedaudit.audit.stages.base import Stage, register_stage
from fedaudit.audit.targets import TARGETS, selected_kinds
from fedaudit.audit.writes import check_writes, snapshot


@register_stage
class Attacks(Stage):
    name = "attacks"
    order = 400

    @property
    def writes(self) -> tuple[str, ...]:
        """What the registered target kinds write (each its own ``writes``)."""
        return tuple(dict.fromkeys(p for kind in TARGETS.values() for p in kind.writes))

    def enabled(self, scenario):
        return scenario.attack.enabled

    def check(self, scenario):
        """A server-view attack (FedMIA) needs the clients' models; every listed kind
        its own requirements."""
        a = scenario.attack
        server = [m for m in a.methods if server_view(m)]
        if server and "clients" not in a.targets:
            return (f"attack.methods lists {', '.join(server)}, which attacks the clients' "
                    "models as the server receives them: add 'clients' to attack.targets")
        kinds = selected_kinds(scenario)
        for kind in kinds:
            problem = kind.check(scenario)
            if problem:
                return problem
        runs = {k.name: k.methods(scenario) for k in kinds}
        unrun = [m for m in a.methods if not any(m in ms for ms in runs.values())]
        if unrun:
            runs = "; ".join(f"{k}: {', '.join(ms) or 'nothing'}" for k, ms in runs.items())
            return (f"attack.methods lists {', '.join(unrun)}, which no target in "
                    f"attack.targets = {list(a.targets)!r} runs ({runs})")
        return None

    def run(self, ctx: AuditContext) -> None:
        planned = [(kind, [t for t in kind.targets(ctx) if t.methods])
                   for kind in selected_kinds(ctx.scenario)]
        tracker = AttackTracker(ctx, [t for _, targets in planned for t in targets])
        index = 0
        for kind, targets in planned:
            results = []
            for target in targets:
                tracker.start(index)
                results.append(attack(ctx, target, tracker))
                index += 1
            ctx.attacked[kind.name] = results
            before = snapshot(ctx.results)
            ctx.scores += kind.record(ctx, results)
            check_writes(f"target kind {kind.name!r}", kind.writes, before, ctx.results)
        tracker.finish()

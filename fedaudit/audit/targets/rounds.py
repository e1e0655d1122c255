"""``rounds``: the global model after each selected round (``attack.rounds``) -- the
insider, a client who sees the whole trajectory.  The single-model attacks, pooled over
every client's audit set (docs/algorithms.md section 9)."""

from __future__ import annotations

from fedaudit.audit.targets.base import (Target, TargetKind, needs_model_method,
                                         register_target, selected_rounds,
                                         single_model_methods)


@register_target
class RoundModels(TargetKind):
    name = "rounds"
    describe = "the global model after each round (an insider)"
    position = "insider"
    writes = ("round_attacks",)

    def check(self, scenario):
        return needs_model_method(self, scenario)

    def methods(self, scenario):
        return single_model_methods(scenario)

    def targets(self, ctx):
        methods = self.methods(ctx.scenario)
        if not methods:
            return []
        traj = ctx.trajectory
        rounds = selected_rounds(list(range(1, len(traj.checkpoints) + 1)),
                                 ctx.scenario.attack.rounds)
        return [Target(f"round:{r}", self.name, lambda r=r: traj.state(r), methods,
                       per_client=False, round=r) for r in rounds]

    def record(self, ctx, results):
        """results.json ``round_attacks``: per round, the pooled metrics of each method."""
        ctx.results["round_attacks"] = [{"round": r.target.round, "attacks": r.metrics()}
                                        for r in results]
        return [row for r in results for row in r.rows]

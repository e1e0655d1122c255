"""results.json ``defense``: the kind's parameters and accounting, plus the notes that
hold for every accounted defense."""

from __future__ import annotations

from typing import Any

from fedaudit.defenses.base import get_defense
from fedaudit.scenario import Scenario


def defense_summary(scenario: Scenario, rounds: list[dict], *, num_sampled: int | None = None,
                    extra_trajectories: int = 0) -> dict[str, Any]:
    """results.json ``defense``: kind, parameters, epsilon, delta, accounting, notes.

    ``rounds`` are the rounds.jsonl records of the released trajectory (with ``dp_steps``
    / ``dp_sample_rate`` per client under dp-sgd and ``aggregated`` per round).
    """
    cfg = scenario.defense
    defense = get_defense(cfg.kind)
    out: dict[str, Any] = {"kind": cfg.kind, **defense.parameters(cfg)}
    out.update(defense.summary(cfg, rounds, num_clients=scenario.federation.num_clients,
                               num_sampled=num_sampled))
    if "notes" in out:
        notes = out["notes"] = list(out["notes"])
        if defense.accounted:
            notes.append("not covered: the train-loss / num-examples metrics and the "
                         "client-side GNQ scores that the testbed sends next to the update "
                         "(audit channel)")
        if extra_trajectories:
            notes.append(f"epsilon is that of the released trajectory; the "
                         f"{extra_trajectories} extra training seed(s) behind r_Qn (one "
                         "estimate per run) are separate trainings on the same data whose "
                         "privacy cost is not composed here")
    return out

"""What ``fedaudit matrix`` runs: per defense, the main run and one run per malicious
server, each an ordinary scenario (the scenario as given, then the defense's preset, then
the run's own keys), all validated before anything is written.

* **main** -- the honest-but-curious federation under the defense: membership inference on
  the released model, every round's model and, where the aggregation shows the server
  each update, each client's model (``attack.targets``); the families of attacks on
  updates named in ``[matrix] families`` switched on, on each update where the server sees
  it and on the rounds' aggregates where the family reads them (``<family>.on``); a
  family that can read neither under the defense (secure aggregation hides each update) is
  switched off.
* **one run per server of** ``[matrix] servers`` -- the same federation with that
  malicious server switched on (its table's ``enabled``), trained up to the round it
  attacks, without the membership attacks and the families (its own stage measures it).

A run's position in the matrix comes from :mod:`fedaudit.rundir.threat_matrix`; the
server runs give the sections their server declares (:attr:`fedaudit.servers.Server.sections`).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any, Iterable

from fedaudit.config import ScenarioError, load_scenario, to_toml
from fedaudit.defenses.presets import DefensePreset, preset_of
from fedaudit.probes.base import UPDATES
from fedaudit.scenario import Scenario

__all__ = ["MAIN", "MatrixPlan", "MatrixRun", "plan_matrix"]

#: the role of the honest-but-curious run of a defense
MAIN = "main"


@dataclass(frozen=True)
class MatrixRun:
    """One run of the matrix: the ``defense`` (preset name) and ``role`` (:data:`MAIN` or
    a malicious server kind) it stands for, the keys it sets after the scenario's own
    (preset first), and the resolved scenario."""

    defense: str
    role: str
    sets: tuple[str, ...]
    scenario: Scenario

    @property
    def key(self) -> str:
        """Its folder under ``DIR/runs`` and its name in matrix.json."""
        return f"{self.defense}--{self.role}"

    @property
    def fingerprint(self) -> str:
        """A digest of the resolved scenario: a resumed matrix must plan the same runs."""
        return hashlib.sha256(to_toml(self.scenario).encode()).hexdigest()[:16]


@dataclass(frozen=True)
class MatrixPlan:
    """Every run of a matrix, defense by defense (main run first)."""

    scenario: str  # the name or path as given
    name: str  # the scenario's own name
    sets: tuple[str, ...]
    defenses: tuple[DefensePreset, ...]
    runs: tuple[MatrixRun, ...]

    def runs_of(self, defense: str) -> list[MatrixRun]:
        return [r for r in self.runs if r.defense == defense]

    def as_json(self) -> dict[str, Any]:
        """``DIR/matrix-plan.json``: what a resumed matrix must plan again."""
        return {"format": 1, "scenario": self.scenario, "name": self.name,
                "sets": list(self.sets), "defenses": [d.name for d in self.defenses],
                "runs": [{"key": r.key, "defense": r.defense, "role": r.role,
                          "sets": list(r.sets), "fingerprint": r.fingerprint}
                         for r in self.runs]}


def _families() -> list[str]:
    from attacks.update_family import families

    return [f.name for f in families()]


def _listed(items: Iterable[str]) -> str:
    return "[" + ",".join(f"'{t}'" for t in items) + "]"


def _servers_off(but: str | None = None) -> list[str]:
    """Every malicious server's switch off (but ``but``'s): the main run's server is
    honest whatever the scenario says, and a server run has one malicious server."""
    from fedaudit.servers import SERVERS

    return [f"{next(iter(s.options))}.enabled=false" for k, s in SERVERS.items()
            if s.malicious and s.options and k != but]


def _main_sets(scenario: Scenario, families: Iterable[str]) -> list[str]:
    from attacks.update_family import FAMILIES
    from fedaudit.probes.aggregation import aggregation_of

    sees_updates = UPDATES in aggregation_of(scenario).shows
    targets = ["global", "rounds", *(["clients"] if sees_updates else [])]
    sets = ["attack.enabled=true", f"attack.targets={_listed(targets)}", *_servers_off()]
    for name in _families():
        views = [v for v in FAMILIES.get(name).views if sees_updates or v != "updates"]
        if not views or (name not in families and not sees_updates):
            sets.append(f"{name}.enabled=false")
        elif name in families:
            sets += [f"{name}.enabled=true", f"{name}.on={_listed(views)}"]
    return sets


def _server_sets(scenario: Scenario, kind: str) -> list[str]:
    from fedaudit.servers import SERVERS

    server = SERVERS.get(kind)
    table = next(iter(server.options))
    sets = [*_servers_off(but=kind), f"{table}.enabled=true", "attack.enabled=false",
            *(f"{fam}.enabled=false" for fam in _families())]
    attacked = scenario.stages.get(table, {}).get("round")
    if isinstance(attacked, int):  # train up to the attacked round, not beyond
        sets.append(f"federation.rounds={attacked}")
    return sets


def _check_names(base: Scenario, defenses: Iterable[str] | None) -> tuple[list[DefensePreset],
                                                                           list[str]]:
    from fedaudit.servers import SERVERS

    names = list(defenses) if defenses is not None else list(base.matrix.defenses)
    if not names:
        raise ScenarioError("matrix.defenses: lists no defense; allowed: a non-empty list")
    if len(set(names)) != len(names):
        raise ScenarioError(f"matrix.defenses: lists a defense twice ({', '.join(names)})")
    try:
        presets = [preset_of(n) for n in names]
    except ValueError as exc:
        raise ScenarioError(f"matrix.defenses: {exc}") from None
    malicious = [k for k, s in SERVERS.items() if s.malicious]
    for kind in base.matrix.servers:
        if kind not in malicious:
            raise ScenarioError(f"matrix.servers: unknown malicious server {kind!r}; allowed: "
                                f"{', '.join(malicious)} (or [] for none)")
    for fam in base.matrix.families:
        if fam not in _families():
            raise ScenarioError(f"matrix.families: unknown family {fam!r}; allowed: "
                                f"{', '.join(_families())}")
    return presets, list(base.matrix.servers)


def plan_matrix(scenario: str, defenses: Iterable[str] | None = None,
                sets: Iterable[str] = (), *, check: bool = True) -> MatrixPlan:
    """Every run of the matrix of ``scenario`` (a bundled name or a path) over
    ``defenses`` (default: its ``[matrix] defenses``), with ``sets`` applied to each; each
    run's scenario loaded and, with ``check``, checked as ``fedaudit run`` checks it
    (data, model, resources).  Raise :class:`ScenarioError` naming the defense and run on
    the first bad one; nothing is written."""
    from fedaudit.config.preflight import check_scenario

    sets = list(sets)
    base = load_scenario(scenario, sets)
    presets, servers = _check_names(base, defenses)
    runs: list[MatrixRun] = []
    for preset in presets:
        quiet = ["attack.targets=['global']", *_servers_off(),
                 *(f"{f}.enabled=false" for f in _families())]
        try:  # the defense on its own: what its aggregation shows the server
            defended = load_scenario(scenario, [*sets, *preset.sets, *quiet])
        except ScenarioError as exc:
            raise ScenarioError(f"matrix defense {preset.name!r}: {exc}") from None
        for role, extra in [(MAIN, _main_sets(defended, base.matrix.families)),
                            *((k, _server_sets(defended, k)) for k in servers)]:
            keys = (*preset.sets, *extra)
            try:
                resolved = load_scenario(scenario, [*sets, *keys])
                if check:
                    check_scenario(resolved)
            except ScenarioError as exc:
                raise ScenarioError(f"matrix defense {preset.name!r}, {role} run: {exc}") \
                    from None
            runs.append(MatrixRun(preset.name, role, keys, resolved))
    return MatrixPlan(scenario, base.name, tuple(sets), tuple(presets), tuple(runs))

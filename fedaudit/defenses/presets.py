"""Named defense settings for ``fedaudit matrix`` (``[matrix] defenses``): each preset is
the scenario keys that set one defense up, so a column of the matrix is one name.

A preset fixes the defense's kind, its parameters and the aggregation path, so ``none``
is plain FedAvg even when the scenario itself uses SecAgg+.  A name that is not a preset
may be any registered defense kind (``defense.kind = <name>``, its options from the
scenario's ``[defense]`` table) or any registered aggregation path
(``federation.aggregation = <name>``).  The built-in presets (docs/algorithms.md section 6
has the defenses):

* ``none`` -- no defense, plain aggregation;
* ``dp-sgd`` -- DP-SGD with Opacus, noise multiplier 1, clipping norm 1 (sample level);
* ``dp-fedavg`` -- DP-FedAvg with client-side clipping (Flower's fixed-clipping mod and
  server noise), noise multiplier 1, clipping norm 0.5 (client level);
* ``secagg+`` -- Flower's SecAgg+, no noise;
* ``secagg+dp-fedavg`` -- both;
* ``sparsify`` -- each client sends the largest 10 % of each tensor's update.
"""

from __future__ import annotations

from dataclasses import dataclass

from fedaudit.registry import Registry, registry_of

__all__ = ["DEFENSE_PRESETS", "DefensePreset", "preset_of",
           "register_preset"]


@dataclass(frozen=True)
class DefensePreset:
    """A named defense setting: its ``name`` (the matrix column), a ``title`` for tables,
    and the scenario keys it sets (``--set`` syntax, applied after the scenario's own)."""

    name: str
    title: str
    sets: tuple[str, ...]


#: name -> preset
DEFENSE_PRESETS: Registry[str, DefensePreset] = Registry(
    "defense preset", name_pattern=r"[a-z][a-z0-9+_-]*")


def register_preset(preset: DefensePreset, *, replace: bool = False) -> DefensePreset:
    """Register ``preset`` under its name (a taken name needs ``replace=True``)."""
    return DEFENSE_PRESETS.register(preset.name, preset, replace=replace)


PLAIN = "federation.aggregation=plain"
SECAGG = "federation.aggregation=secagg+"
DP_FEDAVG = ("defense.kind=dp-client", "defense.noise_multiplier=1.0", "defense.clip_norm=0.5")

for _preset in (
        DefensePreset("none", "none", ("defense.kind=none", PLAIN)),
        DefensePreset("dp-sgd", "DP-SGD (z=1, C=1)", (
            "defense.kind=dp-sgd", "defense.noise_multiplier=1.0", "defense.clip_norm=1.0",
            PLAIN)),
        DefensePreset("dp-fedavg", "DP-FedAvg (client clipping C=0.5, z=1)",
                      (*DP_FEDAVG, PLAIN)),
        DefensePreset("secagg+", "SecAgg+", ("defense.kind=none", SECAGG)),
        DefensePreset("secagg+dp-fedavg", "SecAgg+ with DP-FedAvg", (*DP_FEDAVG, SECAGG)),
        DefensePreset("sparsify", "sparsify (top 10%)",
                      ("defense.kind=sparsify", "defense.keep=0.1", PLAIN)),
):
    register_preset(_preset)
DEFENSE_PRESETS.mark_builtin()


def preset_of(name: str) -> DefensePreset:
    """The preset ``name``; else a registered defense kind or aggregation path as a
    preset of one key; a ``ValueError`` naming what is allowed otherwise."""
    if DEFENSE_PRESETS.accepts(name):
        return DEFENSE_PRESETS.get(name)
    if registry_of("defense").accepts(name):
        return DefensePreset(name, f"defense.kind = {name}", (f"defense.kind={name}",))
    aggregations = registry_of("aggregation")
    if aggregations.accepts(name):
        return DefensePreset(name, f"aggregation {name}", (f"federation.aggregation={name}",))
    raise ValueError(f"unknown defense {name!r}; allowed: the presets "
                     f"{', '.join(DEFENSE_PRESETS.names())}, a defense kind "
                     f"({', '.join(registry_of('defense').names())}) or an aggregation "
                     f"({', '.join(aggregations.names())})")

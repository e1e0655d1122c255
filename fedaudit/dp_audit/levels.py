"""The levels of the one-run DP audit (``audit.dp.level``), each declaring where its canaries
are planted and what the server must record for its scores, so that the data, the clients,
the server's strategy stack and the probes ask the level instead of comparing its name:

- ``sample``: canary samples (mislabeled holdout samples) in the clients' data
  (:func:`fedaudit.data.build_federated_data`), scored on the released model;
- ``gradient``: white-box Dirac gradient canaries inside the clients' DP-SGD steps
  (:mod:`fedaudit.dp_audit.gradient`), scored on each update the server received (the
  ``dp-gradient-canaries`` probe) and on the released model; needs DP-SGD;
- ``client``: canary clients in the server's strategy stack
  (:mod:`strategies.canary_clients`), scored on the released model.

How each level scores its canaries is the DP-audit stage's own business
(:mod:`fedaudit.audit.stages.dp_audit`).  Pure Python: the clients import it.
"""

from __future__ import annotations

from dataclasses import dataclass

from fedaudit.registry import Registry

__all__ = ["LEVELS", "AuditLevel", "planted_level"]


@dataclass(frozen=True)
class AuditLevel:
    """One level: what its canaries are and where they go."""

    name: str
    #: what one canary is (the schema's help, messages)
    canary: str
    #: canary samples are planted in the clients' data
    plants_samples: bool = False
    #: gradient canaries are added inside the clients' DP-SGD steps
    plants_gradients: bool = False
    #: canary clients join the rounds through the server's strategy stack
    plants_clients: bool = False
    #: the server-side probes (:mod:`fedaudit.probes`) its scores read
    probes: tuple[str, ...] = ()
    #: only under a defense that trains with DP-SGD (the canaries live in its steps)
    needs_dpsgd: bool = False


#: name -> level (``audit.dp.level``; ``auto`` resolves to the defense's own level)
LEVELS: Registry[str, AuditLevel] = Registry("DP audit level", name_pattern=r"[a-z]+")

for _level in (
        AuditLevel("sample", "a mislabeled holdout sample in a client's data",
                   plants_samples=True),
        AuditLevel("gradient", "a Dirac gradient of norm clip_norm inside a client's DP-SGD "
                   "steps", plants_gradients=True, probes=("dp-gradient-canaries",),
                   needs_dpsgd=True),
        AuditLevel("client", "a canary client sending a fixed direction at the clipping norm",
                   plants_clients=True)):
    LEVELS.register(_level.name, _level)
LEVELS.mark_builtin()


def planted_level(dp) -> AuditLevel | None:
    """The level whose canaries a run plants (``dp`` the scenario's ``[audit.dp]``), or None
    when the audit is off (no canaries)."""
    return LEVELS.get(dp.level) if dp.canaries else None

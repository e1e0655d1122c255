"""Who an attack scores and with which options: members and class-matched non-members per
client (:class:`ClientAuditSet`), the distinct scored samples of all clients
(:class:`PooledAuditSet`) and each method's declared options.

Per client, members are the client's samples (or a random subset of
``members_per_client``, capped at the non-member pool's size) and non-members are samples
of the pool drawn with the members' label histogram, independently per client, so each
client's set is balanced and a skewed (non-IID) client is not "detected" by its classes.
Pooled metrics use every distinct scored sample once: all clients' members against the
union of their non-members (clients draw from one pool, so concatenating their sets would
count a pool sample several times and overstate the FPR resolution).

Text data (sequences of speeches) has no class per sample; non-members are matched on the
speaking role instead (``data.text.speaker``, -1 for text of no role): each client's
non-members have its members' role histogram, so a client's style is no membership
signal.  With the ``speaker`` partitioner a client is one role and its non-members are
that role's held-out speeches (the pool keeps only the clients' roles).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np

from attacks.membership import sample_members, sample_nonmembers
from attacks.membership.registry import attack_options as declared
from attacks.membership.registry import resolve_options
from fedaudit.data import FederatedData
from fedaudit.options import PASS_ALWAYS
from fedaudit.scenario import Scenario

log = logging.getLogger("fedaudit")

__all__ = ["ClientAuditSet", "PooledAuditSet", "attack_options", "attack_sets",
           "client_audit_set", "match_labels", "pooled_audit_set"]


@dataclass(frozen=True)
class ClientAuditSet:
    """One client's scored samples: its ``members`` and as many class-matched
    ``nonmembers`` (global sample ids); ``mismatched`` non-members stand in for a class the
    pool lacked."""

    members: np.ndarray
    nonmembers: np.ndarray
    mismatched: int = 0

    @property
    def ids(self) -> np.ndarray:
        """Members, then non-members."""
        return np.concatenate([self.members, self.nonmembers])

    @property
    def member(self) -> np.ndarray:
        """0/1 int8 labels aligned with :attr:`ids`."""
        return np.r_[np.ones(len(self.members), np.int8), np.zeros(len(self.nonmembers), np.int8)]


@dataclass(frozen=True)
class PooledAuditSet:
    """Every distinct sample the clients' sets score, sorted, with its membership (a member
    of any client is 1), and where each client's samples sit in it."""

    clients: tuple[ClientAuditSet, ...]

    @cached_property
    def ids(self) -> np.ndarray:
        return np.unique(np.concatenate([s.ids for s in self.clients]))

    @cached_property
    def member(self) -> np.ndarray:
        members = np.concatenate([s.members for s in self.clients])
        return np.isin(self.ids, members).astype(np.int8)

    @cached_property
    def positions(self) -> tuple[np.ndarray, ...]:
        """Per client, the index in :attr:`ids` of each of its samples (``s.ids`` order)."""
        return tuple(np.searchsorted(self.ids, s.ids) for s in self.clients)


def attack_sets(scenario: Scenario, data: FederatedData,
                nonmember_pool: np.ndarray | None = None) -> list[ClientAuditSet]:
    """Per client: member ids and class-matched non-member ids from ``nonmember_pool``
    (default the holdout split; :func:`fedaudit.audit.reference_models.attack_split` halves it
    when reference attacks run)."""
    cfg = scenario.attack
    pool = data.holdout if nonmember_pool is None else nonmember_pool
    sets = []
    for c, ids in enumerate(data.clients):
        if data.dp_canaries is not None:  # the DP audit's canaries are not attacked here
            ids = ids[~np.isin(ids, data.dp_canaries.ids)]
        rng = np.random.default_rng([cfg.seed, c])
        cap = min(len(ids), len(pool))
        if cfg.members_per_client:
            cap = min(cap, cfg.members_per_client)
        members = sample_members(ids, cap if cap < len(ids) else None, rng)
        labels = match_labels(data)
        draw = sample_nonmembers(labels[members], labels[pool], rng)
        if draw.mismatched:
            log.warning("client %d: holdout lacks %d %s-matched non-members (topped up "
                        "from other %s)", c, draw.mismatched,
                        *(("role", "roles") if data.text is not None else ("class", "classes")))
        sets.append(ClientAuditSet(members, pool[draw.indices], draw.mismatched))
    return sets


def match_labels(data: FederatedData) -> np.ndarray:
    """What non-members are matched on, per global sample id: the class label (images)
    or the speaking role (text)."""
    return data.y if data.text is None else data.text.speaker


def client_audit_set(s: ClientAuditSet) -> tuple[np.ndarray, np.ndarray]:
    """One client's scored ids (members, then non-members) and its 0/1 int8 labels."""
    return s.ids, s.member


def pooled_audit_set(sets: list[ClientAuditSet]) -> tuple[np.ndarray, np.ndarray]:
    """Every distinct scored sample (sorted) and its 0/1 int8 membership (a member of any
    client is 1)."""
    pooled = PooledAuditSet(tuple(sets))
    return pooled.ids, pooled.member


def attack_options(scenario: Scenario) -> dict[str, dict[str, Any]]:
    """Each method's keyword options from its ``[attack.<name>]`` table (the options it
    declared at registration), those that follow the local training resolved
    (:func:`attacks.membership.registry.resolve_options`: LiRA's ``augment = "auto"``); a
    value equal to the option's ``unset`` is left out, so the attack uses its own default."""
    return {method: opts for method, (opts, _) in _resolved(scenario).items()}


def attack_warnings(scenario: Scenario) -> list[str]:
    """What the listed attacks' options warn of against the local training (LiRA's
    augmented queries of views no model trained on); empty when the attacks are off."""
    if not scenario.attack.enabled:
        return []
    return [w for _, w in _resolved(scenario).values() if w]


def _resolved(scenario: Scenario) -> dict[str, tuple[dict[str, Any], str | None]]:
    out: dict[str, tuple[dict[str, Any], str | None]] = {}
    for method in scenario.attack.methods:
        fields = declared(method)
        values = scenario.attack.options.get(method, {})
        opts, warning = resolve_options(method, {k: v for k, v in values.items()
                                                 if k in fields}, scenario.train)
        out[method] = ({k: v for k, v in opts.items()
                        if not (k in fields and fields[k].unset is not PASS_ALWAYS
                                and v == fields[k].unset)}, warning)
    return out


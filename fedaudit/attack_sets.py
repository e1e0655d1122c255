"""Who an attack scores and with which options: members and class-matched non-members
per client, the distinct scored ids, each method's declared options, and the metrics
results.json keeps -- shared by the post-training attacks (:mod:`fedaudit.posttrain`) and
the curious server's view (:mod:`fedaudit.positions`)."""

from __future__ import annotations

import logging
from typing import Any

import numpy as np

from attacks.membership import sample_members, sample_nonmembers
from attacks.registry import attack_options as declared
from fedaudit.data import FederatedData
from fedaudit.options import PASS_ALWAYS
from fedaudit.scenario import Scenario

log = logging.getLogger("fedaudit")

__all__ = ["attack_options", "attack_sets", "client_audit_set", "pooled_audit_set",
           "result_metrics", "scored_ids"]


def attack_sets(scenario: Scenario, data: FederatedData,
                nonmember_pool: np.ndarray | None = None) -> list[dict[str, np.ndarray]]:
    """Per client: member ids and class-matched non-member ids from ``nonmember_pool``
    (default the holdout split; :func:`fedaudit.references.attack_split` halves it when
    reference attacks run)."""
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
        draw = sample_nonmembers(data.y[members], data.y[pool], rng)
        if draw.mismatched:
            log.warning("client %d: holdout lacks %d class-matched non-members (topped up "
                        "from other classes)", c, draw.mismatched)
        sets.append({"members": members, "nonmembers": pool[draw.indices],
                     "mismatched": draw.mismatched})
    return sets


def client_audit_set(s: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """One client's scored ids (members, then non-members) and its 0/1 int8 labels."""
    ids = np.concatenate([s["members"], s["nonmembers"]])
    member = np.r_[np.ones(len(s["members"]), np.int8), np.zeros(len(s["nonmembers"]), np.int8)]
    return ids, member


def scored_ids(sets: list[dict]) -> np.ndarray:
    """Every distinct sample an attack scores: all clients' members and non-members."""
    return np.unique(np.concatenate([client_audit_set(s)[0] for s in sets]))


def pooled_audit_set(sets: list[dict]) -> tuple[np.ndarray, np.ndarray]:
    """:func:`scored_ids` and their 0/1 int8 membership (a member of any client is 1)."""
    ids = scored_ids(sets)
    member = np.isin(ids, np.concatenate([s["members"] for s in sets])).astype(np.int8)
    return ids, member


def attack_options(scenario: Scenario) -> dict[str, dict[str, Any]]:
    """Each method's keyword options from its ``[attack.<name>]`` table (the options it
    declared at registration); a value equal to the option's ``unset`` is left out, so the
    attack uses its own default."""

    out: dict[str, dict[str, Any]] = {}
    for method in scenario.attack.methods:
        fields = declared(method)
        values = scenario.attack.options.get(method, {})
        out[method] = {k: v for k, v in values.items()
                       if k in fields and not (fields[k].unset is not PASS_ALWAYS
                                               and v == fields[k].unset)}
    return out


def result_metrics(m: dict) -> dict:
    """The membership metrics results.json keeps per attack (from
    :func:`fedaudit.metrics.membership_metrics`)."""
    keys = ("auc", "tpr_at_1pct_fpr", "tpr_at_0p1pct_fpr", "fpr_at_80pct_tpr",
            "min_fpr_resolution")
    return {k: m[k] for k in keys if k in m}

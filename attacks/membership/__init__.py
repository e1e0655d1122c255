"""The membership-inference family: was this sample in a model's training data?

An attack of this family gets an :class:`Oracle` (query access to one model: output
probabilities only) and samples with their labels, and returns one score per sample,
higher meaning "more likely a member" (``fn(oracle, x, y, **options)``, registered in
:data:`ATTACKS` with :func:`register_attack`; ``attack.methods`` lists them).  The audit
runs them over every listed target (``fedaudit.audit.stages.attacks``).

* :mod:`~attacks.membership.oracle`: :class:`Oracle`;
* :mod:`~attacks.membership.registry`: :data:`ATTACKS` and what an attack declares;
* :mod:`~attacks.membership.evaluation`: member / class-matched non-member sampling,
  :func:`evaluate_attacks` (one oracle, several attacks, typed outcomes);
* the attacks, one module each: :mod:`~attacks.membership.baselines` (LOSS, confidence,
  entropy, modified entropy), :mod:`~attacks.membership.resmia` (Res-MIA, with
  :mod:`~attacks.membership.erosion`), :mod:`~attacks.membership.zlib`,
  :mod:`~attacks.membership.lira`, :mod:`~attacks.membership.rmia` (with
  :mod:`~attacks.membership.rmia_tuning`), :mod:`~attacks.membership.fedmia`; the
  reference attacks' input is :mod:`~attacks.membership.reference_signals`;
* :mod:`~attacks.membership.sequences` (text: a sequence as one two-outcome sample),
  :mod:`~attacks.membership.augment` (LiRA's augmented queries).

Importing the package imports every public module in it, so an attack registers itself
with its ``@register_attack`` decorator: a new attack is one file and one decorator line.
"""

from __future__ import annotations

from attacks.membership.evaluation import (AttackOutcome, NonmemberSample, evaluate_attacks,
                                           sample_members, sample_nonmembers)
from attacks.membership.oracle import Oracle
from attacks.membership.registry import ATTACKS, attack_names, get_attack, register_attack
from fedaudit.registry import import_submodules

__all__ = ["ATTACKS", "AttackOutcome", "NonmemberSample", "Oracle", "attack_names",
           "evaluate_attacks", "get_attack", "register_attack", "sample_members",
           "sample_nonmembers"]

import_submodules(__name__, __path__)
ATTACKS.mark_builtin()

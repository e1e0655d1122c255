"""Attacks on federated learning, one package per family -- each family asks its own
question of what an attacker holds, with its own signature and its own registry:

* :mod:`attacks.membership` -- membership inference: an oracle (a model's output
  probabilities) and samples in, one score per sample out (``attack.methods``).
* :mod:`attacks.label_leakage` -- label leakage: an update (``UpdateCase``) in, its labels out.
* :mod:`attacks.reconstruction` -- gradient inversion: one client's update of one round
  (:class:`attacks.update_case.UpdateCase`) in, its training images rebuilt out.

A new family of attacks on updates is a package here with its registry, its attacks and one
:class:`attacks.update_family.UpdateAttackFamily` registered (the audit runs it on the kept
updates, and results.json, the console, ``compare``, the threat matrix and the report show
it); a family that reads something else adds the audit stage that runs it on what its
attacker position holds (``fedaudit/audit/stages/``) -- docs/architecture.md section 5.

The membership family's registry and decorator stay importable from here
(``attacks.register_attack``, ``attacks.ATTACKS``, ``attacks.Oracle``).
"""

from __future__ import annotations

from attacks.membership import ATTACKS, Oracle, attack_names, get_attack, register_attack
from fedaudit.registry import import_submodules

__all__ = ["ATTACKS", "Oracle", "attack_names", "get_attack", "register_attack"]

import_submodules(__name__, __path__)

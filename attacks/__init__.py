"""Black-box membership-inference attacks against fedaudit models.

* :class:`Oracle` (``attacks.oracle``): query access to a model, probabilities only.
* ``attacks.resmia``: Res-MIA, the resolution-erosion attack (docs/algorithms.md section 3);
  ``attacks.erosion``: its pooled sizes and eroded images.
* ``attacks.baselines``: loss, confidence, entropy, modified-entropy scores (3.4).
* ``attacks.registry``: ``ATTACKS`` name -> ``fn(oracle, x, y, **options)``.
* ``attacks.membership``: member / class-matched non-member sampling, ``evaluate_attacks``.

Importing the package imports every public module in it, so an attack registers itself
with its ``@register_attack`` decorator: a new attack is one file and one decorator line.
"""

from __future__ import annotations

from attacks.oracle import Oracle
from attacks.registry import ATTACKS, attack_names, get_attack, register_attack
from fedaudit.registry import import_submodules

__all__ = ["ATTACKS", "Oracle", "attack_names", "get_attack", "register_attack"]

import_submodules(__name__, __path__)
ATTACKS.mark_builtin()

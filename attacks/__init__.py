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

import importlib
import pkgutil

from attacks.oracle import Oracle
from attacks.registry import ATTACKS, attack_names, get_attack, register_attack

__all__ = ["ATTACKS", "Oracle", "attack_names", "get_attack", "register_attack"]


def _import_attack_modules() -> None:
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda i: i.name):
        if not info.name.startswith("_"):
            importlib.import_module(f"{__name__}.{info.name}")


_import_attack_modules()
ATTACKS.mark_builtin()

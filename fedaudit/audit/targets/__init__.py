"""Attack targets: the :class:`~fedaudit.audit.targets.base.Target` type, the registry of
target kinds (:data:`TARGETS`, what ``attack.targets`` lists) and the built-in kinds, one
module each, imported here so that they register: ``global``, ``quantized``, ``rounds``,
``clients`` (in that order: the order the attacks stage runs them)."""

from fedaudit.audit.targets.base import (TARGETS, Target, TargetKind, register_target,
                                         selected_kinds)
from fedaudit.registry import import_submodules

import_submodules(__name__, __path__, first=("global_model", "quantized", "rounds",
                                             "client_models"))
TARGETS.mark_builtin()

__all__ = ["TARGETS", "Target", "TargetKind", "register_target", "selected_kinds"]

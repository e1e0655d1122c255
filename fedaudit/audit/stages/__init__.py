"""The audit stages: the :class:`~fedaudit.audit.stages.base.Stage` interface, the
registry :data:`STAGES` and the built-in stages, one module each, imported here so that
they register (their run order is each stage's ``order``)."""

from fedaudit.audit.stages.base import (STAGES, Stage, check_stage_data, ordered_stages,
                                        register_stage, run_stages)
from fedaudit.registry import import_submodules

import_submodules(__name__, __path__)
STAGES.mark_builtin()

__all__ = ["STAGES", "Stage", "check_stage_data", "ordered_stages", "register_stage", "run_stages"]

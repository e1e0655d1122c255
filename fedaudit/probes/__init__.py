"""Server-side probes (:mod:`fedaudit.probes.base`): what the server measures and keeps of
each round, one class per concern, registered in :data:`PROBES` and run by the auditing
strategy.  The built-in probes, one module each, imported here so that they register (in
this order, the order they run and fill a round's rounds.jsonl line): ``update-gnq``,
``update-norm``, ``client-gnq``, ``client-models``, ``dp-gradient-canaries``."""

from fedaudit.probes.base import (AGGREGATE, PROBES, RECORDS, UPDATES, VIEWS, Probe, ProbeRun,
                                  Reply, RoundRecord, RoundView, register_probe)
from fedaudit.registry import import_submodules

import_submodules(__name__, __path__, first=("update_gnq", "update_norm", "client_gnq",
                                             "client_models", "gradient_canaries"))
PROBES.mark_builtin()

__all__ = ["AGGREGATE", "PROBES", "Probe", "ProbeRun", "RECORDS", "Reply", "RoundRecord",
           "RoundView", "UPDATES", "VIEWS", "register_probe"]

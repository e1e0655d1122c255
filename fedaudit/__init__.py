"""fedaudit: a federated-learning privacy testbed."""

__version__ = "0.1.0"

import os as _os

# Flower reports usage over the network unless told not to; fedaudit runs offline.
_os.environ.setdefault("FLWR_TELEMETRY_ENABLED", "0")

"""fedaudit: a federated-learning privacy testbed."""

from fedaudit.version import __version__

import os as _os

# Flower reports usage over the network unless told not to; fedaudit runs offline.
_os.environ.setdefault("FLWR_TELEMETRY_ENABLED", "0")


_API = ("run", "load_run", "validate", "matrix", "Run", "Matrix")


def __getattr__(name: str):
    # the API imports torch and Flower: load it on first use, not on `import fedaudit`
    if name in _API:
        from fedaudit import api

        return getattr(api, name)
    raise AttributeError(f"module 'fedaudit' has no attribute {name!r}")


__all__ = ["__version__", *_API]

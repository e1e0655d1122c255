"""fedaudit: a federated-learning privacy testbed."""

__version__ = "0.1.0"

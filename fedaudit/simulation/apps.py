"""Flower App components named in pyproject.toml ``[tool.flwr.app.components]``."""

from fedaudit.simulation.client import client_app
from fedaudit.simulation.server import server_app

__all__ = ["client_app", "server_app"]

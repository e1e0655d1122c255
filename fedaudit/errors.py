"""Errors a user sees as one line (the CLI prints them and exits with code 2)."""

from __future__ import annotations


class ScenarioError(ValueError):
    """A scenario (file or override) that cannot be run; the message is one line."""

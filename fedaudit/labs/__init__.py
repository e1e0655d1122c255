"""Classroom labs on FL privacy: the helpers and checks the notebooks in ``labs/`` use.

* :mod:`fedaudit.labs.todo`: ``todo(...)``, the value of an unfinished exercise, and
  :class:`LabCheckError`;
* :mod:`fedaudit.labs.checks`: one check per task, with feedback a student can act on;
* :mod:`fedaudit.labs.runs`: :func:`lab_run` (``fedaudit.run`` cached per scenario) and
  :func:`load_target` (an oracle on a run's global model and its audit set),
  :func:`language_model` (a text run's model as next-token log-probabilities, for lab 9's
  secrets) and :func:`secrets_target` (lab 9's federation);
* :mod:`fedaudit.labs.challenge`: the capstone challenge (``fedaudit lab challenge`` /
  ``fedaudit lab grade``);
* :mod:`fedaudit.labs.leaderboard`: a graded submission beside chance (both metrics' chance
  levels, the TPR's confidence interval);
* :mod:`fedaudit.labs.updates`: lab 10's client updates on the digits
  (:func:`~fedaudit.labs.updates.client_update`) and fedaudit's own attack on them.

Attributes load on first use, so ``fedaudit lab grade`` does not import torch.
"""

from __future__ import annotations

import importlib

from fedaudit.labs.todo import LabCheckError, Todo, is_todo, require, todo

__all__ = ["LabCheckError", "Todo", "is_todo", "require", "todo", "TARGET", "client_oracle", "lab_dir", "lab_run", "load_target",
           "LanguageModel", "language_model", "secrets_target", "text_path",
           "AttackerView", "make_challenge", "load_challenge", "write_submission", "grade"]

_LAZY = {"TARGET": "runs", "client_oracle": "runs", "lab_dir": "runs", "lab_run": "runs", "load_target": "runs",
         "AttackerView": "runs", "LanguageModel": "runs", "language_model": "runs",
         "secrets_target": "runs", "text_path": "runs",
         "make_challenge": "challenge", "load_challenge": "challenge",
         "write_submission": "challenge", "grade": "challenge"}


def __getattr__(name: str):
    if name in _LAZY:
        return getattr(importlib.import_module(f"fedaudit.labs.{_LAZY[name]}"), name)
    raise AttributeError(f"module 'fedaudit.labs' has no attribute {name!r}")

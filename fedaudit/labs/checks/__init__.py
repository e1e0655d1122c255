"""One check per lab task: recompute the answer independently, compare with tolerance,
and say what to look at when it differs.

Every check takes what the student computed (a value or the function they wrote), first
refuses an unfinished ``todo(...)`` (:func:`fedaudit.labs.todo.require`), then compares with
an independent computation.  Tolerances:

* probabilities and scores come from a float32 model through a float64 softmax: a
  different batch blocking changes a logit by a few float32 ulps, so scores agree to
  ``SCORE_TOL`` (1e-4 absolute on log-probabilities: a relative float32 eps of 1.2e-7
  times logits of order 10, with margin);
* an AUC is a rank statistic: a score perturbed within ``SCORE_TOL`` can reorder two
  near-tied samples, each such pair moving the AUC by ``1 / (n_members * n_nonmembers)``;
  ``AUC_TOL`` = 0.002 allows a handful of such pairs (5 at 50 x 50 samples, about 100
  in the labs' pooled audit set of 250 members and about 200 non-members);
* numbers copied from results.json are compared to 1e-9 relative (JSON keeps a float64
  exactly).

A check returns None and prints one line starting with "ok" when it passes, and raises
:class:`~fedaudit.labs.todo.LabCheckError` with the reason otherwise.  A failure never
states the value the student should have found (that would be the answer): it names the
concept, the direction (:func:`direction`), or a hand-computed toy case instead; toy cases
are built so that each mistake a task's text warns about gives a different, named result.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from fedaudit.labs.todo import LabCheckError, require

SCORE_TOL = 1e-4
AUC_TOL = 2e-3
EXACT_REL = 1e-9

__all__ = ["AUC_TOL", "EXACT_REL", "SCORE_TOL", "as_array", "as_number", "call", "close",
           "direction", "fail", "ok", "orientation_hint", "same_values"]


def ok(task: str, message: str) -> None:
    print(f"ok  Task {task}: {message}")


def fail(task: str, message: str) -> None:
    raise LabCheckError(f"Task {task}: {message}")


def close(a: float, b: float, tol: float) -> bool:
    return math.isfinite(a) and abs(a - b) <= tol


def direction(got: float, want: float) -> str:
    """Where ``got`` lies from the right value, without the value: "too high" / "too low"."""
    return "too high" if got > want else "too low"


def as_array(task: str, value: Any, name: str, shape: Sequence[int] | None = None,
             dtype_kind: str = "biuf", finite: bool = True) -> np.ndarray:
    """``value`` as a numpy array of the expected shape, or a clear failure (also for a
    NaN or infinite value unless ``finite`` is False: the caller reports it itself)."""
    require(value, task)
    try:
        arr = np.asarray(value)
    except Exception:  # noqa: BLE001 - anything that is not array-like
        fail(task, f"{name} must be an array, got {type(value).__name__}")
    if arr.dtype.kind not in dtype_kind:
        fail(task, f"{name} must hold numbers, got dtype {arr.dtype}")
    if shape is not None and tuple(arr.shape) != tuple(shape):
        fail(task, f"{name} has shape {tuple(arr.shape)}, expected {tuple(shape)}")
    if finite and arr.dtype.kind == "f" and not np.all(np.isfinite(arr)):
        fail(task, f"{name} holds NaN or infinite values (a log of 0? clip probabilities)")
    return arr


def as_number(task: str, value: Any, name: str) -> float:
    require(value, task)
    try:
        x = float(value)
    except (TypeError, ValueError):
        fail(task, f"{name} must be a number, got {type(value).__name__}")
    if not math.isfinite(x):
        fail(task, f"{name} is {x}; expected a finite number")
    return x


def call(task: str, fn: Callable, *args: Any) -> Any:
    """``fn(*args)``; a TODO result or an exception becomes a clear failure."""
    require(fn, task)
    if not callable(fn):
        fail(task, f"expected a function, got {type(fn).__name__}")
    try:
        out = fn(*args)
    except Exception as exc:  # noqa: BLE001 - the student's code: report, do not crash
        fail(task, f"your function raised {type(exc).__name__}: {exc}")
    return require(out, task)


def same_values(task: str, got: np.ndarray, want: np.ndarray, name: str, tol: float,
                hint: str = "") -> None:
    """Elementwise agreement within ``tol``; names the first index that differs."""
    if got.shape != want.shape:
        fail(task, f"{name} has shape {got.shape}, expected {want.shape}")
    bad = np.flatnonzero(~(np.abs(got.astype(np.float64) - want) <= tol))
    if bad.size:
        i = int(bad[0])
        g = float(got.flat[i])
        fail(task, f"{name}[{i}] is {g:.6g}, {direction(g, float(want.flat[i]))} "
                   f"({bad.size} of {want.size} values differ)" + (f"; {hint}" if hint else ""))


def per_run(task: str, value: Any, runs: dict, name: str) -> dict:
    """``value`` after the checks every per-run answer needs: done (no TODO) and a dict with
    exactly one entry per run of ``runs``."""
    require(value, task)
    if not isinstance(value, dict) or set(value) != set(runs):
        fail(task, f"make {name} a dict with one entry per run: {sorted(runs)}")
    return value


def orientation_hint(auc: float) -> str:
    """The feedback on an AUC below one half."""
    return (f"your AUC is {auc:.2f}: is your score oriented so that higher means member? "
            "(an AUC below 0.5 is a reversed score: negate it)")

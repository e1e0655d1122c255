"""The placeholder of an unfinished exercise, and the error a failed check raises.

A student notebook's gaps read ``return todo("what to compute")``: :func:`todo` returns a
:class:`Todo`, and every check in :mod:`fedaudit.labs.checks` recognises it, so running an
unfinished notebook stops at the first check with "Task 2.1 is not done yet: the cell above
still has a TODO (...)" instead of a confusing error deep inside numpy.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["LabCheckError", "Todo", "todo", "is_todo", "require"]


class LabCheckError(AssertionError):
    """A check failed; the message says what to look at.

    In a notebook IPython shows it as its message alone (``_render_traceback_``, the hook
    IPython gives exceptions that render themselves): the frames of the check's own code
    would only bury the message a student must read."""

    def _render_traceback_(self) -> list[str]:
        return [f"{type(self).__name__}: {self}"]


@dataclass(frozen=True)
class Todo:
    """What a gap in a student notebook evaluates to until it is filled in."""

    hint: str

    def __repr__(self) -> str:
        return f"TODO({self.hint})"


def todo(hint: str = "") -> Todo:
    """The value of an unfinished exercise (``return todo("the LOSS score")``)."""
    return Todo(hint)


def _todos(value: Any, depth: int = 3):
    """The TODOs in ``value``: itself, or inside tuples, lists and dict values (nested up
    to ``depth`` levels, enough for a dict of pairs)."""
    if isinstance(value, Todo):
        yield value
    elif depth and isinstance(value, (tuple, list, dict)):
        for v in value.values() if isinstance(value, dict) else value:
            yield from _todos(v, depth - 1)


def is_todo(value: Any) -> bool:
    """True for a :class:`Todo`, or a tuple / list / dict that holds one."""
    return next(_todos(value), None) is not None


def require(value: Any, task: str) -> Any:
    """``value`` unchanged, or :class:`LabCheckError` when it is (or holds) a TODO."""
    if is_todo(value):
        hint = next(_todos(value)).hint
        raise LabCheckError(f"Task {task} is not done yet: the cell above still has a TODO"
                            + (f" ({hint})" if hint else ""))
    return value

"""How far a long attack has got, for whoever runs it: an optimisation loop calls
:func:`iteration_done` after every iteration, and the caller that wants to know installs a
hook for the duration of the call (:func:`on_iterations`).  Without a hook the call is a
no-op, so an attack called from a script or a test needs nothing.

The audit's update jobs install a hook that writes the count to a small file the run's
driver reads while the jobs run (:mod:`fedaudit.audit.job_progress`): a job on a Ray actor
has no other way to speak before it replies.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar

__all__ = ["iteration_done", "on_iterations"]

#: the hook of the current call: (iterations done, iterations in all) -> None
_HOOK: ContextVar[Callable[[int, int], None] | None] = ContextVar(
    "fedaudit_iteration_hook", default=None)


def iteration_done(done: int, total: int) -> None:
    """Tell the installed hook (if any) that ``done`` of ``total`` iterations are done
    (over all restarts of the call)."""
    hook = _HOOK.get()
    if hook is not None:
        hook(done, total)


@contextmanager
def on_iterations(hook: Callable[[int, int], None]) -> Iterator[None]:
    """Install ``hook`` for the calls made inside the ``with`` block."""
    token = _HOOK.set(hook)
    try:
        yield
    finally:
        _HOOK.reset(token)

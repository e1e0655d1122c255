"""DP auditing with one training run (Steinke, Nasr & Jagielski 2023): the epsilon lower
bound (:mod:`~fedaudit.dp_audit.bound`), the canary draws and the guesses
(:mod:`~fedaudit.dp_audit.canaries`), results.json ``dp_audit`` and its warning
(:mod:`~fedaudit.dp_audit.summary`).  Pure numpy / scipy; the run-time side (scoring the
canaries after training, results.json ``dp_audit``) is :mod:`fedaudit.audit.stages.dp_audit`."""

__all__ = ["audit_p_value", "epsilon_lower_bound"]


def __getattr__(name: str) -> object:
    # The bound imports scipy.optimize and scipy.stats (0.6 s); the canary draws do not,
    # and every client actor imports them (fedaudit.data): load the bound when asked for.
    if name in __all__:
        from fedaudit.dp_audit import bound

        return getattr(bound, name)
    raise AttributeError(f"module 'fedaudit.dp_audit' has no attribute {name!r}")

"""DP auditing with one training run (Steinke, Nasr & Jagielski 2023): the epsilon lower
bound (:mod:`~fedaudit.dp_audit.bound`), the canary draws and the guesses
(:mod:`~fedaudit.dp_audit.canaries`), results.json ``dp_audit`` and its warning
(:mod:`~fedaudit.dp_audit.summary`).  Pure numpy / scipy; the run-time side (scoring the
canaries after training, results.json ``dp_audit``) is :mod:`fedaudit.dp_audit_results`."""

from fedaudit.dp_audit.bound import audit_p_value, epsilon_lower_bound

__all__ = ["audit_p_value", "epsilon_lower_bound"]

"""results.json ``dp_audit`` from the canaries' scores: guesses, the bound, the verdict."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from fedaudit.dp_audit.bound import epsilon_lower_bound
from fedaudit.dp_audit.canaries import correct_guesses, guesses

__all__ = ["audit_summary", "exceeds_claim", "warning_message"]


def exceeds_claim(lower_bound: float, claimed: float | str | None) -> bool:
    """Whether the empirical lower bound contradicts the claimed epsilon (a finite float;
    "inf" or None claim nothing that could be contradicted)."""
    return isinstance(claimed, (int, float)) and math.isfinite(claimed) \
        and lower_bound > float(claimed)


def warning_message(s: dict[str, Any]) -> str:
    """The loud warning of a contradicted claim (results ``warnings``, console, report)."""
    return (f"DP AUDIT FAILED: the empirical epsilon lower bound {s['epsilon_lower_bound']:.3g} "
            f"(confidence {1 - s['beta']:.0%}, {s['correct']} of {s['guesses']} guesses "
            f"correct on {s['canaries']} {s['level']} canaries) exceeds the claimed epsilon "
            f"{float(s['claimed_epsilon']):.3g} at delta {s['delta']:g}: the DP implementation "
            "or its accounting is broken")


def audit_summary(scores: np.ndarray, included: np.ndarray, *, k_plus: int, k_minus: int,
                  delta: float, beta: float, claimed_epsilon: float | str | None,
                  level: str, attack: str) -> tuple[dict[str, Any], np.ndarray]:
    """(results.json ``dp_audit``, the int8 guess per canary) from the canaries' scores
    (higher = more likely included) and the true inclusion."""
    included = np.asarray(included, dtype=bool)
    guess = guesses(scores, k_plus, k_minus)
    r, v = correct_guesses(guess, included)
    m = int(len(included))
    lb = epsilon_lower_bound(m, r, v, delta=delta, beta=beta)
    out: dict[str, Any] = {
        "level": level, "attack": attack, "canaries": m, "included": int(included.sum()),
        "k_plus": int(k_plus), "k_minus": int(k_minus), "guesses": r, "correct": v,
        "beta": float(beta), "delta": float(delta), "epsilon_lower_bound": lb,
        "claimed_epsilon": claimed_epsilon,
        "method": "Steinke, Nasr & Jagielski 2023, one training run",
    }
    out["exceeds_claimed"] = exceeds_claim(lb, claimed_epsilon)
    return out, guess

"""results.json ``dp_audit`` from the canaries' scores: guesses, the bounds, the verdict.

Two analyses of the same scores, each against the accountant's claim:

- Steinke et al.'s epsilon (``epsilon_lower_bound``) from the configured guess counts
  (``audit.dp.k_plus`` / ``k_minus``, :mod:`fedaudit.dp_audit.bound`);
- the Gaussian-DP bound (``mu_lower_bound``, its epsilon at delta ``epsilon_lower_bound_gdp``)
  from the searched guess counts (:mod:`fedaudit.dp_audit.fdp`), against ``claimed_mu``, the
  mu whose GDP curve passes through the claimed (epsilon, delta).

``exceeds_claimed`` is true when any bound exceeds its claim (``exceeded_by`` names which).
"""

from __future__ import annotations

import math
from dataclasses import asdict
from typing import Any

import numpy as np

from fedaudit.dp_audit.bound import epsilon_lower_bound
from fedaudit.dp_audit.canaries import correct_guesses, guesses
from fedaudit.dp_audit.fdp import gdp_mu, search_guesses

__all__ = ["audit_summary", "exceeded_bounds", "exceeds_claim", "warning_message"]

#: the bounds compared with the claim: results.json key -> its name in messages
BOUNDS = {"epsilon_lower_bound": "Steinke epsilon", "epsilon_lower_bound_gdp": "Gaussian-DP epsilon"}


def exceeds_claim(lower_bound: float, claimed: float | str | None) -> bool:
    """Whether the empirical lower bound contradicts the claimed epsilon (a finite float;
    "inf" or None claim nothing that could be contradicted)."""
    return isinstance(claimed, (int, float)) and math.isfinite(claimed) \
        and lower_bound > float(claimed)


def exceeded_bounds(s: dict[str, Any]) -> list[str]:
    """The results.json keys of the bounds in ``s`` that exceed its claimed epsilon."""
    return [k for k in BOUNDS if k in s and exceeds_claim(s[k], s.get("claimed_epsilon"))]


def warning_message(s: dict[str, Any], view: str | None = None) -> str:
    """The loud warning of a contradicted claim (results ``warnings``, console, report);
    ``view`` names the model the scores came from when the audit has several."""
    parts = []
    for key in exceeded_bounds(s):
        if key == "epsilon_lower_bound":
            parts.append(f"the Steinke et al. epsilon lower bound {s[key]:.3g} ({s['correct']} "
                         f"of {s['guesses']} guesses correct)")
        else:
            g = s["gdp"]
            parts.append(f"the Gaussian-DP epsilon lower bound {s[key]:.3g} (mu >= "
                         f"{s['mu_lower_bound']:.3g} vs claimed mu {s['claimed_mu']:.3g}; "
                         f"{g['correct']} of {g['guesses']} guesses correct)")
    where = f" on {view}" if view else ""
    return (f"DP AUDIT FAILED{where}: " + " and ".join(parts) + f" (confidence "
            f"{1 - s['beta']:.0%}, {s['canaries']} {s['level']} canaries) exceeds the claimed "
            f"epsilon {float(s['claimed_epsilon']):.3g} at delta {s['delta']:g}: the DP "
            "implementation or its accounting is broken")


def audit_summary(scores: np.ndarray, included: np.ndarray, *, k_plus: int, k_minus: int,
                  delta: float, beta: float, claimed_epsilon: float | str | None,
                  level: str, attack: str) -> tuple[dict[str, Any], np.ndarray]:
    """(results.json ``dp_audit``, the int8 guess per canary of the Steinke bound) from the
    canaries' scores (higher = more likely included) and the true inclusion."""
    included = np.asarray(included, dtype=bool)
    guess = guesses(scores, k_plus, k_minus)
    r, v = correct_guesses(guess, included)
    m = int(len(included))
    lb = epsilon_lower_bound(m, r, v, delta=delta, beta=beta)
    search = search_guesses(scores, included, delta=delta, beta=beta)
    claimed_mu = (gdp_mu(float(claimed_epsilon), delta)
                  if isinstance(claimed_epsilon, (int, float)) else
                  "inf" if claimed_epsilon == "inf" else None)
    gdp = asdict(search)
    out: dict[str, Any] = {
        "level": level, "attack": attack, "canaries": m, "included": int(included.sum()),
        "k_plus": int(k_plus), "k_minus": int(k_minus), "guesses": r, "correct": v,
        "beta": float(beta), "delta": float(delta), "epsilon_lower_bound": lb,
        "mu_lower_bound": gdp.pop("mu_lower_bound"),
        "epsilon_lower_bound_gdp": gdp.pop("epsilon_lower_bound_gdp"),
        "claimed_epsilon": claimed_epsilon, "claimed_mu": claimed_mu,
        "gdp": gdp,
        "method": ("Steinke, Nasr & Jagielski 2023, one training run; Gaussian DP: "
                   "Mahloujifar, Melis & Chaudhuri 2025 (f-DP in one run), guess counts "
                   "searched with a Bonferroni correction"),
    }
    out["exceeded_by"] = exceeded_bounds(out)
    out["exceeds_claimed"] = bool(out["exceeded_by"])
    return out, guess

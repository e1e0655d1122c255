"""How a leaderboard reads a membership submission: ranked by AUC, with TPR at 1% FPR,
its confidence interval and both metrics' chance levels beside it.

* **Rank by AUC.**  On the challenge's MNIST federation the LOSS attack beats random
  submissions clearly in AUC but not at 1% FPR (docs/validation.md section 11: the easiest
  non-members are as confident as any member), so TPR at 1% FPR cannot be the yardstick
  a seed is checked with; it is the figure beside the rank, flagged when it beats chance.
* **Chance level of the AUC**: scores independent of membership (no ties) give an AUC
  with mean 0.5 and the Mann-Whitney null standard deviation
  ``sqrt((n1 + n0 + 1) / (12 n1 n0))``; the 95th percentile is ``0.5 + 1.645 sd`` (the
  normal approximation of U, accurate to a fraction of an sd for hundreds of samples).
* **Chance level of TPR at FPR <= a.**  Random scores put the ``n1`` members and ``n0``
  non-members in a uniformly random order.  TPR at FPR <= a is the share of members ranked
  above the ``(k + 1)``-th highest non-member, where ``k`` is the largest count with
  ``k / n0 <= a`` (the ROC point fedaudit.metrics reports).  The number of members drawn
  before the ``(k + 1)``-th non-member of a random order is negative hypergeometric,
  ``X ~ NHG(M = n0 + n1, n = n1, r = k + 1)`` (``scipy.stats.nhypergeom``), so the chance
  TPR has mean ``(k + 1) / (n0 + 1)`` and a 95th percentile ``ppf(0.95) / n1`` (exact).
* **Confidence interval of the TPR**: Clopper-Pearson's exact 95% interval of a binomial
  proportion (``scipy.stats.binomtest(...).proportion_ci``) for the members above the
  submission's own threshold.  It covers the sampling of the members only; the threshold
  itself also moves with which non-members were drawn, so the interval is a lower bound
  on the uncertainty.

A submission "beats chance" at a metric when it is above the random submissions' 95th
percentile there.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

__all__ = ["Chance", "LeaderboardLine", "auc_chance_p95", "chance", "fp_budget",
           "leaderboard_line", "null_auc_sd", "tpr_interval"]

PRIMARY_FPR = 0.01
#: the standard normal's 95th percentile (scipy.stats.norm.ppf(0.95))
_Z95 = 1.6448536269514722


def null_auc_sd(n_members: int, n_nonmembers: int) -> float:
    """Standard deviation of the AUC of scores independent of membership (no ties): the
    Mann-Whitney U statistic's null variance ``n1 n0 (n1 + n0 + 1) / 12``, divided by
    ``(n1 n0)^2``."""
    return math.sqrt((n_members + n_nonmembers + 1) / (12.0 * n_members * n_nonmembers))


def auc_chance_p95(n_members: int, n_nonmembers: int) -> float:
    """The 95th percentile of a random submission's AUC: ``0.5 + 1.645 sd``."""
    return 0.5 + _Z95 * null_auc_sd(n_members, n_nonmembers)


def fp_budget(n_nonmembers: int, max_fpr: float = PRIMARY_FPR) -> int:
    """The most false positives a ROC point with FPR <= ``max_fpr`` can have: the largest
    ``k`` with ``k / n0 <= max_fpr``, compared as fedaudit.metrics does (correctly rounded
    division of integer counts)."""
    k = int(math.floor(max_fpr * n_nonmembers))
    while (k + 1) / n_nonmembers <= max_fpr:
        k += 1
    while k > 0 and k / n_nonmembers > max_fpr:
        k -= 1
    return k


@dataclass(frozen=True)
class Chance:
    """Where scores independent of membership land at TPR at FPR <= ``max_fpr``."""

    max_fpr: float
    false_positives: int  # k: the false positives the ROC point may have
    tpr_mean: float
    tpr_p95: float

    def beaten_by(self, tpr: float) -> bool:
        """True when ``tpr`` is above the random submissions' 95th percentile."""
        return tpr > self.tpr_p95


def chance(n_members: int, n_nonmembers: int, max_fpr: float = PRIMARY_FPR) -> Chance:
    """The exact chance distribution of TPR at FPR <= ``max_fpr`` (module docstring)."""
    from scipy.stats import nhypergeom

    k = fp_budget(n_nonmembers, max_fpr)
    x = nhypergeom(n_members + n_nonmembers, n_members, k + 1)
    return Chance(max_fpr, k, float(x.mean()) / n_members, float(x.ppf(0.95)) / n_members)


def tpr_interval(tpr: float, n_members: int, level: float = 0.95) -> tuple[float, float]:
    """Clopper-Pearson interval of a TPR measured on ``n_members`` members (the one
    results.json gives every TPR: :func:`fedaudit.intervals.clopper_pearson`)."""
    from fedaudit.intervals import clopper_pearson

    return clopper_pearson(int(round(tpr * n_members)), n_members, level)


@dataclass(frozen=True)
class LeaderboardLine:
    """A graded submission beside chance: AUC (the rank; with its null sd and the random
    submissions' 95th percentile), TPR at 1% FPR (with its 95% interval and the random
    submissions' 95th percentile), TPR at 0.1% FPR."""

    name: str
    auc: float
    tpr_at_1pct_fpr: float
    tpr_at_0p1pct_fpr: float
    n_members: int
    n_nonmembers: int
    tpr_ci_low: float
    tpr_ci_high: float
    chance: Chance
    auc_null_sd: float

    #: the first six columns are the ones the grader always printed
    CSV_HEADER = ("submission,tpr_at_1pct_fpr,auc,tpr_at_0p1pct_fpr,n_members,n_nonmembers,"
                  "auc_chance_p95,auc_beats_chance,tpr_ci95_low,tpr_ci95_high,"
                  "tpr_chance_p95,tpr_beats_chance")

    @property
    def auc_chance_p95(self) -> float:
        return 0.5 + _Z95 * self.auc_null_sd

    @property
    def beats_chance(self) -> bool:
        """At the rank's metric, the AUC."""
        return self.auc > self.auc_chance_p95

    @property
    def tpr_beats_chance(self) -> bool:
        return self.chance.beaten_by(self.tpr_at_1pct_fpr)

    def csv_line(self) -> str:
        def yes(b: bool) -> str:
            return "yes" if b else "no"
        return (f"{self.name},{self.tpr_at_1pct_fpr:.4f},{self.auc:.4f},"
                f"{self.tpr_at_0p1pct_fpr:.4f},{self.n_members},{self.n_nonmembers},"
                f"{self.auc_chance_p95:.4f},{yes(self.beats_chance)},"
                f"{self.tpr_ci_low:.4f},{self.tpr_ci_high:.4f},{self.chance.tpr_p95:.4f},"
                f"{yes(self.tpr_beats_chance)}")

    def summary(self) -> str:
        """One sentence for a person: both figures, the interval, and chance beside them."""
        def verdict(b: bool) -> str:
            return "above" if b else "NOT above"
        return (f"{self.name}: AUC {self.auc:.3f}, {verdict(self.beats_chance)} chance "
                f"(random submissions: 0.5 +- {self.auc_null_sd:.3f}, 95th percentile "
                f"{self.auc_chance_p95:.3f}); TPR@1%FPR {self.tpr_at_1pct_fpr:.3f} (95% CI "
                f"{self.tpr_ci_low:.3f}-{self.tpr_ci_high:.3f}, {self.n_members} members), "
                f"{verdict(self.tpr_beats_chance)} chance (random submissions: mean "
                f"{self.chance.tpr_mean:.3f}, 95th percentile {self.chance.tpr_p95:.3f}; "
                f"{self.chance.false_positives} false positives allowed among "
                f"{self.n_nonmembers} non-members)")


def leaderboard_line(name: str, scores, member) -> LeaderboardLine:
    """Grade ``scores`` (higher = member) against 0/1 ``member``."""
    from fedaudit.metrics import membership_metrics

    m = membership_metrics(np.asarray(scores, dtype=np.float64), np.asarray(member))
    n1, n0 = m["n_members"], m["n_nonmembers"]
    low, high = tpr_interval(m["tpr_at_1pct_fpr"], n1)
    return LeaderboardLine(name, m["auc"], m["tpr_at_1pct_fpr"], m["tpr_at_0p1pct_fpr"], n1, n0,
                           low, high, chance(n1, n0), null_auc_sd(n1, n0))

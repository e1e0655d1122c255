"""Verdicts that hold (issue 57): what a figure says against what a guess without data
reaches, at its real unit of independence, corrected for looking at several attacks or
clients (docs/algorithms.md section 5).

* :mod:`~fedaudit.verdicts.outcome` -- the four outcomes (leaks, leaks with the score
  inverted, no leak beyond delta, inconclusive), a family's :class:`Rule`, one tested
  figure (:class:`Estimate`) and :func:`decide`, which turns the estimates a cell looked at
  into its :class:`Verdict`;
* :mod:`~fedaudit.verdicts.auc` -- an AUC: DeLong, the exact Mann-Whitney test with
  Newcombe's interval for small samples, Obuchowski's clustered variance and a cluster
  permutation test;
* :mod:`~fedaudit.verdicts.means` -- a mean or a ratio of sums, clustered (t on K - 1 df);
* :mod:`~fedaudit.verdicts.multiplicity` -- Holm's correction;
* :mod:`~fedaudit.verdicts.paired` -- two AUCs on the same targets (DeLong's paired test).

Pure functions over arrays, validated like :mod:`fedaudit.metrics`; scipy is imported on
first use.
"""

from fedaudit.verdicts.auc import auc_estimate
from fedaudit.verdicts.means import clustered_mean, clustered_ratio
from fedaudit.verdicts.multiplicity import holm
from fedaudit.verdicts.outcome import (ALPHA, INCONCLUSIVE, LEAKS, LEAKS_INVERTED, NO_LEAK,
                                       OUTCOMES, Estimate, Rule, Verdict, decide, leak_flags,
                                       legacy_outcome, units_needed, with_scope)

__all__ = ["ALPHA", "INCONCLUSIVE", "LEAKS", "LEAKS_INVERTED", "NO_LEAK", "OUTCOMES",
           "Estimate", "Rule", "Verdict", "auc_estimate", "clustered_mean", "clustered_ratio",
           "decide", "holm", "leak_flags", "legacy_outcome", "units_needed", "with_scope"]

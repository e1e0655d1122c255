"""Membership-metrics benchmark (never part of the test suite). Run: ``python bench/metrics.py``.

ms per call of :func:`fedaudit.metrics.membership_metrics` against the old way, scikit-learn
called directly (the same ``_validate``, then ``roc_curve(drop_intermediate=False)`` for the
TPR / FPR points and ``roc_auc_score`` for the AUC: fedaudit's implementation before it
mirrored scikit-learn in numpy), at n = 40 (one client's set in a 1,000-client run), 400,
4000 and 100,000 samples, half of them members. The "same bits" column checks that both
return identical values on the benchmarked input. A federated run with 1,000 clients
calls this 45,000 times (once per client, target and attack).

Timing method: medians over repeats of a block of calls, the two ways interleaved in
every repeat (``bench.gnq._interleaved_medians``) so that load from other processes hits
them alike.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.gnq import _interleaved_medians  # noqa: E402
from fedaudit.metrics import _fpr_at_tpr, _tpr_at_fpr, _validate, membership_metrics  # noqa: E402

SIZES = (40, 400, 4000, 100_000)
#: the keys of membership_metrics, in its order
KEYS = ("auc", "tpr_at_1pct_fpr", "tpr_at_0p1pct_fpr", "fpr_at_80pct_tpr", "n_members",
        "n_nonmembers", "min_fpr_resolution")


def sklearn_metrics(scores, members) -> dict:
    """The old way: scikit-learn's ``roc_curve`` and ``roc_auc_score`` called directly."""
    from sklearn.metrics import roc_auc_score, roc_curve

    s, m = _validate(scores, members)
    fpr, tpr, _ = roc_curve(m, s, drop_intermediate=False)
    n_pos = int(m.sum())
    n_neg = int(m.shape[0] - n_pos)
    values = (float(roc_auc_score(m, s)), _tpr_at_fpr(fpr, tpr, 0.01),
              _tpr_at_fpr(fpr, tpr, 0.001), _fpr_at_tpr(fpr, tpr, 0.8), n_pos, n_neg,
              1.0 / n_neg)
    return dict(zip(KEYS, values))


def metrics_cost(sizes=SIZES, repeats: int = 7, budget_s: float = 0.05, seed: int = 0) -> list:
    """One row per n: ms per call old / new, their ratio, and whether the values agree.

    Each repeat times a block of calls of about ``budget_s`` seconds of the old way.
    """
    rng = np.random.default_rng(seed)
    sklearn_metrics([0.0, 1.0], [0, 1])  # imports scikit-learn outside the timings
    rows = []
    for n in sizes:
        members = (rng.permutation(n) < n // 2).astype(np.int64)
        scores = rng.normal(size=n) + 0.3 * members
        t0 = time.perf_counter()
        old = sklearn_metrics(scores, members)
        calls = max(1, int(budget_s / (time.perf_counter() - t0)))
        new = membership_metrics(scores, members)
        same = all(np.float64(old[k]).tobytes() == np.float64(new[k]).tobytes() for k in old)

        def block(fn, calls=calls, scores=scores, members=members):
            return lambda: [fn(scores, members) for _ in range(calls)]

        t = _interleaved_medians({"old": block(sklearn_metrics), "new": block(membership_metrics)},
                                 repeats, warmup=1)
        rows.append({"n": n, "calls_per_repeat": calls, "repeats": repeats,
                     "old_ms": 1e3 * t["old"] / calls, "new_ms": 1e3 * t["new"] / calls,
                     "ratio": t["old"] / t["new"], "same_bits": same})
    return rows


def main(argv: list[str] | None = None) -> list:
    from rich.console import Console
    from rich.table import Table

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeats", type=int, default=7)
    args = ap.parse_args(argv)
    rows = metrics_cost(repeats=args.repeats)
    t = Table(title="ms per call (medians): old = sklearn roc_curve + roc_auc_score")
    for col in ("n", "calls x repeats", "old: sklearn ms", "membership_metrics ms",
                "old / new", "same bits"):
        t.add_column(col, justify="right")
    for r in rows:
        t.add_row(f"{r['n']:,}", f"{r['calls_per_repeat']} x {r['repeats']}",
                  f"{r['old_ms']:.3f}", f"{r['new_ms']:.3f}", f"{r['ratio']:.1f}x",
                  "yes" if r["same_bits"] else "NO")
    Console(width=None if sys.stdout.isatty() else 120).print(t)
    return rows


if __name__ == "__main__":
    main()

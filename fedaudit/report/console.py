"""The console's tables of a run (rich), beside the report's HTML: what ``fedaudit run``
prints at the end."""

from __future__ import annotations

from typing import Any

from rich.table import Table

from fedaudit.report.format import fmt, fmt_ci, verdict_of

__all__ = ["membership_table"]


def membership_table(attacks: dict[str, Any]) -> Table:
    """results.json ``attacks``: each attack's pooled AUC and TPR at 1 % FPR with their 95 %
    intervals, the AUC's verdict against chance in a word, and the FPR at 80 % TPR; fits 80
    columns."""
    t = Table(title="membership inference on the global model (pooled over clients)",
              pad_edge=False)
    for col in ("attack", "AUC [95% CI]", "AUC vs", "TPR@1%FPR [95% CI]", "FPR@80%TPR"):
        t.add_column(col, no_wrap=True)
    for name, m in attacks.items():
        t.add_row(name, fmt_ci(m.get("auc"), m.get("auc_ci")), verdict_of(m, short=True),
                  fmt_ci(m.get("tpr_at_1pct_fpr"), m.get("tpr_at_1pct_fpr_ci")),
                  fmt(m.get("fpr_at_80pct_tpr")))
    return t

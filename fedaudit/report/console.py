"""The console's tables of a run (rich), beside the report's HTML: what ``fedaudit run``
prints at the end."""

from __future__ import annotations

from typing import Any

from rich.table import Table

from fedaudit.report.format import fmt, fmt_ci, verdict_of

__all__ = ["active_membership_line", "membership_table", "update_attack_lines"]


def membership_table(attacks: dict[str, Any]) -> Table:
    """results.json ``attacks``: each attack's pooled AUC and TPR at 1 % FPR with their 95 %
    intervals, the AUC's verdict against chance in a word, and the FPR at 80 % TPR; fits 80
    columns."""
    t = Table(title="membership inference on the global model (pooled over clients)",
              pad_edge=False)
    for col in ("attack", "AUC [95% CI]", "verdict", "TPR@1%FPR [95% CI]", "FPR@.8TPR"):
        t.add_column(col, no_wrap=True)
    for name, m in attacks.items():
        t.add_row(name, fmt_ci(m.get("auc"), m.get("auc_ci")), verdict_of(m, short=True),
                  fmt_ci(m.get("tpr_at_1pct_fpr"), m.get("tpr_at_1pct_fpr_ci")),
                  fmt(m.get("fpr_at_80pct_tpr")))
    return t


def update_attack_lines(results: dict) -> list[str]:
    """Each family of attacks on updates' console line (:mod:`attacks.update_family`), then
    its line on the rounds' aggregates where it attacked them."""
    from attacks.update_family import families

    out = []
    for fam in families():
        section = results.get(fam.name)
        if not isinstance(section, dict):
            continue
        if line := fam.console(section):
            out.append(line)
        agg = section.get("aggregate")
        if isinstance(agg, dict) and (line := fam.console(agg)):
            out.append(f"on the rounds' aggregates: {line}")
    return out


def active_membership_line(act: dict) -> str:
    """results.json ``active_membership`` in one line: the active AUC and its verdict, the
    passive one, and the paired gain over the honest server's same round (in a matrix) or
    over the round before, with its verdict."""
    a, p = act["active"], act["passive"]
    paired = act.get("paired") or {}
    gain = paired.get("honest_same_round") or paired.get("previous_round")
    over = "the honest same round" if paired.get("honest_same_round") else "the round before"
    return (f"malicious server (gradient ascent, round {act['round']}, "
            f"{act['aggregation']} aggregation): AUC {a['auc']:.3f} on {act['targets']} "
            f"targets" + (f" ({act['verdict_detail']['summary']})"
                          if isinstance(act.get("verdict_detail"), dict) else "")
            + f", passive {p['auc']:.3f}"
            + (f"; paired gain over {over} {gain['auc_gain']:+.3f} "
               f"({gain['verdict_detail']['summary']})" if isinstance(gain, dict) else ""))

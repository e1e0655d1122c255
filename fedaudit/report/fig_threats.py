"""The report's threat-model matrix (issue 40): which attack survives which attacker
position in this run, with the malicious server's read-out; rebuilt from results.json
(:mod:`fedaudit.rundir.threat_matrix`), so older runs have it too."""

from __future__ import annotations

import html

from fedaudit.rundir.threat_matrix import MEASURED, POSITIONS, families, threat_matrix
from fedaudit.report.format import fmt_ci, table, verdict_of
from fedaudit.report.sections import register_section
from fedaudit.rundir.reading import RunData

__all__ = ["section_threats"]


def _cell(c) -> str:
    if c.status == MEASURED:
        summary = (c.detail or {}).get("summary") if isinstance(c.detail, dict) else c.verdict
        return html.escape(c.text) + (f"<br><small>{html.escape(str(summary))}</small>"
                                      if summary else "")
    return f'<span style="color:var(--mute)" title="{html.escape(c.why)}">{html.escape(c.status)}</span>'


def section_threats(run: RunData) -> str:
    m = threat_matrix(run.results)
    if not any(c.status == MEASURED for row in m.values() for c in row.values()):
        return ""
    fams = families()
    rows = [[html.escape(pos), html.escape(POSITIONS[pos]), *(_cell(m[pos][f]) for f in fams)]
            for pos in m]
    out = [table(["position", "sees", *fams], rows, text_cols=tuple(range(2 + len(fams))))]
    mal = run.results.get("malicious_server")
    if isinstance(mal, dict) and mal.get("samples"):
        out.append(f"<p>Malicious server (imprint block, {mal['bins']} bins, "
                   f"{html.escape(str(mal['aggregation']))} aggregation): {mal['near_exact']} "
                   f"of round {mal['round']}'s {mal['samples']} samples read back with PSNR "
                   f"&ge; {mal['near_exact_db']:g} dB, expected share "
                   f"{mal['expected_share']:.0%}; test accuracy after the run "
                   f"{mal['test_accuracy']:.3f}.</p>")
    act = run.results.get("active_membership")
    if isinstance(act, dict) and isinstance(act.get("active"), dict):
        a, p = act["active"], act.get("passive") or {}
        h = act.get("honest_same_round")
        paired = act.get("paired") or {}
        gains = "".join(
            f" Paired with {what} on the same targets (DeLong): AUC gain "
            f"{g['auc_gain']:+.3f} [{g['auc_gain_ci'][0]:+.3f}, {g['auc_gain_ci'][1]:+.3f}], "
            f"{html.escape(g['verdict_detail']['summary'])}."
            for key, what in (("honest_same_round",
                               f"the honest server's round {act['round']}"),
                              ("previous_round", f"the honest round before"))
            if isinstance(g := paired.get(key), dict))
        out.append(f"<p>Malicious server (gradient ascent on {act['targets']} targets, "
                   f"{act['members']} of them members, at round {act['round']}, "
                   f"{html.escape(str(act['aggregation']))} aggregation; Nasr et al. 2019): "
                   f"AUC {fmt_ci(a.get('auc'), a.get('auc_ci'))} "
                   f"({html.escape(verdict_of(a))}) against the passive curious server's "
                   f"{fmt_ci(p.get('auc'), p.get('auc_ci'))} on the same targets over the "
                   f"honest round before"
                   + (f" and {fmt_ci(h.get('auc'), h.get('auc_ci'))} over the honest "
                      f"server's round {act['round']}" if isinstance(h, dict) else "")
                   + f"; the ascent raised their mean loss by {act['loss_rise']:.3f}."
                   + gains + "</p>")
    return "\n".join(out)


register_section("threats", "Which attack survives which position",
                 "The strongest figure this run measured for each attacker position and "
                 "attack family; 'not possible' where the position sees nothing that "
                 "family attacks (hover for why), 'not measured' where this run did not "
                 "attack it.", html=section_threats)

"""Report section "What the server learns from the updates": every family of attacks on
the clients' updates that ran (results.json ``label_leakage``, ``reconstruction``, a
plug-in's: :mod:`attacks.update_family`), each from its own report blocks -- paragraphs and
tables its family builds from its results.json section -- under the threat model, with the
family's notes.  The reconstructions' pictures follow
(:mod:`fedaudit.report.fig_reconstruction`)."""

from __future__ import annotations

import html
from typing import Any

from fedaudit.report.format import table
from fedaudit.report.sections import register_section
from fedaudit.rundir.reading import RunData

__all__ = ["SECTION", "section_update_attacks"]

#: the section's id (the figures of :mod:`fedaudit.report.fig_reconstruction` go under it)
SECTION = "update-attacks"


def _block(block: Any) -> str:
    if isinstance(block, str):
        return f"<p>{html.escape(block)}</p>"
    return table(list(map(html.escape, block.header)),
                 [[html.escape(str(c)) for c in row] for row in block.rows],
                 text_cols=block.text_cols)


def section_update_attacks(run: RunData) -> str:
    from attacks.update_family import families

    ran = [(f, run.results[f.name]) for f in families()
           if isinstance(run.results.get(f.name), dict)]
    if not ran:
        return ""
    tm = ran[0][1].get("threat_model") or {}
    out = [f"<p>Threat model: an {html.escape(str(tm.get('position', '?')))} that knows "
           f"{html.escape('; '.join(tm.get('knows', [])))}, and not "
           f"{html.escape('; '.join(tm.get('does_not_know', [])))}.</p>"]
    for fam, section in ran:
        out += [_block(b) for b in fam.report(section)]
        agg = section.get("aggregate")
        if isinstance(agg, dict):
            out.append(f"<h3>{html.escape(fam.title.capitalize())} on the rounds' aggregates"
                       f"</h3><p>{html.escape(_aggregate_rounds(agg))}</p>")
            out += [_block(b) for b in fam.report(agg)]
        out += [f"<p class=\"intro\">{html.escape(n)}</p>" for n in section.get("notes", [])]
    return "".join(out)


def _aggregate_rounds(agg: dict) -> str:
    """What the attack on the aggregates read: each round's clients and samples."""
    rounds = "; ".join(f"round {r['round']}: {len(r['clients'])} clients, "
                       f"{r['num_examples']} samples" for r in agg.get("rounds") or [])
    return ("The change of the global model over each round, which a server under secure "
            "aggregation and every client see, attacked as one client holding the round's "
            f"samples ({rounds or 'no round'}); scored against the union of the round's "
            "clients' samples.")


register_section(SECTION, "What the server learns from the updates",
                 "The server's attacks on each client's update (issues 39, 48) and, where "
                 "asked (<family>.on), on each round's aggregate (issue 49): which labels "
                 "the clients trained on, their training images rebuilt by matching the "
                 "update, and any other family registered, against the true samples of the "
                 "round.", html=section_update_attacks)

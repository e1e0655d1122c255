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
        out += [f"<p class=\"intro\">{html.escape(n)}</p>" for n in section.get("notes", [])]
    return "".join(out)


register_section(SECTION, "What the server learns from the updates",
                 "The server's attacks on each client's update (issues 39, 48): which labels "
                 "the client trained on, its training images rebuilt by matching the update, "
                 "and any other family registered, against the client's true samples of the "
                 "round.", html=section_update_attacks)

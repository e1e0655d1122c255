"""``DIR/report.html``: the matrix report, from matrix.json alone (self-contained,
offline, no scripts; the single-run report's stylesheet).

* **The matrix at a glance**: a row per attacker position and attack family, a column per
  defense.  A cell is coloured by its verdict (:mod:`fedaudit.verdicts`), not by its raw
  value: red where it **leaks** (a test rejects chance, corrected for the attacks and
  clients looked at; an AUC below 0.5 too: the score works flipped), green only where there
  is **no leak beyond delta** (every interval within chance +- the family's delta), amber
  where it is **inconclusive** (the cell says how many more samples or clients would
  resolve it), blue where a figure was measured that has no test (the imprint's share),
  grey where the position cannot attack, white where nothing was measured (the cell's
  tooltip says why).
* **The cost**: each defense's test accuracy and epsilon, and links to its runs' reports.
* **The privacy-utility frontier**: per family, each defense's leakage (the strongest
  measured figure over the passive positions -- the malicious server's figures are of
  other kinds --, with its interval and chance level) against its
  test accuracy.
"""

from __future__ import annotations

import html
import time
from pathlib import Path
from typing import Any

from fedaudit.report.style import CSS
from fedaudit.verdicts import INCONCLUSIVE, LEAKS, LEAKS_INVERTED, NO_LEAK, legacy_outcome

__all__ = ["cell_class", "frontier_points", "render_matrix_report"]

EXTRA_CSS = """.leak{background:#f8d7d3}.safe{background:#d9eed8}.inc{background:#fbecc8}
.meas{background:#dde8f6}.np{background:#eceef1;color:#6b7280}
.nm{color:#9aa0a8;font-style:italic}td.cell{font-size:12px;min-width:150px}
td.cell small{display:block;color:#374151;margin-top:2px}
span.key{display:inline-block;padding:1px 8px;margin-right:6px;border:1px solid #d8dbe0;
font-size:12px}"""
LEGEND = [("leak", "leaks: a test rejects chance (95 %, Holm over the attacks and clients "
                   "looked at; an AUC below 0.5 too)"),
          ("safe", "no leak beyond delta: every interval within chance ± delta"),
          ("inc", "inconclusive: neither (the cell says what would resolve it)"),
          ("meas", "measured, no test"), ("np", "not possible"), ("nm", "not measured")]


def cell_class(cell: dict[str, Any]) -> str:
    """The colour class of a matrix.json cell (module docstring); a verdict word of a matrix
    made before issue 57 is read conservatively (above chance: leaks, anything else:
    inconclusive -- never safe)."""
    status = cell.get("status")
    if status == "not possible":
        return "np"
    if status != "measured":
        return "nm"
    verdict = legacy_outcome(cell.get("verdict"))
    return {LEAKS: "leak", LEAKS_INVERTED: "leak", NO_LEAK: "safe",
            INCONCLUSIVE: "inc"}.get(verdict, "meas")


def cell_verdict_text(cell: dict[str, Any]) -> str:
    """The verdict line under a measured cell's figure: the verdict's summary (what
    decided it, or what would resolve it), else its word."""
    detail = cell.get("detail")
    if isinstance(detail, dict) and detail.get("summary"):
        return str(detail["summary"])
    return str(legacy_outcome(cell.get("verdict")) or "")


def _esc(x: Any) -> str:
    return html.escape(str(x))


def _cost(d: dict[str, Any]) -> str:
    acc, eps = d.get("test_accuracy"), d.get("epsilon")
    parts = [f"acc {acc:.3f}" if isinstance(acc, (int, float)) else "acc –"]
    if isinstance(eps, (int, float)):
        parts.append(f"ε {eps:.3g}")
    elif eps is not None:
        parts.append(f"ε {eps}")
    return ", ".join(parts)


def _matrix_table(doc: dict[str, Any]) -> str:
    defenses = doc["defenses"]
    head = "".join(f"<th>{_esc(d['title'])}<br><small>{_esc(_cost(d))}"
                   f"{'' if d['status'] == 'finished' else ', ' + _esc(d['status'])}"
                   "</small></th>" for d in defenses)
    rows = []
    for pos, sees in doc["positions"].items():
        for j, fam in enumerate(doc["families"]):
            first = (f'<td class="t" rowspan="{len(doc["families"])}"><b>{_esc(pos)}</b><br>'
                     f"<small>sees {_esc(sees)}</small></td>" if j == 0 else "")
            cells = []
            for d in defenses:
                c = ((d.get("cells") or {}).get(pos) or {}).get(fam)
                if c is None:
                    cells.append('<td class="cell nm">not run yet</td>')
                    continue
                text = c["text"] if c["status"] == "measured" else c["status"]
                verdict = cell_verdict_text(c) if c["status"] == "measured" else ""
                cells.append(f'<td class="cell {cell_class(c)}" title="{_esc(c.get("why", ""))}">'
                             f"{_esc(text)}"
                             + (f"<small>{_esc(verdict)}</small>" if verdict else "")
                             + "</td>")
            rows.append(f"<tr>{first}<td class=\"t\">{_esc(fam)}</td>{''.join(cells)}</tr>")
    legend = "".join(f'<span class="key {k}">{_esc(t)}</span>' for k, t in LEGEND)
    return (f"<p>{legend}</p><div class=\"scroll\"><table><thead><tr><th>position</th>"
            f"<th>family</th>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table></div>")


def _runs_table(doc: dict[str, Any], root: Path) -> str:
    rows = []
    for d in doc["defenses"]:
        for role, r in d["runs"].items():
            link = "–"
            if r.get("dir"):
                rep = Path(r["dir"]) / "report.html"
                link = (f'<a href="{_esc(rep.as_posix())}">{_esc(r["dir"])}</a>'
                        if (root / rep).is_file() else _esc(r["dir"]))
            secs = f"{r['seconds']:.0f}" if isinstance(r.get("seconds"), (int, float)) else "–"
            rows.append(f"<tr><td class=\"t\">{_esc(d['title'])}</td><td class=\"t\">{_esc(role)}"
                        f"</td><td class=\"t\">{_esc(r['status'])}</td><td>{secs}</td>"
                        f"<td class=\"t\">{link}</td><td class=\"t\">{_esc(r.get('error') or '')}"
                        "</td></tr>")
    return ("<table class=\"num\"><thead><tr><th>defense</th><th>run</th><th>status</th>"
            "<th>seconds</th><th>run directory (its report)</th><th>error</th></tr></thead>"
            f"<tbody>{''.join(rows)}</tbody></table>")


def frontier_points(doc: dict[str, Any], family: str) -> list[dict[str, Any]]:
    """Per defense with a test accuracy: its strongest measured ``family`` figure over the
    passive positions (:data:`~fedaudit.rundir.threat_matrix.PASSIVE`: the largest; ties:
    the first position), with the position, interval and chance level."""
    from fedaudit.rundir.threat_matrix import PASSIVE

    out = []
    for d in doc["defenses"]:
        acc = d.get("test_accuracy")
        if not isinstance(acc, (int, float)):
            continue
        best = None
        for pos, row in (d.get("cells") or {}).items():
            c = (row.get(family) or {}) if pos in PASSIVE else {}
            if c.get("status") == "measured" and isinstance(c.get("figure"), (int, float)):
                if best is None or c["figure"] > best["figure"]:
                    best = {"figure": c["figure"], "interval": c.get("interval"),
                            "chance": c.get("chance"), "position": pos}
        if best is not None:
            out.append({"defense": d["title"], "accuracy": acc, "epsilon": d.get("epsilon"),
                        **best})
    return out


def _frontier(doc: dict[str, Any]) -> str:
    import matplotlib

    from fedaudit.report.registry import new_figure, png_base64

    fams = [f for f in doc["families"] if frontier_points(doc, f)]
    if not fams:
        return '<p class="absent">No defense has a finished main run yet.</p>'
    colours = {d["title"]: matplotlib.colormaps["tab10"](i % 10)
               for i, d in enumerate(doc["defenses"])}
    fig = new_figure(3.6 * len(fams), 3.6)
    labels: dict[str, Any] = {}
    for ax, fam in zip(fig.subplots(1, len(fams), squeeze=False)[0], fams):
        for p in frontier_points(doc, fam):
            ci = p["interval"]
            yerr = ([[p["figure"] - ci[0]], [ci[1] - p["figure"]]]
                    if isinstance(ci, list) and len(ci) == 2 else None)
            eps = p["epsilon"]
            label = p["defense"] + (f", ε {eps:.3g}" if isinstance(eps, (int, float)) else "")
            handle = ax.errorbar([p["accuracy"]], [p["figure"]], yerr=yerr, fmt="o",
                                 capsize=3, color=colours[p["defense"]], alpha=0.85)
            labels.setdefault(label, handle)
            if p["chance"] is not None:  # what chance gives the same attack
                chance = ax.plot([p["accuracy"]], [p["chance"]], marker="_", ms=16, mew=2,
                                 color="grey", ls="none")[0]
                labels.setdefault("chance level", chance)
        ax.set_xlabel("test accuracy")
        ax.set_ylabel({"membership": "AUC (strongest position)",
                       "label leakage": "label accuracy",
                       "reconstruction": "PSNR (dB)"}.get(fam, fam))
        ax.set_title(fam)
    fig.legend(list(labels.values()), list(labels), loc="outside lower center",
               ncol=min(3, len(labels)), fontsize=8, frameon=False)
    data = png_base64(fig)
    return (f'<figure><img alt="privacy-utility frontier" src="data:image/png;base64,{data}">'
            "<figcaption><b>Privacy-utility frontier.</b> Each point is a defense: its test "
            "accuracy against the strongest figure measured for the family by a passive "
            "attacker (outsider, insider, curious server; the malicious server's row is in the "
            "matrix above) (bars: 95 % interval where the figure has one; grey dashes: what chance "
            "gives, an AUC of 0.5 and the best data-free guess of the labels; a "
            "reconstruction's verdict is its SSIM gain over the data-free prior, in the "
            "matrix above)."
            "</figcaption></figure>")


def render_matrix_report(doc: dict[str, Any], root: Path) -> str:
    """The report of the matrix document ``doc`` written in folder ``root``."""
    secs = doc.get("seconds")
    state = (f"{doc['runs_finished']} of {doc['runs']} runs finished"
             + (f", {secs / 60:.1f} min of runs" if isinstance(secs, (int, float)) else ""))
    sets = " ".join(f"--set {s}" for s in doc.get("sets") or [])
    body = (f"<h1>Threat-model matrix: {_esc(doc['scenario'])}</h1>"
            f"<p class=\"desc\">Which attack survives which defense, at what cost. "
            f"{_esc(state)}. Made by <code>fedaudit matrix {_esc(doc['source'])} "
            f"--defenses {_esc(','.join(d['name'] for d in doc['defenses']))} {_esc(sets)}"
            "</code>.</p>"
            "<h2>The matrix at a glance</h2>" + _matrix_table(doc)
            + "<h2>The privacy-utility frontier</h2>" + _frontier(doc)
            + "<h2>The runs</h2>" + _runs_table(doc, root)
            + f"<footer>Written on {time.strftime('%Y-%m-%d %H:%M:%S')} from matrix.json; "
            "self-contained, no scripts.</footer>")
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>fedaudit matrix: {_esc(doc['scenario'])}</title><style>\n{CSS}"
            f"{EXTRA_CSS}</style></head><body>{body}</body></html>\n")

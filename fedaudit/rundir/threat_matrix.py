"""The threat-model matrix of one run (issue 40): which attack survives which position.

Rows are the attacker's positions, columns the attack families (membership, then each
family of attacks on updates: :mod:`attacks.update_family`); each cell holds the
strongest figure the run measured for that position and family, or says why there is
none: ``not possible`` (the position sees nothing that family attacks: an outsider holds
no update; under secure aggregation the server holds no client's update) or ``not
measured`` (the position could attack, this run did not).  Read from results.json alone
(``attack_positions``, each family's section, ``malicious_server``, the scenario's
``federation.aggregation``), so ``fedaudit compare`` can rebuild it for old runs.

Figures: membership -- the best attack's pooled AUC and TPR at 1 % FPR at that position;
the malicious server's membership -- its active attack's AUC beside the passive one;
a family of attacks on updates -- its :meth:`~attacks.update_family.UpdateAttackFamily.cell`
at the positions it declares (label leakage: the first label attack's pooled accuracy;
reconstruction: the first reconstruction's pooled PSNR in dB and identifiability), and
on the rounds' aggregates (its section's ``aggregate``, where its ``on`` lists it) for
the aggregate-only server and the insider (every client receives consecutive global
models, so it holds each round's aggregate; subtracting its own update is not
implemented, so its cell is a lower bound); the malicious server's reconstruction -- its
share of the round's samples read back near-exactly.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from typing import Any

from attacks.update_family import AGGREGATE_ONLY, EACH_UPDATE

__all__ = ["PASSIVE", "POSITIONS", "Cell", "families", "matrix_json", "threat_matrix"]

#: the malicious server's own results fill these columns (results.json ``malicious_server``)
MALICIOUS_SERVER = ("reconstruction",)
#: the positions (rows) and what each sees
POSITIONS = {
    "outsider": "the released model",
    "insider": "every round's global model",
    EACH_UPDATE: "each client's update, as received",
    AGGREGATE_ONLY: "each round's aggregate (secure aggregation)",
    "malicious server": "the aggregate of a model it modified",
}
#: the positions of passive attackers: their figures of a family are of one kind (the
#: malicious server's reconstruction is the imprint's share read back, not a PSNR)
PASSIVE = tuple(p for p in POSITIONS if p != "malicious server")
NOT_POSSIBLE, NOT_MEASURED, MEASURED = "not possible", "not measured", "measured"


@dataclass(frozen=True)
class Cell:
    """One cell: ``status`` (measured / not possible / not measured), the headline
    ``figure`` (AUC, label accuracy, PSNR or share; None unless measured), a short ``text``
    for tables, ``why`` when there is no figure, and, where the run has them, the figure's
    95 % ``interval`` ``[low, high]``, its ``verdict`` (one of
    :data:`fedaudit.verdicts.OUTCOMES`: leaks, leaks with the score inverted, no leak
    beyond delta, inconclusive), the ``chance`` level it is judged against (the membership
    AUC's 0.5, the data-free label guess's share) and the verdict's ``detail``
    (:meth:`fedaudit.verdicts.Verdict.as_dict`: delta, unit of independence, the deciding
    test, the most exposed client, how many more units would resolve it)."""

    status: str
    figure: float | None = None
    text: str = ""
    why: str = ""
    interval: list[float] | None = None
    verdict: str | None = None
    chance: float | None = None
    detail: dict[str, Any] | None = None


def _position(results: dict, name: str) -> dict | None:
    for p in results.get("attack_positions") or []:
        if isinstance(p, dict) and p.get("position") == name and p.get("auc") is not None:
            return p
    if name == "outsider":  # a run that attacked only the released model has no positions
        attacks = {m: a for m, a in (results.get("attacks") or {}).items()
                   if isinstance(a, dict) and a.get("auc") is not None}
        if attacks:
            m = max(attacks, key=lambda k: attacks[k]["auc"])
            out = {"best_method": m, "auc": attacks[m]["auc"],
                   "tpr_at_1pct_fpr": attacks[m].get("tpr_at_1pct_fpr"),
                   "auc_ci": attacks[m].get("auc_ci"), "verdict": attacks[m].get("verdict")}
            cell = membership_cell_verdict(attacks, results.get("clients") or [])
            return {**out, **({"cell_verdict": cell.as_dict()} if cell else {})}
    return None


def membership_cell_verdict(attacks: dict, clients: list) -> Any:
    """The outsider's verdict from results.json alone (a run without ``attack_positions``):
    the best method's pooled AUC, every other method's and every client's (``clients[]
    .attacks``), Holm over them (:func:`fedaudit.verdicts.decide`); None when the entries
    carry no test (a run made before issue 57)."""
    from fedaudit.metrics import MEMBERSHIP_RULE, estimate_of_entry
    from fedaudit.verdicts import decide

    pooled = {m: estimate_of_entry(a, "pooled", m) for m, a in attacks.items()}
    pooled = {m: e for m, e in pooled.items() if e is not None}
    if not pooled:
        return None
    best = max(pooled, key=lambda m: attacks[m]["auc"])
    others = [e for m, e in pooled.items() if m != best]
    for c in clients:
        for m, a in ((c.get("attacks") or {}) if isinstance(c, dict) else {}).items():
            if (e := estimate_of_entry(a, f"client {c.get('client')}", m)) is not None:
                others.append(e)
    return decide(MEMBERSHIP_RULE, pooled[best], others)


def _outcome(p: dict) -> tuple[str | None, dict | None]:
    """A membership row's verdict and its detail: the position's corrected verdict where
    the run has one, else the best method's own word read conservatively (an older run)."""
    from fedaudit.verdicts import legacy_outcome

    cell = p.get("cell_verdict")
    if isinstance(cell, dict) and cell.get("outcome"):
        return cell["outcome"], cell
    verdict = p.get("verdict")
    return legacy_outcome(verdict.get("auc") if isinstance(verdict, dict) else None), None


def _membership(p: dict | None, what: str) -> Cell:
    if p is None:
        return Cell(NOT_MEASURED, why=f"no membership attack on {what} in this run")
    tpr, ci = p.get("tpr_at_1pct_fpr"), p.get("auc_ci")
    verdict, detail = _outcome(p)
    return Cell(MEASURED, float(p["auc"]), f"AUC {p['auc']:.3f}"
                + (f" [{ci[0]:.3f}, {ci[1]:.3f}]" if isinstance(ci, list) else "")
                + (f", TPR@1%FPR {tpr:.3f}" if tpr is not None else "")
                + f" ({p.get('best_method', '?')})",
                interval=list(ci) if isinstance(ci, list) else None, verdict=verdict,
                chance=0.5, detail=detail)


def _family_cell(fam: Any, results: dict) -> Cell:
    section = results.get(fam.name)
    head = fam.cell(section) if isinstance(section, dict) else None
    if head is None:
        if not isinstance(section, dict):
            why = f"{fam.name}.enabled = false (no {fam.title} attack)"
        elif "pooled" not in section and "aggregate" in section:
            why = f"{fam.name}.on does not list 'updates'"
        else:
            why = fam.why_not(section) or _no_case(section, "update",
                                                   lambda n: not n.startswith("aggregate"))
        return Cell(NOT_MEASURED, why=why)
    return _measured(head)


def _measured(head: Any, suffix: str = "") -> Cell:
    """The measured cell of a family's :class:`~attacks.update_family.Headline` (a verdict
    word of a run made before issue 57 read conservatively)."""
    from fedaudit.verdicts import legacy_outcome

    return Cell(MEASURED, head.figure, head.text + suffix, interval=head.interval,
                verdict=legacy_outcome(head.verdict), chance=head.chance,
                detail=head.detail)


def _no_case(section: dict, what: str, mine: Any) -> str:
    """Why a family that ran has no figure: the first of its notes about ``what``."""
    notes = [n for n in section.get("notes") or [] if isinstance(n, str) and mine(n)]
    return f"no {what} was attacked" + (f" ({notes[0]})" if notes else "")


def _aggregate_cell(fam: Any, results: dict) -> Cell:
    """A family's cell on the rounds' aggregates (its section's ``aggregate``)."""
    if "aggregate" not in fam.views:
        return Cell(NOT_MEASURED, why=f"the {fam.title} attacks do not read a round's "
                                      "aggregate")
    section = results.get(fam.name)
    agg = section.get("aggregate") if isinstance(section, dict) else None
    head = fam.cell(agg) if isinstance(agg, dict) else None
    if head is None:
        return Cell(NOT_MEASURED, why=(
            (fam.why_not(agg) or _no_case(section, "aggregate",
                                          lambda n: n.startswith("aggregate")))
            if isinstance(agg, dict) else f"{fam.name}.on does not list 'aggregate' (or "
            f"{fam.name}.enabled = false)"))
    return _measured(head, ", on the round's aggregate")


def _active(results: dict) -> Cell:
    """The malicious server's active membership attack (results.json ``active_membership``),
    beside the passive attack on the same targets: DeLong's paired test against the honest
    server's same round where the run had it, else against the round before."""
    a = results.get("active_membership")
    if not isinstance(a, dict) or not isinstance(a.get("active"), dict):
        return Cell(NOT_MEASURED, why="active_membership.enabled = false (no active attack)")
    cell = _membership({**a["active"], "best_method": f"gradient ascent, round {a['round']}",
                        **({"cell_verdict": a["verdict_detail"]}
                           if isinstance(a.get("verdict_detail"), dict) else {})}, "")
    paired = a.get("paired") or {}
    text = cell.text
    for key, what in (("honest_same_round", f"the honest server's round {a['round']}"),
                      ("previous_round", f"round {a['round'] - 1}")):
        g = paired.get(key)
        if isinstance(g, dict):
            ci = g["auc_gain_ci"]
            text += (f"; over {what} (paired): {g['auc_gain']:+.3f} [{ci[0]:+.3f}, "
                     f"{ci[1]:+.3f}], {_gain_words(g['verdict'])}")
            break
    else:
        passive = (a.get("passive") or {}).get("auc")
        text += f"; passive {passive:.3f}" if passive is not None else ""
    return replace(cell, text=text)


def _gain_words(outcome: str) -> str:
    """An active-over-passive gain's verdict in words."""
    from fedaudit.verdicts import LEAKS, NO_LEAK

    return {LEAKS: "the ascent adds to it", NO_LEAK: "adds at most 0.05"}.get(
        outcome, "not resolved")


def _malicious(results: dict) -> Cell:
    m = results.get("malicious_server")
    if not isinstance(m, dict) or m.get("share") is None:
        return Cell(NOT_MEASURED, why="imprint.enabled = false (no malicious server)")
    return Cell(MEASURED, float(m["share"]),
                f"{m['share']:.0%} of round {m['round']} near-exact (expected "
                f"{m['expected_share']:.0%}; {m['bins']} bins)")


def families() -> tuple[str, ...]:
    """The columns: membership, then each family of attacks on updates' title."""
    from attacks.update_family import families as update_families

    return ("membership", *(f.title for f in update_families()))


def threat_matrix(results: dict) -> dict[str, dict[str, Cell]]:
    """position -> family -> :class:`Cell` for one run's results.json (module docstring)."""
    from attacks.update_family import families as update_families

    scen = results.get("scenario") if isinstance(results.get("scenario"), dict) else {}
    fed = scen.get("federation") if isinstance(scen.get("federation"), dict) else {}
    secure = fed.get("aggregation", "plain") != "plain"
    no_update = Cell(NOT_POSSIBLE, why="the position holds no update")
    hidden = Cell(NOT_POSSIBLE, why=f"federation.aggregation = {fed.get('aggregation')!r} "
                                    "hides each client's update from the server")
    insider = _membership(_position(results, "insider"), "every round's model")
    matrix = {
        "outsider": {"membership": _membership(_position(results, "outsider"),
                                               "the released model")},
        "insider": {"membership": insider},
        EACH_UPDATE: {"membership": hidden if secure else _membership(
            _position(results, "curious server"), "each client's model")},
        AGGREGATE_ONLY: {  # the aggregates are the rounds' models
            "membership": (replace(insider, text=insider.text + ", as the insider")
                           if insider.status == MEASURED else insider)},
        "malicious server": {"membership": _active(results)},
    }
    for fam in update_families():
        measured = _family_cell(fam, results)
        on_aggregate = _aggregate_cell(fam, results)
        for pos, row in matrix.items():
            if pos == "outsider":
                row[fam.title] = no_update
            elif pos == "malicious server":
                row[fam.title] = (_malicious(results) if fam.title in MALICIOUS_SERVER
                                  else Cell(NOT_MEASURED, why="not implemented"))
            elif pos == EACH_UPDATE and secure:
                row[fam.title] = hidden
            elif pos in fam.positions:
                row[fam.title] = measured
            elif pos == "insider" and on_aggregate.status == MEASURED:
                # every client receives consecutive global models: it holds the aggregate
                row[fam.title] = replace(on_aggregate, text=on_aggregate.text
                                         + " (its own update not subtracted)")
            else:
                row[fam.title] = on_aggregate
    return matrix


def matrix_json(matrix: dict[str, dict[str, Cell]]) -> dict[str, Any]:
    """results.json ``threat_matrix``: what each position sees and its cells as dicts."""
    return {pos: {"sees": POSITIONS[pos], **{f: asdict(c) for f, c in row.items()}}
            for pos, row in matrix.items()}

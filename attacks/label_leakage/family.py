"""Label leakage as a family of attacks on updates (:mod:`attacks.update_family`): scenario
table ``[label_leakage]``, results.json ``label_leakage``.

Each listed attack guesses the multiset of a kept update's labels; a guess is scored
against the client's true labels of the round by :func:`label_accuracy` (the multiset
overlap) and :func:`count_error`.  Beside it, the best guess that uses no data
(:func:`~attacks.label_leakage.baseline.data_free_guess`: the reply's ``num_examples``
and the class prior of the server's auxiliary data, the holdout split) is scored on the
same labels: the chance level.  Pooled per attack (:func:`pooled_labels`): the mean of
both metrics over the updates; the share of all their samples whose label was recovered
(``labels_recovered`` of ``labels``) and the data-free guess's (``chance_accuracy``),
each with its 95 % interval clustered by client (a client's rounds and samples are one
unit: :func:`fedaudit.verdicts.clustered_ratio`); and the verdict (:data:`RULE`,
:func:`fedaudit.verdicts.decide`) of the paired difference, attack minus data-free guess,
tested by the conditional test of :mod:`attacks.label_leakage.baseline` pooled and for
each client (Holm over them: the most exposed client decides a leak).  The threat-matrix
cell is that share, its interval, the data-free guess's share and the verdict.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from attacks.label_leakage.baseline import LabelCase, data_free_guess, null_pvalues
from attacks.label_leakage.registry import LABEL_ATTACKS, count_error, label_accuracy
from attacks.update_family import (FAMILIES, CaseOutput, Headline, ReportTable, Scored,
                                   Scoring, UpdateAttackFamily, first_pooled,
                                   register_family)
from fedaudit.verdicts import Estimate, Rule, clustered_ratio, decide

__all__ = ["LabelLeakage", "RULE", "pooled_labels"]

#: label leakage is judged on the share of labels recovered beyond the data-free guess's:
#: within 0.05 of it is no leak; doing worse than it is no leak either
RULE = Rule(delta=0.05, two_sided=False, figure="share of labels recovered")
#: the paired test's name in results.json and the report
TEST = ("conditional test: the guesses against true labels drawn afresh around the prior, "
        "once per client")


def _pct(v: Any) -> str:
    return "–" if v is None else f"{100 * v:.0f}%"


def pooled_labels(cases: Sequence[LabelCase], prior: np.ndarray) -> dict[str, Any]:
    """One attack's pooled results over its ``cases`` (module docstring)."""
    acc = [label_accuracy(c.guess, c.true) for c in cases]
    out: dict[str, Any] = {
        "label_accuracy": float(np.mean(acc)) if cases else None,
        "count_error": float(np.mean([count_error(c.guess, c.true) for c in cases]))
        if cases else None,
        "cases": len(cases)}
    n = np.array([int(c.true.sum()) for c in cases])
    if not cases or not n.sum():
        return out
    hits = np.array([int(np.minimum(c.guess, c.true).sum()) for c in cases])
    base = np.array([int(np.minimum(c.baseline, c.true).sum()) for c in cases])
    clients = np.array([c.client for c in cases])
    share = clustered_ratio(hits, n, clients, chance=0.0, unit="client", bounds=(0.0, 1.0))
    chance = clustered_ratio(base, n, clients, chance=0.0, unit="client", bounds=(0.0, 1.0))
    diff = clustered_ratio(hits - base, n, clients, chance=0.0, unit="client",
                           bounds=(-1.0, 1.0))
    pooled_test, per, rho = null_pvalues(cases, prior)
    headline = Estimate(diff.figure, diff.interval, 0.0, pooled_test.p_above,
                        pooled_test.p_below, f"{TEST}; {diff.method}", "client", diff.units)
    others = []
    if len(per) > 1:  # one client's test is the pooled test
        for k, t in per.items():
            sel = clients == k
            gain = float((hits[sel] - base[sel]).sum() / n[sel].sum())
            others.append(Estimate(gain, t.interval(gain), 0.0, t.p_above, t.p_below,
                                   f"{TEST}, at its most exposed round; the shift "
                                   "model's interval", "sample",
                                   t.samples, scope=f"client {k}"))
    verdict = decide(RULE, headline, others)
    out.update(labels=int(n.sum()), labels_recovered=int(hits.sum()),
               label_accuracy_ci=None if share.interval is None else list(share.interval),
               chance_accuracy=chance.figure, chance_recovered=int(base.sum()),
               difference=diff.figure,
               difference_ci=None if diff.interval is None else list(diff.interval),
               unit="client", clients=len(per), overdispersion=rho,
               verdict=verdict.outcome,
               verdict_detail=verdict.as_dict())
    return out


def _first(section: Mapping[str, Any]) -> tuple[str, dict] | None:
    m, p = first_pooled(section)
    return (m, p) if p.get("label_accuracy") is not None else None


def _worst_text(p: Mapping[str, Any]) -> str:
    """``; most exposed client 0: +0.75 over the data-free guess, 2 of 12 clients leak`` --
    the most exposed client's share beyond the data-free guess (when the cell looked at
    several)."""
    d = p.get("verdict_detail") or {}
    w = d.get("worst_client")
    if not isinstance(w, dict) or not d.get("clients") or d["clients"] < 2:
        return ""
    leaking = d.get("leaking_clients")
    return (f"; most exposed {w['scope']}: {w['figure']:+.2f} over the data-free guess"
            + (f", {leaking} of {d['clients']} clients leak" if leaking else ""))


@register_family
class LabelLeakage(UpdateAttackFamily):
    name = "label_leakage"
    title = "label leakage"
    attacks = LABEL_ATTACKS
    default_methods = ("bias-count",)
    column_names = ("label_accuracy",)
    order = 100
    views = ("updates", "aggregate")

    def attack(self, case, method, spec, prepared):
        return LABEL_ATTACKS.get(method)(case, **spec.options.get(method, {}))

    def score(self, outputs: Sequence[CaseOutput], scoring: Scoring) -> Scored:
        per_case, pooled = [], {m: [] for m in scoring.methods}
        prior = scoring.class_prior
        if prior is None:
            prior = np.full(scoring.num_classes, 1.0 / scoring.num_classes)
        for out, truth in zip(outputs, scoring.truths):
            true = np.bincount(truth.y, minlength=scoring.num_classes)
            base = data_free_guess(int(true.sum()), prior)
            entry: dict[str, Any] = {"client": out.client, "round": out.round,
                                     "num_examples": int(true.sum()),
                                     "data_free_accuracy": float(label_accuracy(base, true))
                                     if true.sum() else None}
            for m, guess in out.outputs.items():
                acc, err = label_accuracy(guess.counts, true), count_error(guess.counts, true)
                entry[m] = {"label_accuracy": float(acc), "count_error": int(err),
                            "seconds": out.seconds[m]}
                pooled[m].append(LabelCase(out.client, np.asarray(guess.counts), base, true))
            per_case.append(entry)
        return Scored({"cases": per_case, "class_prior": [float(v) for v in prior],
                       "pooled": {m: pooled_labels(v, prior) for m, v in pooled.items()}})

    def console(self, section):
        by = ", ".join(
            f"{m} {p['label_accuracy']:.0%}"
            + (" [{:.0%}, {:.0%}]".format(*p["label_accuracy_ci"])
               if p.get("label_accuracy_ci") else "")
            + (f" (data-free guess {p['chance_accuracy']:.0%}: "
               f"{(p.get('verdict_detail') or {}).get('summary', p.get('verdict'))})"
               if p.get("chance_accuracy") is not None else "")
            for m, p in (section.get("pooled") or {}).items()
            if p.get("label_accuracy") is not None)
        return (f"label leakage from {len(section.get('cases') or [])} updates: label "
                f"accuracy {by} (95% intervals clustered by client)") if by else None

    def columns(self, section):
        methods = section.get("methods")
        if not methods:
            return {}
        return {"label_accuracy": ((section.get("pooled") or {}).get(methods[0]) or {})
                .get("label_accuracy")}

    def cell(self, section):
        first = _first(section)
        if first is None:
            return None
        m, p = first
        ci = p.get("label_accuracy_ci")
        if not p.get("labels"):  # an older run
            acc = float(p["label_accuracy"])
            return Headline(acc, f"label acc {acc:.2f} ({m})")
        # the share of all the samples' labels recovered: the figure its interval is of
        share = p["labels_recovered"] / p["labels"]
        chance = p.get("chance_accuracy")
        detail = p.get("verdict_detail")
        interval = list(ci) if isinstance(ci, list) and len(ci) == 2 else None
        text = (f"label acc {share:.2f}"
                + (f" [{interval[0]:.2f}, {interval[1]:.2f}]" if interval else "") + f" ({m})"
                + (f", data-free guess {chance:.2f}" if chance is not None
                   and isinstance(detail, dict) else
                   f", chance {chance:.2f}" if chance is not None else "")
                + _worst_text(p))
        return Headline(share, text, interval=interval, verdict=p.get("verdict"),
                        chance=chance, detail=detail if isinstance(detail, dict) else None)

    def report(self, section):
        rows = []
        for m, p in (section.get("pooled") or {}).items():
            share = p.get("labels_recovered", 0) / p["labels"] if p.get("labels") else None
            ci = p.get("label_accuracy_ci")
            recovered = (f"{_pct(share)} [{_pct(ci[0])}, {_pct(ci[1])}]"
                         if isinstance(ci, list) and len(ci) == 2 else _pct(share))
            d = p.get("verdict_detail")
            dci = p.get("difference_ci")
            diff = ("–" if p.get("difference") is None else
                    f"{100 * p['difference']:+.0f} pts"
                    + (f" [{100 * dci[0]:+.0f}, {100 * dci[1]:+.0f}]"
                       if isinstance(dci, list) else ""))
            chance = _pct(p.get("chance_accuracy"))
            verdict = (d.get("summary") if isinstance(d, dict) else p.get("verdict")) or "–"
            rows.append([m, str(p["cases"]), _pct(p["label_accuracy"]), recovered, chance,
                         diff, verdict + _worst_text(p),
                         "–" if p["count_error"] is None else f"{p['count_error']:.2f}"])
        return [
            "Label leakage: the chance level is the best guess that uses no data (the "
            "reply's number of samples and the class prior of the server's auxiliary "
            "data); intervals are clustered by client, and the verdict is the paired "
            "difference's, tested pooled and for each client (Holm over them).",
            ReportTable(["label attack", "updates", "label accuracy (multiset)",
                         "labels recovered [95% CI]", "data-free guess",
                         "difference [95% CI]", "verdict", "mean count error"], rows,
                        text_cols=(0, 6))]


FAMILIES.mark_builtin()

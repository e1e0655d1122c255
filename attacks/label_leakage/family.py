"""Label leakage as a family of attacks on updates (:mod:`attacks.update_family`): scenario
table ``[label_leakage]``, results.json ``label_leakage``.

Each listed attack guesses the multiset of a kept update's labels; a guess is scored
against the client's true labels of the round by :func:`label_accuracy` (the multiset
overlap) and :func:`count_error`.  Pooled per attack: the mean of both over the updates,
and the share of all their samples whose label was recovered (``labels_recovered`` of
``labels``) with its Clopper-Pearson 95 % interval (samples as independent trials:
docs/algorithms.md section 13), and the share a guess without information would recover
(``chance_accuracy``: :func:`~attacks.label_leakage.registry.chance_hits` over the same
samples) with the interval's ``verdict`` against it.  The threat-matrix cell is that
share, its interval and verdict: the mean accuracy weighs a client of 4 samples as much as
one of 500, so with clients of different sizes it can lie outside the share's interval.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from attacks.label_leakage.registry import (LABEL_ATTACKS, chance_hits, count_error,
                                            label_accuracy)
from attacks.update_family import (FAMILIES, CaseOutput, Headline, ReportTable, Scored,
                                   Scoring, UpdateAttackFamily, first_pooled,
                                   register_family)
from fedaudit.intervals import chance_verdict, clopper_pearson

__all__ = ["LabelLeakage", "pooled_labels"]


def _pct(v: Any) -> str:
    return "–" if v is None else f"{100 * v:.0f}%"


def pooled_labels(cases: Sequence[tuple[float, int, int, int, float]]) -> dict[str, Any]:
    """Pool (accuracy, count error, labels recovered, samples, chance's expected labels
    recovered) over the cases (module docstring)."""
    out: dict[str, Any] = {
        "label_accuracy": float(np.mean([c[0] for c in cases])) if cases else None,
        "count_error": float(np.mean([c[1] for c in cases])) if cases else None,
        "cases": len(cases)}
    hits, n = sum(c[2] for c in cases), sum(c[3] for c in cases)
    if n:
        ci = clopper_pearson(hits, n)
        chance = sum(c[4] for c in cases) / n
        out.update(labels=n, labels_recovered=hits, label_accuracy_ci=list(ci),
                   chance_accuracy=chance, verdict=chance_verdict(ci, chance))
    return out


def _first(section: Mapping[str, Any]) -> tuple[str, dict] | None:
    m, p = first_pooled(section)
    return (m, p) if p.get("label_accuracy") is not None else None


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
        for out, truth in zip(outputs, scoring.truths):
            true = np.bincount(truth.y, minlength=scoring.num_classes)
            entry: dict[str, Any] = {"client": out.client, "round": out.round,
                                     "num_examples": int(true.sum())}
            for m, guess in out.outputs.items():
                acc, err = label_accuracy(guess.counts, true), count_error(guess.counts, true)
                entry[m] = {"label_accuracy": float(acc), "count_error": int(err),
                            "seconds": out.seconds[m]}
                hits = int(np.minimum(guess.counts, true).sum())  # acc = hits / samples
                pooled[m].append((acc, err, hits, int(true.sum()), chance_hits(true)))
            per_case.append(entry)
        return Scored({"cases": per_case,
                       "pooled": {m: pooled_labels(v) for m, v in pooled.items()}})

    def console(self, section):
        by = ", ".join(f"{m} {p['label_accuracy']:.0%}" + (
            " [{:.0%}, {:.0%}]".format(*p["label_accuracy_ci"]) if p.get("label_accuracy_ci")
            else "") for m, p in (section.get("pooled") or {}).items()
            if p.get("label_accuracy") is not None)
        return (f"label leakage from {len(section.get('cases') or [])} updates: label "
                f"accuracy {by} (95% intervals over the samples)") if by else None

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
        if not (isinstance(ci, list) and len(ci) == 2 and p.get("labels")):  # an older run
            acc = float(p["label_accuracy"])
            return Headline(acc, f"label acc {acc:.2f} ({m})")
        # the share of all the samples' labels recovered: the figure its interval is of
        share = p["labels_recovered"] / p["labels"]
        chance = p.get("chance_accuracy")
        return Headline(share, f"label acc {share:.2f} [{ci[0]:.2f}, {ci[1]:.2f}] ({m})"
                        + (f", chance {chance:.2f}" if chance is not None else ""),
                        interval=list(ci), verdict=p.get("verdict"), chance=chance)

    def report(self, section):
        rows = []
        for m, p in (section.get("pooled") or {}).items():
            share = p.get("labels_recovered", 0) / p["labels"] if p.get("labels") else None
            ci = p.get("label_accuracy_ci")
            recovered = (f"{_pct(share)} [{_pct(ci[0])}, {_pct(ci[1])}]"
                         if isinstance(ci, list) and len(ci) == 2 else _pct(share))
            chance = (f"{_pct(p['chance_accuracy'])} ({p['verdict']})"
                      if p.get("chance_accuracy") is not None else "–")
            rows.append([m, str(p["cases"]), _pct(p["label_accuracy"]), recovered, chance,
                         "–" if p["count_error"] is None else f"{p['count_error']:.2f}"])
        return [ReportTable(["label attack", "updates", "label accuracy (multiset)",
                             "labels recovered [95% CI]", "chance (verdict)",
                             "mean count error"], rows, text_cols=(0, 4))]


FAMILIES.mark_builtin()

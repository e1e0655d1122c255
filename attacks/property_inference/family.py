"""Property inference as a family of attacks on updates (:mod:`attacks.update_family`):
scenario table ``[property_inference]`` (and ``[property_inference.<property>]`` for the
property's options), results.json ``property_inference``.

The curious server's auxiliary data are ``aux_samples`` samples of the holdout split (no
client holds them; drawn with ``seed``), labelled with the property.  For each attacked
(client, round) update it simulates the client's local training from the model the client
started from (:class:`attacks.reconstruction.simulate.UpdateSimulator`: the ``[train]``
recipe and the reply's ``num_examples``) on ``batches`` auxiliary batches with the property
(one property sample, the rest drawn from all the auxiliary data) and ``batches`` without
(non-property samples only), and each attack scores the real update from them.  Ground
truth: the update holds the property when at least one of the client's samples of the round
has it (Melis et al.'s batch property).  The AUC over the updates (:class:`fedaudit.metrics.MembershipMetrics`,
"members" being the updates with the property), per attack, pooled and per round.  A
client's property does not change between rounds (it trains on its whole partition): its
updates are one unit, so the pooled AUC is tested clustered by client (a cluster
permutation test of the clients' property, Obuchowski's clustered interval:
:func:`fedaudit.verdicts.auc_estimate`), there is no AUC per client, and the verdict
(:data:`RULE`) is the first attack's.  When every update (or none) holds the property there
is no AUC, and the section says why (``why``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from attacks.property_inference.registry import PROPERTIES, PROPERTY_ATTACKS, AuxiliaryUpdates
from attacks.update_family import (FAMILIES, CaseOutput, Headline, ReportTable, Scored,
                                   Scoring, UpdateAttackFamily, first_pooled,
                                   register_family)
from fedaudit.options import option
from fedaudit.registry import registered
from fedaudit.verdicts import Rule, decide, legacy_outcome

__all__ = ["PropertyInference", "RULE", "auxiliary_updates"]

#: an AUC over the updates, judged like a membership AUC: within 0.05 of 0.5 is no leak, and
#: significantly below it is a leak with the score flipped
RULE = Rule(delta=0.05, two_sided=True, figure="AUC")


def _flat(tensors) -> np.ndarray:
    return np.concatenate([t.detach().cpu().double().reshape(-1).numpy() for t in tensors])


def auxiliary_updates(case: Any, x: np.ndarray, y: np.ndarray, has: np.ndarray, *,
                      batches: int, seed: int) -> AuxiliaryUpdates:
    """The updates ``case``'s local training gives on ``batches`` auxiliary batches with
    the property and ``batches`` without (module docstring), and the real one."""
    import torch

    from attacks.reconstruction.simulate import UpdateSimulator

    pos, neg = np.flatnonzero(has), np.flatnonzero(~has)
    if not len(pos) or not len(neg):
        raise ValueError(f"the auxiliary data hold {len(pos)} samples with the property and "
                         f"{len(neg)} without: both are needed")
    n = case.training.num_examples
    rng = np.random.default_rng(seed)
    sim = UpdateSimulator.of(case)
    feats, labels = [], []
    for b in range(2 * batches):
        with_property = b % 2 == 0
        if with_property:
            ids = np.concatenate([rng.choice(pos, 1), rng.choice(len(x), n - 1)])
        else:
            ids = rng.choice(neg, n, replace=len(neg) < n)
        xb = torch.as_tensor(x[ids], dtype=sim.dtype)
        yb = torch.as_tensor(y[ids], dtype=torch.int64)
        feats.append(_flat(sim.simulate(xb, yb)))
        labels.append(int(with_property))
    return AuxiliaryUpdates(np.stack(feats), np.array(labels, dtype=np.int64),
                            _flat(sim.target))


def _auc_text(p: Mapping[str, Any]) -> str:
    ci = p.get("auc_ci")
    text = f"AUC {p['auc']:.3f}" + (f" [{ci[0]:.3f}, {ci[1]:.3f}]" if ci else "")
    detail = p.get("verdict_detail")
    verdict = detail.get("summary") if isinstance(detail, dict) else \
        (p.get("verdict") or {}).get("auc")
    return text + (f", {verdict}" if verdict else "")


def _first(section: Mapping[str, Any]) -> tuple[str, dict] | None:
    m, p = first_pooled(section)
    return (m, p) if p.get("auc") is not None else None


@register_family
class PropertyInference(UpdateAttackFamily):
    name = "property_inference"
    title = "property inference"
    attacks = PROPERTY_ATTACKS
    default_methods = ("bpc",)
    column_names = ("property_auc",)
    order = 300
    options = {
        "property": option(str, "brightness", "the property inferred (registered; its "
                           "options in [property_inference.<property>])",
                           choices=registered("image property")),
        "aux_samples": option(int, 512, "auxiliary samples the server holds, drawn from "
                              "the holdout split (no client holds them)", min=2),
        "batches": option(int, 32, "auxiliary batches with the property, and as many "
                          "without, simulated per attacked update", min=2),
        "seed": option(int, 0, "seed of the auxiliary samples and batches", min=0),
    }

    def tables(self):
        out = super().tables()
        for prop in PROPERTIES.names():
            if opts := PROPERTIES.meta(prop).get("options"):
                if f"{self.name}.{prop}" in out:
                    raise ValueError(f"property {prop!r} and a property attack share the "
                                     f"table [{self.name}.{prop}]")
                out[f"{self.name}.{prop}"] = dict(opts)
        return out

    def settings(self, scenario):
        out = super().settings(scenario)
        out["property_options"] = dict(scenario.stages.get(f"{self.name}.{out['property']}",
                                                           {}))
        return out

    def _has(self, settings: Mapping[str, Any], x: np.ndarray) -> np.ndarray:
        fn = PROPERTIES.get(settings["property"])
        return np.asarray(fn(x, **settings["property_options"]), dtype=bool)

    def inputs(self, scenario, data):
        s = self.settings(scenario)
        ids = np.random.default_rng(s["seed"]).permutation(data.auxiliary)[:s["aux_samples"]]
        x = np.asarray(data.x[ids], dtype=np.float32)
        return {"aux_x": x, "aux_y": np.asarray(data.y[ids], dtype=np.int64),
                "aux_property": self._has(s, x)}

    def prepare(self, case, spec):
        i = spec.inputs
        return auxiliary_updates(case, i["aux_x"], i["aux_y"], i["aux_property"],
                                 batches=spec.settings["batches"], seed=spec.settings["seed"])

    def attack(self, case, method, spec, prepared):
        return PROPERTY_ATTACKS.get(method)(prepared, **spec.options.get(method, {}))

    def score(self, outputs: Sequence[CaseOutput], scoring: Scoring) -> Scored:
        from fedaudit.metrics import MembershipMetrics

        s = scoring.settings
        has = [self._has(s, t.x) for t in scoring.truths]
        present = np.array([bool(h.any()) for h in has])
        cases = [{"client": o.client, "round": o.round, "num_examples": int(len(h)),
                  "with_property": int(h.sum()), "present": bool(h.any()),
                  **{m: {"score": float(v), "seconds": o.seconds[m]}
                     for m, v in o.outputs.items()}}
                 for o, h in zip(outputs, has)]

        clients = np.array([o.client for o in outputs])

        def auc(sel: np.ndarray, m: str) -> dict[str, Any]:
            if present[sel].all() or not present[sel].any():
                word = "every" if present[sel].all() else "no"
                return {"auc": None, "updates": int(sel.sum()),
                        "why": f"{word} attacked update holds the property ({s['property']}, "
                               f"{dict(s['property_options'])}): no AUC; the property's "
                               "options may not fit this data"}
            scores = np.array([o.outputs[m] for o in outputs])[sel]
            metrics = MembershipMetrics.of(scores, present[sel], clusters=clients[sel])
            verdict = decide(RULE, metrics.auc_test)
            return {**metrics.as_dict(), "updates": int(sel.sum()),
                    "clients": int(len(np.unique(clients[sel]))),
                    "cell_verdict": verdict.outcome, "verdict_detail": verdict.as_dict()}

        rounds = sorted({o.round for o in outputs})
        everything = np.ones(len(outputs), dtype=bool)
        aux = scoring.inputs.get("aux_property")
        section = {
            "property": s["property"], "describes": PROPERTIES.meta(s["property"])["describe"],
            "property_options": dict(s["property_options"]),
            "updates_with_property": int(present.sum()), "updates": len(outputs),
            "sample_rate": (float(np.concatenate(has).mean()) if has and sum(map(len, has))
                            else None),
            "aux_samples": None if aux is None else int(len(aux)),
            "aux_rate": None if aux is None or not len(aux) else float(np.mean(aux)),
            "batches": s["batches"], "cases": cases,
            "pooled": {m: auc(everything, m) for m in scoring.methods} if outputs else {},
            "per_round": {str(r): {m: auc(np.array([o.round == r for o in outputs]), m)
                                   for m in scoring.methods} for r in rounds}}
        return Scored(section)

    def console(self, section):
        first = _first(section)
        if first is None:
            why = self.why_not(section)
            return f"property inference ({section.get('property')}): {why}" if why else None
        m, p = first
        return (f"property inference ({section['property']}) from {section['updates']} "
                f"updates, {section['updates_with_property']} with the property: {m} "
                f"{_auc_text(p)}")

    def columns(self, section):
        if not section.get("methods"):
            return {}
        first = _first(section)
        return {"property_auc": first[1]["auc"] if first else None}

    def why_not(self, section):
        _, p = first_pooled(section)
        return p.get("why")

    def cell(self, section):
        first = _first(section)
        if first is None:
            return None
        m, p = first
        ci = p.get("auc_ci")
        detail = p.get("verdict_detail")
        verdict = (p.get("cell_verdict") if isinstance(detail, dict)
                   else legacy_outcome((p.get("verdict") or {}).get("auc")))
        return Headline(float(p["auc"]), f"{_auc_text(p)} ({m}, {section['property']})",
                        interval=list(ci) if ci else None, verdict=verdict, chance=0.5,
                        detail=detail if isinstance(detail, dict) else None)

    def report(self, section):
        rate = section.get("sample_rate")
        out: list = [
            f"Property inference: {section.get('describes')} "
            f"({section.get('property_options')}); {section.get('updates_with_property')} "
            f"of {section.get('updates')} updates hold it"
            + (f" ({100 * rate:.1f}% of their samples)" if rate is not None else "")
            + f"; the server's {section.get('aux_samples')} auxiliary samples, "
            f"{section.get('batches')} batches with and without the property per update."]
        rows = []
        for m, p in (section.get("pooled") or {}).items():
            auc = "–" if p.get("auc") is None else _auc_text(p)
            tpr = p.get("tpr_at_1pct_fpr")
            rows.append([m, str(p.get("updates", 0)), auc,
                         "–" if tpr is None else f"{tpr:.3f}"])
        out.append(ReportTable(["property attack", "updates", "AUC [95% CI], verdict",
                                "TPR@1%FPR"], rows))
        return out


FAMILIES.mark_builtin()

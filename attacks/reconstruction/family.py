"""Reconstruction as a family of attacks on updates (:mod:`attacks.update_family`): scenario
table ``[reconstruction]``, results.json ``reconstruction``, ``reconstructions.npz``.

Each listed attack rebuilds a kept update's samples (updates of at most ``max_samples``
samples; larger ones are left to label leakage, with a note) from the labels
``reconstruction.labels`` names: ``guess``, the guess of the first attack listed in
``label_leakage.methods`` (run in the same job), or ``given``, the client's true labels (an
upper bound, said so in the results).  A reconstruction is matched to the client's true
samples by an optimal assignment and scored against them and against the data-free prior of
the train split's mean image (:func:`fedaudit.image_metrics.reconstruction_metrics`, pooled
by :func:`fedaudit.image_metrics.pool_metrics`: docs/algorithms.md section 14).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from attacks.label_leakage import LABEL_ATTACKS
from attacks.reconstruction.registry import RECONSTRUCTIONS, Budget, reconstruction_options
from attacks.update_family import (FAMILIES, CaseOutput, Headline, ReportTable, Scored,
                                   Scoring, UpdateAttackFamily, first_pooled,
                                   register_family)
from fedaudit.options import option

__all__ = ["ReconstructionFamily", "budget_of"]

#: the per-sample arrays of ``reconstructions.npz``
_ROWS = ("image", "true_image", "client", "round", "method", "true_id", "label",
         "true_label", "psnr",
         "ssim", "prior_ssim", "identifiable", "label_correct", "leakage")


def budget_of(settings: Mapping[str, Any], device: str) -> Budget:
    """The optimisation budget ``[reconstruction]`` gives each job, on ``device``."""
    return Budget(iterations=settings["iterations"], restarts=settings["restarts"],
                  lr=settings["lr"] or None, device=device)


def _label_array(counts: np.ndarray) -> np.ndarray:
    return np.repeat(np.arange(len(counts)), np.asarray(counts, dtype=np.int64))


def _fmt(v: Any, digits: int) -> str:
    return "–" if v is None else f"{v:.{digits}f}"


def _sd(v: Any, sd: Any, digits: int) -> str:
    return _fmt(v, digits) if sd is None else f"{_fmt(v, digits)} ± {_fmt(sd, digits)}"


def _pct(v: Any) -> str:
    return "–" if v is None else f"{100 * v:.0f}%"


def _ident(v: Any) -> str:
    """Identifiability in words: None when each client held one sample (nothing to tell it
    from)."""
    return ("identifiability not meaningful (one sample per client)" if v is None
            else f"{v:.0%} identifiable")


def _trend(section: Mapping[str, Any]) -> str:
    """The first method's mean SSIM per attacked round, when there are several rounds
    (leakage across training): ``; SSIM by round 1: 0.126, 10: 0.101``."""
    methods = section.get("methods") or []
    by_round: dict[int, list[float]] = {}
    for case in section.get("cases") or []:
        entry = case.get(methods[0]) if methods else None
        if isinstance(entry, dict) and entry.get("ssim") is not None:
            by_round.setdefault(int(case["round"]), []).append(float(entry["ssim"]))
    if len(by_round) < 2:
        return ""
    return "; SSIM by round " + ", ".join(f"{r}: {np.mean(v):.3f}"
                                          for r, v in sorted(by_round.items()))


def _gain(p: Mapping[str, Any]) -> str:
    """The SSIM gain over the prior with its interval (``+0.13 [+0.06, +0.21]``)."""
    g, ci = p.get("ssim_gain"), p.get("ssim_gain_ci")
    if g is None:
        return "–"
    return f"{g:+.3f}" + (f" [{ci[0]:+.3f}, {ci[1]:+.3f}]" if isinstance(ci, list) else "")


def _verdict(p: Mapping[str, Any]) -> str:
    """The SSIM gain's verdict: its summary (what decided it), else its word."""
    d = p.get("verdict_detail")
    return str((d.get("summary") if isinstance(d, dict) else None) or p.get("verdict") or "–")


def _first(section: Mapping[str, Any]) -> tuple[str, dict] | None:
    m, p = first_pooled(section)
    return (m, p) if p.get("samples") else None


@register_family
class ReconstructionFamily(UpdateAttackFamily):
    name = "reconstruction"
    title = "reconstruction"
    attacks = RECONSTRUCTIONS
    default_methods = ("inverting-gradients",)
    file = "reconstructions.npz"
    column_names = ("rec_psnr", "rec_ssim", "rec_ssim_gain", "rec_identifiability")
    verdict_column = "rec_ssim_gain"
    order = 200
    views = ("updates", "aggregate")
    options = {
        "labels": option(str, "guess", "the labels the reconstructions get: guess (the first "
                         "of label_leakage.methods) or given (the client's true labels: an "
                         "upper bound)", choices=("guess", "given")),
        "max_samples": option(int, 16, "largest update (num_examples) reconstructed; larger "
                              "ones get labels only, with a note", min=1),
        "iterations": option(int, 2000, "optimisation steps per restart", min=1),
        "restarts": option(int, 1, "restarts per reconstruction (the lowest matching loss "
                           "is kept)", min=1),
        "lr": option(float, 0.0, "step size of the optimiser on the dummy data (0 = each "
                     "attack's own default: Adam 0.1, L-BFGS 1)", min=0.0),
        "seed": option(int, 0, "seed of the dummy data's initialisation", min=0),
    }

    def check(self, scenario):
        t = scenario.stages[self.name]
        if t["labels"] == "guess" and not scenario.stages["label_leakage"]["methods"]:
            return ("reconstruction.labels = 'guess' needs a label attack: list one in "
                    "label_leakage.methods, or set reconstruction.labels = 'given'")
        return None

    def methods_for(self, table, num_examples):
        if num_examples <= table["max_samples"]:
            return tuple(table["methods"]), None
        return (), (f"{num_examples} samples > reconstruction.max_samples = "
                    f"{table['max_samples']}: not reconstructed")

    def settings(self, scenario):
        out = super().settings(scenario)
        if out["labels"] == "guess":
            first = scenario.stages["label_leakage"]["methods"][0]
            out.update(label_method=first,
                       label_options=dict(scenario.stages.get(f"label_leakage.{first}", {})))
        return out

    def prepare(self, case, spec):
        s = spec.settings
        if s["labels"] == "given":
            return np.sort(np.asarray(spec.true_labels, dtype=np.int64))
        guess = LABEL_ATTACKS.get(s["label_method"])(case, **s["label_options"])
        return _label_array(guess.counts)

    def attack(self, case, method, spec, prepared):
        s = spec.settings
        return RECONSTRUCTIONS.get(method)(
            case, num_samples=case.training.num_examples, labels=prepared,
            budget=budget_of(s, spec.device), seed=s["seed"], **spec.options.get(method, {}))

    def score(self, outputs: Sequence[CaseOutput], scoring: Scoring) -> Scored:
        # scipy's assignment solver: imported by the audit only, not by every client actor
        # validating a scenario (tests/simulation/test_plugins_carry.py)
        from fedaudit.image_metrics import pool_metrics, reconstruction_metrics, ssim_window

        rows: dict[str, list] = {k: [] for k in _ROWS}
        per_case, pooled = [], {m: [] for m in scoring.methods}
        units: dict[str, tuple[list, list]] = {m: ([], []) for m in scoring.methods}
        used: dict[str, dict[str, Any]] = {}  # options as run (tv = auto: its weight)
        for out, truth in zip(outputs, scoring.truths):
            ids, x, y = truth.ids, truth.x, truth.y
            entry: dict[str, Any] = {"client": out.client, "round": out.round,
                                     "num_examples": int(len(ids))}
            for m, rec in out.outputs.items():
                met = reconstruction_metrics(rec.images, rec.labels, x, y, scoring.prior,
                                             data_range=1.0, win_size=ssim_window(x.shape))
                entry[m] = {**met.pooled().as_dict(), "matching_loss": float(rec.loss),
                            "seconds": out.seconds[m]}
                pooled[m].append(met)
                units[m][0].append(out.client)
                units[m][1].append(ids[met.matched])
                if m not in used:  # a registered attack's declared options, from its info
                    info = getattr(rec, "info", None) or {}
                    declared = reconstruction_options(m) if m in RECONSTRUCTIONS.names() else {}
                    used[m] = {k: info[k] for k in declared if k in info}
                n = len(rec.images)
                rows["image"].append(np.asarray(rec.images, dtype=np.float32))
                rows["client"].append(np.full(n, out.client))
                rows["round"].append(np.full(n, out.round))
                rows["method"].append(np.full(n, m))
                rows["true_id"].append(ids[met.matched])
                rows["true_image"].append(np.asarray(x[met.matched], dtype=np.float32))
                rows["label"].append(np.asarray(rec.labels, dtype=np.int64))
                rows["true_label"].append(np.asarray(y[met.matched], dtype=np.int64))
                for k in ("psnr", "ssim", "prior_ssim", "identifiable", "label_correct",
                          "leakage"):
                    rows[k].append(np.asarray(getattr(met, k)))
            per_case.append(entry)
        s = scoring.settings
        labels_from = ("the client's true labels (an upper bound)" if s["labels"] == "given"
                       else f"the guess of {s['label_method']}")
        section = {
            "labels_from": labels_from,
            "budget": {"iterations": s["iterations"], "restarts": s["restarts"],
                       "lr": s["lr"] or None, "max_samples": s["max_samples"],
                       "seed": s["seed"], "device": scoring.device},
            "options": used,
            "prior": "the train split's mean image",
            "ssim_window": ssim_window(scoring.prior.shape),
            "cases": per_case,
            "pooled": {m: pool_metrics(v, *units[m]).as_dict() for m, v in pooled.items()}}
        arrays = {k: np.concatenate(v) for k, v in rows.items()} if rows["image"] else None
        return Scored(section, arrays)

    def console(self, section):
        by = "; ".join(f"{m}: PSNR {p['psnr']:.1f} dB, SSIM {p['ssim']:.3f} (prior "
                       f"{p['prior_ssim']:.3f}), {_ident(p['identifiability'])}"
                       for m, p in (section.get("pooled") or {}).items()
                       if p.get("samples") and p.get("psnr") is not None)
        return f"reconstruction from the updates: {by}{_trend(section)}" if by else None

    def columns(self, section):
        methods = section.get("methods")
        if not methods:
            return {}
        p = (section.get("pooled") or {}).get(methods[0]) or {}
        return {"rec_psnr": p.get("psnr"), "rec_ssim": p.get("ssim"),
                "rec_ssim_gain": p.get("ssim_gain"),
                "rec_identifiability": p.get("identifiability")}

    def cell(self, section):
        first = _first(section)
        if first is None:
            return None
        p = first[1]
        psnr, ident, ci = p.get("psnr"), p.get("identifiability"), p.get("ssim_gain_ci")
        text = (f"PSNR {psnr:.1f} dB" if psnr is not None else "exact") + \
            (f", {ident:.0%} identifiable" if ident is not None else "") + \
            (f", SSIM {p['ssim_gain']:+.2f} [{ci[0]:+.2f}, {ci[1]:+.2f}] over the prior"
             if isinstance(ci, list) else "")
        # the verdict is the SSIM gain's over the data-free prior (the figure stays the PSNR)
        detail = p.get("verdict_detail")
        return Headline(None if psnr is None else float(psnr), text, verdict=p.get("verdict"),
                        detail=detail if isinstance(detail, dict) else None)

    def report(self, section):
        b = section.get("budget") or {}
        out: list = [
            f"Reconstruction: labels from {section.get('labels_from')}; "
            f"{b.get('iterations')} iterations x {b.get('restarts')} restart(s); SSIM window "
            f"{section.get('ssim_window')}; prior: {section.get('prior')}; "
            f"{_fmt(section.get('seconds'), 1)} s." + "".join(
                f" {m}: " + ", ".join(f"{k} {v}" for k, v in o.items()) + "."
                for m, o in (section.get("options") or {}).items() if o)]
        rows = [[m, str(p.get("samples", 0)), _sd(p.get("psnr"), p.get("psnr_sd"), 1),
                 str(p.get("exact", 0)), _sd(p.get("ssim"), p.get("ssim_sd"), 3),
                 _fmt(p.get("prior_ssim"), 3), _gain(p),
                 "– (1 sample per client)" if p.get("samples") and p.get("identifiability")
                 is None else _pct(p.get("identifiability")),
                 _pct(p.get("label_accuracy")), _verdict(p)]
                for m, p in (section.get("pooled") or {}).items()]
        out.append(ReportTable(["attack", "samples", "PSNR (dB, inexact; mean ± sd)",
                                "exact", "SSIM (mean ± sd)", "prior's SSIM",
                                "SSIM gain [95% CI, clustered by client]", "identifiable",
                                "labels right", "verdict (SSIM gain)"], rows,
                               text_cols=(0, 9)))
        return out


FAMILIES.mark_builtin()

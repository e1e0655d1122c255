"""After the last round: PTQ + r_Qn over the checkpoint trajectory, then the black-box
attacks against the global model and every quantized release.

Decisions the papers leave open (also in the README and docs/algorithms.md):
- r_Qn candidates are the trajectory checkpoints quantized on the FIXED grid of the
  released (last) checkpoint (``quantize_trajectory``); a candidate is the whole quantized
  configuration (quantized weights and the float tensors with them).  Per run (the main
  seed and each extra seed, on its own release's grid) the ``keep_lowest`` distinct
  candidates of lowest test loss give one r; ``rqn`` is the median over runs.
- Per client, members are the client's samples (or a random subset of
  ``members_per_client``, capped at the holdout size) and non-members are holdout samples
  drawn with the members' label histogram, independently per client (each client's set is
  balanced).  Pooled metrics use every distinct scored sample once: all clients' members
  against the union of their non-members.
- The attacks see only an :class:`attacks.oracle.Oracle`.
"""

from __future__ import annotations

import logging
import math
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
from scipy.stats import spearmanr

from attacks.membership import evaluate_attacks
from attacks.oracle import Oracle
from attacks.reference import ReferenceSignals
from attacks.registry import ATTACKS
from attacks.registry import needs_references, server_view
from attacks.resmia import resmia_scores
from fedaudit.attack_sets import (attack_options, attack_sets, client_audit_set,
                                  pooled_audit_set, result_metrics, scored_ids)
from fedaudit.data import FederatedData
from fedaudit.dp_audit_results import add_dp_audit
from fedaudit.metrics import membership_metrics
from fedaudit.models import model_for
from fedaudit.quant import quantize, quantize_trajectory, quantizer_info, rqn_over_runs
from fedaudit.positions import attack_positions, round_attacks, server_view_attacks
from fedaudit.references import (attack_split, load_or_train, reference_signals,
                                 uses_references)
from fedaudit.rundir import atomic_save_npz, load_checkpoint
from fedaudit.scenario import Scenario
from fedaudit.training import per_sample_losses

log = logging.getLogger("fedaudit")


def _trajectory(recorder, spec: str) -> list[Path]:
    paths = list(recorder.checkpoints)
    if spec.startswith("last-"):
        paths = paths[-int(spec.split("-", 1)[1]):]
    return paths


def quantization_audit(scenario: Scenario, data: FederatedData, recorders: list, device: torch.device,
                       progress) -> tuple[list[dict], dict[str, dict]]:
    """One entry per quantizer (results.json ``quantization``) and the quantized releases."""
    cfg = scenario.audit.quantization
    model = model_for(scenario.model, data, seed=scenario.seed)
    xt, yt = data.x[data.test], data.y[data.test]
    trajectories = [[load_checkpoint(p) for p in _trajectory(r, cfg.checkpoints)]
                    for r in recorders]
    release = trajectories[0][-1]
    entries, releases = [], {}
    names = cfg.quantizers
    for i, name in enumerate(names):
        progress.step("quantization", i, len(names), name)
        spec = quantizer_info(name)
        per_run = []
        for traj in trajectories:
            candidates, _ = quantize_trajectory(traj, name)
            rows = []
            for cand in candidates:
                model.load_state_dict(cand)
                rows.append(per_sample_losses(model, xt, yt, device=device)[0])
            per_run.append(np.stack(rows))
        est = rqn_over_runs(per_run, cfg.keep_lowest)
        q_release = quantize(release, name)
        model.load_state_dict(q_release)
        rel_losses, correct = per_sample_losses(model, xt, yt, device=device)
        releases[name] = q_release
        notes = sorted({res.note for res in est.runs if res.note})
        entries.append({
            "quantizer": name, "bits": spec.bits, "sparsity": spec.sparsity,
            "rqn": est.median, "rqn_note": "; ".join(notes) if est.median == math.inf else None,
            "rqn_runs": [float(v) for v in est.values],
            "rqn_q25": est.quantile(0.25), "rqn_q75": est.quantile(0.75),
            "n_candidates": sum(len(t) for t in trajectories),
            "n_distinct": sum(res.n_distinct for res in est.runs),
            "n_kept": sum(len(k) for k in est.kept),
            "test_accuracy": float(correct.mean()), "test_loss": float(rel_losses.mean()),
            "attacks": {},
        })
        log.info("quantizer %d of %d, %s: r_Qn=%s (median of %d run(s); %d kept of %d distinct "
                 "of %d), acc=%.4f", i + 1, len(names), name, est.median, len(est.runs),
                 entries[-1]["n_kept"], entries[-1]["n_distinct"], entries[-1]["n_candidates"],
                 entries[-1]["test_accuracy"])
    progress.step("quantization", len(names), len(names), "done")
    return entries, releases


class AttackProgress:
    """Progress of the attack phase in samples (target x scored sample), advanced after
    each method by its share of the target's oracle queries (Res-MIA costs K + 1 per
    sample, the baselines 1), so the ETA follows the real cost; one line per finished
    (target, method) in run.log."""

    def __init__(self, progress, targets: list[str], methods: list[str], n_samples: int,
                 queries: dict[str, float]) -> None:
        self.progress, self.targets, self.methods = progress, targets, methods
        self.n, self.queries = n_samples, queries
        self.total = len(targets) * n_samples
        self.per_target = sum(queries[m] for m in methods)
        self.done = 0.0
        self.target = ""
        self.t0 = time.perf_counter()

    def start_target(self, target: str) -> None:
        self.target = target
        self._show(self.methods[0])

    def _show(self, method: str) -> None:
        t = self.targets.index(self.target) + 1
        self.progress.step("attacks", round(self.done), self.total,
                           f"{self.target} ({t}/{len(self.targets)}): {method}")

    def method_done(self, method: str, seconds: float) -> None:
        self.done += self.n * self.queries[method] / self.per_target
        elapsed = time.perf_counter() - self.t0
        eta = elapsed / self.done * (self.total - self.done)
        log.info("attack %s on %s: %d samples in %.1f s; %d of %d samples done, eta %.0f s",
                 method, self.target, self.n, seconds, round(self.done), self.total, eta)
        nxt = self.methods.index(method) + 1
        self._show(self.methods[nxt] if nxt < len(self.methods) else "done")


def model_methods(scenario: Scenario) -> list[str]:
    """The methods that attack a released model (FedMIA needs the server's view)."""
    return [m for m in scenario.attack.methods if not server_view(m)]


def attack_target(model: torch.nn.Module, scenario: Scenario, data: FederatedData,
                  sets: list[dict], device: torch.device,
                  tracker: AttackProgress | None = None,
                  references: ReferenceSignals | None = None) -> dict[str, Any]:
    """Every attack against one released model; per-client and pooled metrics.
    ``references``: the reference models' outputs on :func:`scored_ids` (reference
    attacks)."""
    cfg = scenario.attack
    oracle = Oracle(model, batch_size=cfg.batch_size, device=device)
    del model  # the attacker holds the oracle only
    ids, is_member = pooled_audit_set(sets)
    raw = evaluate_attacks(oracle, data.x[ids], data.y[ids], is_member, model_methods(scenario),
                           attack_options(scenario),
                           on_method=tracker.method_done if tracker is not None else None,
                           references=references)
    pos = {int(i): k for k, i in enumerate(ids)}
    out: dict[str, Any] = {"pooled": {}, "clients": [], "rows": []}
    for method, r in raw.items():
        for c, s in enumerate(sets):
            sid, mem = client_audit_set(s)
            scores = r["scores"][[pos[int(i)] for i in sid]]
            if len(out["clients"]) <= c:
                out["clients"].append({})
            out["clients"][c][method] = result_metrics(membership_metrics(scores, mem))
            out["rows"].append((method, sid, np.full(len(sid), c), mem, scores))
        # Pooled over the DISTINCT samples: clients draw their non-members from one holdout,
        # so concatenating the per-client sets would count a holdout sample several times
        # and overstate the FPR resolution (1/n must count distinct non-members).
        pooled = result_metrics(r["metrics"])
        pooled["queries_per_sample"] = r["queries_per_sample"]
        pooled["seconds_per_sample"] = r["seconds_per_sample"]
        if needs_references(method) and references is not None:
            pooled["reference_models"] = int(references.probs.shape[0])
        out["pooled"][method] = pooled
    return out


def _queries_per_sample(scenario: Scenario, data: FederatedData) -> dict[str, float]:
    """Oracle queries per sample of each method (for the ETA only): the ``cost`` an attack
    declared at registration, else 1."""

    opts = attack_options(scenario)
    out = {}
    for m in model_methods(scenario):
        cost = ATTACKS.meta(m).get("cost")
        try:
            out[m] = float(cost(data.x.shape[1:], **opts[m])) if cost else 1.0
        except Exception:  # noqa: BLE001 - an estimate; the attack itself reports bad options
            out[m] = 1.0
    return out



def resmia_curves(model: torch.nn.Module, scenario: Scenario, data: FederatedData, sets: list[dict],
                  device: torch.device) -> dict[str, list[float]]:
    """Mean confidence of the predicted class at each erosion step, members vs non-members
    (pooled over clients) -- the report's confidence-decay figure."""

    opts = attack_options(scenario)["resmia"]
    opts.pop("score", None)
    opts.pop("scale", None)  # the figure shows the softmax confidence
    oracle = Oracle(model, batch_size=scenario.attack.batch_size, device=device)
    out = {}
    for key in ("members", "nonmembers"):
        ids = np.unique(np.concatenate([s[key] for s in sets]))
        _, curves = resmia_scores(oracle, data.x[ids], labels=data.y[ids], return_curves=True,
                                  **opts)
        out[key] = curves.mean(axis=0).tolist()
    return out


def gnq_attack_link(results: dict, scores_global: dict, samples_path: Path) -> dict[str, Any]:
    """Does GNQ point at the samples and clients the attack finds?

    - per client: Spearman between update GNQ total and the client's Res-MIA AUC;
    - per sample: the Res-MIA TPR at a 5% FPR threshold on the members whose client-side
      GNQ (mean over rounds) is in the top 5%, against all members.
    """

    out: dict[str, Any] = {}
    if "resmia" not in scores_global["pooled"]:
        return out
    totals = [c["gnq"].get("update_total") for c in results["clients"]]
    aucs = [c["attacks"]["resmia"]["auc"] for c in results["clients"]]
    pairs = [(t, a) for t, a in zip(totals, aucs) if t is not None]
    if len(pairs) >= 3 and len({p[0] for p in pairs}) > 1 and len({p[1] for p in pairs}) > 1:
        rho, p = spearmanr([p[0] for p in pairs], [p[1] for p in pairs])
        out["client_update_gnq_vs_resmia_auc"] = {"spearman": float(rho), "pvalue": float(p),
                                                  "n_clients": len(pairs)}
    if samples_path.exists():
        with np.load(samples_path) as npz:
            sid, score = npz["sample_id"], npz["score"]
        uniq, inv = np.unique(sid, return_inverse=True)
        mean_gnq = np.bincount(inv, weights=score) / np.bincount(inv)
        rows = [r for r in scores_global["rows"] if r[0] == "resmia"]
        ids = np.concatenate([r[1] for r in rows])
        mem = np.concatenate([r[3] for r in rows]).astype(bool)
        sc = np.concatenate([r[4] for r in rows])
        # each holdout sample once (several clients may have drawn the same one)
        _, first = np.unique(ids[~mem], return_index=True)
        nonmember_scores = sc[~mem][first]
        threshold = np.quantile(nonmember_scores, 0.95)
        member_ids, member_scores = ids[mem], sc[mem]
        has = np.isin(member_ids, uniq)
        if has.sum() >= 20:
            g = mean_gnq[np.searchsorted(uniq, member_ids[has])]
            top = g >= np.quantile(g, 0.95)
            out["sample_top5pct_gnq_resmia_tpr"] = {
                "fpr": float((nonmember_scores > threshold).mean()),
                "tpr_top5pct_gnq": float((member_scores[has][top] > threshold).mean()),
                "tpr_all_members": float((member_scores[has] > threshold).mean()),
                "n_top": int(top.sum()), "n_members": int(has.sum()),
            }
    return out


def post_training(scenario: Scenario, data: FederatedData, recorder, extra: list, run_dir: Path,
                  results: dict, device: torch.device, progress) -> dict[str, float]:
    """Fill ``results`` with quantization, attacks and their links; write scores.npz."""
    timing = {"audit_seconds": 0.0, "attack_seconds": 0.0}
    t0 = time.perf_counter()
    releases: dict[str, dict] = {}
    if scenario.audit.quantization.enabled:
        entries, releases = quantization_audit(scenario, data, [recorder, *extra], device,
                                               progress)
        results["quantization"] = entries
    timing["audit_seconds"] = time.perf_counter() - t0

    if not scenario.attack.enabled:
        if scenario.audit.dp.canaries:
            add_dp_audit(results, scenario, data, recorder.current, run_dir, device)
        return timing
    t0 = time.perf_counter()
    split = attack_split(scenario, data)
    sets = attack_sets(scenario, data, split.nonmember_pool)
    audit_ids = scored_ids(sets)
    model = model_for(scenario.model, data, seed=scenario.seed)
    refs = None
    if uses_references(scenario):
        progress.phase("reference models")
        refs = load_or_train(scenario, data, split, audit_ids, device,
                             step=lambda k, n, info: progress.step("references", k, n, info))
        results["references"] = refs.summary()
    if scenario.audit.dp.canaries:  # the one-run DP audit (LiRA's statistic with references)
        progress.phase("DP audit")
        add_dp_audit(results, scenario, data, recorder.current, run_dir, device,
                     references=refs.states if refs is not None else None)
    targets: list[tuple[str, dict]] = []
    if "global" in scenario.attack.targets:
        targets.append(("global", recorder.current))
    if "quantized" in scenario.attack.targets:
        targets += [(f"quantized:{name}", sd) for name, sd in releases.items()]
    rows: list[tuple] = []
    by_target: dict[str, dict] = {}
    tracker = AttackProgress(progress, [t for t, _ in targets], model_methods(scenario),
                             len(audit_ids), _queries_per_sample(scenario, data))
    for target, state in targets:
        tracker.start_target(target)
        signals = None
        if refs is not None:
            quantizer = target.split(":", 1)[1] if target.startswith("quantized:") else None
            signals = reference_signals(refs, data, audit_ids, model, device,
                                        scenario.attack.batch_size, quantizer)
        model.load_state_dict(state)
        res = attack_target(model, scenario, data, sets, device, tracker, signals)
        by_target[target] = res
        rows += [(target, *r) for r in res["rows"]]
    if "global" in by_target:
        g = by_target["global"]
        results["attacks"] = g["pooled"]
        for c, client in enumerate(results["clients"]):
            client["attacks"] = g["clients"][c]
            client["attack_set"] = {"members": int(len(sets[c]["members"])),
                                    "nonmembers": int(len(sets[c]["nonmembers"])),
                                    "label_mismatched_nonmembers": int(sets[c]["mismatched"])}
        if "resmia" in scenario.attack.methods:
            model.load_state_dict(recorder.current)
            results["resmia_curves"] = resmia_curves(model, scenario, data, sets, device)
        link = gnq_attack_link(results, g, run_dir / "gnq_samples.npz")
        if link:
            results["gnq_vs_attack"] = link
    for entry in results.get("quantization", []):
        res = by_target.get(f"quantized:{entry['quantizer']}")
        if res is not None:
            entry["attacks"] = res["pooled"]
            entry["client_auc"] = {m: [c[m]["auc"] for c in res["clients"]]
                                   for m in res["pooled"]}
    if results.get("quantization") and any(e["attacks"] for e in results["quantization"]):
        results["rqn_vs_attack"] = rqn_vs_attack(results["quantization"])
    if "rounds" in scenario.attack.targets:
        progress.phase("attacks on every round's global model")
        results["round_attacks"], more = round_attacks(scenario, data, sets,
                                                       recorder.checkpoints, model, device)
        rows += more
    if "clients" in scenario.attack.targets:
        progress.phase("the curious server's view")
        results["server_view"], more = server_view_attacks(scenario, data, sets, run_dir,
                                                           model, device, progress)
        rows += more
    if {"clients", "rounds"} & set(scenario.attack.targets):  # more than the outsider
        results["attack_positions"] = attack_positions(results)
    if rows:
        atomic_save_npz(
            run_dir / "scores.npz",
            target=np.concatenate([np.full(len(r[2]), r[0]) for r in rows]).astype(str),
            method=np.concatenate([np.full(len(r[2]), r[1]) for r in rows]).astype(str),
            sample_id=np.concatenate([r[2] for r in rows]).astype(np.int64),
            client=np.concatenate([r[3] for r in rows]).astype(np.int64),
            member=np.concatenate([r[4] for r in rows]).astype(np.int8),
            score=np.concatenate([r[5] for r in rows]).astype(np.float64))
    timing["attack_seconds"] = time.perf_counter() - t0
    return timing


def rqn_vs_attack(entries: list[dict]) -> dict[str, dict]:
    """Spearman correlation between r_Qn and each attack's AUC across quantizers.
    The paper's claim: higher r -> lower attack success, i.e. a negative correlation."""


    out = {}
    methods = sorted({m for e in entries for m in e["attacks"]})
    for m in methods:
        pairs = [(e["rqn"], e["attacks"][m]["auc"]) for e in entries if m in e["attacks"]]
        r = [p[0] for p in pairs]
        a = [p[1] for p in pairs]
        if len(pairs) < 3 or len(set(r)) < 2 or len(set(a)) < 2:
            out[m] = {"spearman": None, "pvalue": None, "n": len(pairs),
                      "note": "needs >= 3 quantizers with varying r_Qn and AUC"}
            continue
        rho, p = spearmanr(r, a)  # ranks: an infinite r_Qn is simply the largest
        out[m] = {"spearman": None if math.isnan(rho) else float(rho),
                  "pvalue": None if math.isnan(p) else float(p), "n": len(pairs)}
    return out

"""Does r_Qn rank quantizers like a trained discriminator and LiRA do? The r_Qn validation
of docs/validation.md section 3 (Aubinais et al., arXiv 2502.06567).

    python experiments/rqn_validation.py [--quick] [--json OUT] [--settings synthetic,digits,mnist]

Each setting trains many independent runs, each on a random half of a fixed sample pool
(run 2k+1 trains on the complement of run 2k, so every pool sample is a member of exactly
half of the runs), and records the trajectory of (global) checkpoints. For each of the 8
quantizers and each run:

- r_Qn of the run (:func:`fedaudit.quant.rqn_over_runs`): the run's trajectory quantized on
  its release's grid, the ``KEEP_LOWEST`` distinct candidates of lowest test loss; the
  indicator is the median over the first ``R_RUNS`` = 15 runs (the paper's count);
- the quantized release's behaviour on the whole pool: LOSS attack AUC and TPR at 1% FPR,
  online LiRA with the other runs as reference models (targets: the first 15 runs), test
  accuracy, and the features of the baseline MIS discriminator
  (:func:`fedaudit.quant.mis.mis_baseline`: trained on the first two thirds of the runs,
  evaluated on the last third).

Then Spearman's rho across quantizers of r_Qn against each (percentile bootstrap interval
over runs: r_Qn's runs, the attacks' target runs and the MIS held-out runs are resampled;
the discriminator is not refit) and the rank stability of r_Qn from 15 runs and of the
baseline from 15 runs against the baseline from all runs.

Settings: ``synthetic`` (a 4-class Gaussian mixture in 20 dimensions, a 20-32-4 MLP trained
centrally on 100 members, 2,000 fresh test samples), ``digits`` (the quantization-sweep
federation, shortened, in process: :func:`fedaudit.simulation.reference_federations.train_references`, the clients'
own training code), ``mnist`` (``../shared/data/mnist.npz`` when present: 3,000 samples, 5
clients, the MLP). ``--quick`` runs fewer runs of synthetic and digits only.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from scipy.special import softmax
from scipy.stats import spearmanr
from threadpoolctl import threadpool_limits
from torch import nn

import fedaudit
from attacks.membership.lira import lira_scores
from attacks.membership.reference_signals import logit_confidence
from fedaudit.data import build_federated_data
from fedaudit.metrics import membership_metrics
from fedaudit.models import model_for
from fedaudit.quant import quantize, quantize_trajectory, rqn_over_runs
from fedaudit.quant.mis import membership_features, mis_baseline
from fedaudit.audit.reference_models import reference_job
from fedaudit.simulation.reference_federations import LocalRunner, train_references

QUANTIZERS = ["fp32", "int8", "int4", "int2", "ternary", "ternary-sparse50", "ternary-sparse90",
              "binary"]
R_RUNS = 15          # runs behind one r_Qn estimate (the paper: about 15)
TARGETS = 15         # runs attacked (LOSS, LiRA) as targets
KEEP_LOWEST = 10     # r_Qn candidates per run (the default of audit.quantization.keep_lowest)
BOOTSTRAP = 1000
MNIST = Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "mnist.npz"


@dataclass
class Setting:
    name: str
    describe: str
    pool_x: np.ndarray
    pool_y: np.ndarray
    test_x: np.ndarray
    test_y: np.ndarray
    model: Callable[[int], nn.Module]
    train: Callable[[np.ndarray, int], list[dict]]   # (pool member indices, seed) -> trajectory
    runs: int


# ---------------------------------------------------------------------------- settings

def synthetic(runs: int) -> Setting:
    """A 4-class Gaussian mixture in 20 dimensions (class means drawn once, unit noise), a
    20-32-4 MLP trained centrally on 100 members with SGD, a checkpoint every 10 epochs."""
    gen = np.random.default_rng(7)
    means = gen.normal(scale=0.55, size=(4, 20))

    def draw(n: int, g: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        y = g.integers(0, 4, size=n)
        return (means[y] + g.normal(size=(n, 20))).astype(np.float32), y.astype(np.int64)

    px, py = draw(200, gen)
    tx, ty = draw(2000, gen)

    def model(seed: int) -> nn.Module:
        torch.manual_seed(seed)
        return nn.Sequential(nn.Linear(20, 32), nn.ReLU(), nn.Linear(32, 4))

    def train(members: np.ndarray, seed: int) -> list[dict]:
        net = model(seed)
        opt = torch.optim.SGD(net.parameters(), lr=0.1, momentum=0.9)
        x, y = torch.from_numpy(px[members]), torch.from_numpy(py[members])
        g = torch.Generator().manual_seed(seed)
        traj = []
        for epoch in range(1, 201):
            for idx in torch.randperm(len(y), generator=g).split(20):
                opt.zero_grad()
                F.cross_entropy(net(x[idx]), y[idx]).backward()
                opt.step()
            if epoch % 10 == 0:
                traj.append({k: v.detach().clone() for k, v in net.state_dict().items()})
        return traj

    return Setting("synthetic", "Gaussian mixture (4 classes, 20 dims), MLP 20-32-4, 100 members "
                   "of a 200-sample pool, 200 epochs of SGD, 20 checkpoints, 2,000 fresh test "
                   "samples", px, py, tx, ty, model, train, runs)


def federation(name: str, scenario_name: str, overrides: list[str], runs: int,
               describe: str) -> Setting:
    """A fedaudit scenario trained in process (:func:`train_references`, the Flower
    strategy stack over the ClientApp): the pool is its
    train and holdout splits, r_Qn and accuracy use its test split; a checkpoint per round."""
    scenario = fedaudit.validate(scenario_name, overrides)
    data = build_federated_data(scenario)
    pool = np.sort(np.concatenate([data.train, data.holdout]))

    def train(members: np.ndarray, seed: int) -> list[dict]:
        traj: list[dict] = []
        job = reference_job(scenario, data, 0, pool[members], seed)
        for _ in train_references(scenario, data, [job], LocalRunner(),
                                  on_round=lambda _j, _r, state: traj.append(state)):
            pass
        return traj

    return Setting(name, describe, data.x[pool], data.y[pool], data.x[data.test],
                   data.y[data.test], lambda seed: model_for(scenario.model, data, seed=seed),
                   train, runs)


def settings(names: list[str], quick: bool) -> list[Callable[[], Setting]]:
    digits = ["federation.rounds=10", "train.local_epochs=10"]
    table = {
        "synthetic": lambda: synthetic(40 if quick else 150),
        "digits": lambda: federation(
            "digits", "quantization-sweep", digits, 16 if quick else 60,
            "quantization-sweep shortened (digits, 5 clients, 10 rounds x 10 local epochs, MLP "
            "64): members a random half of its 750-sample train+holdout pool, test split 250"),
        "mnist": lambda: federation(
            "mnist", "quantization-sweep",
            ["data.dataset='npz'", f"data.path='{MNIST}'", "data.max_samples=3000",
             "federation.rounds=10", "train.local_epochs=2", "train.batch_size=32"],
            30, "MNIST (lossless, 3,000 samples), 5 clients, 10 rounds x 2 local epochs, MLP 64: "
            "members a random half of the 2,250-sample train+holdout pool, test split 750"),
    }
    out = []
    for n in names:
        if n == "mnist" and not MNIST.exists():
            print(f"mnist: skipped ({MNIST} not found)", file=sys.stderr)
            continue
        out.append(table[n])
    return out


# ---------------------------------------------------------------------------- one run

def _logits(net: nn.Module, x: np.ndarray) -> torch.Tensor:
    net.eval()
    with torch.no_grad():
        return torch.cat([net(torch.from_numpy(np.ascontiguousarray(x[i:i + 1024]))).double()
                          for i in range(0, len(x), 1024)])


@dataclass
class Record:
    """Per quantizer (dim 0): everything one run contributes."""
    r: np.ndarray            # (Q,) the run's r_Qn
    accuracy: np.ndarray     # (Q,) release's test accuracy
    logits: np.ndarray       # (Q, P, C) release's logits on the pool, float32


def one_run(s: Setting, members: np.ndarray, seed: int) -> Record:
    traj = s.train(members, seed)
    net = s.model(seed)
    yt = torch.from_numpy(s.test_y)
    r, acc, logits = [], [], []
    for q in QUANTIZERS:
        candidates, _ = quantize_trajectory(traj, q)
        rows = []
        for cand in candidates:
            net.load_state_dict(cand)
            rows.append(F.cross_entropy(_logits(net, s.test_x), yt, reduction="none").numpy())
        r.append(rqn_over_runs([np.stack(rows)], KEEP_LOWEST).runs[0].r)
        net.load_state_dict(quantize(traj[-1], q))
        acc.append(float((_logits(net, s.test_x).argmax(1) == yt).double().mean()))
        logits.append(_logits(net, s.pool_x).float().numpy())
    return Record(np.array(r), np.array(acc), np.stack(logits))


# ---------------------------------------------------------------------------- analysis

def _rho(a: np.ndarray, b: np.ndarray) -> float | None:
    if len(set(a.tolist())) < 2 or len(set(b.tolist())) < 2:
        return None   # a constant column has no ranking
    rho = spearmanr(a, b).statistic  # an infinite r ranks largest
    return None if math.isnan(rho) else float(rho)


def _median_r(r: np.ndarray) -> np.ndarray:
    return np.median(r, axis=0)   # (runs, Q) -> (Q,); inf sorts last, never NaN


def analyse(s: Setting, members: np.ndarray, recs: list[Record], seed: int) -> dict:
    n, q = len(recs), len(QUANTIZERS)
    r = np.stack([rec.r for rec in recs])                   # (n, Q)
    acc = np.stack([rec.accuracy for rec in recs])
    t = min(TARGETS, n)
    loss_auc, loss_tpr, lira_auc, lira_tpr = (np.zeros((t, q)) for _ in range(4))
    feats = np.zeros((q, n, len(s.pool_y), 4))
    for k in range(q):
        logits = np.stack([rec.logits[k] for rec in recs]).astype(np.float64)   # (n, P, C)
        phi = logit_confidence(softmax(logits, axis=-1), s.pool_y)            # (n, P)
        for j in range(n):
            feats[k, j] = membership_features(logits[j], s.pool_y)
        for j in range(t):
            m = members[j]
            loss = membership_metrics(-feats[k, j, :, 0], m)
            others = np.delete(np.arange(n), j)
            scores = lira_scores(phi[j], phi[others], members[others],
                                 fixed_variance=len(others) < 64)
            lira = membership_metrics(scores, m)
            loss_auc[j, k], loss_tpr[j, k] = loss["auc"], loss["tpr_at_1pct_fpr"]
            lira_auc[j, k], lira_tpr[j, k] = lira["auc"], lira["tpr_at_1pct_fpr"]

    test_runs = np.arange(n - n // 3, n)
    rows_run = np.repeat(np.arange(n), len(s.pool_y))
    mis, per_run_ba = np.zeros(q), np.zeros((len(test_runs), q))
    for k in range(q):
        est = mis_baseline(feats[k].reshape(-1, 4), members.reshape(-1), rows_run, test_runs,
                           seed=seed)
        mis[k] = est.mis
        pred = est.predictions.reshape(len(test_runs), -1)
        m = members[test_runs]
        per_run_ba[:, k] = 0.5 * ((pred * m).sum(1) / m.sum(1)
                                  + ((1 - pred) * (1 - m)).sum(1) / (1 - m).sum(1))

    r15 = r[:min(R_RUNS, n)]
    rqn = _median_r(r15)
    cols = {"mis_baseline": mis, "loss_auc": loss_auc.mean(0), "loss_tpr_1pct": loss_tpr.mean(0),
            "lira_auc": lira_auc.mean(0), "lira_tpr_1pct": lira_tpr.mean(0),
            "test_accuracy": acc.mean(0)}

    gen = np.random.default_rng(seed)
    boot = {c: [] for c in cols}
    for _ in range(BOOTSTRAP):
        rb = _median_r(r15[gen.integers(0, len(r15), len(r15))])
        tb = gen.integers(0, t, t)
        hb = gen.integers(0, len(test_runs), len(test_runs))
        ab = gen.integers(0, n, n)
        vals = {"mis_baseline": 1 - np.maximum(0, 2 * per_run_ba[hb].mean(0) - 1),
                "loss_auc": loss_auc[tb].mean(0), "loss_tpr_1pct": loss_tpr[tb].mean(0),
                "lira_auc": lira_auc[tb].mean(0), "lira_tpr_1pct": lira_tpr[tb].mean(0),
                "test_accuracy": acc[ab].mean(0)}
        for c, v in vals.items():
            rho = _rho(rb, v)
            if rho is not None:
                boot[c].append(rho)
    spearman = {}
    for c, v in cols.items():
        b = np.array(boot[c])
        spearman[f"rqn_vs_{c}"] = {
            "rho": _rho(rqn, v),
            "interval": [float(np.quantile(b, 0.025)), float(np.quantile(b, 0.975))] if len(b) else None,
            "n": q, "bootstrap": len(b)}

    # rank stability: 15-run estimates against the estimates from every run
    rqn_all = _median_r(r)
    sub_r = [_rho(_median_r(r[gen.choice(n, min(R_RUNS, n), replace=False)]), rqn_all)
             for _ in range(200)] if n > R_RUNS else []
    sub_mis, sub_rq_mis = [], []
    if n > R_RUNS:
        for _ in range(10):
            pick = gen.choice(n, R_RUNS, replace=False)
            keep = np.isin(rows_run, pick)
            v = np.array([mis_baseline(feats[k].reshape(-1, 4)[keep], members.reshape(-1)[keep],
                                       rows_run[keep], pick[-5:], seed=seed).mis for k in range(q)])
            sub_mis.append(_rho(v, mis))
        sub_rq_mis = [_rho(_median_r(r[gen.choice(n, R_RUNS, replace=False)]), mis)
                      for _ in range(200)]

    def summary(xs):
        xs = [x for x in xs if x is not None]
        return ({"mean": float(np.mean(xs)), "q05": float(np.quantile(xs, 0.05)),
                 "q95": float(np.quantile(xs, 0.95)), "draws": len(xs)} if xs else None)

    table = []
    for k, name in enumerate(QUANTIZERS):
        table.append({"quantizer": name, "rqn": float(rqn[k]),
                      "rqn_q25": float(np.quantile(r15[:, k], 0.25, method="lower")),
                      "rqn_q75": float(np.quantile(r15[:, k], 0.75, method="lower")),
                      **{c: float(v[k]) for c, v in cols.items()}})
    return {"describe": s.describe, "runs": n, "rqn_runs": len(r15), "targets": t,
            "mis_train_runs": n - len(test_runs), "mis_test_runs": len(test_runs),
            "table": table, "spearman": spearman,
            "stability": {"rqn15_vs_rqn_all": summary(sub_r),
                          "mis15_vs_mis_all": summary(sub_mis),
                          "rqn15_vs_mis_all": summary(sub_rq_mis)}}


def run_setting(make: Callable[[], Setting], seed: int, runs: int | None) -> tuple[str, dict]:
    t0 = time.perf_counter()
    s = make()
    if runs:
        s.runs = runs
    p = len(s.pool_y)
    gen = np.random.default_rng(seed)
    members = np.zeros((s.runs, p), dtype=bool)
    for j in range(0, s.runs, 2):
        half = gen.permutation(p)[: p // 2]
        members[j, half] = True
        if j + 1 < s.runs:
            members[j + 1] = ~members[j]
    recs = []
    for j in range(s.runs):
        recs.append(one_run(s, np.flatnonzero(members[j]), seed=1000 + j))
        print(f"  {s.name}: run {j + 1}/{s.runs} ({time.perf_counter() - t0:.0f} s)",
              file=sys.stderr, flush=True)
    with threadpool_limits(1):
        out = analyse(s, members, recs, seed)
    out["wall_s"] = round(time.perf_counter() - t0, 1)
    return s.name, out


# ---------------------------------------------------------------------------- output

def _g(x) -> str:
    if x is None:
        return "-"
    return "inf" if math.isinf(x) else f"{x:.3g}"


def markdown(results: dict) -> str:
    lines = []
    for name, res in results["settings"].items():
        lines += [f"### {name}", "", f"{res['describe']}; {res['runs']} runs (r_Qn: median of "
                  f"{res['rqn_runs']} [quartiles]; LOSS/LiRA: mean over {res['targets']} target "
                  f"runs; MIS: discriminator trained on {res['mis_train_runs']} runs, evaluated on "
                  f"{res['mis_test_runs']}); {res['wall_s']:.0f} s.", "",
                  "| quantizer | r_Qn [q25, q75] | baseline MIS | LOSS AUC | LOSS TPR@1% | "
                  "LiRA AUC | LiRA TPR@1% | test acc |", "|---|---|---|---|---|---|---|---|"]
        for e in res["table"]:
            lines.append(f"| {e['quantizer']} | {_g(e['rqn'])} [{_g(e['rqn_q25'])}, "
                         f"{_g(e['rqn_q75'])}] | {e['mis_baseline']:.3f} | {e['loss_auc']:.3f} | "
                         f"{e['loss_tpr_1pct']:.3f} | {e['lira_auc']:.3f} | "
                         f"{e['lira_tpr_1pct']:.3f} | {e['test_accuracy']:.3f} |")
        lines += ["", "| Spearman rho of r_Qn vs | rho | 95% bootstrap interval | n |",
                  "|---|---|---|---|"]
        for c, v in res["spearman"].items():
            iv = v["interval"]
            lines.append(f"| {c.removeprefix('rqn_vs_')} | {_g(v['rho'])} | "
                         f"{'-' if iv is None else f'[{iv[0]:.2f}, {iv[1]:.2f}]'} | {v['n']} |")
        lines += ["", "| rank stability (Spearman) | mean | [5%, 95%] |", "|---|---|---|"]
        for c, v in res["stability"].items():
            lines.append(f"| {c} | " + ("- | - |" if v is None else
                                        f"{v['mean']:.2f} | [{v['q05']:.2f}, {v['q95']:.2f}] |"))
        lines.append("")
    return "\n".join(lines)


def _finite(obj):
    """JSON form: an infinite r_Qn becomes the string "inf", as in results.json."""
    if isinstance(obj, float) and math.isinf(obj):
        return "inf" if obj > 0 else "-inf"
    if isinstance(obj, dict):
        return {k: _finite(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_finite(v) for v in obj]
    return obj


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="fewer runs; synthetic and digits only")
    ap.add_argument("--json", help="write the results as JSON to this file")
    ap.add_argument("--settings", default=None,
                    help="comma-separated subset of synthetic,digits,mnist")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--runs", type=int, default=None, help="override every setting's run count")
    args = ap.parse_args()
    names = (args.settings.split(",") if args.settings
             else ["synthetic", "digits"] if args.quick else ["synthetic", "digits", "mnist"])
    bad = [n for n in names if n not in ("synthetic", "digits", "mnist")]
    if bad:
        ap.error(f"--settings: unknown {', '.join(bad)}; allowed: synthetic, digits, mnist")
    # tiny models and a few thousand rows: one thread each for torch and the discriminator's
    # OpenMP is several times faster than oversubscribed cores
    torch.set_num_threads(1)
    results = {"command": " ".join(["python", "experiments/rqn_validation.py", *sys.argv[1:]]),
               "quantizers": QUANTIZERS, "keep_lowest": KEEP_LOWEST, "settings": {}}
    for make in settings(names, args.quick):
        name, res = run_setting(make, args.seed, args.runs)
        results["settings"][name] = res
    results["spearman"] = {f"{n}:{c}": v for n, res in results["settings"].items()
                           for c, v in res["spearman"].items()}
    text = markdown(results)
    print(text)
    if args.json:
        tmp = Path(args.json).with_suffix(".tmp")
        tmp.write_text(json.dumps(_finite(results), indent=1, allow_nan=False))
        tmp.replace(args.json)


if __name__ == "__main__":
    main()

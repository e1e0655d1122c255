"""Res-MIA where its paper claims it: natural 32x32 images, 10 clients (issue 15); the table
of docs/validation.md section "Res-MIA on natural images".

    python experiments/resmia_reproduction.py [--quick] [--run-dir DIR] [--json OUT]
        [--data NPZ] [--out runs/experiments]

Without ``--run-dir`` it trains ``scenarios/resmia-paper-cpu.toml`` (``fedaudit.run``,
seed 0) on CIFAR-10: the ``npz`` file given by ``--data`` (default
``../shared/data/cifar10-jpeg-10k.npz`` when it exists: JPEG-compressed CIFAR-10, quality
75, 4:2:0), else the scenario's torchvision ``cifar10``. With ``--run-dir`` it loads a
finished run instead (any scenario with image data, e.g. ``resmia-paper`` trained on a GPU).

It then rebuilds the run's data and audit sets, loads the final global model and scores
the same members and class-matched non-members as the run with every Res-MIA variant
below and the one-query baselines, and prints one markdown table: AUC, TPR at 1% FPR and
FPR at 80% TPR pooled over the distinct scored samples (as results.json), and the range of
the per-client AUCs. LiRA / RMIA rows are copied from results.json when the run had them.
Last, the cost of Res-MIA per sample against one forward pass through the same oracle.

``--quick`` (a smoke test, a few minutes on 2 cores) trains 3 rounds, scores three
Res-MIA variants and times the small model only.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import fedaudit  # noqa: E402
from attacks import Oracle, get_attack  # noqa: E402
from attacks.membership.resmia import resmia_scores  # noqa: E402
from fedaudit.audit.sets import attack_sets, client_audit_set, pooled_audit_set  # noqa: E402
from fedaudit.config import from_toml  # noqa: E402
from fedaudit.data import build_federated_data  # noqa: E402
from fedaudit.metrics import membership_metrics  # noqa: E402
from fedaudit.models import build_model, model_for  # noqa: E402
from fedaudit.audit.reference_models import attack_split  # noqa: E402
from fedaudit.rundir import checkpoint_path, load_checkpoint  # noqa: E402

SCENARIO = "resmia-paper-cpu"
SHARED_NPZ = ROOT.parent / "shared" / "data" / "cifar10-jpeg-10k.npz"


@dataclass(frozen=True)
class Variant:
    """One Res-MIA setting: a row label and the ``[attack.resmia]`` options."""

    label: str
    options: dict[str, Any] = field(default_factory=dict)


VARIANTS = (
    Variant("Res-MIA (paper: predicted label, nearest, halving to 1x1, endpoint)"),
    # endpoint scores compare x_0 with the 1x1 image, the same for both interpolations
    Variant("Res-MIA, bilinear", {"upsample": "bilinear"}),
    Variant("Res-MIA, mean-slope", {"score": "mean-slope"}),
    Variant("Res-MIA, bilinear, mean-slope", {"upsample": "bilinear", "score": "mean-slope"}),
    Variant("Res-MIA, bilinear, stop at 4x4", {"upsample": "bilinear", "min_size": 4}),
    Variant("Res-MIA, logit scale", {"scale": "logit"}),
    Variant("Res-MIA, true label", {"label": "given"}),
    Variant("Res-MIA, true label, logit", {"label": "given", "scale": "logit"}),
    Variant("Res-MIA, stop at 4x4 (16, 8, 4)", {"min_size": 4}),
    Variant("Res-MIA, K = 1 (16x16 only)", {"steps": 1}),
    Variant("Res-MIA, factor 1.5 (22..2, K = 7)", {"factor": 1.5}),
    Variant("Res-MIA, factor 1.5, stop at 8x8", {"factor": 1.5, "min_size": 8}),
    Variant("Res-MIA, true label, logit, stop at 4x4", {"label": "given", "scale": "logit",
                                                         "min_size": 4}),
    Variant("Res-MIA, true label, logit, mean-slope",
            {"label": "given", "scale": "logit", "score": "mean-slope"}),
)
QUICK_VARIANTS = (VARIANTS[0], VARIANTS[3], VARIANTS[7])
BASELINES = (("LOSS", "loss"), ("confidence", "confidence"), ("entropy", "entropy"),
             ("m-entropy", "mentropy"))


@dataclass(frozen=True)
class Row:
    label: str
    auc: float
    tpr_at_1pct_fpr: float
    fpr_at_80pct_tpr: float
    client_auc_min: float | None
    client_auc_max: float | None
    queries_per_sample: int


def _train(args: argparse.Namespace) -> Path:
    overrides = []
    data = args.data or (str(SHARED_NPZ) if SHARED_NPZ.is_file() else "")
    if data:
        overrides += ["data.dataset=npz", f"data.path={data}"]
    if args.quick:
        overrides += ["federation.rounds=3"]
    t0 = time.perf_counter()
    run = fedaudit.run(SCENARIO, out=args.out, overrides=overrides, progress=False)
    print(f"trained {SCENARIO} {' '.join('--set ' + o for o in overrides)} in "
          f"{time.perf_counter() - t0:.0f} s -> {run.dir}", file=sys.stderr, flush=True)
    return run.dir


def _row(label: str, scores: np.ndarray, ids: np.ndarray, member: np.ndarray,
         sets: list[dict], queries: int) -> Row:
    pooled = membership_metrics(scores, member)
    pos = {int(i): k for k, i in enumerate(ids)}
    aucs = []
    for s in sets:
        sid, mem = client_audit_set(s)
        aucs.append(membership_metrics(scores[[pos[int(i)] for i in sid]], mem)["auc"])
    return Row(label, pooled["auc"], pooled["tpr_at_1pct_fpr"], pooled["fpr_at_80pct_tpr"],
               min(aucs), max(aucs), queries)


def _interleaved_median_seconds(fns: dict[str, Any], repeats: int) -> dict[str, float]:
    times: dict[str, list[float]] = {k: [] for k in fns}
    for name, fn in fns.items():  # warm-up
        fn()
    for _ in range(repeats):
        for name, fn in fns.items():
            t0 = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - t0)
    return {k: float(np.median(v)) for k, v in times.items()}


def _cost(model: torch.nn.Module, x: torch.Tensor, batch_size: int,
          repeats: int) -> dict[str, float]:
    """Res-MIA (paper default) seconds per sample / one forward pass per sample."""
    oracle = Oracle(model, batch_size=batch_size)
    t = _interleaved_median_seconds({"forward": lambda: oracle.predict_proba(x),
                                     "resmia": lambda: resmia_scores(oracle, x)}, repeats)
    n = len(x)
    return {"forward_ms": 1e3 * t["forward"] / n, "resmia_ms": 1e3 * t["resmia"] / n,
            "ratio": t["resmia"] / t["forward"]}


def evaluate(run_dir: Path, quick: bool) -> dict[str, Any]:
    scenario = from_toml((run_dir / "scenario.toml").read_text(encoding="utf-8"))
    results = json.loads((run_dir / "results.json").read_text(encoding="utf-8"))
    data = build_federated_data(scenario)
    split = attack_split(scenario, data)
    sets = attack_sets(scenario, data, split.nonmember_pool)
    ids, member = pooled_audit_set(sets)
    model = model_for(scenario.model, data, seed=scenario.seed)
    model.load_state_dict(load_checkpoint(checkpoint_path(run_dir, results["rounds_completed"]
                                                          if "rounds_completed" in results
                                                          else scenario.federation.rounds)))
    model.eval()
    oracle = Oracle(model, batch_size=scenario.attack.batch_size)
    x, y = data.x[ids], data.y[ids]
    correct = oracle.predict_proba(x).argmax(axis=1) == y
    rows: list[Row] = []
    for label, name in BASELINES:
        rows.append(_row(label, get_attack(name)(oracle, x, y), ids, member, sets, 1))
    for v in QUICK_VARIANTS if quick else VARIANTS:
        oracle.reset_queries()
        scores = get_attack("resmia")(oracle, x, y, **v.options)
        rows.append(_row(v.label, scores, ids, member, sets, oracle.queries // len(ids)))
    # the run's own pooled numbers for the methods it ran (a consistency check, and LiRA /
    # RMIA, which need the run's reference models)
    ran = results.get("attacks", {})
    for name in ("lira", "rmia"):
        if name in ran:
            a = ran[name]
            client = [c["attacks"][name]["auc"] for c in results.get("clients", [])
                      if name in c.get("attacks", {})]
            rows.append(Row(name.upper() if name == "rmia" else "LiRA", a["auc"],
                            a["tpr_at_1pct_fpr"], a["fpr_at_80pct_tpr"],
                            min(client) if client else None, max(client) if client else None,
                            0))
    check = {}
    for label, name in BASELINES + (("paper", "resmia"),):
        if name in ran:
            mine = next(r for r in rows if r.label == label or
                        (name == "resmia" and r.label.startswith("Res-MIA (paper")))
            check[name] = (ran[name]["auc"], mine.auc)
    _, c, h, _ = data.x.shape
    cost = {"trained model": _cost(model, torch.from_numpy(data.x[ids[:512]]),
                                   scenario.attack.batch_size, 3 if quick else 7)}
    if not quick:  # the paper's model, at random weights (the cost does not depend on them)
        resnet = build_model("resnet18", in_channels=c, image_size=h,
                             num_classes=data.num_classes, seed=0)
        cost["resnet18"] = _cost(resnet, torch.from_numpy(data.x[ids[:64]]), 64, 3)
    return {
        "run_dir": str(run_dir),
        "scenario": scenario.name,
        "dataset": data.name,
        "model": scenario.model.name,
        "test_accuracy": results.get("model", {}).get("test_accuracy"),
        "member_accuracy": float(correct[member == 1].mean()),
        "nonmember_accuracy": float(correct[member == 0].mean()),
        "members": int(member.sum()),
        "nonmembers": int(len(member) - member.sum()),
        "rows": [r.__dict__ for r in rows],
        "consistency": check,
        "cost": cost,
    }


def _fmt(v: float | None) -> str:
    return "-" if v is None else f"{v:.3f}"


def print_table(out: dict[str, Any]) -> None:
    print(f"run {out['run_dir']} ({out['scenario']}, data {out['dataset']}, model "
          f"{out['model']}, test accuracy {_fmt(out['test_accuracy'])}, accuracy on the "
          f"scored members {_fmt(out['member_accuracy'])} / non-members "
          f"{_fmt(out['nonmember_accuracy'])}); {out['members']} members vs "
          f"{out['nonmembers']} non-members pooled\n")
    print("| attack | queries | AUC | TPR@1%FPR | FPR@80%TPR | client AUC (min-max) |")
    print("|---|---|---|---|---|---|")
    for r in out["rows"]:
        clients = ("-" if r["client_auc_min"] is None
                   else f"{r['client_auc_min']:.3f}-{r['client_auc_max']:.3f}")
        print(f"| {r['label']} | {r['queries_per_sample'] or '-'} | {_fmt(r['auc'])} | "
              f"{_fmt(r['tpr_at_1pct_fpr'])} | {_fmt(r['fpr_at_80pct_tpr'])} | {clients} |")
    print("\n| model | forward ms/sample | Res-MIA ms/sample | ratio |")
    print("|---|---|---|---|")
    for name, c in out["cost"].items():
        print(f"| {name} | {c['forward_ms']:.3f} | {c['resmia_ms']:.3f} | {c['ratio']:.2f} |")
    if out["consistency"]:
        print("\nresults.json vs recomputed pooled AUC: " + ", ".join(
            f"{k} {a:.4f} / {b:.4f}" for k, (a, b) in out["consistency"].items()))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="3 rounds, 3 variants (smoke test)")
    ap.add_argument("--run-dir", help="evaluate this finished run instead of training")
    ap.add_argument("--json", help="also write the numbers to this file")
    ap.add_argument("--data", help="CIFAR-10 .npz (default: ../shared/data/cifar10-jpeg-10k.npz "
                                   "when present, else torchvision's cifar10)")
    ap.add_argument("--out", default="runs/experiments", help="where the run directory goes")
    args = ap.parse_args()
    t0 = time.perf_counter()
    run_dir = Path(args.run_dir) if args.run_dir else _train(args)
    if not (run_dir / "results.json").is_file():
        print(f"resmia_reproduction: error: {run_dir}: no results.json; not a finished run",
              file=sys.stderr)
        raise SystemExit(2)
    out = evaluate(run_dir, args.quick)
    out["wall_seconds"] = time.perf_counter() - t0
    print_table(out)
    print(f"\nwall time {out['wall_seconds']:.0f} s", flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1), encoding="utf-8")


if __name__ == "__main__":
    main()

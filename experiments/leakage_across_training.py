"""Leakage across training (issue 50, item 2): what the server rebuilds from the same
clients' updates at several rounds of a federation that learns, beside the test accuracy of
the model those updates started from (docs/validation.md, "Reconstruction across
training").

One ``fedaudit run`` of ``--scenario`` (default ``threat-matrix``: 10 clients of 500 CIFAR-10
images train the CNN for 20 rounds, clients 0 and 1 hold one batch of 4) with the
membership attack off and ``reconstruction.rounds`` / ``label_leakage.rounds`` set to
``--rounds``; or ``--run DIR`` to tabulate a finished run.  Per attacked round r, from
``reconstructions.npz`` and results.json:

* the test accuracy of the model the clients started from: results.json's
  ``rounds[r - 1].test_accuracy`` (round 1: the untrained model, not evaluated: "–");
* the first reconstruction method's mean PSNR (finite ones) and SSIM against the matched
  true images,
  the prior's SSIM (the train split's mean image), the SSIM gain with its normal 95 %
  interval (mean +- 1.96 sd / sqrt(n), as ``fedaudit.image_metrics.pooled``), and the share
  of reconstructions whose label is right;
* the label-leakage guess's share of the reconstructed clients' labels (its first method).

    python experiments/leakage_across_training.py \\
        --set data.dataset=npz --set data.path=../shared/data/cifar10-jpeg-10k.npz \\
        --rounds 1 2 4 6 8 10 12 14 16 18 20 --out across.json
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

def run_scenario(args) -> Path:
    """One run with the rounds set and the membership attack off; returns its folder."""
    import fedaudit

    rounds = "[" + ", ".join(str(r) for r in args.rounds) + "]"
    overrides = ["attack.enabled=false", f"reconstruction.rounds={rounds}",
                 f"label_leakage.rounds={rounds}", *args.overrides]
    out = Path(args.runs or tempfile.mkdtemp(prefix="across-"))
    return fedaudit.run(args.scenario, out=out, overrides=overrides).dir


def _interval(v: np.ndarray) -> list[float] | None:
    """The normal 95 % interval of the mean, as ``fedaudit.image_metrics.pooled`` gives
    the SSIM gain's (None with fewer than two values)."""
    from fedaudit.intervals import normal_interval

    if len(v) < 2:
        return None
    return list(normal_interval(float(np.mean(v)), float(np.var(v, ddof=1)) / len(v),
                                bounds=(-2.0, 2.0)))


def _label_share(results: dict, round_: int, clients: set[int]) -> float | None:
    """The first label attack's pooled share of right labels over the round's updates of
    ``clients`` (the reconstructed ones): sum of accuracy x samples over sum of samples."""
    section = results.get("label_leakage") or {}
    methods = section.get("methods") or []
    right = total = 0.0
    for case in section.get("cases") or []:
        entry = case.get(methods[0]) if methods else None
        if int(case["round"]) == round_ and int(case["client"]) in clients \
                and isinstance(entry, dict):
            right += entry["label_accuracy"] * case["num_examples"]
            total += case["num_examples"]
    return right / total if total else None


def table(run_dir: Path) -> list[dict]:
    """One row per attacked round (module docstring)."""
    results = json.loads((run_dir / "results.json").read_text())
    acc = {int(r["round"]): r.get("test_accuracy") for r in results.get("rounds") or []}
    rows = np.load(run_dir / "reconstructions.npz")
    method = (results.get("reconstruction") or {}).get("methods", [None])[0]
    first = rows["method"] == method if method is not None else np.ones(len(rows["round"]),
                                                                          dtype=bool)
    out = []
    for r in sorted(set(rows["round"][first].tolist())):
        m = first & (rows["round"] == r)
        psnr = rows["psnr"][m].astype(float)
        gain = rows["ssim"][m].astype(float) - rows["prior_ssim"][m].astype(float)
        out.append({
            "round": int(r), "start_test_accuracy": acc.get(int(r) - 1),
            "samples": int(m.sum()),
            "psnr": float(np.mean(psnr[np.isfinite(psnr)])) if np.isfinite(psnr).any()
            else None,
            "ssim": float(np.mean(rows["ssim"][m])),
            "prior_ssim": float(np.mean(rows["prior_ssim"][m])),
            "ssim_gain": float(np.mean(gain)), "ssim_gain_ci": _interval(gain),
            "label_accuracy_rec": float(np.mean(rows["label_correct"][m])),
            "label_accuracy_guess": _label_share(results, int(r),
                                                 set(rows["client"][m].tolist()))})
    return out


def print_rows(rows: list[dict], title: str) -> None:
    from rich.console import Console
    from rich.table import Table

    t = Table(title=title)
    for col in ("round", "start model's test acc", "samples", "PSNR dB", "SSIM", "prior SSIM",
                "SSIM gain [95% CI]", "labels right (rec)", "labels right (guess)"):
        t.add_column(col, justify="right")

    def f(v, fmt=".3f"):
        return "–" if v is None else format(v, fmt)

    for r in rows:
        ci = r["ssim_gain_ci"]
        gain = f"{r['ssim_gain']:+.3f}" + (f" [{ci[0]:+.3f}, {ci[1]:+.3f}]" if ci else "")
        t.add_row(str(r["round"]), f(r["start_test_accuracy"]), str(r["samples"]),
                  f(r["psnr"], ".1f"), f(r["ssim"]), f(r["prior_ssim"]), gain,
                  f(r["label_accuracy_rec"], ".2f"), f(r["label_accuracy_guess"], ".2f"))
    Console(width=160).print(t)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--scenario", default="threat-matrix")
    ap.add_argument("--set", dest="overrides", action="append", default=[])
    ap.add_argument("--rounds", type=int, nargs="+", default=[1, 5, 10, 15, 20])
    ap.add_argument("--run", default=None, help="tabulate this finished run instead")
    ap.add_argument("--runs", default=None, help="folder of the new run (default: a "
                                                 "temporary one)")
    ap.add_argument("--out", default=None, help="JSON file for the rows")
    args = ap.parse_args(argv)
    run_dir = Path(args.run) if args.run else run_scenario(args)
    rows = table(run_dir)
    print_rows(rows, f"leakage across training: {run_dir}")
    if args.out:
        Path(args.out).write_text(json.dumps({"run": str(run_dir), "rows": rows}, indent=1))


if __name__ == "__main__":
    main()

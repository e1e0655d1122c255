"""Passive property inference (Melis et al. 2019's batch property classifier) in whole
fedaudit runs, one run per setting: the ``property-inference`` scenario on the shared MNIST
copy (heavy-stroke digits), against DP-SGD, DP-FedAvg with client clipping and
sparsification, and on the shared CIFAR-10 copy (bright images): the pooled AUC with its
95 % interval and verdict, the updates holding the property, the test accuracy and epsilon
(docs/validation.md section 19).

    python experiments/property_inference.py [--only NAME ...] [--out rows.jsonl]

Each run has its own fresh cache; about 3 minutes per run on 2 CPU cores.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

DATA = ROOT.parent / "shared" / "data"
MNIST = ["data.dataset=npz", f"data.path={DATA / 'mnist.npz'}"]
CIFAR = ["data.dataset=npz", f"data.path={DATA / 'cifar10-jpeg-10k.npz'}",
         "property_inference.brightness.above=0.64"]
#: (name, overrides)
SETTINGS = [
    ("mnist, none", MNIST),
    ("mnist, DP-SGD (z=1, C=1)", [*MNIST, "defense.kind=dp-sgd",
                                  "defense.noise_multiplier=1.0", "defense.clip_norm=1.0"]),
    ("mnist, DP-FedAvg (client clipping C=0.5, z=1)", [
        *MNIST, "defense.kind=dp-client", "defense.noise_multiplier=1.0",
        "defense.clip_norm=0.5"]),
    ("mnist, sparsify (keep 10%)", [*MNIST, "defense.kind=sparsify", "defense.keep=0.1"]),
    ("cifar10, none (bright images)", CIFAR),
]


def run_one(name: str, overrides: list[str]) -> dict:
    import fedaudit

    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        res = fedaudit.run("property-inference", out=tmp, progress=False,
                           cache=Path(tmp) / "c", overrides=overrides).results
        seconds = time.perf_counter() - t0
    sec = res["property_inference"]
    p = sec["pooled"]["bpc"]
    return {"setting": name, "auc": p.get("auc"), "auc_ci": p.get("auc_ci"),
            "verdict": p.get("cell_verdict") or (p.get("verdict") or {}).get("auc"),
            "summary": (p.get("verdict_detail") or {}).get("summary"),
            "why": p.get("why"),
            "tpr_at_1pct_fpr": p.get("tpr_at_1pct_fpr"),
            "updates": sec["updates"], "with_property": sec["updates_with_property"],
            "sample_rate": sec["sample_rate"], "aux_rate": sec["aux_rate"],
            "test_accuracy": res["model"]["test_accuracy"],
            "epsilon": (res.get("defense") or {}).get("epsilon"), "seconds": seconds,
            "overrides": overrides}


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", nargs="*", default=None, help="settings whose name starts so")
    ap.add_argument("--out", default=None, help="append each row as a JSON line here")
    args = ap.parse_args(argv)
    from rich.console import Console
    from rich.table import Table

    rows = []
    for name, overrides in SETTINGS:
        if args.only and not any(name.startswith(o) for o in args.only):
            continue
        row = run_one(name, overrides)
        rows.append(row)
        print(json.dumps(row), flush=True)
        if args.out:
            with open(args.out, "a", encoding="utf-8") as f:
                f.write(json.dumps(row) + "\n")
    t = Table(title="property inference (bpc), pooled over the updates")
    for col in ("setting", "AUC [95% CI]", "verdict", "updates (with)", "test acc",
                "epsilon", "s"):
        t.add_column(col)
    for r in rows:
        ci = r["auc_ci"]
        auc = "–" if r["auc"] is None else (f"{r['auc']:.3f}" + (
            f" [{ci[0]:.3f}, {ci[1]:.3f}]" if ci else ""))
        t.add_row(r["setting"], auc, str(r["summary"] or r["verdict"] or r["why"]),
                  f"{r['updates']} ({r['with_property']})",
                  f"{r['test_accuracy']:.3f}", str(r["epsilon"]), f"{r['seconds']:.0f}")
    Console().print(t)


if __name__ == "__main__":
    main()

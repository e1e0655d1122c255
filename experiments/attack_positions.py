"""The attacker's positions (outsider, insider, curious server) on the bundled scenarios;
the table of docs/validation.md section 2.

    python experiments/attack_positions.py [--out runs/experiments] [--quick]

1. ``membership-signal`` with attack.targets = global, clients, rounds and
   attack.methods = loss, fedmia, at attack.rounds = last (the default) and all;
2. ``defense-none`` and ``defense-dpsgd`` at noise multiplier 2 (same targets and methods):
   does DP-SGD lower what the curious server learns?

Prints one markdown table per run: the mean over clients of the per-client LOSS AUC on the
final global model (outsider) and on the client's own model as the server received it in
its last round (curious server), and each position's pooled AUC and TPR@1%FPR.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import fedaudit

SETS = ["attack.targets=['global','clients','rounds']", "attack.methods=['loss','fedmia']"]

RUNS = [
    ("membership-signal", "rounds = last", SETS),
    ("membership-signal", "rounds = all", [*SETS, "attack.rounds='all'"]),
    ("defense-none", "rounds = last", SETS),
    ("defense-dpsgd", "noise 2, rounds = last", [*SETS, "defense.noise_multiplier=2.0"]),
]


def _f(v) -> str:
    return "-" if v is None else f"{v:.3f}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="runs/experiments")
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    print("| scenario | setting | mean client LOSS AUC, global model | mean client LOSS AUC, "
          "server view | server pooled LOSS AUC / TPR@1% | server pooled FedMIA AUC / TPR@1% "
          "| insider AUC (round): last round / best-round upper bound | test acc | epsilon "
          "| run s |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for name, setting, sets in RUNS[:1] if args.quick else RUNS:
        t0 = time.perf_counter()
        r = fedaudit.run(name, out=args.out, overrides=sets, progress=False).results
        wall = time.perf_counter() - t0
        glob = np.mean([c["attacks"]["loss"]["auc"] for c in r["clients"]])
        sv = r["server_view"]
        last = [c["rounds"][max(c["rounds"], key=int)]["loss"]["auc"] for c in sv["clients"]
                if c["rounds"]]
        pooled = sv["pooled"]
        ins = next((p for p in r.get("attack_positions", []) if p["position"] == "insider"), {})
        bound = ins.get("best_round_upper_bound") or {}
        fm = pooled.get("fedmia", {})
        eps = (r.get("defense") or {}).get("epsilon")
        print(f"| {name} | {setting} | {glob:.3f} | {np.mean(last):.3f} | "
              f"{_f(pooled['loss']['auc'])} / {_f(pooled['loss']['tpr_at_1pct_fpr'])} | "
              f"{_f(fm.get('auc'))} / {_f(fm.get('tpr_at_1pct_fpr'))} | "
              f"{_f(ins.get('auc'))} ({ins.get('round')}) / "
              f"{_f(bound.get('auc'))} ({bound.get('round')}) | "
              f"{r['model']['test_accuracy']:.3f} | "
              f"{eps if eps is None or isinstance(eps, str) else f'{eps:.2f}'} | {wall:.0f} |",
              flush=True)


if __name__ == "__main__":
    main()

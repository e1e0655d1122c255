"""One-run DP audit (Steinke, Nasr & Jagielski 2023) on the bundled defense scenarios; the
table of docs/validation.md section "DP auditing".

    python experiments/dp_audit.py [--out runs/experiments] [--canaries 200]

Runs ``defense-none`` and ``defense-dpsgd`` at noise multipliers 1 (the bundled value) and
0 (clipping only), each with ``audit.dp.canaries`` mislabeled holdout canaries (k+ = k- =
canaries // 4, beta = 0.05), quantization off and the LOSS attack only (the audit does not
need them), and prints one markdown row per run: guesses, correct guesses, the empirical
epsilon lower bound, the accountant's epsilon, whether the bound exceeds it.
"""

from __future__ import annotations

import argparse
import time

import fedaudit

COMMON = ["audit.quantization.enabled=false", "attack.methods=['loss']"]

RUNS = [
    ("defense-none", "no defense", []),
    ("defense-dpsgd", "DP-SGD, noise 1", []),
    ("defense-dpsgd", "DP-SGD, noise 0 (clipping only)", ["defense.noise_multiplier=0.0"]),
]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="runs/experiments")
    ap.add_argument("--canaries", type=int, default=200)
    args = ap.parse_args()
    print("| scenario | setting | canaries (included) | guesses | correct | epsilon lower "
          "bound (95%) | accountant epsilon | exceeds | test acc | LOSS AUC | seconds |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for name, label, sets in RUNS:
        t0 = time.perf_counter()
        run = fedaudit.run(name, out=args.out, progress=False,
                           overrides=[*COMMON, *sets, f"audit.dp.canaries={args.canaries}"])
        a, r = run.results["dp_audit"], run.results
        eps = a["claimed_epsilon"]
        eps_text = "-" if eps is None else eps if isinstance(eps, str) else f"{eps:.2f}"
        print(f"| {name} | {label} | {a['canaries']} ({a['included']}) | {a['guesses']} | "
              f"{a['correct']} | {a['epsilon_lower_bound']:.2f} | {eps_text} | "
              f"{'YES' if a['exceeds_claimed'] else 'no'} | "
              f"{r['model']['test_accuracy']:.3f} | {r['attacks']['loss']['auc']:.3f} | "
              f"{time.perf_counter() - t0:.0f} |", flush=True)


if __name__ == "__main__":
    main()

"""One-run DP audit (Steinke, Nasr & Jagielski 2023) on the bundled defense scenarios; the
table of docs/validation.md section "DP auditing".

    python experiments/dp_audit.py [--out runs/experiments] [--canaries 200]
                                   [--client-canaries 100] [--only sample|client]

Sample level: ``defense-none`` and ``defense-dpsgd`` at noise multipliers 1 (the bundled
value) and 0 (clipping only), each with ``--canaries`` mislabeled holdout canaries.
Client level: ``defense-dpserver`` and ``defense-dpclient`` (noise 1, as bundled) and
``defense-clip``, each with ``--client-canaries`` canary clients.  k+ = k- = canaries // 4,
beta = 0.05, quantization off and the LOSS attack only (the audit does not need them).
Prints one markdown row per run: guesses, correct guesses, the empirical epsilon lower
bound, the accountant's epsilon, whether the bound exceeds it.
"""

from __future__ import annotations

import argparse
import time

import fedaudit

COMMON = ["audit.quantization.enabled=false", "attack.methods=['loss']"]

RUNS = [
    ("sample", "defense-none", "no defense", []),
    ("sample", "defense-dpsgd", "DP-SGD, noise 1", []),
    ("sample", "defense-dpsgd", "DP-SGD, noise 0 (clipping only)",
     ["defense.noise_multiplier=0.0"]),
    ("client", "defense-dpserver", "dp-server, noise 1", []),
    ("client", "defense-dpclient", "dp-client, noise 1", []),
    ("client", "defense-clip", "clip only (no noise)", []),
]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="runs/experiments")
    ap.add_argument("--canaries", type=int, default=200)
    ap.add_argument("--client-canaries", type=int, default=100)
    ap.add_argument("--only", choices=("sample", "client"))
    args = ap.parse_args()
    print("| scenario | setting | level | canaries (included) | guesses | correct | epsilon lower "
          "bound (95%) | accountant epsilon | exceeds | test acc | LOSS AUC | seconds |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for level, name, label, sets in RUNS:
        if args.only and level != args.only:
            continue
        m = args.canaries if level == "sample" else args.client_canaries
        t0 = time.perf_counter()
        run = fedaudit.run(name, out=args.out, progress=False,
                           overrides=[*COMMON, *sets, f"audit.dp.canaries={m}"])
        a, r = run.results["dp_audit"], run.results
        eps = a["claimed_epsilon"]
        eps_text = "-" if eps is None else eps if isinstance(eps, str) else f"{eps:.2f}"
        print(f"| {name} | {label} | {level} | {a['canaries']} ({a['included']}) | "
              f"{a['guesses']} | {a['correct']} | {a['epsilon_lower_bound']:.2f} | {eps_text} | "
              f"{'YES' if a['exceeds_claimed'] else 'no'} | "
              f"{r['model']['test_accuracy']:.3f} | {r['attacks']['loss']['auc']:.3f} | "
              f"{time.perf_counter() - t0:.0f} |", flush=True)


if __name__ == "__main__":
    main()

"""LiRA and RMIA (reference models) against the score-only attacks, on the bundled
scenarios; the table of docs/validation.md section 1.

    python experiments/reference_attacks.py [--out runs/experiments] [--quick]

Runs (each a full ``fedaudit.run`` with the scenario's seed; reference models are cached
under ``$FEDAUDIT_CACHE``, so a rerun trains only what changed):

1. ``membership-signal`` with attack.methods = loss, lira, rmia: offline with 4 references
   (the default), online with 4, offline with 16;
2. ``defense-none`` and ``defense-dpsgd`` at noise multiplier 1 and 2 (same methods,
   offline, 4 references): does RMIA's TPR at 1% FPR fall as the noise grows?
3. ``quickstart`` with its attacks plus lira and rmia: wall time.

Prints one markdown table (pooled over clients, global model).  ``--quick`` runs only
the first row of each part (a smoke test of the script).
"""

from __future__ import annotations

import argparse
import time

import fedaudit

METHODS = "attack.methods=['loss','lira','rmia']"

RUNS = [
    ("membership-signal", "offline, 4 refs", [METHODS]),
    ("membership-signal", "online, 4 refs", [METHODS, "attack.reference.mode=online"]),
    ("membership-signal", "offline, 16 refs", [METHODS, "attack.reference.models=16"]),
    ("defense-none", "offline, 4 refs", [METHODS]),
    ("defense-dpsgd", "noise 1, offline, 4 refs", [METHODS, "defense.noise_multiplier=1.0"]),
    ("defense-dpsgd", "noise 2, offline, 4 refs", [METHODS, "defense.noise_multiplier=2.0"]),
    ("quickstart", "default attacks + lira, rmia, 4 refs",
     ["attack.methods=['resmia','loss','confidence','entropy','mentropy','lira','rmia']"]),
]


def _cell(value) -> str:
    return "-" if value is None else f"{value:.3f}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="runs/experiments")
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    runs = RUNS[:1] if args.quick else RUNS
    print("| scenario | setting | attack | AUC | TPR@1%FPR | TPR@0.1%FPR | non-members | "
          "test acc | epsilon | references trained / cached | ref. train s | run s |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for name, setting, sets in runs:
        t0 = time.perf_counter()
        run = fedaudit.run(name, out=args.out, overrides=sets, progress=False)
        wall = time.perf_counter() - t0
        r = run.results
        refs = r.get("references", {})
        eps = (r.get("defense") or {}).get("epsilon")
        for method in ("loss", "lira", "rmia"):
            a = r["attacks"][method]
            print(f"| {name} | {setting} | {method} | {_cell(a['auc'])} | "
                  f"{_cell(a['tpr_at_1pct_fpr'])} | {_cell(a['tpr_at_0p1pct_fpr'])} | "
                  f"{round(1 / a['min_fpr_resolution'])} | "
                  f"{_cell(r['model']['test_accuracy'])} | "
                  f"{eps if isinstance(eps, str) or eps is None else f'{eps:.2f}'} | "
                  f"{refs.get('trained')} / {refs.get('from_cache')} | "
                  f"{refs.get('train_seconds', 0):.1f} | {wall:.1f} |", flush=True)


if __name__ == "__main__":
    main()

"""Does the challenge's leaderboard rank the LOSS attack above noise?  (docs/validation.md
section 11)

For each seed: make the challenge (``fedaudit lab challenge`` with ``--allow-weak``, so a
weak seed is measured rather than refused; an existing ``OUT/challenge-<seed>`` is reused),
grade the LOSS attack a student would submit (``log p_y`` of the candidates through the
student folder's oracle), and grade 500 random submissions (uniform scores, seeded) on the
same key.  Prints, per seed, LOSS's leaderboard line, the random submissions' 95th
percentiles of TPR@1%FPR and AUC (simulated, beside the exact chance level of
:mod:`fedaudit.labs.leaderboard`), and the share of random submissions that tie or beat
LOSS at each metric.

    python experiments/challenge_chance.py --data ../shared/data/mnist.npz --seeds 0 1234
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np


def measure(root: Path, n_random: int = 500) -> dict:
    from attacks.membership.baselines import loss_scores
    from fedaudit.labs.challenge import load_challenge, read_key, write_submission
    from fedaudit.labs.challenge import grade
    from fedaudit.metrics import membership_metrics

    ch = load_challenge(root / "student")
    path = write_submission(root / "loss-baseline.csv", ch.id,
                            loss_scores(ch.oracle.predict_proba(ch.x), ch.y))
    loss = grade(path, root / "key.csv")
    ids, member = read_key(root / "key.csv")
    rng = np.random.default_rng([int(root.name.split("-")[-1]), 500])
    rand = [membership_metrics(rng.random(len(ids)), member) for _ in range(n_random)]
    tpr = np.array([m["tpr_at_1pct_fpr"] for m in rand])
    auc = np.array([m["auc"] for m in rand])
    return {"loss": loss, "tpr_p95": float(np.percentile(tpr, 95)),
            "auc_p95": float(np.percentile(auc, 95)),
            "tie_or_beat_tpr": float(np.mean(tpr >= loss.tpr_at_1pct_fpr)),
            "tie_or_beat_auc": float(np.mean(auc >= loss.auc))}


def main() -> None:
    from fedaudit.labs.challenge import make_challenge

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default="mnist", help="as fedaudit lab challenge --data")
    ap.add_argument("--data-dir", default="data")
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1234])
    ap.add_argument("--out", default="challenge-chance", help="folder of the challenges")
    ap.add_argument("--random", type=int, default=500, help="random submissions per seed")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="a scenario override on top of the challenge's (a variant)")
    args = ap.parse_args()
    out = Path(args.out)
    print("| seed | members / non-members | LOSS TPR@1%FPR (95% CI) | exact chance p95 | "
          f"p95 of {args.random} random | random >= LOSS | LOSS AUC | random AUC p95 | "
          "random >= LOSS (AUC) | train s |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for seed in args.seeds:
        root, t = out / f"challenge-{seed}", time.time()
        if not root.exists():
            make_challenge(seed, out, data=args.data, data_dir=args.data_dir,
                           allow_weak=True, overrides=tuple(args.set))
        took = time.time() - t
        m = measure(root, args.random)
        g = m["loss"]
        print(f"| {seed} | {g.n_members} / {g.n_nonmembers} | {g.tpr_at_1pct_fpr:.3f} "
              f"({g.tpr_ci_low:.3f}-{g.tpr_ci_high:.3f}) | {g.chance.tpr_p95:.3f} | "
              f"{m['tpr_p95']:.3f} | {m['tie_or_beat_tpr']:.0%} | {g.auc:.3f} | "
              f"{m['auc_p95']:.3f} | {m['tie_or_beat_auc']:.0%} | {took:.0f} |", flush=True)


if __name__ == "__main__":
    main()

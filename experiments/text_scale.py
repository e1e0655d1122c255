"""The full per-speaker split of a play at scale (issue 32; docs/scaling.md section 1): every
role with at least ``data.min_role_sequences`` training sequences is a client, a few percent
sampled per round, the whole audit on (GNQ, secrets, LOSS and zlib on every client).

    python experiments/text_scale.py [--data PATH] [--min-role 1] [--fraction 0.05] [--rounds 5]

Runs ``scenarios/shakespeare-secrets.toml`` in a fresh interpreter, watched from outside
(``bench.sim.sim_run``: the whole process tree's peak PSS / RSS, the driver's peak RSS,
per-round times from run.log) and prints one markdown row.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.sim import sim_run  # noqa: E402
from fedaudit.config import load_scenario  # noqa: E402
from fedaudit.data import build_federated_data  # noqa: E402

SCENARIO = ROOT / "scenarios" / "shakespeare-secrets.toml"
TEXT = ROOT / ".." / "shared" / "data" / "tinyshakespeare.txt"


def roles_available(data: str, min_role: int) -> int:
    """How many roles have at least ``min_role`` training sequences (the most clients the
    speaker partitioner can make)."""
    from fedaudit.data.text import split_speeches

    s = load_scenario(SCENARIO, [f"data.path={data}", f"data.min_role_sequences={min_role}",
                                 "federation.num_clients=1", "canaries.count=0"])
    d = build_federated_data(s)
    train, _, _ = split_speeches(d.text, s.data.holdout_fraction, s.data.test_fraction, s.seed)
    import numpy as np

    spk = d.text.speaker[train]
    return int((np.bincount(spk[spk >= 0]) >= min_role).sum())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default=str(TEXT.resolve()))
    ap.add_argument("--min-role", type=int, default=1)
    ap.add_argument("--fraction", type=float, default=0.05)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    data = str(Path(args.data).resolve())
    n = roles_available(data, args.min_role)
    overrides = [f"data.path={data}", f"data.min_role_sequences={args.min_role}",
                 f"federation.num_clients={n}", f"federation.fraction_train={args.fraction}",
                 f"federation.rounds={args.rounds}", "federation.min_clients=2"]
    r = sim_run(overrides, scenario=str(SCENARIO))
    print("| clients | sampled per round | rounds | whole process, s | round 1, s | later "
          "rounds (median), s | driver peak RSS, MiB | all processes peak PSS, MiB | all "
          "processes peak RSS, MiB | processes | test acc |\n|" + "---|" * 11)
    print(f"| {n} | {max(2, round(args.fraction * n))} | {args.rounds} | "
          f"{r['process_seconds']:.0f} | {r.get('round1_seconds', float('nan')):.1f} | "
          f"{r.get('round_seconds', float('nan')):.1f} | {r['driver_peak_rss_MiB']:,.0f} | "
          f"{r['tree_peak_pss_MiB']:,.0f} | {r['tree_peak_rss_MiB']:,.0f} | "
          f"{r['tree_peak_processes']} | {r['test_accuracy']:.3f} |")


if __name__ == "__main__":
    main()

"""Which attack survives which server: the threat-model matrix over five defenses
(docs/validation.md section 16), one command.

Per defense, two runs of the digits federation (8 clients of one batch of 8, the MLP, 3
rounds): the main run (membership inference on the released model, every round's model and,
with plain aggregation, each client's model; label leakage and Inverting Gradients on each
client's round-1 update with plain aggregation) and the malicious server's run (the same
federation for one round behind its imprint block of 256 bins).  The matrix of each
defense merges the two (:mod:`fedaudit.rundir.threat_matrix`); the columns are printed side
by side and written as JSON.  Defenses: none; DP-SGD (z = 1, C = 1); DP-FedAvg with
client-side clipping (``dp-client``, z = 1, C = 0.5); SecAgg+; SecAgg+ with DP-FedAvg.

    python experiments/threat_matrix.py --out matrix.json
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from dataclasses import asdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

BASE = ["federation.num_clients=8", "data.client_samples=8", "train.batch_size=8",
        "train.lr=0.1"]
MAIN = ["federation.rounds=3", "attack.enabled=true", "reconstruction.iterations=200"]
MALICIOUS = ["federation.rounds=1", "attack.enabled=false", "reconstruction.enabled=false",
             "label_leakage.enabled=false", "imprint.enabled=true", "imprint.bins=256"]
DP_CLIENT = ["defense.kind=dp-client", "defense.noise_multiplier=1.0", "defense.clip_norm=0.5"]
SECAGG = ["federation.aggregation=secagg+"]
#: (column, overrides, whether the server sees each update)
DEFENSES = [
    ("none", [], True),
    ("DP-SGD (z=1, C=1)", ["defense.kind=dp-sgd", "defense.noise_multiplier=1.0",
                           "defense.clip_norm=1.0"], True),
    ("DP-FedAvg (client clipping C=0.5, z=1)", DP_CLIENT, True),
    ("SecAgg+", SECAGG, False),
    ("SecAgg+ with DP-FedAvg", [*SECAGG, *DP_CLIENT], False),
]


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=None, help="JSON file for the matrices")
    args = ap.parse_args(argv)

    import fedaudit
    from rich.console import Console

    from fedaudit.rundir.threat_matrix import threat_matrix
    from fedaudit.compare.matrix import matrix_table

    cols, seconds = [], {}
    for name, extra, sees in DEFENSES:
        targets = "['global','rounds','clients']" if sees else "['global','rounds']"
        main_set = [*BASE, *MAIN, *extra, f"attack.targets={targets}",
                    f"reconstruction.enabled={'true' if sees else 'false'}",
                    f"label_leakage.enabled={'true' if sees else 'false'}"]
        t0 = time.perf_counter()
        with tempfile.TemporaryDirectory() as tmp:
            res = fedaudit.run("reconstruction-digits", out=tmp, progress=False,
                               cache=Path(tmp) / "c", overrides=main_set).results
            mal = fedaudit.run("reconstruction-digits", out=tmp, progress=False,
                               cache=Path(tmp) / "c",
                               overrides=[*BASE, *MALICIOUS, *extra]).results
        seconds[name] = time.perf_counter() - t0
        merged = {**res, "malicious_server": mal.get("malicious_server")}
        cols.append((name, threat_matrix(merged)))
        print(json.dumps({"defense": name, "seconds": seconds[name],
                          "test_accuracy": res["model"]["test_accuracy"],
                          "epsilon": (res.get("defense") or {}).get("epsilon")}), flush=True)
    Console(width=200).print(matrix_table(cols, "threat-model matrix: digits, 8 clients x 8, "
                                                "3 rounds (malicious server: round 1)"))
    if args.out:
        Path(args.out).write_text(json.dumps(
            [{"defense": n, "seconds": seconds[n],
              "matrix": {p: {f: asdict(c) for f, c in row.items()} for p, row in m.items()}}
             for n, m in cols], indent=1))


if __name__ == "__main__":
    main()

"""SecAgg+ against plain aggregation (never part of the test suite).
Run: ``python bench/secagg.py [--clients 5 10] [--rounds 3]``.

For each client count N, two whole runs of the ``secagg`` scenario (digits, the CNN,
attacks and PTQ off) with the same seed, ``federation.aggregation`` = ``secagg+`` and
``plain``: seconds per round (results.json ``timing.train_seconds`` over the rounds; the
first round included, so Ray's start-up is in both), their ratio, the largest difference of
round 1's global model (both start from the same model and the clients train identically
in round 1, so it is SecAgg+'s quantisation error) against the bound
N * delta * max_weight / sum_i n_i (delta = 2 clipping_range / quantization_range), and
the final test accuracies.  Runs alternate; one run each per setting (loose on a shared
machine: the ratio is the figure).
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


def _run(overrides: list[str], out: Path):
    import fedaudit

    return fedaudit.run("secagg", out=out, progress=False, cache=out / "cache",
                        overrides=overrides)


def compare(clients: int, rounds: int) -> dict:
    from fedaudit.config import from_toml
    from fedaudit.data import build_federated_data
    from fedaudit.rundir import load_checkpoint

    shares = clients if clients % 2 else clients - 1
    base = [f"federation.num_clients={clients}", f"federation.rounds={rounds}",
            f"federation.secagg.num_shares={min(shares, 5)}",
            "federation.secagg.reconstruction_threshold=3" if min(shares, 5) > 3 else
            "federation.secagg.reconstruction_threshold=2",
            "attack.enabled=false", "audit.quantization.enabled=false"]
    with tempfile.TemporaryDirectory() as tmp:
        secure = _run(base, Path(tmp) / "s")
        plain = _run([*base, "federation.aggregation=plain"], Path(tmp) / "p")
        a, b = (load_checkpoint(r.dir / "checkpoints" / "round-0001.pt") for r in (secure, plain))
        err = max(float(np.abs(a[k].double().numpy() - b[k].double().numpy()).max())
                  for k in a)
        scenario = from_toml((secure.dir / "scenario.toml").read_text())
        sa = scenario.federation.secagg
        n = [len(ids) for ids in build_federated_data(scenario).clients]
        bound = clients * 2 * sa.clipping_range / sa.quantization_range * sa.max_weight / sum(n)
        per = {k: r.results["timing"]["train_seconds"] / rounds
               for k, r in (("secagg", secure), ("plain", plain))}
        return {"clients": clients, "rounds": rounds, "num_shares": sa.num_shares,
                "secagg_s_per_round": per["secagg"], "plain_s_per_round": per["plain"],
                "ratio": per["secagg"] / per["plain"], "round1_max_abs_error": err,
                "error_bound": bound,
                "test_acc_secagg": secure.results["model"]["test_accuracy"],
                "test_acc_plain": plain.results["model"]["test_accuracy"]}


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--clients", type=int, nargs="*", default=[5, 10])
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args(argv)
    from rich.console import Console
    from rich.table import Table

    rows = [compare(c, args.rounds) for c in args.clients]
    t = Table(title="SecAgg+ against plain FedAvg (secagg scenario, same seed)")
    for col in ("clients", "shares", "secagg s/round", "plain s/round", "ratio",
                "round-1 max |error|", "bound", "test acc secagg", "test acc plain"):
        t.add_column(col, justify="right")
    for r in rows:
        t.add_row(str(r["clients"]), str(r["num_shares"]), f"{r['secagg_s_per_round']:.2f}",
                  f"{r['plain_s_per_round']:.2f}", f"{r['ratio']:.2f}",
                  f"{r['round1_max_abs_error']:.2e}", f"{r['error_bound']:.2e}",
                  f"{r['test_acc_secagg']:.3f}", f"{r['test_acc_plain']:.3f}")
    Console(width=160).print(t)
    print(json.dumps(rows))


if __name__ == "__main__":
    main()

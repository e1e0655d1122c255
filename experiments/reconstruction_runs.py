"""What the server rebuilds from the clients' updates in whole fedaudit runs, one run per
setting: the reconstruction stage's pooled numbers beside the run's test accuracy and the
defense's epsilon (docs/validation.md, "Reconstruction from updates").

Tables (``--table``):

* ``batch`` -- the clients' batch size B (each client holds one batch, one local step: a
  single gradient): ``data.client_samples = train.batch_size = B`` for B in ``--values``.
* ``steps`` -- local steps E on one batch of ``--batch`` samples (``train.local_epochs =
  E``): the multi-step FedAvg update, unrolled by the attack.
* ``defenses`` -- the defenses (none, server clipping, DP-FedAvg server / client side,
  DP-SGD at several noise levels, top-k sparsification at several fractions) on the same
  federation; the rounds after the attacked first one train the model whose test accuracy
  the defense costs.  With ``--utility-set`` overrides each defense also trains a second
  federation (the same overrides, then those, with the attacks off): the test accuracy and
  epsilon are that run's -- a privacy-utility frontier whose utility comes from a model
  trained long enough to mean something, while the leakage is measured where the attack
  is strongest (each client one batch, round 1).

* ``gnq`` -- does a sample's in-round GNQ (client side, ``audit.gnq.client``) predict how
  well it is rebuilt?  One run per ``--values`` batch size; Spearman's rho between each
  reconstructed sample's GNQ (its round, epoch 1) and its SSIM / PSNR against its matched
  true sample, pooled and per client (median), and the mean SSIM of each client's
  top-GNQ sample against its other samples.

Every run uses ``--scenario`` with ``--set`` overrides first and the table's own after;
each prints one row and the table is printed (rich) and written as JSON (``--out``).

    python experiments/reconstruction_runs.py --table batch --values 1 4 8 \\
        --scenario reconstruction \\
        --set data.dataset=npz --set data.path=../shared/data/cifar10-jpeg-10k.npz
    python experiments/reconstruction_runs.py --table defenses --scenario reconstruction-digits \\
        --set federation.num_clients=16 --set data.client_samples=8 --set train.batch_size=8 \\
        --set train.lr=0.1 --set reconstruction.iterations=300 \\
        --utility-set federation.num_clients=10 --utility-set data.client_samples=100 \\
        --utility-set federation.rounds=30
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

#: the defenses table: (row name, overrides)
DEFENSES = [
    ("none", ["defense.kind=none"]),
    ("clip (server, C=0.01)", ["defense.kind=clip", "defense.clip_norm=0.01"]),
    ("dp-server (z=1, C=0.01)", ["defense.kind=dp-server", "defense.noise_multiplier=1.0",
                                 "defense.clip_norm=0.01"]),
    ("dp-client (z=1, C=0.01)", ["defense.kind=dp-client", "defense.noise_multiplier=1.0",
                                 "defense.clip_norm=0.01"]),
    ("dp-sgd (z=0.1, C=1)", ["defense.kind=dp-sgd", "defense.noise_multiplier=0.1",
                             "defense.clip_norm=1.0"]),
    ("dp-sgd (z=0.5, C=1)", ["defense.kind=dp-sgd", "defense.noise_multiplier=0.5",
                             "defense.clip_norm=1.0"]),
    ("dp-sgd (z=1, C=1)", ["defense.kind=dp-sgd", "defense.noise_multiplier=1.0",
                           "defense.clip_norm=1.0"]),
    ("sparsify (keep 0.5)", ["defense.kind=sparsify", "defense.keep=0.5"]),
    ("sparsify (keep 0.2)", ["defense.kind=sparsify", "defense.keep=0.2"]),
    ("sparsify (keep 0.05)", ["defense.kind=sparsify", "defense.keep=0.05"]),
    ("sparsify (keep 0.01)", ["defense.kind=sparsify", "defense.keep=0.01"]),
]


def settings(args) -> list[tuple[str, list[str]]]:
    if args.table == "batch":
        return [(f"B={b}", [f"data.client_samples={b}", f"train.batch_size={b}"])
                for b in args.values]
    if args.table == "gnq":
        return [(f"B={b}", [f"data.client_samples={b}", f"train.batch_size={b}",
                            "audit.gnq.client=true"]) for b in args.values]
    if args.table == "steps":
        return [(f"E={e} (B={args.batch})", [f"data.client_samples={args.batch}",
                                             f"train.batch_size={args.batch}",
                                             f"train.local_epochs={e}"])
                for e in args.values]
    return DEFENSES


def row(name: str, results: dict, wall: float) -> dict:
    rec = results.get("reconstruction", {})
    method = rec.get("methods", [None])[0]
    pooled = rec.get("pooled", {}).get(method, {})
    labels = results.get("label_leakage", {})
    first = labels.get("methods", [None])[0]
    eps = results.get("defense", {}).get("epsilon")
    return {"setting": name, "method": method, "samples": pooled.get("samples"),
            "psnr": pooled.get("psnr"), "exact": pooled.get("exact"),
            "ssim": pooled.get("ssim"), "prior_ssim": pooled.get("prior_ssim"),
            "ssim_gain": pooled.get("ssim_gain"),
            "identifiability": pooled.get("identifiability"),
            "label_accuracy": pooled.get("label_accuracy"),
            "label_method": first,
            "label_guess_accuracy": labels.get("pooled", {}).get(first, {}).get(
                "label_accuracy"),
            "test_accuracy": results["model"]["test_accuracy"], "epsilon": eps,
            "attack_seconds": rec.get("seconds"), "run_seconds": wall,
            "notes": rec.get("notes", [])}


def utility(args, extra: list[str]) -> dict:
    """The setting's cost: test accuracy and epsilon of the utility federation
    (``--utility-set``), trained with the setting's overrides and the attacks off."""
    import fedaudit

    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        run = fedaudit.run(args.scenario, out=tmp, progress=False, cache=Path(tmp) / "c",
                           overrides=[*args.overrides, *extra, *args.utility_overrides,
                                      "reconstruction.enabled=false",
                                      "label_leakage.enabled=false"])
        return {"test_accuracy": run.results["model"]["test_accuracy"],
                "epsilon": run.results.get("defense", {}).get("epsilon"),
                "utility_run_seconds": time.perf_counter() - t0}


def gnq_link(run_dir: Path) -> dict:
    """Spearman's rho between a reconstructed sample's in-round GNQ and its quality."""
    import numpy as np
    from scipy.stats import spearmanr

    from fedaudit.probes.client_gnq import read_client_gnq

    rows = np.load(run_dir / "reconstructions.npz")
    gnq = read_client_gnq(run_dir, sorted(set(rows["round"].tolist())))
    first = gnq["epoch"] <= 1
    score = {(int(r), int(i)): float(v) for r, i, v in
             zip(gnq["round"][first], gnq["sample_id"][first], gnq["score"][first])}
    g = np.array([score[(int(r), int(i))] for r, i in zip(rows["round"], rows["true_id"])])
    ssim, psnr = rows["ssim"].astype(float), rows["psnr"].astype(float)
    finite = np.isfinite(psnr)
    per_client, top, rest = [], [], []
    for c in np.unique(rows["client"]):
        m = rows["client"] == c
        if m.sum() > 2 and np.ptp(g[m]) > 0:
            per_client.append(spearmanr(g[m], ssim[m]).statistic)
        k = np.flatnonzero(m)[np.argmax(g[m])]
        top.append(ssim[k])
        rest.extend(ssim[m & (np.arange(len(g)) != k)])
    return {"samples": int(len(g)),
            "rho_ssim": float(spearmanr(g, ssim).statistic),
            "rho_psnr": float(spearmanr(g[finite], psnr[finite]).statistic),
            "rho_ssim_client_median": float(np.median(per_client)) if per_client else None,
            "clients": len(per_client),
            "top_gnq_ssim": float(np.mean(top)), "other_ssim": float(np.mean(rest))
            if rest else None}


def print_rows(rows: list[dict], title: str) -> None:
    from rich.console import Console
    from rich.table import Table

    t = Table(title=title)
    for col in ("setting", "PSNR dB", "SSIM", "prior SSIM", "ident.", "label acc (rec)",
                "label acc (guess)", "test acc", "epsilon", "attack s"):
        t.add_column(col, justify="right")

    def f(v, fmt=".3f"):
        return "-" if v is None else (v if isinstance(v, str) else format(v, fmt))

    for r in rows:
        t.add_row(r["setting"], f(r["psnr"], ".1f"), f(r["ssim"]), f(r["prior_ssim"]),
                  f(r["identifiability"], ".2f"), f(r["label_accuracy"], ".2f"),
                  f(r["label_guess_accuracy"], ".2f"), f(r["test_accuracy"]),
                  f(r["epsilon"], ".2f"), f(r["attack_seconds"], ".0f"))
    Console(width=160).print(t)
    if any("gnq" in r for r in rows):
        g = Table(title="in-round GNQ against reconstruction quality (Spearman)")
        for col in ("setting", "samples", "rho(GNQ, SSIM)", "rho(GNQ, PSNR)",
                    "median rho per client", "SSIM top-GNQ", "SSIM others"):
            g.add_column(col, justify="right")
        for r in rows:
            q = r["gnq"]
            g.add_row(r["setting"], str(q["samples"]), f(q["rho_ssim"]), f(q["rho_psnr"]),
                      f(q["rho_ssim_client_median"]), f(q["top_gnq_ssim"]),
                      f(q["other_ssim"]))
        Console(width=160).print(g)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--table", choices=("batch", "steps", "defenses", "gnq"), required=True)
    ap.add_argument("--values", type=int, nargs="*", default=[1, 4, 8])
    ap.add_argument("--batch", type=int, default=4, help="the steps table's batch size")
    ap.add_argument("--scenario", default="reconstruction")
    ap.add_argument("--set", dest="overrides", action="append", default=[])
    ap.add_argument("--utility-set", dest="utility_overrides", action="append", default=[],
                    help="overrides of a second run per setting, attacks off, whose test "
                         "accuracy and epsilon the row reports (the defenses' frontier)")
    ap.add_argument("--out", default=None, help="JSON file for the rows")
    args = ap.parse_args(argv)

    import fedaudit

    rows = []
    for name, extra in settings(args):
        with tempfile.TemporaryDirectory() as tmp:
            t0 = time.perf_counter()
            run = fedaudit.run(args.scenario, out=tmp, progress=False, cache=Path(tmp) / "c",
                               overrides=[*args.overrides, *extra])
            rows.append(row(name, run.results, time.perf_counter() - t0))
            if args.table == "gnq":
                rows[-1]["gnq"] = gnq_link(run.dir)
        if args.utility_overrides:
            r = rows[-1]
            rows[-1] = {**r, "attack_run_test_accuracy": r["test_accuracy"],
                        "attack_run_epsilon": r["epsilon"], **utility(args, extra)}
        print(json.dumps(rows[-1]), flush=True)
    title = (f"{args.scenario}: {args.table} "
             f"({' '.join(args.overrides) or 'scenario defaults'})")
    if args.utility_overrides:
        title += f"; test acc and epsilon from {' '.join(args.utility_overrides)}"
    print_rows(rows, title)
    if args.out:
        Path(args.out).write_text(json.dumps({"title": title, "rows": rows}, indent=1))


if __name__ == "__main__":
    main()

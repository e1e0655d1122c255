"""The one-run DP audits of issue 31 (docs/validation.md section 10) on the audit
scenarios: ``dp-audit`` (MNIST, DP-SGD at a claimed epsilon of about 6.3) white box with
1,000 gradient canaries and black box with 500 mislabeled sample canaries, and
``dp-audit-client`` (the same data, central DP at a claimed client-level epsilon of about
6.2) with 1,000 canary clients -- each honest, without noise, and broken.

    python experiments/dp_audit_gradient.py [--only RUN] [--data PATH] [--out DIR]

Runs (``--only`` picks one; default: all, in this order):

- ``honest`` / ``noise0`` / ``broken``: ``dp-audit``, gradient canaries;
- ``sample-honest`` / ``sample-noise0``: ``dp-audit`` with ``audit.dp.level = "sample"``
  and 500 canaries (the most its 1,000 holdout samples allow);
- ``client-honest`` / ``client-clip`` / ``client-broken``: ``dp-audit-client``.

The broken runs register plug-in defenses that tell the accountant one noise and apply a
quarter of it -- the bug the audit must catch: ``dp-sgd-quarter-noise`` (told 11, epsilon
about 1.97; the clients' DP-SGD applies 2.75) and ``dp-server-quarter-noise`` (told 10,
epsilon about 1.3; the server's wrapper applies 2.5).  Prints one markdown row per run:
both bounds, the claim, the warning and the seconds.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import fedaudit
from fedaudit.defenses import register_defense
from fedaudit.defenses.central import ServerSideDP
from fedaudit.defenses.dpsgd import DPSGD

ROOT = Path(__file__).resolve().parents[1]
MNIST = ROOT / ".." / "shared" / "data" / "mnist.npz"


@register_defense
class QuarterNoiseDPSGD(DPSGD):
    """DP-SGD whose clients apply a quarter of the noise the accountant is told."""

    kind = "dp-sgd-quarter-noise"

    def local_dp(self, cfg):
        return {**cfg.options, "noise_multiplier": float(cfg.options["noise_multiplier"]) / 4}


@register_defense
class QuarterNoiseServerDP(ServerSideDP):
    """Server-side central DP whose wrapper applies a quarter of the noise the accountant
    (:meth:`summary`) is told."""

    kind = "dp-server-quarter-noise"

    def noise_multiplier(self, cfg):  # what Flower's wrapper is built with
        return float(cfg.options["noise_multiplier"]) / 4

    def summary(self, cfg, rounds, *, num_clients, num_sampled):
        told = ServerSideDP()
        return told.summary(cfg, rounds, num_clients=num_clients, num_sampled=num_sampled)


#: run name -> (scenario, overrides)
RUNS: dict[str, tuple[str, list[str]]] = {
    "honest": ("dp-audit", []),
    "noise0": ("dp-audit", ["defense.noise_multiplier=0"]),
    "broken": ("dp-audit", ["defense.kind=dp-sgd-quarter-noise", "defense.noise_multiplier=11"]),
    "sample-honest": ("dp-audit", ["audit.dp.level=sample", "audit.dp.canaries=500"]),
    "sample-noise0": ("dp-audit", ["audit.dp.level=sample", "audit.dp.canaries=500",
                                   "defense.noise_multiplier=0"]),
    "client-honest": ("dp-audit-client", []),
    "client-clip": ("dp-audit-client", ["defense.kind=clip"]),
    "client-broken": ("dp-audit-client", ["defense.kind=dp-server-quarter-noise",
                                          "defense.noise_multiplier=10"]),
}

HEADER = ("| run | level | claimed eps (mu) | Steinke correct / guesses | Steinke eps | "
          "searched correct / guesses | mu >= | GDP eps >= | global model: Steinke / GDP eps | "
          "warning | test acc | seconds |\n|" + "---|" * 12)


def _fmt(x) -> str:
    return x if isinstance(x, str) else "-" if x is None else f"{x:.2f}"


def row(name: str, res: dict, seconds: float) -> str:
    a = res["dp_audit"]
    g = a.get("global")
    glob = "-" if g is None else f"{g['epsilon_lower_bound']:.2f} / {g['epsilon_lower_bound_gdp']:.2f}"
    acc = res.get("model", {}).get("test_accuracy")
    return (f"| {name} | {a['level']} | {_fmt(a['claimed_epsilon'])} ({_fmt(a['claimed_mu'])}) | "
            f"{a['correct']}/{a['guesses']} | {a['epsilon_lower_bound']:.2f} | "
            f"{a['gdp']['correct']}/{a['gdp']['guesses']} | {a['mu_lower_bound']:.2f} | "
            f"{a['epsilon_lower_bound_gdp']:.2f} | {glob} | "
            f"{'yes' if a['exceeds_claimed'] else 'no'} | {_fmt(acc)} | {seconds:.0f} |")


def _print(name: str, run_dir: Path, seconds: float) -> None:
    res = json.loads((run_dir / "results.json").read_text())
    print(row(name, res, seconds), flush=True)
    for w in res["warnings"]:
        print("   warning:", w["message"], flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", choices=list(RUNS))
    ap.add_argument("--data", default=str(MNIST))
    ap.add_argument("--out", default="runs/dp-audit-gradient")
    ap.add_argument("--resume", metavar="RUN_DIR", help="continue the --only run left in "
                    "RUN_DIR by an interruption (its scenario.toml as it is)")
    args = ap.parse_args()
    print(HEADER, flush=True)
    if args.resume:
        from fedaudit.config.preflight import load_resume
        from fedaudit.simulation.runner import run as simulate

        t = time.monotonic()
        simulate(load_resume(args.resume), args.out, resume_dir=args.resume)
        _print(f"{args.only} (resumed; seconds of the resumed part)", Path(args.resume),
               time.monotonic() - t)
        return
    for name, (scenario, extra) in RUNS.items():
        if args.only and name != args.only:
            continue
        t = time.monotonic()
        run = fedaudit.run(ROOT / "scenarios" / f"{scenario}.toml", out=args.out,
                           progress=False,
                           overrides=["data.dataset=npz", f"data.path={args.data}", *extra])
        _print(name, Path(run.dir), time.monotonic() - t)


if __name__ == "__main__":
    main()

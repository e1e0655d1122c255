"""The white-box DP audit of issue 31 (docs/validation.md section 10): the ``dp-audit``
scenario (MNIST, DP-SGD, 1,000 gradient canaries) honest, clipping only, and broken.

    python experiments/dp_audit_gradient.py [--only honest|noise0|broken] [--data PATH]

``broken`` registers a plug-in defense, ``dp-sgd-quarter-noise``: the accountant is told
noise 11 (epsilon about 1.97) while the clients' DP-SGD applies a quarter of it (2.75) --
the bug the audit must catch.  Prints one line per run: the bounds, the claim, the warning
and the seconds (2 shared CPU cores: the seconds are under contention).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import fedaudit
from fedaudit.defenses import register_defense
from fedaudit.defenses.dpsgd import DPSGD

ROOT = Path(__file__).resolve().parents[1]
MNIST = ROOT / ".." / "shared" / "data" / "mnist.npz"


@register_defense
class QuarterNoiseDPSGD(DPSGD):
    """DP-SGD whose clients apply a quarter of the noise the accountant is told."""

    kind = "dp-sgd-quarter-noise"

    def local_dp(self, cfg):
        return {**cfg.options, "noise_multiplier": float(cfg.options["noise_multiplier"]) / 4}


RUNS = {
    "honest": [],
    "noise0": ["defense.noise_multiplier=0"],
    "broken": ["defense.kind=dp-sgd-quarter-noise", "defense.noise_multiplier=11"],
}


def row(name: str, res: dict, seconds: float) -> str:
    a, g = res["dp_audit"], res["dp_audit"]["global"]
    fmt = lambda x: x if isinstance(x, str) or x is None else f"{x:.2f}"  # noqa: E731
    return (f"| {name} | {fmt(a['claimed_epsilon'])} ({fmt(a['claimed_mu'])}) | "
            f"{a['correct']}/{a['guesses']} | {a['epsilon_lower_bound']:.2f} | "
            f"{a['gdp']['correct']}/{a['gdp']['guesses']} | {a['mu_lower_bound']:.2f} | "
            f"{a['epsilon_lower_bound_gdp']:.2f} | {a['gdp']['epsilon_lower_bound_steinke']:.2f} | "
            f"{g['epsilon_lower_bound']:.2f} / {g['epsilon_lower_bound_gdp']:.2f} | "
            f"{'yes' if a['exceeds_claimed'] else 'no'} | {res.get('model', {}).get('test_accuracy', '-')} | "
            f"{seconds:.0f} |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", choices=list(RUNS))
    ap.add_argument("--data", default=str(MNIST))
    ap.add_argument("--out", default="runs/dp-audit-gradient")
    ap.add_argument("--resume", metavar="RUN_DIR", help="continue the --only run left in "
                    "RUN_DIR by an interruption (its scenario.toml as it is)")
    args = ap.parse_args()
    if args.resume:
        from fedaudit.config.preflight import load_resume
        from fedaudit.simulation.runner import run as simulate

        t = time.monotonic()
        simulate(load_resume(args.resume), args.out, resume_dir=args.resume)
        res = json.loads((Path(args.resume) / "results.json").read_text())
        print(row(f"{args.only} (resumed; seconds of the resumed part)", res,
                  time.monotonic() - t), flush=True)
        for w in res["warnings"]:
            print("   warning:", w["message"], flush=True)
        return
    for name, extra in RUNS.items():
        if args.only and name != args.only:
            continue
        t = time.monotonic()
        run = fedaudit.run(ROOT / "scenarios" / "dp-audit.toml", out=args.out, progress=False,
                           overrides=["data.dataset=npz", f"data.path={args.data}", *extra])
        res = json.loads((Path(run.dir) / "results.json").read_text())
        print(row(name, res, time.monotonic() - t), flush=True)
        for w in res["warnings"]:
            print("   warning:", w["message"], flush=True)


if __name__ == "__main__":
    main()

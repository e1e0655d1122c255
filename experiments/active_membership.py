"""The malicious server's active membership attack (Nasr et al. 2019, gradient ascent) in
whole fedaudit runs, one run per setting: the ``active-membership`` scenario on the shared
MNIST copy, with the ascent's step size varied and behind SecAgg+: the active AUC on the
aggregate and on each update, each beside the passive one on the same targets, with their
95 % intervals (docs/validation.md section 20).

    python experiments/active_membership.py [--only NAME ...] [--out rows.jsonl]

Each run has its own fresh cache; about 2 minutes per run on 2 CPU cores.
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

DATA = ROOT.parent / "shared" / "data"
MNIST = ["data.dataset=npz", f"data.path={DATA / 'mnist.npz'}"]
#: (name, overrides)
SETTINGS = [
    ("ascent 0.1 (default)", MNIST),
    ("ascent 0.5", [*MNIST, "active_membership.ascent=0.5"]),
    ("ascent 0.02", [*MNIST, "active_membership.ascent=0.02"]),
    ("ascent 0.1, SecAgg+", [*MNIST, "federation.aggregation=secagg+"]),
]


def _auc(entry: dict | None) -> tuple[float | None, list | None]:
    return (None, None) if not entry else (entry.get("auc"), entry.get("auc_ci"))


def run_one(name: str, overrides: list[str]) -> dict:
    import fedaudit

    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        res = fedaudit.run("active-membership", out=tmp, progress=False,
                           cache=Path(tmp) / "c", overrides=overrides).results
        seconds = time.perf_counter() - t0
    a = res["active_membership"]
    each = a.get("each_update") or {}
    gain = (a.get("paired") or {}).get("previous_round") or {}
    return {"setting": name, "active": _auc(a["active"]), "passive": _auc(a["passive"]),
            "verdict": (a.get("verdict_detail") or {}).get("summary"),
            "gain_over_round_before": (gain.get("auc_gain"), gain.get("auc_gain_ci")),
            "gain_verdict": (gain.get("verdict_detail") or {}).get("summary"),
            "each_active": _auc(each.get("active")), "each_passive": _auc(each.get("passive")),
            "loss_rise": a["loss_rise"], "mean_loss_after": a["mean_loss_after"],
            "test_accuracy": res["model"]["test_accuracy"],
            "round_accuracy": [r.get("test_accuracy") for r in res["rounds"]],
            "seconds": seconds, "overrides": overrides}


def _fmt(pair) -> str:
    auc, ci = pair
    if auc is None:
        return "–"
    return f"{auc:.3f}" + (f" [{ci[0]:.3f}, {ci[1]:.3f}]" if ci else "")


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", nargs="*", default=None, help="settings whose name starts so")
    ap.add_argument("--out", default=None, help="append each row as a JSON line here")
    args = ap.parse_args(argv)
    from rich.console import Console
    from rich.table import Table

    rows = []
    for name, overrides in SETTINGS:
        if args.only and not any(name.startswith(o) for o in args.only):
            continue
        row = run_one(name, overrides)
        rows.append(row)
        print(json.dumps(row), flush=True)
        if args.out:
            with open(args.out, "a", encoding="utf-8") as f:
                f.write(json.dumps(row) + "\n")
    t = Table(title="active membership inference (gradient ascent), AUC [95% CI]")
    for col in ("setting", "active, aggregate", "verdict", "passive, aggregate",
                "gain over the round before (paired)", "active, each update",
                "passive, each update", "loss rise", "test acc"):
        t.add_column(col)
    for r in rows:
        g, ci = r["gain_over_round_before"]
        gain = "–" if g is None else f"{g:+.3f} [{ci[0]:+.3f}, {ci[1]:+.3f}]"
        t.add_row(r["setting"], _fmt(r["active"]), str(r["verdict"]), _fmt(r["passive"]),
                  f"{gain}, {r['gain_verdict']}", _fmt(r["each_active"]),
                  _fmt(r["each_passive"]), f"{r['loss_rise']:.3f}", f"{r['test_accuracy']:.3f}")
    Console().print(t)


if __name__ == "__main__":
    main()

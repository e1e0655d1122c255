"""``fedaudit matrix SCENARIO [--defenses a,b] [--out DIR] [--set ...] [--resume]``."""

from __future__ import annotations

import argparse
import sys
from typing import Any

__all__ = ["add_matrix_parser", "cmd_matrix", "plan_of", "print_summary"]


def add_matrix_parser(sub: Any, parser_class: type) -> None:
    m = sub.add_parser("matrix", help="which attack survives which defense: run the scenario "
                       "under each defense and lay the threat-model matrices side by side")
    m.add_argument("scenario", help="bundled scenario name or .toml path")
    m.add_argument("--defenses", metavar="A,B,...",
                   help="the columns: defense presets (none, dp-sgd, dp-fedavg, secagg+, "
                        "secagg+dp-fedavg, sparsify), defense kinds or aggregation paths "
                        "(default: the scenario's matrix.defenses)")
    m.add_argument("--out", metavar="DIR",
                   help="the matrix folder (default: a new runs/matrix-<scenario>-<time>)")
    m.add_argument("--resume", action="store_true",
                   help="continue the matrix in --out DIR: keep its finished runs")
    m.add_argument("--set", dest="overrides", action="append", default=[],
                   metavar="SECTION.KEY=VALUE", help="override a key in every run (repeatable)")
    m.add_argument("--cache", metavar="DIR",
                   help="cache of reference models and update attacks, shared by the runs")
    m.add_argument("--no-report", dest="report", action="store_false",
                   help="no report.html in each run directory (the matrix's is written)")


def print_summary(doc: dict[str, Any]) -> None:
    """The matrices side by side on stderr, each defense's cost in its column head."""
    from rich.console import Console

    from fedaudit.compare.matrix import matrix_table
    from fedaudit.defense_matrix.cells import cells_of

    cols = [(f"{d['title']} (acc {d['test_accuracy']:.3f}"
             + (f", eps {d['epsilon']:.3g}" if isinstance(d.get("epsilon"), (int, float))
                else "") + ")", cells_of(d))
            for d in doc["defenses"] if d.get("cells")]
    if cols:
        Console(stderr=True, width=max(120, 30 * len(cols) + 40)).print(
            matrix_table(cols, f"threat-model matrix: {doc['scenario']}"))


def plan_of(args: argparse.Namespace):
    """The matrix the parsed command line asks for, every run checked before any work
    (:func:`~fedaudit.defense_matrix.plan_matrix`); ScenarioError naming what is wrong."""
    from fedaudit.config import ScenarioError
    from fedaudit.defense_matrix import plan_matrix

    if args.resume and not args.out:  # before the runs are planned and checked
        raise ScenarioError("--resume needs --out DIR, the folder of the matrix to continue")
    defenses = ([d.strip() for d in args.defenses.split(",")] if args.defenses is not None
                else None)
    return plan_matrix(args.scenario, defenses, args.overrides)


def cmd_matrix(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.markup import escape

    from fedaudit.console.interrupt import stop_cleanly_on_sigint
    from fedaudit.console.progress import RichProgress
    from fedaudit.defense_matrix import open_matrix_dir, run_matrix

    plan = plan_of(args)
    root = open_matrix_dir(plan, args.out, resume=args.resume)
    console = Console(stderr=True)
    console.print(f"[bold]matrix[/] {escape(str(root))}: {len(plan.defenses)} defenses, "
                  f"{len(plan.runs)} runs", highlight=False)
    with stop_cleanly_on_sigint(lambda: f"during the matrix; {root} keeps every finished run "
                                f"(rerun with --out {root} --resume)"):
        doc = run_matrix(plan, root, report=args.report,
                         announce=lambda t: console.print(f"[bold]matrix[/] {escape(t)}",
                                                          highlight=False),
                         progress=lambda run: RichProgress(run.scenario.federation.rounds))
    print_summary(doc)
    failed = [f"{d['name']}: {role}" for d in doc["defenses"]
              for role, r in d["runs"].items() if r["status"] == "failed"]
    if failed:
        console.print(f"{len(failed)} runs failed ({', '.join(failed)}); see the error "
                      "column of report.html and their run.log; rerun with --resume")
    print(f"report: {root / 'report.html'}", file=sys.stderr)
    print(root)
    return 1 if failed else 0

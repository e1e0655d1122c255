"""``fedaudit`` command line: run, validate, scenarios, report, compare, sweep, matrix, lab."""

from __future__ import annotations

import argparse
import atexit
import os
import select
import sys
import time
from pathlib import Path

from fedaudit.config import ScenarioError, bundled_scenarios
from fedaudit.console.progress import RichProgress
from fedaudit.rundir import using_cache
from fedaudit.rundir.layout import RESULTS_NAME

EXIT_INPUT = 2


class _ArgParser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, exit code 2, no usage dump
        print(f"fedaudit: error: {message} (see fedaudit --help)", file=sys.stderr)
        raise SystemExit(EXIT_INPUT)


def _add_overrides(parser: argparse.ArgumentParser,
                   help: str = "override a scenario key (repeatable)") -> None:
    parser.add_argument("--set", dest="overrides", action="append", default=[],
                        metavar="SECTION.KEY=VALUE", help=help)


def _parser() -> argparse.ArgumentParser:
    from fedaudit.version import __version__

    p = _ArgParser(prog="fedaudit", description="Federated-learning privacy testbed.")
    p.add_argument("--version", action="version", version=f"fedaudit {__version__}")
    sub = p.add_subparsers(dest="command", required=True, parser_class=_ArgParser)

    run = sub.add_parser("run", help="run a scenario (bundled name or .toml path)")
    run.add_argument("scenario", nargs="?", help="bundled scenario name or .toml path")
    run.add_argument("--resume", metavar="RUN_DIR",
                     help="continue an interrupted run after its last finished round")
    run.add_argument("--out", default="runs",
                     help="parent folder of the run directory (default: ./runs)")
    _add_overrides(run)
    run.add_argument("--verbose", action="store_true", help="show Flower's log in the terminal")
    run.add_argument("--cache", metavar="DIR",
                     help="cache of reference models (lira, rmia) and of the attacks on "
                          "updates' results; default $FEDAUDIT_CACHE or ~/.cache/fedaudit")
    run.add_argument("--no-report", dest="report", action="store_false",
                     help="do not write RUN_DIR/report.html after the run")

    val = sub.add_parser("validate", help="check a scenario and its data without training",
                         description="Check everything `run` checks (schema, ranges, data, "
                         "partitions, model shape, resources) without training.")
    val.add_argument("scenario", help="bundled scenario name or .toml path")
    _add_overrides(val)

    dep = sub.add_parser("deploy", help="run a scenario through Flower's deployment path "
                         "(flwr run, a managed local SuperLink), checked")
    dep.add_argument("scenario", help="bundled scenario name or .toml path")
    _add_overrides(dep)
    dep.add_argument("--out", default="runs",
                     help="parent folder of the run directory (default: ./runs)")
    dep.add_argument("--app", metavar="DIR",
                     help="the Flower App folder (default: this checkout)")

    sub.add_parser("scenarios", help="list the bundled scenarios")

    rep = sub.add_parser("report", help="write RUN_DIR/report.html (self-contained, offline)")
    rep.add_argument("run_dir", metavar="RUN_DIR")

    cmp_ = sub.add_parser("compare", help="tabulate several runs (defense studies)")
    cmp_.add_argument("run_dirs", nargs="+", metavar="RUN_DIR")
    fmt = cmp_.add_mutually_exclusive_group()
    fmt.add_argument("--csv", action="store_true", help="CSV to stdout")
    fmt.add_argument("--json", action="store_true", help="JSON to stdout")
    cmp_.add_argument("--quantized", action="store_true",
                      help="add one row per quantized release (a quantizer as a defense)")
    cmp_.add_argument("--matrix", action="store_true",
                      help="the threat-model matrix instead: which attack survives which "
                           "attacker position, one column per run")

    sw = sub.add_parser("sweep", help="run the cartesian product of --grid values")
    sw.add_argument("scenario")
    sw.add_argument("--grid", dest="grids", action="append", default=[], required=True,
                    metavar="SECTION.KEY=V1,V2,...", help="values of one key (repeatable)")
    sw.add_argument("--out", default="runs",
                    help="parent folder of the sweep directory (default: ./runs)")
    _add_overrides(sw, "override a key in every point")
    sw.add_argument("--cache", metavar="DIR",
                    help="cache of reference models (lira, rmia) and of the attacks on "
                         "updates' results, shared by the points")
    sw.add_argument("--quantized", action="store_true",
                    help="compare table: one row per quantized release too")
    sw.add_argument("--no-report", dest="report", action="store_false",
                    help="do not write report.html in each run directory")
    from fedaudit.defense_matrix.commands import add_matrix_parser
    from fedaudit.labs.commands import add_lab_parser

    add_matrix_parser(sub, _ArgParser)
    add_lab_parser(sub, _ArgParser)
    return p


def validate_all(name: str, overrides: list[str]):
    """Everything ``run`` checks before training (see :mod:`fedaudit.config.preflight`);
    what the attacks' options warn of, on stderr before any work."""
    from fedaudit.audit.sets import attack_warnings
    from fedaudit.config.preflight import validate_all as preflight

    scenario = preflight(name, overrides)
    for warning in attack_warnings(scenario):
        print(f"fedaudit: warning: {warning}", file=sys.stderr)
    return scenario


def cmd_run(args: argparse.Namespace) -> int:
    if args.resume:
        if args.scenario or args.overrides:
            raise ScenarioError("--resume RUN_DIR takes no scenario or --set: the run directory's "
                                "scenario.toml is used as it is")
        from fedaudit.config.preflight import load_resume

        done = Path(args.resume) / RESULTS_NAME
        if done.is_file():  # nothing to continue: leave the finished run exactly as it is
            print(f"fedaudit: {args.resume} already finished (results.json is there); "
                  "nothing to resume", file=sys.stderr)
            print(Path(args.resume).resolve())
            return 0
        scenario = load_resume(args.resume)
    elif not args.scenario:
        raise ScenarioError("run needs a SCENARIO (bundled name or .toml path) or "
                            "--resume RUN_DIR")
    else:
        scenario = validate_all(args.scenario, args.overrides)
    from fedaudit.console.interrupt import stop_cleanly_on_sigint
    from fedaudit.simulation.runner import run

    t0 = time.perf_counter()
    with RichProgress(scenario.federation.rounds) as progress, \
            stop_cleanly_on_sigint(progress.interrupted, before_exit=progress.bar.stop):
        run_dir, results = run(scenario, args.out, progress=progress, verbose=args.verbose,
                               resume_dir=args.resume)
    _summary(results, time.perf_counter() - t0)
    if args.report:
        _write_report_after_run(run_dir)
    print(run_dir)
    return 0


def _write_report_after_run(run_dir: Path) -> None:
    """The report of a finished run; a failure here warns but does not fail the run."""
    from fedaudit.report import write_report

    try:
        path = write_report(run_dir)
    except Exception as exc:  # noqa: BLE001 - the run directory itself is complete
        print(f"fedaudit: warning: report not written ({type(exc).__name__}: {exc}); "
              f"retry with: fedaudit report {run_dir}", file=sys.stderr)
    else:
        print(f"report: {path}", file=sys.stderr)


def cmd_report(args: argparse.Namespace) -> int:
    from fedaudit.report import write_report

    print(write_report(args.run_dir))
    return 0


def cmd_compare(args: argparse.Namespace) -> int:
    from fedaudit.compare import compare_rows, print_table, to_csv, to_json

    if args.matrix:
        if args.csv:
            raise ScenarioError("--matrix writes a table or --json, not --csv")
        from fedaudit.compare.matrix import print_matrices

        print_matrices(args.run_dirs, as_json=args.json)
        return 0
    rows = compare_rows(args.run_dirs, quantized=args.quantized)
    if args.csv:
        sys.stdout.write(to_csv(rows))
    elif args.json:
        sys.stdout.write(to_json(rows))
    else:
        print_table(rows)
    return 0


def cmd_sweep(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.markup import escape as rich_escape

    from fedaudit.compare import print_table
    from fedaudit.console.interrupt import stop_cleanly_on_sigint
    from fedaudit.sweep import run_sweep

    console = Console(stderr=True)
    with stop_cleanly_on_sigint(lambda: "during the sweep; the sweep directory keeps every "
                                "finished point (compare.csv, compare.json)"):
        sweep_dir, rows = run_sweep(
            args.scenario, args.grids, args.overrides, args.out, quantized=args.quantized,
            report=args.report, announce=lambda text: console.print(
                f"[bold]sweep[/] {rich_escape(text)}", highlight=False),
            progress=lambda point: RichProgress(point.scenario.federation.rounds))
    print_table(rows, title=f"sweep {sweep_dir.name}")
    failed = sum(r.get("status") == "failed" for r in rows)
    if failed:
        console.print(f"{failed} of {len({r['point'] for r in rows})} points failed; "
                      "see the error column and their run.log")
    print(sweep_dir)
    return 0


def _summary(results: dict, seconds: float) -> None:
    from rich.console import Console
    from rich.markup import escape as rich_escape
    from rich.table import Table

    from fedaudit.report.console import membership_table

    console = Console(stderr=True)
    console.print(f"test accuracy {results['model']['test_accuracy']:.3f} "
                  f"(loss {results['model']['test_loss']:.3f}) in {seconds:.1f} s")
    for w in results.get("warnings") or []:
        console.print(f"[bold yellow]warning:[/] {rich_escape(w['message'])}", highlight=False)
    defense = results.get("defense") or {}
    if defense.get("kind", "none") != "none":
        eps = defense.get("epsilon")
        eps_text = (f"epsilon {eps:.3g}" if isinstance(eps, (int, float))
                    else f"epsilon {eps}" if eps is not None else "no epsilon (no noise)")
        delta = defense.get("delta")
        console.print(f"defense {defense['kind']}: {eps_text}"
                      + (f" at delta {delta:g}" if isinstance(delta, float) and eps is not None
                         else ""), highlight=False)
    audit = results.get("dp_audit") or {}
    if audit:
        claimed = audit.get("claimed_epsilon")
        console.print(f"DP audit: epsilon >= {audit['epsilon_lower_bound']:.3g} at confidence "
                      f"{1 - audit['beta']:.0%} ({audit['correct']} of {audit['guesses']} "
                      f"guesses correct on {audit['canaries']} canaries); claimed: "
                      f"{claimed if claimed is not None else 'none'}"
                      + (" [bold red]EXCEEDED[/]" if audit.get("exceeds_claimed") else ""),
                      highlight=False)
        if audit.get("epsilon_lower_bound_gdp") is not None:
            console.print(f"DP audit, Gaussian DP: mu >= {audit['mu_lower_bound']:.3g}, "
                          f"epsilon >= {audit['epsilon_lower_bound_gdp']:.3g} (claimed mu: "
                          f"{audit.get('claimed_mu')})", highlight=False)
    canaries = results.get("canaries") or {}
    secrets = results.get("secrets_summary")
    if canaries.get("mean_percentile") is not None and not secrets:  # secrets: below
        console.print(f"canaries: {len(canaries['samples'])} injected, mean GNQ percentile "
                      f"{canaries['mean_percentile']:.1f} within their clients (100 = most "
                      "unique)", highlight=False)
    if secrets:
        by = ", ".join(f"{'references' if k == '0' else f'x{k}'} {v:.2f}" for k, v in
                       sorted(secrets["global"]["mean_exposure"].items(),
                              key=lambda kv: int(kv[0])))
        link = secrets.get("gnq_vs_exposure")
        gnq = (f"; mean GNQ percentile of the planted secrets in their clients "
               f"{link['mean_gnq_percentile']:.1f}" if link else "")
        console.print(f"secrets: mean exposure (bits) on the global model by repeats: {by}; "
                      f"{secrets['global']['extracted']} extracted{gnq}", highlight=False)
    from fedaudit.report.console import update_attack_lines

    for line in update_attack_lines(results):
        console.print(line, highlight=False)
    mal = results.get("malicious_server")
    if mal and mal.get("samples"):
        console.print(f"malicious server (imprint, {mal['bins']} bins, {mal['aggregation']} "
                      f"aggregation): {mal['near_exact']} of {mal['samples']} samples of round "
                      f"{mal['round']} read back near-exactly ({mal['share']:.0%}; expected "
                      f"{mal['expected_share']:.0%})", highlight=False)
    if results.get("active_membership"):
        from fedaudit.report.console import active_membership_line

        console.print(active_membership_line(results["active_membership"]), highlight=False)
    if results.get("attacks"):
        console.print(membership_table(results["attacks"]))
    quant = results.get("quantization") or []
    if quant:
        t = Table(title="post-training quantization")
        for col in ("quantizer", "bits", "r_Qn", "test acc"):
            t.add_column(col)
        for q in quant:
            r = q["rqn"]
            t.add_row(q["quantizer"], f"{q['bits']:g}", r if isinstance(r, str) else f"{r:.4g}",
                      f"{q['test_accuracy']:.3f}")
        console.print(t)


def cmd_deploy(args: argparse.Namespace) -> int:
    from fedaudit.simulation.deploy import deploy

    scenario = validate_all(args.scenario, args.overrides)
    res = deploy(args.scenario, args.overrides, scenario.federation.num_clients,
                 Path(args.out), app=Path(args.app) if args.app else None)
    if res.status != "finished:completed" or res.run_dir is None:
        print(f"fedaudit: error: Flower run {res.run_id or '(none)'} ended {res.status}"
              + (f": {res.details}" if res.details else ""), file=sys.stderr)
        return 1
    print(res.run_dir)
    return 0


def cmd_validate(args: argparse.Namespace) -> int:
    scenario = validate_all(args.scenario, args.overrides)
    print(f"{args.scenario}: ok ({scenario.federation.num_clients} clients, "
          f"{scenario.federation.rounds} rounds, {scenario.data.dataset}, "
          f"{scenario.model.name})")
    return 0


def cmd_scenarios(args: argparse.Namespace) -> int:
    import tomllib

    for name, path in sorted(bundled_scenarios().items()):
        desc = tomllib.loads(path.read_text()).get("scenario", {}).get("description", "")
        print(f"{name:28s} {desc}")
    return 0


def cmd_matrix(args: argparse.Namespace) -> int:
    from fedaudit.defense_matrix.commands import cmd_matrix as matrix
    return matrix(args)


def cmd_lab(args: argparse.Namespace) -> int:
    from fedaudit.labs.commands import cmd_lab as run_lab

    return run_lab(args)


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    handler = {"run": cmd_run, "validate": cmd_validate, "scenarios": cmd_scenarios,
               "report": cmd_report, "compare": cmd_compare, "sweep": cmd_sweep,
               "deploy": cmd_deploy, "matrix": cmd_matrix, "lab": cmd_lab}[args.command]
    try:
        with using_cache(getattr(args, "cache", None)):
            return handler(args)
    except ScenarioError as exc:
        print(f"fedaudit: error: {exc}", file=sys.stderr)
        return EXIT_INPUT
    except KeyboardInterrupt:
        print("fedaudit: interrupted", file=sys.stderr)
        return 130


def _stdout_reader_gone() -> bool:
    """True when stdout is a pipe whose reading end was closed (poll reports an error)."""
    try:
        poller = select.poll()
        poller.register(sys.stdout.fileno(), select.POLLOUT)
        return any(event & select.POLLERR for _, event in poller.poll(0))
    except (OSError, ValueError, AttributeError):  # no fileno, no poll()
        return False


def entry(argv: list[str] | None = None) -> None:
    """The ``fedaudit`` command (and ``python -m fedaudit.cli``): :func:`main`, then exit
    without the interpreter's teardown.

    Once the command is done, freeing every module and unloading torch's libraries took
    another 1.1-1.6 s of the user's time on a 2-core machine (``import torch`` alone: 0.5
    s).  Everything the command writes is closed by then (run files are written
    atomically); the exit handlers (logging's flush, Ray's, temporary directories') still
    run, and the streams are flushed.  Threads are not joined: a command must finish its
    non-daemon threads before :func:`main` returns (none outlives it today).  An
    unexpected exception takes the normal path.
    """
    try:
        status = main(argv)
    except SystemExit as exc:  # argparse: --help (0), usage errors (2)
        status = exc.code
    except BrokenPipeError:
        if not _stdout_reader_gone():
            raise  # some other pipe broke
        status = 1  # the reader of our output left (fedaudit scenarios | head): quietly
    if status is not None and not isinstance(status, int):
        print(status, file=sys.stderr)
        status = 1
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe (fedaudit ... | head)
            pass
    os._exit(status or 0)


if __name__ == "__main__":
    entry()

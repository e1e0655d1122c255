"""fedaudit benchmarks: ``python bench/run.py [--quick] [--json PATH] [--only SECTION ...]``.

Never part of the pass/fail tests (no test asserts a wall-clock time). Prints rich tables
and writes every figure, with the machine it was measured on, to a JSON file (default
``bench-results.json`` in the current directory).

Sections (``--only`` picks some; ``--quick`` shrinks repeats and grids and skips the
ResNet-18 measurements):

* ``gnq`` (bench/gnq.py, bench/gnq_profile.py) -- ``gnq_overhead_ratio``: audited / plain
  local training step, quickstart CNN on 1x8x8, batch 32 (goal <= 1.35);
  ``gnq_overhead_ratio_cnn32``: the same CNN on 3x32x32 (goal <= 1.15);
  ``gnq_overhead_ratio_transformer``: shakespeare-secrets' character transformer, batch 16
  (goal <= 1.2), ``_transformer4`` the same with 4 layers at sequence length 128;
  ``gnq_overhead_ratio_resnet18``: ResNet-18 (GroupNorm) on 3x32x32, batch 32 (goal <= 1.2;
  not with --quick); each with ``gnq_overhead_floor*`` = 1 + Gram FLOPs / step FLOPs beside
  it; the extra time per layer kind and phase (table); ``gnq_memory_ratio``: peak extra memory naive /
  ghost on a 1.07M-parameter MLP, batch 32 (goal >= 100); ``gnq_speedup_vs_naive``.
* ``resmia`` (bench/resmia.py) -- ``resmia_cost_ratio``: Res-MIA time per sample / one
  forward pass per sample through the same Oracle (goal <= K + 1), quickstart CNN on 8x8
  inputs, and ResNet-18 on 32x32 (not with --quick).
* ``sim`` (bench/sim.py) -- ``sim_overhead_ratio``: quickstart through Flower + Ray with
  audit and attacks off / the same FedAvg rounds as a plain torch loop; with and without
  Ray's start-up, per steady round (``sim_round_ratio``, goal <= 1.3), and at larger
  sizes; ``client_round_overhead_ms``: (steady simulated round - plain round) / clients.
* ``scaling`` (bench/sim.py) -- wall time and peak memory (driver and every Ray process)
  of whole quickstart runs, full audit ON, as clients and rounds grow.
* ``reconstruction`` (bench/reconstruction.py) -- ``reconstruction_iteration_ratio``: one
  iteration of the inverting-gradients attack / one iteration of a bare torch loop of the
  same double backward (the floor), the largest over MLP and CNN on 8x8 and a CNN on
  3x32x32, batch 1 to 8, single gradient and 4 unrolled local steps (goal <= 1.2).
* ``estimate`` (bench/estimate.py; not with --quick) -- measured ResNet-18 step costs on
  this CPU and the extrapolated cost of ``scenarios/cifar10-resnet18.toml`` (an estimate).

Timing method: medians over repeats (counts in the JSON and the tables); the variants
compared are interleaved in every repeat so that load from other processes hits them
alike. The load average and CPU pressure before and after are recorded: on a shared
machine, treat differences of a few percent as noise.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("FLWR_TELEMETRY_ENABLED", "0")
ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.machine import load, machine  # noqa: E402

SECTIONS = ("gnq", "resmia", "reconstruction", "sim", "scaling", "estimate")


# ---- sections ----------------------------------------------------------------------

def run_gnq(quick: bool) -> dict:
    """GNQ step overheads with floors, their profile, memory ratio, speed-up vs naive."""
    from bench.gnq_profile import run_section

    return run_section(quick)


def run_resmia(quick: bool) -> dict:
    """Res-MIA cost ratio: quickstart CNN 8x8 (always), ResNet-18 32x32 (not quick)."""
    from bench.resmia import resmia_cost

    out = {"cnn": resmia_cost("cnn", 1, 8, n=1024, repeats=5 if quick else 11)}
    if not quick:
        out["resnet18"] = resmia_cost("resnet18", 3, 32, n=128, repeats=3)
    return out


def run_reconstruction(quick: bool) -> dict:
    """Inversion iteration vs the bare torch floor, over the configurations of
    bench/reconstruction.py."""
    from bench.reconstruction import inversion_overhead, parallel_jobs

    return {"rows": inversion_overhead(iterations=10 if quick else 20,
                                       repeats=3 if quick else 7),
            "parallel": parallel_jobs(jobs=4 if quick else 8,
                                      iterations=100 if quick else 400)}


SIM_SIZES_QUICK = {"quickstart (10 clients x 5 rounds)": [],
                   "20 rounds": ["federation.rounds=20"]}
SIM_SIZES_FULL = {**SIM_SIZES_QUICK,
                  "50 clients": ["federation.num_clients=50"],
                  "compute-heavy (10 local epochs x 20 rounds)":
                      ["train.local_epochs=10", "federation.rounds=20"]}


def run_sim(quick: bool) -> dict:
    """Flower + Ray vs plain loop at several sizes (audit and attacks off)."""
    from bench.sim import sim_overhead

    rows = []
    sizes = SIM_SIZES_QUICK if quick else SIM_SIZES_FULL
    for i, (name, extra) in enumerate(sizes.items()):
        first = i == 0
        reps = (2 if first else 1) if quick else (3 if first else 2)
        rows += sim_overhead({name: extra}, repeats=reps, plain_repeats=3)
    return {"rows": rows}


SCALING_QUICK = [("10 clients x 5 rounds", []),
                 ("50 clients x 5 rounds", ["federation.num_clients=50"]),
                 ("10 clients x 10 rounds", ["federation.rounds=10"])]
SCALING_FULL = [("10 clients x 5 rounds", []),
                ("50 clients x 5 rounds", ["federation.num_clients=50"]),
                ("100 clients x 5 rounds", ["federation.num_clients=100"]),
                ("200 clients x 5 rounds", ["federation.num_clients=200"]),
                ("10 clients x 10 rounds", ["federation.rounds=10"]),
                ("10 clients x 20 rounds", ["federation.rounds=20"])]


def run_scaling(quick: bool) -> dict:
    """Whole quickstart runs, full audit on, growing clients and rounds (one run each)."""
    from bench.sim import scaling

    rows = scaling(SCALING_QUICK if quick else SCALING_FULL, audit=True)
    def n_rounds(row: dict) -> int:
        return int(row["point"].split(" x ")[1].split()[0])

    by_rounds = sorted((r for r in rows if r["point"].startswith("10 clients")), key=n_rounds)
    check = None
    if len(by_rounds) >= 2:
        lo, hi = by_rounds[0], by_rounds[-1]
        check = {"from": lo["point"], "to": hi["point"],
                 "driver_peak_rss_growth_MiB": hi["driver_peak_rss_MiB"] - lo["driver_peak_rss_MiB"],
                 "tree_peak_pss_growth_MiB": hi["tree_peak_pss_MiB"] - lo["tree_peak_pss_MiB"],
                 "checkpoints_growth_MiB": hi["checkpoints_MiB"] - lo["checkpoints_MiB"]}
    return {"rows": rows, "audit": "on (quickstart as shipped: client+server GNQ, 8 quantizers "
                                   "with r_Qn, 5 attacks on 9 targets, 5 canaries)",
            "memory_vs_rounds": check}


def run_estimate(quick: bool) -> dict:
    """Measured ResNet-18 step costs and the cifar10-resnet18 estimate."""
    from bench.estimate import cifar10_resnet18_estimate, resnet18_step_costs

    costs = resnet18_step_costs(repeats=1 if quick else 3, warmup=1)
    return {"costs": costs, "estimate": cifar10_resnet18_estimate(costs)}


RUNNERS = {"gnq": run_gnq, "resmia": run_resmia, "reconstruction": run_reconstruction,
           "sim": run_sim, "scaling": run_scaling, "estimate": run_estimate}


# ---- headline and tables -------------------------------------------------------------

def headline(res: dict) -> dict:
    """The figures the JSON must carry at top level (absent when a section did not run)."""
    out: dict = {}
    if "gnq" in res:
        g = res["gnq"]
        for key in ("", "_cnn32", "_transformer", "_transformer4", "_resnet18"):
            if f"overhead{key}" in g:
                out[f"gnq_overhead_ratio{key}"] = g[f"overhead{key}"]["overhead_ratio"]
                out[f"gnq_overhead_floor{key}"] = g[f"overhead{key}"]["floor"]
        out["gnq_memory_ratio"] = g["memory"]["memory_ratio"]
        out["gnq_speedup_vs_naive"] = g["speedup"]["speedup_vs_naive"]
    if "resmia" in res:
        out["resmia_cost_ratio"] = res["resmia"]["cnn"]["resmia_cost_ratio"]
        out["resmia_steps"] = res["resmia"]["cnn"]["resmia_steps"]
        if "resnet18" in res["resmia"]:
            out["resmia_cost_ratio_resnet18"] = res["resmia"]["resnet18"]["resmia_cost_ratio"]
            out["resmia_steps_resnet18"] = res["resmia"]["resnet18"]["resmia_steps"]
    if "reconstruction" in res:
        out["reconstruction_iteration_ratio"] = max(r["ratio"]
                                                    for r in res["reconstruction"]["rows"])
        out["reconstruction_parallel_speedup"] = res["reconstruction"]["parallel"]["speedup"]
    if "sim" in res:
        q = res["sim"]["rows"][0]
        out["sim_overhead_ratio"] = q["ratio_train"]
        out["sim_overhead_ratio_with_ray_start"] = q["ratio_call"]
        out["sim_overhead_ratio_steady_round"] = q["ratio_round"]
        out["sim_round_ratio"] = q["ratio_round"]
        out["client_round_overhead_ms"] = q["client_round_overhead_ms"]
    return out


def _f(v, digits: int = 3) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.{digits}g}" if abs(v) < 1000 else f"{v:,.0f}"
    return str(v)


def print_tables(res: dict, console) -> None:
    """Rich tables: machine, headline figures with goals, then one table per section."""
    from rich.table import Table

    m = Table(title="machine", show_header=False)
    for k, v in {**res["machine"], **{f"{k} (start)": v for k, v in res["load_start"].items()},
                 **{f"{k} (end)": v for k, v in res["load_end"].items()}}.items():
        m.add_row(k, _f(v))
    console.print(m)

    h = res["headline"]
    t = Table(title="headline figures (medians)")
    for col in ("figure", "value", "goal", "how measured"):
        t.add_column(col)
    r = res.get("results", {})
    if "gnq_overhead_ratio" in h:
        from bench.gnq_profile import headline_rows

        headline_rows(r["gnq"], t)
        mm = r["gnq"]["memory"]
        t.add_row("gnq_memory_ratio", _f(h["gnq_memory_ratio"]), ">= 100",
                  f"MLP {mm['mlp_params']:,} params, batch 32, torch allocator: "
                  f"{mm['naive_peak_extra_MiB']:.0f} / {mm['ghost_peak_extra_MiB']:.1f} MiB"
                  + (f"; RSS cross-check {mm['memory_ratio_rss']:.0f}x"
                     if "memory_ratio_rss" in mm else ""))
        s = r["gnq"]["speedup"]
        t.add_row("gnq_speedup_vs_naive", _f(h["gnq_speedup_vs_naive"]), "-",
                  f"MLP {s['mlp_naive_ms']:.0f} / {s['mlp_ghost_ms']:.1f} ms; CNN "
                  f"{s['cnn_speedup']:.1f}x")
    if "resmia_cost_ratio" in h:
        for key, row in r["resmia"].items():
            t.add_row(f"resmia_cost_ratio ({row['model']})", _f(row["resmia_cost_ratio"]),
                      f"<= K+1 = {row['goal_max']}",
                      f"K={row['resmia_steps']}, {row['queries_per_sample']:.0f} queries/sample, "
                      f"{row['resmia_ms_per_sample']:.3g} vs {row['forward_ms_per_sample']:.3g} "
                      f"ms/sample, n={row['n']}, {row['repeats']} repeats")
    if "reconstruction_iteration_ratio" in h:
        worst = max(r["reconstruction"]["rows"], key=lambda x: x["ratio"])
        t.add_row("reconstruction_iteration_ratio", _f(h["reconstruction_iteration_ratio"]),
                  "<= 1.2", f"largest of {len(r['reconstruction']['rows'])} configurations: "
                  f"{worst['model']}, {worst['samples']} samples, {worst['local_steps']} "
                  f"local step(s): {worst['attack_ms_per_iteration']:.2f} / "
                  f"{worst['floor_ms_per_iteration']:.2f} ms")
        p = r["reconstruction"]["parallel"]
        t.add_row("reconstruction_parallel_speedup", _f(h["reconstruction_parallel_speedup"]),
                  f"~ min(R, W) = {p['ideal']}",
                  f"R={p['jobs']} jobs on W={p['workers']} Ray workers: "
                  f"{p['driver_seconds']:.1f} s in-process / {p['grid_seconds']:.1f} s")
    if "sim_overhead_ratio" in h:
        q = r["sim"]["rows"][0]
        t.add_row("sim_overhead_ratio", _f(h["sim_overhead_ratio"]), "<= 1.2",
                  f"train_seconds {q['sim_train_seconds']:.1f} s / plain {q['plain_seconds']:.2f} s")
        t.add_row("  with Ray start-up", _f(h["sim_overhead_ratio_with_ray_start"]), "-",
                  f"runner.run call {q['sim_call_seconds']:.1f} s / plain")
        t.add_row("sim_round_ratio (steady round)", _f(h["sim_round_ratio"]), "<= 1.3",
                  f"{q['sim_round_seconds']:.3f} s / {q['plain_round_seconds']:.3f} s per round")
        t.add_row("client_round_overhead_ms", _f(h["client_round_overhead_ms"]), "-",
                  f"(steady round - plain round) / {q['clients']} clients")
    console.print(t)

    if "gnq" in r and "profile" in r["gnq"]:
        from bench.gnq_profile import print_profiles

        print_profiles(r["gnq"]["profile"], console)
    if "reconstruction" in r:
        from bench.reconstruction import print_parallel, print_table

        print_table(r["reconstruction"]["rows"], console)
        print_parallel(r["reconstruction"]["parallel"], console)
    if "sim" in r:
        rows = r["sim"]["rows"]
        s = Table(title="Flower + Ray vs plain torch loop (audit and attacks off; medians)")
        s.add_column("")
        for row in rows:
            s.add_column(row["size"], justify="right")
        spec = [
            ("repeats sim / plain", lambda x: f"{x['repeats_sim']} / {x['repeats_plain']}"),
            ("plain loop s", lambda x: _f(x["plain_seconds"])),
            ("sim train_seconds", lambda x: _f(x["sim_train_seconds"])),
            ("sim runner.run call s", lambda x: _f(x["sim_call_seconds"])),
            ("ratio (train)", lambda x: _f(x["ratio_train"])),
            ("ratio (call, Ray start-up incl.)", lambda x: _f(x["ratio_call"])),
            ("round: sim / plain s", lambda x: f"{x['sim_round_seconds']:.3f} / "
                                               f"{x['plain_round_seconds']:.3f}"),
            ("  sim round: clients / server s", lambda x: f"{x['sim_round_client_seconds']:.3f} / "
                                                          f"{x['sim_round_server_seconds']:.3f}"),
            ("ratio (steady round)", lambda x: _f(x["ratio_round"])),
            ("ray.init + shutdown s", lambda x: _f(x["ray_init_shutdown_seconds"])),
            ("sim round 1 s (actor start-up)", lambda x: _f(x["sim_round1_seconds"])),
            ("one-off start-up s", lambda x: _f(x["fixed_seconds"])),
            ("rounds to amortise (start-up < half)", lambda x: _f(x["rounds_to_amortise"])),
            ("test acc sim / plain", lambda x: f"{x['acc_sim']:.4f} / {x['acc_plain']:.4f}"),
        ]
        for label, fn in spec:
            s.add_row(label, *[fn(x) for x in rows])
        console.print(s)
    if "scaling" in r:
        rows = r["scaling"]["rows"]
        s = Table(title=f"scaling: whole runs, one each, audit {r['scaling']['audit']}")
        s.add_column("")
        for row in rows:
            s.add_column(row["point"], justify="right")
        spec = [
            ("process wall s (imports incl.)", "process_seconds"),
            ("runner.run s", "call_seconds"), ("train s", "train_seconds"),
            ("round 1 s", "round1_seconds"), ("steady round s", "round_seconds"),
            ("driver peak RSS MiB (VmHWM)", "driver_peak_rss_MiB"),
            ("all processes peak PSS MiB", "tree_peak_pss_MiB"),
            ("all processes peak RSS MiB", "tree_peak_rss_MiB"),
            ("processes (driver + Ray)", "tree_peak_processes"),
            ("checkpoints on disk MiB", "checkpoints_MiB"),
            ("test accuracy", "test_accuracy"),
        ]
        for label, key in spec:
            s.add_row(label, *[_f(x.get(key), 4) for x in rows])
        console.print(s)
        if r["scaling"]["memory_vs_rounds"]:
            c = r["scaling"]["memory_vs_rounds"]
            console.print(f"memory vs rounds ({c['from']} -> {c['to']}): driver peak RSS "
                          f"{c['driver_peak_rss_growth_MiB']:+.0f} MiB, all processes peak PSS "
                          f"{c['tree_peak_pss_growth_MiB']:+.0f} MiB, checkpoints on disk "
                          f"{c['checkpoints_growth_MiB']:+.2f} MiB")
    if "estimate" in r:
        c = r["estimate"]["costs"]
        e = r["estimate"]["estimate"]
        s = Table(title="ResNet-18 (GroupNorm) 3x32x32 on this CPU, batch 64 -- MEASURED "
                        f"({c['repeats']} repeats; epoch = {c['epoch_steps']} steps, extrapolated)")
        for col in ("variant", "step s", "time ratio vs plain", "counted-FLOP ratio",
                    "5000-image epoch s"):
            s.add_column(col)
        s.add_row("plain", _f(c["plain_step_s"]), "1", "1", _f(c["epoch_plain_s"]))
        for k in c:
            if k.startswith("gnq_") and k.endswith("_step_s"):
                v = k[len("gnq_"):-len("_step_s")]
                s.add_row(f"GNQ-audited ({v})", _f(c[k]), _f(c[f"gnq_{v}_ratio"]),
                          _f(c[f"gnq_{v}_flop_ratio"]), _f(c[f"epoch_gnq_{v}_s"]))
        console.print(s)
        console.print(f"forward: {c['forward_ms_per_sample']:.2f} ms/sample at batch "
                      f"{c['forward_batch']}, {c['forward_gflop_per_sample']:.2f} GFLOP/sample; "
                      f"plain step {c['step_gflop']:.0f} GFLOP -> {c['cpu_gflops_per_s']:.0f} "
                      "GFLOP/s on this CPU (FLOPs: matmuls and convolutions only)")
        s = Table(title="cifar10-resnet18 -- ESTIMATE, not a measurement (CPU: measured step "
                        "times x work; GPU: FLOPs x measured audit time ratio / ASSUMED "
                        "sustained throughput)")
        s.add_column("variant")
        s.add_column("CPU h (train + forwards)")
        for t in e["assumed_gpu_tflops"]:
            s.add_column(f"GPU h at {t:g} TFLOP/s")
        for k in ("plain", *[k for k in e if k.startswith("gnq_")]):
            row = e[k]
            s.add_row(k, f"{row['cpu_hours']:.1f} ({row['cpu_train_hours']:.1f} + "
                         f"{row['cpu_forward_hours']:.1f})",
                      *[f"{row[f'gpu_hours_at_{t:g}_tflops']:.2f}" for t in e["assumed_gpu_tflops"]])
        console.print(s)
        w = e["work"]
        console.print(f"work: {w['train_sample_steps']:,} training-sample steps "
                      f"({w['train_batches']:,} batches), <= {w['forwards_total_max']:,} forwards; "
                      "implied GPU training throughput: " + ", ".join(
                          f"{k}: {v:,.0f} img/s" for k, v in e["implied_gpu_train_img_per_s"].items()))


def main(argv: list[str] | None = None) -> dict:
    """Parse arguments, run the sections, print the tables, write the JSON."""
    from rich.console import Console

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true",
                    help="fewer repeats, reduced grids, no ResNet-18 (a few minutes)")
    ap.add_argument("--json", default="bench-results.json", help="where to write the JSON")
    ap.add_argument("--only", nargs="+", choices=SECTIONS, default=None,
                    help="run only these sections")
    ap.add_argument("--threads", type=int, default=None,
                    help="torch intra-op threads in this process (default: torch's); the "
                         "simulated runs' ClientApps always use client_resources.num_cpus")
    args = ap.parse_args(argv)
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    console = Console(width=None if sys.stdout.isatty() else 150)
    sections = args.only or [s for s in SECTIONS if not (args.quick and s == "estimate")]
    res: dict = {"quick": args.quick, "machine": machine(), "load_start": load(),
                 "results": {}, "seconds": {}}
    for name in sections:
        console.print(f"[bold]running {name}[/bold] ...")
        t0 = time.perf_counter()
        res["results"][name] = RUNNERS[name](args.quick)
        res["seconds"][name] = time.perf_counter() - t0
        # write as we go: a long run that fails late keeps what it measured
        res["load_end"] = load()
        res["headline"] = headline(res["results"])
        Path(args.json).write_text(json.dumps({**res["headline"], **res}, indent=1, default=str))
    print_tables(res, console)
    console.print(f"JSON: {args.json}")
    return res


if __name__ == "__main__":
    main()

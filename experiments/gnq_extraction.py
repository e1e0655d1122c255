"""Does GNQ point at what a prefix-completion attack extracts?  The GNQ paper's central
claim (arXiv 2510.10902: the sequences Gradient Uniqueness ranks highest are the ones an
extraction attack recovers) in the federated setting, on ``shakespeare-secrets``
(docs/validation.md section 12).

    python experiments/gnq_extraction.py [--data PATH] [--out DIR] [--part ranking|repeats]

``ranking``: 60 made-up sequences (secrets at repeats 1: 6 in each of 10 clients, every
one unique) among the clients' ordinary ones.  Every training sequence is attacked by
prefix completion on the released global model: its first 20 characters as the prompt,
greedy decoding of the next 5, extracted when all 5 match (for a made-up sequence the
prompt is the template and the 5 characters are its secret).  Sequences are ranked by
their total client-side GNQ as a percentile within their client; the extraction rate of
the top 5 / 10 / 20 % is compared with the rate of all sequences (the expected rate of a
random 5 %, with its binomial standard deviation).

``repeats``: secrets inserted 1, 2, 4, 8, 16 times (2 per value in each of 3 clients, 20
references): mean exposure, extraction and GNQ percentile per repeats value, without a
defense and with DP-SGD (noise 1; the accountant's epsilon reported).

Prints markdown tables.
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

import numpy as np
import torch

import fedaudit
from fedaudit.audit.stages.secrets import client_percentiles, next_log_probs
from fedaudit.config import load_scenario
from fedaudit.data import build_federated_data
from fedaudit.models import model_for
from fedaudit.rundir import load_checkpoint
from fedaudit.rundir.layout import GNQ_SAMPLES_NAME, checkpoint_path

ROOT = Path(__file__).resolve().parents[1]
TEXT = ROOT / ".." / "shared" / "data" / "tinyshakespeare.txt"
SCENARIO = ROOT / "scenarios" / "shakespeare-secrets.toml"
PROMPT, TARGET = 20, 5


def greedy_completion(model, x: np.ndarray, y: np.ndarray, device) -> np.ndarray:
    """bool per sequence: greedy decoding of TARGET tokens after the first PROMPT tokens
    reproduces the sequence's next TARGET tokens."""
    full = np.concatenate([x, y[:, -1:]], axis=1)
    ctx, want = full[:, :PROMPT], full[:, PROMPT:PROMPT + TARGET]
    step = next_log_probs(model, device, 512)
    for _ in range(TARGET):
        ctx = np.concatenate([ctx, step(ctx).argmax(axis=1)[:, None]], axis=1)
    return (ctx[:, PROMPT:] == want).all(axis=1)


def within_client_percentiles(run_dir: Path, clients) -> dict[int, float]:
    """sequence id -> its total client-side GNQ's percentile within its client."""
    with np.load(run_dir / GNQ_SAMPLES_NAME) as z:
        ids, pct = client_percentiles(z["sample_id"], z["score"], clients)
    return dict(zip(ids.tolist(), pct.tolist()))


def ranking(data: str, out: str) -> None:
    sets = ["canaries.repeats=[1]", "canaries.count=6",
            "canaries.clients=[0,1,2,3,4,5,6,7,8,9]"]
    run = fedaudit.run(SCENARIO, out=out, progress=False,
                       overrides=[f"data.path={data}", *sets])
    s = load_scenario(SCENARIO, [f"data.path={data}", *sets])
    d = build_federated_data(s)
    model = model_for(s.model, d, seed=s.seed)
    model.load_state_dict(load_checkpoint(checkpoint_path(Path(run.dir), s.federation.rounds)))
    pct = within_client_percentiles(Path(run.dir), d.clients)
    ids = np.array(sorted(pct))
    p = np.array([pct[i] for i in ids])
    hit = greedy_completion(model, d.x[ids], d.y[ids], torch.device("cpu"))
    made_up = d.canary[ids]
    base = hit.mean()
    print(f"\n{len(ids)} training sequences ({int(made_up.sum())} made up); prefix completion "
          f"({PROMPT} -> {TARGET} characters) extracts {int(hit.sum())} ({100 * base:.1f}%)\n")
    print("| sequences | n | extracted | rate | made-up among them |\n|---|---|---|---|---|")
    for top in (5, 10, 20):
        sel = p > 100 - top
        print(f"| top {top}% by GNQ | {int(sel.sum())} | {int(hit[sel].sum())} | "
              f"{100 * hit[sel].mean():.1f}% | {int(made_up[sel].sum())} |")
    n5 = max(1, round(0.05 * len(ids)))
    sd = math.sqrt(base * (1 - base) / n5)
    print(f"| random 5% (expected) | {n5} | - | {100 * base:.1f}% +- {100 * sd:.1f}% | "
          f"{100 * made_up.mean() * 0.05 * len(ids) / n5:.1f} expected |")
    print(f"| made-up sequences | {int(made_up.sum())} | {int(hit[made_up].sum())} | "
          f"{100 * hit[made_up].mean():.1f}% | mean GNQ percentile {p[made_up].mean():.1f} |")
    res = json.loads((Path(run.dir) / "results.json").read_text())
    print(f"\nrun {run.dir}: {res['timing']['total_seconds']:.0f} s; test accuracy "
          f"{res['model']['test_accuracy']:.3f}")


def repeats(data: str, out: str) -> None:
    sets = ["canaries.repeats=[1,2,4,8,16]"]
    print("| defense | epsilon | repeats | secrets | mean exposure (global) | mean exposure "
          "(server view) | extracted | mean GNQ percentile |\n|---|---|---|---|---|---|---|---|")
    for label, extra in (("none", []), ("dp-sgd, noise 1",
                                        ["defense.kind=dp-sgd", "defense.noise_multiplier=1.0",
                                         "defense.clip_norm=1.0"])):
        run = fedaudit.run(SCENARIO, out=out, progress=False,
                           overrides=[f"data.path={data}", *sets, *extra])
        res = json.loads((Path(run.dir) / "results.json").read_text())
        eps = (res.get("defense") or {}).get("epsilon")
        eps = "-" if eps is None else eps if isinstance(eps, str) else f"{eps:.2f}"

        def mean(xs: list, digits: int) -> str:  # "-" where nothing applies (references)
            return f"{np.mean(xs):.{digits}f}" if xs else "-"

        for k in (0, 1, 2, 4, 8, 16):
            group = [e for e in res["secrets"] if e["repeats"] == k]
            srv = [e["server_view"]["exposure"] for e in group if e["server_view"]]
            gnq = [e["gnq_percentile"] for e in group if e["gnq_percentile"] is not None]
            if group:
                print(f"| {label} | {eps} | {'references' if k == 0 else k} | {len(group)} | "
                      f"{mean([e['exposure'] for e in group], 2)} | {mean(srv, 2)} | "
                      f"{sum(e['extracted'] for e in group)} | {mean(gnq, 1)} |", flush=True)
        print(f"| {label}: {res['timing']['total_seconds']:.0f} s, test accuracy "
              f"{res['model']['test_accuracy']:.3f} |||||||")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default=str(TEXT))
    ap.add_argument("--out", default="runs/gnq-extraction")
    ap.add_argument("--part", choices=("ranking", "repeats"))
    args = ap.parse_args()
    if args.part in (None, "ranking"):
        ranking(args.data, args.out)
    if args.part in (None, "repeats"):
        repeats(args.data, args.out)


if __name__ == "__main__":
    main()

"""What the malicious server reads back (issue 40): the scenario's server is the imprint
server (:mod:`fedaudit.servers.imprint`, switched on by ``[imprint] enabled``), which sent the
clients the model behind an imprint block and reads the round's samples from the block's
part of the aggregate update; this stage scores what it read.  results.json
``malicious_server``, ``imprint.npz``.

Ground truth: the samples of the round's aggregated clients (rounds.jsonl ``clients``), each
training on its whole partition.  A candidate is matched to them by an optimal assignment
(:func:`fedaudit.image_metrics.reconstruction_metrics`); it is near-exact when its PSNR is at
least ``near_exact_db``.  The expected share is (k / (k + 1))^N for N samples and k bins
(:func:`attacks.imprint.expected_recovery_rate`); it assumes one local step per client (the
block's rows are equal only before the first step) and a Gaussian mean pixel.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from attacks.update_family import enabled_families
from fedaudit.audit.context import AuditContext
from fedaudit.audit.stages.base import Stage, register_stage
from fedaudit.rundir import atomic_save_npz
from fedaudit.rundir.layout import IMPRINT_NAME
from fedaudit.servers import served_model, server_of
from fedaudit.servers.imprint import ImprintServer

__all__ = ["Imprint"]


@register_stage
class Imprint(Stage):
    name = "imprint"
    order = 470
    writes = ("malicious_server",)
    timing = "attack_seconds"

    def enabled(self, scenario):
        return isinstance(server_of(scenario), ImprintServer)

    def check(self, scenario):
        t = scenario.stages["imprint"]
        if t["round"] > scenario.federation.rounds:
            return (f"imprint.round = {t['round']}: round {t['round']} does not exist; "
                    f"allowed: 1..{scenario.federation.rounds}")
        if on := enabled_families(scenario):
            return (f"imprint.enabled = true changes the model the clients train; the attacks "
                    f"on updates ({on[0].name}.enabled) assume the scenario's own model: "
                    "turn one of them off")
        return None

    def check_data(self, scenario, data):
        if data.text is not None:
            return (f"imprint.enabled = true: the imprint block reads images; data.dataset = "
                    f"{scenario.data.dataset!r} is text")
        return None

    def run(self, ctx: AuditContext) -> None:
        from attacks.imprint import expected_recovery_rate, strongest_candidates
        from fedaudit.audit.update_attacks import local_training
        from fedaudit.image_metrics import reconstruction_metrics, ssim_window

        server = server_of(ctx.scenario)
        t = ctx.scenario.stages["imprint"]
        t0 = time.perf_counter()
        r = t["round"]
        sent = (served_model(ctx.scenario, ctx.data, seed=ctx.scenario.seed).state_dict()
                if r == 1 else ctx.trajectory.state(r - 1))
        shape = tuple(ctx.data.x.shape[1:])
        readout = server.read_back(sent, ctx.trajectory.state(r), shape)
        images, bins = readout.images, readout.bins
        line = next(x for x in ctx.results["rounds"] if x["round"] == r)
        clients = list(line["clients"])
        ids = (np.concatenate([ctx.data.clients[c] for c in clients]) if clients
               else np.zeros(0, np.int64))
        n = len(ids)
        notes = []
        if len(images) > n:  # more reached bins than samples: keep the strongest n
            notes.append(f"{len(images)} bins changed for {n} samples; kept the {n} with "
                         "the largest bias differences")
            images, bins = strongest_candidates(images, bins, readout.bias_update, n)
        largest = max((len(ctx.data.clients[c]) for c in clients), default=1)
        if local_training(ctx.scenario, largest).steps > 1:
            notes.append("the clients took several local steps: the block's rows differ "
                         "after the first, and the expected share assumes one")
        out: dict[str, Any] = {
            "attack": "imprint", "threat_model": dict(server.threat_model),
            "aggregation": ctx.scenario.federation.aggregation, "round": r,
            "bins": t["bins"], "gain": t["gain"], "samples": n, "candidates": len(images),
            "expected_share": expected_recovery_rate(n, t["bins"]) if n else None,
            "near_exact_db": t["near_exact_db"],
            "test_accuracy": ctx.results["model"]["test_accuracy"]}
        if len(images) and n:
            met = reconstruction_metrics(
                np.clip(images, 0.0, 1.0).astype(np.float32), np.zeros(len(images), np.int64),
                ctx.data.x[ids], np.zeros(n, np.int64), ctx.data.x[ctx.data.train].mean(0),
                data_range=1.0, win_size=ssim_window(shape))
            near, pooled = met.psnr >= t["near_exact_db"], met.pooled()
            out.update({"near_exact": int(near.sum()), "share": float(near.sum() / n),
                        "psnr_median": pooled.psnr_median, "ssim": pooled.ssim,
                        "identifiability": pooled.identifiability})
            atomic_save_npz(ctx.run_dir / IMPRINT_NAME,
                            image=np.clip(images, 0, 1).astype(np.float32), bin=bins,
                            true_id=ids[met.matched], psnr=met.psnr, ssim=met.ssim,
                            true_image=ctx.data.x[ids[met.matched]].astype(np.float32),
                            round=np.full(len(images), r))
        else:
            out.update({"near_exact": 0, "share": 0.0 if n else None, "psnr_median": None,
                        "ssim": None, "identifiability": None})
            notes.append("no bin of the block changed: nothing to read")
        ctx.results["malicious_server"] = {**out, "seconds": time.perf_counter() - t0,
                                           "notes": notes}

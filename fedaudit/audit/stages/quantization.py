"""Post-training quantization of the global model and r_Qn per quantizer
(docs/algorithms.md section 2; results.json ``quantization``).

Decisions the paper leaves open: r_Qn candidates are the trajectory checkpoints quantized
on the FIXED grid of the released (last) checkpoint (``quantize_trajectory``); a candidate
is the whole quantized configuration (quantized weights and the float tensors with them).
Per run (the main seed and each extra seed, on its own release's grid) the
``keep_lowest`` distinct candidates of lowest test loss give one r; ``rqn`` is the median
over runs.  The quantized releases, with their r_Qn, are left in ``ctx.releases``
(:class:`fedaudit.audit.products.QuantizedRelease`) for the ``quantized`` attack target.
"""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np

from fedaudit.audit.context import AuditContext, Trajectory
from fedaudit.audit.products import QuantizedRelease
from fedaudit.audit.stages.base import Stage, register_stage
from fedaudit.quant import quantize, quantize_trajectory, quantizer_info, rqn_over_runs
from fedaudit.rundir import load_checkpoint
from fedaudit.training import per_sample_losses

log = logging.getLogger("fedaudit")


def _candidates(traj: Trajectory, spec: str) -> list[Path]:
    paths = list(traj.checkpoints)
    if spec.startswith("last-"):
        paths = paths[-int(spec.split("-", 1)[1]):]
    return paths


@register_stage
class Quantization(Stage):
    name = "quantization"
    order = 100
    writes = ("quantization",)
    timing = "audit_seconds"

    def enabled(self, scenario):
        return scenario.audit.quantization.enabled

    def run(self, ctx: AuditContext) -> None:
        cfg = ctx.scenario.audit.quantization
        model, device = ctx.model(), ctx.device
        xt, yt = ctx.samples(ctx.data.test)
        trajectories = [[load_checkpoint(p) for p in _candidates(t, cfg.checkpoints)]
                        for t in (ctx.trajectory, *ctx.extra)]
        release = trajectories[0][-1]
        names, made = cfg.quantizers, []
        for i, name in enumerate(names):
            ctx.progress.step("quantization", i, len(names), name)
            spec = quantizer_info(name)
            per_run = []
            for traj in trajectories:
                candidates, _ = quantize_trajectory(traj, name)
                rows = []
                for cand in candidates:
                    model.load_state_dict(cand)
                    rows.append(per_sample_losses(model, xt, yt, device=device)[0])
                per_run.append(np.stack(rows))
            est = rqn_over_runs(per_run, cfg.keep_lowest)
            q_release = quantize(release, name)
            model.load_state_dict(q_release)
            rel_losses, correct = per_sample_losses(model, xt, yt, device=device)
            q = ctx.releases[name] = QuantizedRelease(
                name, spec.bits, spec.sparsity, q_release, est,
                sum(len(t) for t in trajectories), float(correct.mean()),
                float(rel_losses.mean()))
            made.append(q)
            log.info("quantizer %d of %d, %s: r_Qn=%s (median of %d run(s); %d kept of %d "
                     "distinct of %d), acc=%.4f", i + 1, len(names), name, est.median,
                     len(est.runs), q.n_kept, q.n_distinct, q.n_candidates, q.test_accuracy)
        ctx.progress.step("quantization", len(names), len(names), "done")
        ctx.results["quantization"] = [q.entry() for q in made]

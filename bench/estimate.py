"""Cost estimate of ``scenarios/cifar10-resnet18.toml`` from measurements on this machine.

No GPU and no CIFAR-10 copy are needed (nor present here): the measurements use random
CIFAR-sized images, and the GPU figures are an EXTRAPOLATION under a stated speed-up
assumption, not a measurement.

* :func:`resnet18_step_costs` -- measured: median time of one local training step of the
  scenario's ResNet-18 (GroupNorm, 3x32x32, 10 classes, batch 64, SGD momentum 0.9,
  weight decay 5e-4), plain and GNQ-audited (``GhostAuditor`` with the automatic per-layer
  choice, and forced ``strategy="materialize"``), plus the forward time per sample at the
  oracle's batch 512 and the FLOPs of one step (``torch.utils.flop_counter``). One local
  epoch of 5,000 images is ``ceil(5000 / 64) = 79`` steps: it is extrapolated from the
  median step (a full audited epoch would take tens of minutes on 2 cores).
* :func:`scenario_work` -- how many training-sample steps and forward passes the scenario
  does, counted from its settings (CIFAR-10: 60,000 images, train + test sets).
* :func:`cifar10_resnet18_estimate` -- combines both: projected CPU time on this machine
  (measured step times x work) and GPU time for an ASSUMED sustained GPU throughput
  (default 5, 10, 20 TFLOP/s on the matmuls and convolutions of the plain step), times the
  audited / plain step-time ratio measured here for the audited variants.

Why FLOPs and not "GPU = N x this CPU": this machine is shared, and its step times vary by
2-3x with other jobs' load; the FLOP count of a step does not, and the audited / plain
ratio (both measured in the same interleaved repeats) moves much less than either time.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

import torch
import torch.nn.functional as F

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.gnq import _interleaved_medians  # noqa: E402
from fedaudit.gnq import GhostAuditor  # noqa: E402
from fedaudit.models import build_model  # noqa: E402
from fedaudit.scenario import Scenario  # noqa: E402

CIFAR10_IMAGES = 60_000  # torchvision train (50,000) + test (10,000), as fedaudit loads it
EPOCH_IMAGES = 5_000
GPU_TFLOPS = (5.0, 10.0, 20.0)


def _flops(fn) -> int:
    """FLOPs of the matmuls and convolutions ``fn`` runs (``torch.utils.flop_counter``;
    elementwise ops, norms and copies such as ``unfold`` are not counted)."""
    from torch.utils.flop_counter import FlopCounterMode

    with FlopCounterMode(display=False) as counter:
        fn()
    return counter.get_total_flops()


def resnet18_step_costs(batch: int = 64, repeats: int = 3, warmup: int = 1, seed: int = 0,
                        strategies: tuple[str, ...] = ("auto", "materialize"),
                        fwd_batch: int = 512) -> dict:
    """Measured seconds per training step (plain / audited) and per forward sample."""
    torch.manual_seed(seed)
    model = build_model("resnet18", in_channels=3, image_size=32, num_classes=10, seed=seed)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, weight_decay=5e-4)
    x = torch.rand(batch, 3, 32, 32)
    y = torch.randint(0, 10, (batch,))
    auditors = {s: GhostAuditor(model, lam=1e-2, loss_reduction="mean", strategy=s)
                for s in strategies}

    def plain() -> None:
        opt.zero_grad(set_to_none=True)
        F.cross_entropy(model(x), y).backward()
        opt.step()

    def audited(auditor: GhostAuditor) -> None:
        opt.zero_grad(set_to_none=True)
        with auditor.capture():
            F.cross_entropy(model(x), y).backward()
        auditor.scores()
        opt.step()

    fns = {"plain": plain, **{f"gnq_{s}": (lambda a=a: audited(a)) for s, a in auditors.items()}}
    t = _interleaved_medians(fns, repeats, warmup)
    snapshot = {k: v.clone() for k, v in model.state_dict().items()}
    flops = {k: _flops(fn) for k, fn in fns.items()}
    model.load_state_dict(snapshot)
    model.eval()
    xf = torch.rand(fwd_batch, 3, 32, 32)
    with torch.inference_mode():
        tf = _interleaved_medians({"fwd": lambda: model(xf)}, repeats, warmup)["fwd"]
        fwd_flops = _flops(lambda: model(xf[:8])) / 8
    model.train()
    steps = math.ceil(EPOCH_IMAGES / batch)
    out = {"batch": batch, "repeats": repeats, "step_gflop": flops["plain"] / 1e9,
           "plain_step_s": t["plain"], "cpu_gflops_per_s": flops["plain"] / 1e9 / t["plain"],
           "forward_ms_per_sample": 1e3 * tf / fwd_batch, "forward_batch": fwd_batch,
           "forward_gflop_per_sample": fwd_flops / 1e9,
           "epoch_steps": steps, "epoch_plain_s": steps * t["plain"]}
    for s in strategies:
        out[f"gnq_{s}_step_s"] = t[f"gnq_{s}"]
        out[f"gnq_{s}_ratio"] = t[f"gnq_{s}"] / t["plain"]
        out[f"gnq_{s}_flop_ratio"] = flops[f"gnq_{s}"] / flops["plain"]
        out[f"epoch_gnq_{s}_s"] = steps * t[f"gnq_{s}"]
    return out


def scenario_work(scenario: Scenario, dataset_images: int = CIFAR10_IMAGES,
                  resmia_steps: int = 5) -> dict:
    """Counts of the scenario's work (upper bounds where duplicates may collapse).

    Training: rounds x clients x local_epochs x (train split / clients) sample steps.
    Forwards: the server's per-round evaluation on ``test``; PTQ: every distinct quantized
    candidate of the last-N checkpoints plus the release, per quantizer, on ``test`` (at
    most N + 1 each); attacks: per target (global and each quantized release) every
    member and non-member (members_per_client each per client, at most) times the queries
    per sample (Res-MIA ``K + 1``, each baseline 1); Res-MIA confidence curves once more on
    the global model.
    """
    d, fed, tr = scenario.data, scenario.federation, scenario.train
    q, att = scenario.audit.quantization, scenario.attack
    test = round(dataset_images * d.test_fraction)
    holdout = round(dataset_images * d.holdout_fraction)
    train = dataset_images - test - holdout
    per_client = train // fed.num_clients
    train_steps = fed.rounds * fed.num_clients * tr.local_epochs * per_client
    ckpts = fed.rounds if q.checkpoints == "all" else min(
        fed.rounds, int(q.checkpoints.split("-", 1)[1]))
    n_q = len(q.quantizers) if q.enabled else 0
    ptq = n_q * (ckpts + 1) * test
    members = fed.num_clients * min(att.members_per_client or per_client, per_client)
    queries = sum(resmia_steps + 1 if m == "resmia" else 1 for m in att.methods)
    targets = (1 if "global" in att.targets else 0) + (
        n_q if "quantized" in att.targets else 0)
    attack = (targets * 2 * members * queries if att.enabled else 0)
    curves = 2 * members * (resmia_steps + 1) if att.enabled and "resmia" in att.methods else 0
    evals = fed.rounds * test
    return {"train_split": train, "per_client": per_client, "test_split": test,
            "train_sample_steps": train_steps,
            "train_batches": fed.rounds * fed.num_clients * tr.local_epochs
            * math.ceil(per_client / tr.batch_size),
            "forwards_eval": evals, "forwards_ptq_max": ptq, "forwards_attack_max": attack,
            "forwards_curves_max": curves, "forwards_total_max": evals + ptq + attack + curves,
            "audit_client_gnq": scenario.audit.gnq.client}


def cifar10_resnet18_estimate(costs: dict, gpu_tflops: tuple[float, ...] = GPU_TFLOPS) -> dict:
    """Projected wall time of ``cifar10-resnet18`` -- an ESTIMATE, not a measurement.

    CPU (this machine): batches x measured step time + forwards x measured forward time
    per sample.

    GPU: (training-sample steps x plain-step FLOPs per sample x the audited / plain step
    TIME ratio measured here + forwards x forward FLOPs per sample) / an assumed sustained
    throughput. Assumptions, stated: the GPU sustains ``gpu_tflops`` of counted FLOPs on
    this model at batch 64 (5-20 TFLOP/s, i.e. about 1,500-6,000 training images/s, is
    meant to cover fp32/TF32 on recent data-centre GPUs at this small batch and image size,
    where GroupNorm and other memory-bound layers that the FLOP count ignores take a large
    share of the time; peak figures are many times higher); the audit slows a step on the GPU by the same factor as on this CPU; Flower and
    Ray add a fixed ~20 s and well under a second per round (measured here), negligible at
    this size. Four clients sharing a GPU (``num_gpus = 0.25``) do not add compute.
    """
    from fedaudit.config import load_scenario

    work = scenario_work(load_scenario("cifar10-resnet18"))
    fwd_cpu = work["forwards_total_max"] * costs["forward_ms_per_sample"] / 1e3
    train_flop_per_sample = costs["step_gflop"] * 1e9 / costs["batch"]
    fwd_flop = work["forwards_total_max"] * costs["forward_gflop_per_sample"] * 1e9
    out: dict = {"work": work, "label": "ESTIMATE (extrapolated, not measured)",
                 "train_pflop_plain": work["train_sample_steps"] * train_flop_per_sample / 1e15,
                 "forward_pflop": fwd_flop / 1e15}
    variants = {"plain": 1.0}
    variants.update({k[len("gnq_"):-len("_ratio")]: v for k, v in costs.items()
                     if k.startswith("gnq_") and k.endswith("_ratio")
                     and not k.endswith("_flop_ratio")})
    for name, ratio in variants.items():
        key = "plain" if name == "plain" else f"gnq_{name}"
        train_cpu = work["train_batches"] * costs["plain_step_s"] * ratio * (
            64 / costs["batch"])
        row = {"time_ratio_vs_plain": ratio,
               "cpu_hours": (train_cpu + fwd_cpu) / 3600, "cpu_train_hours": train_cpu / 3600,
               "cpu_forward_hours": fwd_cpu / 3600}
        flop = work["train_sample_steps"] * train_flop_per_sample * ratio + fwd_flop
        for t in gpu_tflops:
            row[f"gpu_hours_at_{t:g}_tflops"] = flop / (t * 1e12) / 3600
        out[key] = row
    out["assumed_gpu_tflops"] = list(gpu_tflops)
    out["implied_gpu_train_img_per_s"] = {
        f"{t:g} TFLOP/s": t * 1e12 / train_flop_per_sample for t in gpu_tflops}
    return out


if __name__ == "__main__":
    import json

    c = resnet18_step_costs(repeats=1, warmup=1, strategies=("materialize",))
    print(json.dumps(c, indent=1))
    print(json.dumps(cifar10_resnet18_estimate(c), indent=1))

"""GNQ benchmarks (never part of the test suite). Run: ``python bench/gnq.py``.

* :func:`overhead_ratio` -- median time of one audited local training step
  (:class:`~fedaudit.gnq.GhostAuditor` hooks, ghost kernels and the B x B solve) divided by
  the median time of the same plain step (:data:`OVERHEAD_MODELS`: the quickstart CNN on
  1x8x8 and 3x32x32, shakespeare-secrets' transformer and a 4-layer one at sequence
  length 128, ResNet-18), with its FLOP floors.
* where the audited step's extra time goes, per layer kind and phase: bench/gnq_profile.py.
* :func:`memory_ratio` -- peak extra memory of ``gnq_scores(method="naive")`` divided by
  that of ``method="ghost"`` on an MLP with > 1M parameters, batch 32.
* :func:`speedup_vs_naive` -- median time of ``gnq_scores`` naive / ghost (MLP and CNN).

Timings: medians over repeats; the variants being compared are interleaved in every
repeat so that load from other processes hits them alike. Thread count is torch's
default for the machine (not changed here).
"""

from __future__ import annotations

import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable

import torch
import torch.nn as nn
import torch.nn.functional as F

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from fedaudit.gnq import GhostAuditor, KERNELS, gnq_scores  # noqa: E402

BATCH = 32


def small_cnn(in_channels: int = 1, num_classes: int = 10) -> nn.Module:
    """The quickstart scenario's CNN for 8x8 inputs, ``fedaudit.models.build_model("cnn",
    image_size=8)``: conv(1->16,3,p1)-GN(4,16)-ReLU-conv(16->32,3,p1)-GN(8,32)-ReLU-
    maxpool2-flatten-Linear(512->64)-ReLU-Linear(64->10)."""
    from fedaudit.models import build_model

    return build_model("cnn", in_channels=in_channels, image_size=8, num_classes=num_classes)


def big_mlp() -> nn.Module:
    """784-1024-256-10 MLP with ReLU: 1,068,810 parameters."""
    return nn.Sequential(nn.Linear(784, 1024), nn.ReLU(), nn.Linear(1024, 256), nn.ReLU(),
                         nn.Linear(256, 10))


def _n_params(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


def _interleaved_medians(fns: dict[str, Callable[[], object]], repeats: int,
                         warmup: int) -> dict[str, float]:
    for _ in range(warmup):
        for fn in fns.values():
            fn()
    times: dict[str, list[float]] = {k: [] for k in fns}
    for _ in range(repeats):
        for k, fn in fns.items():
            t0 = time.perf_counter()
            fn()
            times[k].append(time.perf_counter() - t0)
    return {k: statistics.median(v) for k, v in times.items()}


#: the steps whose overhead is measured: key suffix -> set-up of :func:`step_setup`
OVERHEAD_MODELS: dict[str, dict] = {
    "": dict(model="cnn", channels=1, size=8, batch=BATCH),          # quickstart, digits 8x8
    "_cnn32": dict(model="cnn", channels=3, size=32, batch=BATCH),   # the same CNN, CIFAR-sized
    # shakespeare-secrets' model: width 64, 2 layers, 4 heads, seq_len 64, batch 16, Adam
    # (vocabulary: tiny-shakespeare's 65 characters + the 10 digits its secrets add)
    "_transformer": dict(model="transformer", layers=2, seq_len=64, batch=16),
    "_transformer4": dict(model="transformer", layers=4, seq_len=128, batch=16),
    "_resnet18": dict(model="resnet18", channels=3, size=32, batch=32),  # GroupNorm
}
TRANSFORMER = dict(vocab=75, width=64, heads=4)


def step_setup(key: str, seed: int = 0, device: str = "cpu"):
    """(model, optimizer, x, y, label) of the local step ``OVERHEAD_MODELS[key]``: the CNNs
    with SGD (lr 0.05, momentum 0.9) on N(0, 1) images, the transformers with Adam (lr
    0.003, shakespeare-secrets' optimiser) on uniform random tokens."""
    from fedaudit.models import build_model, build_text_model

    spec = OVERHEAD_MODELS[key]
    torch.manual_seed(seed)
    B = spec["batch"]
    if spec["model"] == "transformer":
        V, L = TRANSFORMER["vocab"], spec["seq_len"]
        model = build_text_model("transformer", vocab_size=V, seq_len=L,
                                 width=TRANSFORMER["width"], layers=spec["layers"],
                                 heads=TRANSFORMER["heads"]).to(device)
        opt = torch.optim.Adam(model.parameters(), lr=0.003)
        x = torch.randint(0, V, (B, L)).to(device)
        y = torch.randint(0, V, (B, L)).to(device)
        label = f"transformer {spec['layers']} layers, seq {L}"
    else:
        c, n = spec["channels"], spec["size"]
        model = build_model(spec["model"], in_channels=c, image_size=n,
                            num_classes=10).to(device)
        opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
        x = torch.randn(B, c, n, n).to(device)
        y = torch.randint(0, 10, (B,)).to(device)
        label = f"{spec['model']} {c}x{n}x{n}"
    return model, opt, x, y, label


def _sync(device: str) -> None:
    if str(device).startswith("cuda"):
        torch.cuda.synchronize()


def _flops(fn: Callable[[], object]) -> int:
    """Matmul and convolution FLOPs ``fn`` runs (``torch.utils.flop_counter``)."""
    from torch.utils.flop_counter import FlopCounterMode

    with FlopCounterMode(display=False) as counter:
        fn()
    return counter.get_total_flops()


def _layer_flops(model: nn.Module, x: torch.Tensor) -> tuple[int, int]:
    """(Gram FLOPs, per-sample gradient FLOPs) of :func:`gram_flops` and
    :func:`persample_flops`, from one forward with hooks."""
    B = x.shape[0]
    total = persample = 0
    handles = []

    def hook(module: nn.Module, inputs: tuple, output: torch.Tensor) -> None:
        nonlocal total, persample
        params = [p for p in module.parameters(recurse=False) if p.requires_grad]
        if isinstance(module, (nn.Linear, nn.Conv1d, nn.Conv2d)):
            w = module.weight
            g = getattr(module, "groups", 1)
            p_, d = w.shape[0] // g, w[0].numel()  # per group: p x d
            T = output[0].numel() // w.shape[0]  # positions per sample
            total += 2 * B * B * g * min(T * T * (p_ + d), p_ * d)
            if p_ * d < T * T * (p_ + d) and T > 1:
                persample += 2 * B * T * g * p_ * d
            if module.bias is not None:
                total += 2 * B * B * module.bias.numel()
        else:
            total += 2 * B * B * sum(p.numel() for p in params)

    for m in model.modules():
        if any(True for _ in m.parameters(recurse=False)):
            handles.append(m.register_forward_hook(hook))
    try:
        with torch.no_grad():
            model(x)
    finally:
        for h in handles:
            h.remove()
    return total, persample


def gram_flops(model: nn.Module, x: torch.Tensor) -> int:
    """FLOPs of the cheapest exact Gram matrix K = G G^T for one batch, layer by layer.

    For a weight p x d applied at T positions (Linear: T = 1 on vectors, the sequence
    length on sequences; Conv: output positions) the cheaper of the ghost form,
    2 B^2 T^2 (p + d), and the Gram of the materialised per-sample gradients, 2 B^2 p d
    (their materialisation, 2 B T p d, :func:`persample_flops`, replaces the weight-gradient
    pass with ``fuse_grad``); a bias or any other layer's parameters (norms, embeddings):
    2 B^2 x (their count). This is the floor's numerator.
    """
    return _layer_flops(model, x)[0]


def persample_flops(model: nn.Module, x: torch.Tensor) -> int:
    """FLOPs of materialising per-sample weight gradients, 2 B T p d, over the Linear and
    Conv layers with T > 1 positions whose cheapest exact Gram form is the materialised
    one (:func:`gram_flops`): the work an audit that keeps autograd's own weight gradient
    (no ``fuse_grad``) does beside it."""
    return _layer_flops(model, x)[1]


def overhead_ratio(key: str = "", repeats: int = 300, warmup: int = 30, seed: int = 0,
                   device: str = "cpu", fuse_grad: bool = False) -> dict:
    """Audited / plain median step time (zero_grad, forward, loss, backward, optimizer step)
    of the step ``OVERHEAD_MODELS[key]`` (:func:`step_setup`).

    The loss is ``train_local``'s (:func:`fedaudit.training.losses.batch_loss`), the
    audited step the one ``train_local`` runs (``fuse_grad`` as there: off by default)
    and the float64 solve. ``floor``: the analytic lower bound on the ratio for exact GNQ,
    1 + Gram FLOPs / step FLOPs, Gram FLOPs from :func:`gram_flops` (cheapest exact form
    per layer) and the plain step's matmul and convolution FLOPs counted by
    ``torch.utils.flop_counter``. The Gram products are float64 (precision on
    near-duplicates, :func:`fedaudit.gnq.kernels.gram`), whose FLOPs cost about twice
    float32's on CPU: ``floor_float64`` = 1 + 2 x Gram / step. Both floors take the
    per-sample gradients as free (they replace autograd's weight gradient only with
    ``fuse_grad``); ``floor_unfused`` adds the FLOPs of materialising them beside
    autograd's (:func:`persample_flops`) to ``floor_float64``. (No counted FLOPs of the
    audited step: ``torch.utils.flop_counter`` counts a grouped ``convolution_backward``
    as if it were dense, B times too many for the batch-folded per-sample gradients.)
    """
    from fedaudit.training.losses import batch_loss

    model, opt, x, y, label = step_setup(key, seed, device)
    auditor = GhostAuditor(model, lam=1e-2, loss_reduction="mean", fuse_grad=fuse_grad)

    def plain() -> None:
        opt.zero_grad(set_to_none=True)
        batch_loss(model(x), y).backward()
        opt.step()
        _sync(device)

    def audited() -> torch.Tensor:
        opt.zero_grad(set_to_none=True)
        with auditor.capture():
            batch_loss(model(x), y).backward()
        opt.step()
        scores = auditor.scores().cpu()  # the client ships them to the server
        _sync(device)
        return scores

    step_flops = _flops(plain)
    n_params = sum(p.numel() for p in model.parameters() if p.requires_grad)
    g_flops = gram_flops(model, x)
    m_flops = persample_flops(model, x)
    t = _interleaved_medians({"plain": plain, "audited": audited}, repeats, warmup)
    return {
        "model": label,
        "device": str(device),
        "fuse_grad": fuse_grad,
        "batch": x.shape[0],
        "params": n_params,
        "plain_step_ms": 1e3 * t["plain"],
        "audited_step_ms": 1e3 * t["audited"],
        "overhead_ratio": t["audited"] / t["plain"],
        "step_gflop": step_flops / 1e9,
        "gram_gflop": g_flops / 1e9,
        "persample_gflop": m_flops / 1e9,
        "floor": 1 + g_flops / step_flops,
        "floor_float64": 1 + 2 * g_flops / step_flops,
        "floor_unfused": 1 + (2 * g_flops + m_flops) / step_flops,
        "repeats": repeats,
    }


def _peak_extra_bytes(fn: Callable[[], object]) -> int:
    """Peak of (bytes allocated - bytes freed) by torch's CPU allocator while fn runs.

    Replays the allocator events recorded by ``torch.profiler`` (``profile_memory=True``)
    in time order. Counts every tensor storage; misses memory that libraries allocate
    outside torch's allocator (BLAS/LAPACK workspaces, Python objects).
    """
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU],
                                profile_memory=True) as prof:
        fn()
    events = sorted(
        (e.start_ns(), e.nbytes())
        for e in prof.profiler.kineto_results.events()
        if e.name() == "[memory]" and e.device_type() == torch.autograd.DeviceType.CPU
    )
    current = peak = 0
    for _, nbytes in events:
        current += nbytes
        peak = max(peak, current)
    return peak


_RSS_CHILD = r"""
import sys, torch
sys.path.insert(0, sys.argv[2])
from bench.gnq import big_mlp, BATCH
from fedaudit.gnq import gnq_scores

def status_kib(key):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])

torch.manual_seed(0)
model = big_mlp(); x = torch.randn(BATCH, 784); y = torch.randint(0, 10, (BATCH,))
gnq_scores(model, x[:2], y[:2], method=sys.argv[1])  # imports and one-off buffers
baseline = status_kib("VmRSS")
with open("/proc/self/clear_refs", "w") as f:
    f.write("5")  # reset the peak-RSS high-water mark VmHWM to the current RSS
gnq_scores(model, x, y, method=sys.argv[1])
print(status_kib("VmHWM") - baseline)
"""


def _rss_peak_extra_kib(method: str) -> int:
    """Rise of peak RSS (VmHWM, reset via /proc/self/clear_refs) over the RSS before the
    call, in a fresh interpreter after a warm-up call (Linux only)."""
    res = subprocess.run([sys.executable, "-c", _RSS_CHILD, method, str(ROOT)],
                         capture_output=True, text=True, check=True, cwd=ROOT)
    return int(res.stdout.strip().splitlines()[-1])


def memory_ratio(seed: int = 0, with_rss: bool = True) -> dict:
    """Peak extra memory naive / ghost for gnq_scores on the 1.07M-parameter MLP, batch 32.

    Primary measure: torch CPU allocator events replayed from the profiler
    (:func:`_peak_extra_bytes`), after a warm-up call so one-off buffers are excluded.
    Cross-check (Linux): the rise of the peak resident set size in a fresh subprocess per
    method (coarser: page granularity, includes non-torch allocations such as BLAS/LAPACK
    workspaces, excludes memory the allocator reserved but never touched).
    """
    torch.manual_seed(seed)
    model = big_mlp()
    x = torch.randn(BATCH, 784)
    y = torch.randint(0, 10, (BATCH,))
    out: dict = {"mlp_params": _n_params(model)}
    for method in ("naive", "ghost"):
        gnq_scores(model, x, y, method=method)  # warm-up
        out[f"{method}_peak_extra_MiB"] = _peak_extra_bytes(
            lambda: gnq_scores(model, x, y, method=method)) / 2**20
    out["memory_ratio"] = out["naive_peak_extra_MiB"] / out["ghost_peak_extra_MiB"]
    if with_rss and os.path.exists("/proc/self/clear_refs"):
        for method in ("naive", "ghost"):
            out[f"{method}_rss_rise_MiB"] = _rss_peak_extra_kib(method) / 1024
        ghost_rss = max(out["ghost_rss_rise_MiB"], 1 / 1024)
        out["memory_ratio_rss"] = out["naive_rss_rise_MiB"] / ghost_rss
    return out


def speedup_vs_naive(repeats: int = 7, seed: int = 0) -> dict:
    """Median time of gnq_scores naive / ghost, on the 1M MLP and on the small CNN."""
    torch.manual_seed(seed)
    out: dict = {}
    cases = {
        "mlp": (big_mlp(), torch.randn(BATCH, 784)),
        "cnn": (small_cnn(), torch.randn(BATCH, 1, 8, 8)),
    }
    for name, (model, x) in cases.items():
        y = torch.randint(0, 10, (BATCH,))
        t = _interleaved_medians(
            {m: (lambda m=m: gnq_scores(model, x, y, method=m)) for m in ("naive", "ghost")},
            repeats, warmup=1,
        )
        out[f"{name}_naive_ms"] = 1e3 * t["naive"]
        out[f"{name}_ghost_ms"] = 1e3 * t["ghost"]
        out[f"{name}_speedup"] = t["naive"] / t["ghost"]
    out["speedup_vs_naive"] = out["mlp_speedup"]
    return out


def machine_facts() -> dict:
    return {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "platform": platform.platform(),
        "processor": platform.processor() or platform.machine(),
        "cpu_count": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "load_avg_1m": os.getloadavg()[0],
        "cuda": torch.cuda.is_available(),
    }


def _print_table(title: str, rows: dict) -> None:
    print(f"\n{title}")
    width = max(len(k) for k in rows)
    for k, v in rows.items():
        val = f"{v:.4g}" if isinstance(v, float) else str(v)
        print(f"  {k:<{width}}  {val}")


def main() -> None:
    _print_table("machine", machine_facts())
    for key in OVERHEAD_MODELS:
        if key != "_resnet18":
            _print_table(f"overhead_ratio{key}", overhead_ratio(key, repeats=50, warmup=5))
    _print_table("memory_ratio (MLP > 1M params, batch 32)", memory_ratio())
    _print_table("speedup_vs_naive (batch 32)", speedup_vs_naive())
    _print_table("machine (after)", {"load_avg_1m": os.getloadavg()[0]})


if __name__ == "__main__":
    main()

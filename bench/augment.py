"""What ``train.augment`` costs local training (never part of the test suite).
Run: ``python bench/augment.py [--repeats 15] [--samples 300]``.

One local epoch of :func:`fedaudit.training.train_local` (the clients' own loop: a client of
``--samples`` samples, batch 32, Adam) with ``train.augment`` = none, flip and flip+crop
(padding 4), on ``cifar10-audit``'s CNN (width 16, 3x32x32) and quickstart's CNN (1x8x8);
also DP-SGD (Opacus, noise 1, clip 1) on the 32x32 CNN.  Medians over repeats, the three
augmentations interleaved in every repeat so load from other work hits them alike; the
figure is the ratio to the epoch without augmentation.  The load average before and after
is printed: on a shared machine treat a few percent as noise.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

AUGMENTS = ("none", "flip", "flip+crop")
#: name -> (model options, channels, image size, DP-SGD)
SETUPS = {
    "CNN 3x32x32 (cifar10-audit)": ({"width": 16}, 3, 32, False),
    "CNN 1x8x8 (quickstart)": ({}, 1, 8, False),
    "CNN 3x32x32, DP-SGD": ({"width": 16}, 3, 32, True),
}


def epoch_times(options: dict, channels: int, size: int, dp: bool, samples: int,
                repeats: int) -> dict[str, float]:
    """Median seconds of one local epoch per augmentation (interleaved repeats)."""
    import numpy as np
    import torch

    from fedaudit.models import build_model
    from fedaudit.scenario import TrainConfig
    from fedaudit.training import train_local

    rng = np.random.default_rng(0)
    x = rng.normal(size=(samples, channels, size, size)).astype(np.float32)
    y = rng.integers(0, 10, samples)
    ids = np.arange(samples)
    base = TrainConfig(local_epochs=1, batch_size=32, optimizer="adam", lr=1e-3,
                       device="cpu")
    noise = {"noise_multiplier": 1.0, "clip_norm": 1.0} if dp else None

    def epoch(augment: str) -> None:
        model = build_model("cnn", in_channels=channels, image_size=size, num_classes=10,
                            seed=0, **options)
        train_local(model, x, y, ids, dataclasses.replace(base, augment=augment), seed=1,
                    device=torch.device("cpu"), dp=noise)

    for a in AUGMENTS:  # warm-up
        epoch(a)
    times: dict[str, list[float]] = {a: [] for a in AUGMENTS}
    for _ in range(repeats):
        for a in AUGMENTS:
            t0 = time.perf_counter()
            epoch(a)
            times[a].append(time.perf_counter() - t0)
    return {a: statistics.median(v) for a, v in times.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=15)
    ap.add_argument("--samples", type=int, default=300, help="the client's samples")
    args = ap.parse_args()
    import torch
    from rich.console import Console
    from rich.table import Table

    torch.set_num_threads(1)  # as a client actor with num_cpus = 1
    load_before = os.getloadavg()[0]
    table = Table(title=f"One local epoch ({args.samples} samples, batch 32, 1 thread): "
                        f"median of {args.repeats}")
    for col in ("step", "none ms", "flip ms", "flip+crop ms", "flip / none",
                "flip+crop / none"):
        table.add_column(col, justify="left" if col == "step" else "right", no_wrap=True)
    for name, (options, channels, size, dp) in SETUPS.items():
        t = epoch_times(options, channels, size, dp, args.samples, args.repeats)
        table.add_row(name, *(f"{1e3 * t[a]:.1f}" for a in AUGMENTS),
                      f"{t['flip'] / t['none']:.3f}", f"{t['flip+crop'] / t['none']:.3f}")
    Console().print(table)
    print(f"load average (1 min): {load_before:.2f} before, {os.getloadavg()[0]:.2f} after")


if __name__ == "__main__":
    main()

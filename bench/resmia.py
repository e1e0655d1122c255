"""Res-MIA cost benchmark (never part of the test suite).

:func:`resmia_cost` -- time per sample of ``resmia_scores`` divided by the time per sample
of one plain forward pass (``Oracle.predict_proba``) through the SAME oracle (same model,
same ``batch_size``, eval mode, inference mode). Res-MIA sends ``K + 1`` queries per
sample (the original and K eroded copies, docs/algorithms.md section 3), so the ratio should sit near
``K + 1``; the goal is ``<= K + 1`` (the erosion itself -- average pooling and
nearest-neighbour upsampling -- should cost next to nothing against the forward passes).
The inputs are random images of the right shape: the cost does not depend on the values.
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from attacks import Oracle  # noqa: E402
from attacks.membership.resmia import default_sizes, resmia_scores  # noqa: E402
from bench.gnq import _interleaved_medians  # noqa: E402
from fedaudit.models import build_model  # noqa: E402


def resmia_cost(model_name: str = "cnn", in_channels: int = 1, image_size: int = 8,
                n: int = 1024, batch_size: int = 512, repeats: int = 7, warmup: int = 1,
                seed: int = 0, device: str = "cpu") -> dict:
    """Res-MIA seconds per sample / forward seconds per sample, same oracle.

    ``batch_size`` is the oracle's batch (512 = the ``[attack] batch_size`` default);
    Res-MIA streams ``chunk = batch_size // (K + 1)`` samples' eroded copies per batch, so
    both measurements run full batches. ``repeats`` interleaved repeats, medians.
    """
    torch.manual_seed(seed)
    model = build_model(model_name, in_channels=in_channels, image_size=image_size,
                        num_classes=10, seed=seed)
    oracle = Oracle(model, batch_size=batch_size, device=device)
    x = torch.rand(n, in_channels, image_size, image_size)
    k = len(default_sizes(image_size, image_size))
    oracle.reset_queries()
    resmia_scores(oracle, x[:batch_size])
    queries = oracle.queries / min(n, batch_size)
    t = _interleaved_medians({"forward": lambda: oracle.predict_proba(x),
                              "resmia": lambda: resmia_scores(oracle, x)}, repeats, warmup)
    return {
        "model": f"{model_name} {in_channels}x{image_size}x{image_size}",
        "device": str(device), "n": n, "batch_size": batch_size, "repeats": repeats,
        "resmia_steps": k, "queries_per_sample": queries,
        "forward_ms_per_sample": 1e3 * t["forward"] / n,
        "resmia_ms_per_sample": 1e3 * t["resmia"] / n,
        "resmia_cost_ratio": t["resmia"] / t["forward"],
        "goal_max": k + 1,
    }


if __name__ == "__main__":
    print(resmia_cost())

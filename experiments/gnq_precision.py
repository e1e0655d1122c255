"""In-run GNQ precision on near-duplicate batches; the table of docs/validation.md section 7.

    python experiments/gnq_precision.py

The quickstart CNN (1x8x8, float32, seed 0) on batches of 32 images: 4 random bases, each
repeated 8 times, plus delta * N(0, 1) noise. For each delta, the maximum relative error of
the client-side GNQ (``GhostAuditor`` as ``train_local`` builds it) against the naive
float64 reference (torch.func per-sample gradients of a float64 copy of the model,
parameter-space solve), for three ways of forming K = G G^T from the same float32 tensors:

* ``float32 Gram``: every Gram product accumulated in float32 (the code before issue 19);
* ``float64 Gram`` (now): per-sample quantities in float32, the B x B products in float64;
* ``all float64``: the kernels' inputs cast to float64 (``gram_dtype=torch.float64``).
"""

from __future__ import annotations

import copy
import sys
from contextlib import ExitStack, contextmanager
from unittest import mock

import torch
import torch.nn.functional as F

import fedaudit.gnq.kernels as kernels
from fedaudit.gnq import GhostAuditor, gnq_scores
from fedaudit.models import build_model


def _float32_gram(X: torch.Tensor) -> torch.Tensor:
    return (X @ X.T).to(torch.float64)


@contextmanager
def _float32_grams():
    """``gram`` replaced by :func:`_float32_gram` in every module of fedaudit.gnq that
    holds it (the kernel modules each import it by name)."""
    with ExitStack() as stack:
        for name, module in list(sys.modules.items()):
            if name.startswith("fedaudit.gnq") and getattr(module, "gram", None) is kernels.gram:
                stack.enter_context(mock.patch.object(module, "gram", _float32_gram))
        yield


def main() -> None:
    torch.set_num_threads(1)
    print("| delta | float32 Gram | float64 Gram (now) | all float64 | reference GNQ range |")
    print("|---|---|---|---|---|")
    for delta in (1e-1, 1e-2, 1e-3):
        g = torch.Generator().manual_seed(0)
        model = build_model("cnn", in_channels=1, image_size=8, num_classes=10, seed=0)
        base = torch.randn(4, 1, 8, 8, generator=g)
        x = base.repeat(8, 1, 1, 1) + delta * torch.randn(32, 1, 8, 8, generator=g)
        y = torch.arange(4).repeat(8)
        ref = gnq_scores(copy.deepcopy(model).double(), x.double(), y, method="naive")
        errs = []
        for variant in ("float32", "now", "float64"):
            with _float32_grams() if variant == "float32" else ExitStack():
                auditor = GhostAuditor(model, gram_dtype=torch.float64 if variant == "float64"
                                       else None)
                with auditor.capture():
                    F.cross_entropy(model(x), y).backward()
                model.zero_grad(set_to_none=True)
                errs.append(((auditor.scores() - ref).abs() / ref).max().item())
        print(f"| {delta:g} | {errs[0]:.2e} | {errs[1]:.2e} | {errs[2]:.2e} | "
              f"{ref.min().item():.3g} - {ref.max().item():.3g} |")


if __name__ == "__main__":
    main()

"""Local training and evaluation loops in plain torch, for images and token sequences
(the loss of a sample: :mod:`fedaudit.training.losses`)."""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from torch import nn

from fedaudit.gnq import GhostAuditor, gnq_from_gram_options
from fedaudit.scenario import GnqConfig, TrainConfig
from fedaudit.training.augment import Augmenter
from fedaudit.training.losses import batch_loss, correct, sample_losses, summed_loss


def client_seed(seed: int, server_round: int, partition_id: int) -> int:
    """Independent, reproducible stream per (training seed, round, client): the seed of a
    client's local training in that round (the Flower clients and the reference
    federations of :mod:`fedaudit.audit.reference_models` alike)."""
    return int(np.random.SeedSequence([seed, server_round, partition_id]).generate_state(1)[0])


def pick_device(preference: str = "auto") -> torch.device:
    """``auto``: CUDA when present, else CPU."""
    if preference == "cuda" or (preference == "auto" and torch.cuda.is_available()):
        if not torch.cuda.is_available():
            raise RuntimeError("train.device = 'cuda' but torch sees no CUDA device")
        return torch.device("cuda")
    return torch.device("cpu")


def make_optimizer(model: nn.Module, cfg: TrainConfig) -> torch.optim.Optimizer:
    if cfg.optimizer == "adam":
        return torch.optim.Adam(model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
    return torch.optim.SGD(model.parameters(), lr=cfg.lr, momentum=cfg.momentum,
                           weight_decay=cfg.weight_decay)


@dataclass
class TrainResult:
    loss: float  # mean training loss over the local steps
    num_examples: int
    steps: int
    gnq_ids: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    gnq_scores: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.float64))
    gnq_epochs: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))  # 1-based
    dp_steps: int = 0  # DP-SGD: noised optimizer steps taken (0 without DP-SGD)
    dp_sample_rate: float | None = None  # DP-SGD: Poisson sampling rate of those steps


def train_local(model: nn.Module, x: np.ndarray, y: np.ndarray, ids: np.ndarray,
                cfg: TrainConfig, *, seed: int, device: torch.device,
                gnq: GnqConfig | None = None,
                dp: Mapping[str, Any] | None = None,
                fuse_grad: bool = False,
                dp_canaries: np.ndarray | None = None) -> TrainResult:
    """Train ``model`` in place on samples ``ids`` for ``cfg.local_epochs`` epochs.

    With ``gnq`` (the ``[audit.gnq]`` table) every batch is also scored with in-run ghost
    GNQ: the hooks observe the ordinary backward pass, so the update is unchanged.
    ``fuse_grad=True`` instead derives the weight gradient of every convolution whose
    per-sample gradients the audit materialises from them (``GhostAuditor(fuse_grad=True)``):
    equal up to float rounding, which SGD amplifies over rounds (quickstart: test loss
    0.22940 -> 0.22913), and no faster on CPU (docs/algorithms.md), hence off by default.
    With ``dp`` (``noise_multiplier`` and ``clip_norm``: what the ``dp-sgd`` defense's
    ``local_dp`` gives) the client trains with DP-SGD instead (:func:`train_local_dpsgd`),
    with ``dp_canaries`` its white-box gradient canaries.
    ``cfg.augment`` (:mod:`fedaudit.training.augment`): every batch is replaced by views
    drawn per sample before the forward pass, so the step, its GNQ scores and DP-SGD's
    clipping all see the views actually trained on.
    """
    if dp is not None:
        return train_local_dpsgd(model, x, y, ids, cfg, seed=seed, device=device, gnq=gnq,
                                 noise_multiplier=dp["noise_multiplier"],
                                 clip_norm=dp["clip_norm"], canaries=dp_canaries)
    if dp_canaries is not None and len(dp_canaries):
        raise ValueError("gradient canaries need DP-SGD (dp=...)")
    model.to(device).train()
    opt = make_optimizer(model, cfg)
    gen = torch.Generator().manual_seed(seed)
    augment = Augmenter(cfg.augment, cfg.augment_padding, seed)
    xs = torch.from_numpy(np.ascontiguousarray(x[ids])).to(device)
    ys = torch.from_numpy(np.ascontiguousarray(y[ids])).to(device)
    auditor = None
    if gnq is not None:

        auditor = GhostAuditor(model, lam=gnq.lam, lam_mode=gnq.lam_mode, rho=gnq.rho,
                               loss_reduction="mean", fuse_grad=fuse_grad)
    total, steps = 0.0, 0
    gnq_ids, gnq_scores, gnq_epochs = [], [], []
    n = len(ids)
    for epoch in range(1, cfg.local_epochs + 1):
        order = torch.randperm(n, generator=gen)
        for start in range(0, n, cfg.batch_size):
            idx = order[start:start + cfg.batch_size]
            xb, yb = augment(xs[idx.to(device)]), ys[idx.to(device)]
            opt.zero_grad(set_to_none=True)
            if auditor is not None:
                with auditor.capture():
                    loss = batch_loss(model(xb), yb)
                    loss.backward()
                gnq_scores.append(auditor.scores().cpu().numpy())
                gnq_ids.append(ids[idx.numpy()])
                gnq_epochs.append(np.full(len(idx), epoch))
            else:
                loss = batch_loss(model(xb), yb)
                loss.backward()
            opt.step()
            total += float(loss.detach())
            steps += 1
    res = TrainResult(total / max(steps, 1), n, steps)
    if gnq_ids:
        res.gnq_ids = np.concatenate(gnq_ids).astype(np.int64)
        res.gnq_scores = np.concatenate(gnq_scores).astype(np.float64)
        res.gnq_epochs = np.concatenate(gnq_epochs).astype(np.int64)
    return res


def _sub_seed(seed: int, stream: int) -> int:
    return int(np.random.SeedSequence([seed, stream]).generate_state(1)[0])


def train_local_dpsgd(model: nn.Module, x: np.ndarray, y: np.ndarray, ids: np.ndarray,
                      cfg: TrainConfig, *, seed: int, device: torch.device,
                      noise_multiplier: float, clip_norm: float,
                      gnq: GnqConfig | None = None,
                      canaries: np.ndarray | None = None) -> TrainResult:
    """Local DP-SGD with Opacus: ``cfg.local_epochs`` passes of Poisson-sampled batches.

    ``PrivacyEngine(secure_mode=False).make_private(poisson_sampling=True)`` over a
    DataLoader of the client's samples: each step includes every sample independently
    with probability q = 1 / ceil(n / batch_size) (Opacus' rate for that loader, so an
    epoch is n samples on average; batches vary in size and may be empty), clips each
    per-sample gradient to ``clip_norm``, sums, adds N(0, (noise_multiplier *
    clip_norm)^2) and divides by the expected batch size.  The result reports the steps
    taken and q, from which the server accounts the client's epsilon over all its rounds
    (:mod:`fedaudit.defenses.accounting`).  ``optimizer`` / ``momentum`` / ``weight_decay`` act on the
    noised gradient (post-processing).

    Determinism: the Poisson sampler and the noise use two torch Generators seeded from
    ``seed`` (not Opacus' secure RNG, which cannot be seeded), so the same seed gives the
    same update on CPU.

    With ``gnq`` every batch is scored by :func:`dp_clipped_gnq` on the clipped per-sample
    gradients Opacus materialised for the step.  ``cfg.augment``: each sampled sample is
    replaced by one augmented view per step (drawn as in :func:`train_local`), before
    Opacus computes, clips and noises its gradient.

    ``canaries``: coordinates of the concatenated trainable parameters, the client's
    included white-box gradient canaries (:mod:`fedaudit.dp_audit.gradient`): at every step
    each is drawn with the loader's Poisson rate q (a third seeded Generator) and a drawn
    one adds ``clip_norm`` at its coordinate to Opacus' sum of clipped per-sample gradients,
    before the noise (:func:`_add_gradient_canaries`).
    """

    from opacus import PrivacyEngine
    from torch.utils.data import DataLoader, TensorDataset

    model.to(device).train()
    n = len(ids)
    dataset = TensorDataset(torch.from_numpy(np.ascontiguousarray(x[ids])),
                            torch.from_numpy(np.ascontiguousarray(y[ids])),
                            torch.arange(n))
    sampler_gen = torch.Generator().manual_seed(_sub_seed(seed, 1))
    noise_gen = torch.Generator(device=device).manual_seed(_sub_seed(seed, 2))
    loader = DataLoader(dataset, batch_size=cfg.batch_size, shuffle=True,
                        generator=sampler_gen)
    opt = make_optimizer(model, cfg)
    augment = Augmenter(cfg.augment, cfg.augment_padding, seed)
    with warnings.catch_warnings():
        # "Secure RNG turned off": deliberate (seeded, reproducible noise; see docstring)
        warnings.filterwarnings("ignore", message=".*[Ss]ecure RNG.*")
        warnings.filterwarnings("ignore", message=".*full backward hook.*")
        engine = PrivacyEngine(secure_mode=False)
        dp_model, dp_opt, dp_loader = engine.make_private(
            module=model, optimizer=opt, data_loader=loader,
            noise_multiplier=float(noise_multiplier), max_grad_norm=float(clip_norm),
            poisson_sampling=True, noise_generator=noise_gen, loss_reduction="mean")
    if canaries is not None and len(canaries):
        _add_gradient_canaries(dp_opt, model, canaries, clip_norm, dp_loader.sample_rate,
                               torch.Generator().manual_seed(_sub_seed(seed, 3)))
    total, counted, steps = 0.0, 0, 0
    gnq_ids, gnq_scores, gnq_epochs = [], [], []
    try:
        with warnings.catch_warnings():
            # Opacus' full backward hooks on the first layer, whose input needs no grad
            warnings.filterwarnings("ignore", message=".*[Ff]ull backward hook.*")
            for epoch in range(1, cfg.local_epochs + 1):
                for xb, yb, ib in dp_loader:
                    xb, yb = augment(xb.to(device)), yb.to(device)
                    b = len(yb)
                    dp_opt.zero_grad(set_to_none=True)
                    # the batch mean (Opacus' loss_reduction="mean"); 0 for an empty batch
                    loss = summed_loss(dp_model(xb), yb) / max(b, 1)
                    loss.backward()
                    if gnq is not None and b > 0:
                        gnq_scores.append(dp_clipped_gnq(dp_opt.grad_samples, clip_norm, gnq)
                                          .cpu().numpy())
                        gnq_ids.append(ids[ib.numpy()])
                        gnq_epochs.append(np.full(b, epoch))
                    dp_opt.step()  # an empty batch is still a step: it releases pure noise
                    steps += 1
                    if b > 0:
                        total += float(loss.detach())
                        counted += 1
    finally:
        dp_model.to_standard_module()  # drops Opacus' hooks and per-sample attributes
    res = TrainResult(total / max(counted, 1), n, steps, dp_steps=steps,
                      dp_sample_rate=float(dp_loader.sample_rate))
    if gnq_ids:
        res.gnq_ids = np.concatenate(gnq_ids).astype(np.int64)
        res.gnq_scores = np.concatenate(gnq_scores).astype(np.float64)
        res.gnq_epochs = np.concatenate(gnq_epochs).astype(np.int64)
    return res


def _add_gradient_canaries(dp_opt, model: nn.Module, canaries: np.ndarray, clip_norm: float,
                           rate: float, gen: torch.Generator) -> None:
    """Make every step of ``dp_opt`` add the drawn canaries' gradients to the clipped sum.

    Opacus' ``pre_step`` runs clip_and_accumulate (``p.summed_grad`` = the sum of the
    clipped per-sample gradients), then add_noise, then the division by the expected batch
    size; the instance's clip_and_accumulate is wrapped so that, after it, each canary is
    drawn with probability ``rate`` and a drawn canary adds ``clip_norm`` at its coordinate
    -- exactly what one more sample with that clipped gradient would contribute."""
    from fedaudit.dp_audit.gradient import ParamLayout

    layout = ParamLayout.of(model)
    params = [p for p in model.parameters() if p.requires_grad]
    assert [p.numel() for p in params] == list(layout.sizes)
    where = [(params[p], torch.from_numpy(flat), torch.from_numpy(pos))
             for p, flat, pos in layout.locate(canaries)]
    n = len(canaries)
    clip_and_accumulate = dp_opt.clip_and_accumulate

    def with_canaries() -> None:
        clip_and_accumulate()
        drawn = (torch.rand(n, generator=gen) < rate).to(torch.float32) * float(clip_norm)
        for p, flat, pos in where:
            p.summed_grad.view(-1).index_add_(0, flat.to(p.device),
                                              drawn[pos].to(p.device, p.summed_grad.dtype))

    dp_opt.clip_and_accumulate = with_canaries


def dp_clipped_gnq(grad_samples: list[torch.Tensor], clip_norm: float,
                   gnq: GnqConfig) -> torch.Tensor:
    """GNQ of each sample of a DP-SGD step, from the CLIPPED per-sample gradients.

    Under DP-SGD the model learns from f_i g_i, not from g_i: Opacus clips each per-sample
    gradient g_i with f_i = min(1, C / (||g_i|| + 1e-6)) (its own formula, norms over all
    parameters, computed here the same way) before summing and noising.  Uniqueness in
    the sense of the update is therefore that of the clipped rows; clipping also bounds
    the row norms, so one outlier sample no longer dominates the Gram by magnitude alone.
    Opacus has already materialised G (``p.grad_sample``), so K is built directly:
    K = diag(f) G G^T diag(f), accumulated per parameter in float64, then GNQ with the
    scenario's ``lam`` / ``lam_mode`` / ``rho`` through
    :func:`fedaudit.gnq.gnq_from_gram_options` (relative mode: lam = rho * trace(K) / B,
    resolved by :func:`fedaudit.gnq.core.resolve_lambda`, the same rule the ghost auditor
    uses) -- the noise is not part of it.

    Scale: with ``loss_reduction="mean"`` Opacus multiplies the captured output gradients
    by the batch size before forming grad_sample, so each row is the gradient of that
    sample's OWN loss (sum reduction), the convention GNQ is defined with (docs/algorithms.md section 1);
    tests/defenses/test_client_gnq.py checks it against ``gnq_scores(method="naive")``.

    Args:
        grad_samples: per-parameter (B, ...) per-sample gradients (``DPOptimizer.grad_samples``).
        clip_norm: Opacus' ``max_grad_norm`` C.
        gnq: the ``[audit.gnq]`` table (lam, lam_mode, rho).
    Returns:
        float64 (B,) scores.
    """

    flat = [g.reshape(len(g), -1) for g in grad_samples]
    norms = torch.stack([g.norm(2, dim=-1) for g in flat], dim=1).norm(2, dim=1)
    f = (clip_norm / (norms + 1e-6)).clamp(max=1.0).to(torch.float64)
    B = flat[0].shape[0]
    K = torch.zeros(B, B, dtype=torch.float64, device=flat[0].device)
    for g in flat:
        # float64 Gram: when gradients share a large common direction a float32 Gram
        # loses the small differences GNQ measures (and is not even symmetric)
        g64 = g.to(torch.float64)
        K.addmm_(g64, g64.T)
    K = f[:, None] * K * f[None, :]
    K = (K + K.T).mul_(0.5)
    return gnq_from_gram_options(K, lam=gnq.lam, lam_mode=gnq.lam_mode, rho=gnq.rho)


@torch.inference_mode()
def per_sample_losses(model: nn.Module, x: np.ndarray, y: np.ndarray, *,
                      device: torch.device, batch_size: int = 1024) -> tuple[np.ndarray, np.ndarray]:
    """Per-sample losses (float64, :func:`fedaudit.training.losses.sample_losses`: the
    cross-entropy of an image, the mean token NLL of a sequence) and correctness (bool:
    (N,) for images, (N, L) per token for sequences) in eval mode."""
    model.to(device).eval()
    losses, hits = [], []
    for start in range(0, len(y), batch_size):
        xb = torch.from_numpy(np.ascontiguousarray(x[start:start + batch_size])).to(device)
        yb = torch.from_numpy(np.ascontiguousarray(y[start:start + batch_size])).to(device)
        out = model(xb)
        losses.append(sample_losses(out.double(), yb).cpu().numpy())
        hits.append(correct(out, yb).cpu().numpy())
    return np.concatenate(losses), np.concatenate(hits)


def evaluate(model: nn.Module, x: np.ndarray, y: np.ndarray, *, device: torch.device,
             batch_size: int = 1024) -> tuple[float, float]:
    """(accuracy, mean loss): for sequences the accuracy is per token (next-character
    accuracy over all N L targets) and the loss the mean over sequences of their mean
    token NLL (all sequences have L tokens, so also the token mean)."""
    losses, hits = per_sample_losses(model, x, y, device=device, batch_size=batch_size)
    return float(hits.mean()), float(losses.mean())

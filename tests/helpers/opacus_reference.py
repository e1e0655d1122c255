"""What Opacus' DPOptimizer holds for one batch, for tests that compare per-sample
gradients (images in tests/defenses/test_client_gnq.py, sequences in
tests/training/test_text_training.py)."""

import warnings


def opacus_grad_samples(model, x, y, *, clip: float, batch_loss):
    """The per-sample gradients after one forward/backward of ``batch_loss(outputs, y)``
    through ``make_private(loss_reduction="mean", poisson_sampling=False)`` at clipping
    norm ``clip`` (the production path of train_local_dpsgd)."""
    import torch
    from opacus import PrivacyEngine
    from torch.utils.data import DataLoader, TensorDataset

    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    loader = DataLoader(TensorDataset(x, y), batch_size=len(y))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        m, o, dl = PrivacyEngine(secure_mode=False).make_private(
            module=model, optimizer=opt, data_loader=loader, noise_multiplier=1.0,
            max_grad_norm=clip, poisson_sampling=False, loss_reduction="mean")
        xb, yb = next(iter(dl))
        o.zero_grad()
        batch_loss(m(xb), yb).backward()
    return o.grad_samples

"""attacks.reconstruction.simulate against the real client: when the dummy data IS the
client's data, the simulated update equals fedaudit.training.train_local's (single step
and unrolled steps, plain SGD, momentum, weight decay, a smaller last batch), float64."""

import numpy as np
import pytest
import torch

from attacks.reconstruction.simulate import UpdateSimulator, soft_cross_entropy
from attacks.update_case import LocalTraining, UpdateCase
from fedaudit.models import build_model
from fedaudit.scenario import TrainConfig
from fedaudit.training import train_local
from fedaudit.training.losses import batch_loss

EPS = np.finfo(np.float64).eps


def _client(model_name, n, cfg, seed=3):
    """A float64 model, n digits-like samples in [0, 1], and the update train_local makes."""
    model = build_model(model_name, in_channels=1, image_size=8, num_classes=10, width=2,
                        seed=seed).double()
    start = {k: v.clone() for k, v in model.state_dict().items()}
    rng = np.random.default_rng(seed)
    x = rng.random((n + 3, 1, 8, 8))
    y = rng.integers(0, 10, n + 3)
    ids = np.arange(2, n + 2)  # not the first rows: the simulation must get x[ids]
    train_local(model, x, y, ids, cfg, seed=seed, device=torch.device("cpu"))
    update = {k: (model.state_dict()[k] - start[k]).double() for k in start}
    training = LocalTraining(cfg.lr, cfg.momentum, cfg.weight_decay, cfg.optimizer,
                             cfg.local_epochs, cfg.batch_size, n)
    case = UpdateCase(build_model(model_name, in_channels=1, image_size=8, num_classes=10,
                                  width=2).double(), start, update, training, (1, 8, 8), 10,
                      (0.0, 1.0), batch_loss)
    # train_local draws one permutation of the client's samples per epoch from this stream
    gen = torch.Generator().manual_seed(seed)
    order = [torch.randperm(n, generator=gen) for _ in range(cfg.local_epochs)]
    return case, torch.from_numpy(x[ids]), torch.from_numpy(y[ids]), order


CASES = [  # (model, n, epochs, batch, momentum, weight decay): steps
    ("mlp", 4, 1, 4, 0.0, 0.0),     # 1 step: the observed gradient
    ("cnn", 4, 1, 8, 0.9, 1e-3),    # 1 step (n < batch), momentum and weight decay
    ("mlp", 10, 1, 4, 0.0, 0.0),    # 3 steps, last batch of 2
    ("cnn", 10, 2, 4, 0.9, 0.0),    # 6 steps over 2 epochs, momentum
    ("mlp", 6, 3, 3, 0.5, 1e-2),    # 6 steps, momentum and weight decay
]


@pytest.mark.parametrize("model_name, n, epochs, batch, momentum, wd", CASES)
def test_simulated_update_is_the_real_one_on_the_real_data(one_thread, model_name, n, epochs,
                                                           batch, momentum, wd):
    cfg = TrainConfig(local_epochs=epochs, batch_size=batch, optimizer="sgd", lr=0.05,
                      momentum=momentum, weight_decay=wd, device="cpu")
    case, x, y, order = _client(model_name, n, cfg)
    sim = UpdateSimulator.of(case)
    steps = case.training.steps
    assert sim.single == (steps == 1)
    got = sim.simulate(x, y, order=order)
    target = sim.target  # the observed gradient (one step) or update
    assert [tuple(g.shape) for g in got] == [tuple(t.shape) for t in target]
    for name, g, t in zip(sim.names, got, target):
        w = case.start[name].abs().max().item() + case.update[name].abs().max().item()
        if sim.single:
            # case.gradient() inverts w' = w - lr (g + wd w): |w'| eps / 2 divided by lr,
            # plus a few ulps of g and of wd w (tests/test_update_case.py)
            atol = 4 * EPS * (w / cfg.lr + t.abs().max().item() + wd * w)
        else:
            # the same kernels in the same order on the same float64 inputs: the forward and
            # backward are bit-identical; each SGD step may round w, d and the momentum
            # buffer differently (torch's fused add vs a separate product), a few ulps of |w|
            # per step, carried on through the later steps
            atol = 8 * steps * EPS * w
        np.testing.assert_allclose(g.detach().numpy(), t.numpy(), rtol=0, atol=atol,
                                   err_msg=name)
    if not sim.single:
        # the tolerance is far below what a wrong unrolling gives: batches made in another
        # order than the client's (here: 0..n-1) miss by ~1e13 ulps
        other = sim.simulate(x, y)
        diff = max((a - b).abs().max().item() for a, b in zip(other, target))
        assert diff > 1e6 * 8 * steps * EPS


def test_simulation_is_differentiable_in_the_dummy_data(one_thread):
    cfg = TrainConfig(local_epochs=2, batch_size=3, optimizer="sgd", lr=0.05, momentum=0.9,
                      weight_decay=0.0, device="cpu")
    case, x, y, _ = _client("mlp", 5, cfg)
    sim = UpdateSimulator.of(case)
    xd = x.clone().requires_grad_(True)
    labels = torch.zeros(5, 10, dtype=torch.float64, requires_grad=True)

    def f(xx, ll):
        return sum((u ** 2).sum() for u in sim.simulate(xx, ll))

    # float label logits are soft labels; the analytic gradient (through every step's
    # double backward) matches finite differences for both inputs
    assert torch.autograd.gradcheck(f, (xd, labels), eps=1e-6, atol=1e-6, rtol=1e-4)


def test_soft_labels_of_one_hot_are_the_case_loss():
    z = torch.randn(4, 10, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    y = torch.tensor([1, 0, 9, 3])
    big = 60.0 * torch.nn.functional.one_hot(y, 10).double()  # softmax -> one-hot to 1e-26
    torch.testing.assert_close(soft_cross_entropy(z, big), batch_loss(z, y), rtol=1e-14,
                               atol=0)


def test_adam_and_wrong_sample_counts_are_refused():
    cfg = TrainConfig(local_epochs=1, batch_size=4, optimizer="sgd", lr=0.05, momentum=0.0,
                      weight_decay=0.0, device="cpu")
    case, x, y, _ = _client("mlp", 4, cfg)
    adam = UpdateCase(case.model, case.start, case.update,
                      LocalTraining(0.05, 0.0, 0.0, "adam", 1, 4, 4), case.input_shape, 10,
                      case.box, batch_loss)
    with pytest.raises(ValueError, match="needs SGD"):
        UpdateSimulator.of(adam)
    with pytest.raises(ValueError, match="num_examples = 4"):
        UpdateSimulator.of(case).simulate(x[:3], y[:3])

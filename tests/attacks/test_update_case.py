"""attacks.update_case: what the server knows of a client's round, and the gradient behind
a one-step SGD update recovered exactly."""

import numpy as np
import pytest
import torch

from attacks.update_case import LocalTraining, UpdateCase
from fedaudit.training.losses import batch_loss


def _case(steps_epochs=1, n=4, batch=4, optimizer="sgd", momentum=0.9, wd=0.01):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(3, 5), torch.nn.ReLU(),
                                torch.nn.Linear(5, 2)).double()
    start = {k: v.clone() for k, v in model.state_dict().items()}
    x, y = torch.randn(n, 3, dtype=torch.float64), torch.tensor([0, 1, 1, 0][:n])
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=momentum, weight_decay=wd)
    opt.zero_grad()
    batch_loss(model(x), y).backward()
    grad = {k: p.grad.clone() for k, p in model.named_parameters()}
    opt.step()
    update = {k: model.state_dict()[k] - start[k] for k in start}
    training = LocalTraining(0.1, momentum, wd, optimizer, steps_epochs, batch, n)
    return UpdateCase(model, start, update, training, (3,), 2, (0.0, 1.0), batch_loss), grad


def test_one_sgd_step_gives_back_its_batch_gradient():
    case, grad = _case()
    assert case.single_gradient() and case.training.steps == 1
    got = case.gradient()
    assert set(got) == set(grad)
    eps = np.finfo(np.float64).eps
    for k in grad:
        # w' = w - lr (g + wd w) is rounded to |w'| eps / 2; inverting divides that by lr
        # (the other operations add a few ulps of g and of wd w)
        w_new = (case.start[k] + case.update[k]).abs().max().item()
        atol = 4 * eps * (w_new / case.training.lr + grad[k].abs().max().item()
                          + case.training.weight_decay * case.start[k].abs().max().item())
        np.testing.assert_allclose(got[k].numpy(), grad[k].numpy(), rtol=0, atol=atol)


@pytest.mark.parametrize("epochs, n, batch, optimizer, steps", [
    (2, 4, 4, "sgd", 2), (1, 8, 4, "sgd", 2), (1, 9, 4, "sgd", 3), (1, 4, 4, "adam", 1)])
def test_several_steps_or_adam_have_no_observed_gradient(epochs, n, batch, optimizer, steps):
    case, _ = _case()
    t = LocalTraining(0.1, 0.0, 0.0, optimizer, epochs, batch, n)
    other = UpdateCase(case.model, case.start, case.update, t, (3,), 2, (0.0, 1.0), batch_loss)
    assert t.steps == steps and not other.single_gradient()
    with pytest.raises(ValueError, match="not one SGD step"):
        other.gradient()


def test_bad_cases_are_refused():
    case, _ = _case()
    with pytest.raises(ValueError, match="lr > 0"):
        LocalTraining(0.0, 0.0, 0.0, "sgd", 1, 4, 4)
    with pytest.raises(ValueError, match="lacks state_dict entries"):
        UpdateCase(case.model, case.start, {}, case.training, (3,), 2, (0.0, 1.0), batch_loss)
    with pytest.raises(ValueError, match="low < high"):
        UpdateCase(case.model, case.start, case.update, case.training, (3,), 2, (1.0, 1.0),
                   batch_loss)

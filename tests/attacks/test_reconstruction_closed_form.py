"""Gradient inversion on a case solvable in closed form (an independent reference).

One linear layer with bias, z = W x + b, cross-entropy, one sample: the gradient is
dW = (p - e_y) x^T, db = p - e_y, so every row i with db_i != 0 gives the input exactly,
x = dW_i / db_i (Phong, Aono, Hayashi, Wang and Moriai 2017, "Privacy-Preserving Deep
Learning: Revisited and Enhanced", ATIS: the analytic observation behind the later
attacks).  Both distances have
their unique minimum there: the squared L2 distance is 0 only at x (given db, dW fixes
x), and the cosine over (dW, db) = (p - e_y) (x, 1)^T is 1 only when (x, 1) is parallel to
(x*, 1) -- the bias's constant 1 fixes the scale -- so the attacks must converge to it.
Everything in float64 and without the image prior (tv = 0: the prior moves the optimum).
"""

import numpy as np
import pytest
import torch

from attacks.reconstruction import Budget, get_reconstruction
from attacks.update_case import LocalTraining, UpdateCase
from fedaudit.training.losses import batch_loss

SHAPE = (1, 4, 4)
CLASSES = 4
LR = 0.1


def _linear_case(seed):
    """The server's case for one client sample through Flatten + Linear(16, 4), float64,
    and the true sample."""
    gen = torch.Generator().manual_seed(seed)
    model = torch.nn.Sequential(torch.nn.Flatten(),
                                torch.nn.Linear(int(np.prod(SHAPE)), CLASSES)).double()
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(0.3 * torch.randn(p.shape, generator=gen, dtype=torch.float64))
    start = {k: v.clone() for k, v in model.state_dict().items()}
    x = torch.rand((1, *SHAPE), generator=gen, dtype=torch.float64)
    y = torch.tensor([1])
    grads = torch.autograd.grad(batch_loss(model(x), y), list(model.parameters()))
    update = {k: -LR * g for k, g in zip(start, grads)}
    case = UpdateCase(model, start, update, LocalTraining(LR, 0.0, 0.0, "sgd", 1, 1, 1),
                      SHAPE, CLASSES, (0.0, 1.0), batch_loss)
    return case, x.numpy(), y.numpy()


def _closed_form(case):
    """x = dW_i / db_i for every row with db_i != 0, from the observed gradient alone."""
    g = case.gradient()
    dw, db = g["1.weight"].numpy(), g["1.bias"].numpy()
    rows = np.flatnonzero(db != 0)
    return (dw[rows] / db[rows, None]).reshape(len(rows), *SHAPE)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_closed_form_is_the_sample(seed):
    case, x, _ = _linear_case(seed)
    every_row = _closed_form(case)
    assert len(every_row) == CLASSES  # softmax: no db_i is exactly 0
    # each row: the ratio of two float64 numbers recovered from -update / lr
    np.testing.assert_allclose(every_row, np.broadcast_to(x, every_row.shape), rtol=0,
                               atol=1e-12)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_inverting_gradients_converges_to_the_closed_form(one_thread, seed):
    case, x, y = _linear_case(seed)
    closed = _closed_form(case)[0]
    rec = get_reconstruction("inverting-gradients")(
        case, num_samples=1, labels=y, budget=Budget(200, 1), seed=seed, tv=0.0)
    # signed Adam moves every pixel by ~ the step size, 0.1 / 10^3 after the three decays:
    # the error floor is ~1e-4 (measured: at most 1.6e-4 over 40 such cases); 1e-3 is 1/1000
    # of the pixel range
    np.testing.assert_allclose(rec.images[0], closed, rtol=0, atol=1e-3)
    assert rec.loss < 1e-6 and rec.iterations == 200 and rec.labels.tolist() == y.tolist()


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("joint", [False, True])
def test_dlg_converges_to_the_closed_form(one_thread, seed, joint):
    case, x, y = _linear_case(seed)
    closed = _closed_form(case)[0]
    # L-BFGS without line search (the paper's) diverges from some starts (|x| -> 100s, the
    # softmax saturates): 15% of single restarts with labels, 43% without, over 40 cases;
    # the restart of lowest loss is kept, so 4 (8) restarts
    rec = get_reconstruction("dlg")(case, num_samples=1, labels=None if joint else y,
                                    budget=Budget(100, 8 if joint else 4), seed=seed)
    # measured over 40 cases: at most 8.7e-6 with labels, 5.0e-5 with joint soft labels
    # (they only approach one-hot, so x converges more slowly); tolerances 10x those
    np.testing.assert_allclose(rec.images[0], closed, rtol=0, atol=5e-4 if joint else 1e-4)
    assert rec.labels.tolist() == y.tolist()
    assert rec.info["labels"] == ("joint" if joint else "given")

"""The label-leakage attacks on small models whose answer is known in closed form: iDLG on a
one-layer softmax model (the update written out by hand) and on a two-layer ReLU model
with hand-built weights; the batch counts exact on a model whose outputs do not depend on
its input, and wrong by exactly the stated amount when the probabilities or the
activation sums vary; LLG traced by hand; the multi-step reading of an update against
torch's own momentum SGD."""

import numpy as np
import pytest
import torch
from torch import nn

from attacks.label_leakage import get_label_attack, label_counts
from attacks.label_leakage.last_layer import observed_gradient
from attacks.update_case import LocalTraining, UpdateCase
from fedaudit.scenario import TrainConfig
from fedaudit.training.local import train_local
from fedaudit.training.losses import batch_loss

CPU = torch.device("cpu")


def _softmax(z):
    e = np.exp(z - z.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def two_layer(w1, b1, w2, b2) -> nn.Module:
    """Flatten -> Linear(w1, b1) -> ReLU -> Linear(w2, b2), float64."""
    model = nn.Sequential(nn.Flatten(), nn.Linear(w1.shape[1], w1.shape[0]), nn.ReLU(),
                          nn.Linear(w2.shape[1], w2.shape[0])).double()
    with torch.no_grad():
        for layer, w, b in ((model[1], w1, b1), (model[3], w2, b2)):
            layer.weight.copy_(torch.as_tensor(w, dtype=torch.float64))
            layer.bias.copy_(torch.as_tensor(b, dtype=torch.float64))
    return model


def sgd_case(model, x, y, *, lr, momentum=0.0, weight_decay=0.0, epochs=1, batch_size=None,
             optimizer="sgd", seed=0) -> UpdateCase:
    """The client's round through fedaudit's own local training loop."""
    start = {k: v.detach().clone() for k, v in model.state_dict().items()}
    cfg = TrainConfig(local_epochs=epochs, batch_size=batch_size or len(y), lr=lr,
                      momentum=momentum, weight_decay=weight_decay, optimizer=optimizer)
    train_local(model, x, y, np.arange(len(y)), cfg, seed=seed, device=CPU)
    update = {k: model.state_dict()[k].double() - start[k].double() for k in start}
    training = LocalTraining(lr, momentum, weight_decay, optimizer, epochs, cfg.batch_size,
                             len(y))
    num_classes = [m for m in model.modules() if isinstance(m, nn.Linear)][-1].out_features
    return UpdateCase(model, start, update, training, tuple(x.shape[1:]), num_classes,
                      (0.0, 1.0), batch_loss)


def constant_output_model(num_classes, rng, *, uniform=False) -> nn.Module:
    """Hidden layer with zero weights and positive biases: the same activations h and
    logits for every input (the batch counts' assumptions hold exactly)."""
    w2 = np.zeros((num_classes, 3)) if uniform else rng.normal(0, 1, (num_classes, 3))
    b2 = np.zeros(num_classes) if uniform else rng.normal(0, 1, num_classes)
    return two_layer(np.zeros((3, 4)), rng.uniform(0.5, 1.5, 3), w2, b2)


# ---- iDLG ---------------------------------------------------------------------------

def test_idlg_on_a_one_layer_softmax_model_every_class():
    """Update written out by hand: dL/dW = (p - e_y) x^T, dL/db = p - e_y, x >= 0."""
    rng = np.random.default_rng(0)
    model = nn.Sequential(nn.Flatten(), nn.Linear(16, 6))
    w = model[1].weight.detach().double().numpy()
    b = model[1].bias.detach().double().numpy()
    x = rng.uniform(0.05, 1.0, (1, 4, 4))
    start = {k: v.detach().clone() for k, v in model.state_dict().items()}
    for y in range(6):
        err = _softmax(w @ x.ravel() + b) - np.eye(6)[y]
        update = {"1.weight": torch.from_numpy(-0.1 * np.outer(err, x.ravel())),
                  "1.bias": torch.from_numpy(-0.1 * err)}
        case = UpdateCase(model, start, update, LocalTraining(0.1, 0.0, 0.0, "sgd", 1, 1, 1),
                          (1, 4, 4), 6, (0.0, 1.0), batch_loss)
        guess = get_label_attack("idlg")(case)
        assert guess.counts.tolist() == np.eye(6, dtype=int)[y].tolist()
        assert guess.info["negative_rows"] == 1


def test_idlg_on_a_two_layer_relu_model_every_class():
    """h = relu(W1 x + b1) = relu(0.8, 0.15, -1.1) = (0.8, 0.15, 0) for the sample below:
    non-negative, one unit cut by the ReLU; one SGD step with momentum and weight decay
    (the gradient is still exact: momentum does not act on the first step)."""
    w1 = np.array([[1.0, -1.0, 0.0, 0.0], [0.0, 1.0, -1.0, 0.5], [-1.0, 0.0, 0.0, 0.0]])
    b1 = np.array([0.1, 0.0, -0.2])
    w2 = np.array([[0.5, -1.0, 2.0], [1.0, 1.0, 1.0], [-2.0, 0.3, 0.0], [0.0, 0.0, -1.0],
                   [0.7, 0.2, 0.1]])
    b2 = np.array([0.0, -0.5, 0.2, 0.1, 0.3])
    x = np.array([[[0.9, 0.2], [0.4, 0.7]]])
    h = np.maximum(w1 @ x.ravel() + b1, 0)
    np.testing.assert_allclose(h, [0.8, 0.15, 0.0], rtol=0, atol=1e-15)
    for y in range(5):
        case = sgd_case(two_layer(w1, b1, w2, b2), x[None], np.array([y]), lr=0.3,
                        momentum=0.9, weight_decay=0.01)
        assert get_label_attack("idlg")(case).counts.tolist() == np.eye(5, dtype=int)[y].tolist()


def test_idlg_refuses_anything_but_one_sample_and_one_step():
    rng = np.random.default_rng(0)
    x = rng.uniform(0, 1, (2, 1, 2, 2))
    with pytest.raises(ValueError, match="one-sample update; this client trained on 2"):
        get_label_attack("idlg")(sgd_case(constant_output_model(3, rng), x, np.array([0, 1]),
                                          lr=0.1))
    with pytest.raises(ValueError, match="single gradient; this update is 2 sgd steps"):
        get_label_attack("idlg")(sgd_case(constant_output_model(3, rng), x[:1], np.array([0]),
                                          lr=0.1, epochs=2))
    with pytest.raises(ValueError, match="single gradient; this update is 1 adam steps"):
        get_label_attack("idlg")(sgd_case(constant_output_model(3, rng), x[:1], np.array([0]),
                                          lr=0.1, optimizer="adam"))


# ---- batch counts where the assumptions hold ----------------------------------------

@pytest.mark.parametrize("n", [1, 2, 5, 8, 32])
def test_counts_are_exact_when_the_outputs_do_not_depend_on_the_input(n):
    """p_k = p and S_k = S for every input, dummies included: geng and bias-count solve
    c_j = N (p_j - g_j / S) = N (p_j - beta_j) exactly; LLG* subtracts the exact offset
    p_j S and steps by (1 - 1/C^2) S / N, which is exact for N <= C^2 (docs/algorithms.md
    section 13)."""
    rng = np.random.default_rng(n)
    for _ in range(5):
        y = rng.integers(0, 10, n)
        case = sgd_case(constant_output_model(10, rng), rng.uniform(0, 1, (n, 1, 2, 2)), y,
                        lr=0.2, momentum=0.9, weight_decay=0.001)
        true = label_counts(y, 10)
        for name in ("geng", "bias-count", "llg-star"):
            guess = get_label_attack(name)(case)
            assert guess.counts.tolist() == true.tolist(), name
            if name != "llg-star":
                np.testing.assert_allclose(guess.info["raw_counts"], true, rtol=0,
                                           atol=1e-9 * n)


def test_llg_traced_by_hand():
    """C = 4, labels {0, 0, 2}, uniform p = 1/4, h = (1, 0.5) so S = 1.5:
    g = S (1/4 - c/3) = (-0.625, 0.375, -0.125, 0.375);
    m = (1 + 1/4) (-0.625 - 0.125) / 3 = -0.3125;
    stage 1: class 0 (-> -0.3125), class 2 (-> 0.1875); stage 2: class 0."""
    rng = np.random.default_rng(0)
    model = constant_output_model(4, rng, uniform=True)
    with torch.no_grad():
        model[1].bias.copy_(torch.tensor([1.0, 0.5, 0.0]))
    case = sgd_case(model, rng.uniform(0, 1, (3, 1, 2, 2)), np.array([0, 2, 0]), lr=0.5)
    np.testing.assert_allclose(observed_gradient(case).row_sums(),
                               [-0.625, 0.375, -0.125, 0.375], rtol=0, atol=1e-15)
    guess = get_label_attack("llg")(case)
    assert guess.info["impact"] == pytest.approx(-0.3125, abs=1e-15)
    assert guess.info["stage1"] == (0, 2)
    assert guess.counts.tolist() == [2, 0, 1, 0]


def test_llg_misses_a_class_its_offset_cancels_and_the_offsets_recover_it():
    """C = 4, labels {0, 0, 0, 1}, uniform p, S = 1.5 (all dyadic: exact arithmetic):
    g = S (1/4 - c/4) = (-0.75, 0, 0.375, 0.375): class 1's own -S/4 is cancelled by the
    batch's offset p S = 0.375, so P1 misses it.  LLG: m = 1.25 (-0.75) / 4 = -0.234375,
    class 0 alone in stage 1, then -0.515625, -0.28125, -0.046875 < 0 = g_1: {0: 4}.
    LLG*: offsets 0.375, g - s = (-1.125, -0.375, 0, 0), impact
    1.25 / 16 * 4 (1/4 - 1) 1.5 = -0.3515625; class 0 (-> -0.7734375, -0.421875,
    -0.0703125), then class 1 (-0.375): {0: 3, 1: 1}.  bias-count: 4 (1/4 - beta) with
    beta = (-0.5, 0, 0.25, 0.25): (3, 1, 0, 0)."""
    rng = np.random.default_rng(0)
    model = constant_output_model(4, rng, uniform=True)
    with torch.no_grad():
        model[1].bias.copy_(torch.tensor([1.0, 0.5, 0.0]))
    case = sgd_case(model, rng.uniform(0, 1, (4, 1, 2, 2)), np.array([0, 1, 0, 0]), lr=0.5)
    assert observed_gradient(case).row_sums().tolist() == [-0.75, 0.0, 0.375, 0.375]
    llg = get_label_attack("llg")(case)
    assert llg.info["impact"] == -0.234375 and llg.info["stage1"] == (0,)
    assert llg.counts.tolist() == [4, 0, 0, 0]
    star = get_label_attack("llg-star")(case)
    assert star.info["impact"] == -0.3515625 and star.info["offset"] == (0.375,) * 4
    assert star.info["stage1"] == (0,)  # the signs of g, not of g - s
    assert star.counts.tolist() == [3, 1, 0, 0]
    assert get_label_attack("bias-count")(case).info["raw_counts"] == (3.0, 1.0, 0.0, 0.0)


# ---- the stated errors when they do not ---------------------------------------------

@pytest.mark.parametrize("spread", [0.0, 0.5, 2.0, 8.0])
def test_count_error_when_the_probabilities_vary_is_n_times_their_gap(spread):
    """h = (x_1, 1 - x_1) >= 0 sums to S = 1 for every input, the logits W2 h + b2 vary
    with x_1.  With the dummies at the box's low end (h = (0, 1)), both estimators' raw
    counts are exactly c + N p_hat - sum_k p_k: off by N times the gap between the
    dummies' softmax and the batch's mean softmax (0 when spread = 0)."""
    rng = np.random.default_rng(1)
    w1 = np.array([[1.0, 0, 0, 0], [-1.0, 0, 0, 0]])
    w2, b2 = spread * rng.normal(0, 1, (5, 2)), rng.normal(0, 1, 5)
    x, y = rng.uniform(0, 1, (8, 1, 2, 2)), rng.integers(0, 5, 8)
    case = sgd_case(two_layer(w1, np.array([0.0, 1.0]), w2, b2), x, y, lr=0.1)
    h = np.stack([x[:, 0, 0, 0], 1 - x[:, 0, 0, 0]], axis=1)
    p_hat = _softmax(w2 @ np.array([0.0, 1.0]) + b2)
    expected = label_counts(y, 5) + 8 * p_hat - _softmax(h @ w2.T + b2).sum(axis=0)
    for name in ("bias-count", "geng"):
        raw = get_label_attack(name)(case, dummy="low").info["raw_counts"]
        np.testing.assert_allclose(raw, expected, rtol=0, atol=1e-12)


@pytest.mark.parametrize("scale", [0.0, 0.3, 1.0, 3.0])
def test_geng_error_when_the_activations_vary_is_as_stated(scale):
    """W2 = 0: p = softmax(b2) for every input, so bias-count is exact; the activation sums
    S_k = sum relu(W1 x_k + b1) vary with ``scale`` and Geng's raw count is exactly
    N p_j - (1/S_hat) sum_k (p_j - y_kj) S_k, S_hat = sum relu(b1) (dummies at 0)."""
    rng = np.random.default_rng(2)
    w1, b1 = scale * rng.normal(0, 1, (3, 4)), rng.uniform(0.5, 1.5, 3)
    b2 = rng.normal(0, 1, 6)
    x, y = rng.uniform(0, 1, (12, 1, 2, 2)), rng.integers(0, 6, 12)
    case = sgd_case(two_layer(w1, b1, np.zeros((6, 3)), b2), x, y, lr=0.1)
    s_k = np.maximum(x.reshape(12, 4) @ w1.T + b1, 0).sum(axis=1)
    s_hat = np.maximum(b1, 0).sum()
    p = _softmax(b2)
    onehot = np.eye(6)[y]
    expected = 12 * p - ((p[None, :] - onehot) * s_k[:, None]).sum(axis=0) / s_hat
    geng = get_label_attack("geng")(case, dummy="low")
    np.testing.assert_allclose(geng.info["raw_counts"], expected, rtol=0, atol=1e-12)
    bias = get_label_attack("bias-count")(case, dummy="low")
    np.testing.assert_allclose(bias.info["raw_counts"], label_counts(y, 6), rtol=0,
                               atol=1e-12)
    assert bias.counts.tolist() == label_counts(y, 6).tolist()


# ---- multi-step updates --------------------------------------------------------------

@pytest.mark.parametrize("steps", [1, 3, 7])
@pytest.mark.parametrize("mu", [0.0, 0.5, 0.9])
@pytest.mark.parametrize("wd", [0.0, 0.05])
def test_a_multi_step_update_is_read_as_the_momentum_weighted_mean_gradient(steps, mu, wd):
    """torch's SGD with a constant gradient G for T steps: step t's gradient enters the
    update omega_t = (1 - mu^(T-t+1)) / (1 - mu) times, Omega = sum_t omega_t, so the
    reading is G exactly, plus, with weight decay lambda, lambda (sum_t omega_t w_(t-1) /
    Omega - w_0): the decay is taken at the start weights (exact for one step)."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(3, 4)).double()
    start = {k: v.detach().clone() for k, v in model.state_dict().items()}
    grads = [torch.randn_like(p) for p in model.parameters()]
    t = np.arange(1, steps + 1)
    omega = (1 - mu ** (steps - t + 1)) / (1 - mu)
    drift = [torch.zeros_like(p) for p in model.parameters()]
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=mu, weight_decay=wd)
    for i in range(steps):
        for p, g, d, p0 in zip(model.parameters(), grads, drift, start.values()):
            d += omega[i] / omega.sum() * (p.detach() - p0)
            p.grad = g.clone()
        opt.step()
    update = {k: model.state_dict()[k] - start[k] for k in start}
    case = UpdateCase(model, start, update, LocalTraining(0.1, mu, wd, "sgd", steps, 2, 2),
                      (3,), 4, (0.0, 1.0), batch_loss)
    got = observed_gradient(case)
    np.testing.assert_allclose(got.weight, (grads[0] + wd * drift[0]).numpy(), rtol=1e-12,
                               atol=1e-13)
    np.testing.assert_allclose(got.bias, (grads[1] + wd * drift[1]).numpy(), rtol=1e-12,
                               atol=1e-13)
    np.testing.assert_allclose(got.step_weights, omega / omega.sum(), rtol=1e-14, atol=0)
    assert got.exact == (steps == 1)
    if wd and steps > 1:
        assert np.abs(drift[0].numpy()).max() > 1e-3  # the approximation is visible


def _drift_gaps(epochs, batch, mu, lrs):
    """max_j |raw_j - c_j| of geng and bias-count, with and without ``along_path``, for
    8 samples on one constant-output model trained with each lr."""
    rng = np.random.default_rng(3)
    y = rng.integers(0, 10, 8)
    x = rng.uniform(0, 1, (8, 1, 2, 2))
    state = constant_output_model(10, rng).state_dict()
    gaps = {}
    for lr in lrs:
        model = constant_output_model(10, rng)
        model.load_state_dict(state)
        case = sgd_case(model, x, y, lr=lr, momentum=mu, epochs=epochs, batch_size=batch)
        assert case.training.steps == epochs * 8 // batch
        for name in ("geng", "bias-count"):
            for along in (True, False):
                guess = get_label_attack(name)(case, along_path=along)
                raw = np.array(guess.info["raw_counts"])
                gaps[lr, name, along] = np.abs(raw - label_counts(y, 10)).max()
    return gaps


@pytest.mark.parametrize("epochs, batch, mu", [(4, 8, 0.0), (4, 8, 0.9), (2, 4, 0.0)])
def test_multi_step_counts_drift_with_the_learning_rate(epochs, batch, mu):
    """The step average is the batch-of-N gradient up to the model's drift during the
    round: on a constant-output model (full batches, or equal half batches without
    momentum, where every label enters with the same weight) the raw counts are within
    0.01 of the truth at lr = 1e-4 and drift off as lr grows; interpolating the
    statistics between the start and the end model halves the drift at lr = 0.1 (it is
    about 5 times smaller here)."""
    gaps = _drift_gaps(epochs, batch, mu, (1e-4, 0.1, 1.0))
    for name in ("geng", "bias-count"):
        assert gaps[1e-4, name, True] < 0.01
        assert gaps[0.1, name, True] < gaps[0.1, name, False] / 2
        assert gaps[1.0, name, True] > 10 * gaps[1e-4, name, True]


def test_momentum_over_several_batches_weighs_their_labels_unequally():
    """With momentum, the first batch's gradient enters the update more often than the
    second's (omega_1 > omega_T), so its labels weigh more: an error that does not
    vanish as lr -> 0 (here over 0.1 of a label at lr = 1e-4)."""
    gaps = _drift_gaps(2, 4, 0.9, (1e-4,))
    assert gaps[1e-4, "bias-count", True] > 0.1 and gaps[1e-4, "geng", True] > 0.1


def test_multi_step_raw_counts_follow_the_interpolated_statistics():
    """Start and end are two constant-output models (outputs independent of the input):
    p0, S0 and p1, S1 by hand; T = 4 steps with mu = 0.5 give step weights w_t and the
    statistics of step t at a_t = (t - 1) / 4 of the way; the raw counts are
    N (sum_t w_t S^t p^t - g_bar) / sum_t w_t S^t (S^t = 1 for the bias)."""
    rng = np.random.default_rng(4)
    a, b = constant_output_model(5, rng), constant_output_model(5, rng)
    start = {k: v.detach().clone() for k, v in a.state_dict().items()}
    update = {k: b.state_dict()[k] - start[k] for k in start}
    training = LocalTraining(0.1, 0.5, 0.0, "sgd", 4, 6, 6)
    case = UpdateCase(a, start, update, training, (1, 2, 2), 5, (0.0, 1.0), batch_loss)
    stats = []
    for m in (a, b):
        h = np.maximum(m[1].bias.detach().numpy(), 0)
        stats.append((_softmax(m[3].weight.detach().numpy() @ h + m[3].bias.detach().numpy()),
                      h.sum()))
    (p0, s0), (p1, s1) = stats
    omega = np.array([1 + 0.5 + 0.25 + 0.125, 1 + 0.5 + 0.25, 1 + 0.5, 1.0])
    w = omega / omega.sum()
    at = np.arange(4) / 4
    p_t = (1 - at)[:, None] * p0 + at[:, None] * p1
    s_t = (1 - at) * s0 + at * s1
    g_w = -update["3.weight"].numpy().sum(axis=1) / (0.1 * omega.sum())
    g_b = -update["3.bias"].numpy() / (0.1 * omega.sum())
    expected = {"geng": 6 * ((w * s_t) @ p_t - g_w) / (w * s_t).sum(),
                "bias-count": 6 * (w @ p_t - g_b)}
    for name, raw in expected.items():
        got = get_label_attack(name)(case).info["raw_counts"]
        np.testing.assert_allclose(got, raw, rtol=1e-12, atol=1e-12)
        start_only = get_label_attack(name)(case, along_path=False).info["raw_counts"]
        assert np.abs(np.array(start_only) - raw).max() > 0.1


def test_float_rounding_does_not_make_an_absent_class_present():
    """A float32 model with weight decay: classes 2..7 are absent and almost never
    predicted (p ~ e^-30), so their true gradient is ~0, but w - lr (g + lambda w) rounds
    in float32 and -update / lr - lambda w recovers g only to ~eps |w| / lr: some of their
    rows come out negative.  The tolerance keeps them out of the classes a negative row
    declares present; class 1 (beta_1 < 0) stays in."""
    rng = np.random.default_rng(5)
    w2 = rng.normal(0, 1, (8, 3))
    b2 = np.concatenate([[2.0, 1.0], rng.uniform(-40, -30, 6)])
    model = two_layer(rng.normal(0, 1, (3, 4)), rng.uniform(0.5, 1.5, 3), w2, b2).float()
    x = rng.uniform(0, 1, (4, 1, 2, 2)).astype(np.float32)
    case = sgd_case(model, x, np.array([0, 1, 0, 1]), lr=0.05, weight_decay=0.1)
    grad = observed_gradient(case)
    assert (grad.bias[2:] < 0).sum() >= 2 and (grad.row_sums()[2:] < 0).sum() >= 2
    for name in ("bias-count", "geng"):
        guess = get_label_attack(name)(case)
        assert guess.info["present"] == (1,), name
        assert guess.counts.tolist() == [2, 2, 0, 0, 0, 0, 0, 0], name


def test_what_the_batch_attacks_refuse():
    rng = np.random.default_rng(0)
    x, y = rng.uniform(0, 1, (4, 1, 2, 2)), np.array([0, 1, 1, 2])
    adam = sgd_case(constant_output_model(3, rng), x, y, lr=0.1, optimizer="adam")
    for name in ("llg", "llg-star", "geng", "bias-count"):
        with pytest.raises(ValueError, match="the update is adam: the label attacks read SGD"):
            get_label_attack(name)(adam)
    no_bias = nn.Sequential(nn.Flatten(), nn.Linear(4, 3, bias=False)).double()
    with pytest.raises(ValueError, match="has none \\(use geng\\)"):
        get_label_attack("bias-count")(sgd_case(no_bias, x, y, lr=0.1))
    assert get_label_attack("geng")(sgd_case(no_bias, x, y, lr=0.1)).num_samples == 4
    scaled = nn.Sequential(nn.Flatten(), nn.Linear(4, 3), nn.Softmax(dim=1)).double()
    with pytest.raises(ValueError, match="not its last nn.Linear '1''s output"):
        get_label_attack("geng")(sgd_case(scaled, x, y, lr=0.1))
    dead = two_layer(np.zeros((3, 4)), -np.ones(3), np.ones((3, 3)), np.zeros(3))
    with pytest.raises(ValueError, match="mean activation sum, which is 0 here"):
        get_label_attack("geng")(sgd_case(dead, x, y, lr=0.1))
    wrong = nn.Sequential(nn.Flatten(), nn.Linear(4, 3), nn.ReLU(), nn.Linear(3, 2)).double()
    case = sgd_case(wrong, x, np.array([0, 1, 1, 0]), lr=0.1)
    bad = UpdateCase(case.model, case.start, case.update, case.training, case.input_shape, 3,
                     case.box, batch_loss)
    with pytest.raises(ValueError, match="last nn.Linear '3' has 2 outputs, not the 3"):
        get_label_attack("llg")(bad)

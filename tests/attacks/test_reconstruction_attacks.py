"""The gradient-inversion family's registry, its call contract (checks, box, dtypes,
restarts) and determinism under the seed."""

import numpy as np
import pytest
import torch

from attacks.reconstruction import (RECONSTRUCTIONS, Budget, Reconstruction,
                                    get_reconstruction, reconstruction_names,
                                    register_reconstruction)
from attacks.reconstruction.registry import reconstruction_label, resolve_options
from attacks.reconstruction.trials import Trial, keep_best
from attacks.update_case import LocalTraining, UpdateCase
from fedaudit.errors import ScenarioError
from fedaudit.models import build_model
from fedaudit.training.losses import batch_loss

ATTACKS = ["inverting-gradients", "dlg"]


def _case(epochs=2, n=3, batch=2, momentum=0.9, optimizer="sgd", loss=batch_loss):
    """A small CNN's update of several local steps (2 epochs of a batch of 2 and one of 1)
    on random images: the unrolled path."""
    model = build_model("cnn", in_channels=1, image_size=8, num_classes=10, width=2, seed=0)
    start = {k: v.clone() for k, v in model.state_dict().items()}
    gen = torch.Generator().manual_seed(1)
    update = {k: 1e-3 * torch.randn(v.shape, generator=gen, dtype=torch.float64)
              for k, v in start.items()}
    training = LocalTraining(0.05, momentum, 0.0, optimizer, epochs, batch, n)
    return UpdateCase(model, start, update, training, (1, 8, 8), 10, (0.0, 1.0), loss)


def test_the_attacks_are_registered_with_their_options():
    assert set(ATTACKS) <= set(reconstruction_names())
    assert reconstruction_label("inverting-gradients") == "Inverting Gradients"
    assert reconstruction_label("dlg") == "DLG"
    for name in ATTACKS:
        assert RECONSTRUCTIONS.meta(name)["joint_labels"]
    assert resolve_options("inverting-gradients", {"tv": 0}) == {
        "tv": 0, "signed": True, "weighting": "equal", "lr_decay": True, "init": "randn",
        "keep": "last"}
    assert resolve_options("inverting-gradients", {})["tv"] == "auto"
    assert resolve_options("dlg", {}) == {"optimizer": "lbfgs"}


def test_bad_options_are_one_line_errors():
    with pytest.raises(TypeError, match="has no option 'beta'; its options: optimizer"):
        resolve_options("dlg", {"beta": 1})
    with pytest.raises(ScenarioError, match=r"option optimizer = 'sgd': unknown choice; "
                                            r"allowed: lbfgs, adam"):
        resolve_options("dlg", {"optimizer": "sgd"})
    with pytest.raises(ScenarioError, match="option tv = -1.0: -1.0 is not allowed; allowed: "
                                            "'auto' or a number >= 0"):
        resolve_options("inverting-gradients", {"tv": -1.0})
    with pytest.raises(ScenarioError, match="option tv = 'strong': 'strong' is not allowed"):
        resolve_options("inverting-gradients", {"tv": "strong"})
    with pytest.raises(Exception, match="unknown reconstruction 'nope'; allowed: dlg, "
                                        "inverting-gradients"):
        get_reconstruction("nope")


def test_a_new_attack_is_one_decorator_and_a_taken_name_is_refused():
    @register_reconstruction("test-mean-image", label="mean")
    def mean_image(case, *, num_samples, labels, budget, seed):
        images = np.full((num_samples, *case.input_shape), 0.5, np.float32)
        return Reconstruction(images, np.asarray(labels, np.int64), 0.0, 0, {})

    try:
        rec = get_reconstruction("test-mean-image")(_case(), num_samples=3, labels=[0, 1, 2],
                                                    budget=Budget(1), seed=0)
        assert rec.images.shape == (3, 1, 8, 8)
        assert not RECONSTRUCTIONS.meta("test-mean-image")["joint_labels"]
        with pytest.raises(ValueError, match="already registered"):
            register_reconstruction("test-mean-image")(lambda case, **kw: None)
    finally:
        RECONSTRUCTIONS.unregister("test-mean-image")


@pytest.mark.parametrize("kwargs, message", [
    ({"iterations": 0}, "Budget.iterations = 0: must be an integer >= 1"),
    ({"iterations": 2.5}, "Budget.iterations = 2.5"),
    ({"iterations": 1, "restarts": 0}, "Budget.restarts = 0"),
    ({"iterations": 1, "lr": -0.1}, "Budget.lr = -0.1"),
    ({"iterations": 1, "lr": float("nan")}, "Budget.lr = nan"),
    ({"iterations": 1, "device": "gpu"}, "Budget.device = 'gpu': allowed 'cpu', 'cuda'"),
    ({"iterations": 1, "device": "cuda:x"}, "Budget.device = 'cuda:x'"),
])
def test_bad_budgets_are_refused(kwargs, message):
    with pytest.raises(ValueError, match=message):
        Budget(**kwargs)


def test_a_reconstruction_checks_its_dtypes():
    with pytest.raises(ValueError, match="float32 images"):
        Reconstruction(np.zeros((2, 3)), np.zeros(2, np.int64), 0.0, 1)
    with pytest.raises(ValueError, match="int64 labels"):
        Reconstruction(np.zeros((2, 3), np.float32), np.zeros(3, np.int64), 0.0, 1)


@pytest.mark.parametrize("name", ATTACKS)
@pytest.mark.parametrize("call, message", [
    ({"num_samples": 2}, "num_samples = 2: must equal .* training.num_examples = 3"),
    ({"labels": [0, 1]}, r"labels must be an integer array of shape \(3,\)"),
    ({"labels": [0.0, 1.0, 2.0]}, r"labels must be an integer array"),
    ({"labels": [0, 10, 2]}, r"labels\[1\] = 10: class ids must lie in 0..9"),
    ({"seed": -1}, "seed = -1: must be an integer >= 0"),
    ({"budget": 5}, "budget must be an attacks.reconstruction.Budget"),
])
def test_bad_calls_are_refused(name, call, message):
    args = {"num_samples": 3, "labels": [0, 1, 2], "budget": Budget(1), "seed": 0, **call}
    with pytest.raises((ValueError, TypeError), match=message):
        get_reconstruction(name)(_case(), **args)


@pytest.mark.parametrize("name", ATTACKS)
def test_adam_and_joint_labels_with_another_loss_are_refused(name):
    fn = get_reconstruction(name)
    with pytest.raises(ValueError, match="training.optimizer = 'adam': unrolling the local "
                                         "training needs SGD"):
        fn(_case(optimizer="adam"), num_samples=3, labels=[0, 1, 2], budget=Budget(1), seed=0)

    def smoothed(out, y):
        return torch.nn.functional.cross_entropy(out, y, label_smoothing=0.1)

    with pytest.raises(ValueError, match="labels = None needs the case's loss to be the mean "
                                         "cross-entropy"):
        fn(_case(loss=smoothed), num_samples=3, labels=None, budget=Budget(1), seed=0)


@pytest.mark.parametrize("name", ATTACKS)
@pytest.mark.parametrize("labels", [[3, 1, 4], None])
def test_same_seed_same_images_bit_for_bit(one_thread, name, labels):
    case = _case()  # 4 unrolled steps with momentum
    run = lambda seed, restarts=2: get_reconstruction(name)(  # noqa: E731
        case, num_samples=3, labels=None if labels is None else np.array(labels),
        budget=Budget(6, restarts), seed=seed)
    a, b, c = run(7), run(7), run(8)
    assert a.images.dtype == np.float32 and a.labels.dtype == np.int64
    assert a.images.shape == (3, 1, 8, 8) and a.labels.shape == (3,)
    assert a.images.min() >= 0.0 and a.images.max() <= 1.0
    np.testing.assert_array_equal(a.images, b.images)
    np.testing.assert_array_equal(a.labels, b.labels)
    assert a.loss == b.loss and a.info == b.info
    assert not np.array_equal(a.images, c.images)
    # the kept restart is the one of lowest loss, and restart r does not depend on how
    # many restarts run
    assert a.loss == min(a.info["restart_losses"]) and len(a.info["restart_losses"]) == 2
    assert run(7, restarts=1).info["restart_losses"] == a.info["restart_losses"][:1]
    if labels is not None:
        assert a.labels.tolist() == labels and a.info["labels"] == "given"
    assert not a.info["single_gradient"] and a.info["local_steps"] == 4


def test_keep_best_skips_diverged_restarts_and_refuses_when_all_did():
    img = torch.zeros(1, 1, 2, 2)
    trials = [Trial(img + 1, torch.tensor([0]), float("inf")),
              Trial(img, torch.tensor([[0.1, 2.0]]), 0.5)]
    rec = keep_best(trials, 3, {})
    assert rec.info["kept_restart"] == 1 and rec.loss == 0.5 and rec.labels.tolist() == [1]
    with pytest.raises(RuntimeError, match="all 1 restarts diverged"):
        keep_best(trials[:1], 3, {})


@pytest.mark.parametrize("name", ATTACKS)
def test_a_cuda_budget_without_that_device_is_a_one_line_error(name, monkeypatch):
    # whatever this machine has, a process that sees no CUDA device refuses the budget
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(ValueError, match=f"{name}: budget.device = 'cuda:1', but this "
                                         "process sees 0 CUDA device"):
        get_reconstruction(name)(_case(), num_samples=3, labels=[0, 1, 2],
                                 budget=Budget(1, device="cuda:1"), seed=0)


@pytest.mark.parametrize("name", ATTACKS)
def test_the_device_path_on_the_cpu_gives_the_same_images(one_thread, name):
    """Budget(device='cpu') goes through the device moves (dummy data drawn on the CPU
    and moved, the model, buffers and target moved, the result brought back): on the
    CPU they are no-ops, so the images equal a run that never names a device."""
    run = lambda budget: get_reconstruction(name)(  # noqa: E731
        _case(), num_samples=3, labels=None, budget=budget, seed=3)
    a, b = run(Budget(4)), run(Budget(4, device=torch.device("cpu").type))
    np.testing.assert_array_equal(a.images, b.images)
    assert a.loss == b.loss


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize("name", ATTACKS)
def test_on_a_gpu_the_simulation_matches_the_cpu_s_and_the_attack_runs(name):
    """The unrolled update (4 steps with momentum) simulated on the GPU equals the CPU's to
    float32 accuracy; the attack on the GPU returns CPU arrays in the box.  (The images
    after some steps are not compared: signed and L-BFGS steps amplify ulp differences.)"""
    from attacks.reconstruction.simulate import UpdateSimulator

    case = _case()
    gen = torch.Generator().manual_seed(0)
    x, y = torch.rand(3, 1, 8, 8, generator=gen), torch.tensor([0, 1, 2])
    cpu = UpdateSimulator.of(case).simulate(x, y)
    gpu = UpdateSimulator.of(case, "cuda").simulate(x.cuda(), y.cuda())
    for c, g in zip(cpu, gpu):
        # float32: ~1e-7 relative per operation, a few hundred operations per entry
        torch.testing.assert_close(g.cpu(), c, rtol=1e-4, atol=1e-4 * float(c.abs().max()))
    rec = get_reconstruction(name)(case, num_samples=3, labels=[0, 1, 2],
                                   budget=Budget(3, device="cuda"), seed=3)
    assert isinstance(rec.images, np.ndarray) and rec.images.dtype == np.float32
    assert rec.images.min() >= 0.0 and rec.images.max() <= 1.0 and np.isfinite(rec.loss)


def test_keep_best_returns_the_iterate_of_lowest_objective(one_thread):
    """keep = best against its reference: the objectives of the last iterates of runs of
    1..K iterations (without step decay a run of k iterations is the first k of a longer
    one), evaluated afresh; the kept images are the argmin's, and always in the box."""
    from attacks.reconstruction.inverting_gradients import initial_images
    from attacks.reconstruction.matching_losses import cosine_distance, total_variation
    from attacks.reconstruction.simulate import UpdateSimulator
    from attacks.reconstruction.trials import restart_generator

    case, labels, tv, k_max = _case(), np.array([3, 1, 4]), 0.05, 6
    fn = get_reconstruction("inverting-gradients")
    run = lambda its, keep: fn(case, num_samples=3, labels=labels,  # noqa: E731
                               budget=Budget(its, 1, lr=0.5), seed=3, tv=tv,
                               lr_decay=False, keep=keep)
    sim = UpdateSimulator.of(case, "cpu")
    y = torch.from_numpy(labels)

    def objective(images):
        x = torch.as_tensor(images, dtype=sim.dtype)
        return float(cosine_distance(sim.simulate(x, y), sim.target).detach()) + tv * float(
            total_variation(x))

    start = initial_images((3, 1, 8, 8), case.box, "randn", restart_generator(3, 0),
                           sim.dtype).numpy()
    iterates = [run(k, "last").images for k in range(1, k_max + 1)]
    values = [objective(x) for x in iterates]
    best = run(k_max, "best")
    want = iterates[int(np.argmin(values))]
    assert int(np.argmin(values)) != k_max - 1  # the case tells best from last
    np.testing.assert_array_equal(best.images, want.astype(np.float32))
    assert best.info["keep"] == "best" and objective(best.images) <= values[-1]
    assert start.min() < 0.0  # the N(0, 1) start: outside the box, never offered

    # seed 1, no prior, one step: the start's objective is below the first iterate's, and
    # still the first (projected) iterate is kept
    one = lambda keep: fn(case, num_samples=3, labels=labels,  # noqa: E731
                          budget=Budget(1, 1, lr=0.1), seed=1, tv=0.0, lr_decay=False,
                          keep=keep)
    tv = 0.0  # objective() reads tv: now without the prior, as these runs
    start = initial_images((3, 1, 8, 8), case.box, "randn", restart_generator(1, 0),
                           sim.dtype).numpy()
    assert objective(start) < objective(one("last").images)
    np.testing.assert_array_equal(one("best").images, one("last").images)
    assert one("best").images.min() >= 0.0 and one("best").images.max() <= 1.0


def test_auto_tv_follows_the_image_area():
    """tv = auto: the natural-image prior from 16 x 16 pixels on (CIFAR-10, MNIST), almost
    none for the 8 x 8 digits, none for inputs that are not images; the weight used is in
    the reconstruction's info."""
    from attacks.reconstruction.inverting_gradients import auto_tv

    assert auto_tv((3, 32, 32)) == auto_tv((1, 28, 28)) == auto_tv((1, 16, 16)) == 0.1
    assert auto_tv((1, 8, 8)) == auto_tv((1, 15, 16)) == 1e-4
    assert auto_tv((64,)) == 0.0
    rec = get_reconstruction("inverting-gradients")(
        _case(), num_samples=3, labels=np.array([3, 1, 4]), budget=Budget(2), seed=0)
    assert rec.info["tv"] == 1e-4  # the case's images are 8 x 8

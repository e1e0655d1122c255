"""``train.augment`` (fedaudit.training.augment): each view against an independent numpy
construction of the same draws, the draws' distribution, determinism under a seed, the
batch order left alone, in-run GNQ scored on the views trained on, DP-SGD with one view per
sample per step, and the refusals."""

from __future__ import annotations

import copy
import dataclasses

import numpy as np
import pytest
import torch

from fedaudit.config import ScenarioError, load_scenario
from fedaudit.gnq import gnq_scores
from fedaudit.models import build_model
from fedaudit.scenario import GnqConfig, TrainConfig
from fedaudit.training import train_local
from fedaudit.training.augment import (AUGMENTATIONS, Augmenter, augment_generator, random_crop,
                                       random_flip)

pytestmark = pytest.mark.usefixtures("one_thread_module")

CPU = torch.device("cpu")
TRAIN = TrainConfig(local_epochs=2, batch_size=16, optimizer="sgd", lr=0.05, momentum=0.9,
                    weight_decay=0.0, device="cpu")


def images(n=24, c=3, h=6, w=5, seed=0) -> np.ndarray:
    return np.random.default_rng(seed).normal(size=(n, c, h, w)).astype(np.float32)


def numpy_views(x: np.ndarray, mirror: np.ndarray, corners: np.ndarray | None,
                padding: int) -> np.ndarray:
    """The reference: image by image, mirror, zero-pad by ``padding`` and cut the window
    at ``corners[:, i]`` -- plain numpy slicing, no batched indexing."""
    out = np.empty_like(x)
    for i in range(len(x)):
        v = x[i, :, :, ::-1] if mirror[i] else x[i]
        if corners is not None:
            p = np.pad(v, ((0, 0), (padding, padding), (padding, padding)))
            oy, ox = corners[:, i]
            v = p[:, oy:oy + x.shape[2], ox:ox + x.shape[3]]
        out[i] = v
    return out


@pytest.mark.parametrize("padding", [1, 2, 4])
def test_flip_and_crop_match_a_numpy_construction_of_the_same_draws(padding):
    x = images()
    views = Augmenter("flip+crop", padding, seed=7)(torch.from_numpy(x)).numpy()
    # the same generator, drawn in the documented order: one flip per image, then corners
    gen = augment_generator(7)
    mirror = (torch.rand(len(x), generator=gen) < 0.5).numpy()
    corners = torch.randint(0, 2 * padding + 1, (2, len(x)), generator=gen).numpy()
    assert 0 < mirror.sum() < len(x) and len(np.unique(corners)) > 1  # a mix was drawn
    np.testing.assert_array_equal(views, numpy_views(x, mirror, corners, padding))


def test_flip_alone_mirrors_and_keeps_pixels():
    x = images()
    views = Augmenter("flip", 4, seed=3)(torch.from_numpy(x)).numpy()
    mirror = (torch.rand(len(x), generator=augment_generator(3)) < 0.5).numpy()
    np.testing.assert_array_equal(views, numpy_views(x, mirror, None, 0))


def test_a_crop_is_a_shift_with_zero_fill_by_hand():
    """Corner (0, 0) of a 1-padded 3x3 image moves it one pixel down and right."""
    x = torch.arange(1.0, 10.0).reshape(1, 1, 3, 3)

    gen = torch.Generator().manual_seed(0)
    for _ in range(200):  # find a seed state whose first corner draw is (0, 0)
        state = gen.get_state()
        if torch.randint(0, 3, (2, 1), generator=gen).sum() == 0:
            gen.set_state(state)
            break
    else:
        pytest.fail("no (0, 0) corner in 200 draws")
    out = random_crop(x, gen, 1)
    assert out[0, 0].tolist() == [[0, 0, 0], [0, 1, 2], [0, 4, 5]]


def test_draws_are_uniform():
    """Flips at rate 1/2 and every corner of {0..2p}^2 alike: counts within 5 standard
    deviations of their binomial expectation (a false alarm has odds of about 1e-6)."""
    n, p = 20_000, 2
    gen = torch.Generator().manual_seed(1)
    x = torch.zeros(n, 1, 1, 1)
    x[:, :, :, 0] = 1.0
    flipped = random_flip(torch.cat([x, torch.zeros(n, 1, 1, 1)], dim=-1), gen)[:, 0, 0, 1]
    assert abs(flipped.sum().item() - n / 2) < 5 * (n / 4) ** 0.5
    corners = torch.randint(0, 2 * p + 1, (2, n), generator=gen)
    counts = np.bincount((corners[0] * (2 * p + 1) + corners[1]).numpy(),
                         minlength=(2 * p + 1) ** 2)
    q = 1 / (2 * p + 1) ** 2
    assert np.all(np.abs(counts - n * q) < 5 * (n * q * (1 - q)) ** 0.5)


def test_none_draws_nothing_and_returns_the_batch():
    xb = torch.from_numpy(images())
    assert Augmenter("none", 4, seed=0)(xb) is xb
    assert set(AUGMENTATIONS.names()) >= {"none", "flip", "flip+crop"}


def test_non_images_are_refused_by_the_augmenter():
    with pytest.raises(ValueError, match=r"train.augment = 'flip' needs images"):
        Augmenter("flip", 4, seed=0)(torch.zeros(4, 8, dtype=torch.long))


def _train(augment, seed, dp=None, gnq=None):
    x, y = images(n=40, c=1, h=8, w=8, seed=2), np.arange(40) % 10
    model = build_model("cnn", in_channels=1, image_size=8, num_classes=10, seed=0)
    cfg = dataclasses.replace(TRAIN, augment=augment)
    res = train_local(model, x, y, np.arange(40), cfg, seed=seed, device=CPU, dp=dp, gnq=gnq)
    return model.state_dict(), res


@pytest.mark.parametrize("dp", [None, {"noise_multiplier": 0.5, "clip_norm": 1.0}])
def test_training_with_augmentation_is_deterministic_under_a_seed(dp):
    a, _ = _train("flip+crop", seed=5, dp=dp)
    b, _ = _train("flip+crop", seed=5, dp=dp)
    c, _ = _train("flip+crop", seed=6, dp=dp)
    plain, _ = _train("none", seed=5, dp=dp)
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert not all(torch.equal(a[k], c[k]) for k in a)
    assert not all(torch.equal(a[k], plain[k]) for k in a)  # the views changed the update


def test_augmentation_leaves_the_batch_order_alone():
    gnq = GnqConfig(client=True, server=False, lam=1e-2, lam_mode="absolute", rho=1e-2)
    _, aug = _train("flip+crop", seed=5, gnq=gnq)
    _, plain = _train("none", seed=5, gnq=gnq)
    np.testing.assert_array_equal(aug.gnq_ids, plain.gnq_ids)


def test_in_run_gnq_scores_the_views_trained_on():
    """The first batch's in-run scores equal naive float64 GNQ of its augmented views (the
    documented draws: order from the seed's generator, views from the augmentation
    stream), not of the samples as stored.  Tolerance: the float32 forward and backward
    carry relative errors of a few eps32 (~1e-7) that GNQ's solve amplifies by the Gram's
    conditioning on these random images (measured 1.2e-7 with 1 and 2 threads); 1e-5 as in
    tests/gnq/test_gnq_precision.py, while the un-augmented samples' scores differ by far
    more (checked)."""
    x, y = images(n=16, c=1, h=8, w=8, seed=4), np.arange(16) % 10
    model = build_model("cnn", in_channels=1, image_size=8, num_classes=10, seed=0)
    start = copy.deepcopy(model).double()
    cfg = dataclasses.replace(TRAIN, local_epochs=1, batch_size=16, augment="flip+crop")
    gnq = GnqConfig(client=True, server=False, lam=1e-2, lam_mode="absolute", rho=1e-2)
    res = train_local(model, x, y, np.arange(16), cfg, seed=9, device=CPU, gnq=gnq)
    order = torch.randperm(16, generator=torch.Generator().manual_seed(9))
    views = Augmenter("flip+crop", 4, seed=9)(torch.from_numpy(x)[order])
    np.testing.assert_array_equal(res.gnq_ids, order.numpy())
    yb = torch.from_numpy(y)[order]
    ref = gnq_scores(start, views.double(), yb, method="naive").numpy()
    stored = gnq_scores(start, torch.from_numpy(x)[order].double(), yb, method="naive").numpy()
    rel = np.abs(res.gnq_scores - ref) / np.abs(ref)
    assert rel.max() < 1e-5
    assert (np.abs(stored - ref) / np.abs(ref)).max() > 1e-2


def test_text_data_refuses_augmentation():
    with pytest.raises(ScenarioError, match=r"train.augment = 'flip' augments images; "
                       r"data.dataset = 'shakespeare' is text; allowed: none$"):
        load_scenario("shakespeare-secrets", ["train.augment='flip'",
                                              "data.path='x.txt'"])


def test_unknown_augmentation_is_refused_with_the_choices():
    with pytest.raises(ScenarioError, match=r"train.augment = 'rotate': unknown choice; "
                       r"allowed: flip, flip\+crop, none"):
        load_scenario("quickstart", ["train.augment='rotate'"])


def test_the_labs_client_update_trains_on_views_when_asked():
    """fedaudit.labs.updates.client_update(augment=...): the same training path, so the
    same seed repeats and the views change the update; the stored digits stay as they are."""
    from fedaudit.labs.updates import client_update

    a, b = client_update(4, augment="flip+crop"), client_update(4, augment="flip+crop")
    plain = client_update(4)
    assert all(torch.equal(a.received[k], b.received[k]) for k in a.received)
    assert not all(torch.equal(a.received[k], plain.received[k]) for k in a.received)
    np.testing.assert_array_equal(a.x, plain.x)

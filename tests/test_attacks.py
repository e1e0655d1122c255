"""attacks: oracle, Res-MIA erosion and scores, baselines, registry, membership sampling,
and an end-to-end check on a real overfit model (sklearn digits, offline)."""

from __future__ import annotations

import dataclasses
import math
import pickle

import numpy as np
import pytest
import torch
from torch import nn

from attacks import ATTACKS, Oracle, get_attack, register_attack
from attacks.membership.baselines import (
    confidence_scores,
    entropy_scores,
    loss_scores,
    mentropy_scores,
)
from attacks.membership import (AttackOutcome, NonmemberSample, evaluate_attacks, sample_members, sample_nonmembers)
from attacks.membership.registry import AttackScores
from attacks.membership.resmia import default_sizes, erode, resmia_scores
from fedaudit.metrics import MembershipMetrics, membership_metrics

BUILTIN = ("resmia", "loss", "confidence", "entropy", "mentropy")


# --------------------------------------------------------------------------- helpers


class LookupModel(nn.Module):
    """Stub classifier: input (N, 1, 1, 1) holds a row index; output = log P[row].

    softmax(log P[row]) = P[row], so the oracle's probabilities are exactly P. The table is
    a float64 buffer (no parameters), so the oracle queries in float64.
    """

    def __init__(self, proba: np.ndarray) -> None:
        super().__init__()
        with np.errstate(divide="ignore"):
            self.register_buffer("logp", torch.from_numpy(np.log(proba)))
        self.calls: list[int] = []

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.calls.append(int(x.shape[0]))
        return self.logp[x.reshape(-1).long()]


def _index_inputs(n: int) -> torch.Tensor:
    return torch.arange(n, dtype=torch.float64).reshape(n, 1, 1, 1)


class SharpnessModel(nn.Module):
    """Two classes; logit_0 = 10 * (pixel std of the image), logit_1 = 0.

    Confidence in class 0 falls as the image is blurred, so sharper images should get a
    higher Res-MIA score and constant images a score of exactly 0.
    """

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        s = x.flatten(1).std(dim=1, unbiased=False)
        return torch.stack([10 * s, torch.zeros_like(s)], dim=1)


def _small_cnn(num_classes: int = 3) -> nn.Module:
    return nn.Sequential(
        nn.Conv2d(1, 4, 3, padding=1),
        nn.BatchNorm2d(4),
        nn.ReLU(),
        nn.Dropout(0.5),
        nn.Flatten(),
        nn.Linear(4 * 8 * 8, num_classes),
    )


def _block_mean(a: np.ndarray, block: int) -> np.ndarray:
    """Mean over non-overlapping block x block tiles of a 2-D array."""
    h, w = a.shape
    return a.reshape(h // block, block, w // block, block).mean(axis=(1, 3))


def _adaptive_mean(a: np.ndarray, out: int) -> np.ndarray:
    """Adaptive average pooling of a square 2-D array, windows [floor(iH/s), ceil((i+1)H/s))."""
    n = a.shape[0]
    bounds = [(math.floor(i * n / out), math.ceil((i + 1) * n / out)) for i in range(out)]
    return np.array([[a[r0:r1, c0:c1].mean() for (c0, c1) in bounds] for (r0, r1) in bounds])


def _nearest_up(a: np.ndarray, n: int) -> np.ndarray:
    """PyTorch 'nearest' upsampling of a square array to n x n: source index floor(i*s/n)."""
    src = [math.floor(i * a.shape[0] / n) for i in range(n)]
    return a[np.ix_(src, src)]


# --------------------------------------------------------------------------- erosion


def test_erode_matches_explicit_block_means_8x8():
    img = (np.arange(64, dtype=np.float64) ** 1.5 % 17).reshape(8, 8)  # irregular values
    x = torch.from_numpy(img).reshape(1, 1, 8, 8)
    levels = erode(x)
    assert len(levels) == 4  # x_0 .. x_3, K = log2(8)
    assert levels[0] is x
    for level, block in zip(levels[1:], (2, 4, 8)):
        expected = np.kron(_block_mean(img, block), np.ones((block, block)))
        assert level.shape == x.shape
        np.testing.assert_allclose(level[0, 0].numpy(), expected, rtol=0, atol=1e-12)
    np.testing.assert_allclose(levels[3].numpy(), np.full((1, 1, 8, 8), img.mean()), atol=1e-12)


def test_erode_is_progressive_and_ends_at_channel_means():
    x = torch.rand(2, 3, 8, 8, generator=torch.Generator().manual_seed(0))
    levels = erode(x)
    for a, b in zip(levels, levels[1:]):
        assert not torch.allclose(a, b)  # no fixed-factor idempotence
    last = levels[-1]
    torch.testing.assert_close(last, x.mean(dim=(2, 3), keepdim=True).expand_as(x))


def test_fixed_factor_pooling_is_idempotent_which_is_why_sizes_shrink():
    x = torch.rand(1, 1, 8, 8, generator=torch.Generator().manual_seed(1))
    x1 = erode(x, sizes=[4])[1]
    again = erode(x1, sizes=[4])[1]  # the same factor re-applied to x_1
    torch.testing.assert_close(again, x1)
    assert not torch.allclose(erode(x)[2], x1)


def test_erode_pools_from_x0_not_from_previous_step():
    img = np.random.default_rng(3).random((7, 7))
    x = torch.from_numpy(img).reshape(1, 1, 7, 7)
    x0, x1, x2 = erode(x, sizes=[4, 2])
    from_x0 = _nearest_up(_adaptive_mean(img, 2), 7)
    from_x1 = _nearest_up(_adaptive_mean(x1[0, 0].numpy(), 2), 7)
    np.testing.assert_allclose(x1[0, 0].numpy(), _nearest_up(_adaptive_mean(img, 4), 7), atol=1e-12)
    np.testing.assert_allclose(x2[0, 0].numpy(), from_x0, atol=1e-12)
    assert not np.allclose(from_x0, from_x1)  # the two readings really differ here


def test_default_sizes():
    assert default_sizes(8, 8) == [(4, 4), (2, 2), (1, 1)]
    assert default_sizes(32, 32) == [(16, 16), (8, 8), (4, 4), (2, 2), (1, 1)]
    assert default_sizes(7, 7) == [(4, 4), (2, 2)]
    assert default_sizes(28, 28, steps=2) == [(14, 14), (7, 7)]
    # non-square: each side on its own, K from the longer side
    assert default_sizes(8, 32) == [(4, 16), (2, 8), (1, 4), (1, 2), (1, 1)]


@pytest.mark.parametrize(
    ("shape", "kwargs", "n_levels"),
    [
        ((2, 1, 7, 7), {}, 3),
        ((1, 3, 32, 32), {"sizes": [10, 5, 3]}, 4),
        ((1, 3, 32, 32), {"sizes": [(12, 9), (5, 5), 1]}, 4),
        ((2, 2, 8, 32), {}, 6),
        ((1, 1, 28, 28), {"steps": 2, "upsample": "bilinear"}, 3),
    ],
)
def test_erode_keeps_shape(shape, kwargs, n_levels):
    x = torch.rand(*shape, generator=torch.Generator().manual_seed(2))
    levels = erode(x, **kwargs)
    assert len(levels) == n_levels
    assert all(level.shape == x.shape and level.dtype == x.dtype for level in levels)


def test_bilinear_differs_from_nearest_except_at_1x1():
    x = torch.rand(1, 1, 8, 8, generator=torch.Generator().manual_seed(4))
    near, bil = erode(x, upsample="nearest"), erode(x, upsample="bilinear")
    assert not torch.allclose(near[1], bil[1])
    assert not torch.allclose(near[2], bil[2])
    # a 1x1 image upsamples to the same constant image either way
    torch.testing.assert_close(near[3], bil[3])


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"sizes": [4, 4]}, "strictly decreasing"),
        ({"sizes": [2, 4]}, "strictly decreasing"),
        ({"sizes": [(4, 2), (2, 4)]}, "strictly decreasing"),
        ({"sizes": [8]}, "smaller than the 8x8 input"),
        ({"sizes": [9]}, "smaller than the 8x8 input"),
        ({"sizes": [0]}, "positive"),
        ({"sizes": [2.5]}, "integer"),
        ({"sizes": [True]}, "integer"),
        ({"sizes": []}, "non-empty"),
        ({"sizes": [4], "steps": 1}, "either steps or sizes"),
        ({"steps": 0}, r"steps must be an integer in \[1, 3\]"),
        ({"steps": 4}, r"steps must be an integer in \[1, 3\]"),
        ({"upsample": "bicubic"}, "upsample must be one of"),
    ],
)
def test_erode_validation(kwargs, match):
    with pytest.raises(ValueError, match=match):
        erode(torch.zeros(1, 1, 8, 8), **kwargs)


def test_erode_rejects_bad_inputs():
    with pytest.raises(ValueError, match=r"\(N, C, H, W\)"):
        erode(torch.zeros(8, 8))
    with pytest.raises(ValueError, match="floating-point"):
        erode(torch.zeros(1, 1, 8, 8, dtype=torch.int64))
    with pytest.raises(ValueError, match="too small"):
        erode(torch.zeros(1, 1, 1, 1))


# --------------------------------------------------------------------------- Res-MIA scores


def test_resmia_scores_queries_curves_and_formulas():
    x = torch.rand(5, 1, 8, 8, generator=torch.Generator().manual_seed(5))
    x[4] = 0.5  # a constant image: erosion changes nothing
    oracle = Oracle(SharpnessModel(), num_classes=2)
    scores, curves = resmia_scores(oracle, x, return_curves=True)
    assert oracle.queries == 5 * 4  # K + 1 = 4 queries per sample
    assert scores.shape == (5,) and curves.shape == (5, 4)
    assert scores.dtype == np.float64

    proba0 = Oracle(SharpnessModel()).predict_proba(x)
    np.testing.assert_allclose(curves[:, 0], proba0.max(axis=1))  # f_{y*}(x_0)
    for i, level in enumerate(erode(x)):
        p = Oracle(SharpnessModel()).predict_proba(level)
        np.testing.assert_allclose(curves[:, i], p[np.arange(5), proba0.argmax(axis=1)])

    np.testing.assert_allclose(scores, (curves[:, 0] - curves[:, 3]) / 3)
    slope = resmia_scores(oracle, x, score="mean-slope")
    by_hand = [sum((c[0] - c[k]) / k for k in (1, 2, 3)) / 3 for c in curves]
    np.testing.assert_allclose(slope, by_hand)

    assert np.all(scores[:4] > 0)  # sharp images lose confidence...
    assert scores[4] == 0.0  # ...a constant one does not


def test_resmia_sharper_image_scores_higher():
    gen = torch.Generator().manual_seed(6)
    sharp = torch.rand(1, 1, 8, 8, generator=gen)
    smooth = erode(sharp, sizes=[4])[1]  # same image with its finest detail removed
    oracle = Oracle(SharpnessModel())
    s = resmia_scores(oracle, torch.cat([sharp, smooth]))
    assert s[0] > s[1]


def test_resmia_chunking_and_input_types_do_not_change_scores():
    x = torch.rand(11, 1, 8, 8, generator=torch.Generator().manual_seed(7))
    model = SharpnessModel()
    ref = resmia_scores(Oracle(model), x)
    oracle = Oracle(model, batch_size=5)
    np.testing.assert_allclose(resmia_scores(oracle, x, chunk_size=1), ref)
    np.testing.assert_allclose(resmia_scores(oracle, x.numpy()), ref)
    assert oracle.queries == 2 * 11 * 4
    np.testing.assert_allclose(
        resmia_scores(Oracle(model), x, steps=2, upsample="bilinear"),
        resmia_scores(Oracle(model), x, sizes=[4, 2], upsample="bilinear"),
    )


def test_resmia_scores_validation():
    oracle = Oracle(SharpnessModel())
    x = torch.zeros(2, 1, 8, 8)
    with pytest.raises(ValueError, match="score must be one of"):
        resmia_scores(oracle, x, score="slope")
    with pytest.raises(ValueError, match="upsample must be one of"):
        resmia_scores(oracle, x, upsample="area")
    with pytest.raises(ValueError, match="chunk_size"):
        resmia_scores(oracle, x, chunk_size=0)
    assert oracle.queries == 0


# --------------------------------------------------------------------------- baselines

P = np.array(
    [
        [0.5, 0.25, 0.25],
        [0.1, 0.8, 0.1],
        [0.7, 0.2, 0.1],
        [1.0, 0.0, 0.0],  # label 1 has probability 0: exercises the eps clipping
    ]
)
Y = np.array([0, 1, 2, 1])
EPS = 1e-30
log = math.log


def test_baselines_by_hand():
    expected_loss = [log(0.5), log(0.8), log(0.1), log(EPS)]
    expected_conf = [0.5, 0.8, 0.1, 0.0]
    expected_entropy = [
        0.5 * log(0.5) + 0.25 * log(0.25) + 0.25 * log(0.25),
        0.1 * log(0.1) + 0.8 * log(0.8) + 0.1 * log(0.1),
        0.7 * log(0.7) + 0.2 * log(0.2) + 0.1 * log(0.1),
        0.0,  # 1 * log 1 + 0 + 0
    ]
    # -Mentr = (1 - p_y) log p_y + sum_{i != y} p_i log(1 - p_i)
    expected_mentropy = [
        0.5 * log(0.5) + 0.25 * log(0.75) + 0.25 * log(0.75),
        0.2 * log(0.8) + 0.1 * log(0.9) + 0.1 * log(0.9),
        0.9 * log(0.1) + 0.7 * log(0.3) + 0.2 * log(0.8),
        1.0 * log(EPS) + 1.0 * log(EPS) + 0.0,  # log 0 -> log eps twice
    ]
    np.testing.assert_allclose(loss_scores(P, Y), expected_loss, rtol=1e-12)
    np.testing.assert_allclose(confidence_scores(P, Y), expected_conf, rtol=1e-12)
    np.testing.assert_allclose(entropy_scores(P), expected_entropy, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(mentropy_scores(P, Y), expected_mentropy, rtol=1e-12)
    for fn in (loss_scores, mentropy_scores):
        assert np.all(np.isfinite(fn(P, Y)))


def test_baselines_orientation():
    # a confident correct prediction (member-like) outranks an unsure one
    proba = np.array([[0.98, 0.01, 0.01], [0.4, 0.35, 0.25]])
    y = np.array([0, 0])
    for scores in (
        loss_scores(proba, y),
        confidence_scores(proba, y),
        entropy_scores(proba),
        mentropy_scores(proba, y),
    ):
        assert scores[0] > scores[1]
    # unlike entropy, mentropy penalises a confident mistake
    wrong = np.array([[0.01, 0.98, 0.01]])
    assert mentropy_scores(wrong, [0])[0] < mentropy_scores(proba[1:], [0])[0]
    assert entropy_scores(wrong)[0] > entropy_scores(proba[1:])[0]


def test_baseline_attacks_through_the_oracle():
    oracle = Oracle(LookupModel(P), batch_size=3)
    x = _index_inputs(len(P))
    pure = {
        "loss": loss_scores(P, Y),
        "confidence": confidence_scores(P, Y),
        "entropy": entropy_scores(P),
        "mentropy": mentropy_scores(P, Y),
    }
    for name, expected in pure.items():
        before = oracle.queries
        np.testing.assert_allclose(get_attack(name)(oracle, x, Y), expected, rtol=1e-12)
        assert oracle.queries - before == len(P)  # one query per sample


def test_baselines_validation():
    with pytest.raises(ValueError, match="y must lie in"):
        loss_scores(P, [0, 1, 3, 0])
    with pytest.raises(ValueError, match="one label per sample"):
        mentropy_scores(P, [0, 1])
    with pytest.raises(ValueError, match="integer class labels"):
        confidence_scores(P, [0.0, 1.0, 2.0, 1.0])
    with pytest.raises(ValueError, match="proba must be 2-D"):
        entropy_scores(P[0])
    with pytest.raises(ValueError, match="eps"):
        loss_scores(P, Y, eps=0.0)


# --------------------------------------------------------------------------- oracle


def test_oracle_counts_queries_and_batches():
    model = LookupModel(P)
    oracle = Oracle(model, batch_size=3)
    assert oracle.queries == 0
    proba = oracle.predict_proba(_index_inputs(4))
    assert model.calls == [3, 1]
    assert oracle.queries == 4
    oracle.predict_proba(_index_inputs(2))
    assert oracle.queries == 6
    oracle.reset_queries()
    assert oracle.queries == 0
    assert proba.dtype == np.float64 and proba.shape == (4, 3)
    np.testing.assert_allclose(proba, P, atol=1e-15)
    assert oracle.num_classes == 3  # learned at the first query (no nn.Linear)


def test_oracle_matches_softmax_and_accepts_numpy():
    torch.manual_seed(0)
    model = _small_cnn()
    oracle = Oracle(model, batch_size=4)
    x = torch.rand(10, 1, 8, 8)
    with torch.no_grad():
        ref = torch.softmax(model(x).double(), dim=1).numpy()
    np.testing.assert_allclose(oracle.predict_proba(x), ref, rtol=1e-6)
    np.testing.assert_allclose(oracle.predict_proba(x.numpy().astype(np.float64)), ref, rtol=1e-6)
    np.testing.assert_allclose(oracle.predict_proba(x).sum(axis=1), 1.0)
    assert oracle.num_classes == 3  # from the last nn.Linear, before any query


def test_oracle_label_only_returns_one_hot():
    torch.manual_seed(1)
    model = _small_cnn(num_classes=4)
    x = torch.rand(12, 1, 8, 8)
    proba = Oracle(model).predict_proba(x)
    labels = Oracle(model, label_only=True)
    onehot = labels.predict_proba(x)
    assert labels.label_only
    assert onehot.shape == (12, 4)
    np.testing.assert_array_equal(onehot.sum(axis=1), 1.0)
    np.testing.assert_array_equal(np.unique(onehot), [0.0, 1.0])
    np.testing.assert_array_equal(onehot.argmax(axis=1), proba.argmax(axis=1))
    assert labels.queries == 12


def _reachable_values(obj):
    for name in dir(obj):
        if name.startswith("__"):
            continue
        try:
            yield name, getattr(obj, name)
        except Exception:  # a property that refuses (num_classes before the first query)
            continue


def test_oracle_exposes_no_parameters():
    torch.manual_seed(2)
    model = _small_cnn()
    oracle = Oracle(model)
    oracle.predict_proba(torch.rand(3, 1, 8, 8))
    param_ids = {id(p) for p in model.parameters()} | {id(b) for b in model.buffers()}
    values = dict(_reachable_values(oracle)) | dict(vars(oracle))
    for name, value in values.items():
        assert not isinstance(value, nn.Module), name
        assert not isinstance(value, torch.Tensor), name
        assert id(value) not in param_ids, name
        owner = getattr(value, "__self__", None)  # bound methods of the model
        assert not isinstance(owner, nn.Module), name
        if isinstance(value, (list, tuple, set, dict)):
            items = value.values() if isinstance(value, dict) else value
            assert not any(isinstance(v, (nn.Module, torch.Tensor)) for v in items), name
    for forbidden in ("parameters", "named_parameters", "state_dict", "buffers", "model",
                      "module", "grad", "weight", "forward"):
        assert not hasattr(oracle, forbidden), forbidden
    assert "Linear" not in repr(oracle) and "Conv" not in repr(oracle)
    with pytest.raises(TypeError, match="cannot be pickled"):
        pickle.dumps(oracle)


def test_oracle_takes_no_gradients_and_uses_eval_mode():
    torch.manual_seed(3)
    model = _small_cnn()
    model.train()
    running_mean = model[1].running_mean.clone()
    oracle = Oracle(model)
    assert not model.training
    x = torch.rand(6, 1, 8, 8, requires_grad=True)
    first = oracle.predict_proba(x)
    assert isinstance(first, np.ndarray)  # no autograd graph can leave the oracle
    model.train()  # the owner switches back: queries must still be in eval mode
    second = oracle.predict_proba(x)
    np.testing.assert_array_equal(first, second)  # dropout off
    torch.testing.assert_close(model[1].running_mean, running_mean)  # BN stats untouched
    assert x.grad is None
    assert all(p.grad is None for p in model.parameters())
    assert all(p.requires_grad for p in model.parameters())  # the caller's model unchanged


def test_oracle_validation():
    with pytest.raises(TypeError, match="torch.nn.Module"):
        Oracle(lambda x: x)
    with pytest.raises(ValueError, match="batch_size"):
        Oracle(_small_cnn(), batch_size=0)
    oracle = Oracle(_small_cnn())
    with pytest.raises(ValueError, match="leading batch axis"):
        oracle.predict_proba(torch.zeros(8))
    with pytest.raises(TypeError, match="torch.Tensor or numpy.ndarray"):
        oracle.predict_proba([[0.0]])
    assert oracle.queries == 0


# --------------------------------------------------------------------------- registry


def test_registry_has_builtin_attacks():
    assert set(BUILTIN) <= set(ATTACKS)
    for name in BUILTIN:
        assert get_attack(name) is ATTACKS[name]


def test_get_attack_unknown_lists_allowed_names():
    with pytest.raises(ValueError, match="unknown attack 'nope'; allowed: .*confidence.*resmia"):
        get_attack("nope")


def test_register_attack_adds_and_guards_names():
    @register_attack("test-constant")
    def constant(oracle, x, y, *, value=1.0):
        oracle.predict_proba(x)
        return np.full(len(x), value)

    try:
        assert get_attack("test-constant") is constant
        with pytest.raises(ValueError, match="already registered"):
            register_attack("loss")(constant)
        with pytest.raises(ValueError, match="attack name must match"):
            register_attack("Bad Name")
        oracle = Oracle(LookupModel(P))
        out = evaluate_attacks(
            oracle, _index_inputs(4), Y, [1, 0, 1, 0], ["test-constant"],
            {"test-constant": {"value": 2.0}},
        )
        np.testing.assert_array_equal(out["test-constant"].scores, 2.0)
    finally:
        ATTACKS.unregister("test-constant")


# --------------------------------------------------------------------------- membership sampling


def test_sample_nonmembers_matches_histogram_exactly():
    rng = np.random.default_rng(0)
    members = np.r_[np.full(30, 3), np.full(5, 0), np.full(12, 7)]
    holdout = rng.integers(0, 10, size=500)
    draw = sample_nonmembers(members, holdout, np.random.default_rng(1))
    assert isinstance(draw, NonmemberSample)
    assert draw.matched and draw.mismatched == 0 and draw.shortfall == {}
    assert draw.indices.size == members.size
    assert np.unique(draw.indices).size == draw.indices.size  # without replacement
    assert draw.indices.min() >= 0 and draw.indices.max() < holdout.size
    np.testing.assert_array_equal(
        np.bincount(holdout[draw.indices], minlength=10), np.bincount(members, minlength=10)
    )


def test_sample_nonmembers_disjoint_from_members_and_deterministic():
    rng = np.random.default_rng(2)
    labels = rng.integers(0, 4, size=300)
    member_ids = rng.choice(300, size=40, replace=False)
    holdout_ids = np.setdiff1d(np.arange(300), member_ids)
    a = sample_nonmembers(labels[member_ids], labels[holdout_ids], np.random.default_rng(5))
    b = sample_nonmembers(labels[member_ids], labels[holdout_ids], np.random.default_rng(5))
    c = sample_nonmembers(labels[member_ids], labels[holdout_ids], np.random.default_rng(6))
    np.testing.assert_array_equal(a.indices, b.indices)
    assert not np.array_equal(a.indices, c.indices)
    assert np.intersect1d(holdout_ids[a.indices], member_ids).size == 0
    seeded = sample_nonmembers(labels[member_ids], labels[holdout_ids], 5)  # an int seed
    np.testing.assert_array_equal(seeded.indices, a.indices)


def test_sample_nonmembers_tops_up_missing_classes():
    members = np.r_[np.full(30, 3), np.full(10, 1)]
    holdout = np.r_[np.full(10, 3), np.full(50, 1), np.full(50, 2)]
    draw = sample_nonmembers(members, holdout, np.random.default_rng(0))
    assert draw.indices.size == 40
    assert np.unique(draw.indices).size == 40
    assert draw.mismatched == 20 and draw.shortfall == {3: 20}
    assert not draw.matched
    drawn = holdout[draw.indices]
    assert (drawn == 3).sum() == 10  # every class-3 holdout sample is used first
    assert (drawn == 1).sum() >= 10  # class 1 fully matched, maybe topped up further
    again = sample_nonmembers(members, holdout, np.random.default_rng(0))
    np.testing.assert_array_equal(again.indices, draw.indices)
    with pytest.raises(ValueError, match="class 3: 20 missing of 30"):
        sample_nonmembers(members, holdout, np.random.default_rng(0), strict=True)


def test_sample_nonmembers_errors():
    with pytest.raises(ValueError, match="fewer than the 5 members"):
        sample_nonmembers(np.zeros(5, int), np.zeros(4, int), 0)
    with pytest.raises(ValueError, match="member_labels must be 1-D"):
        sample_nonmembers(np.zeros((2, 2), int), np.zeros(4, int), 0)
    with pytest.raises(ValueError, match="holdout_labels must hold integer"):
        sample_nonmembers(np.zeros(2, int), np.zeros(4), 0)


def test_sample_members():
    ids = np.arange(100, 200)
    sub = sample_members(ids, 10, np.random.default_rng(0))
    assert sub.size == 10 and np.unique(sub).size == 10
    assert np.isin(sub, ids).all() and np.all(np.diff(sub) > 0)  # original order kept
    np.testing.assert_array_equal(sub, sample_members(ids, 10, np.random.default_rng(0)))
    np.testing.assert_array_equal(sample_members(ids, None, 0), ids)
    np.testing.assert_array_equal(sample_members(ids, 500, 0), ids)
    for bad in (0, -1, 2.5, True):
        with pytest.raises(ValueError, match="max_members"):
            sample_members(ids, bad, 0)


def test_evaluate_attacks_reports_queries_time_and_metrics():
    torch.manual_seed(4)
    model = _small_cnn()
    x = torch.rand(20, 1, 8, 8)
    y = np.arange(20) % 3
    mask = np.r_[np.ones(10), np.zeros(10)]
    oracle = Oracle(model, batch_size=7)
    out = evaluate_attacks(oracle, x, y, mask, list(BUILTIN), {"resmia": {"steps": 2}})
    assert list(out) == list(BUILTIN)  # in the order asked for
    for name, res in out.items():
        assert isinstance(res, AttackOutcome) and isinstance(res.metrics, MembershipMetrics)
        assert res.scores.shape == (20,) and res.scores.dtype == np.float64
        assert res.seconds_per_sample > 0
        assert res.metrics.min_fpr_resolution == 1 / 10  # 10 non-members
        assert res.metrics == MembershipMetrics.of(res.scores, mask)
        assert res.metrics.as_dict() == {k: v for k, v in membership_metrics(
            res.scores, mask).items() if k not in ("n_members", "n_nonmembers")}
        assert dict(res.info) == {}  # bare scores: nothing reported
        opts = {"steps": 2} if name == "resmia" else {}
        # the same batches as the oracle above: another batch size may take another float32
        # matmul kernel (rounding differs by CPU), so compare like with like ...
        expected = get_attack(name)(Oracle(model, batch_size=7), x, y, **opts)
        # ... and allow for float32 logits anyway: scores are float64 functions of softmax
        # outputs (<= 1) and log-probabilities of a 3-class net, so a few float32 ulps of
        # the logits (eps32 ~ 1.2e-7) bound any difference; 1e-5 absolute is ~100 ulps.
        np.testing.assert_allclose(res.scores, expected, rtol=0, atol=1e-5)
    assert out["resmia"].queries_per_sample == 3  # K = 2 -> 3 queries
    assert all(out[m].queries_per_sample == 1 for m in BUILTIN if m != "resmia")
    assert oracle.queries == 20 * (3 + 4)
    single = evaluate_attacks(Oracle(model), x, y, np.ones(20), ["loss"])
    assert single["loss"].metrics is None  # one class only: no metrics, scores still there
    assert single["loss"].scores.shape == (20,)
    with pytest.raises(dataclasses.FrozenInstanceError):
        single["loss"].metrics = None  # type: ignore[misc]


def test_evaluate_attacks_returns_what_the_attack_reported():
    @register_attack("test-informative")
    def informative(oracle, x, y):
        oracle.predict_proba(x)
        oracle.predict_proba(x)
        return AttackScores(np.arange(len(x), dtype=np.float32), {"chosen": 3})

    try:
        out = evaluate_attacks(Oracle(LookupModel(P)), _index_inputs(4), Y, [1, 0, 1, 0],
                               ["test-informative"])["test-informative"]
        assert out.queries_per_sample == 2.0
        np.testing.assert_array_equal(out.scores, [0, 1, 2, 3])
        assert out.scores.dtype == np.float64
        assert dict(out.info) == {"chosen": 3}
        with pytest.raises(TypeError):
            out.info["chosen"] = 4  # read-only
        # members score 0 and 2, non-members 1 and 3: 1 of the 4 pairs ranked right
        assert out.metrics.auc == 0.25
    finally:
        ATTACKS.unregister("test-informative")


def test_evaluate_attacks_validation():
    oracle = Oracle(_small_cnn())
    x, y, mask = torch.rand(4, 1, 8, 8), np.arange(4) % 3, [1, 0, 1, 0]
    with pytest.raises(ValueError, match="unknown attack 'nope'"):
        evaluate_attacks(oracle, x, y, mask, ["nope"])
    with pytest.raises(ValueError, match="more than once"):
        evaluate_attacks(oracle, x, y, mask, ["loss", "loss"])
    with pytest.raises(ValueError, match="options given for unknown attack"):
        evaluate_attacks(oracle, x, y, mask, ["loss"], {"los": {}})
    with pytest.raises(ValueError, match="y must have shape"):
        evaluate_attacks(oracle, x, y[:3], mask, ["loss"])
    with pytest.raises(ValueError, match="member_mask must have shape"):
        evaluate_attacks(oracle, x, y, mask[:3], ["loss"])
    with pytest.raises(ValueError, match="methods is empty"):
        evaluate_attacks(oracle, x, y, mask, [])
    assert oracle.queries == 0


# --------------------------------------------------------------------------- real model

N_MEMBERS = 150
SEED = 0
# Plain 8x8 digits generalise too well for a 150-sample model to be strongly attackable
# (~93% test accuracy): over 10 seeds Res-MIA (K=3, endpoint) averaged AUC 0.58 (min
# 0.53), the baselines 0.65 (min 0.61), while the 3-sigma margin below is 0.074. Fixed
# per-sample pixel noise (part of each sample, like sensor noise) makes the model memorise
# its training images: over 10 seeds Res-MIA then averaged 0.69 (min 0.64), the baselines
# 0.82 (min 0.80). The margin is not relaxed; the model is made to overfit more.
PIXEL_NOISE = 0.3


def _null_auc_sd(n1: int, n0: int) -> float:
    """SD of the AUC (Mann-Whitney U / n1 n0) when scores do not depend on membership."""
    return math.sqrt((n1 + n0 + 1) / (12 * n1 * n0))


def _mlp() -> nn.Module:
    return nn.Sequential(
        nn.Flatten(), nn.Linear(64, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(),
        nn.Linear(512, 10),
    )


@pytest.fixture(scope="module")
def digits_setup():
    """Members: 150 random digits; non-members: all the others (1647).

    Returns ``(x, y, member_mask, trained, untrained)``. The split is random, so the
    remaining samples are exchangeable with the members (no class matching needed).
    """
    datasets = pytest.importorskip("sklearn.datasets")
    digits = datasets.load_digits()
    x = (digits.images / 16.0).astype(np.float32)[:, None]
    noise = np.random.default_rng(1234).standard_normal(x.shape).astype(np.float32)
    x = np.clip(x + PIXEL_NOISE * noise, 0.0, 1.0)
    y = digits.target.astype(np.int64)
    order = np.random.default_rng(SEED).permutation(len(y))
    member = np.zeros(len(y), dtype=bool)
    member[order[:N_MEMBERS]] = True

    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny model: threads only add contention on a shared CI box
    try:
        torch.manual_seed(SEED)
        untrained = _mlp()
        torch.manual_seed(SEED)
        trained = _mlp()
        xm, ym = torch.from_numpy(x[member]), torch.from_numpy(y[member])
        opt = torch.optim.Adam(trained.parameters(), lr=1e-3)
        for _ in range(400):  # full batch, until the training set is memorised
            opt.zero_grad()
            nn.functional.cross_entropy(trained(xm), ym).backward()
            opt.step()
        trained.eval()
        with torch.no_grad():
            train_acc = (trained(xm).argmax(1) == ym).float().mean().item()
        assert train_acc == 1.0
        yield torch.from_numpy(x), y, member, trained, untrained
    finally:
        torch.set_num_threads(threads)


def _aucs(model, x, y, member, **resmia_options):
    out = evaluate_attacks(Oracle(model), x, y, member, list(BUILTIN), {"resmia": resmia_options})
    return {name: res.metrics.auc for name, res in out.items()}, out


def test_every_attack_beats_chance_on_an_overfit_model(digits_setup):
    x, y, member, trained, _ = digits_setup
    margin = 3 * _null_auc_sd(member.sum(), (~member).sum())  # ~0.074
    aucs, out = _aucs(trained, x, y, member)
    for name, auc in aucs.items():
        assert auc > 0.5 + margin, (name, aucs)
    assert out["resmia"].queries_per_sample == 4  # 8x8: K = 3
    # the non-member test accuracy is clearly below the 100% training accuracy
    acc = (Oracle(trained).predict_proba(x[~member]).argmax(1) == y[~member]).mean()
    assert acc < 0.9


def test_no_attack_beats_chance_on_an_untrained_model(digits_setup):
    x, y, member, _, untrained = digits_setup
    bound = 4 * _null_auc_sd(member.sum(), (~member).sum())  # ~0.098
    for options in ({}, {"score": "mean-slope"}, {"upsample": "bilinear", "steps": 2}):
        aucs, _ = _aucs(untrained, x, y, member, **options)
        for name, auc in aucs.items():
            assert abs(auc - 0.5) < bound, (name, options, aucs)


def test_resmia_curves_members_start_higher(digits_setup):
    x, _, member, trained, _ = digits_setup
    _, curves = resmia_scores(Oracle(trained), x, return_curves=True)
    mean_member, mean_non = curves[member].mean(0), curves[~member].mean(0)
    assert mean_member[0] > mean_non[0]
    assert np.all(np.diff(mean_member) < 0)  # erosion lowers the mean confidence

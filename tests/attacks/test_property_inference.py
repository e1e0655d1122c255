"""Property inference (attacks.property_inference): the auxiliary updates against naive
per-batch gradients in float64, the batch property classifier on explicit features, the
brightness property on explicit images, and the family's scoring against hand-made truths."""

import numpy as np
import pytest
import torch

from attacks.property_inference import PROPERTIES, PROPERTY_ATTACKS, AuxiliaryUpdates
from attacks.property_inference.family import auxiliary_updates
from attacks.update_case import LocalTraining, UpdateCase
from attacks.update_family import FAMILIES, CaseOutput, CaseTruth, Scoring


def _case(n: int = 3) -> UpdateCase:
    """A float64 linear softmax model on 2x2 one-channel images; one SGD step of the whole
    batch (a single gradient): the update is -lr times the gradient of a made-up batch."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(4, 3)).double()
    start = {k: v.detach().clone() for k, v in model.state_dict().items()}
    update = {k: torch.randn_like(v) for k, v in start.items()}
    training = LocalTraining(lr=0.1, momentum=0.0, weight_decay=0.0, optimizer="sgd",
                             local_epochs=1, batch_size=n, num_examples=n)
    return UpdateCase(model=model, start=start, update=update, training=training,
                      input_shape=(1, 2, 2), num_classes=3, box=(0.0, 1.0),
                      loss=torch.nn.functional.cross_entropy)


def _naive_gradient(case, x, y) -> np.ndarray:
    """The mean cross-entropy's gradient over the batch, by hand: (softmax - onehot) x^T."""
    w, b = case.start["1.weight"].numpy(), case.start["1.bias"].numpy()
    flat = x.reshape(len(x), -1).astype(np.float64)
    z = flat @ w.T + b
    p = np.exp(z - z.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    d = (p - np.eye(3)[y]) / len(x)
    return np.concatenate([(d.T @ flat).ravel(), d.sum(axis=0)])


def test_the_auxiliary_updates_are_the_batches_gradients():
    case = _case()
    rng = np.random.default_rng(1)
    x = rng.random((10, 1, 2, 2))
    y = rng.integers(0, 3, 10)
    has = np.array([True, True] + [False] * 8)
    aux = auxiliary_updates(case, x, y, has, batches=3, seed=0)
    assert aux.features.shape == (6, 15) and aux.labels.tolist() == [1, 0, 1, 0, 1, 0]
    # the same draws as the function: with the property, one property sample then n - 1
    # from all; without, non-property samples only
    draw = np.random.default_rng(0)
    for b in range(6):
        if b % 2 == 0:
            ids = np.concatenate([draw.choice(np.flatnonzero(has), 1), draw.choice(10, 2)])
            assert has[ids].any()
        else:
            ids = draw.choice(np.flatnonzero(~has), 3, replace=False)
            assert not has[ids].any()
        # float64 throughout: both sides round the same few sums, far below 1e-12
        np.testing.assert_allclose(aux.features[b], _naive_gradient(case, x[ids], y[ids]),
                                   rtol=1e-12, atol=1e-15)
    observed = np.concatenate([-case.update[k].numpy().ravel() / 0.1
                               for k in ("1.weight", "1.bias")])
    np.testing.assert_allclose(aux.target, observed, rtol=1e-12)


def test_auxiliary_data_without_both_kinds_are_refused():
    with pytest.raises(ValueError, match="2 samples with the property and 0 without"):
        auxiliary_updates(_case(), np.zeros((2, 1, 2, 2)), np.zeros(2, np.int64),
                          np.array([True, True]), batches=2, seed=0)


def test_the_classifier_scores_the_update_by_the_side_it_falls_on():
    """Feature 0 separates the batches (+1 with the property, -1 without); feature 1 is
    noise on a scale 1000 times larger, which the standardisation neutralises."""
    rng = np.random.default_rng(0)
    labels = np.repeat([1, 0], 20)
    feats = np.stack([np.where(labels == 1, 1.0, -1.0) + 0.1 * rng.standard_normal(40),
                      1000 * rng.standard_normal(40)], axis=1)
    bpc = PROPERTY_ATTACKS.get("bpc")
    high = bpc(AuxiliaryUpdates(feats, labels, np.array([0.9, 0.0])))
    low = bpc(AuxiliaryUpdates(feats, labels, np.array([-0.9, 0.0])))
    assert high > 0.9 and low < 0.1
    with pytest.raises(ValueError, match="both 0 and 1"):
        AuxiliaryUpdates(feats, np.ones(40, np.int64), np.zeros(2))


def test_brightness_is_the_mean_over_every_channel_and_pixel():
    x = np.zeros((3, 3, 2, 2), np.float32)
    x[0] = 0.7
    x[1, 0] = 1.0  # mean 1/3
    x[2] = 0.5     # below 0.6 (0.6 itself is float32's 0.6000000238: above)
    assert PROPERTIES.get("brightness")(x, above=0.6).tolist() == [True, False, False]


def test_the_family_scores_against_the_batch_property():
    """Four updates: clients 0 and 1 hold a bright image (present), 2 and 3 do not; the
    scores rank three of the four pairs right: AUC 3/4."""
    fam = FAMILIES.get("property_inference")
    bright, dark = np.full((1, 1, 2, 2), 0.9), np.full((1, 1, 2, 2), 0.1)
    truths = [CaseTruth(c, 1, np.arange(2), np.concatenate(xs), np.zeros(2, np.int64))
              for c, xs in enumerate([(bright, dark), (bright, bright), (dark, dark),
                                      (dark, dark)])]
    scores = [0.9, 0.4, 0.5, 0.1]
    outs = [CaseOutput(c, 1, {"bpc": s}, {"bpc": 0.0}) for c, s in enumerate(scores)]
    settings = {"property": "brightness", "property_options": {"above": 0.6}, "batches": 2}
    scored = fam.score(outs, Scoring(["bpc"], truths, 1, np.zeros((1, 2, 2)), settings))
    sec = scored.section
    assert [c["present"] for c in sec["cases"]] == [True, True, False, False]
    assert [c["with_property"] for c in sec["cases"]] == [1, 2, 0, 0]
    assert sec["updates_with_property"] == 2 and sec["sample_rate"] == 3 / 8
    assert sec["pooled"]["bpc"]["auc"] == 0.75 and sec["per_round"]["1"]["bpc"]["auc"] == 0.75
    section = {"methods": ["bpc"], **sec}
    assert fam.columns(section) == {"property_auc": 0.75}
    assert fam.cell(section).figure == 0.75 and fam.cell(section).interval is not None
    assert "from 4 updates, 2 with the property: bpc AUC 0.750" in fam.console(section)
    one_kind = fam.score(outs[:2], Scoring(["bpc"], truths[:2], 1, np.zeros((1, 2, 2)),
                                           settings)).section
    assert one_kind["pooled"]["bpc"]["auc"] is None  # every update holds it: no AUC

"""The black-box oracle (attacks.Oracle): queries counted, softmax probabilities, label-only
answers, no parameters or gradients reachable, input checks."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
import torch
from torch import nn

from attacks import Oracle

from tests.attacks.stubs import LookupModel, P, index_inputs, small_cnn


def test_oracle_counts_queries_and_batches():
    model = LookupModel(P)
    oracle = Oracle(model, batch_size=3)
    assert oracle.queries == 0
    proba = oracle.predict_proba(index_inputs(4))
    assert model.calls == [3, 1]
    assert oracle.queries == 4
    oracle.predict_proba(index_inputs(2))
    assert oracle.queries == 6
    oracle.reset_queries()
    assert oracle.queries == 0
    assert proba.dtype == np.float64 and proba.shape == (4, 3)
    np.testing.assert_allclose(proba, P, atol=1e-15)
    assert oracle.num_classes == 3  # learned at the first query (no nn.Linear)


def test_oracle_matches_softmax_and_accepts_numpy():
    torch.manual_seed(0)
    model = small_cnn()
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
    model = small_cnn(num_classes=4)
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
    model = small_cnn()
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
    model = small_cnn()
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
        Oracle(small_cnn(), batch_size=0)
    oracle = Oracle(small_cnn())
    with pytest.raises(ValueError, match="leading batch axis"):
        oracle.predict_proba(torch.zeros(8))
    with pytest.raises(TypeError, match="torch.Tensor or numpy.ndarray"):
        oracle.predict_proba([[0.0]])
    assert oracle.queries == 0

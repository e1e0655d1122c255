"""``sparsify``: the client's update keeps its ceil(keep * n) largest entries per tensor,
checked on explicit arrays; integer tensors pass; the declared option and its errors."""

import numpy as np
import pytest
import torch

from fedaudit.config import ScenarioError, load_scenario
from fedaudit.defenses import get_defense
from fedaudit.defenses.sparsify import top_k_update


def test_top_k_keeps_the_largest_magnitudes_by_hand():
    start = torch.tensor([1.0, 1.0, 1.0, 1.0, 1.0])
    trained = torch.tensor([1.5, 0.0, 1.1, 3.0, 0.8])  # u = [0.5, -1, 0.1, 2, -0.2]
    # keep 0.4 of 5 entries: ceil(2.0) = 2 -> 2.0 and -1.0
    np.testing.assert_array_equal(top_k_update(start, trained, 0.4).numpy(),
                                  [1.0, 0.0, 1.0, 3.0, 1.0])
    # keep 0.41: ceil(2.05) = 3 -> also 0.5
    np.testing.assert_array_equal(top_k_update(start, trained, 0.41).numpy(),
                                  [1.5, 0.0, 1.0, 3.0, 1.0])
    # keep 1: the whole update, exactly the trained values
    assert torch.equal(top_k_update(start, trained, 1.0), trained)
    # a tiny fraction still keeps one entry (ceil), the largest
    np.testing.assert_array_equal(top_k_update(start, trained, 1e-9).numpy(),
                                  [1.0, 1.0, 1.0, 3.0, 1.0])


def test_ties_go_to_the_lower_index_and_shapes_are_kept():
    start = torch.zeros(2, 3)
    trained = torch.tensor([[1.0, -1.0, 0.5], [1.0, 0.0, -1.0]])
    out = top_k_update(start, trained, 0.5)  # 3 of 6; |u| = 1 at flat indices 0, 1, 3, 5
    np.testing.assert_array_equal(out.numpy(), [[1.0, -1.0, 0.0], [1.0, 0.0, 0.0]])


def test_client_update_sparsifies_each_floating_tensor_and_passes_integers():
    cfg = load_scenario("reconstruction-digits", ["defense.kind=sparsify",
                                                  "defense.keep=0.25"]).defense
    g = torch.Generator().manual_seed(0)
    start = {"w": torch.randn(4, 5, generator=g), "b": torch.randn(3, generator=g),
             "steps": torch.tensor(7)}
    trained = {"w": start["w"] + torch.randn(4, 5, generator=g),
               "b": start["b"] + torch.randn(3, generator=g), "steps": torch.tensor(9)}
    sent = get_defense("sparsify").client_update(cfg, start, trained)
    assert int(sent["steps"]) == 9
    for name, k in (("w", 5), ("b", 1)):  # ceil(0.25 * 20), ceil(0.25 * 3)
        u = (trained[name] - start[name]).reshape(-1)
        kept = (sent[name] - start[name]).reshape(-1)
        assert int((kept != 0).sum()) == k
        top = np.argsort(-np.abs(u.numpy()), kind="stable")[:k]
        np.testing.assert_array_equal(np.flatnonzero(kept.numpy()), np.sort(top))
        # the kept entries are the client's trained values, the others the start's
        assert torch.equal(sent[name].reshape(-1)[top], trained[name].reshape(-1)[top])
        rest = np.setdiff1d(np.arange(u.numel()), top)
        assert torch.equal(sent[name].reshape(-1)[rest], start[name].reshape(-1)[rest])


@pytest.mark.parametrize("keep", ["0", "1.5", "-0.1"])
def test_keep_out_of_range_is_refused(keep):
    with pytest.raises(ScenarioError, match="defense.keep"):
        load_scenario("reconstruction-digits", ["defense.kind=sparsify", f"defense.keep={keep}"])

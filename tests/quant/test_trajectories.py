"""Candidates along a training trajectory: distinct candidates, a fixed grid collapses a
perturbed trajectory, quantize_trajectory's default reference (the last checkpoint) and
the released configuration's identity."""

from __future__ import annotations

import copy

import pytest
import torch

from fedaudit.quant import distinct_candidates, quantize, quantize_trajectory

from tests.quant.weights import INT_BITS, bytes_equal, small_model


def test_distinct_candidates():
    a = {"w": torch.tensor([[0.0, 1.0]]), "n": torch.tensor(3)}
    b = {"w": torch.tensor([[0.0, 2.0]]), "n": torch.tensor(3)}
    c = {"w": torch.tensor([[0.0, 1.0]]), "n": torch.tensor(4)}
    a_negzero = {"w": torch.tensor([[-0.0, 1.0]]), "n": torch.tensor(3)}
    a_double = {"w": torch.tensor([[0.0, 1.0]], dtype=torch.float64), "n": torch.tensor(3)}
    a_reshaped = {"w": torch.tensor([0.0, 1.0]), "n": torch.tensor(3)}
    a_renamed = {"v": torch.tensor([[0.0, 1.0]]), "n": torch.tensor(3)}
    sds = [a, b, copy.deepcopy(a), c, a_negzero, a_double, copy.deepcopy(b), a_reshaped, a_renamed]
    assert distinct_candidates(sds) == [0, 1, 3, 5, 7, 8]
    assert distinct_candidates(iter(sds)) == [0, 1, 3, 5, 7, 8]  # a generator works too
    assert distinct_candidates([]) == []
    with pytest.raises(TypeError, match=r"state_dicts\[1\]"):
        distinct_candidates([a, [1, 2]])


def test_distinct_candidates_on_quantized_trajectory():
    # Checkpoints that did not move (e.g. rounds without accepted updates) collapse; a
    # moved one does not.
    model = small_model()
    sd0 = model.state_dict()
    sd1 = {k: v.clone() for k, v in sd0.items()}
    sd1["fc.weight"] = sd1["fc.weight"] * 3
    traj = [sd0, copy.deepcopy(sd0), sd1, copy.deepcopy(sd1)]
    assert distinct_candidates(quantize(sd, "ternary") for sd in traj) == [0, 2]


def _perturbed_trajectory(T: int = 10, rel: float = 1e-4, seed: int = 0) -> list[dict[str, torch.Tensor]]:
    """w_t = w_T * (1 + rel * u_t), u_t ~ U(-1, 1) entrywise, t < T; w_T last. The factor is
    positive, so no sign flips; biases are identical along the trajectory."""
    g = torch.Generator().manual_seed(seed)
    w_T = {"a.weight": torch.randn(8, 100, generator=g), "b.weight": torch.randn(3, 16, generator=g)}
    bias = torch.randn(3, generator=g)
    traj = []
    for _ in range(T - 1):
        sd = {k: v * (1 + rel * (2 * torch.rand(v.shape, generator=g) - 1)) for k, v in w_T.items()}
        traj.append(sd | {"b.bias": bias.clone()})
    traj.append({k: v.clone() for k, v in w_T.items()} | {"b.bias": bias.clone()})
    return traj


def test_fixed_grid_collapses_a_perturbed_trajectory():
    T = 10
    traj = _perturbed_trajectory(T)
    for sd in traj:  # the construction: no sign flips, every checkpoint different
        assert all(torch.equal(torch.sign(sd[k]), torch.sign(traj[-1][k])) for k in ("a.weight", "b.weight"))
    assert len(distinct_candidates(traj)) == T

    def counts(name):
        own = len(distinct_candidates(quantize(sd, name) for sd in traj))
        fixed = len(quantize_trajectory(traj, name)[1])
        return own, fixed

    # fp32 keeps every checkpoint, with or without a grid
    assert counts("fp32") == (T, T)
    # own grid: every checkpoint has its own scales, nothing collapses
    # fixed grid: the checkpoints collapse onto few configurations
    for name in ("int4", "int2", "ternary", "ternary-sparse50", "ternary-sparse90", "binary"):
        own, fixed = counts(name)
        assert own == T and fixed < own, (name, own, fixed)
    assert counts("binary")[1] == 1  # no sign flip -> one configuration


def _linear_trajectory(T: int = 20, seed: int = 0) -> list[dict[str, torch.Tensor]]:
    """w_t = w_0 + t * delta, t = 0..T-1, random w_0 and a small random delta."""
    g = torch.Generator().manual_seed(seed)
    w0 = {"a.weight": torch.randn(8, 100, generator=g), "b.weight": torch.randn(3, 16, generator=g)}
    delta = {k: 1e-3 * torch.randn(v.shape, generator=g) for k, v in w0.items()}
    bias = torch.randn(3, generator=g)
    return [{k: w0[k] + t * delta[k] for k in w0} | {"b.bias": bias.clone()} for t in range(T)]


def test_distinct_candidates_non_increasing_with_coarser_grid():
    # Each coordinate of a straight-line trajectory is monotone in t, so a configuration is
    # never revisited and the count is 1 + the number of steps at which some coordinate
    # crosses a rounding boundary: a coarser grid has fewer boundaries. (Not a theorem for
    # int8 vs int4, whose boundaries differ; checked on 200 seeds of this construction.)
    T = 20
    traj = _linear_trajectory(T)
    fixed = {name: len(quantize_trajectory(traj, name)[1]) for name in INT_BITS}
    own = {name: len(distinct_candidates(quantize(sd, name) for sd in traj)) for name in INT_BITS}
    assert fixed["int8"] >= fixed["int4"] >= fixed["int2"], fixed
    assert fixed["int2"] < T and fixed["int2"] < fixed["int8"], fixed
    assert all(n == T for n in own.values()), own  # own grids: nothing ever collapses
    assert len(quantize_trajectory(traj, "fp32")[1]) == T


@pytest.mark.parametrize("name", ["int8", "int2", "ternary", "ternary-sparse90", "binary", "fp32"])
def test_quantize_trajectory_default_reference_is_last(name):
    traj = _linear_trajectory(12, seed=3)
    candidates, first = quantize_trajectory(traj, name)
    everything = [quantize(sd, name, reference=traj[-1]) for sd in traj]
    assert first == distinct_candidates(everything)
    assert len(candidates) == len(first)
    for cand, t in zip(candidates, first):
        assert all(bytes_equal(cand[k], everything[t][k]) for k in cand)
    # an explicit reference equal to the last checkpoint changes nothing
    cands2, first2 = quantize_trajectory(tuple(traj), name, reference=copy.deepcopy(traj[-1]))
    assert first2 == first
    assert all(bytes_equal(a[k], b[k]) for a, b in zip(cands2, candidates) for k in a)
    # the released model's own candidate is its ordinary (own-grid) quantization
    assert all(bytes_equal(everything[-1][k], v) for k, v in quantize(traj[-1], name).items())
    if name != "fp32":  # another reference gives another grid
        other = quantize_trajectory(traj, name, reference=traj[0])[0]
        assert not all(bytes_equal(a[k], b[k]) for a, b in zip(other, candidates) for k in a)


def test_quantize_trajectory_validation():
    traj = _linear_trajectory(3)
    with pytest.raises(ValueError, match="empty"):
        quantize_trajectory([], "int8")
    with pytest.raises(TypeError, match="sequence"):
        quantize_trajectory(iter(traj), "int8")
    with pytest.raises(TypeError, match="sequence"):
        quantize_trajectory(traj[0], "int8")
    with pytest.raises(TypeError, match=r"state_dicts\[1\]"):
        quantize_trajectory([traj[0], [1, 2], traj[2]], "int8")
    with pytest.raises(ValueError, match="unknown quantizer"):
        quantize_trajectory(traj, "int3")
    bad = [traj[0], {k: v[:, :5] if k == "a.weight" else v for k, v in traj[1].items()}, traj[2]]
    with pytest.raises(ValueError, match=r"state_dicts\[1\].*reference\['a.weight'\].*shape"):
        quantize_trajectory(bad, "ternary")


def test_trajectory_identity_is_the_whole_released_configuration():
    # quantized weights that coincide do not make one candidate when the float tensors
    # released with them differ: each keeps its own biases
    torch.manual_seed(0)
    base = {"fc.weight": torch.randn(4, 6), "fc.bias": torch.randn(4)}
    traj = []
    for t in range(6):
        traj.append({"fc.weight": base["fc.weight"] * (1 + 1e-4 * t),
                     "fc.bias": base["fc.bias"] + 0.01 * t})
    candidates, first = quantize_trajectory(traj, "binary")
    assert first == [0, 1, 2, 3, 4, 5]
    for cand, sd in zip(candidates, traj):
        assert torch.equal(cand["fc.bias"], sd["fc.bias"])
    # identical float tensors: the grid collapses the neighbouring weights into one candidate
    same_bias = [{"fc.weight": sd["fc.weight"], "fc.bias": base["fc.bias"]} for sd in traj]
    assert quantize_trajectory(same_bias, "binary")[1] == [0]
    assert len(quantize_trajectory(traj, "fp32")[1]) == 6

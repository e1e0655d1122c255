"""White-box gradient canaries (audit.dp.level = "gradient"): the draw, the coordinates,
the canary inside the real Opacus step (reproduced draw by draw), the server's probe and
the scores, the scenario checks."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
import torch
from torch import nn

from fedaudit.config import ScenarioError, load_scenario
from fedaudit.dp_audit.gradient import (GradientCanaries, ParamLayout, CanaryReader,
                                        draw_gradient_canaries, global_scores, update_scores)

CPU = torch.device("cpu")


def _net() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(5, 4), nn.ReLU(), nn.Linear(4, 3))


def test_draw_distinct_reproducible_and_half_included():
    c = draw_gradient_canaries(1000, 25_450, 10, seed=0)
    assert len(np.unique(c.coord)) == 1000 and c.coord.max() < 25_450
    assert 430 < c.included.sum() < 570  # Binomial(1000, 1/2): sd 15.8
    assert set(np.unique(c.client).tolist()) == set(range(10))
    again = draw_gradient_canaries(1000, 25_450, 10, seed=0)
    assert np.array_equal(c.coord, again.coord) and np.array_equal(c.included, again.included)
    assert np.array_equal(c.of_client(3), c.coord[(c.client == 3) & c.included])
    with pytest.raises(ValueError, match=r"audit.dp.canaries = 51: .*allowed: 1..50"):
        draw_gradient_canaries(51, 50, 2, seed=0)


def test_layout_locates_coordinates_by_hand():
    layout = ParamLayout.of(_net())
    assert layout.names == ("0.weight", "0.bias", "2.weight", "2.bias")
    assert layout.sizes == (20, 4, 12, 3) and layout.total == 39
    got = {p: (flat.tolist(), pos.tolist()) for p, flat, pos in
           layout.locate(np.array([38, 0, 21, 24, 19]))}
    assert got == {0: ([0, 19], [1, 4]), 1: ([1], [2]), 2: ([0], [3]), 3: ([2], [0])}


def test_probe_reads_every_canary_coordinate_of_an_update():
    layout = ParamLayout.of(_net())
    can = GradientCanaries(np.array([38, 0, 21]), np.array([0, 1, 1]),
                           np.array([True, False, True]))
    update = {n: np.arange(s, dtype=np.float64).reshape(-1) + 100 * i
              for i, (n, s) in enumerate(zip(layout.names, layout.sizes))}
    ids, values = CanaryReader(can, layout)(1, update)
    assert ids.tolist() == [0, 1, 2] and values.tolist() == [302.0, 0.0, 101.0]
    assert global_scores(can, layout, update).tolist() == [-302.0, -0.0, -101.0]


def test_update_scores_difference_against_the_other_clients():
    """Canary 0 of client 0, canary 1 of client 1; three clients; round 2 lacks client 1."""
    can = GradientCanaries(np.array([5, 7]), np.array([0, 1]), np.array([True, False]))
    r1 = (np.array([0, 1] * 3), np.array([0, 0, 1, 1, 2, 2]),
          np.array([-1.0, 0.2, 0.1, 0.4, 0.3, 0.6]))
    r2 = (np.array([0, 1] * 2), np.array([0, 0, 2, 2]), np.array([-2.0, 0.0, 0.0, 1.0]))
    got = update_scores(can, [r1, r2])
    # canary 0: -((-1 - (0.1 + 0.3) / 2) + (-2 - 0)); canary 1: -(0.4 - (0.2 + 0.6) / 2)
    assert got == pytest.approx([3.2, -0.0], abs=1e-15)


def test_a_drawn_canary_adds_clip_norm_inside_the_opacus_step():
    """Input feature 0 is always 0, so the real gradient of every first-layer weight
    W[o, 0] is exactly 0: with SGD (no momentum) those weights move only by the noise and
    the canaries.  The difference with and without canaries (same seed: the same Poisson
    batches and noise) is -lr * clip / (q n) per draw, the draws reproduced here from the
    documented generator (seed stream 3, one uniform per canary and step)."""
    from fedaudit.training import train_local
    from fedaudit.training.local import _sub_seed

    cfg = replace(load_scenario("quickstart").train, lr=0.5, momentum=0.0, weight_decay=0.0,
                  local_epochs=3, batch_size=8, optimizer="sgd")
    rng = np.random.default_rng(0)
    x = rng.standard_normal((32, 5)).astype(np.float32)
    x[:, 0] = 0.0
    y = rng.integers(0, 3, 32).astype(np.int64)
    coords = np.array([15, 0, 10])  # W[3, 0], W[0, 0], W[2, 0]
    dp = {"noise_multiplier": 1.0, "clip_norm": 0.3}

    def run(canaries):
        net = _net()
        w0 = net[0].weight.detach().clone()
        res = train_local(net, x, y, np.arange(32), cfg, seed=7, device=CPU, dp=dp,
                          dp_canaries=canaries)
        return (net[0].weight.detach() - w0)[:, 0].double().numpy(), res

    with_c, res = run(coords)
    without, _ = run(None)
    q = res.dp_sample_rate
    assert q == 0.25 and res.dp_steps == 12
    gen = torch.Generator().manual_seed(_sub_seed(7, 3))
    draws = sum((torch.rand(3, generator=gen) < q).double() for _ in range(res.dp_steps))
    want = np.zeros(4)
    want[[3, 0, 2]] = -cfg.lr * dp["clip_norm"] / (q * 32) * draws.numpy()
    assert draws.min() >= 1  # the check sees every canary drawn at least once
    # float32 weights: each of 12 steps rounds at ~1e-7 relative to |w| < 1
    assert with_c - without == pytest.approx(want, abs=1e-5)
    assert with_c[1] == pytest.approx(without[1], abs=1e-6)  # W[1, 0]: no canary


def test_gradient_level_needs_dp_sgd():
    s = load_scenario("defense-dpsgd", ["audit.dp.canaries=100", "audit.dp.level='gradient'"])
    assert s.audit.dp.level == "gradient"
    with pytest.raises(ScenarioError, match="trains without DP-SGD, which the gradient "
                                            "canaries live in; allowed: dp-sgd"):
        load_scenario("defense-none", ["audit.dp.canaries=10", "audit.dp.level='gradient'"])
    with pytest.raises(ScenarioError, match="allowed: 'auto', 'sample', 'gradient'"):
        load_scenario("defense-dpsgd", ["audit.dp.canaries=10", "audit.dp.level='client'"])

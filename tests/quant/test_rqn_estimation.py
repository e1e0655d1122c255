"""r_Qn as estimated over runs and low-loss candidates, the released candidate, and the
baseline MIS estimate (docs/algorithms.md sections 2 and 10)."""

import math

import numpy as np
import pytest
import torch

from fedaudit.quant import (lowest_loss_rows, quantize, quantize_trajectory, rqn, rqn_details,
                            rqn_over_runs)
from fedaudit.quant.mis import (DISCRIMINATORS, membership_features, mis_baseline,
                                mis_from_balanced_accuracy)


def _issue_trajectory():
    torch.manual_seed(0)
    w = torch.randn(3, 5)
    sd1 = {"fc.weight": w, "fc.bias": torch.zeros(3)}
    sd2 = {"fc.weight": 1.0001 * w, "fc.bias": torch.tensor([5.0, -5.0, 5.0])}
    return sd1, sd2


def test_released_model_is_among_the_candidates():
    # the example of the issue: int4 maps both weights onto one grid configuration, but the
    # release carries sd2's biases, so it is a candidate of its own
    sd1, sd2 = _issue_trajectory()
    assert torch.equal(quantize(sd1, "int4", reference=sd2)["fc.weight"],
                       quantize(sd2, "int4")["fc.weight"])
    candidates, first = quantize_trajectory([sd1, sd2], "int4")
    assert first == [0, 1]
    release = quantize(sd2, "int4")
    assert any(all(torch.equal(c[k], release[k]) for k in release) for c in candidates)
    assert torch.equal(candidates[0]["fc.bias"], sd1["fc.bias"])

    # and the r of the two candidates on a random sample is finite
    gen = torch.Generator().manual_seed(1)
    x, y = torch.randn(40, 5, generator=gen), torch.randint(0, 3, (40,), generator=gen)
    rows = []
    for c in candidates:
        logits = x.double() @ c["fc.weight"].double().T + c["fc.bias"].double()
        rows.append(torch.nn.functional.cross_entropy(logits, y, reduction="none").numpy())
    assert math.isfinite(rqn(np.stack(rows)))


def test_lowest_loss_rows_explicit():
    losses = np.array([[5.0, 5.0], [1.0, 2.0], [3.0, 3.0], [1.0, 2.0], [0.5, 1.0], [1.5, 1.5]])
    # means 5, 1.5, 3, (dup of row 1), 0.75, 1.5 -> distinct rows 0, 1, 2, 4, 5
    np.testing.assert_array_equal(lowest_loss_rows(losses, 0), [0, 1, 2, 4, 5])
    np.testing.assert_array_equal(lowest_loss_rows(losses, 1), [4])
    # rows 1 and 5 tie at 1.5: row order breaks the tie
    np.testing.assert_array_equal(lowest_loss_rows(losses, 2), [1, 4])
    np.testing.assert_array_equal(lowest_loss_rows(losses, 3), [1, 4, 5])
    np.testing.assert_array_equal(lowest_loss_rows(losses, 99), [0, 1, 2, 4, 5])
    for bad in (-1, 1.5, True):
        with pytest.raises(ValueError, match="keep must be an integer"):
            lowest_loss_rows(losses, bad)


def test_rqn_over_runs_is_rqn_of_each_run_on_its_kept_rows():
    rng = np.random.default_rng(0)
    runs = [rng.normal(size=(6, 30)) + np.arange(6)[:, None] * 0.1 for _ in range(3)]
    runs.append(np.tile([1.0, 2.0, 3.0], (2, 1)))           # one distinct row: r = inf
    est = rqn_over_runs(runs, keep_lowest=3)
    for i, losses in enumerate(runs[:3]):
        means = losses.mean(axis=1)
        kept = np.sort(np.argsort(means, kind="stable")[:3])
        assert est.kept[i] == tuple(kept)
        assert est.runs[i].r == rqn_details(losses[kept]).r
    assert est.runs[3].r == math.inf and est.kept[3] == (0,)
    values = est.values
    assert values[3] == math.inf and np.isfinite(values[:3]).all()
    finite = np.sort(values[:3])
    assert est.median == pytest.approx((finite[1] + finite[2]) / 2, rel=1e-15)
    assert est.quantile(0.0) == finite[0] and est.quantile(1.0) == math.inf
    with pytest.raises(ValueError, match="run 1: losses must be 2-D"):
        rqn_over_runs([runs[0], np.zeros(4)])
    with pytest.raises(ValueError, match="empty"):
        rqn_over_runs([])


def test_median_of_runs_with_infinities_is_never_nan():
    est = rqn_over_runs([np.tile([1.0, 2.0], (2, 1))] * 2)
    assert est.median == math.inf and est.quantile(0.25) == math.inf


def test_mis_from_balanced_accuracy():
    assert mis_from_balanced_accuracy(0.5) == 1.0
    assert mis_from_balanced_accuracy(1.0) == 0.0
    assert mis_from_balanced_accuracy(0.75) == 0.5
    assert mis_from_balanced_accuracy(0.3) == 1.0      # below chance: advantage floored at 0
    for bad in (-0.1, 1.2, float("nan")):
        with pytest.raises(ValueError, match="balanced_accuracy"):
            mis_from_balanced_accuracy(bad)


def _runs(n_runs, member_values, non_values):
    feats, mem, runs = [], [], []
    for r in range(n_runs):
        for v in member_values[r % len(member_values)]:
            feats.append([v]); mem.append(1); runs.append(r)
        for v in non_values[r % len(non_values)]:
            feats.append([v]); mem.append(0); runs.append(r)
    return np.array(feats), np.array(mem), np.array(runs)


@pytest.mark.parametrize("disc", sorted(DISCRIMINATORS))
def test_mis_separable_and_uninformative(disc):
    # 10 members and 10 non-members per run (the boosting discriminator needs 20 samples
    # per leaf, as with its default, to split at all)
    x, m, r = _runs(6, [np.linspace(0.0, 0.4, 10)], [np.linspace(1.0, 1.4, 10)])
    est = mis_baseline(x, m, r, test_runs=[4, 5], discriminator=disc)
    assert est.balanced_accuracy == 1.0 and est.mis == 0.0
    assert (est.train_runs, est.test_runs, est.train_samples, est.test_samples) == (4, 2, 80, 40)
    # the same feature value for members and non-members: nothing to learn, BA = 1/2 exactly
    x, m, r = _runs(6, [[0.5, 0.5]], [[0.5, 0.5]])
    assert mis_baseline(x, m, r, test_runs=[5], discriminator=disc).mis == 1.0


def test_mis_hand_computed_logistic():
    # trained on members at 1, non-members at 0: the discriminator says member iff x = 1;
    # held out: members {1, 1, 0} and non-members {0, 0, 1} -> TPR = 2/3, TNR = 2/3,
    # BA = 2/3, MIS = 1 - (2 * 2/3 - 1) = 2/3
    x, m, r = _runs(4, [[1.0] * 5], [[0.0] * 5])
    x = np.vstack([x, [[1.0], [1.0], [0.0], [0.0], [0.0], [1.0]]])
    m = np.concatenate([m, [1, 1, 1, 0, 0, 0]])
    r = np.concatenate([r, [9] * 6])
    est = mis_baseline(x, m, r, test_runs=[9], discriminator="logistic")
    assert est.balanced_accuracy == pytest.approx(2 / 3, abs=1e-12)
    assert est.mis == pytest.approx(2 / 3, abs=1e-12)


def test_mis_baseline_errors():
    x, m, r = _runs(3, [[0.0]], [[1.0]])
    with pytest.raises(ValueError, match="unknown discriminator 'svm'; allowed: boosting, logistic"):
        mis_baseline(x, m, r, [2], discriminator="svm")
    with pytest.raises(ValueError, match="missing: \\[7\\]"):
        mis_baseline(x, m, r, [7])
    with pytest.raises(ValueError, match="no run left"):
        mis_baseline(x, m, r, [0, 1, 2])
    with pytest.raises(ValueError, match="held-out runs must contain both"):
        mis_baseline(x, np.where(r == 2, 1, m), r, [2])
    with pytest.raises(ValueError, match="membership must hold 0/1"):
        mis_baseline(x, m * 2, r, [2])
    with pytest.raises(ValueError, match="row 1 is not"):
        mis_baseline(np.array([[0.0], [np.inf], [1.0], [0.0], [1.0], [0.0]]), m, r, [2])
    with pytest.raises(ValueError, match="shape \\(6,\\)"):
        mis_baseline(x, m[:-1], r, [2])


def test_membership_features_against_numpy_float64():
    rng = np.random.default_rng(3)
    z = rng.normal(scale=3.0, size=(7, 4))
    y = rng.integers(0, 4, size=7)
    p = np.exp(z - z.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    want = np.stack([-np.log(p[np.arange(7), y]), p[np.arange(7), y], p.max(axis=1),
                     -(p * np.log(p)).sum(axis=1)], axis=1)
    got = membership_features(torch.from_numpy(z), torch.from_numpy(y))
    # both in float64 from the same logits; different but stable formulas -> a few ulps
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-14)
    with pytest.raises(ValueError, match="labels must be in \\[0, 4\\)"):
        membership_features(z, np.array([0, 1, 2, 3, 4, 0, 0]))
    with pytest.raises(ValueError, match="logits must be finite"):
        membership_features(np.full((2, 2), np.nan), np.array([0, 1]))


def test_quantization_audit_estimates_r_per_run_and_reports_the_median(tmp_path):
    # two runs of three checkpoints each (random perturbations of one initial model): every
    # run is quantized on its own release's grid, keeps its 2 lowest-loss candidates, and
    # results.json carries each run's r and their median
    import fedaudit
    from fedaudit.data import build_federated_data
    from fedaudit.models import model_for
    from fedaudit.audit import AuditContext, Trajectory
    from fedaudit.audit.stages.quantization import Quantization
    from fedaudit.training import per_sample_losses

    scenario = fedaudit.validate("quickstart", [
        "audit.quantization.quantizers=['int4','ternary']", "audit.quantization.keep_lowest=2"])
    data = build_federated_data(scenario)
    base = model_for(scenario.model, data, seed=0).state_dict()
    gen = torch.Generator().manual_seed(5)
    trajectories, recorders = [], []
    for run in range(2):
        traj, paths = [], []
        for t in range(3):
            sd = {k: v + 0.05 * (t + 1) * torch.randn(v.shape, generator=gen)
                  if v.is_floating_point() else v.clone() for k, v in base.items()}
            path = tmp_path / f"run{run}-round{t}.pt"
            torch.save(sd, path)
            traj.append(sd)
            paths.append(path)
        trajectories.append(traj)
        recorders.append(Trajectory(tuple(paths), traj[-1]))
    ctx = AuditContext(scenario, data, torch.device("cpu"), tmp_path, {}, recorders[0],
                       tuple(recorders[1:]))
    Quantization().run(ctx)
    entries, releases = ctx.results["quantization"], ctx.releases

    model = model_for(scenario.model, data, seed=0)
    xt, yt = data.x[data.test], data.y[data.test]
    for entry in entries:
        want = []
        for traj in trajectories:
            candidates, _ = quantize_trajectory(traj, entry["quantizer"])
            rows = []
            for cand in candidates:
                model.load_state_dict(cand)
                rows.append(per_sample_losses(model, xt, yt, device=torch.device("cpu"))[0])
            losses = np.stack(rows)
            want.append(rqn_details(losses[lowest_loss_rows(losses, 2)]).r)
        assert entry["rqn_runs"] == want
        assert entry["rqn"] == float(np.median(want))
        assert entry["n_candidates"] == 6 and entry["n_kept"] == 4
        release = quantize(trajectories[0][-1], entry["quantizer"])
        assert all(torch.equal(releases[entry["quantizer"]].state[k], release[k]) for k in release)

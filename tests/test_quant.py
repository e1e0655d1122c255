"""Tests of fedaudit.quant: PTQ quantizers, candidate deduplication and the r_Qn indicator
(docs/algorithms.md section 2; Aubinais et al., arXiv 2502.06567)."""

from __future__ import annotations

import copy
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

from fedaudit.quant import (
    QUANTIZERS,
    TERNARY_BITS,
    RqnResult,
    distinct_candidates,
    is_quantized_tensor,
    quantize,
    quantize_tensor,
    quantize_trajectory,
    quantizer_info,
    register_quantizer,
    rqn,
    rqn_details,
)

BUILTIN = ["fp32", "int8", "int4", "int2", "ternary", "ternary-sparse50", "ternary-sparse90", "binary"]
ALL_NAMES = BUILTIN + ["ternary-sparse37"]  # plus one resolved, unregistered sparsity
INT_BITS = {"int8": 8, "int4": 4, "int2": 2}


def _weights(rows: int = 16, cols: int = 200, seed: int = 0, dtype=torch.float32) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    # distinct per-channel magnitudes so a scale computed over the wrong axis shows up
    return (torch.randn(rows, cols, generator=g) * torch.linspace(0.1, 3.0, rows)[:, None]).to(dtype)


def _levels(row: torch.Tensor) -> int:
    return int(torch.unique(row).numel())


# ----------------------------------------------------------------------------- registry


def test_core_does_not_import_flower():
    code = "import sys, fedaudit.quant; print(any(m.split('.')[0] == 'flwr' for m in sys.modules))"
    root = Path(__file__).resolve().parents[1]
    out = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_registry_names_bits_sparsity():
    assert set(BUILTIN) <= set(QUANTIZERS)
    assert TERNARY_BITS == round(math.log2(3), 2) == 1.58
    expected_bits = {"fp32": 32, "int8": 8, "int4": 4, "int2": 2, "binary": 1}
    for name, bits in expected_bits.items():
        assert QUANTIZERS[name].bits == bits
        assert QUANTIZERS[name].sparsity == 0.0
    for name in ("ternary", "ternary-sparse50", "ternary-sparse90"):
        assert QUANTIZERS[name].bits == TERNARY_BITS
    assert QUANTIZERS["ternary"].sparsity == 0.0
    assert QUANTIZERS["ternary-sparse50"].sparsity == 0.5
    assert QUANTIZERS["ternary-sparse90"].sparsity == 0.9
    for name in BUILTIN:
        assert quantizer_info(name) is QUANTIZERS[name]


@pytest.mark.parametrize("pct", [1, 29, 37, 99])
def test_quantizer_info_resolves_general_sparse(pct):
    spec = quantizer_info(f"ternary-sparse{pct}")
    assert spec.name == f"ternary-sparse{pct}"
    assert spec.bits == TERNARY_BITS
    assert spec.sparsity == pct / 100
    w = _weights(4, 100)
    q = spec(w).double()
    assert ((q == 0).sum(dim=1) >= pct).all()  # 100 entries per channel: pct% pruned
    # the scale is the mean |W| over exactly the 100 - pct largest magnitudes
    s = w.abs().double().sort(dim=1).values[:, pct:].mean(dim=1, keepdim=True)
    nz = q != 0
    assert torch.allclose(q.abs()[nz], s.expand_as(q)[nz], rtol=1e-6)  # float32 output


@pytest.mark.parametrize(
    "bad", ["int3", "INT8", "ternary-sparse0", "ternary-sparse100", "ternary-sparse05", "ternary-sparse", "", None]
)
def test_unknown_quantizer_lists_allowed_names(bad):
    with pytest.raises(ValueError) as err:
        quantizer_info(bad)
    for name in BUILTIN:
        assert name in str(err.value)
    assert "ternary-sparseXX" in str(err.value)
    with pytest.raises(ValueError):
        quantize({"w.weight": _weights(2, 3)}, bad)


def test_register_quantizer_adds_one_function():
    name = "test-halve"
    try:

        @register_quantizer(name, bits=16)
        def _halve(weight: torch.Tensor, reference: torch.Tensor) -> torch.Tensor:
            return weight / 2

        assert quantizer_info(name).bits == 16.0 and quantizer_info(name).sparsity == 0.0
        sd = {"fc.weight": _weights(3, 4), "fc.bias": torch.ones(3)}
        out = quantize(sd, name)
        assert torch.equal(out["fc.weight"], sd["fc.weight"] / 2)
        assert torch.equal(out["fc.bias"], sd["fc.bias"])
        with pytest.raises(ValueError, match="already registered"):
            register_quantizer(name, bits=16)(_halve)
    finally:
        QUANTIZERS.unregister(name)
    # a quantizer of the former one-argument form fn(weight) is refused at registration
    with pytest.raises(TypeError, match=r"fn\(weight, reference\)"):

        @register_quantizer("test-bad", bits=8)
        def _old_style(weight: torch.Tensor) -> torch.Tensor:
            return weight

    with pytest.raises(ValueError, match="bits"):
        register_quantizer("test-bad", bits=0)
    with pytest.raises(ValueError, match="sparsity"):
        register_quantizer("test-bad", bits=1, sparsity=1.0)
    assert "test-bad" not in QUANTIZERS


# ------------------------------------------------------------------- tensor quantizers


@pytest.mark.parametrize("name", list(INT_BITS))
def test_uniform_symmetric_grid_and_error_bound(name):
    qmax = 2 ** (INT_BITS[name] - 1) - 1
    w = _weights()
    q = quantize_tensor(w, name)
    scale = w.abs().amax(dim=1, keepdim=True).double() / qmax
    codes = q.double() / scale
    # dequantized values are integer codes in [-qmax, qmax] times the channel scale
    assert torch.allclose(codes, codes.round(), atol=1e-4)
    assert codes.round().abs().max() <= qmax
    for row in q:
        assert _levels(row) <= 2 * qmax + 1
    # round to nearest: |W - Q(W)| <= scale/2 (+ float32 rounding of the stored value)
    err = (w.double() - q.double()).abs()
    assert (err <= scale / 2 + 1e-6 * w.abs().double()).all()
    # the largest magnitude of each channel is represented exactly (it defines the scale)
    idx = w.abs().argmax(dim=1, keepdim=True)
    assert torch.allclose(q.gather(1, idx), w.gather(1, idx), rtol=1e-6)


def test_int8_uses_many_levels_int2_three():
    # uniform weights fill the grid: (nearly) all 255 int8 levels, exactly 3 for int2
    w = torch.rand(4, 5000, generator=torch.Generator().manual_seed(0)) * 2 - 1
    assert all(_levels(row) > 250 for row in quantize_tensor(w, "int8"))
    assert all(_levels(row) == 3 for row in quantize_tensor(w, "int2"))


def test_ternary_scale_is_mean_abs_and_round_rule():
    w = _weights()
    q = quantize_tensor(w, "ternary")
    s = w.abs().double().mean(dim=1, keepdim=True)
    for row_q, row_w, s_c in zip(q.double(), w.double(), s):
        assert _levels(row_q) <= 3
        nonzero = row_q != 0
        assert torch.allclose(row_q[nonzero].abs(), s_c.expand(int(nonzero.sum())), rtol=1e-6)
        # round(W/s) clipped to [-1, 1]: zero iff |W| < s/2, sign kept otherwise
        assert torch.equal(nonzero, row_w.abs() > s_c / 2)
        assert torch.equal(torch.sign(row_q[nonzero]), torch.sign(row_w[nonzero]))


def test_binary_two_levels_and_sign_of_zero():
    w = _weights()
    q = quantize_tensor(w, "binary")
    s = w.abs().double().mean(dim=1, keepdim=True)
    expected = torch.where(w >= 0, 1.0, -1.0).double() * s
    assert torch.allclose(q.double(), expected, rtol=1e-6)
    assert all(_levels(row) == 2 for row in q)
    z = torch.tensor([[0.0, 2.0, -4.0]])
    assert torch.equal(quantize_tensor(z, "binary"), torch.tensor([[2.0, 2.0, -2.0]]))


@pytest.mark.parametrize("name,pct", [("ternary-sparse50", 50), ("ternary-sparse90", 90)])
def test_sparse_ternary_fraction_and_kept_scale(name, pct):
    w = _weights(16, 1000)
    n = w.shape[1]
    k = pct * n // 100
    q = quantize_tensor(w, name).double()
    order = torch.argsort(w.abs(), dim=1, stable=True)
    for row_q, row_w, row_order in zip(q, w.double(), order):
        assert _levels(row_q) <= 3
        pruned, kept = row_order[:k], row_order[k:]
        assert (row_q[pruned] == 0).all()
        s = row_w[kept].abs().mean()  # scale over the kept entries only
        nz = row_q != 0
        assert torch.allclose(row_q[nz].abs(), s.expand(int(nz.sum())), rtol=1e-6)
        # kept entries below s/2 round to 0 and stay 0; the others are +-s
        assert torch.equal(nz[kept], row_w[kept].abs() > s / 2)
        zero_frac = float((row_q == 0).double().mean())
        # realised sparsity: the nominal one plus the few kept entries rounded to zero
        assert pct / 100 <= zero_frac <= pct / 100 + 0.03


def test_sparse_tie_rule_prunes_earlier_positions_first():
    w = torch.tensor([[1.0, -1.0, 1.0, -1.0], [3.0, 1.0, 1.0, 2.0]])
    q = quantize_tensor(w, "ternary-sparse50")
    # row 0: all |W| tie -> the first two positions are pruned; kept mean |W| = 1
    # row 1: 1.0 at positions 1 and 2 pruned; kept {3, 2}: s = 2.5, round(3/2.5) = 1,
    # round(2/2.5) = 1
    assert torch.equal(q, torch.tensor([[0.0, 0.0, 1.0, -1.0], [2.5, 0.0, 0.0, 2.5]]))


@pytest.mark.parametrize("name", ALL_NAMES)
def test_all_zero_channel_stays_zero(name):
    w = _weights(3, 10)
    w[1] = 0.0
    q = quantize_tensor(w, name)
    assert torch.isfinite(q).all()
    assert (q[1] == 0).all()
    assert not torch.signbit(q[1]).any()


@pytest.mark.parametrize("name", ALL_NAMES)
@pytest.mark.parametrize("dtype", [torch.float64, torch.float16, torch.bfloat16])
def test_dtype_kept(name, dtype):
    w = _weights(4, 32, dtype=dtype)
    q = quantize_tensor(w, name)
    assert q.dtype == dtype and q.shape == w.shape


def test_quantize_tensor_validation():
    with pytest.raises(ValueError, match="ndim >= 2"):
        quantize_tensor(torch.ones(5), "int8")
    with pytest.raises(ValueError, match="floating point"):
        quantize_tensor(torch.ones(2, 2, dtype=torch.int64), "int8")
    with pytest.raises(TypeError, match="torch.Tensor"):
        quantize_tensor(np.ones((2, 2)), "int8")


# ------------------------------------------------------------------------ state dicts


class _Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.norm = nn.GroupNorm(2, 8)
        self.emb = nn.Embedding(10, 6)
        self.fc = nn.Linear(8 * 4 * 4 + 6, 5)
        self.register_buffer("num_updates", torch.tensor(7))
        # an integer tensor whose key ends with "weight" and ndim >= 2: must stay as is
        self.register_buffer("mask_weight", torch.arange(20).reshape(5, 4))

    def forward(self, x: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
        h = nn.functional.adaptive_avg_pool2d(self.norm(self.conv(x)).relu(), 4).flatten(1)
        return self.fc(torch.cat([h, self.emb(tokens).mean(dim=1)], dim=1))


def _model() -> _Net:
    torch.manual_seed(0)
    model = _Net()
    with torch.no_grad():  # non-trivial norm parameters, so "untouched" is a real check
        model.norm.weight.uniform_(0.5, 1.5)
        model.norm.bias.uniform_(-0.5, 0.5)
    return model


def test_selection_rule():
    sd = _model().state_dict()
    selected = {k for k, v in sd.items() if is_quantized_tensor(k, v)}
    assert selected == {"conv.weight", "emb.weight", "fc.weight"}


@pytest.mark.parametrize("name", ALL_NAMES)
def test_state_dict_roundtrip_every_quantizer(name):
    model = _model()
    sd = model.state_dict()
    before = copy.deepcopy(sd)
    out = quantize(sd, name)

    for k in sd:  # input not mutated
        assert torch.equal(sd[k], before[k])
    assert list(out) == list(sd)
    for k, v in out.items():
        assert v.shape == sd[k].shape and v.dtype == sd[k].dtype
        assert v.data_ptr() != sd[k].data_ptr()  # new tensors
    for k in ("conv.bias", "fc.bias", "norm.weight", "norm.bias", "num_updates", "mask_weight"):
        assert torch.equal(out[k], sd[k]), k

    quantized = ("conv.weight", "emb.weight", "fc.weight")
    for k in quantized:  # no -0.0: identical quantized models are byte-identical
        assert not torch.signbit(out[k][out[k] == 0]).any(), k
    if name == "fp32":
        for k in quantized:
            assert torch.equal(out[k], sd[k])
    else:
        spec = quantizer_info(name)
        max_levels = 2 ** spec.bits - 1 if name in INT_BITS else 3
        for k in quantized:
            rows = out[k].reshape(out[k].shape[0], -1)
            assert all(_levels(r) <= max_levels for r in rows), k
            assert not torch.equal(out[k], sd[k]), k

    model.load_state_dict(out, strict=True)
    x = torch.randn(2, 3, 8, 8)
    tokens = torch.tensor([[1, 2, 3], [4, 5, 9]])
    assert torch.isfinite(model(x, tokens)).all()


def test_fp32_is_identity_copy():
    sd = _model().state_dict()
    out = quantize(sd, "fp32")
    assert all(torch.equal(out[k], sd[k]) for k in sd)
    out["fc.weight"].add_(1.0)
    assert not torch.equal(out["fc.weight"], sd["fc.weight"])


def test_quantize_validation():
    with pytest.raises(TypeError, match="mapping"):
        quantize([("fc.weight", torch.ones(2, 2))], "int8")
    with pytest.raises(TypeError, match="'fc.weight'"):
        quantize({"fc.weight": [[1.0, 2.0]]}, "int8")
    bad = {"fc.weight": torch.tensor([[1.0, float("nan")], [1.0, 2.0]]), "fc.bias": torch.zeros(2)}
    with pytest.raises(ValueError, match=r"'fc.weight'.*non-finite"):
        quantize(bad, "ternary")
    assert torch.equal(quantize(bad, "fp32")["fc.bias"], bad["fc.bias"])  # pass-through


# ----------------------------------------------------------------- distinct candidates


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
    model = _model()
    sd0 = model.state_dict()
    sd1 = {k: v.clone() for k, v in sd0.items()}
    sd1["fc.weight"] = sd1["fc.weight"] * 3
    traj = [sd0, copy.deepcopy(sd0), sd1, copy.deepcopy(sd1)]
    assert distinct_candidates(quantize(sd, "ternary") for sd in traj) == [0, 2]


# ---------------------------------------------------------------------------------- rqn


def _hand_case() -> np.ndarray:
    # candidate rows B, C, A over 4 samples; A has the lowest mean loss (2.5)
    return np.array(
        [
            [2.0, 2.0, 4.0, 5.0],  # B, mean 3.25, d = B - A = [1, 0, 1, 1]
            [3.0, 1.0, 5.0, 4.0],  # C, mean 3.25, d = C - A = [2, -1, 2, 0]
            [1.0, 2.0, 3.0, 4.0],  # A
        ]
    )


def test_rqn_hand_computed():
    # B: mean(d) = 3/4; deviations 1/4, -3/4, 1/4, 1/4 -> var = (3/4) / 3 = 1/4
    #    r_B = (3/4)^2 / (2 * 1/4) = 9/8
    # C: mean(d) = 3/4; deviations 5/4, -7/4, 5/4, -3/4 -> var = (27/4) / 3 = 9/4
    #    r_C = (3/4)^2 / (2 * 9/4) = 1/8
    res = rqn_details(_hand_case())
    assert isinstance(res, RqnResult)
    assert res.r == pytest.approx(1 / 8, rel=1e-12)
    assert (res.n_candidates, res.n_distinct, res.best, res.argmin, res.note) == (3, 3, 2, 1, None)
    assert rqn(_hand_case()) == res.r
    assert rqn(_hand_case()[[0, 2]]) == pytest.approx(9 / 8, rel=1e-12)
    # accepts nested lists and torch tensors
    assert rqn(_hand_case().tolist()) == res.r
    assert rqn(torch.tensor(_hand_case())) == res.r
    # r is scale invariant (mean^2 / var), also for losses near the float64 maximum
    assert rqn(_hand_case() * 1e307) == pytest.approx(1 / 8, rel=1e-12)


def test_rqn_duplicates_dropped():
    base = _hand_case()
    dup = np.vstack([base, base[1], base[2], base[1]])
    res = rqn_details(dup)
    assert res.r == rqn(base)
    assert (res.n_candidates, res.n_distinct, res.best, res.argmin) == (6, 3, 2, 1)
    # -0.0 and 0.0 are the same loss
    z = np.array([[0.0, 1.0, 2.0], [-0.0, 1.0, 2.0], [1.0, 1.0, 4.0]])
    assert rqn_details(z).n_distinct == 2


def test_rqn_infinite_cases_never_nan():
    one = rqn_details([[1.0, 2.0, 3.0]])
    assert one.r == math.inf and one.argmin is None and one.note == "only 1 distinct quantized candidate"
    same = rqn_details(np.tile([1.0, 2.0, 3.0], (4, 1)))
    assert same.r == math.inf and same.n_distinct == 1 and same.n_candidates == 4
    assert same.note == "only 1 distinct quantized candidate"
    zeros = rqn_details(np.zeros((3, 5)))
    assert zeros.r == math.inf and not math.isnan(zeros.r)
    # constant shift (exact in binary): var(d) = 0 for every k > 1
    shift = rqn_details([[1.0, 2.0, 3.0], [2.0, 3.0, 4.0], [3.0, 4.0, 5.0]])
    assert shift.r == math.inf and shift.note == "zero variance of loss differences"
    assert shift.argmin is None and shift.n_distinct == 3


def test_rqn_zero_variance_candidate_cannot_be_min():
    a = [1.0, 2.0, 3.0, 4.0]
    shifted = [2.0, 3.0, 4.0, 5.0]  # r_k = inf (constant shift)
    noisy = [2.0, 2.0, 4.0, 5.0]  # r_k = 9/8 (hand case B)
    res = rqn_details([shifted, a, noisy])
    assert res.r == pytest.approx(9 / 8, rel=1e-12)
    assert (res.best, res.argmin, res.note) == (1, 2, None)


def test_rqn_equal_means_give_zero():
    res = rqn_details([[1.0, 3.0, 2.0], [3.0, 1.0, 2.0]])
    assert res.r == 0.0 and res.argmin == 1


@pytest.mark.parametrize(
    "bad,match",
    [
        ([1.0, 2.0, 3.0], "2-D"),
        (np.ones((2, 3, 4)), "2-D"),
        (np.ones((0, 4)), "at least 1 candidate"),
        (np.ones((3, 1)), "at least 2 samples"),
        ([[1.0, float("nan")], [1.0, 2.0]], r"non-finite.*candidate 0, sample 1"),
        ([[1.0, 2.0], [1.0, float("inf")]], r"non-finite.*candidate 1, sample 1"),
        (np.ones((2, 3), dtype=complex), "real numbers"),
        ([["a", "b"], ["c", "d"]], "real numbers"),
        ([[1.0, 2.0], [1.0]], "rectangular"),
    ],
)
def test_rqn_validation(bad, match):
    with pytest.raises(ValueError, match=match):
        rqn(bad)


# ----------------------------------------------- known answer: the Gaussian-mean problem
#
# z ~ N(mu, sigma^2), loss l(th, z) = (z - th)^2. For two candidates
# d = l(th_k, z) - l(th_1, z) = (th_1 - th_k)(2z - th_1 - th_k), which is linear in z, so
# mean(d) = (th_1 - th_k)(2 mean(z) - th_1 - th_k), var(d) = (th_1 - th_k)^2 4 var(z) and
#   population:  r = (2 mu - th_1 - th_k)^2 / (8 sigma^2)
#   sample:      r_hat = (2 zbar - th_1 - th_k)^2 / (8 s^2)       (s^2 with ddof=1)


def _gaussian_losses(z: np.ndarray, thetas: np.ndarray) -> np.ndarray:
    return (z[None, :] - thetas[:, None]) ** 2


def test_rqn_gaussian_mean_closed_form():
    mu, sigma, n = 0.1, 1.0, 200_000
    thetas = np.array([-0.5, 0.0, 0.5, 1.0])  # grid of step 0.5 around mu; th_1 = 0.0
    z = np.random.default_rng(1234).normal(mu, sigma, n)
    res = rqn_details(_gaussian_losses(z, thetas))
    assert (res.best, res.argmin) == (1, 2)  # th_1 = 0.0, minimising th_k = 0.5

    th1, thk = 0.0, 0.5
    # exact identity on the sample (checks mean, ddof=1 variance and the 1/2)
    r_sample = (2 * z.mean() - th1 - thk) ** 2 / (8 * z.var(ddof=1))
    assert res.r == pytest.approx(r_sample, rel=1e-9)

    # population value, with a tolerance from the delta method: r_hat = (2 zbar - c)^2 /
    # (8 s^2), c = th1 + thk; d r/d zbar = (2mu - c) / (2 sigma^2) with sd(zbar) =
    # sigma/sqrt(n), d r/d s^2 = -r/sigma^2 with sd(s^2) = sigma^2 sqrt(2/n). 5 sd: a
    # false failure has probability ~6e-7 (and the seed is fixed).
    r_pop = (2 * mu - th1 - thk) ** 2 / (8 * sigma**2)
    sd = math.sqrt((2 * mu - th1 - thk) ** 2 / (4 * sigma**2 * n) + 2 * r_pop**2 / n)
    assert abs(res.r - r_pop) <= 5 * sd
    assert 5 * sd < 0.2 * r_pop  # the check is informative: it resolves r to 20%


GRID_STEPS = [0.01, 0.05, 0.2, 0.5]


def _erm_grid_rqn(
    delta: float, seed: int, mu: float = 1.0, sigma: float = 1.0
) -> tuple[RqnResult, np.ndarray]:
    """r of the ERM trajectory (running sample means) quantized to the grid delta * Z,
    estimated on held-out z (returned too)."""
    rng = np.random.default_rng(seed)
    n_train, n_test = 100_000, 100_000
    z_train = rng.normal(mu, sigma, n_train)
    z_test = rng.normal(mu, sigma, n_test)
    # checkpoints: every step while the running mean still jumps by more than a grid step,
    # then geometrically spaced (consecutive means then differ by far less than delta)
    steps = np.unique(np.concatenate([np.arange(1, 100), np.geomspace(100, n_train, 900).astype(int)]))
    trajectory = np.cumsum(z_train)[steps - 1] / steps
    quantized = delta * np.round(trajectory / delta)
    keep = distinct_candidates({"theta": torch.tensor(t)} for t in quantized)
    return rqn_details(_gaussian_losses(z_test, quantized[keep])), z_test


@pytest.mark.parametrize("seed", [0, 1, 2, 3, 4])
def test_rqn_grows_with_grid_step(seed):
    # mu = 1.0 lies on every grid, so the population r of the grid neighbours of th_1 = mu
    # is delta^2 / (8 sigma^2): increasing in delta. (With mu midway between two grid
    # points r is ~0 at any delta, so the property needs mu on or near the grid.) Checked
    # offline on 200 seeds: no violation, smallest ratio between consecutive steps ~5.5.
    runs = [_erm_grid_rqn(delta, seed) for delta in GRID_STEPS]
    results = [res for res, _ in runs]
    rs = [res.r for res in results]
    assert all(not math.isnan(r) for r in rs)
    assert math.isfinite(rs[0]) and results[0].n_distinct > results[-1].n_distinct
    assert all(a <= b for a, b in zip(rs, rs[1:])), rs
    assert rs[0] < rs[-1]
    # For delta >= 0.05, th_1 = mu (|zbar - mu| << delta/2) and a grid neighbour mu +- delta
    # was visited, so by the sample identity r = (delta -+ 2 e)^2 / (8 s^2), e = zbar - mu:
    # r lies in [(delta - 2|e|)^2, (delta + 2|e|)^2] / (8 s^2), around delta^2 / (8 sigma^2).
    for delta, (res, z_test) in zip(GRID_STEPS[1:], runs[1:]):
        if math.isfinite(res.r):
            e, s2 = abs(z_test.mean() - 1.0), z_test.var(ddof=1)
            lo, hi = (delta - 2 * e) ** 2 / (8 * s2), (delta + 2 * e) ** 2 / (8 * s2)
            assert lo * (1 - 1e-9) <= res.r <= hi * (1 + 1e-9), (delta, lo, res.r, hi)


# ------------------------------------------------------------- fixed grid (reference=)
#
# r_Qn assumes a FIXED grid (Aubinais et al.): the candidates are the finite set of
# configurations reachable on it. With reference=R every tensor is rounded onto the
# per-channel grid computed from R (scales max|R_c| / qmax or mean|R_c|), so neighbouring
# checkpoints collapse; quantize_trajectory uses the last checkpoint as R by default.


def _bytes_equal(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Bit-identical (torch.equal would accept -0.0 == 0.0)."""
    if a.dtype != b.dtype or a.shape != b.shape:
        return False
    return bytes(a.contiguous().reshape(-1).view(torch.uint8).numpy()) == bytes(
        b.contiguous().reshape(-1).view(torch.uint8).numpy()
    )


def _legacy_quantize_tensor(w: torch.Tensor, name: str) -> torch.Tensor:
    """The quantizers as they were before `reference` existed (own grid), written out."""
    if name == "fp32":
        return w.clone()
    x = w.detach().to(torch.float64).reshape(w.shape[0], -1)

    def safe(s):
        return torch.where(s > 0, s, torch.ones_like(s))

    def rnd(v):
        return torch.round(v) + 0.0

    if name in INT_BITS:
        qmax = 2 ** (INT_BITS[name] - 1) - 1
        scale = x.abs().amax(dim=1, keepdim=True) / qmax
        out = torch.clamp(rnd(x / safe(scale)), -qmax, qmax) * scale
    elif name == "binary":
        out = torch.where(x >= 0, 1.0, -1.0).to(x.dtype) * x.abs().mean(dim=1, keepdim=True)
    else:
        keep = None
        if name == "ternary":
            scale = x.abs().mean(dim=1, keepdim=True)
        else:
            k = int(name.removeprefix("ternary-sparse")) * x.shape[1] // 100
            order = torch.argsort(x.abs(), dim=1, stable=True)
            keep = torch.ones_like(x, dtype=torch.bool)
            keep.scatter_(1, order[:, :k], False)
            scale = torch.where(keep, x.abs(), 0.0).sum(dim=1, keepdim=True) / keep.sum(dim=1, keepdim=True)
        q = torch.clamp(rnd(x / safe(scale)), -1, 1)
        if keep is not None:
            q = torch.where(keep, q, 0.0)
        out = q * scale
    return out.reshape(w.shape).to(dtype=w.dtype)


@pytest.mark.parametrize("name", ALL_NAMES)
def test_no_reference_is_bit_identical_to_own_grid(name):
    sd = _model().state_dict()
    expected = {k: _legacy_quantize_tensor(v, name) if is_quantized_tensor(k, v) else v for k, v in sd.items()}
    for out in (
        quantize(sd, name),
        quantize(sd, name, reference=None),
        quantize(sd, name, reference=sd),  # a model quantized on its own grid
        quantize(sd, name, reference=copy.deepcopy(sd)),
    ):
        assert list(out) == list(sd)
        for k in sd:
            assert _bytes_equal(out[k], expected[k]), k
    for dtype in (torch.float32, torch.float64, torch.float16, torch.bfloat16):
        w = _weights(16, 200, dtype=dtype)
        legacy = _legacy_quantize_tensor(w, name)
        assert _bytes_equal(quantize_tensor(w, name), legacy)
        assert _bytes_equal(quantize_tensor(w, name, reference=None), legacy)
        assert _bytes_equal(quantize_tensor(w, name, reference=w.clone()), legacy)
        spec = quantizer_info(name)
        assert _bytes_equal(spec(w), legacy) and _bytes_equal(spec(w, reference=w.clone()), legacy)


def _candidate_and_reference() -> tuple[torch.Tensor, torch.Tensor]:
    # float64 so the checks can be tight; W is 1.5x larger than R channel by channel on
    # average, so some of its values lie beyond the reference's range and must clamp
    w = _weights(16, 200, seed=1, dtype=torch.float64) * 1.5
    r = _weights(16, 200, seed=2, dtype=torch.float64)
    return w, r


@pytest.mark.parametrize("name", list(INT_BITS))
def test_fixed_grid_int_uses_reference_scale_and_clamps(name):
    qmax = 2 ** (INT_BITS[name] - 1) - 1
    w, r = _candidate_and_reference()
    q = quantize_tensor(w, name, reference=r)
    r_max = r.abs().amax(dim=1, keepdim=True)
    scale = r_max / qmax
    codes = q / scale
    # every value is an integer multiple of the REFERENCE's step max|R_c| / qmax ...
    assert torch.allclose(codes, codes.round(), rtol=0, atol=1e-9)
    assert codes.round().abs().max() <= qmax
    # ... within the reference's range: values of W beyond +-max|R_c| clamp to it
    beyond = w.abs() > r_max
    assert beyond.any() and (~beyond).any()  # the construction exercises both cases
    assert (q.abs() <= r_max * (1 + 1e-12)).all()
    assert torch.allclose(q[beyond], (torch.sign(w) * r_max).expand_as(w)[beyond], rtol=1e-12, atol=0)
    # inside the range: round to nearest on the reference grid, |W - Q(W)| <= step / 2
    err = (w - q).abs()
    assert (err[~beyond] <= (scale / 2).expand_as(w)[~beyond] * (1 + 1e-9)).all()
    # and it is not the candidate's own grid
    assert not torch.equal(q, quantize_tensor(w, name))


def test_fixed_grid_binary_levels_are_reference_absmean():
    w, r = _candidate_and_reference()
    q = quantize_tensor(w, "binary", reference=r)
    s = r.abs().mean(dim=1, keepdim=True)
    for row_q, row_w, s_c in zip(q, w, s):
        levels = torch.unique(row_q)
        assert levels.numel() == 2
        assert torch.allclose(levels, torch.cat([-s_c, s_c]), rtol=1e-12, atol=0)
        assert torch.equal(row_q > 0, row_w >= 0)  # sign(W), sign(0) = +1
    assert not torch.allclose(q.abs(), w.abs().mean(dim=1, keepdim=True).expand_as(q))


def test_fixed_grid_ternary_on_reference_absmean():
    w, r = _candidate_and_reference()
    q = quantize_tensor(w, "ternary", reference=r)
    s = r.abs().mean(dim=1, keepdim=True)
    for row_q, row_w, s_c in zip(q, w, s):
        nz = row_q != 0
        assert torch.allclose(row_q[nz].abs(), s_c.expand(int(nz.sum())), rtol=1e-12, atol=0)
        assert torch.equal(nz, row_w.abs() > s_c / 2)  # round(W / s), clipped to [-1, 1]
        assert torch.equal(torch.sign(row_q[nz]), torch.sign(row_w[nz]))


@pytest.mark.parametrize("pct", [50, 90])
def test_fixed_grid_sparse_ternary_own_mask_reference_scale(pct):
    w, r = _candidate_and_reference()
    k = pct * w.shape[1] // 100
    q = quantize_tensor(w, f"ternary-sparse{pct}", reference=r)
    w_order = torch.argsort(w.abs(), dim=1, stable=True)
    for row_q, row_w, row_r, order in zip(q, w, r, w_order):
        # the mask is the candidate's own: its k smallest |W| are zero
        assert (row_q[order[:k]] == 0).all()
        # the scale is mean |R| over the entries the REFERENCE keeps (its n - k largest)
        s = row_r.abs().sort().values[k:].mean()
        kept = order[k:]
        nz = row_q != 0
        assert torch.allclose(row_q[nz].abs(), s.expand(int(nz.sum())), rtol=1e-12, atol=0)
        assert torch.equal(nz[kept], row_w[kept].abs() > s / 2)
        assert torch.equal(torch.sign(row_q[nz]), torch.sign(row_w[nz]))
        # not the candidate's own kept-mean scale
        assert not torch.isclose(s, row_w[kept].abs().mean(), rtol=1e-3)


def test_fixed_grid_fp32_ignores_reference():
    w, r = _candidate_and_reference()
    assert torch.equal(quantize_tensor(w, "fp32", reference=r), w)
    r_nan = r.clone()
    r_nan[0, 0] = float("nan")
    assert torch.equal(quantize_tensor(w, "fp32", reference=r_nan), w)


@pytest.mark.parametrize("name", ALL_NAMES[1:])
def test_fixed_grid_zero_reference_channel_gives_zero(name):
    w, r = _candidate_and_reference()
    r[3] = 0.0
    q = quantize_tensor(w.float(), name, reference=r)  # a float64 reference for float32 W
    assert q.dtype == torch.float32
    assert (q[3] == 0).all() and not torch.signbit(q[3]).any()  # grid {0}, no -0.0
    assert (q[2] != 0).any()


def test_reference_validation():
    sd = _model().state_dict()
    ref = copy.deepcopy(sd)
    # extra keys and missing non-quantized keys are fine
    ref_ok = {k: v for k, v in ref.items() if is_quantized_tensor(k, v)} | {"extra": torch.ones(2)}
    assert all(torch.equal(a, b) for a, b in zip(quantize(sd, "int4", reference=ref_ok).values(),
                                                 quantize(sd, "int4").values()))

    missing = {k: v for k, v in ref.items() if k != "fc.weight"}
    for name in ("int8", "fp32"):
        with pytest.raises(ValueError, match=r"reference has no tensor 'fc.weight'"):
            quantize(sd, name, reference=missing)
    wrong_shape = dict(ref, **{"conv.weight": torch.zeros(8, 3, 5, 5)})
    with pytest.raises(ValueError, match=r"reference\['conv.weight'\].*shape \(8, 3, 5, 5\).*\(8, 3, 3, 3\)"):
        quantize(sd, "ternary", reference=wrong_shape)
    transposed = dict(ref, **{"fc.weight": ref["fc.weight"].T.contiguous()})
    with pytest.raises(ValueError, match=r"reference\['fc.weight'\].*shape"):
        quantize(sd, "binary", reference=transposed)
    not_float = dict(ref, **{"emb.weight": torch.zeros(10, 6, dtype=torch.int64)})
    with pytest.raises(ValueError, match=r"reference\['emb.weight'\].*floating point"):
        quantize(sd, "int2", reference=not_float)
    not_tensor = dict(ref, **{"emb.weight": np.zeros((10, 6))})
    with pytest.raises(TypeError, match=r"reference\['emb.weight'\].*torch.Tensor"):
        quantize(sd, "int2", reference=not_tensor)
    with pytest.raises(TypeError, match="reference must be a mapping"):
        quantize(sd, "int2", reference=list(ref.values()))
    nan = copy.deepcopy(ref)
    nan["fc.weight"][0, 0] = float("nan")
    with pytest.raises(ValueError, match=r"reference\['fc.weight'\].*non-finite"):
        quantize(sd, "ternary-sparse50", reference=nan)
    assert torch.equal(quantize(sd, "fp32", reference=nan)["fc.weight"], sd["fc.weight"])

    w = _weights(4, 6)
    with pytest.raises(ValueError, match=r"shape \(4, 5\)"):
        quantize_tensor(w, "int8", reference=torch.ones(4, 5))
    with pytest.raises(TypeError, match="torch.Tensor"):
        quantize_tensor(w, "int8", reference=np.ones((4, 6)))
    with pytest.raises(ValueError, match="non-finite"):
        quantize_tensor(w, "int8", reference=torch.full((4, 6), float("inf")))
    with pytest.raises(TypeError):
        quantize_tensor(w, "int8", torch.ones(4, 6))  # keyword-only
    with pytest.raises(TypeError):
        quantize(sd, "int8", ref)  # keyword-only


def test_custom_quantizer_receives_reference():
    name = "test-refmax"
    seen: list[bool] = []
    try:

        @register_quantizer(name, bits=1)
        def _refmax(weight: torch.Tensor, reference: torch.Tensor) -> torch.Tensor:
            seen.append(reference is weight)
            return torch.full_like(weight, float(reference.abs().max()))

        w, r = _weights(3, 4, seed=1), _weights(3, 4, seed=2) * 10
        assert torch.equal(quantize_tensor(w, name), torch.full_like(w, float(w.abs().max())))
        assert torch.equal(quantize_tensor(w, name, reference=r), torch.full_like(w, float(r.abs().max())))
        out = quantize({"fc.weight": w}, name, reference={"fc.weight": r})
        assert torch.equal(out["fc.weight"], torch.full_like(w, float(r.abs().max())))
        assert seen == [True, False, False]  # reference is weight itself when none is given
        assert torch.equal(quantizer_info(name)(w, reference=r), torch.full_like(w, float(r.abs().max())))
    finally:
        QUANTIZERS.unregister(name)


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
        assert all(_bytes_equal(cand[k], everything[t][k]) for k in cand)
    # an explicit reference equal to the last checkpoint changes nothing
    cands2, first2 = quantize_trajectory(tuple(traj), name, reference=copy.deepcopy(traj[-1]))
    assert first2 == first
    assert all(_bytes_equal(a[k], b[k]) for a, b in zip(cands2, candidates) for k in a)
    # the released model's own candidate is its ordinary (own-grid) quantization
    assert all(_bytes_equal(everything[-1][k], v) for k, v in quantize(traj[-1], name).items())
    if name != "fp32":  # another reference gives another grid
        other = quantize_trajectory(traj, name, reference=traj[0])[0]
        assert not all(_bytes_equal(a[k], b[k]) for a, b in zip(other, candidates) for k in a)


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
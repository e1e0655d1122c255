"""Res-MIA ablation options (issue 15): erosion schedule (factor, min_size, steps), label,
scale, upsample, score -- each against hand-computed arrays -- and the defaults, which
must score exactly as the paper's attack (docs/algorithms.md section 3)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from torch import nn

from attacks import Oracle, get_attack
from attacks.membership.registry import attack_options as declared_options
from attacks.membership.resmia import (
    ErosionSchedule,
    default_sizes,
    erode,
    resmia_scores,
    schedule_sizes,
)
from fedaudit.config import ScenarioError, from_toml, load_scenario, to_toml

from tests.helpers.paths import SHARED_DATA

# The oracle's float64 softmax of log(p) returns p within a few ulps (eps64 ~ 2.2e-16), and
# the logit scale takes logs of those: 1e-12 is far above that rounding and far below every
# difference the tests assert.
ATOL64 = 1e-12


# --------------------------------------------------------------------------- stub model

# Three 4x4 single-channel images; image i is i + D with D a zero-mean pattern of 16
# distinct dyadic values, so every average pooling keeps the image mean exactly at i and
# the number of distinct pixel values tells the erosion level: 16 (x_0), 4 (2x2), 1 (1x1).
D = (np.arange(16, dtype=np.float64) - 7.5) / 16

# P[level, sample] = the probabilities the stub returns; level 0 = original image,
# 1 = pooled to 2x2, 2 = pooled to 1x1 (the default halving of a 4x4 image: K = 2).
P = np.array([
    [[0.8, 0.1, 0.1], [0.05, 0.9, 0.05], [0.2, 0.2, 0.6]],    # x_0
    [[0.5, 0.25, 0.25], [0.1, 0.8, 0.1], [0.2, 0.2, 0.6]],    # x_1 (2x2)
    [[0.2, 0.4, 0.4], [0.25, 0.5, 0.25], [0.6, 0.2, 0.2]],    # x_2 (1x1)
])
TRUE_Y = np.array([1, 1, 0])  # the predicted labels are 0, 1, 2


class LevelModel(nn.Module):
    """Returns ``log P[level, round(mean)]``: softmax gives back exactly the table ``P``
    (16 distinct values: level 0; 1 value: level 2; any other count: level 1)."""

    LEVEL = {16: 0, 1: 2}

    def __init__(self, table: np.ndarray) -> None:
        super().__init__()
        self.register_buffer("logp", torch.from_numpy(np.log(table)))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        rows = []
        for img in x:
            level = self.LEVEL.get(int(torch.unique(img).numel()), 1)
            rows.append(self.logp[level, int(torch.round(img.mean()))])
        return torch.stack(rows)


def _images() -> torch.Tensor:
    return torch.from_numpy(np.stack([i + D for i in range(3)]).reshape(3, 1, 4, 4))


def _logit(p: float) -> float:
    return math.log(p) - math.log(1 - p)


# --------------------------------------------------------------------------- schedule


def test_schedule_defaults_are_the_papers_halving():
    assert ErosionSchedule().sizes(32, 32) == [(16, 16), (8, 8), (4, 4), (2, 2), (1, 1)]
    for h in range(2, 40):
        for w in range(1, 40):
            assert schedule_sizes(h, w) == default_sizes(h, w), (h, w)
            assert schedule_sizes(w, h) == default_sizes(w, h), (w, h)


@pytest.mark.parametrize(
    ("shape", "kwargs", "expected"),
    [
        # 32 / 1.5^k = 21.3, 14.2, 9.48, 6.32, 4.21, 2.81, 1.87, 1.25 (repeats 2: left out)
        ((32, 32), {"factor": 1.5}, [22, 15, 10, 7, 5, 3, 2]),
        # 8 / 1.5^k = 5.33, 3.56, 2.37, 1.58, 1.05 (repeats 2)
        ((8, 8), {"factor": 1.5}, [6, 4, 3, 2]),
        ((32, 32), {"min_size": 4}, [16, 8, 4]),  # stops before the 2x2 and 1x1 means
        ((32, 32), {"min_size": 5}, [16, 8]),  # 32/8 = 4 < 5
        ((32, 32), {"min_size": 4, "steps": 2}, [16, 8]),
        ((32, 32), {"factor": 4.0}, [8, 2]),  # 32/64 < 1
        ((6, 6), {"factor": 1.5}, [4, 3, 2]),  # 6/1.5^k = 4, 2.67, 1.78, 1.19 (repeats 2)
        # non-square: each side on its own; 12 / 1.5^k = 8, 5.33, 3.56, 2.37, 1.58, 1.05
        ((8, 12), {"factor": 1.5}, [(6, 8), (4, 6), (3, 4), (2, 3), (2, 2), (1, 2)]),
    ],
)
def test_schedule_sizes_by_hand(shape, kwargs, expected):
    want = [s if isinstance(s, tuple) else (s, s) for s in expected]
    assert schedule_sizes(*shape, **kwargs) == want


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"factor": 1.0}, "factor must be a finite number > 1"),
        ({"factor": 0.5}, "factor must be a finite number > 1"),
        ({"factor": float("inf")}, "factor must be a finite number > 1"),
        ({"factor": True}, "factor must be a finite number > 1"),
        ({"min_size": 0}, "min_size must be a positive integer"),
        ({"min_size": 2.0}, "min_size must be a positive integer"),
        ({"min_size": 9}, "leaves no erosion step for a 8x8 image"),
        ({"min_size": 2, "steps": 3}, r"steps must be an integer in \[1, 2\]"),
        ({"steps": 0}, "steps must be a positive integer"),
    ],
)
def test_schedule_validation(kwargs, match):
    with pytest.raises(ValueError, match=match):
        schedule_sizes(8, 8, **kwargs)


def test_erode_with_a_schedule_pools_the_schedules_sizes():
    img = np.arange(16, dtype=np.float64).reshape(1, 1, 4, 4)
    x = torch.from_numpy(img)
    levels = erode(x, min_size=2)  # 4x4 -> [2x2] only
    assert len(levels) == 2
    expected = np.array([[2.5, 2.5, 4.5, 4.5],
                         [2.5, 2.5, 4.5, 4.5],
                         [10.5, 10.5, 12.5, 12.5],
                         [10.5, 10.5, 12.5, 12.5]])
    np.testing.assert_array_equal(levels[1][0, 0].numpy(), expected)  # dyadic: exact
    y = torch.rand(2, 3, 6, 6, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    for a, b in zip(erode(y, factor=1.5), erode(y, sizes=[4, 3, 2])):
        torch.testing.assert_close(a, b, rtol=0, atol=0)
    with pytest.raises(ValueError, match="either explicit sizes or a schedule"):
        erode(y, sizes=[4], factor=1.5)


def test_bilinear_upsampling_by_hand():
    """Pooled 2x2 block means A of arange(16), bilinear with align_corners=False: output
    pixel i reads source coordinate i/2 - 1/4 (clamped), i.e. weights
    W = [[1, 0], [3/4, 1/4], [1/4, 3/4], [0, 1]] and x_1 = W A W^T."""
    x = torch.from_numpy(np.arange(16, dtype=np.float64).reshape(1, 1, 4, 4))
    up = erode(x, steps=1, upsample="bilinear")[1][0, 0].numpy()
    expected = np.array([[2.5, 3.0, 4.0, 4.5],
                         [4.5, 5.0, 6.0, 6.5],
                         [8.5, 9.0, 10.0, 10.5],
                         [10.5, 11.0, 12.0, 12.5]])
    np.testing.assert_array_equal(up, expected)  # multiples of 1/8: exact in float64


# --------------------------------------------------------------------------- scores


def test_stub_returns_the_table():
    x = _images()
    for level, xk in enumerate(erode(x)):
        np.testing.assert_allclose(Oracle(LevelModel(P)).predict_proba(xk), P[level],
                                   rtol=0, atol=ATOL64)


@pytest.mark.parametrize(
    ("options", "expected"),
    [
        # the paper: predicted label (0, 1, 2), confidence, endpoint (c_0 - c_2) / 2
        ({}, [(0.8 - 0.2) / 2, (0.9 - 0.5) / 2, (0.6 - 0.2) / 2]),
        # mean-slope: ((c_0 - c_1) / 1 + (c_0 - c_2) / 2) / 2
        ({"score": "mean-slope"}, [(0.3 + 0.6 / 2) / 2, (0.1 + 0.4 / 2) / 2, (0.0 + 0.4 / 2) / 2]),
        # true labels 1, 1, 0: c = (0.1, 0.25, 0.4), (0.9, 0.8, 0.5), (0.2, 0.2, 0.6)
        ({"label": "given"}, [(0.1 - 0.4) / 2, (0.9 - 0.5) / 2, (0.2 - 0.6) / 2]),
        ({"label": "given", "score": "mean-slope"},
         [(-0.15 - 0.3 / 2) / 2, (0.1 + 0.4 / 2) / 2, (0.0 - 0.4 / 2) / 2]),
        # logit scale: log p - log(1 - p) of the same confidences
        ({"scale": "logit"},
         [(_logit(0.8) - _logit(0.2)) / 2, (_logit(0.9) - _logit(0.5)) / 2,
          (_logit(0.6) - _logit(0.2)) / 2]),
        ({"scale": "logit", "score": "mean-slope"},
         [((_logit(0.8) - _logit(0.5)) + (_logit(0.8) - _logit(0.2)) / 2) / 2,
          ((_logit(0.9) - _logit(0.8)) + (_logit(0.9) - _logit(0.5)) / 2) / 2,
          (0.0 + (_logit(0.6) - _logit(0.2)) / 2) / 2]),
        # K = 1: only the 2x2 step, (c_0 - c_1) / 1
        ({"steps": 1}, [0.8 - 0.5, 0.9 - 0.8, 0.0]),
        ({"min_size": 2}, [0.8 - 0.5, 0.9 - 0.8, 0.0]),
        ({"steps": 1, "label": "given", "scale": "logit"},
         [_logit(0.1) - _logit(0.25), _logit(0.9) - _logit(0.8), 0.0]),
    ],
)
def test_resmia_options_score_by_hand(options, expected):
    oracle = Oracle(LevelModel(P))
    scores = get_attack("resmia")(oracle, _images(), TRUE_Y, **options)
    np.testing.assert_allclose(scores, expected, rtol=0, atol=ATOL64)
    k = 1 if ("steps" in options or "min_size" in options) else 2
    assert oracle.queries == 3 * (k + 1)


def test_resmia_curves_follow_label_and_scale():
    x = _images()
    _, curves = resmia_scores(Oracle(LevelModel(P)), x, return_curves=True)
    np.testing.assert_allclose(curves, P[:, [0, 1, 2], [0, 1, 2]].T, rtol=0, atol=ATOL64)
    _, curves = resmia_scores(Oracle(LevelModel(P)), x, label="given", labels=TRUE_Y,
                              scale="logit", return_curves=True)
    by_hand = [[_logit(0.1), _logit(0.25), _logit(0.4)],
               [_logit(0.9), _logit(0.8), _logit(0.5)],
               [_logit(0.2), _logit(0.2), _logit(0.6)]]
    np.testing.assert_allclose(curves, by_hand, rtol=0, atol=ATOL64)


def test_logit_scale_keeps_saturated_confidences_apart():
    """Confidences 1 - 1e-12 and 1 - 1e-10 differ by ~1e-10 in probability and by
    log(100) ~ 4.6 on the logit scale (the others' mass, never 1 - p_y, is used)."""
    table = np.array([[[1 - 1e-12, 1e-12], [1 - 1e-10, 1e-10], [0.5, 0.5]],
                      [[0.5, 0.5]] * 3,
                      [[0.5, 0.5]] * 3])
    oracle = Oracle(LevelModel(table))
    s = resmia_scores(oracle, _images(), scale="logit")
    np.testing.assert_allclose(s[:2], [math.log(1e12) / 2, math.log(1e10) / 2], rtol=1e-6)
    assert s[2] == 0.0


def test_resmia_bilinear_queries_the_bilinear_images():
    """upsample = bilinear sends exactly x_0 and erode(..., upsample='bilinear') (the hand
    array of test_bilinear_upsampling_by_hand) to the oracle, and scores them."""
    model = LevelModel(P)
    x = _images()
    seen: list[torch.Tensor] = []
    model.register_forward_pre_hook(lambda m, inp: seen.append(inp[0].clone()))
    scores = resmia_scores(Oracle(model), x, upsample="bilinear", steps=1)
    stream = torch.cat(erode(x, steps=1, upsample="bilinear"))
    torch.testing.assert_close(torch.cat(seen), stream, rtol=0, atol=0)
    d = D.reshape(4, 4)
    # bilinear of the 2x2 means of D: 1/16 of the hand array, shifted by -7.5/16
    expected = (np.array([[2.5, 3.0, 4.0, 4.5], [4.5, 5.0, 6.0, 6.5],
                          [8.5, 9.0, 10.0, 10.5], [10.5, 11.0, 12.0, 12.5]]) - 7.5) / 16
    assert not np.array_equal(expected, d)
    np.testing.assert_array_equal(stream[3 + 1, 0].numpy(), 1 + expected)
    np.testing.assert_allclose(scores, [0.8 - 0.5, 0.9 - 0.8, 0.0], rtol=0, atol=ATOL64)


def test_label_true_needs_labels_and_validates_them():
    oracle = Oracle(LevelModel(P))
    with pytest.raises(ValueError, match='label = "given" needs the true labels'):
        resmia_scores(oracle, _images(), label="given")
    with pytest.raises(ValueError, match="labels must be 3 integer class labels"):
        resmia_scores(oracle, _images(), label="given", labels=[0, 1])
    with pytest.raises(ValueError, match="label must be one of"):
        resmia_scores(oracle, _images(), label="gold")
    with pytest.raises(ValueError, match="scale must be one of"):
        resmia_scores(oracle, _images(), scale="log")
    assert oracle.queries == 0
    classes = Oracle(LevelModel(P)).predict_proba(_images()).shape[-1]
    for bad, where in (([0, -1, 0], 1), ([0, 0, classes], 2)):
        with pytest.raises(ValueError, match=rf"labels must be in \[0, {classes}\) "
                                             rf".*labels\[{where}\] = {bad[where]}"):
            resmia_scores(Oracle(LevelModel(P)), _images(), label="given", labels=bad)
    # the predicted label ignores the labels given
    np.testing.assert_array_equal(
        resmia_scores(Oracle(LevelModel(P)), _images(), labels=[2, 2, 2]),
        resmia_scores(Oracle(LevelModel(P)), _images()))


# --------------------------------------------------------------------------- defaults


class ColourModel(nn.Module):
    """Three classes from the per-channel pixel spread and mean of an RGB image (float64)."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("w", torch.tensor([8.0, 5.0, 3.0], dtype=torch.float64))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        spread = x.flatten(2).std(dim=2, unbiased=False)  # (N, 3)
        return self.w * spread + x.mean(dim=(2, 3))


def _adaptive_mean(a: np.ndarray, out: int) -> np.ndarray:
    n = a.shape[-1]
    b = [(math.floor(i * n / out), math.ceil((i + 1) * n / out)) for i in range(out)]
    return np.array([[a[r0:r1, c0:c1].mean() for (c0, c1) in b] for (r0, r1) in b])


def _nearest_up(a: np.ndarray, n: int) -> np.ndarray:
    src = [math.floor(i * a.shape[0] / n) for i in range(n)]
    return a[np.ix_(src, src)]


def _paper_resmia(model: nn.Module, x: np.ndarray) -> np.ndarray:
    """The paper's Res-MIA written independently: halve to 1x1 from x_0, nearest back up,
    softmax confidence of argmax f(x_0), endpoint (c_0 - c_K) / K."""
    n, c, h, _ = x.shape
    k = int(math.floor(math.log2(h)))
    levels = [x] + [np.stack([[_nearest_up(_adaptive_mean(x[i, j], math.ceil(h / 2**s)), h)
                               for j in range(c)] for i in range(n)]) for s in range(1, k + 1)]
    with torch.no_grad():
        probs = [torch.softmax(model(torch.from_numpy(v)), dim=1).numpy() for v in levels]
    y_star = probs[0].argmax(axis=1)
    c0, ck = probs[0][np.arange(n), y_star], probs[-1][np.arange(n), y_star]
    return (c0 - ck) / k


def test_defaults_score_exactly_as_the_paper():
    x_np = np.random.default_rng(3).random((6, 3, 32, 32))
    x = torch.from_numpy(x_np)  # float64 (a numpy input would be cast to float32)
    model = ColourModel()
    y = np.array([0, 1, 2, 0, 1, 2])
    plain = get_attack("resmia")(Oracle(model), x, y)  # no options
    # float64 throughout; pooling sums of 4..1024 values in another order differ by a few
    # ulps, amplified by the weights (<= 8): 1e-12 covers that with a wide margin
    np.testing.assert_allclose(plain, _paper_resmia(model, x_np), rtol=0, atol=ATOL64)
    # the declared option defaults (a scenario with an empty [attack.resmia]) are the same
    fields = declared_options("resmia")
    defaults = {k: f.default for k, f in fields.items() if f.default != f.unset}
    assert defaults == {"upsample": "nearest", "score": "endpoint", "label": "predicted",
                        "scale": "probability"}
    np.testing.assert_array_equal(get_attack("resmia")(Oracle(model), x, y, **defaults), plain)
    explicit = {"factor": 2.0, "min_size": 1, "steps": 5}
    np.testing.assert_array_equal(get_attack("resmia")(Oracle(model), x, y, **explicit), plain)


# --------------------------------------------------------------------------- scenario keys


def test_scenario_accepts_the_options():
    s = from_toml('[attack.resmia]\nfactor = 1.5\nmin_size = 4\nlabel = "true"\n'
                  'scale = "logit"\nscore = "mean-slope"\nupsample = "bilinear"\nsteps = 2\n')
    opts = s.attack.options["resmia"]
    # "true", the earlier spelling of "given", is accepted and written back as "given"
    assert (opts["factor"], opts["min_size"], opts["label"], opts["scale"]) == \
        (1.5, 4, "given", "logit")
    assert 'label = "given"' in to_toml(s)


def test_a_bare_true_on_the_command_line_gets_a_hint():
    with pytest.raises(ScenarioError) as exc:
        load_scenario("quickstart", ["attack.resmia.label=true"])
    assert str(exc.value) == (
        "--set attack.resmia.label=true: attack.resmia.label = true: TOML reads a bare true "
        "as a boolean, and this key takes a string; write 'given'; allowed: predicted, given")
    assert load_scenario("quickstart", ["attack.resmia.label=given"]) \
        .attack.options["resmia"]["label"] == "given"


def test_the_earlier_spelling_scores_like_the_new_one():
    oracle = Oracle(LevelModel(P))
    x = _images()
    np.testing.assert_array_equal(resmia_scores(oracle, x, label="true", labels=TRUE_Y),
                                  resmia_scores(oracle, x, label="given", labels=TRUE_Y))


@pytest.mark.parametrize(
    ("toml", "match"),
    [
        ("factor = 1.0", r"attack.resmia.factor = 1.0: out of range, must be > 1"),
        ("min_size = 0", r"attack.resmia.min_size = 0: out of range, must be >= 1"),
        ('label = "gold"', r"attack.resmia.label = 'gold': unknown choice; allowed: "
                           "predicted, given"),
        ('scale = "log"', r"attack.resmia.scale = 'log': unknown choice; allowed: "
                          "probability, logit"),
    ],
)
def test_scenario_rejects_bad_options(toml, match):
    with pytest.raises(ScenarioError, match=match):
        from_toml(f"[attack.resmia]\n{toml}\n")


# --------------------------------------------------------------------------- scenarios

SHARED_CIFAR = SHARED_DATA / "cifar10-jpeg-10k.npz"


@pytest.mark.parametrize("name", ["resmia-paper", "resmia-paper-cpu"])
def test_paper_scenarios_pass_preflight_with_the_cifar10_copy(name):
    if not SHARED_CIFAR.is_file():
        pytest.skip("../shared/data/cifar10-jpeg-10k.npz is absent (a user's clone)")
    from fedaudit.config.preflight import validate_all

    overrides = ["data.dataset=npz", f"data.path={SHARED_CIFAR}"]
    if not torch.cuda.is_available():
        overrides.append("federation.client_resources.num_gpus=0")
    s = validate_all(name, overrides)
    assert s.federation.num_clients == 10
    assert s.model.name == ("resnet18" if name == "resmia-paper" else "cnn")
    assert s.attack.methods[0] == "resmia" and s.attack.options["resmia"]["label"] == "predicted"


def test_preflight_checks_resmia_options_against_the_image_size():
    from fedaudit.config.preflight import validate_all

    with pytest.raises(ScenarioError, match=r"attack.resmia: steps must be an integer in "
                                            r"\[1, 3\] .* 8x8 image, got 4 \(the data's "
                                            r"samples are 1x8x8\)"):
        validate_all("quickstart", ["attack.resmia.steps=4"])
    with pytest.raises(ScenarioError, match="attack.resmia: min_size = 9 leaves no erosion step"):
        validate_all("quickstart", ["attack.resmia.min_size=9"])

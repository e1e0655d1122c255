"""attacks.label_leakage: the registry, LabelGuess, the metrics (against multiset
arithmetic of collections.Counter), and the count allocation (against brute force)."""

import itertools
from collections import Counter

import numpy as np
import pytest

from attacks.label_leakage import (LABEL_ATTACKS, LabelGuess, count_error, get_label_attack,
                                   label_accuracy, label_attack_names, label_counts,
                                   register_label_attack)
from attacks.label_leakage.allocation import allocate_greedily, round_counts
from attacks.label_leakage.registry import label_attack_label, label_attack_options
from fedaudit.options import Field, option


def test_the_built_in_attacks_are_registered_with_fields():
    assert label_attack_names() == ["bias-count", "geng", "idlg", "llg", "llg-star"]
    assert label_attack_label("llg-star") == "LLG*"
    for name in label_attack_names():
        assert all(isinstance(f, Field) for f in label_attack_options(name).values())
    assert set(label_attack_options("bias-count")) == {"dummies", "dummy", "seed",
                                                       "along_path", "negative_present"}
    with pytest.raises(ValueError, match="unknown label attack 'dlg'; allowed: bias-count"):
        get_label_attack("dlg")


def test_registering_an_attack_and_refusing_a_bad_option():
    @register_label_attack("test-majority", label="majority",
                           options={"cls": option(int, 0, "the class")})
    def majority(case, *, cls=0):
        counts = np.zeros(case.num_classes, dtype=np.int64)
        counts[cls] = case.training.num_examples
        return LabelGuess(counts, {})

    try:
        assert get_label_attack("test-majority") is majority
        assert label_attack_label("test-majority") == "majority"
        assert [e.key for e in LABEL_ATTACKS.added()] == ["test-majority"]
    finally:
        LABEL_ATTACKS.unregister("test-majority")
    with pytest.raises(TypeError, match="option 'cls' must be a fedaudit.options.Field"):
        register_label_attack("test-bad", options={"cls": 3})(majority)
    assert "test-bad" not in LABEL_ATTACKS


def test_a_guess_is_read_only_and_checked():
    guess = LabelGuess([0, 2, 1], {"impact": -0.5})
    assert guess.counts.dtype == np.int64 and guess.num_samples == 3
    assert guess.labels().tolist() == [1, 1, 2]
    with pytest.raises(ValueError):
        guess.counts[0] = 1
    with pytest.raises(TypeError):
        guess.info["impact"] = 0.0
    with pytest.raises(ValueError, match=r"non-negative; index 1 is -1"):
        LabelGuess([0, -1], {})
    with pytest.raises(ValueError, match=r"integer counts; index 0 is 0.5"):
        LabelGuess([0.5, 1.0], {})
    with pytest.raises(ValueError, match=r"1-D"):
        LabelGuess([[1]], {})


def test_metrics_by_hand():
    # true {0, 1, 2}, guess {0, 0, 1}: overlap {0, 1}
    assert label_accuracy([2, 1, 0], [1, 1, 1]) == 2 / 3
    assert count_error([2, 1, 0], [1, 1, 1]) == 2
    assert label_accuracy([0, 3, 0], [0, 3, 0]) == 1.0 and count_error([0, 3], [0, 3]) == 0
    assert label_accuracy([3, 0], [0, 3]) == 0.0 and count_error([3, 0], [0, 3]) == 6


def test_metrics_equal_counter_multiset_arithmetic():
    rng = np.random.default_rng(0)
    for _ in range(300):
        c = int(rng.integers(1, 12))
        true = rng.integers(0, c, size=int(rng.integers(1, 40)))
        guess = rng.integers(0, c, size=int(rng.integers(0, 40)))
        t, g = Counter(true.tolist()), Counter(guess.tolist())
        tc, gc = label_counts(true, c), label_counts(guess, c)
        assert label_accuracy(gc, tc) == sum((t & g).values()) / len(true)
        assert count_error(gc, tc) == sum((t - g).values()) + sum((g - t).values())
        if len(guess) == len(true):
            assert count_error(gc, tc) == round(2 * len(true) * (1 - label_accuracy(gc, tc)))


def test_metric_input_checks():
    with pytest.raises(ValueError, match="got 3 and 2 classes"):
        label_accuracy([1, 0, 0], [1, 0])
    with pytest.raises(ValueError, match=r"true_counts must be non-negative; index 1 is -2"):
        count_error([1, 0], [1, -2])
    with pytest.raises(ValueError, match=r"guess_counts must hold integer counts; index 0"):
        label_accuracy([np.nan, 0], [1, 0])
    with pytest.raises(ValueError, match="dtype <U1"):
        label_accuracy(["a"], [1])
    with pytest.raises(ValueError, match="sums to 0"):
        label_accuracy([1, 0], [0, 0])
    assert count_error([1, 0], [0, 0]) == 1
    with pytest.raises(ValueError, match=r"labels must lie in \[0, 3\); index 2 is 3"):
        label_counts(np.array([0, 2, 3]), 3)
    with pytest.raises(ValueError, match="labels must be integers"):
        label_counts(np.array([0.0]), 3)


def _nearest_by_enumeration(raw, total, low):
    """Every composition of ``total`` into len(raw) parts >= low; the squared-distance
    minimum, ties to the lexicographically largest (the greedy's lowest-index rule gives
    units to lower indices first)."""
    best, best_d = None, None
    for cut in itertools.combinations(range(total + len(raw) - 1), len(raw) - 1):
        parts = np.diff([-1, *cut, total + len(raw) - 1]) - 1
        if np.any(parts < low):
            continue
        d = float(((parts - raw) ** 2).sum())
        if best_d is None or d < best_d - 1e-12:
            best, best_d = parts, d
    return best, best_d


def test_rounding_is_the_nearest_composition():
    rng = np.random.default_rng(1)
    for _ in range(200):
        k = int(rng.integers(1, 5))
        total = int(rng.integers(0, 7))
        raw = rng.normal(total / k, 1.5, size=k)
        low = (rng.random(k) < 0.3).astype(np.int64)
        if low.sum() > total:
            low[:] = 0
        got = round_counts(raw, total, low)
        _, best_d = _nearest_by_enumeration(raw, total, low)
        assert got.sum() == total and np.all(got >= low)
        assert float(((got - raw) ** 2).sum()) == pytest.approx(best_d, rel=0, abs=1e-9)
    assert round_counts(np.array([2.6, 0.3, -1.0, 1.2]), 4).tolist() == [3, 0, 0, 1]
    # the lower bound holds even where the raw count is far below it
    assert round_counts(np.array([3.9, -2.0]), 4, np.array([0, 1])).tolist() == [3, 1]
    with pytest.raises(ValueError, match="below the lower bounds"):
        round_counts(np.array([1.0, 1.0]), 1, np.array([1, 1]))


def test_greedy_allocation_raises_the_picked_score():
    # scores 0, 1; step 0.6: picks 0 (-> 0.6), 0 (-> 1.2), 1 (-> 1.6), 0
    assert allocate_greedily(np.array([0.0, 1.0]), 0.6, np.array([0, 0]), 4).tolist() == [3, 1]
    assert allocate_greedily(np.array([0.0, 1.0]), 0.6, np.array([2, 0]), 2).tolist() == [2, 0]


def _enumerated_chance(true_counts) -> float:
    """E[sum_c min(G_c, t_c)] by enumerating every sequence of n uniform draws (C^n of
    them, each of probability C^-n)."""
    import itertools

    t = np.asarray(true_counts)
    c, n = len(t), int(t.sum())
    total = 0.0
    for draw in itertools.product(range(c), repeat=n):
        g = np.bincount(draw, minlength=c)
        total += np.minimum(g, t).sum()
    return total / c ** n


@pytest.mark.parametrize("true_counts, expected", [
    ([1, 0, 0, 0, 0, 0, 0, 0, 0, 0], 0.1),  # one label in ten classes: a tenth of a label
    ([1, 1], 1.5),  # draws (a,a) (a,b) (b,a) (b,b): 1, 2, 2, 1 labels recovered
])
def test_chance_hits_by_hand(true_counts, expected):
    from attacks.label_leakage.registry import chance_hits

    assert chance_hits(np.array(true_counts)) == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize("true_counts", [[3, 0, 1], [2, 2, 0, 1], [0, 0, 4], [5, 1]])
def test_chance_hits_equals_the_enumerated_expectation(true_counts):
    from attacks.label_leakage.registry import chance_hits

    # float64 sums of at most 4^5 terms: agreement far inside 1e-12
    assert chance_hits(np.array(true_counts)) == pytest.approx(
        _enumerated_chance(true_counts), rel=1e-12)
    with pytest.raises(ValueError, match="non-negative integers"):
        chance_hits(np.array([1.0, 2.0]))

"""LiRA's augmented queries follow the local training (issue 41): ``attack.lira.augment =
"auto"`` queries the views training showed the models, an explicit choice of views no
model trained on is kept and warned of (stderr before any work, results.json ``warnings``),
and a choice within the training's views is silent."""

from __future__ import annotations

import subprocess
import sys

import pytest

from attacks.membership.augment import AUGMENTATIONS, trained_queries, untrained_queries
from fedaudit.audit.sets import attack_options, attack_warnings
from fedaudit.config import load_scenario

from tests.helpers.paths import ROOT

CIFAR = ["data.dataset='npz'", "data.path='x.npz'"]


@pytest.mark.parametrize("train, padding, expected", [
    ("none", 4, "none"), ("flip", 4, "flip"), ("flip+crop", 4, "flip+shift"),
    ("flip+crop", 2, "flip+shift"), ("flip+crop", 1, "flip"), ("my-plugin", 4, "none")])
def test_trained_queries_are_the_views_training_drew(train, padding, expected):
    assert trained_queries(train, padding) == expected


def test_untrained_queries_name_what_training_never_showed():
    assert untrained_queries("flip+shift", "flip+crop", 4) is None
    assert untrained_queries("flip", "flip+crop", 4) is None  # fewer views: all trained on
    assert untrained_queries("none", "none", 4) is None
    msg = untrained_queries("flip+shift", "none", 4)
    assert msg.startswith("attack.lira.augment = 'flip+shift' queries mirrored and shifted "
                          "views, which training (train.augment = 'none') never showed")
    assert msg.endswith("'auto' queries 'none'")
    assert "views shifted by 2 pixels" in untrained_queries("flip+shift", "flip", 4)
    assert "(padding 1)" in untrained_queries("flip+shift", "flip+crop", 1)
    for query in AUGMENTATIONS:  # every query set is warned of or not, never an error
        for train in ("none", "flip", "flip+crop"):
            untrained_queries(query, train, 4)


@pytest.mark.parametrize("sets, resolved, warned", [
    ([], "none", False),
    (["train.augment='flip+crop'"], "flip+shift", False),
    (["train.augment='flip'"], "flip", False),
    (["train.augment='flip+crop'", "train.augment_padding=1"], "flip", False),
    (["attack.lira.augment='flip+shift'"], "flip+shift", True),
    (["train.augment='flip'", "attack.lira.augment='flip+shift'"], "flip+shift", True),
    (["train.augment='flip+crop'", "attack.lira.augment='none'"], "none", False),
])
def test_the_scenario_resolves_auto_and_warns_of_untrained_views(sets, resolved, warned):
    s = load_scenario("cifar10-audit", [*CIFAR, *sets])
    assert s.attack.options["lira"]["augment"] == ("auto" if not any(
        "lira" in x for x in sets) else resolved)
    assert attack_options(s)["lira"]["augment"] == resolved
    assert bool(attack_warnings(s)) == warned
    off = load_scenario("cifar10-audit", [*CIFAR, *sets, "attack.enabled=false"])
    assert attack_warnings(off) == []  # no attack, nothing to warn of


def test_validate_prints_the_warning_on_stderr_and_still_passes(tmp_path):
    """The CLI warns before any work; validation still succeeds (exit 0)."""
    import numpy as np

    rng = np.random.default_rng(0)
    npz = tmp_path / "c.npz"
    np.savez(npz, x=rng.integers(0, 256, (600, 3, 8, 8), dtype=np.uint8),
             y=np.arange(600) % 10)
    out = subprocess.run([sys.executable, "-m", "fedaudit.cli", "validate", "cifar10-audit",
                          "--set", "data.dataset=npz", "--set", f"data.path={npz}",
                          "--set", "data.max_samples=600", "--set", "attack.reference.population=10",
                          "--set", "attack.reference.allow_smaller=true",
                          "--set", "attack.lira.augment=flip"],
                         capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert out.returncode == 0, out.stderr
    assert ("fedaudit: warning: attack.lira.augment = 'flip' queries mirrored views, which "
            "training (train.augment = 'none') never showed the models") in out.stderr

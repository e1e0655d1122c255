"""experiments/same_numbers.py: the refactor check finds every kind of difference and
ignores only what a rerun changes anyway."""

import importlib.util
import json

import numpy as np

from tests.helpers.paths import ROOT

spec = importlib.util.spec_from_file_location("same_numbers", ROOT / "experiments" / "same_numbers.py")
same = importlib.util.module_from_spec(spec)
spec.loader.exec_module(same)


def _run(tmp_path, name, results, score):
    d = tmp_path / name
    d.mkdir()
    (d / "results.json").write_text(json.dumps(results), encoding="utf-8")
    np.savez(d / "scores.npz", score=np.asarray(score, dtype=np.float64))
    return d


def test_reruns_are_the_same_and_every_change_is_found(tmp_path, capsys):
    base = {"model": {"auc": 0.5}, "rounds": [1, 2], "timing": {"total_seconds": 3.0},
            "scenario": {"data": {"path": "/a", "dataset": "npz"}}}
    rerun = dict(base, timing={"total_seconds": 9.0},
                 scenario={"data": {"path": "/b", "dataset": "npz"}})
    a = _run(tmp_path, "a", base, [0.1, 0.2])
    assert same.main(a, _run(tmp_path, "b", rerun, [0.1, 0.2])) == 0
    changed = dict(base, model={"auc": 0.5000000000000001}, rounds=[1], extra=1)
    assert same.main(a, _run(tmp_path, "c", changed, [0.1, 0.3])) == 1
    out = capsys.readouterr().out
    for fragment in ("/model/auc: 0.5 != 0.5000000000000001", "/rounds: length 2 != 1",
                     "/extra: only in B", "scores.npz score: differs", "4 differences"):
        assert fragment in out


def test_an_added_key_is_accepted_only_where_named_and_only_in_b(tmp_path, capsys):
    base = {"scenario": {"federation": {"rounds": 2}}, "model": {"auc": 0.5}}
    newer = {"scenario": {"federation": {"rounds": 2, "aggregation": "plain"}},
             "model": {"auc": 0.5}}
    a, b = _run(tmp_path, "a", base, [0.1]), _run(tmp_path, "b", newer, [0.1])
    assert same.main(a, b) == 1
    assert same.main(a, b, ("/scenario/federation/aggregation",)) == 0
    assert "aggregation: only in B (added, accepted)" in capsys.readouterr().out
    assert same.main(b, a, ("/scenario/federation/aggregation",)) == 1  # removed: never ok

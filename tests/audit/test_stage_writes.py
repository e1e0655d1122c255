"""What a stage writes to results.json is what it declares (fedaudit/audit/writes.py):
the path syntax and the check on hand-made results (every built-in stage and target kind
in real runs: e2e/test_stage_writes_runs.py)."""

from __future__ import annotations

import math

import pytest

from fedaudit.audit.writes import check_writes, parse_path, written_paths


def test_path_syntax():
    assert parse_path("attacks") == ("attacks",)
    assert parse_path("references.rmia_a") == ("references", "rmia_a")
    assert parse_path("clients[].attacks") == ("clients", "[]", "attacks")
    assert parse_path("quantization[]") == ("quantization", "[]")
    for bad in ("", "a..b", "a.[]", "[]", "a[0].b", "a b", "clients[].", 3):
        with pytest.raises(ValueError, match="path"):
            parse_path(bad)


def test_written_paths_are_as_deep_as_the_results_differ():
    before = {"clients": [{"client": 0, "gnq": {"x": 1.0}}, {"client": 1, "gnq": {"x": 2.0}}],
              "references": {"models": 2}, "gone": 1, "nan": math.nan,
              "warnings": [{"round": None, "message": "a"}]}
    after = {"clients": [{"client": 0, "gnq": {"x": 1.0}, "attacks": {"loss": {}}},
                         {"client": 1, "gnq": {"x": 3.0}}],
             "references": {"models": 2, "rmia_a": 0.3}, "nan": float("nan"),
             "warnings": [{"round": None, "message": "a"}, {"round": 2, "message": "b"}],
             "attacks": {"loss": {"auc": 0.5}}}
    # NaN is unchanged; an appended warning is no write
    assert written_paths(before, after) == ["clients[].attacks", "clients[].gnq.x",
                                            "references.rmia_a", "attacks", "gone"]
    assert written_paths(before, before) == []
    changed = {**before, "warnings": [{"round": None, "message": "changed"}]}
    assert written_paths(before, changed) == ["warnings[].message"]
    dropped = {**before, "warnings": []}
    assert written_paths(before, dropped) == ["warnings"]
    grown = {**before, "clients": before["clients"] + [{"client": 2}]}
    assert written_paths(before, grown) == ["clients"]


def test_check_writes_names_who_and_the_undeclared_path():
    before = {"clients": [{"client": 0}], "quantization": [{"quantizer": "fp32",
                                                            "attacks": {}}]}
    after = {"clients": [{"client": 0, "attacks": {}}],
             "quantization": [{"quantizer": "fp32", "attacks": {"loss": {"auc": 0.5}},
                               "client_auc": {"loss": [0.5]}}],
             "attacks": {}}
    declared = ("attacks", "clients[].attacks", "quantization[].attacks",
                "quantization[].client_auc")
    assert check_writes("stage 'x'", declared, before, after) == [
        "clients[].attacks", "quantization[].attacks.loss", "quantization[].client_auc",
        "attacks"]
    with pytest.raises(RuntimeError, match=r"^stage 'x' wrote results.json "
                                           r"'quantization\[\].client_auc', which its writes "
                                           r"do not declare \(declared: attacks, "
                                           r"clients\[\].attacks, quantization\[\].attacks\)"):
        check_writes("stage 'x'", declared[:3], before, after)
    with pytest.raises(RuntimeError, match=r"'clients\[\].attacks'.*declared: nothing"):
        check_writes("stage 'x'", (), before, after)
    # a declared key covers what is beneath it, not its siblings or its parent list
    assert check_writes("s", ("clients[]",), before, {**before, "clients": [{"client": 9}]}) \
        == ["clients[].client"]
    with pytest.raises(RuntimeError, match="'clients'"):
        check_writes("s", ("clients[].attacks",), before, {**before, "clients": []})

"""What a stage writes to results.json is what it declares (fedaudit/audit/writes.py):
the path syntax and the check on hand-made results, then real runs (through Flower + Ray)
that enable every built-in stage and every built-in target kind, recording what each wrote:
nothing undeclared (the run would stop), and every declared path written somewhere (no
stale declaration)."""

from __future__ import annotations

import math
from collections import defaultdict

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


@pytest.fixture()
def recorded(monkeypatch):
    """who (an audit stage, a target kind) -> every path it wrote, over the runs."""
    from fedaudit.audit.stages import attacks, base

    seen: dict[str, set[str]] = defaultdict(set)

    def recording(check):
        def wrapped(who, declared, before, after):
            written = check(who, declared, before, after)
            seen[who].update(written)
            return written
        return wrapped

    monkeypatch.setattr(base, "check_writes", recording(base.check_writes))
    monkeypatch.setattr(attacks, "check_writes", recording(attacks.check_writes))
    return seen


def _covered(declared: str, written: set[str]) -> bool:
    return any(w == declared or w.startswith((declared + ".", declared + "[]"))
               for w in written)


@pytest.mark.e2e
def test_every_built_in_stage_writes_what_it_declares(recorded, tmp_path):
    """Two small runs enable every built-in stage and target kind: digits with
    quantization, LiRA / RMIA references, the DP audit, Res-MIA and FedMIA on all four
    target kinds; a generated play with planted secrets."""
    from fedaudit.audit import STAGES, TARGETS
    from fedaudit.config import load_scenario
    from fedaudit.simulation.runner import run
    from test_text_e2e import write_play

    run(load_scenario("defense-none", [
        "federation.num_clients=4", "federation.rounds=2", "train.local_epochs=1",
        "audit.gnq.client=true", "audit.gnq.server=true",
        "audit.quantization.quantizers=['fp32','int4','binary']",
        "attack.methods=['resmia','loss','lira','rmia','fedmia']",
        "attack.targets=['global','quantized','rounds','clients']", "attack.rounds='all'",
        "attack.reference.models=2", "attack.reference.allow_smaller=true",
        "audit.dp.canaries=40"]), tmp_path / "digits")
    play = write_play(tmp_path / "play.txt")
    run(load_scenario("shakespeare-secrets", [
        "federation.num_clients=3", "federation.rounds=2", "train.local_epochs=1",
        "data.seq_len=32", "data.min_role_sequences=4", "attack.members_per_client=8",
        "canaries.clients=[0,1]", "canaries.count=1", "canaries.repeats=[1,8]",
        "canaries.references=6", "canaries.secret_length=3", f"data.path={play}"]),
        tmp_path / "text")

    def ours(obj):
        return type(obj).__module__.startswith("fedaudit.")

    builtin = {f"audit stage {name!r}": stage.writes for name, stage in STAGES.items()
               if ours(stage)}
    builtin.update({f"target kind {name!r}": kind.writes for name, kind in TARGETS.items()
                    if ours(kind)})
    assert set(builtin) <= set(recorded), set(builtin) - set(recorded)  # each one ran
    stale = {who: [d for d in declared if not _covered(d, recorded[who])]
             for who, declared in builtin.items()}
    assert not any(stale.values()), stale

"""What a stage writes to results.json is what it declares (fedaudit/audit/writes.py), in
real runs (through Flower + Ray) that enable every built-in stage and every built-in
target kind, recording what each wrote: nothing undeclared (the run would stop), and every
declared path written somewhere (no stale declaration)."""

from __future__ import annotations

from collections import defaultdict

import pytest


@pytest.fixture()
def recorded(malicious_secagg_run):
    """who (an audit stage, a target kind) -> every path it wrote, over the runs: the
    shared malicious-server run's (tests/e2e/conftest.py) and those of the test's own."""
    from tests.helpers.writes import recording_writes

    seen: dict[str, set[str]] = defaultdict(set)
    for who, paths in malicious_secagg_run[1].items():
        seen[who].update(paths)
    with recording_writes(seen):
        yield seen


def _covered(declared: str, written: set[str]) -> bool:
    return any(w == declared or w.startswith((declared + ".", declared + "[]"))
               for w in written)


def test_every_built_in_stage_writes_what_it_declares(recorded, tmp_path):
    """Three small runs enable every built-in stage and target kind: digits with
    quantization, LiRA / RMIA references, the DP audit, Res-MIA and FedMIA on all four
    target kinds, the attacks on one update (labels, reconstruction, property), the
    gradient-ascent server; the malicious server's imprint block through
    SecAgg+ (the session's shared run, ``malicious_secagg_run``); a generated play with
    planted secrets."""
    from fedaudit.audit import STAGES, TARGETS
    from fedaudit.config import load_scenario
    from fedaudit.simulation.runner import run

    from tests.helpers.plays import write_play

    run(load_scenario("defense-none", [
        "federation.num_clients=4", "federation.rounds=2", "train.local_epochs=1",
        "audit.gnq.client=true", "audit.gnq.server=true",
        "audit.quantization.quantizers=['fp32','int4','binary']",
        "attack.methods=['resmia','loss','lira','rmia','fedmia']",
        "attack.targets=['global','quantized','rounds','clients']", "attack.rounds='all'",
        "attack.reference.models=2", "attack.reference.allow_smaller=true",
        "audit.dp.canaries=40",
        # the attacks on updates, on client 0's round-1 update: labels only (its hundreds
        # of samples are above reconstruction.max_samples), reconstruction's entry still
        "reconstruction.enabled=true", "reconstruction.clients=[0]",
        "label_leakage.enabled=true", "label_leakage.clients=[0]",
        "reconstruction.iterations=5",
        # property inference on the same update (digits: mean pixel above 0.3 is about
        # half of them), and the gradient-ascent server at round 2
        "property_inference.enabled=true", "property_inference.clients=[0]",
        "property_inference.aux_samples=64", "property_inference.batches=2",
        "property_inference.brightness.above=0.3",
        "active_membership.enabled=true", "active_membership.targets=16"]),
        tmp_path / "digits")
    # the malicious server (its block changes the model: a run of its own) is the shared
    # run the fixture recorded
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

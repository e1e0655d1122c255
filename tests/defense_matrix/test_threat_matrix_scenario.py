"""The bundled ``threat-matrix`` scenario (issue 49): a federation that learns beside two
clients of one batch, so every family has something to attack.  Its data is CIFAR-10; the
plan and the partition are checked on the digits in its place (the same keys)."""

from __future__ import annotations

from fedaudit.data import build_federated_data
from fedaudit.defense_matrix import plan_matrix

DIGITS = ["data.dataset=digits", "data.max_samples=0"]


def test_the_small_clients_are_the_ones_reconstruction_attacks():
    plan = plan_matrix("threat-matrix", ["none"], DIGITS, check=False)
    main = next(r.scenario for r in plan.runs if r.role == "main")
    rec = main.stages["reconstruction"]
    d = build_federated_data(main)
    sizes = [len(c) for c in d.clients]
    assert len(sizes) == main.federation.num_clients == 12
    # the clients reconstruction attacks hold one batch it may rebuild; the others train
    # the model and are larger than any update it rebuilds (label leakage attacks them)
    assert all(sizes[c] == 4 <= rec["max_samples"] for c in rec["clients"])
    assert all(n > rec["max_samples"] for c, n in enumerate(sizes) if c not in rec["clients"])
    # an early, a middle and the last round, on each update and on the rounds' aggregates
    assert list(rec["rounds"]) == [1, main.federation.rounds // 2, main.federation.rounds]
    assert list(rec["on"]) == ["updates", "aggregate"]
    assert main.train.optimizer == "sgd"  # inversion unrolls SGD steps, not Adam's


def test_every_default_defense_and_both_servers_are_planned():
    plan = plan_matrix("threat-matrix", None, DIGITS, check=False)
    assert len(plan.defenses) == 6 and len(plan.runs) == 18
    ascent = next(r.scenario for r in plan.runs if r.role == "gradient-ascent")
    # the malicious server's run trains up to the middle round it attacks
    assert ascent.federation.rounds == ascent.stages["active_membership"]["round"] == 10
    secagg = next(r.scenario for r in plan.runs
                  if (r.defense, r.role) == ("secagg+", "main"))
    assert list(secagg.stages["reconstruction"]["on"]) == ["aggregate"]

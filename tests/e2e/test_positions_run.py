"""The attacker's positions in a run (Flower + Ray): the clients and rounds targets write
metrics per client and per round, the positions' summary and the report's section."""


def test_clients_and_rounds_targets_write_per_client_per_round_metrics(tmp_path):
    import fedaudit

    run = fedaudit.run("quickstart", out=tmp_path, progress=False, report=True, overrides=[
        "federation.num_clients=4", "federation.rounds=2", "data.max_samples=400",
        "train.local_epochs=1", "audit.gnq.client=false", "audit.quantization.enabled=false",
        "attack.methods=['loss','fedmia']", "attack.targets=['global','clients','rounds']",
        "attack.rounds='all'"])
    r = run.results
    sv = r["server_view"]
    assert len(sv["clients"]) == 4
    for c in sv["clients"]:
        assert set(c["rounds"]) == {"1", "2"}
        for per_round in c["rounds"].values():
            assert set(per_round) == {"loss", "fedmia"}  # 3 other clients: FedMIA runs
            assert 0.0 <= per_round["loss"]["auc"] <= 1.0
        assert "fedmia_combined" in c
    assert [x["round"] for x in r["round_attacks"]] == [1, 2]
    assert {p["position"] for p in r["attack_positions"]} == {"outsider", "insider",
                                                             "curious server"}
    targets = set(run.scores()["target"])
    assert {"global", "round:1", "round:2", "client-model:r1", "client-model:r2"} <= targets
    html = (run.dir / "report.html").read_text(encoding="utf-8")
    assert "curious server" in html

"""The reference attacks in a run (Flower + Ray): LiRA and RMIA on every target into
results.json, scores.npz and the report, the references cached; references trained on
the run's Ray actors and in the ServerApp's process give the same bits."""

import torch


def test_lira_and_rmia_run_on_every_target_into_results_scores_and_report(tmp_path):
    """A 2-client run with lira and rmia against the global model and two quantized
    releases: the same results.json keys, scores.npz rows and report as every attack, the
    references' cost recorded, and a second run trains none of them."""
    import fedaudit

    sets = ["federation.num_clients=2", "federation.rounds=2", "data.max_samples=400",
            "data.holdout_fraction=0.4", "data.test_fraction=0.3",
            "train.local_epochs=1", "audit.gnq.client=false",
            "audit.quantization.quantizers=['fp32','int4']",
            "attack.methods=['loss','lira','rmia']", "attack.reference.models=2"]
    run = fedaudit.run("quickstart", out=tmp_path / "runs", overrides=sets, progress=False,
                       report=True, cache=tmp_path / "cache")
    r = run.results
    ref = r["references"]
    assert (ref["models"], ref["mode"], ref["trained"], ref["from_cache"]) == (2, "offline", 2, 0)
    assert ref["split"]["population"] > 0 and ref["split"]["reference_pool"] > 0
    # the references trained on as many samples as the target, and RMIA's a was tuned
    assert ref["size_parity"] and ref["train_size"] == [ref["target_train_size"]] * 2
    assert r["attacks"]["rmia"]["a_tuned"] and r["attacks"]["rmia"]["a"] in [
        round(0.1 * i, 1) for i in range(11)]
    assert ref["rmia_a"] == r["attacks"]["rmia"]["a"] and ref["rmia_a_tuned"]
    assert not r["warnings"]
    for m in ("lira", "rmia"):
        assert 0.0 <= r["attacks"][m]["auc"] <= 1.0 and r["attacks"][m]["reference_models"] == 2
        assert all(m in c["attacks"] for c in r["clients"])
        assert all(m in q["attacks"] for q in r["quantization"])
    assert r["attacks"]["rmia"]["queries_per_sample"] > 1.0  # + the population queries
    scores = run.scores()
    assert {"global", "quantized:int4"} <= set(scores["target"])
    assert {"lira", "rmia"} <= set(scores["method"])
    html = (run.dir / "report.html").read_text(encoding="utf-8")
    assert "LiRA" in html and "RMIA" in html
    again = fedaudit.run("quickstart", out=tmp_path / "runs", overrides=sets, progress=False,
                         cache=tmp_path / "cache")
    assert (again.results["references"]["trained"],
            again.results["references"]["from_cache"]) == (0, 2)
    for m in ("loss", "lira", "rmia"):  # cached references: the same numbers
        for k in ("auc", "tpr_at_1pct_fpr", "queries_per_sample"):
            assert again.results["attacks"][m][k] == r["attacks"][m][k], (m, k)


def test_grid_and_driver_trained_references_are_identical(tmp_path):
    """The same references trained on the run's Ray actors (several at once) and in the
    ServerApp's process, one client after another: the same bits (CPU)."""
    import fedaudit

    sets = ["federation.num_clients=2", "federation.rounds=2", "data.max_samples=400",
            "data.holdout_fraction=0.4", "data.test_fraction=0.3", "train.local_epochs=1",
            "audit.gnq.client=false", "audit.quantization.enabled=false",
            "attack.targets=['global']", "attack.methods=['loss','lira','rmia']",
            "attack.reference.models=2", "federation.fraction_train=0.5"]
    states = {}
    for runtime in ("grid", "driver"):
        run = fedaudit.run("quickstart", out=tmp_path / "runs", progress=False,
                           overrides=[*sets, f"attack.reference.runtime={runtime}"],
                           cache=tmp_path / runtime)
        assert run.results["references"]["trained"] == 2
        files = sorted((tmp_path / runtime / "references").glob("*.pt"))
        states[runtime] = {f.name: torch.load(f, weights_only=True) for f in files}
    assert states["grid"].keys() == states["driver"].keys() and len(states["grid"]) == 2
    for name, a in states["grid"].items():
        b = states["driver"][name]
        assert all(torch.equal(a[k], b[k]) for k in a), name

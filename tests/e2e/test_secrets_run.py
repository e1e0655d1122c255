"""Planted secrets end to end through Flower + Ray: a generated play, secret-sharer
canaries in two clients, the secrets stage on the global model and the server's view,
results.json, the console line and the report section."""

import json

from tests.helpers.plays import write_play
from tests.helpers.runs import run_cli


def test_secrets_end_to_end(tmp_path):
    play = write_play(tmp_path / "play.txt")
    sets = ["federation.num_clients=3", "federation.rounds=2", "train.local_epochs=2",
            "data.seq_len=32", "data.min_role_sequences=4", "attack.members_per_client=8",
            "canaries.clients=[0,1]", "canaries.count=1", "canaries.repeats=[1,8]",
            "canaries.references=6", "canaries.secret_length=3", f"data.path={play}"]
    proc, run = run_cli("shakespeare-secrets", tmp_path, sets)
    res = json.loads((run / "results.json").read_text())
    secrets = res["secrets"]
    assert len(secrets) == 2 * 2 + 6  # 2 clients x 2 repeats values, 6 references
    assert [s["repeats"] for s in secrets] == [1, 8, 1, 8] + [0] * 6
    assert [s["client"] for s in secrets] == [0, 0, 1, 1] + [None] * 6
    assert len({s["secret"] for s in secrets}) == 10
    assert all(len(s["secret"]) == 3 and s["secret"].isdigit() for s in secrets)
    for s in secrets:
        assert 0 <= s["exposure"] <= 3 * 3.33 and isinstance(s["extracted"], bool)
        planted = s["client"] is not None
        assert (s["server_view"] is not None) == planted
        assert (s["gnq_percentile"] is not None) == planted
        if planted:
            assert 0 < s["gnq_percentile"] <= 100
    summ = res["secrets_summary"]
    assert summ["candidates"] == 1000 and summ["method"] == "exact: all 1000 candidates ranked"
    assert set(summ["global"]["mean_exposure"]) == {"0", "1", "8"}
    assert [c["client"] for c in summ["clients"]] == [0, 1]
    assert "secrets: mean exposure (bits) on the global model by repeats" in proc.stderr
    html = (run / "report.html").read_text()
    assert '<section id="secrets">' in html and "mean exposure by repeats" in html
    assert '<figure id="fig-secrets_exposure">' in html
    # the digits (and the template's 'b') joined the vocabulary: the corpus has none
    assert res["data"]["num_classes"] == len(set(play.read_text()) |
                                             set("my secret number is 0123456789"))

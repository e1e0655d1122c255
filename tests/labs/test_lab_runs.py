"""The labs' runs without a run (fedaudit.labs.runs): where lab 9 looks for its text, its
scenario file, the lab cache's key."""

from __future__ import annotations

import json

import pytest

from tests.helpers.paths import ROOT


def test_lab9_text_path_says_where_it_looked(tmp_path, monkeypatch):
    import fedaudit.labs.runs as runs

    monkeypatch.delenv(runs.TEXT_ENV, raising=False)
    monkeypatch.chdir(tmp_path)
    real_repo = runs._repo
    monkeypatch.setattr(runs, "_repo", lambda: tmp_path / "repo")
    with pytest.raises(FileNotFoundError,
                       match=r"no tinyshakespeare\.txt in .*FEDAUDIT_LAB_TEXT"):
        runs.text_path()
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "tinyshakespeare.txt").write_text("A:\nhello\n")
    assert runs.text_path() == (tmp_path / "data" / "tinyshakespeare.txt").resolve()
    play = tmp_path / "play.txt"
    play.write_text("B:\nworld\n")
    monkeypatch.setenv(runs.TEXT_ENV, str(play))  # the variable wins
    assert runs.text_path() == play.resolve()
    monkeypatch.setattr(runs, "_repo", real_repo)  # the scenario file: the repository's
    scenario, overrides = runs.secrets_target()
    assert overrides[-1] == f"data.path={json.dumps(str(play.resolve()))}"
    with pytest.raises(FileNotFoundError, match="no such text file"):
        runs.text_path(tmp_path / "absent.txt")


def test_lab9_scenario_is_the_repository_file():
    """From a source checkout the lab reads scenarios/shakespeare-secrets.toml next to the
    package (an installed package: the bundled copy), with repeats 1, 4 and 16 kept."""
    import tomllib

    from fedaudit.labs.runs import SECRETS_OVERRIDES, scenario_file

    path = scenario_file("shakespeare-secrets")
    assert path == ROOT / "scenarios" / "shakespeare-secrets.toml"
    raw = tomllib.loads(path.read_text(encoding="utf-8"))
    assert raw["canaries"]["repeats"] == [1, 4, 16] and raw["canaries"]["clients"] == [0, 1, 2]
    assert not any(o.startswith("canaries.repeats") or o.startswith("canaries.clients")
                   for o in SECRETS_OVERRIDES)


def test_lab_cache_key_ignores_the_folder_the_data_is_read_from(tmp_path, monkeypatch):
    from fedaudit.api import validate
    from fedaudit.labs.runs import cache_key

    keys = []
    for name in ("a", "b"):
        (tmp_path / name / "data").mkdir(parents=True)
        (tmp_path / name / "data" / "x.bin").write_bytes(b"same bytes")
        monkeypatch.chdir(tmp_path / name)
        keys.append(cache_key(validate("quickstart")))
    assert keys[0] == keys[1]
    (tmp_path / "b" / "data" / "x.bin").write_bytes(b"other bytes")  # other data: retrain
    assert cache_key(validate("quickstart")) != keys[0]

"""What a regular install gets (issue 38): setup.py's package discovery ships every package
folder of the checkout, and the labs' helpers need no checkout.  The wheel itself is built,
installed and run outside the checkout by .ci/wheel_check.sh (CI), not here."""

import runpy
from pathlib import Path

import pytest
import setuptools

from tests.helpers.paths import ROOT


def _package_folders() -> dict[str, Path]:
    """Every folder holding Python files under fedaudit/, attacks/ and strategies/, by the
    package name it must install as, and scenarios/ as fedaudit.scenarios."""
    folders = {"fedaudit.scenarios": ROOT / "scenarios"}
    for top in ("fedaudit", "attacks", "strategies"):
        for py in (ROOT / top).rglob("*.py"):
            if "__pycache__" not in py.parts:
                folder = py.parent
                folders[".".join(folder.relative_to(ROOT).parts)] = folder
    return folders


def test_setup_py_finds_every_package_folder(monkeypatch):
    """The package list setup.py hands to setuptools is exactly the checkout's package
    folders: a new sub-package ships without editing a list, and one without an
    ``__init__.py`` (which the editable install would still import) is named here."""
    seen: dict = {}
    monkeypatch.setattr(setuptools, "setup", lambda **kw: seen.update(kw))
    monkeypatch.chdir(ROOT)  # setuptools runs setup.py from the project folder
    runpy.run_path(str(ROOT / "setup.py"))
    folders = _package_folders()
    lacking = sorted(str(f.relative_to(ROOT)) for f in folders.values()
                     if not (f / "__init__.py").is_file())
    assert not lacking, f"folders with Python files but no __init__.py: {lacking}"
    assert sorted(seen["packages"]) == sorted(folders)
    assert "fedaudit.secrets" in seen["packages"]  # the one the hand list forgot


def test_pyproject_ships_fedaudit_scenarios_from_scenarios_folder():
    import tomllib

    tool = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]
    assert tool["setuptools"]["package-dir"] == {"fedaudit.scenarios": "scenarios"}
    assert tool["setuptools"]["package-data"] == {"fedaudit.scenarios": ["*.toml"]}
    assert "packages" not in tool["setuptools"]  # setup.py's discovery, not a hand list


def test_labs_helpers_without_a_checkout(tmp_path, monkeypatch):
    """Installed from a wheel (no checkout beside the package) the labs read the bundled
    scenario and look for lab 9's play only in ./ and ./data/."""
    import fedaudit.labs.runs as runs
    from fedaudit.config import bundled_scenarios

    monkeypatch.setattr(runs, "_repo", lambda: None)
    monkeypatch.delenv(runs.TEXT_ENV, raising=False)
    monkeypatch.chdir(tmp_path)
    assert runs.scenario_file("shakespeare-secrets") == bundled_scenarios()["shakespeare-secrets"]
    with pytest.raises(FileNotFoundError, match="no scenario 'absent': not bundled$"):
        runs.scenario_file("absent")
    with pytest.raises(FileNotFoundError) as err:
        runs.text_path()
    looked = str(err.value).split("; set")[0]
    assert looked == f"no tinyshakespeare.txt in {tmp_path}, {tmp_path / 'data'}"


def test_labs_find_the_checkout_beside_the_package():
    import fedaudit.labs.runs as runs

    assert runs._repo() == ROOT

"""The guide's promises about the command line: --version, --set values and blame,
paths relative to the scenario file, the command's exit (a run resumed from another
directory: tests/e2e/test_cli_resume.py)."""

import subprocess
import sys

import pytest

from fedaudit.cli import main
from fedaudit.config import ScenarioError, load_scenario, parse_override

from tests.helpers.npz_scenario import write_scenario_file


def test_version(capsys):
    import fedaudit

    with pytest.raises(SystemExit) as exc:
        main(["--version"])
    assert exc.value.code == 0
    assert capsys.readouterr().out.strip() == f"fedaudit {fedaudit.__version__}"


@pytest.mark.parametrize("raw, value", [
    ("data.path=/abs/x.npz", "/abs/x.npz"),
    ("data.path=~/x.npz", "~/x.npz"),
    ("data.path=./rel/x-1.npz", "./rel/x-1.npz"),
    ("data.partitioner=dirichlet", "dirichlet"),
    ('data.path="/quoted path/x.npz"', "/quoted path/x.npz"),
    ("train.lr=1e-3", 1e-3),
    ("attack.methods=['loss']", ["loss"]),
])
def test_set_values(raw, value):
    assert parse_override(raw)[2] == value


@pytest.mark.parametrize("raw", ["attack.methods=['loss'", "data.path=a b", "scenario.name=x=y"])
def test_set_values_meant_as_toml_must_parse(raw):
    with pytest.raises(ScenarioError, match="not valid TOML"):
        parse_override(raw)


def test_set_errors_blame_the_set_argument(capsys):
    with pytest.raises(ScenarioError) as exc:
        load_scenario("quickstart", ["federation.rounds=0"])
    assert str(exc.value).startswith("--set federation.rounds=0: federation.rounds = 0: ")
    assert main(["validate", "quickstart", "--set", "federation.rounds=0"]) == 2
    err = capsys.readouterr().err
    assert "--set federation.rounds=0" in err and "quickstart.toml" not in err


def test_relative_data_path_is_relative_to_the_scenario_file(tmp_path, monkeypatch):
    toml = write_scenario_file(tmp_path / "scratch")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    scenario = load_scenario(str(toml))
    assert scenario.data.path == str(tmp_path / "scratch" / "mine.npz")
    assert scenario.data.data_dir == str(elsewhere / "data")  # a default: the cwd
    # --set paths are the user's words on the command line: relative to the cwd
    assert load_scenario(str(toml), ["data.path=other.npz"]).data.path == \
        str(elsewhere / "other.npz")


# ---- the command's exit (fedaudit.cli.entry: os._exit after the exit handlers) ----------

_PATCHED = ("import fedaudit.cli as c\n"
            "def patched(args):\n{body}\n"
            "c.cmd_scenarios = patched\n"
            "c.entry(['scenarios'])\n")


def _entry_with(body: str, **kw) -> subprocess.Popen:
    code = _PATCHED.format(body="\n".join("    " + line for line in body.splitlines()))
    return subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, **kw)


def test_entry_keeps_exit_codes_and_every_line_written():
    p = _entry_with("print('\\n'.join(str(i) for i in range(20000)))\nreturn 3")
    out, err = p.communicate(timeout=120)
    assert p.returncode == 3 and err == ""
    assert out.splitlines() == [str(i) for i in range(20000)]  # flushed before os._exit


def test_entry_ends_quietly_when_the_reader_leaves_but_not_on_other_broken_pipes():
    p = _entry_with("for i in range(10**6):\n    print('x' * 50)\nreturn 0")
    p.stdout.read(10)
    p.stdout.close()  # like `fedaudit scenarios | head -c 10`
    assert p.wait(timeout=120) == 1
    assert p.stderr.read() == ""
    p = _entry_with("raise BrokenPipeError(32, 'a pipe of our own')")
    out, err = p.communicate(timeout=120)
    assert p.returncode == 1 and "Traceback" in err and "a pipe of our own" in err

"""The README's promises about the command line: --version, --set values and blame,
paths relative to the scenario file, --resume on a finished run."""

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from fedaudit.cli import main
from fedaudit.config import ScenarioError, load_scenario, parse_override


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


def _npz(path: Path, n: int = 120) -> None:
    rng = np.random.default_rng(0)
    y = np.arange(n) % 3
    x = (rng.random((n, 8, 8)) * 0.3 + y[:, None, None] / 3).clip(0, 1).astype(np.float32)
    np.savez(path, x=x, y=y)


def _scenario_file(folder: Path) -> Path:
    folder.mkdir()
    _npz(folder / "mine.npz")
    toml = folder / "mine.toml"
    toml.write_text('[scenario]\nname = "mine"\n[data]\ndataset = "npz"\npath = "mine.npz"\n'
                    '[federation]\nnum_clients = 2\nrounds = 1\n'
                    '[audit.quantization]\nquantizers = ["fp32", "int4"]\n'
                    '[attack]\nmethods = ["loss"]\n')
    return toml


def test_relative_data_path_is_relative_to_the_scenario_file(tmp_path, monkeypatch):
    toml = _scenario_file(tmp_path / "scratch")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    scenario = load_scenario(str(toml))
    assert scenario.data.path == str(tmp_path / "scratch" / "mine.npz")
    assert scenario.data.data_dir == str(elsewhere / "data")  # a default: the cwd
    # --set paths are the user's words on the command line: relative to the cwd
    assert load_scenario(str(toml), ["data.path=other.npz"]).data.path == \
        str(elsewhere / "other.npz")


def _cli(*args, cwd):
    return subprocess.run([sys.executable, "-m", "fedaudit.cli", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=600)


@pytest.mark.e2e
def test_run_dir_validates_and_resumes_from_another_directory(tmp_path):
    toml = _scenario_file(tmp_path / "scratch")
    first = _cli("run", "mine.toml", "--out", str(tmp_path / "runs"), "--no-report",
                 cwd=tmp_path / "scratch")
    assert first.returncode == 0, first.stderr[-3000:]
    run_dir = Path(first.stdout.strip().splitlines()[-1])
    assert run_dir.is_absolute()
    other = tmp_path / "other"
    other.mkdir()
    val = _cli("validate", str(run_dir / "scenario.toml"), cwd=other)
    assert val.returncode == 0, val.stderr

    # a finished run: --resume says so and changes nothing (no Ray, no rewrite)
    results = (run_dir / "results.json").read_bytes()
    log = (run_dir / "run.log").read_bytes()
    again = _cli("run", "--resume", str(run_dir), cwd=other)
    assert again.returncode == 0 and "already finished" in again.stderr
    assert Path(again.stdout.strip()) == run_dir
    assert (run_dir / "results.json").read_bytes() == results
    assert (run_dir / "run.log").read_bytes() == log
    assert not (run_dir / "report.html").exists()

    # interrupted after training (no results.json): resumes from another directory
    (run_dir / "results.json").unlink()
    resumed = _cli("run", "--resume", str(run_dir), "--no-report", cwd=other)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert (run_dir / "results.json").is_file()
    assert toml.exists()


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

"""Scenario schema, overrides and validation errors."""

import subprocess
import sys

import pytest

from fedaudit.config import (SCHEMA, ScenarioError, bundled_scenarios, defaults, from_toml, schema,
                             load_scenario, parse_override, to_toml, validate)


def write(tmp_path, text, name="s.toml"):
    p = tmp_path / name
    p.write_text(text)
    return str(p)


def test_bundled_scenarios_validate():
    """Every bundled scenario validates; one whose dataset reads a file the user names
    (``data.path``, e.g. the play of ``shakespeare-small``) is given a path."""
    import tomllib

    from fedaudit.data import DATASETS

    names = bundled_scenarios()
    assert "quickstart" in names
    for name, path in names.items():
        dataset = tomllib.loads(path.read_text()).get("data", {}).get("dataset", "digits")
        needs = DATASETS.meta(dataset).get("needs_path")
        s = load_scenario(name, ["data.path=play.txt"] if needs else [])
        assert s.scenario.name


def test_defaults_cover_schema_and_round_trip():
    s = validate({})
    assert set(s.sections()) == set(SCHEMA)
    assert from_toml(to_toml(s)) == s
    q = load_scenario("quickstart")
    assert from_toml(to_toml(q)) == q


@pytest.mark.parametrize("text, fragment", [
    ("[data]\ndatset = 'digits'\n", "unknown key 'data.datset'"),
    ("[dataa]\nx = 1\n", "unknown table [dataa]"),
    ("[federation]\nnum_clients = 'ten'\n", "wrong type, expected integer"),
    ("[federation]\nnum_clients = 0\n", "out of range, must be >= 1"),
    ("[federation]\nrounds = 2.5\n", "wrong type"),
    ("[data]\npartitioner = 'zipf'\n", "unknown choice; allowed: iid, dirichlet, pathological"),
    ("[data]\nalpha = 0\n", "must be > 0"),
    ("[train]\nlr = nan\n", "finite"),
    ("[train]\nlocal_epochs = true\n", "wrong type"),
    ("[audit.quantization]\nquantizers = ['int3']\n", "unknown quantizer 'int3'"),
    ("[audit.quantization]\ncheckpoints = 'first-3'\n", "'all' or 'last-N'"),
    ("[attack]\nmethods = ['loss', 'lira2']\n", "unknown choice 'lira2'"),
    ("[attack.resmia]\nsizes = [4, 4]\n", "strictly decrease"),
    ("[audit.gnq]\nlam_mode = 'scaled'\n", "allowed: absolute, relative"),
    ("[data]\nholdout_fraction = 0.5\ntest_fraction = 0.5\n", "must be < 0.95"),
    ("[data]\ndataset = 'npz'\n", "data.path is required"),
    ("[federation]\nnum_clients = 3\nmin_clients = 4\n", "min_clients"),
    ("[canaries]\ncount = 2\nclients = [12]\n", "client 12 does not exist"),
    ("[federation.client_resources]\nnum_cpus = 0\n", "must be > 0"),
    ("[federation.client_resources]\nnum_tpus = 1\n", "unknown key"),
    ("federation = 3\n", "must be a table"),
    ("[scenario]\nname = '../escape'\n", "may only contain"),
    ("not toml at all [", "not valid TOML"),
])
def test_validation_errors_name_the_key(tmp_path, text, fragment):
    with pytest.raises(ScenarioError) as exc:
        load_scenario(write(tmp_path, text))
    msg = str(exc.value)
    assert fragment in msg
    assert "\n" not in msg


def test_override_sets_key_absent_from_file(tmp_path):
    path = write(tmp_path, "[scenario]\nname = 'x'\n")
    s = load_scenario(path, ["federation.rounds=7", "audit.gnq.lam=0.5",
                             "data.partitioner=dirichlet", 'scenario.description="two words"',
                             "federation.client_resources.num_gpus=0.25",
                             "audit.quantization.quantizers=['int8', 'binary']"])
    assert s.federation.rounds == 7
    assert s.audit.gnq.lam == 0.5
    assert s.data.partitioner == "dirichlet"
    assert s.scenario.description == "two words"
    assert s.federation.client_resources.num_gpus == 0.25
    assert s.audit.quantization.quantizers == ("int8", "binary")


@pytest.mark.parametrize("text, fragment", [
    ("rounds=3", "expected section.key=value"),
    ("federation.rounds", "expected section.key=value"),
    ("federation.roundz=3", "unknown key 'federation.roundz'"),
    ("fed.rounds=3", "unknown table [fed]"),
    ("scenario.description=two words", "not valid TOML"),
])
def test_override_errors(text, fragment):
    with pytest.raises(ScenarioError, match=None) as exc:
        parse_override(text)
    assert fragment in str(exc.value)


def test_override_is_validated(tmp_path):
    with pytest.raises(ScenarioError, match="federation.rounds = 0"):
        load_scenario(write(tmp_path, ""), ["federation.rounds=0"])


def test_unknown_scenario_lists_bundled():
    with pytest.raises(ScenarioError, match="bundled: .*quickstart"):
        load_scenario("no-such-scenario")


def test_float_fields_accept_integers():
    s = validate({"train": {"lr": 1}})
    assert s.train.lr == 1.0 and isinstance(s.train.lr, float)


def test_cli_bad_input_one_line_exit_2_nothing_written(tmp_path):
    bad = write(tmp_path, "[federation]\nnum_clients = -1\n")
    out = tmp_path / "out"
    for cmd in (["run", bad, "--out", str(out)], ["validate", bad],
                ["run", "quickstart", "--out", str(out), "--set", "train.optimizer=rmsprop"],
                ["run", "quickstart", "--out", str(out), "--set", "nonsense"],
                ["run", str(tmp_path / "missing.toml"), "--out", str(out)],
                ["frobnicate"]):
        proc = subprocess.run([sys.executable, "-m", "fedaudit.cli", *cmd], capture_output=True,
                              text=True, timeout=120)
        assert proc.returncode == 2, (cmd, proc.stderr)
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1, (cmd, proc.stderr)
        assert "Traceback" not in proc.stderr
        assert proc.stdout == ""
    assert not out.exists()


def test_cli_validate_ok():
    proc = subprocess.run([sys.executable, "-m", "fedaudit.cli", "validate", "quickstart"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "quickstart: ok" in proc.stdout


def test_defaults_are_valid_values():
    # every default must itself pass validation (a bad default would hide in every run)
    validate(defaults())


def test_typed_tables_hold_exactly_the_schema_keys():
    """Each dataclass of fedaudit.scenario has one field per key of its table (the nested
    sub-tables and the plug-in options aside), so a key added to the schema and not to
    the typed config (or the reverse) fails here."""
    import dataclasses

    from attacks import ATTACKS
    from fedaudit.scenario import TABLES

    from fedaudit.defenses import DEFENSES

    sch = schema()
    plugin_tables = {f"attack.{n}" for n in ATTACKS.names() if ATTACKS.meta(n).get("options")}
    assert set(TABLES) == set(sch) - plugin_tables
    for table, cls in TABLES.items():
        fields = {f.name for f in dataclasses.fields(cls)
                  if f.name not in ("client_resources", "init_args", "options", "reference")}
        keys = {"kind"} if table == "defense" else set(sch[table])
        assert fields == keys, table
    declared = {k for kind in DEFENSES.names() for k in DEFENSES.get(kind).options}
    assert set(sch["defense"]) == {"kind"} | declared == {"kind", "noise_multiplier",
                                                           "clip_norm", "delta"}


def test_scenario_is_typed_frozen_and_round_trips_its_sections():
    import dataclasses

    s = load_scenario("quickstart", ["attack.resmia.steps=3", "defense.kind=dp-sgd"])
    assert s.attack.options["resmia"]["steps"] == 3 and s.defense.kind == "dp-sgd"
    assert s.federation.client_resources.num_cpus == 1
    assert s.audit.quantization.quantizers[0] == "fp32"
    with pytest.raises(dataclasses.FrozenInstanceError):
        s.train.lr = 1.0  # type: ignore[misc]
    with pytest.raises(TypeError):
        s.attack.options["resmia"]["steps"] = 4  # type: ignore[index]
    assert validate(s.sections()) == s
    assert s.federation.sampled_clients() == (10, 10)
    assert load_scenario("quickstart", ["federation.fraction_train=0.25"]) \
        .federation.sampled_clients() == (2, 2)



def _literal_choices(schema: dict) -> list[str]:
    """Choices a bare --set word could not give: spelled true, false, inf, nan or a number
    (TOML reads those as booleans and numbers)."""
    bad = []
    for table, fields in schema.items():
        for key, f in fields.items():
            for c in (f.choices, f.item_choices):
                for choice in (c() if callable(c) else c) or ():
                    text = str(choice)
                    try:
                        float(text)  # numbers, inf, nan
                    except ValueError:
                        if text.lower() not in ("true", "false"):
                            continue
                    bad.append(f"{table}.{key}: {text!r}")
    return bad


def test_no_choice_is_spelled_like_a_toml_literal():
    import fedaudit.config

    assert _literal_choices(fedaudit.config.schema()) == []


def test_the_literal_check_catches_what_it_warns_about():
    from fedaudit.options import option

    schema = {"t": {"k": option(str, "a", "h", choices=("a", "true", "1e3", "nan")),
                    "l": option(list, [], "h", item_choices=lambda: ("False", "b", "-2"))}}
    assert _literal_choices(schema) == ["t.k: 'true'", "t.k: '1e3'", "t.k: 'nan'",
                                        "t.l: 'False'", "t.l: '-2'"]

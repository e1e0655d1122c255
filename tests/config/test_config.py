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


def _bundled():
    """Every bundled scenario, loaded (one whose dataset reads a file gets a path)."""
    import tomllib

    from fedaudit.data import DATASETS

    for name, path in sorted(bundled_scenarios().items()):
        dataset = tomllib.loads(path.read_text()).get("data", {}).get("dataset", "digits")
        needs = DATASETS.meta(dataset).get("needs_path")
        yield load_scenario(name, ["data.path=play.txt"] if needs else [])


def test_bundled_scenarios_validate():
    """Every bundled scenario validates; one whose dataset reads a file the user names
    (``data.path``, e.g. the play of ``shakespeare-small``) is given a path."""
    assert "quickstart" in bundled_scenarios()
    for s in _bundled():
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
    ("[model]\nlayers = 0\n", "model.layers = 0: out of range, must be >= 1 and <= 64"),
    ("[data]\nimage_size = -1\n", "data.image_size = -1: out of range, must be >= 0"),
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
                ["validate", "quickstart", "--set", "model.heads=0"],
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


def _typed(s, table: str, key: str):
    """``[table] key`` read the way code reads it: an attribute of the typed table, of an
    attack's or aggregator's options, or of an audit stage's table."""
    from fedaudit.scenario import TABLES

    if table in TABLES:
        node = s
        for part in table.split("."):
            node = getattr(node, part)
        return getattr(node, key)
    if table.startswith("attack."):
        return s.attack.options[table.split(".", 1)[1]][key]
    if table.startswith("federation."):
        return s.federation.options[table.split(".", 1)[1]][key]
    return s.stages[table][key]


def _listed(value):
    return list(value) if isinstance(value, tuple) else value


def test_the_typed_scenario_and_the_schema_are_one_declaration():
    """The views derived from the dataclasses agree: every bundled scenario's sections
    list the schema's tables and keys in the schema's order, round-trip through
    validation, and every schema key reaches the typed scenario with its value."""
    sch = schema()
    scenarios = list(_bundled())
    assert len(scenarios) == len(bundled_scenarios()) > 5
    for s in scenarios:
        sections = s.sections()
        assert list(sections) == list(sch), s.name
        for table, fields in sch.items():
            assert list(sections[table]) == list(fields), (s.name, table)
            for key in fields:
                assert _listed(_typed(s, table, key)) == sections[table][key], (table, key)
        assert validate(sections) == s and from_toml(to_toml(s)) == s


def test_defaults_are_the_declared_defaults():
    """defaults() (the schema's) and the dataclasses' own defaults are one declaration; the
    plug-in keys of [data], [model] and [defense] are the registered entries' options."""
    import dataclasses

    from fedaudit.data import DATASETS
    from fedaudit.defenses import DEFENSES
    from fedaudit.models import MODELS
    from fedaudit.scenario import TABLES, Scenario
    from fedaudit.scenario.declare import table_keys

    d = defaults()
    assert Scenario.from_sections(d).sections() == d
    for table, cls in TABLES.items():
        own = {f.name: _listed(getattr(cls(), f.name)) for f in dataclasses.fields(cls)
               if f.name in table_keys(cls)}
        assert own == {k: v for k, v in d[table].items() if k in own} and own, table
    declared = {"data": {k for n in DATASETS for k in DATASETS.meta(n)["options"]},
                "model": {k for n in MODELS for k in MODELS.meta(n)["options"]},
                "defense": {k for n in DEFENSES.names() for k in DEFENSES.get(n).options}}
    assert declared == {"data": {"image_size", "seq_len", "min_role_sequences"},
                        "model": {"layers", "heads"},
                        "defense": {"noise_multiplier", "clip_norm", "delta", "keep"}}
    for table, keys in declared.items():
        assert set(d[table]) == set(table_keys(TABLES[table])) | keys, table
    s = validate({})
    assert (s.data.seq_len, s.data.image_size, s.model.layers, s.model.heads) == (80, 0, 2, 4)
    assert s.defense.clip_norm == s.defense.options["clip_norm"] == 1.0
    with pytest.raises(AttributeError, match="ModelConfig has no key 'depth'"):
        s.model.depth  # noqa: B018


def test_declaring_the_scenario_imports_no_plug_in_package():
    """The tables name registry choices lazily: importing fedaudit.scenario (and reading
    its declarations) imports neither torch nor a registry's package; the choices are the
    names registered when asked."""
    code = ("import sys; from fedaudit.scenario import DataConfig; "
            "from fedaudit.scenario.declare import table_keys; "
            "f = table_keys(DataConfig)['dataset']; "
            "print(sorted(m for m in ('torch', 'numpy', 'fedaudit.data') if m in sys.modules)); "
            "import fedaudit.data; print('digits' in f.choices())")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split("\n")[:2] == ["[]", "True"]


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


@pytest.fixture()
def ext_model():
    """A model registered from outside the package, with an option of its own: the only
    file a new model option touches."""
    from torch import nn

    from fedaudit.models import MODELS, register_model
    from fedaudit.options import option

    @register_model("ext-deep-mlp", options={
        "depth": option(int, 2, "ext-deep-mlp: hidden layers", min=1, max=8)})
    def deep_mlp(in_channels, image_size, num_classes, width=16, *, depth):
        hidden = [m for _ in range(depth - 1) for m in (nn.Linear(width, width), nn.ReLU())]
        return nn.Sequential(nn.Flatten(), nn.Linear(in_channels * image_size ** 2, width),
                             nn.ReLU(), *hidden, nn.Linear(width, num_classes))

    yield
    MODELS.unregister("ext-deep-mlp")


def test_a_model_option_declared_outside_the_package_is_a_scenario_key(ext_model):
    """The option joins [model] (schema, defaults, --set), is validated like any key, reaches
    the typed scenario and scenario.toml, and the builder gets it."""
    from torch import nn

    from fedaudit.data import build_federated_data
    from fedaudit.models import model_for

    f = schema()["model"]["depth"]
    assert (f.types, f.default, f.min, f.max) == ((int,), 2, 1, 8)
    assert defaults()["model"] == {"name": "cnn", "width": 16, "layers": 2, "heads": 4,
                                   "depth": 2}
    s = load_scenario("quickstart", ["model.name=ext-deep-mlp", "model.depth=3"])
    assert s.model.depth == s.model.options["depth"] == 3 and s.model.layers == 2
    assert s.sections()["model"] == {"name": "ext-deep-mlp", "width": 16, "layers": 2,
                                     "heads": 4, "depth": 3}
    assert "depth = 3" in to_toml(s) and from_toml(to_toml(s)) == s
    model = model_for(s.model, build_federated_data(s), seed=0)
    assert sum(isinstance(m, nn.Linear) for m in model.modules()) == 1 + 2 + 1
    with pytest.raises(ScenarioError, match=r"^--set model.depth=0: model.depth = 0: out of "
                                            r"range, must be >= 1 and <= 8$"):
        load_scenario("quickstart", ["model.name=ext-deep-mlp", "model.depth=0"])
    with pytest.raises(ScenarioError, match=r"^scenario: model.depth = 'deep': wrong type, "
                                            r"expected integer$"):
        validate({"model": {"depth": "deep"}})


def test_model_options_are_fields_declared_once(ext_model):
    """A registered option must be a Field; a key two models declare must be declared
    identically, and none may shadow a key of [model] itself."""
    from fedaudit.models import MODELS, register_model
    from fedaudit.options import option

    with pytest.raises(TypeError, match="model 'ext-bad': option 'depth' must be a "
                                        "fedaudit.options.Field"):
        register_model("ext-bad", options={"depth": 3})(lambda *a, **k: None)
    assert "ext-bad" not in MODELS
    for options, message in [
            ({"depth": option(int, 4, "other depth")},
             r"model 'ext-other': option 'depth' clashes with another model's declaration "
             r"of \[model\] depth"),
            ({"width": option(int, 4, "width")},
             r"model 'ext-other': option 'width' clashes with the declared key \[model\] "
             r"width")]:
        register_model("ext-other", options=options)(lambda *a, **k: None)
        try:
            with pytest.raises(ScenarioError, match=message):
                schema()
        finally:
            MODELS.unregister("ext-other")
    assert "depth" in schema()["model"]

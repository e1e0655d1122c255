"""What the driver carries to the simulated clients: only the user's registrations, and a
ClientApp that pickles small (Flower's Ray backend pickles it with every client call)."""

from __future__ import annotations

import pytest
import torch.nn as nn
from ray import cloudpickle

from fedaudit.gnq.kernels import KERNELS, conv_kernel, linear_kernel, register_kernel
from fedaudit.simulation.client import FedauditClientApp
from fedaudit.simulation.plugins import RegisterPlugins, client_app_with_plugins, user_plugins


def test_builtin_registrations_are_not_carried():
    # the built-in GNQ kernels are keyed by torch's layer types: not user code
    assert user_plugins() == []
    assert client_app_with_plugins([]).extra_mods == ()


class UserLinear(nn.Linear):
    pass


@pytest.fixture(params=[UserLinear, nn.Conv3d])
def user_kernel(request):
    # a user's layer type, and a torch type fedaudit has no kernel for, both with a
    # built-in kernel function: nothing in them is user code, yet a worker lacks them
    key = request.param
    assert key not in KERNELS
    register_kernel(key)(conv_kernel if key is nn.Conv3d else linear_kernel)
    yield key
    KERNELS.unregister(key)


def test_a_kernel_registered_by_the_user_is_carried(user_kernel):
    entries = user_plugins()
    assert [(e.registry, e.module, e.key) for e in entries] == [
        ("GNQ kernel", "fedaudit.gnq.registry", user_kernel)]
    app = client_app_with_plugins(entries)
    assert isinstance(app.extra_mods[0], RegisterPlugins)


def test_the_client_app_pickles_as_its_mods():
    app = client_app_with_plugins([])

    def load():  # what Flower's simulation sends with each call
        return app

    blob = cloudpickle.dumps(load)
    # by value, with the closures of Flower's decorators, it was 80 kB
    assert len(blob) < 4096, len(blob)
    again = cloudpickle.loads(blob)()
    assert isinstance(again, FedauditClientApp) and again.extra_mods == ()
    # its train handler and, in simulation only, the audit's update jobs
    assert list(again._registered_funcs) == ["train.default", "query.update_attack"]
    from fedaudit.simulation.client import client_app  # the deployed one: training only

    assert list(client_app._registered_funcs) == ["train.default"]


def test_a_client_validating_its_scenario_imports_no_scipy_or_sklearn():
    # every client actor imports the ClientApp and validates the scenario it receives (the
    # schema reads the stage and target registries); scikit-learn and scipy.stats/optimize
    # cost about a second of each actor's start-up and only the driver's audit needs them
    import subprocess
    import sys

    code = ("import sys, fedaudit.simulation.client\n"
            "from fedaudit.config import load_scenario\n"
            "load_scenario('quickstart')\n"
            "print(sorted(m for m in ('sklearn', 'scipy.stats', 'scipy.optimize') "
            "if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.strip().splitlines()[-1]
    assert out == "[]"


def _guess_all_first(case):  # a user's label attack (pickled by value: defined in a test)
    from attacks.label_leakage import LabelGuess

    return LabelGuess([case.training.num_examples] + [0] * (case.num_classes - 1), {})


def test_every_loaded_registry_is_carried_and_found_in_a_fresh_process(tmp_path):
    """Registries outside the scenario's (label and reconstruction attacks, augmentations,
    DP audit levels) were once left behind, so an update job on an actor could not find a
    notebook's attack.  A fresh interpreter that has imported nothing of them unpickles the
    mod and runs it: the entry lands in the registry its module defines."""
    import subprocess
    import sys

    from attacks.label_leakage import LABEL_ATTACKS, register_label_attack
    from fedaudit.registry import loaded_registries

    from fedaudit.simulation.plugins import user_plugins as carried

    kinds = {r.kind for r in loaded_registries()}
    assert {"label attack", "reconstruction", "augmentation", "DP audit level",
            "aggregator", "GNQ kernel"} <= kinds
    register_label_attack("test-all-first")(_guess_all_first)
    try:
        (entry,) = carried()
    finally:
        LABEL_ATTACKS.unregister("test-all-first")
    assert (entry.registry, entry.module) == ("label attack", "attacks.label_leakage.registry")
    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    try:
        (tmp_path / "mod.pkl").write_bytes(cloudpickle.dumps(RegisterPlugins([entry])))
    finally:
        cloudpickle.unregister_pickle_by_value(sys.modules[__name__])
    code = ("import sys\n"
            "from ray import cloudpickle\n"
            "mod = cloudpickle.loads(open(sys.argv[1], 'rb').read())\n"
            "before = 'attacks.label_leakage.registry' in sys.modules\n"
            "mod(None, None, lambda msg, ctx: None)\n"
            "from attacks.label_leakage import LABEL_ATTACKS\n"
            "print(before, LABEL_ATTACKS.get('test-all-first').__name__)")
    out = subprocess.run([sys.executable, "-c", code, str(tmp_path / "mod.pkl")],
                         capture_output=True, text=True, check=True).stdout.split()[-2:]
    assert out == ["False", "_guess_all_first"]

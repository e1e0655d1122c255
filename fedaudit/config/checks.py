"""Constraints that involve several keys of a validated scenario (the schema checks each
key on its own).  What a registered defense, audit stage or attack target requires is
asked of it (``check(scenario)``), and so is the aggregator (``federation.strategy``) of
its options, so these functions hold only the federation's own rules.
"""

from __future__ import annotations

from attacks.membership.registry import attack_data
from fedaudit.aggregators import options_of
from fedaudit.config.schema import registries
from fedaudit.errors import ScenarioError
from fedaudit.scenario import Scenario


def check_cross(s: Scenario, source: str) -> None:
    """Constraints that involve several keys."""
    d, fed = s.data, s.federation
    regs = registries()
    if d.holdout_fraction + d.test_fraction >= 0.95:
        raise ScenarioError(f"{source}: data.holdout_fraction + data.test_fraction = "
                            f"{d.holdout_fraction + d.test_fraction:g}: must be < 0.95 "
                            "so clients keep training data")
    if regs.datasets.meta(d.dataset).get("needs_path") and not d.path:
        raise ScenarioError(f"{source}: data.path is required when data.dataset = "
                            f"{d.dataset!r}")
    _check_text(s, source)
    if fed.min_clients > fed.num_clients:
        raise ScenarioError(f"{source}: federation.min_clients = {fed.min_clients}: must be "
                            f"<= federation.num_clients ({fed.num_clients})")
    caps = d.client_samples
    if not isinstance(caps, int) and len(caps) != fed.num_clients:
        raise ScenarioError(f"{source}: data.client_samples lists {len(caps)} caps for "
                            f"federation.num_clients = {fed.num_clients}; allowed: one number "
                            "for every client, or one per client")
    bad = [c for c in s.canaries.clients if not 0 <= c < fed.num_clients]
    if s.canaries.count and bad:
        raise ScenarioError(f"{source}: canaries.clients = {list(s.canaries.clients)!r}: "
                            f"client {bad[0]} does not exist; allowed: "
                            f"0..{fed.num_clients - 1}")
    malicious = [k for k, srv in regs.servers.items() if srv.malicious and srv.active(s)]
    if len(malicious) > 1:
        raise ScenarioError(f"{source}: the malicious servers {', '.join(malicious)} are all "
                            "switched on; a run has one server: turn all but one off")
    aggregator = regs.aggregators.get(fed.strategy)
    problem = aggregator.check(s, options_of(s)) or regs.defenses.get(s.defense.kind).check(s)
    if problem:
        raise ScenarioError(f"{source}: {problem}")
    for stage in regs.ordered_stages():
        problem = stage.check(s) if stage.enabled(s) else None
        if problem:
            raise ScenarioError(f"{source}: {problem}")
    from fedaudit.audit.probing import check_server_view

    problem = check_server_view(s)  # what the probes read, against what the server sees
    if problem:
        raise ScenarioError(f"{source}: {problem}")
    rounds = s.attack.rounds
    if not isinstance(rounds, str) and max(rounds) > fed.rounds:
        raise ScenarioError(f"{source}: attack.rounds = {list(rounds)!r}: round {max(rounds)} "
                            f"does not exist; allowed: 1..{fed.rounds}")
    if s.train.device == "cuda" and fed.client_resources.num_gpus == 0:
        raise ScenarioError(f"{source}: train.device = 'cuda' needs "
                            "federation.client_resources.num_gpus > 0")


def _check_text(s: Scenario, source: str) -> None:
    """Text data needs a model of token sequences (and the reverse), ``speaker`` needs
    text data, the model's own check must pass (``register_model(check=...)``: a
    transformer's heads must divide its width), and every listed attack must
    score the data's kind (its ``data=`` at registration: Res-MIA erodes images, LiRA,
    RMIA and FedMIA use class confidences, zlib decodes text); ``train.augment`` needs
    images."""
    regs = registries()
    datasets, models, attacks = regs.datasets, regs.models, regs.attacks
    d, m = s.data, s.model
    text = datasets.meta(d.dataset).get("kind") == "text"
    tokens = models.meta(m.name).get("inputs") == "tokens"
    if text != tokens:
        fits = [n for n in models.names() if (models.meta(n).get("inputs") == "tokens") == text]
        raise ScenarioError(f"{source}: model.name = {m.name!r}: data.dataset = {d.dataset!r} "
                            f"is {'text' if text else 'images'}; allowed: {', '.join(fits)}")
    if d.partitioner == "speaker" and not text:
        raise ScenarioError(f"{source}: data.partitioner = 'speaker' needs text data with "
                            f"speaker roles (e.g. data.dataset = 'shakespeare'), not "
                            f"{d.dataset!r}")
    check = models.meta(m.name).get("check")
    problem = check(m) if check is not None else None
    if problem:  # what the model itself requires of [model] (register_model(check=...))
        raise ScenarioError(f"{source}: {problem}")
    if text and s.train.augment != "none":
        raise ScenarioError(f"{source}: train.augment = {s.train.augment!r} augments images; "
                            f"data.dataset = {d.dataset!r} is text; allowed: none")
    kind = "text" if text else "image"
    wrong = [n for n in s.attack.methods if kind not in attack_data(n)] if s.attack.enabled \
        else []
    if wrong:
        fits = sorted(n for n in attacks.names() if kind in attack_data(n))
        raise ScenarioError(f"{source}: attack.methods lists {', '.join(map(repr, wrong))}, "
                            f"which score{'s' if len(wrong) == 1 else ''} "
                            f"{' and '.join(attack_data(wrong[0]))} data only; data.dataset "
                            f"= {d.dataset!r} is {kind}; allowed: {', '.join(fits)}")
    can = s.canaries
    if can.count and (can.kind == "secret") != text:
        allowed = "secret" if text else "mislabeled, noise"
        raise ScenarioError(f"{source}: canaries.kind = {can.kind!r}: data.dataset = "
                            f"{d.dataset!r} is {'text' if text else 'images'}; allowed: "
                            f"{allowed}")

"""The pipeline null (issue 57, item 8b): federations in which nothing can leak, through
``fedaudit run`` and ``fedaudit matrix`` (the Python API: the plug-ins below are registered
from outside the package, as a user registers hers), every cell of which must read "no
leak beyond delta" or "inconclusive".

* **Membership**: the defense ``untrained`` (registered here) makes each client send back
  the model it received: the global model stays its initialisation, so every sample the
  attacks call a member is one the model never trained on (members and non-members are
  exchangeable for every position: released model, every round's model, each client's).
* **Label leakage**: the attack ``data-free-spread`` spreads the reply's ``num_examples``
  evenly over the classes without reading the update.
* **Reconstruction**: the attack ``prior-image`` returns the train split's mean image (the
  data-free prior the SSIM gain is measured against) for every sample.

    python experiments/pipeline_null.py [--scenario NAME] [--out DIR] [--set KEY=VALUE ...]

Default: ``reconstruction-digits`` (4 clients of 4 digits, one round) under ``untrained``
and under ``untrained-secagg+`` (a preset registered here: the same through SecAgg+).
Prints each cell and its verdict, and exits 1 if any reads "leaks".
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

#: the verdicts a null may show
ALLOWED = ("no leak beyond delta", "inconclusive")


def register_null_plugins(prior: np.ndarray) -> None:
    """The three null plug-ins of the module docstring, registered from outside the
    package (``prior``: the train split's mean image, what ``prior-image`` returns)."""
    from attacks.label_leakage import LabelGuess, register_label_attack
    from attacks.reconstruction.registry import Reconstruction, register_reconstruction
    from fedaudit.defenses import register_defense
    from fedaudit.defenses.none import NoDefense
    from fedaudit.defenses.presets import DefensePreset, register_preset

    @register_defense(replace=True)
    class Untrained(NoDefense):
        kind = "untrained"
        server_sees = "the model it sent, sent back unchanged"

        def client_update(self, cfg, start, trained):
            return {k: v.clone() for k, v in start.items()}

    register_preset(DefensePreset("untrained-secagg+", "untrained, through SecAgg+",
                                  ("defense.kind=untrained", "federation.aggregation=secagg+")),
                    replace=True)

    def data_free_spread(case):
        n, c = case.training.num_examples, case.num_classes
        counts = np.full(c, n // c, dtype=np.int64)
        counts[: n % c] += 1
        return LabelGuess(counts, {"reads the update": False})

    register_label_attack("data-free-spread", label="data-free spread",
                          replace=True)(data_free_spread)

    image = np.asarray(prior, dtype=np.float32)

    def prior_image(case, *, num_samples, labels, budget, seed):
        images = np.repeat(image[None], num_samples, axis=0)
        return Reconstruction(images, np.asarray(labels, dtype=np.int64), 0.0, 0,
                              {"reads the update": False})

    register_reconstruction("prior-image", label="the prior image",
                            replace=True)(prior_image)


def null_sets(extra: list[str]) -> list[str]:
    """The scenario keys that put the null attacks in place of the real ones."""
    return ["label_leakage.methods=['data-free-spread']",
            "reconstruction.methods=['prior-image']", "reconstruction.labels=guess",
            "matrix.servers=[]", *extra]


def cells(doc: dict) -> list[tuple[str, str, str, str, str]]:
    """(defense, position, family, verdict, text) of every measured cell of matrix.json."""
    out = []
    for d in doc["defenses"]:
        for pos, row in (d.get("cells") or {}).items():
            for fam, c in row.items():
                if fam != "sees" and c.get("status") == "measured":
                    summary = (c.get("detail") or {}).get("summary") or c.get("verdict")
                    out.append((d["name"], pos, fam, str(c.get("verdict")),
                                f"{c['text']} -- {summary}"))
    return out


def main(argv: list[str] | None = None) -> int:
    import fedaudit
    from fedaudit.config import load_scenario
    from fedaudit.data import build_federated_data

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--scenario", default="reconstruction-digits")
    p.add_argument("--out", type=Path, default=Path("runs/pipeline-null"))
    p.add_argument("--set", dest="sets", action="append", default=[])
    p.add_argument("--defenses", default="untrained,untrained-secagg+")
    args = p.parse_args(argv)
    scenario = load_scenario(args.scenario, args.sets)  # its data, for the prior image
    data = build_federated_data(scenario)
    register_null_plugins(data.x[data.train].mean(axis=0))
    sets = null_sets(args.sets)
    m = fedaudit.matrix(args.scenario, defenses=args.defenses.split(","), overrides=sets,
                        out=args.out / "matrix", progress=False)
    run = fedaudit.run(args.scenario, overrides=[*sets, "defense.kind=untrained",
                                                 "attack.enabled=true",
                                                 "attack.targets=['global','rounds','clients']",
                                                 "label_leakage.enabled=true",
                                                 "reconstruction.enabled=true"],
                       out=args.out / "run")
    bad = 0
    print("| defense | position | family | verdict | cell |\n|---|---|---|---|---|")
    rows = cells(m.data) + [("fedaudit run", pos, fam, str(c.get("verdict")),
                             f"{c['text']} -- {(c.get('detail') or {}).get('summary')}")
                            for pos, row in run.results["threat_matrix"].items()
                            for fam, c in row.items()
                            if fam != "sees" and c.get("status") == "measured"]
    for d, pos, fam, verdict, text in rows:
        bad += verdict not in ALLOWED
        print(f"| {d} | {pos} | {fam} | {verdict} | {text} |")
    print(f"\n{len(rows)} measured cells, {bad} outside {ALLOWED}", file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())

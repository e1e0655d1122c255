"""LiRA and RMIA (reference models trained like the target) against LOSS: the tables of
docs/validation.md sections 1 and 9.

    python experiments/reference_attacks.py [--part cifar|signal|dpsgd|augment|all] [--quick]
                                            [--out runs/experiments] [--data PATH]

Each row is a full ``fedaudit.run`` with the scenario's seed (the target retrains, the same
bits each time, so LOSS repeats exactly); reference models are cached under
``$FEDAUDIT_CACHE``, and reference k does not depend on how many there are, so the 16-
reference rows reuse the 4- and 8-reference rows' models.

- ``cifar``: ``cifar10-audit`` on the project's CIFAR-10 JPEG copy (``--data``, default
  ``../shared/data/cifar10-jpeg-10k.npz``): offline 4 and 16 references, LiRA with and
  without augmented queries, RMIA with ``a = "auto"``; online 8 and 16 references with a
  fixed and a per-sample variance;
- ``signal``: ``membership-signal`` (digits) offline and online with 4 references, the
  teaching case, after the size fix (the numbers before it are docs/validation.md
  section 1's, made by commit de81760);
- ``dpsgd``: ``cifar10-audit`` under DP-SGD at noise multipliers 0.5 and 1 (4 offline
  references, trained under the same DP-SGD): does RMIA's TPR at 1% FPR fall as the noise
  grows?
- ``augment`` (issue 41): ``cifar10-audit`` trained with ``train.augment = "flip+crop"``
  for ``--rounds`` rounds (default 20; the references likewise): offline 4 and online 8
  and 16 references, LiRA with the augmented queries that match training (``auto``:
  flip+shift, 10 queries) and with 1 query; and the target for the same rounds without
  augmentation (LOSS alone, then with 4 offline references), to tell the rounds' effect
  from the augmentation's.

Prints one markdown table per part (pooled over clients, global model), with the number of
distinct non-members and the wall time of each run.  ``--quick``: the first row of each
part (a smoke test of the script).
"""

from __future__ import annotations

import argparse
import time

import fedaudit

DATA = "../shared/data/cifar10-jpeg-10k.npz"


def _cifar(data: str) -> list[str]:
    return ["data.dataset='npz'", f"data.path='{data}'"]


def rows(part: str, data: str, rounds: int = 20) -> list[tuple[str, str, list[str]]]:
    c = _cifar(data)
    trained = [*c, "train.augment='flip+crop'", f"federation.rounds={rounds}"]
    one_query = ["attack.lira.augment='none'", "attack.methods=['loss','lira']"]
    aug = "attack.lira.augment='flip+shift'"
    online = "attack.reference.mode='online'"
    table = {
        "cifar": [
            ("cifar10-audit", "offline, 4 refs", c),
            ("cifar10-audit", "online, 8 refs", [*c, online, "attack.reference.models=8"]),
            ("cifar10-audit", "online, 8 refs, LiRA per-sample variance",
             [*c, online, "attack.reference.models=8", "attack.lira.fixed_variance=false",
              "attack.methods=['loss','lira']"]),
            ("cifar10-audit", "offline, 4 refs, LiRA flip+shift", [*c, aug]),
            ("cifar10-audit", "online, 8 refs, LiRA flip+shift",
             [*c, online, "attack.reference.models=8", aug, "attack.methods=['loss','lira']"]),
            ("cifar10-audit", "offline, 16 refs", [*c, "attack.reference.models=16"]),
            ("cifar10-audit", "online, 16 refs", [*c, online, "attack.reference.models=16"]),
        ],
        "signal": [
            ("membership-signal", "offline, 4 refs", ["attack.methods=['loss','lira','rmia']"]),
            ("membership-signal", "online, 4 refs", ["attack.methods=['loss','lira','rmia']",
                                                     online]),
        ],
        "augment": [
            ("cifar10-audit", "flip+crop, offline, 4 refs", trained),
            ("cifar10-audit", "flip+crop, offline, 4 refs, LiRA 1 query", [*trained, *one_query]),
            ("cifar10-audit", f"no augmentation, {rounds} rounds, LOSS only",
             [*c, f"federation.rounds={rounds}", "attack.methods=['loss']"]),
            ("cifar10-audit", "flip+crop, online, 8 refs",
             [*trained, online, "attack.reference.models=8"]),
            ("cifar10-audit", "flip+crop, online, 8 refs, LiRA 1 query",
             [*trained, online, "attack.reference.models=8", *one_query]),
            ("cifar10-audit", "flip+crop, online, 16 refs",
             [*trained, online, "attack.reference.models=16"]),
            ("cifar10-audit", "flip+crop, online, 16 refs, LiRA 1 query",
             [*trained, online, "attack.reference.models=16", *one_query]),
            ("cifar10-audit", f"no augmentation, {rounds} rounds, offline, 4 refs",
             [*c, f"federation.rounds={rounds}"]),
        ],
        "dpsgd": [
            ("cifar10-audit", f"dp-sgd noise {z}, offline, 4 refs",
             [*c, "defense.kind='dp-sgd'", f"defense.noise_multiplier={z}"])
            for z in (0.5, 1.0)
        ],
    }
    return table[part]


def _cell(value) -> str:
    return "-" if value is None else f"{value:.3f}"


def _setting_of(r: dict, method: str) -> str:
    a = r["attacks"][method]
    if method == "rmia" and "a" in a:
        return f"a = {a['a']:.1f}" + (" (tuned)" if a.get("a_tuned") else "")
    if method == "lira":
        return f"{a.get('queries_per_view', 1)} quer{'y' if a.get('queries_per_view', 1) == 1 else 'ies'}"
    return ""


def run_part(part: str, quick: bool, out: str, data: str, first: int = 0,
             last: int | None = None, rounds: int = 20) -> None:
    todo = rows(part, data, rounds)[:1] if quick else rows(part, data, rounds)[first:last]
    print(f"\n### {part}\n")
    print("| scenario | setting | attack | AUC | TPR@1%FPR | TPR@0.1%FPR | non-members | "
          "attack setting | test acc | epsilon | ref. size / target | references trained / "
          "cached | run s |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for name, setting, sets in todo:
        t0 = time.perf_counter()
        run = fedaudit.run(name, out=out, overrides=sets, progress=False)
        wall = time.perf_counter() - t0
        r = run.results
        refs = r.get("references", {})
        eps = (r.get("defense") or {}).get("epsilon")
        size = (f"{min(refs['train_size'])} / {refs['target_train_size']}"
                if refs.get("train_size") else "-")
        for method in r["attacks"]:
            a = r["attacks"][method]
            print(f"| {name} | {setting} | {method} | {_cell(a['auc'])} | "
                  f"{_cell(a['tpr_at_1pct_fpr'])} | {_cell(a['tpr_at_0p1pct_fpr'])} | "
                  f"{round(1 / a['min_fpr_resolution'])} | {_setting_of(r, method)} | "
                  f"{_cell(r['model']['test_accuracy'])} | "
                  f"{eps if isinstance(eps, str) or eps is None else f'{eps:.2f}'} | {size} | "
                  f"{refs.get('trained')} / {refs.get('from_cache')} | {wall:.0f} |",
                  flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--part", choices=("cifar", "signal", "dpsgd", "augment", "all"),
                    default="all")
    ap.add_argument("--out", default="runs/experiments")
    ap.add_argument("--data", default=DATA, help="the CIFAR-10 .npz (npz layout)")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--first", type=int, default=0,
                    help="with one --part: start at this row (0-based; to resume a table)")
    ap.add_argument("--last", type=int, default=None, help="with one --part: stop before this row")
    ap.add_argument("--rounds", type=int, default=20, help="--part augment: federation rounds")
    args = ap.parse_args()
    for part in (("signal", "cifar", "dpsgd", "augment") if args.part == "all"
                 else (args.part,)):
        run_part(part, args.quick, args.out, args.data, args.first, args.last, args.rounds)


if __name__ == "__main__":
    main()

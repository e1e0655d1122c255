"""Do two runs hold the same numbers?  For refactors: results.json without what a rerun
changes anyway (``timing``, ``run_dir``, ``cache_dir``, ``train_seconds``,
``seconds_per_sample``, a stage's wall-clock ``seconds`` and the scenario's data paths)
compared key by key and value by value with ``==`` (floats included, no tolerance; parsed
JSON, so key order is not compared), and every array of every ``.npz`` file of the run
directory (scores.npz, reconstructions.npz, imprint.npz, gnq_samples.npz ...) with
``np.array_equal`` (same order and dtype; a NaN equals a NaN in the same place).

    python experiments/same_numbers.py RUN_DIR_A RUN_DIR_B [--added PATH ...]

Prints each difference and a one-line verdict; exit code 1 when they differ.  ``--added
PATH`` accepts a results.json key that only run B has (a key added since run A was made:
results.json keys are only ever added), e.g. ``--added /scenario/federation/aggregation``;
it is listed, not counted as a difference; ``--added-key NAME`` accepts a key of that name
wherever only run B has it (the membership entries' ``auc_ci`` ...), and counts them.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

SKIP = {"timing", "run_dir", "cache_dir", "train_seconds", "seconds_per_sample", "seconds"}


def _comparable(obj: Any, top: bool = True) -> Any:
    if isinstance(obj, dict):
        out = {k: _comparable(v, False) for k, v in obj.items() if k not in SKIP}
        if top and isinstance(out.get("scenario"), dict):
            out["scenario"] = {t: {k: v for k, v in vals.items() if k not in ("data_dir", "path")}
                               for t, vals in out["scenario"].items()}
        return out
    if isinstance(obj, list):
        return [_comparable(v, False) for v in obj]
    return obj


def differences(a: Any, b: Any, path: str = "") -> list[str]:
    """Every place where ``a`` and ``b`` differ (type, keys, lengths, values)."""
    if type(a) is not type(b):
        return [f"{path}: type {type(a).__name__} != {type(b).__name__}"]
    if isinstance(a, dict):
        out = [f"{path}/{k}: only in {'A' if k in a else 'B'}" for k in sorted(set(a) ^ set(b))]
        for k in a.keys() & b.keys():
            out += differences(a[k], b[k], f"{path}/{k}")
        return out
    if isinstance(a, list):
        if len(a) != len(b):
            return [f"{path}: length {len(a)} != {len(b)}"]
        return [d for i, (x, y) in enumerate(zip(a, b)) for d in differences(x, y, f"{path}[{i}]")]
    return [] if a == b else [f"{path}: {a!r} != {b!r}"]


def _same_array(a: np.ndarray, b: np.ndarray) -> bool:
    """Equal element by element, a NaN equal to a NaN in the same place (a metric that is
    undefined for a sample, e.g. reconstructions.npz ``leakage``)."""
    return np.array_equal(a, b, equal_nan=a.dtype.kind in "fc")


def main(run_a: Path, run_b: Path, added: tuple[str, ...] = (),
         added_keys: tuple[str, ...] = ()) -> int:
    out = differences(*(_comparable(json.loads((r / "results.json").read_text("utf-8")))
                        for r in (run_a, run_b)))
    for path in added:
        if f"{path}: only in B" in out:
            out.remove(f"{path}: only in B")
            print(f"{path}: only in B (added, accepted)")
    if added_keys:  # a key added wherever it appears: counted, not listed one by one
        hits = [d for d in out if d.endswith(": only in B")
                and d[:-len(": only in B")].rsplit("/", 1)[-1] in added_keys]
        out = [d for d in out if d not in hits]
        if hits:
            print(f"{len(hits)} places only in B under the added keys "
                  f"{', '.join(added_keys)} (accepted)")
    read = []
    for name in sorted({p.name for r in (run_a, run_b) for p in r.glob("*.npz")}):
        if not ((run_a / name).exists() and (run_b / name).exists()):
            out.append(f"{name}: only in {'A' if (run_a / name).exists() else 'B'}")
            continue
        with np.load(run_a / name) as sa, np.load(run_b / name) as sb:
            out += [f"{name} {k}: differs" for k in sorted(set(sa.files) | set(sb.files))
                    if k not in sa.files or k not in sb.files
                    or sa[k].dtype != sb[k].dtype or not _same_array(sa[k], sb[k])]
            rows = len(sa[sa.files[0]]) if sa.files else 0
        read.append(f"{name} {rows} rows")
    for line in out:
        print(line)
    print(f"{'same numbers' if not out else f'{len(out)} differences'} "
          f"(results.json; {', '.join(read) or 'no .npz files'})")
    return 1 if out else 0


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run_a", type=Path)
    parser.add_argument("run_b", type=Path)
    parser.add_argument("--added", action="append", default=[], metavar="PATH",
                        help="a results.json key only run B may have (repeatable)")
    parser.add_argument("--added-key", action="append", default=[], metavar="NAME",
                        help="a key name only run B may have, wherever it appears, e.g. "
                             "auc_ci (repeatable)")
    args = parser.parse_args()
    sys.exit(main(args.run_a, args.run_b, tuple(args.added), tuple(args.added_key)))

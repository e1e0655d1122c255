"""Run time of every lab's solution notebook, executed in order with one shared (initially
empty) folder of lab runs, as the test suite does; the table of docs/validation.md
section 6.

    python experiments/lab_runtimes.py [--lab-dir DIR]

Labs 1-5 and 7 share one federation (``fedaudit.labs.TARGET``), trained by whichever runs
first (lab 1 here), so "seconds" includes that training for lab 1 only; "alone" is each
notebook run with its own empty folder (its full cost when a student opens only that lab)
and is measured only with ``--alone`` (it retrains the shared federation for every lab).
Prints a markdown table: lab, seconds, checks passed, and the machine's CPU count.  Lab 9
needs a plain-text play (``fedaudit.labs.text_path``); without one it is skipped, saying why.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient

LABS = Path(__file__).resolve().parent.parent / "labs"


def execute(path: Path, lab_dir: Path) -> tuple[float, int, int]:
    os.environ["FEDAUDIT_LAB_DIR"] = str(lab_dir)
    nb = nbformat.read(path, as_version=4)
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as cwd:
        NotebookClient(nb, timeout=900, kernel_name="python3",
                       resources={"metadata": {"path": cwd}}).execute()
    seconds = time.perf_counter() - t0
    checks = [c for c in nb.cells if "check" in c.metadata.get("tags", [])]
    passed = sum("".join(o.get("text", "") for o in c.outputs).startswith("ok  ")
                 for c in checks)
    return seconds, passed, len(checks)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lab-dir", help="folder of lab runs (default: a new temporary one)")
    parser.add_argument("--alone", action="store_true",
                        help="also run each notebook with its own empty folder")
    args = parser.parse_args()
    os.environ.setdefault("FEDAUDIT_CACHE", tempfile.mkdtemp(prefix="fedaudit-cache-"))
    shared = Path(args.lab_dir or tempfile.mkdtemp(prefix="lab-runs-"))
    rows, total = [], 0.0
    for path in sorted((LABS / "solutions").glob("lab*.ipynb")):
        if path.stem.startswith("lab9"):
            from fedaudit.labs import text_path

            try:
                text_path()
            except FileNotFoundError as exc:  # lab 9 needs a play; say so and go on
                print(f"| {path.stem} | skipped: {exc} |", flush=True)
                continue
        seconds, passed, n = execute(path, shared)
        alone = (f"{execute(path, Path(tempfile.mkdtemp(prefix='lab-alone-')))[0]:.0f}"
                 if args.alone else "")
        total += seconds
        rows.append(f"| {path.stem} | {seconds:.0f} | {alone} | {passed}/{n} |")
        print(rows[-1], flush=True)
    print(f"\n{os.cpu_count()} CPUs; all solution notebooks in sequence: {total:.0f} s\n")
    print("| lab | seconds (shared runs) | seconds alone | checks ok |\n|---|---|---|---|")
    print("\n".join(rows))


if __name__ == "__main__":
    main()

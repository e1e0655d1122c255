"""A matrix folder's matrix.json as the Markdown tables of docs/validation.md: the cells
(a row per position and family, a column per defense) and the cost (test accuracy,
epsilon, each run's seconds).

    fedaudit matrix reconstruction-digits --out m
    python experiments/matrix_table.py m
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path


def _text(cell: dict | None) -> str:
    """A cell's figure and its verdict: the verdict's summary (what decided it, or what
    would resolve it), else its word."""
    if cell is None:
        return "-"
    if cell["status"] != "measured":
        return cell["status"]
    summary = (cell.get("detail") or {}).get("summary") or cell.get("verdict")
    return cell["text"] + (f" (**{summary}**)" if summary else "")


def tables(doc: dict) -> str:
    ds = doc["defenses"]
    out = ["| position | family | " + " | ".join(d["title"] for d in ds) + " |",
           "|---|---|" + "---|" * len(ds)]
    for pos in doc["positions"]:
        for fam in doc["families"]:
            out.append(f"| {pos} | {fam} | " + " | ".join(
                _text(((d.get("cells") or {}).get(pos) or {}).get(fam)) for d in ds) + " |")
    out += ["", "| defense | test accuracy | epsilon | seconds per run |", "|---|---|---|---|"]
    for d in ds:
        acc, eps = d.get("test_accuracy"), d.get("epsilon")
        runs = ", ".join(f"{role} {r['seconds']:.0f}" for role, r in d["runs"].items()
                         if isinstance(r.get("seconds"), (int, float)))
        out.append(f"| {d['title']} | {'-' if acc is None else f'{acc:.3f}'} | "
                   f"{'-' if not isinstance(eps, (int, float)) else f'{eps:.3g}'} | {runs} |")
    return "\n".join(out)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("matrix_dir", help="a fedaudit matrix folder (holding matrix.json)")
    args = ap.parse_args(argv)
    print(tables(json.loads((Path(args.matrix_dir) / "matrix.json").read_text())))


if __name__ == "__main__":
    main()

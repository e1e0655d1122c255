"""The tables ``fedaudit compare`` prints, read back: rendered at a width, parsed, checked to
fit and to show every number whole."""

from __future__ import annotations

import io
import re
from collections import Counter


NUMBER = re.compile(r"^(–|∞|−∞|nan|\d+\.\d{3}|\d+(\.\d+)?(e[-+]\d+)?)$")
LABELS = ["Res-MIA", "LOSS", "confidence", "entropy", "m-entropy"]


def render(rows: list[dict], width: int, title: str = "fedaudit compare") -> str:
    """What ``layout_tables`` prints at ``width``, uncropped (a line too long stays long)."""
    from rich.console import Console

    from fedaudit.compare import layout_tables

    console = Console(width=width, record=True, file=io.StringIO())
    for t in layout_tables(rows, title, width):
        console.print(t, crop=False)
    return console.export_text()


def parse_tables(text: str) -> list[dict]:
    """Every table in rendered output: ``{"header": [cell], "body": [[cell]]}``, a cell's
    lines joined by newlines (a body row per line: a folded name continues on the next)."""
    tables, cur, part = [], None, None
    for line in text.splitlines():
        s = line.strip()
        if s.startswith("┏"):
            bounds = [i for i, ch in enumerate(s) if ch in "┏┳┓"]
            cur, part = {"header": [""] * (len(bounds) - 1), "body": []}, "header"
            tables.append(cur)
        elif s.startswith("┡"):
            part = "body"
        elif s.startswith("└"):
            cur = part = None
        elif part == "header":
            for j, (a, b) in enumerate(zip(bounds, bounds[1:])):
                piece = s[a + 1:b].strip()
                cur["header"][j] = "\n".join(x for x in (cur["header"][j], piece) if x)
        elif part == "body":
            cur["body"].append([s[a + 1:b].strip() for a, b in zip(bounds, bounds[1:])])
    return tables


def transposed(text: str) -> tuple[list[str], dict[str, list[str]]]:
    """The run column headers and ``field name -> cells`` (in run order) of transposed
    tables, their parts put together; the field names must not wrap."""
    headers, fields = [], {}
    for t in parse_tables(text):
        headers += t["header"][1:]
        label = None
        for row in t["body"]:
            if row[0]:
                label = row[0]
                fields.setdefault(label, [])
                start = len(fields[label])
                fields[label] += row[1:]
            else:  # a continuation line of the row above
                for j, piece in enumerate(row[1:]):
                    if piece:
                        fields[label][start + j] += "\n" + piece
    return headers, fields


def flat(cell: str) -> str:
    """A folded cell (name broken anywhere) back in one piece."""
    return cell.replace("\n", "")


def check_fits(text: str, width: int) -> None:
    """Output within ``width`` cells, nothing cut, every header cell filled, numbers whole."""
    lines = text.splitlines()
    assert lines, "no output"
    too_long = [ln for ln in lines if len(ln) > width]
    assert not too_long, f"{len(too_long)} lines over {width}: {too_long[0]!r}"
    assert "…" not in text and "..." not in text
    tables = parse_tables(text)
    assert tables, "no table"
    for t in tables:
        assert all(t["header"]), f"blank header cell: {t['header']}"
        for row in t["body"]:
            for cell in row:
                if re.fullmatch(r"[\d.,∞–−]+", cell):
                    assert NUMBER.match(cell), f"number shortened: {cell!r}"


def numbers(rows: list[dict]) -> Counter:
    """Every number cell the rows should show, as many times as it should appear."""
    from fedaudit.compare import _shown

    return Counter(_shown(k, r) for r in rows for k, v in r.items()
                   if v is not None and k not in ("point", "train.lr")
                   and (k.endswith(("_auc", "_fpr", "_best")) or k.startswith(("rqn", "eps"))
                        or k == "test_accuracy"))


def check_numbers_whole(text: str, rows: list[dict]) -> None:
    """Each number of ``rows`` is a whole cell of the output (none folded or shortened)."""
    cells = Counter(c for t in parse_tables(text) for row in t["body"] for c in row)
    missing = numbers(rows) - cells
    assert not missing, f"numbers not shown whole: {dict(missing)}"

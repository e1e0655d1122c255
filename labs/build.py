"""Build every lab's student and solution notebook from its single source.

    python labs/build.py            # (re)write labs/*.ipynb and labs/solutions/*.ipynb
    python labs/build.py --check    # exit 1 if a committed notebook differs from its build

A source is ``labs/src/labNN_name.py`` in the "percent" format (as jupytext reads it):

    # %% [markdown]            a markdown cell; its lines start with "# "
    # %%                       a code cell
    # %% check                 a code cell that checks the task above (tagged "check")
    # %% [markdown] answer     a markdown cell in the solution notebook only

Inside a code cell, the solution is marked and the student notebook gets the stub::

    ### BEGIN SOLUTION
    p = proba[np.arange(len(y)), y]
    ### STUB
    p = todo("the probability of the true label")
    ### END SOLUTION

(solution notebook: the lines between BEGIN and STUB; student notebook: those between
STUB and END; the markers themselves appear in neither).  Cells that hold a solution are
tagged "solution" in the solution notebook and "todo" in the student one.  Notebooks are
written without outputs and with cell ids derived from the lab and position, so a build is
byte-for-byte reproducible and ``--check`` (a test) catches a notebook edited by hand.
"""

from __future__ import annotations

import argparse
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

LABS = Path(__file__).resolve().parent
SOURCES = LABS / "src"
SOLUTIONS = LABS / "solutions"
_HEADER = re.compile(r"^# %%(?: \[(markdown)\])?(?: (check|answer))?\s*$")
_BEGIN, _STUB, _END = "### BEGIN SOLUTION", "### STUB", "### END SOLUTION"


@dataclass
class Cell:
    kind: str  # "code" | "markdown"
    role: str  # "" | "check" | "answer"
    lines: list[str] = field(default_factory=list)


def parse(text: str, name: str) -> list[Cell]:
    cells: list[Cell] = []
    for n, line in enumerate(text.splitlines(), start=1):
        m = _HEADER.match(line)
        if m:
            cells.append(Cell("markdown" if m.group(1) else "code", m.group(2) or ""))
        elif line.startswith("# %%"):
            raise SystemExit(f"{name}:{n}: unknown cell header {line!r}")
        elif cells:
            cells[-1].lines.append(line)
        elif line.strip():
            raise SystemExit(f"{name}:{n}: text before the first cell header")
    return cells


def _strip(lines: list[str]) -> str:
    while lines and not lines[-1].strip():
        lines = lines[:-1]
    while lines and not lines[0].strip():
        lines = lines[1:]
    return "\n".join(lines)


def _markdown(lines: list[str], where: str) -> str:
    out = []
    for line in lines:
        if line == "#":
            out.append("")
        elif line.startswith("# "):
            out.append(line[2:])
        elif line.strip():
            raise SystemExit(f"{where}: a markdown line must start with '# ': {line!r}")
        else:
            out.append("")
    return _strip(out)


def split_solution(lines: list[str], where: str) -> tuple[list[str], list[str], bool]:
    """(solution lines, student lines, whether the cell had a solution block)."""
    sol, stu, state, marked = [], [], "both", False
    for line in lines:
        token = line.strip()
        if token == _BEGIN:
            if state != "both":
                raise SystemExit(f"{where}: {_BEGIN} inside a solution block")
            state, marked = "solution", True
        elif token == _STUB:
            if state != "solution":
                raise SystemExit(f"{where}: {_STUB} outside a solution block")
            state = "stub"
        elif token == _END:
            if state != "stub":
                raise SystemExit(f"{where}: {_END} without {_STUB} before it")
            state = "both"
        else:
            if state in ("both", "solution"):
                sol.append(line)
            if state in ("both", "stub"):
                stu.append(line)
    if state != "both":
        raise SystemExit(f"{where}: solution block not closed with {_END}")
    return sol, stu, marked


def build(source: Path) -> tuple[nbformat.NotebookNode, nbformat.NotebookNode]:
    """(student, solution) notebooks of one source file."""
    lab = source.stem
    cells = parse(source.read_text(encoding="utf-8"), source.name)
    student, solution = [], []
    for i, cell in enumerate(cells):
        where = f"{source.name} cell {i + 1}"
        cid = f"{lab}-{i:03d}"
        if cell.kind == "markdown":
            nb_cell = nbformat.v4.new_markdown_cell(_markdown(cell.lines, where), id=cid)
            if cell.role == "answer":
                nb_cell.metadata["tags"] = ["answer"]
            else:
                student.append(nb_cell)
            solution.append(nb_cell)
            continue
        sol, stu, marked = split_solution(cell.lines, where)
        tags = ["check"] if cell.role == "check" else []
        s_cell = nbformat.v4.new_code_cell(_strip(sol), id=cid)
        t_cell = nbformat.v4.new_code_cell(_strip(stu), id=cid)
        s_cell.metadata["tags"] = tags + (["solution"] if marked else [])
        t_cell.metadata["tags"] = tags + (["todo"] if marked else [])
        for c in (s_cell, t_cell):
            if not c.metadata["tags"]:
                del c.metadata["tags"]
        solution.append(s_cell)
        student.append(t_cell)
    meta = {"kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
            "language_info": {"name": "python"}}
    return (nbformat.v4.new_notebook(cells=student, metadata=dict(meta)),
            nbformat.v4.new_notebook(cells=solution, metadata=dict(meta)))


def targets(source: Path) -> tuple[Path, Path]:
    return LABS / f"{source.stem}.ipynb", SOLUTIONS / f"{source.stem}.ipynb"


def render(nb: nbformat.NotebookNode) -> str:
    nbformat.validate(nb)
    return nbformat.writes(nb) + "\n"


def sources() -> list[Path]:
    return sorted(SOURCES.glob("lab*.py"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true",
                        help="compare the committed notebooks with a fresh build; write nothing")
    args = parser.parse_args(argv)
    stale = []
    for src in sources():
        for nb, path in zip(build(src), targets(src)):
            text = render(nb)
            if args.check:
                if not path.is_file() or path.read_text(encoding="utf-8") != text:
                    stale.append(path)
            else:
                path.parent.mkdir(exist_ok=True)
                path.write_text(text, encoding="utf-8")
    if stale:
        print("out of date (run python labs/build.py): "
              + ", ".join(str(p.relative_to(LABS.parent)) for p in stale), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

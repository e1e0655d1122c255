"""The labs' "mistake -> message" table (docs/validation.md section 11).

Feeds every mistake listed in ``tests/labs/mistakes.py`` (``MISTAKES``: the task, the mistake,
the student's code or value) to its check, with whichever ``fedaudit`` is importable, and
prints one markdown row per mistake: what the check said (``passes`` when it let the
mistake through).  Run it once against a checkout before a change and once after::

    PYTHONPATH=/path/to/old/checkout python experiments/lab_check_messages.py --column before
    PYTHONPATH=$PWD python experiments/lab_check_messages.py --column after

(``--join BEFORE.md`` prints the two columns side by side.)
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parent.parent / "tests" / "labs" / "mistakes.py"


def _mistakes():
    spec = importlib.util.spec_from_file_location("lab_mistakes", TESTS)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod.MISTAKES


def outcome(feed) -> str:
    from fedaudit.labs import LabCheckError

    try:
        feed()
    except LabCheckError as exc:
        return str(exc)
    except Exception as exc:  # noqa: BLE001 - an older checkout lacks a check or an argument
        return f"(no such check: {type(exc).__name__})"
    return "passes"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--column", default="message")
    ap.add_argument("--join", help="a table this script printed before: add its column")
    args = ap.parse_args()
    import io
    import contextlib

    before = {}
    if args.join:
        for line in Path(args.join).read_text(encoding="utf-8").splitlines()[2:]:
            cells = [c.strip() for c in line.strip("|").split(" | ")]
            before[(cells[0], cells[1])] = cells[2]
    head = ["task", "mistake"] + (["before"] if args.join else []) + [args.column]
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for task, mistake, feed, _ in _mistakes():
        with contextlib.redirect_stdout(io.StringIO()):  # an "ok" line of a passing check
            said = outcome(feed).replace("|", "\\|")
        row = [task, mistake] + ([before.get((task, mistake), "")] if args.join else []) + [said]
        print("| " + " | ".join(row) + " |")


if __name__ == "__main__":
    main()

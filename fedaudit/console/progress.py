"""Progress on the console (rich): the rounds, then the post-training steps.

:class:`RichProgress` implements the ``Progress`` protocol the simulation reports to
(``round_done``, ``phase``, ``step``, ``warn``, ``started``) and remembers where the run is,
for the one line a Ctrl-C prints (:mod:`fedaudit.console.interrupt`).
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Protocol

log = logging.getLogger("fedaudit")


class Progress(Protocol):
    """What a run reports (:class:`fedaudit.console.progress.RichProgress` on the console)."""

    def started(self, run_dir: Path) -> None: ...
    def round_done(self, round_: int, record: dict) -> None: ...
    def phase(self, text: str) -> None: ...
    def step(self, name: str, done: int, total: int, info: str = "") -> None: ...
    def warn(self, text: str) -> None: ...


class NoProgress:
    """Progress to run.log only."""

    def started(self, run_dir: Path) -> None:
        pass

    def round_done(self, round_: int, record: dict) -> None:
        pass

    def phase(self, text: str) -> None:
        log.info(text)

    def step(self, name: str, done: int, total: int, info: str = "") -> None:
        pass

    def warn(self, text: str) -> None:
        pass  # the recorder has logged it


class RichProgress:
    """Rounds as a rich progress bar with the latest accuracy; the post-training steps
    (quantizers, attack targets and methods) as a second bar with an ETA.  It also keeps
    where the run is, for the one line a Ctrl-C prints."""

    def __init__(self, rounds: int) -> None:
        from rich.console import Console
        from rich.table import Column
        from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TextColumn,
                                   TimeElapsedColumn, TimeRemainingColumn)

        self.console = Console(stderr=True)
        self.rounds = rounds
        # counts and times never shrink; the free-text info column gives way (ellipsis)
        fixed = Column(no_wrap=True)
        self.bar = Progress(TextColumn("[bold]{task.description}", table_column=fixed),
                            BarColumn(bar_width=12), MofNCompleteColumn(table_column=fixed),
                            TimeElapsedColumn(table_column=fixed),
                            TextColumn("eta", table_column=fixed),
                            TimeRemainingColumn(table_column=fixed),
                            TextColumn("{task.fields[info]}",
                                       table_column=Column(no_wrap=True, overflow="ellipsis",
                                                           ratio=1)),
                            console=self.console, transient=False)
        self.task = self.bar.add_task("rounds", total=rounds, info="starting Ray ...")
        self.steps: dict[str, int] = {}
        self.run_dir: Path | None = None
        self.rounds_done = 0
        self.where = "while starting Ray"

    def __enter__(self) -> "RichProgress":
        self.bar.start()
        return self

    def __exit__(self, *exc) -> None:
        self.bar.stop()

    def started(self, run_dir: Path) -> None:
        self.run_dir = Path(run_dir).resolve()

    def round_done(self, round_: int, record: dict) -> None:
        info = f"test acc {record['test_accuracy']:.3f}"
        if record["failures"]:
            info += f", {record['failures']} failed"
        self.rounds_done = round_
        self.where = (f"in round {round_ + 1} of {self.rounds}" if round_ < self.rounds
                      else "after the last round")
        self.bar.update(self.task, completed=round_, info=info)

    def phase(self, text: str) -> None:
        self.where = f"during {text}"
        self.bar.update(self.task, info=text)

    def step(self, name: str, done: int, total: int, info: str = "") -> None:
        if name not in self.steps:
            self.steps[name] = self.bar.add_task(name, total=total, info=info)
        self.where = f"during {name} ({info})" if info else f"during {name}"
        self.bar.update(self.steps[name], completed=done, total=total, info=info)

    def warn(self, text: str) -> None:
        from rich.markup import escape

        self.console.print(f"[bold yellow]warning:[/] {escape(text)}", highlight=False)

    def interrupted(self) -> str:
        """The Ctrl-C line: where the run stopped and how to go on."""
        if self.run_dir is None:
            return f"{self.where}; no run directory was created"
        return (f"{self.where}; {self.run_dir} keeps {self.rounds_done} finished "
                f"round(s); continue with: fedaudit run --resume {self.run_dir}")

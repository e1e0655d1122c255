"""``run.log``: fedaudit's and Flower's log of a run, written into its run directory."""

from __future__ import annotations

import contextlib
import logging
from pathlib import Path
from typing import Iterator

from fedaudit.rundir.layout import LOG_NAME

__all__ = ["run_logging"]


@contextlib.contextmanager
def run_logging(run_dir: Path, verbose: bool = False) -> Iterator[None]:
    """Send fedaudit's and Flower's logs to ``run.log``; keep the terminal for progress."""
    handler = logging.FileHandler(run_dir / LOG_NAME, encoding="utf-8")
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    flwr_logger = logging.getLogger("flwr")
    ours = logging.getLogger("fedaudit")
    saved = [(lg, lg.level, list(lg.handlers), lg.propagate) for lg in (flwr_logger, ours)]
    try:
        for lg in (flwr_logger, ours):
            if not verbose:
                lg.handlers = [h for h in lg.handlers if not isinstance(h, logging.StreamHandler)
                               or isinstance(h, logging.FileHandler)]
            lg.addHandler(handler)
            lg.setLevel(logging.INFO)
            lg.propagate = False
        yield
    finally:
        for lg, level, handlers, propagate in saved:
            lg.handlers = handlers
            lg.setLevel(level)
            lg.propagate = propagate
        handler.close()

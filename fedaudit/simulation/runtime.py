"""The one call of Flower's simulation runtime in fedaudit, and why it is the deprecated one.

Flower 1.42 marks :func:`flwr.simulation.run_simulation` deprecated and recommends ``flwr
run`` with a local SuperLink.  ``flwr run`` starts the ServerApp and the ClientApps in
processes of the SuperLink's own, loaded by name from an installed Flower App: what
``fedaudit run`` and :func:`fedaudit.run` give their users needs the ServerApp in the
calling process, and Flower has no supported programmatic entry to that runtime (1.42; the
1.43 nightly likewise):

- plug-ins registered in the calling process (a notebook cell's ``@register_attack``)
  reach the clients and the server-side audit only when the ServerApp runs there and
  hands the ClientApp over as an object (:mod:`fedaudit.simulation.plugins`);
- the progress bars and the one-line Ctrl-C with exit code 130 need the rounds reported
  in this process;
- the run directory is created and resumed here (``--resume``).

So fedaudit keeps ``run_simulation``, here and nowhere else, replaces Flower's
multi-line deprecation banner by the one explained line :data:`NOTE` of its own in
run.log, and offers the supported path as ``fedaudit deploy`` / ``flwr run .`` (the same
ServerApp code, :mod:`fedaudit.simulation.apps`).  docs/architecture.md section 7 has what
the ``flwr run`` path was measured to cost; ``.ci/flower-next`` checks the next Flower.
"""

from __future__ import annotations

import contextlib
import logging
from typing import Any, Iterator

log = logging.getLogger("fedaudit")

__all__ = ["NOTE", "simulate"]

#: the start of Flower's banner that :func:`simulate` replaces
FLOWER_BANNER = "DEPRECATED FEATURE: The `run_simulation` function is deprecated"

#: fedaudit's own line about it, once per run in run.log
NOTE = ("Flower marks run_simulation deprecated in favour of `flwr run`; fedaudit runs the "
        "simulation in this process with it on purpose (plug-ins registered here, progress, "
        "Ctrl-C, --resume; docs/architecture.md section 7). The `flwr run` path is "
        "`fedaudit deploy`.")


class _DropBanner(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.getMessage()).startswith(FLOWER_BANNER)


@contextlib.contextmanager
def _without_banner() -> Iterator[None]:
    flwr_logger = logging.getLogger("flwr")
    drop = _DropBanner()
    flwr_logger.addFilter(drop)
    try:
        yield
    finally:
        flwr_logger.removeFilter(drop)


def simulate(server_app: Any, client_app: Any, *, num_supernodes: int,
             backend_config: dict, verbose: bool = False) -> None:
    """Run ``server_app`` against ``num_supernodes`` virtual SuperNodes of ``client_app`` on
    Flower's Ray backend, in this process (:func:`flwr.simulation.run_simulation`)."""
    from flwr.simulation import run_simulation

    log.warning("%s", NOTE)
    with _without_banner():
        run_simulation(server_app=server_app, client_app=client_app,
                       num_supernodes=num_supernodes, backend_config=backend_config,
                       verbose_logging=verbose)

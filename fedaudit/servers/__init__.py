"""The server as a threat model (like breaching's ``cases/servers.py``): one class per kind
of server, registered in :data:`SERVERS`, that says what it does to the model it sends the
clients (:meth:`~fedaudit.servers.base.Server.serve`), what it reads back, and what it knew
and did (its ``threat_model``, written beside the results of the attacks it runs).

* ``honest-but-curious`` (:mod:`~fedaudit.servers.honest`): sends the scenario's model as
  it is and attacks what reaches it (the curious server's membership attacks, label
  leakage and reconstruction on each update);
* ``imprint`` (:mod:`~fedaudit.servers.imprint`): the malicious server of Fowl et al.
  2022, which puts an imprint block in front of the model it sends and reads the round's
  samples back from the aggregate.  It declares the ``[imprint]`` table;
* ``gradient-ascent`` (:mod:`~fedaudit.servers.active_membership`): Nasr et al. 2019's
  active membership attack, which ascends the loss of target samples in the model it sends
  at one round (:meth:`~fedaudit.servers.base.Server.modify`) and reads the aggregate.  It
  declares the ``[active_membership]`` table.

:func:`served_model` builds the model every side of a run uses (the clients, the server's
recorder, the reference federations, the audit), so their architectures and state-dict
keys agree.
"""

from __future__ import annotations

from fedaudit.registry import import_submodules
from fedaudit.servers.base import SERVERS, Server, register_server, served_model, server_of

import_submodules(__name__, __path__, first=("honest", "imprint", "active_membership"))
SERVERS.mark_builtin()

__all__ = ["SERVERS", "Server", "register_server", "served_model", "server_of"]

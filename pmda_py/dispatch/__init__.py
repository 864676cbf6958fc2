"""The dispatcher: requests in, table calls, replies out.

The :class:`Dispatcher` (``dispatcher.py``) owns the mounted tables of one
PMDA domain and their index (``mounts.py``), runs the tables' checks and
hands each request to the one path of its type: a FETCH to the fetch
planner (``fetch.py``: the packed, fast -- ``fast.py`` -- and general
encoders, values coerced by ``coerce.py``), a DESC, INSTANCE, TEXT, LABEL
or namespace request to ``meta.py``, whose replies the reply cache
(``replies.py``) remembers by their request's bytes.  A table that raises,
overruns its deadline or returns values of the wrong type gets an error
code for its own metrics and a log line; every other table is unaffected.

Runtime-neutral: no trio here (the daemon supplies the :class:`Runner`).
"""

from __future__ import annotations

from pmda_py.dispatch.dispatcher import Dispatcher, HelpSource, Runner, TableTimeout
from pmda_py.dispatch.mounts import ConfigError, Mount, MountIndex

__all__ = [
    "ConfigError",
    "Dispatcher",
    "HelpSource",
    "Mount",
    "MountIndex",
    "Runner",
    "TableTimeout",
]

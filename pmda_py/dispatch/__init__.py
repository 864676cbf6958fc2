"""Turn session requests into table calls, and their results into replies.

The :class:`Dispatcher` owns the mounted tables of one PMDA domain: it
indexes their metrics by PMID and name and their indoms by id, answers
DESC, INSTANCE, TEXT, LABEL and the dynamic-namespace PDUs from that index,
and calls the tables (through a :class:`Runner` that enforces deadlines)
for FETCH, store and instance refreshes.  A table that raises, overruns its
deadline or returns values of the wrong type gets an error code for its own
metrics and a log line; every other table is unaffected.

Runtime-neutral: no trio here (the daemon supplies the Runner).
"""

from __future__ import annotations

from pmda_py.dispatch.dispatcher import Dispatcher, DispatchStats, EncodedReply, HelpSource, Runner, TableTimeout
from pmda_py.dispatch.mounts import ConfigError, Mount, MountIndex

__all__ = [
    "ConfigError",
    "DispatchStats",
    "Dispatcher",
    "EncodedReply",
    "HelpSource",
    "Mount",
    "MountIndex",
    "Runner",
    "TableTimeout",
]

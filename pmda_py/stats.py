"""The PMDA's own counters: requests by kind, fetch times, table failures.

The dispatcher counts; the ``control`` table exports them (it gets them
through its :class:`~pmda_py.table.TableContext`).  Kept apart from both so
the table API can name the type without importing the dispatcher.
"""

from __future__ import annotations

import time
from collections import deque

import attrs

__all__ = ["PmdaStats"]


@attrs.define
class PmdaStats:
    """Counters of one PMDA, carried over a configuration reload."""

    requests: dict[str, int] = attrs.field(factory=dict)
    fetches: int = 0
    fetch_values: int = 0
    fetch_time_total: float = 0.0
    fetch_time_last: float = 0.0
    fetch_time_max: float = 0.0
    table_errors: dict[str, int] = attrs.field(factory=dict)
    table_timeouts: dict[str, int] = attrs.field(factory=dict)
    bad_requests: int = 0
    started: float = attrs.field(factory=time.time)
    #: the last 4096 fetch times (bounded: memory never grows)
    recent: deque[float] = attrs.field(factory=lambda: deque(maxlen=4096))

    def percentile(self, q: float) -> float:
        """Fetch time at quantile ``q`` (0..1) over the recent fetches, in seconds."""
        if not self.recent:
            return 0.0
        s = sorted(self.recent)
        return s[min(len(s) - 1, int(q * len(s)))]

    def count(self, kind: str) -> None:
        self.requests[kind] = self.requests.get(kind, 0) + 1

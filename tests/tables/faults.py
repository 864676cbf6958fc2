"""Misbehaving tables for fault tests: ``slow`` overruns its deadline,
``crash`` raises or returns values of the wrong type.  Test code only: the
daemon loads them by module path (``tests.tables.faults:SlowTable``) with
the repository on its path.

Clusters 4080 (slow) and 4081 (crash).
"""

from __future__ import annotations

import trio

from pmda_py.pmapi import PmType
from pmda_py.table import FetchRequest, FetchResult, Metric, Table, TableContext

__all__ = ["CrashTable", "SlowTable"]


class SlowTable(Table):
    """``sleep`` seconds (option, default 30) per fetch; ``fast`` answers at once."""

    name = "slow"
    accepts_options = True
    deadline = 0.5

    def __init__(self, sleep: str = "30", **_options: str) -> None:
        self.sleep = float(sleep)
        self.value = Metric("value", cluster=4080, item=0, type=PmType.U32, oneline="answers after a long sleep")
        self.fast = Metric(
            "fast", cluster=4080, item=1, type=PmType.U32, oneline="answers at once (same table as value)"
        )

    async def fetch(self, request: FetchRequest) -> FetchResult:
        if self.value in request.metrics:
            await trio.sleep(self.sleep)
        return {self.value: 1, self.fast: 2}


class CrashTable(Table):
    """``boom`` raises; ``wrongtype`` returns a string for an integer metric."""

    name = "crash"

    def __init__(self) -> None:
        self.boom = Metric("boom", cluster=4081, item=0, type=PmType.U32, oneline="its fetch raises")
        self.wrongtype = Metric(
            "wrongtype", cluster=4082, item=0, type=PmType.U32, oneline="returns a string for a U32"
        )
        self.negative = Metric("negative", cluster=4082, item=1, type=PmType.U64, oneline="returns -1 for a U64")
        self.fine = Metric("fine", cluster=4082, item=2, type=PmType.U32, oneline="returns 7")

    async def startup(self, context: TableContext) -> None:
        return None

    async def fetch(self, request: FetchRequest) -> FetchResult:
        if self.boom in request.metrics:
            raise RuntimeError("table crashed on purpose")
        return {self.wrongtype: "not a number", self.negative: -1, self.fine: 7}

"""Misbehaving tables for fault tests: ``slow`` overruns its deadline,
``crash`` raises or returns values of the wrong type, and the check tables'
check() blocks (``blockcheck``), sleeps past its deadline (``sleepcheck``) or
raises (``raisecheck``, ``araisecheck``); ``inlinecheck`` is declared inline
(a stat's kind: called in the event loop, no deadline).  Test code only: the daemon loads
them by module path (``tests.tables.faults:SlowTable``) with the repository
on its path.

Clusters 4080 (slow), 4081 and 4082 (crash), 4083 (the check tables).
"""

from __future__ import annotations

import threading

import trio

from pmda_py.pmapi import PmType
from pmda_py.table import FetchRequest, FetchResult, Metric, Table, TableContext

__all__ = [
    "AsyncRaisingCheck",
    "BlockingCheck",
    "CheckTable",
    "CrashTable",
    "InlineCheck",
    "RaisingCheck",
    "SleepingCheck",
    "SlowTable",
]


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


class CheckTable(Table):
    """The check tables' metrics: ``value`` answers 1, ``checks`` how many
    checks ended (the state a check keeps up to date); ``started`` counts
    the checks begun."""

    name = "check"
    accepts_options = True

    def __init__(self, seconds: str = "10", **_options: str) -> None:
        self.seconds = float(seconds)
        self.started = 0
        self.ended = 0
        self.value = Metric("value", cluster=4083, item=0, type=PmType.U32, oneline="answers 1")
        self.checks = Metric("checks", cluster=4083, item=1, type=PmType.U32, oneline="checks that ended")

    async def fetch(self, request: FetchRequest) -> FetchResult:
        return {self.value: 1, self.checks: self.ended}


class BlockingCheck(CheckTable):
    """A plain check() that blocks its thread for ``seconds`` (option,
    default 10) or until ``release`` is set, then raises if ``fail``."""

    name = "blockcheck"

    def __init__(self, seconds: str = "10", **options: str) -> None:
        super().__init__(seconds, **options)
        self.release = threading.Event()
        self.fail = False

    def check(self) -> None:
        self.started += 1
        self.release.wait(self.seconds)
        self.ended += 1
        if self.fail:
            raise RuntimeError("check failed after blocking")


class SleepingCheck(CheckTable):
    """An async check() that sleeps ``seconds`` (option, default 10);
    ``cancelled`` counts the sleeps its deadline cut."""

    name = "sleepcheck"
    cancelled = 0

    async def check(self) -> None:
        self.started += 1
        try:
            await trio.sleep(self.seconds)
        except trio.Cancelled:
            self.cancelled += 1
            raise
        self.ended += 1


class RaisingCheck(CheckTable):
    """A plain check() that raises."""

    name = "raisecheck"

    def check(self) -> None:
        self.started += 1
        raise RuntimeError("check crashed on purpose")


class AsyncRaisingCheck(CheckTable):
    """An async check() that raises."""

    name = "araisecheck"

    async def check(self) -> None:
        self.started += 1
        await trio.lowlevel.checkpoint()
        raise RuntimeError("async check crashed on purpose")


class InlineCheck(CheckTable):
    """A plain check() declared inline; ``threads`` holds the idents of the
    threads it ran in."""

    name = "inlinecheck"
    check_mode = "inline"

    def __init__(self, seconds: str = "10", **options: str) -> None:
        super().__init__(seconds, **options)
        self.threads: set[int | None] = set()

    def check(self) -> None:
        self.started += 1
        self.threads.add(threading.get_ident())
        self.ended += 1

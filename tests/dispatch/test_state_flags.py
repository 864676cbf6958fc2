"""NAMES_CHANGE (0x10 in the RESULT's ``sec``) reaches pmcd exactly once after
the names change, even when the fast encoder fails and the general path
answers."""

from __future__ import annotations

import threading
from array import array

from pmda_py.pmapi import PmType
from pmda_py.table import FetchRequest, FetchResult, InDom, Metric, PackedFetch, Table
from pmda_py.testing.harness import dispatcher_of, open_table_pmda

NAMES_CHANGE = 0x10


class Flaky(Table):
    """Answers with a PackedFetch whose blob is too short when ``broken``:
    the fast path refuses it and the general path takes over."""

    name = "f"

    def __init__(self) -> None:
        self.ind = InDom(0, {0: "a", 1: "b"})
        self.v = Metric("v", cluster=0, item=0, type=PmType.U64, indom=self.ind)
        self.broken = False
        self.insts_type = "I"
        self.token = object()

    async def fetch(self, request: FetchRequest) -> FetchResult:
        n = 1 if self.broken else 2
        blob = b"".join(x.to_bytes(8, "big") for x in (7, 8)[:n])
        insts = array(self.insts_type, [0, 1])
        return PackedFetch(request.metrics, [PmType.U64], [insts], blob, frozenset({self.ind.id}), self.token)


async def test_names_change_survives_a_failed_fast_encode() -> None:
    table = Flaky()
    async with open_table_pmda(table, mount="f", domain=252) as pmda:
        p = await pmda.pmid("f.v")
        assert (await pmda.fetch([p])).sec == 0
        dispatcher_of(pmda).names_changed = True
        table.broken = True
        first = await pmda.fetch([p])
        assert first.sec & NAMES_CHANGE, "the flag was lost when the fast path fell back"
        assert (await pmda.fetch([p])).sec & NAMES_CHANGE == 0  # told once
        table.broken = False
        dispatcher_of(pmda).names_changed = True
        assert (await pmda.fetch([p])).sec & NAMES_CHANGE  # and on the fast path
        assert (await pmda.fetch([p])).sec == 0


async def test_a_packed_fetch_of_the_wrong_array_type_falls_back() -> None:
    """A table bug in its packed answer (signed instance array) costs the
    fast path, not the fetch: the general path answers the values."""
    table = Flaky()
    table.insts_type = "i"
    async with open_table_pmda(table, mount="f", domain=252) as pmda:
        assert (await pmda.fetch_values(["f.v"]))["f.v"] == {0: 7, 1: 8}


class SlowCheck(Table):
    """A dynamic table whose check() (run before every request) is slow:
    it blocks until ``release`` is set."""

    name = "s"
    checks = 0
    release = threading.Event()

    def __init__(self) -> None:
        self.v = Metric("v", cluster=1, item=0, type=PmType.U32)

    def check(self) -> None:
        type(self).checks += 1
        self.release.wait(30)

    async def fetch(self, request: FetchRequest) -> FetchResult:
        return {self.v: 1}


def test_only_tables_with_a_check_are_checked() -> None:
    from pmda_py.dispatch import Dispatcher, Mount
    from pmda_py.runtime.pump import TrioRunner

    d = Dispatcher(252, [Mount(Flaky(), "f", "f"), Mount(SlowCheck(), "s", "s")], TrioRunner())
    assert [m.name for m in d._checked] == ["s"]


async def test_a_slow_check_is_logged() -> None:
    """It does not hold the requests up: the first waits its deadline (and
    logs it), the next do not start a second check while it runs."""
    from structlog.testing import capture_logs

    SlowCheck.release.clear()
    try:
        async with open_table_pmda(SlowCheck(), domain=252) as pmda:
            SlowCheck.checks = 0
            with capture_logs() as logs:
                assert (await pmda.desc(await pmda.pmid("s.v"))).type == PmType.U32
        assert SlowCheck.checks == 1  # the PMNS lookup's; the DESC did not start another
        slow = [e for e in logs if e["event"] == "table_timeout"]
        assert len(slow) == 1 and slow[0]["call"] == "check" and slow[0]["table"] == "s"
        assert "0.25s" in slow[0]["detail"]
    finally:
        SlowCheck.release.set()

"""A slow table and a crashing table do not stop the others; every request
still gets exactly one reply, in time."""

from __future__ import annotations

import time

import pytest
from structlog.testing import capture_logs

from pmda_py.dispatch import ConfigError, Dispatcher, Mount
from pmda_py.errors import PmErr
from pmda_py.pmapi import pmid
from pmda_py.runtime.pump import TrioRunner
from pmda_py.tables.control import ControlTable
from pmda_py.tables.simple import SimpleTable
from pmda_py.testing.harness import open_table_pmda
from tests.tables.faults import CrashTable, SlowTable


async def test_slow_and_crashing_tables_do_not_stop_others(tmp_path) -> None:  # type: ignore[no-untyped-def]
    conf = tmp_path / "simple.conf"
    conf.write_text("sec\n")
    simple, slow, crash = SimpleTable(config=str(conf)), SlowTable(sleep="30"), CrashTable()
    slow.deadline = 0.3
    mounts = [
        Mount(simple, "simple", "simple"),
        Mount(slow, "slow", "slow"),
        Mount(crash, "crash", "crash"),
        Mount(ControlTable(), "ctl", "ctl"),
    ]
    with capture_logs() as logs:
        async with open_table_pmda(*mounts, domain=253) as pmda:
            t0 = time.monotonic()
            v = await pmda.fetch_values(["slow.value", "simple.numfetch", "crash.boom", "crash.fine"])
            elapsed = time.monotonic() - t0
            assert elapsed < 2.0, "the slow table held up the fetch"
            assert v["slow.value"].pm_code == PmErr.AGAIN
            assert v["crash.boom"].pm_code == PmErr.AGAIN
            assert v["crash.fine"].pm_code == PmErr.AGAIN  # same table, same failed call
            assert v["simple.numfetch"] == 1
            v = await pmda.fetch_values(["crash.fine", "crash.wrongtype", "crash.negative", "simple.numfetch"])
            assert v["crash.fine"] == 7
            assert v["crash.wrongtype"].pm_code == PmErr.TYPE
            assert v["crash.negative"].pm_code == PmErr.TYPE
            assert v["simple.numfetch"] == 2
            # the control view of it: per table, one timeout (slow), one
            # exception and two bad values (crash), nothing for the others
            indom = (await pmda.desc((await pmda.lookup(["ctl.table.errors"]))["ctl.table.errors"])).indom
            names = {e.inst: e.name for e in await pmda.instance(indom)}
            ctl = await pmda.fetch_values(["ctl.table.timeouts", "ctl.table.errors"])
            timeouts = {names[i]: n for i, n in ctl["ctl.table.timeouts"].items()}
            errors = {names[i]: n for i, n in ctl["ctl.table.errors"].items()}
            assert timeouts == {"simple": 0, "slow": 1, "crash": 0, "ctl": 0}, timeouts
            assert errors == {"simple": 0, "slow": 0, "crash": 3, "ctl": 0}, errors
    events = [e["event"] for e in logs]
    assert "table_timeout" in events
    assert "table_exception" in events
    assert "table_bad_value" in events
    bad = next(e for e in logs if e["event"] == "table_bad_value")
    assert bad["metric"] == "crash.wrongtype"


def test_cluster_collision_is_refused_at_startup(tmp_path) -> None:  # type: ignore[no-untyped-def]
    a, b = SimpleTable(config=str(tmp_path / "x")), SimpleTable(config=str(tmp_path / "x"))
    with pytest.raises(ConfigError, match="both use cluster 0"):
        Dispatcher(253, [Mount(a, "a", "a"), Mount(b, "b", "b")], TrioRunner())


def test_leaf_and_non_leaf_of_one_name_are_refused() -> None:
    from pmda_py.pmapi import PmType
    from pmda_py.table import Metric, Table

    class Clash(Table):
        def __init__(self, names: list[str]) -> None:
            self.ms = [Metric(n, cluster=0, item=k, type=PmType.U32) for k, n in enumerate(names)]

        def metrics(self) -> list[Metric]:
            return self.ms

    for names in (["a", "a.b"], ["a.b", "a"]):
        with pytest.raises(ConfigError, match="clashes with a non-leaf or leaf of the same name"):
            Dispatcher(253, [Mount(Clash(names), "t", "t")], TrioRunner())
    d = Dispatcher(253, [Mount(Clash(["a.b", "a.c", "d"]), "t", "t")], TrioRunner())
    assert d.all_names == {"t.a.b": pmid(253, 0, 0), "t.a.c": pmid(253, 0, 1), "t.d": pmid(253, 0, 2)}


def test_bad_mount_point_is_refused() -> None:
    with pytest.raises(ConfigError, match="bad mount point"):
        Dispatcher(253, [Mount(CrashTable(), "1bad..x", "c")], TrioRunner())


async def test_control_table_counts(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    from pmda_py import logconfig
    from pmda_py.tables.control import ControlTable

    # the level is the process's: start from the daemon's default whatever an
    # in-process tool (the installer logs at warning) left, and put it back after
    monkeypatch.setattr(logconfig, "_state", {**logconfig._state, "level": "info"})

    conf = tmp_path / "simple.conf"
    conf.write_text("sec\n")
    slow = SlowTable(sleep="5")
    slow.deadline = 0.2
    mounts = [
        Mount(SimpleTable(config=str(conf)), "simple", "simple"),
        Mount(ControlTable(), "ctl", "control"),
        Mount(slow, "slow", "slow"),
    ]
    async with open_table_pmda(*mounts, domain=253) as pmda:
        await pmda.fetch([pmid(253, 0, 0)])
        await pmda.fetch([pmid(253, 4080, 0)])
        v = await pmda.fetch_values(["ctl.fetch.count", "ctl.table.timeouts", "ctl.requests", "ctl.log.level"])
        assert v["ctl.fetch.count"] >= 2
        tables = {e.name: e.inst for e in await pmda.instance(mounts[1].table.tables.id)}  # type: ignore[attr-defined]
        assert v["ctl.table.timeouts"][tables["slow"]] == 1
        assert v["ctl.log.level"] == "info"


async def test_table_not_ready_then_ready() -> None:
    """A table raising PmdaNotReady: the request is answered PMDANOTREADY, then
    PMDAREADY arrives unsolicited once the table's wait_ready() returns."""
    import trio

    from pmda_py.errors import PmdaNotReady
    from pmda_py.pmapi import PmType
    from pmda_py.table import FetchRequest, Metric, Table
    from pmda_py.wire import ErrorPdu, FetchPdu

    class Warming(Table):
        def __init__(self) -> None:
            self.m = Metric("m", cluster=0, item=0, type=PmType.U32)
            self.warm = False

        async def fetch(self, request: FetchRequest):  # type: ignore[no-untyped-def]
            if not self.warm:
                raise PmdaNotReady()
            return {self.m: 9}

        async def wait_ready(self) -> None:
            await trio.sleep(0.2)
            self.warm = True

    async with open_table_pmda(Warming(), mount="w", domain=250) as pmda:
        await pmda.send(FetchPdu((pmid(250, 0, 0),)))
        assert await pmda.receive() == ErrorPdu(PmErr.PMDANOTREADY)
        assert await pmda.receive(timeout=5) == ErrorPdu(PmErr.PMDAREADY)
        assert (await pmda.fetch_values(["w.m"]))["w.m"] == 9


async def test_packed_fetch_from_a_table_whole_and_broken() -> None:
    """A table may answer a FETCH in one piece (PackedFetch): the values
    arrive as from a plain mapping; a blob of the wrong size is the table's
    bug: logged, and its metrics get PM_ERR_TYPE, nothing else breaks."""
    import struct
    from array import array

    import trio

    from pmda_py.pmapi import PmType
    from pmda_py.table import FetchRequest, InDom, Metric, PackedFetch, Table
    from pmda_py.wire import ResultPdu

    class Packed(Table):
        def __init__(self) -> None:
            self.ind = InDom(1, {0: "a", 7: "b"})
            self.u = Metric("u", cluster=0, item=0, type=PmType.U64, indom=self.ind)
            self.d = Metric("d", cluster=0, item=1, type=PmType.DOUBLE, indom=self.ind)
            self.short = False
            self.token = object()

        async def fetch(self, request: FetchRequest):  # type: ignore[no-untyped-def]
            await trio.lowlevel.checkpoint()
            insts = array("I", [0, 7])
            blob = struct.pack("!QQdd", 5, 2**64 - 1, 0.5, -2.25)
            return PackedFetch(
                request.metrics,
                [m.type for m in request.metrics],
                [insts] * len(request.metrics),
                blob[: 8 if self.short else 8 * 2 * len(request.metrics)],
                frozenset({1}),
                self.token,
            )

    table = Packed()
    async with open_table_pmda(table, mount="p", domain=250) as pmda:
        assert await pmda.fetch_values(["p.u", "p.d"]) == {"p.u": {0: 5, 7: 2**64 - 1}, "p.d": {0: 0.5, 7: -2.25}}
        assert await pmda.fetch_values(["p.u", "p.d"]) == {"p.u": {0: 5, 7: 2**64 - 1}, "p.d": {0: 0.5, 7: -2.25}}
        table.short = True
        with capture_logs() as logs:
            reply = await pmda.fetch([pmid(250, 0, 0), pmid(250, 0, 1)])
        assert isinstance(reply, ResultPdu)
        assert [v.numval for v in reply.vsets] == [PmErr.TYPE, PmErr.TYPE]
        assert any(e["event"] == "table_bad_packed_fetch" for e in logs), logs
        table.short = False
        assert (await pmda.fetch_values(["p.u"]))["p.u"] == {0: 5, 7: 2**64 - 1}

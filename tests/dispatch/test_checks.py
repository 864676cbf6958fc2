"""A table's check() never stalls the daemon's answers: one that blocks,
sleeps past its deadline or raises is logged with the table's name, and
every request is answered (with the table's state as it is), the other
mounts' as usual.  The fault tables are in tests/tables/faults.py."""

from __future__ import annotations

import threading
from collections.abc import MutableMapping
from typing import Any

import pytest
import trio
from structlog.testing import capture_logs

from pmda_py.dispatch import ConfigError, Dispatcher, Mount
from pmda_py.runtime import pump as daemon
from pmda_py.table.base import check_mode_of
from pmda_py.tables.simple import SimpleTable
from pmda_py.testing.harness import dispatcher_of, open_table_pmda
from pmda_py.testing.support import InlineRunner
from tests.tables.faults import AsyncRaisingCheck, BlockingCheck, CheckTable, InlineCheck, RaisingCheck, SleepingCheck

#: pmcd drops an agent that has not answered a request in this many seconds
#: (pmcd -t, default 5): every request must be answered well within it
PMCD_AGENT_TIMEOUT = 5.0

NAMES = ["c.value", "c.checks", "simple.numfetch"]


def _mounts(table: CheckTable, tmp_path: Any) -> list[Mount]:
    conf = tmp_path / "simple.conf"
    conf.write_text("sec\n")
    return [Mount(table, "c", "c"), Mount(SimpleTable(config=str(conf)), "simple", "simple")]


def _check_logs(logs: list[MutableMapping[str, Any]], event: str) -> list[MutableMapping[str, Any]]:
    return [e for e in logs if e["event"] == event and e.get("call") == "check"]


async def _until(cond: Any) -> None:
    """Wait for a worker thread's doing (no trio.Event to set from there)."""
    while not cond():  # noqa: ASYNC110
        await trio.sleep(0.01)


async def _two_fetches(pmda: Any) -> None:
    """Two fetches, both answered within pmcd's agent timeout while the
    table's check is stuck: the table's state as it was, simple counting."""
    with trio.fail_after(PMCD_AGENT_TIMEOUT):
        first = await pmda.fetch_values(NAMES)
        again = await pmda.fetch_values(NAMES)
    assert first == {"c.value": 1, "c.checks": 0, "simple.numfetch": 1}
    assert again == {"c.value": 1, "c.checks": 0, "simple.numfetch": 2}


async def test_a_blocking_check_does_not_stall_fetches(tmp_path: Any) -> None:
    """A plain check() that blocks for 10 s: the request that started it is
    answered after the check's deadline, the next ones at once (no second
    check while it runs); once it ends the table is checked again."""
    table = BlockingCheck(seconds="10")
    try:
        with capture_logs() as logs:
            async with open_table_pmda(*_mounts(table, tmp_path), domain=253) as pmda:
                await _two_fetches(pmda)
                assert table.started == 1 and table.ended == 0  # still blocked, not started twice
                slow = _check_logs(logs, "table_timeout")
                assert len(slow) == 1 and slow[0]["table"] == "c", logs
                table.release.set()
                await _until(lambda: table.ended == 1)
                with trio.fail_after(PMCD_AGENT_TIMEOUT):
                    after = await pmda.fetch_values(NAMES)
                # each request checks again, and the checks end in time: the
                # fetch sees every one of them
                assert after["c.value"] == 1 and after["simple.numfetch"] == 3
                assert after["c.checks"] == table.started == table.ended >= 2
                assert len(_check_logs(logs, "table_timeout")) == 1
    finally:
        table.release.set()


async def test_a_blocking_check_that_then_raises_is_reported_at_the_next_request(tmp_path: Any) -> None:
    table = BlockingCheck(seconds="10")
    table.fail = True
    try:
        with capture_logs() as logs:
            async with open_table_pmda(*_mounts(table, tmp_path), domain=253) as pmda:
                with trio.fail_after(PMCD_AGENT_TIMEOUT):
                    await pmda.fetch_values(NAMES)
                table.release.set()
                await _until(lambda: table.ended == 1)
                table.fail = False
                with trio.fail_after(PMCD_AGENT_TIMEOUT):
                    values = await pmda.fetch_values(NAMES)
                assert values["c.value"] == 1 and values["simple.numfetch"] == 2
        failed = _check_logs(logs, "table_exception")
        assert len(failed) >= 1 and failed[0]["table"] == "c"
        assert "check failed after blocking" in failed[0]["error"]
    finally:
        table.release.set()


async def test_an_async_check_past_its_deadline_is_cancelled_and_paused(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(daemon, "CHECK_PAUSE", 3600.0)
    table = SleepingCheck(seconds="10")
    with capture_logs() as logs:
        async with open_table_pmda(*_mounts(table, tmp_path), domain=253) as pmda:
            await _two_fetches(pmda)
    assert table.started == 1 and table.cancelled == 1  # cut at its deadline, then paused
    slow = _check_logs(logs, "table_timeout")
    assert len(slow) == 1 and slow[0]["table"] == "c"


async def test_an_async_check_runs_again_after_its_pause(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(daemon, "CHECK_PAUSE", 0.0)
    table = SleepingCheck(seconds="10")
    async with open_table_pmda(*_mounts(table, tmp_path), domain=253) as pmda:
        with trio.fail_after(PMCD_AGENT_TIMEOUT):
            await pmda.fetch_values(["c.value"])
            assert table.cancelled >= 1
            table.seconds = 0
            values = await pmda.fetch_values(NAMES)
    assert values["c.checks"] >= 1 and table.ended >= 1  # an async check runs before the request


@pytest.mark.parametrize("kind", [RaisingCheck, AsyncRaisingCheck])
async def test_a_raising_check_is_logged_and_the_request_answered(tmp_path: Any, kind: type[CheckTable]) -> None:
    table = kind()
    with capture_logs() as logs:
        async with open_table_pmda(*_mounts(table, tmp_path), domain=253) as pmda:
            with trio.fail_after(PMCD_AGENT_TIMEOUT):
                first = await pmda.fetch_values(NAMES)
                again = await pmda.fetch_values(NAMES)
                p = await pmda.pmid("c.value")
                before = table.started
                for _ in range(3):  # a remembered reply too is answered after the checks
                    await pmda.desc(p)
                assert table.started == before + 3
            counted = dispatcher_of(pmda).stats.table_errors["c"]
    assert first == {"c.value": 1, "c.checks": 0, "simple.numfetch": 1}
    assert again == {"c.value": 1, "c.checks": 0, "simple.numfetch": 2}
    failed = _check_logs(logs, "table_exception")
    # every request checked, every failure counted; the same failure logged once (an hour: ProblemLog)
    assert counted == table.started >= 4 and len(failed) == 1
    assert {e["table"] for e in failed} == {"c"} and "crashed on purpose" in failed[0]["error"]


def test_how_each_kind_of_check_runs() -> None:
    """A plain check goes to a thread, an async one under a cancel scope,
    one declared ``check_mode = "inline"`` (a plain def: a stat) is called
    in the event loop: nothing could cut it short.  The mode is declared,
    never read from the code: an async check that never awaits is still
    awaited under its deadline."""
    assert check_mode_of(BlockingCheck) == "thread"
    assert check_mode_of(RaisingCheck) == "thread"
    assert check_mode_of(SleepingCheck) == "async"
    assert check_mode_of(AsyncRaisingCheck) == "async"
    assert check_mode_of(InlineCheck) == "inline"

    class AsyncWith(CheckTable):
        async def check(self) -> None:
            async with trio.open_nursery():
                pass

    class AsyncFor(CheckTable):
        async def check(self) -> None:
            async for _ in self._none():
                pass

        async def _none(self) -> Any:
            for _ in ():
                yield

    class NeverAwaits(CheckTable):
        async def check(self) -> None:
            self.started += 1

    assert check_mode_of(AsyncWith) == "async"
    assert check_mode_of(AsyncFor) == "async"
    assert check_mode_of(NeverAwaits) == "async"


def test_the_mmv_table_checks_inline() -> None:
    from pmda_py.mmv.table import MmvTable

    assert check_mode_of(MmvTable) == "inline"


def test_a_check_mode_that_does_not_fit_its_check_is_refused() -> None:
    """``"inline"`` or ``"thread"`` on an async def, ``"async"`` on a plain
    def, or a mode that is none of these: the table does not mount."""

    class InlineAsync(CheckTable):
        check_mode = "inline"

        async def check(self) -> None:
            pass

    class AsyncPlain(CheckTable):
        check_mode = "async"

        def check(self) -> None:
            pass

    class Misspelt(CheckTable):
        check_mode = "inlined"  # type: ignore[assignment]

        def check(self) -> None:
            pass

    for bad in (InlineAsync, AsyncPlain, Misspelt):
        with pytest.raises(TypeError, match="check_mode"):
            check_mode_of(bad)
        with pytest.raises(ConfigError, match="check_mode"):
            Dispatcher(251, [Mount(bad(), "c", "c")], InlineRunner())


async def test_an_inline_check_runs_in_the_event_loop_before_each_request(tmp_path: Any) -> None:
    """A declared inline check is called in the daemon's own thread, before
    every request, with no deadline; its changes are seen by that request."""
    table = InlineCheck()
    async with open_table_pmda(*_mounts(table, tmp_path), domain=253) as pmda:
        seen = [(await pmda.fetch_values(["c.checks"]))["c.checks"] for _ in range(3)]
    assert seen[0] >= 1 and seen[1] > seen[0] and seen[2] > seen[1]  # each request checked first
    assert table.started == table.ended >= 3
    assert table.threads == {threading.main_thread().ident}

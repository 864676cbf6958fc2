"""A table's check() never stalls the daemon's answers: one that blocks,
sleeps past its deadline or raises is logged with the table's name, and
every request is answered (with the table's state as it is), the other
mounts' as usual.  The fault tables are in tests/tables/faults.py."""

from __future__ import annotations

from collections.abc import MutableMapping
from typing import Any

import pytest
import trio
from structlog.testing import capture_logs

from pmda_py import daemon
from pmda_py.dispatch import Mount
from pmda_py.dispatch.core import check_kind
from pmda_py.tables.simple import SimpleTable
from pmda_py.testing.harness import open_table_pmda
from tests.tables.faults import AsyncRaisingCheck, BlockingCheck, CheckTable, RaisingCheck, SleepingCheck

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
    assert first == {"c.value": 1, "c.checks": 0, "simple.numfetch": 1}
    assert again == {"c.value": 1, "c.checks": 0, "simple.numfetch": 2}
    failed = _check_logs(logs, "table_exception")
    assert len(failed) == table.started >= 4  # every request checked, every failure logged
    assert {e["table"] for e in failed} == {"c"} and "crashed on purpose" in failed[0]["error"]


def test_how_each_kind_of_check_runs() -> None:
    """A plain check goes to a thread, an async one that awaits under a
    cancel scope, one that never awaits (MMV's) inline: it cannot suspend,
    so a deadline could not cut it."""
    from pmda_py.tables.mmv import MmvTable

    assert check_kind(BlockingCheck.check) == "thread"
    assert check_kind(RaisingCheck.check) == "thread"
    assert check_kind(SleepingCheck.check) == "async"
    assert check_kind(AsyncRaisingCheck.check) == "async"
    assert check_kind(MmvTable.check) == "inline"

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

    assert check_kind(AsyncWith.check) == "async"
    assert check_kind(AsyncFor.check) == "async"

"""TrioRunner's check state per table, driven directly: a plain check left
running in its thread is not started twice, its outcome (an error, even a
SystemExit turned into one, or none) comes out at the next call, and the
table is checked afresh after that."""

from __future__ import annotations

import sys

import pytest
import trio

from pmda_py.dispatch import TableTimeout
from pmda_py.runtime.pump import TrioRunner
from tests.tables.faults import BlockingCheck


class ExitingCheck(BlockingCheck):
    """Blocks until released, then calls sys.exit() (must not end the daemon)."""

    check_deadline = 0.05

    def check(self) -> None:
        super().check()
        sys.exit(3)


async def _until_ended(table: BlockingCheck, n: int) -> None:
    with trio.fail_after(5):
        while table.ended < n:  # noqa: ASYNC110 -- set from a worker thread
            await trio.sleep(0.01)
    await trio.sleep(0.05)  # the thread's last line (its outcome) after ``ended``


async def test_a_thread_check_left_running_reports_its_exit_once_then_runs_again() -> None:
    runner = TrioRunner()
    table = ExitingCheck()
    try:
        with pytest.raises(TableTimeout, match="left running in its thread"):
            await runner.check(table)
        await runner.check(table)  # still running: no second thread, nothing raised
        assert table.started == 1
        table.release.set()
        await _until_ended(table, 1)
        with pytest.raises(RuntimeError, match="check raised SystemExit: 3"):
            await runner.check(table)
        # reported once; the next call runs a new check (released: it ends at once, and exits again)
        with pytest.raises(RuntimeError, match="check raised SystemExit: 3"):
            await runner.check(table)
        assert table.started == 2
    finally:
        table.release.set()


async def test_a_thread_check_that_ended_quietly_after_its_deadline_runs_again() -> None:
    runner = TrioRunner()
    table = BlockingCheck()
    table.check_deadline = 0.05
    try:
        with pytest.raises(TableTimeout):
            await runner.check(table)
        table.release.set()
        await _until_ended(table, 1)
        await runner.check(table)  # the ended one says nothing; a new one runs and ends in time
        assert table.started == 2 and table.ended == 2
    finally:
        table.release.set()

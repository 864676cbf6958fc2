"""pmda_py.testing.harness.open_table_pmda: the tables it starts are shut
down when the block ends, as the daemon shuts them down (each MMV table
it served kept its scanner thread and its inotify descriptor: a test suite
ran out of inotify instances, and a table then missed files rewritten in
place)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from pmda_py.mmv.table import MmvTable
from pmda_py.table import TableContext
from pmda_py.tables.simple import SimpleTable
from pmda_py.testing.harness import open_table_pmda


class Recording(SimpleTable):
    def __init__(self) -> None:
        super().__init__()
        self.events: list[str] = []

    async def startup(self, context: TableContext) -> None:
        await super().startup(context)
        self.events.append("startup")

    async def shutdown(self) -> None:
        self.events.append("shutdown")
        await super().shutdown()


async def test_tables_are_shut_down_when_the_block_ends() -> None:
    table = Recording()
    async with open_table_pmda(table, mount="simple", domain=253) as pmda:
        assert await pmda.traverse("simple")
        assert table.events == ["startup"]
    assert table.events == ["startup", "shutdown"]


async def test_tables_are_shut_down_when_the_block_fails() -> None:
    table = Recording()
    with pytest.raises(KeyError):
        async with open_table_pmda(table, mount="simple", domain=253):
            raise KeyError("the test's own error")
    assert table.events == ["startup", "shutdown"]


async def test_tables_not_started_are_not_shut_down() -> None:
    table = Recording()
    async with open_table_pmda(table, mount="simple", domain=253, startup=False):
        pass
    assert table.events == []


def _inotify_fds() -> int:
    n = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            n += "inotify" in os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            pass
    return n


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="no /proc/self/fd to count descriptors")
async def test_an_mmv_table_served_leaves_no_watch_behind(tmp_path: Path) -> None:
    before = _inotify_fds()
    for _ in range(3):
        table = MmvTable(dir=str(tmp_path), compat="1")
        async with open_table_pmda(table, mount="mmv", domain=70) as pmda:
            assert "mmv.control.files" in list(await pmda.traverse("mmv"))
            assert _inotify_fds() == before + (table._watch is not None)  # (none where inotify is not)
    assert _inotify_fds() == before

"""Smaller daemon features: entry-point tables, the storable log level,
JSON logs."""

from __future__ import annotations

import json
import platform
from pathlib import Path

from pmda_py.errors import PmErr
from pmda_py.pmapi import PmType, pmid
from pmda_py.testing.client import open_pipe_pmda
from pmda_py.testing.support import pmda_py_argv
from pmda_py.wire import ValueSet


async def test_entry_point_table(tmp_path: Path) -> None:
    """``--table NAME=MOUNT`` finds a table through the pmda_py.tables entry point group."""
    (tmp_path / "thirdparty_tables.py").write_text(
        "from pmda_py.table import Table, Metric\n"
        "from pmda_py.pmapi import PmType\n"
        "class Answer(Table):\n"
        "    m = Metric('answer', cluster=0, item=0, type=PmType.U32, oneline='the answer')\n"
        "    async def fetch(self, request):\n"
        "        return {self.m: 42}\n"
    )
    dist = tmp_path / "thirdparty_tables-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: thirdparty-tables\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text("[pmda_py.tables]\nanswer = thirdparty_tables:Answer\n")
    cmd = pmda_py_argv("run", "-d", "250", "-l", str(tmp_path / "l.log"), "--table", "answer=x.y")
    async with open_pipe_pmda(cmd, env={"PYTHONPATH": str(tmp_path)}) as pmda:
        assert (await pmda.fetch_values(["x.y.answer"]))["x.y.answer"] == 42


async def test_log_level_is_storable_and_json_logs(tmp_path: Path) -> None:
    log = tmp_path / "j.log"
    cmd = pmda_py_argv("run", "-d", "250", "-l", str(log), "--log-format", "json", "--table", "control=ctl")
    async with open_pipe_pmda(cmd) as pmda:
        assert (await pmda.fetch_values(["ctl.log.level"]))["ctl.log.level"] == "info"
        p = await pmda.pmid("ctl.log.level")
        assert await pmda.store([ValueSet.of(p, PmType.STRING, [(-1, "debug")])]) == 0
        assert (await pmda.fetch_values(["ctl.log.level"]))["ctl.log.level"] == "debug"
        assert await pmda.store([ValueSet.of(p, PmType.STRING, [(-1, "chatty")])]) == PmErr.BADSTORE
        assert await pmda.store([ValueSet.of(pmid(250, 4092, 2), PmType.U32, [(-1, 1)])]) == PmErr.PERMISSION
    events = [json.loads(line) for line in log.read_text().splitlines()]
    assert events[0]["event"] == "start"
    assert {"event", "level", "timestamp"} <= set(events[0])
    assert events[0]["malloc_tuned"] is (platform.libc_ver()[0] == "glibc")  # large replies reuse heap memory
    assert any(e["event"] == "store" and e["metric"] == "ctl.log.level" for e in events)
    # debug lines appear once the level was stored
    assert any(e["level"] == "debug" for e in events)

"""SIGHUP applies the config's log format and level (the log file itself,
opened as root at the start, stays: reload_partial says so)."""

from __future__ import annotations

import signal
import subprocess
import time
from pathlib import Path

import trio

from pmda_py.testing.client import open_socket_pmda
from pmda_py.testing.support import pmda_py_argv

CONF = """[pmda]
name = t
domain = 253
log_format = {fmt}
log_level = {level}

[table simple]
mount = simple

[table control]
mount = simple.control
"""


def _wait(proc: subprocess.Popen[bytes], log: Path, needle: str) -> str:
    deadline = time.monotonic() + 20
    while True:
        text = log.read_text() if log.exists() else ""
        if needle in text:
            return text
        assert proc.poll() is None and time.monotonic() < deadline, f"{needle!r} not in the log:\n{text}"
        time.sleep(0.05)


def test_a_reload_applies_the_log_format_and_level(tmp_path: Path) -> None:
    conf, log, sock = tmp_path / "t.conf", tmp_path / "t.log", tmp_path / "t.sock"
    conf.write_text(CONF.format(fmt="console", level="info"))
    proc = subprocess.Popen(
        pmda_py_argv("run", "-c", str(conf), "-l", str(log), "-u", str(sock), "--standalone"),
        stdin=subprocess.DEVNULL,
    )

    async def level() -> object:
        async with open_socket_pmda(unix=str(sock)) as pmda:
            return (await pmda.fetch_values(["simple.control.log.level"]))["simple.control.log.level"]

    try:
        _wait(proc, log, "tables_mounted")
        assert trio.run(level) == "info"
        conf.write_text(CONF.format(fmt="json", level="debug"))
        proc.send_signal(signal.SIGHUP)
        text = _wait(proc, log, '"event": "reloaded"')  # the reload's own line is in the new format
        assert '"reload_partial"' not in text
        assert trio.run(level) == "debug"
    finally:
        proc.kill()
        proc.wait()

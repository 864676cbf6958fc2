"""``pmda-py run`` as a real process: transports, exits, bad input, config."""

from __future__ import annotations

import os
import signal
import socket
import struct
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
import trio

from pmda_py.errors import PmErr
from pmda_py.pmapi import pmid
from pmda_py.testing.client import PmdaReplyError, open_pipe_pmda, open_socket_pmda
from pmda_py.testing.support import pmda_py_argv
from tests.conftest import require
from tests.integration.pcpbed import free_port


@pytest.fixture
def run_args(tmp_path: Path) -> list[str]:
    conf = tmp_path / "simple.conf"
    conf.write_text("sec,min\n")
    return pmda_py_argv(
        "run",
        "-d",
        "253",
        "-l",
        str(tmp_path / "pmda.log"),
        "--state-dir",
        str(tmp_path / "state"),
        "--table",
        "simple=simple",
        "--table",
        "control=simple.control",
        "--table",
        "tests.tables.faults:CrashTable=crash",
    )


async def test_pipe_round_trip_and_clean_exit_on_eof(run_args: list[str], tmp_path: Path) -> None:
    async with open_pipe_pmda(run_args) as pmda:
        v = await pmda.fetch_values(["simple.numfetch", "simple.control.pid", "crash.fine"])
        assert v["simple.numfetch"] == 1
        assert v["simple.control.pid"] == pmda.pid
        assert v["crash.fine"] == 7
        proc_pid = pmda.pid
    # open_pipe_pmda closed the pipes: the daemon must have exited on its own
    with pytest.raises(ProcessLookupError):
        os.kill(proc_pid, 0)
    log = (tmp_path / "pmda.log").read_text()
    assert "tables_mounted" in log
    assert "reason=eof" in log


async def test_sigterm_exits_cleanly(run_args: list[str], tmp_path: Path) -> None:
    async with open_pipe_pmda(run_args) as pmda:
        await pmda.fetch([pmid(253, 0, 0)])
        os.kill(pmda.pid, signal.SIGTERM)
        with pytest.raises(EOFError):
            await pmda.receive(timeout=5)
    assert "reason=SIGTERM" in (tmp_path / "pmda.log").read_text()


def test_nothing_but_pdus_on_stdout(tmp_path: Path) -> None:
    """A table that print()s must not corrupt the PDU channel."""
    mod = tmp_path / "noisy_table.py"
    mod.write_text(
        "from pmda_py.table import Table, Metric\n"
        "from pmda_py.pmapi import PmType\n"
        "class Noisy(Table):\n"
        "    m = Metric('x', cluster=0, item=0, type=PmType.U32)\n"
        "    async def fetch(self, request):\n"
        "        print('hello from a careless table')\n"
        "        return {self.m: 5}\n"
    )
    env = dict(os.environ, PYTHONPATH=f"{tmp_path}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
    cmd = pmda_py_argv("run", "-d", "200", "-l", str(tmp_path / "n.log"), "--table", "noisy_table:Noisy=noisy")

    async def go() -> None:
        async with open_pipe_pmda(cmd, env=env) as pmda:
            assert (await pmda.fetch_values(["noisy.x"]))["noisy.x"] == 5
            assert (await pmda.fetch_values(["noisy.x"]))["noisy.x"] == 5

    trio.run(go)
    assert "hello from a careless table" in (tmp_path / "n.log").read_text()


def test_impossible_length_closes_without_hanging(run_args: list[str]) -> None:
    proc = subprocess.Popen(run_args, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert proc.stdin is not None and proc.stdout is not None
    creds = proc.stdout.read(20)
    assert struct.unpack("!iii", creds[:12])[1] == 0x700C
    proc.stdin.write(struct.pack("!iiiii", 20, 0x700C, 1, 1, 0x01020000))
    proc.stdin.write(struct.pack("!iii", 0x7FFFFFFF, 0x7003, 0))  # absurd length
    proc.stdin.flush()
    assert proc.wait(timeout=10) == 0
    assert proc.stdout.read() == b""  # no reply to the absurd PDU, just a clean close


def test_malformed_request_answered_and_daemon_keeps_serving(run_args: list[str]) -> None:
    proc = subprocess.Popen(run_args, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdout.read(20)
    proc.stdin.write(struct.pack("!iiiii", 20, 0x700C, 1, 1, 0x01020000))
    proc.stdin.write(struct.pack("!iiii", 16, 0x7003, 0, 99))  # FETCH too short
    proc.stdin.write(struct.pack("!iiI", 16, 0x7004, 0) + struct.pack("!I", pmid(253, 0, 0)))  # DESC_REQ
    proc.stdin.flush()
    err = proc.stdout.read(16)
    assert struct.unpack("!iiii", err) == (16, 0x7000, 0, PmErr.IPC)
    desc = proc.stdout.read(32)
    assert struct.unpack("!ii", desc[:8]) == (32, 0x7005)
    proc.stdin.close()
    assert proc.wait(timeout=10) == 0


@pytest.mark.parametrize("transport", ["unix", "inet", "ipv6"])
async def test_socket_transports(run_args: list[str], tmp_path: Path, transport: str) -> None:
    where: dict[str, Any]
    if transport == "unix":
        path = str(tmp_path / "pmda.sock")
        args, where = ["-u", path], {"unix": path}
    elif transport == "inet":
        port = free_port()
        args, where = ["-i", str(port)], {"inet": port}
    else:
        require(socket.has_ipv6, "no IPv6 on this machine")
        port = free_port()
        args, where = ["-6", str(port)], {"ipv6": port}
    async with open_socket_pmda(command=[*run_args, *args], **where) as pmda:
        assert (await pmda.fetch_values(["simple.numfetch"]))["simple.numfetch"] == 1
        if transport == "unix":
            assert os.stat(where["unix"]).st_mode & 0o777 == 0o660
        with pytest.raises(PmdaReplyError):
            await pmda.desc(pmid(253, 9, 9))


def test_bad_config_names_file_line_and_key(tmp_path: Path) -> None:
    cfg = tmp_path / "pypmda.conf"
    cfg.write_text("[pmda]\nname = pypmda\ndomain = 999\n\n[table simple]\nmount = pypmda.simple\n")
    r = subprocess.run(pmda_py_argv("run", "-c", str(cfg), "-l", "-"), capture_output=True, text=True, timeout=30)
    assert r.returncode == 1
    assert f"{cfg}:3: [pmda] domain: domain 999 out of range 1-510" in r.stderr
    cfg.write_text("[pmda]\nname = pypmda\n\n[table simple]\nmount = pypmda.simple\ndeadline = 9\n")
    r = subprocess.run(pmda_py_argv("run", "-c", str(cfg), "-l", "-"), capture_output=True, text=True, timeout=30)
    assert r.returncode == 1
    assert f"{cfg}:6: [table simple] deadline:" in r.stderr
    cfg.write_text("[pmda]\nname = pypmda\n\n[table nope]\ntable = no.such.module:Thing\nmount = x\n")
    r = subprocess.run(pmda_py_argv("run", "-c", str(cfg), "-l", "-"), capture_output=True, text=True, timeout=30)
    assert r.returncode == 1
    assert "table nope (no.such.module:Thing): ModuleNotFoundError" in r.stderr


def test_startup_time_is_reasonable(run_args: list[str]) -> None:
    t0 = time.monotonic()
    proc = subprocess.Popen(run_args, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert proc.stdout is not None and proc.stdin is not None
    assert len(proc.stdout.read(20)) == 20  # CREDS arrives well inside pmcd's 3 s
    assert time.monotonic() - t0 < 3.0
    proc.stdin.close()
    proc.wait(timeout=10)


async def test_sighup_reloads_config_atomically(tmp_path: Path) -> None:
    simple_conf = tmp_path / "simple.conf"
    simple_conf.write_text("sec\n")
    cfg = tmp_path / "pypmda.conf"
    base = f"[pmda]\nname = pypmda\ndomain = 253\n\n[table simple]\nmount = simple\nconfig = {simple_conf}\n"
    cfg.write_text(base)
    log = tmp_path / "pmda.log"
    cmd = pmda_py_argv("run", "-c", str(cfg), "-l", str(log), "--state-dir", str(tmp_path / "state"))
    async with open_pipe_pmda(cmd) as pmda:
        assert (await pmda.fetch_values(["simple.numfetch"]))["simple.numfetch"] == 1
        with pytest.raises(PmdaReplyError):
            await pmda.pmid("ctl.pid")
        # a good new config: a table is added
        cfg.write_text(base + "\n[table control]\nmount = ctl\n")
        os.kill(pmda.pid, signal.SIGHUP)
        for _ in range(100):
            if "reloaded" in log.read_text():
                break
            await trio.sleep(0.05)
        assert (await pmda.fetch_values(["ctl.pid"]))["ctl.pid"] == pmda.pid
        # a bad new config: the running one stays
        cfg.write_text(base + "\n[table control]\nmount = ctl\ndeadline = nope\n")
        os.kill(pmda.pid, signal.SIGHUP)
        for _ in range(100):
            if "reload_failed" in log.read_text():
                break
            await trio.sleep(0.05)
        assert (await pmda.fetch_values(["ctl.pid"]))["ctl.pid"] == pmda.pid
        assert (await pmda.fetch_values(["simple.numfetch"]))["simple.numfetch"] >= 1
    text = log.read_text()
    assert f"{cfg}:11: [table control] deadline: not a number" in text
    assert "keeping the running configuration" in text

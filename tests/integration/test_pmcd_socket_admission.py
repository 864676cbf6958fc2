"""A standalone socket-mode ``pmda-py run`` (as the systemd unit starts it)
under a private pmcd whose pmcd.conf has a socket line without a command:
an idle connection, a garbage connection and (unix) a connection from
another uid come first and are dropped; pmcd connects and ``pminfo -f``
works; pmcd is stopped and started again and the same daemon (same pid)
answers the new pmcd with its counters continuing (issue 15)."""

from __future__ import annotations

import os
import pwd
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.pcpbed import PrivatePmcd, foreign_uid_connect, free_port

pytestmark = pytest.mark.pcp


def _pmns() -> str:
    text = Path("/var/lib/pcp/pmns/root_pmcd").read_text()
    return text.replace("root {\n    pmcd\n}", "root {\n    pmcd\n    simple\t253:*:*\n}", 1)


@pytest.fixture
def root() -> Iterator[Path]:
    d = Path(tempfile.mkdtemp(prefix="pmda_py-admission-"))
    d.chmod(0o755)
    try:
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)


def _wait_log(log: Path, needle: str, count: int = 1, timeout: float = 15.0) -> str:
    deadline = time.monotonic() + timeout
    text = ""
    while time.monotonic() < deadline:
        text = log.read_text() if log.exists() else ""
        if text.count(needle) >= count:
            return text
        time.sleep(0.05)
    raise AssertionError(f"{needle!r} x{count} not in {log}:\n{text}")


def _values(pmcd: PrivatePmcd) -> dict[str, int]:
    r = pmcd.tool("pminfo", "-f", "simple.numfetch", "simple.control.pid", "simple.control.fetch.count")
    out: dict[str, int] = {}
    for name, value in re.findall(r"^(simple\.\S+)\n\s+value (\d+)$", r.stdout, flags=re.M):
        out[name] = int(value)
    assert set(out) == {"simple.numfetch", "simple.control.pid", "simple.control.fetch.count"}, r.stdout + r.stderr
    return out


@pytest.mark.slow
@pytest.mark.parametrize("transport", ["unix", "inet"])
def test_standalone_agent_serves_pmcd_only_and_survives_its_restart(
    root: Path, pcp_env: dict[str, str], transport: str
) -> None:
    if transport == "unix" and os.geteuid() != 0:
        pytest.skip("needs root (a child setuid()s to 'nobody'; the socket directory belongs to pcp)")
    # as in production: the socket lives in a pcp-owned directory (like /run/pcp),
    # so pmcd -- running as pcp -- removes it when it stops
    sockdir = root / "run-pcp"
    sockdir.mkdir(mode=0o775)
    if os.geteuid() == 0:
        pcp = pwd.getpwnam("pcp")
        os.chown(sockdir, pcp.pw_uid, pcp.pw_gid)
    log = root / "pypmda.log"
    if transport == "unix":
        path = str(sockdir / "pypmda.socket")
        where, line = ["-u", path], f"simple 253 socket unix {path}"
    else:
        port = free_port()
        where, line = ["-i", str(port)], f"simple 253 socket inet {port}"
    cmd = [
        sys.executable,
        "-m",
        "pmda_py",
        "run",
        "-d",
        "253",
        "--standalone",
        "--creds-timeout",
        "3",
        "--table",
        "simple=simple",
        "--table",
        "control=simple.control",
        "-l",
        str(log),
        "--state-dir",
        str(root / "state"),
        *where,
    ]
    agent = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, env={**os.environ, **pcp_env})
    pmcd = PrivatePmcd(root, [line], _pmns(), env=pcp_env)
    held: list[socket.socket] = []
    try:
        _wait_log(log, "listening")
        # before pmcd: an idle connection (held open), a garbage one, a foreign uid
        family, address = (socket.AF_UNIX, path) if transport == "unix" else (socket.AF_INET, ("127.0.0.1", port))
        for data in (b"", b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03" + b"\x00" * 32):  # idle, a TLS hello
            s = socket.socket(family)
            s.connect(address)
            if data:
                s.sendall(data)
            held.append(s)
        expected_dropped = 2
        if transport == "unix":
            os.chmod(path, 0o666)  # the file mode is the first wall; open it to reach the uid check
            assert foreign_uid_connect(path) == (pwd.getpwnam("nobody").pw_uid, 0)  # not even our CREDS

        pmcd.start()  # connects while the idle connection still waits for its timeout
        pmcd.wait("simple.numfetch", desc_only=True)
        r = pmcd.tool("pminfo", "-f", "simple.color")
        assert 'inst [0 or "red"] value' in r.stdout, r.stdout + r.stderr
        before = _values(pmcd)  # the last fetch before pmcd stops
        assert before["simple.control.pid"] == agent.pid

        text = _wait_log(log, "peer_dropped", count=expected_dropped)
        dropped = [x for x in text.splitlines() if " peer_dropped " in x]
        assert len(dropped) == 2, dropped
        assert any("no CREDS within 3 s (0 bytes received)" in x for x in dropped), dropped
        assert any("not pmcd: first PDU" in x for x in dropped), dropped
        if transport == "unix":
            refused = [x for x in text.splitlines() if " peer_refused " in x]
            assert len(refused) == 1 and "uid 65534 (nobody)" in refused[0], refused
        assert text.count(" session_start ") == 1

        # pmcd stops (and, on unix, removes the agent's socket) and starts again
        pmcd.stop()
        assert pmcd.proc is not None
        _wait_log(log, "action=listening")
        assert agent.poll() is None
        pmcd.start()  # at once: the daemon must have put its socket back already
        pmcd.wait("simple.numfetch", desc_only=True)
        after = _values(pmcd)
        assert after["simple.control.pid"] == agent.pid
        assert after["simple.numfetch"] == before["simple.numfetch"] + 1
        assert after["simple.control.fetch.count"] == before["simple.control.fetch.count"] + 1
        text = log.read_text()
        assert text.count(" session_start ") == 2
        assert "session=2" in text
        if transport == "unix":
            assert text.count(" socket_recreated ") == 1  # pmcd unlinked it on its way out
    finally:
        for s in held:
            s.close()
        pmcd.stop()
        if agent.poll() is None:
            agent.send_signal(signal.SIGTERM)
            try:
                agent.wait(timeout=10)
            except subprocess.TimeoutExpired:
                agent.kill()
                agent.wait()
    assert agent.returncode == 0

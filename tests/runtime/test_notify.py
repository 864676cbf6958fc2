"""systemd's readiness protocol (sd_notify): the standalone socket-mode
daemon (its own unit, ``Type=notify`` in systemd/pypmda.service) says
``READY=1`` on ``$NOTIFY_SOCKET`` once its socket is there for pmcd; an
agent pmcd starts inherits pmcd's unit's ``NOTIFY_SOCKET`` and never speaks
on it (pmcd.service is ``NotifyAccess=all``: it would speak for pmcd)."""

from __future__ import annotations

import os
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from pmda_py.testing.support import pmda_py_argv


@contextmanager
def _daemon(tmp_path: Path, *args: str, notify: str) -> Iterator[tuple[subprocess.Popen[bytes], Path]]:
    log = tmp_path / "pmda.log"
    env = {**os.environ, "NOTIFY_SOCKET": notify}
    proc = subprocess.Popen(
        pmda_py_argv("run", "-d", "253", "--table", "simple", "-l", str(log), *args),
        stdin=subprocess.DEVNULL,
        env=env,
    )
    try:
        yield proc, log
    finally:
        proc.kill()
        proc.wait()


def _listening(proc: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + 20
    while "listening" not in (log.read_text() if log.exists() else ""):
        assert proc.poll() is None, "the daemon ended"
        assert time.monotonic() < deadline, "the daemon never listened"
        time.sleep(0.05)


def _receiver(path: Path) -> socket.socket:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(str(path))
    return sock


def test_the_standalone_daemon_says_ready_once_its_socket_is_there(tmp_path: Path) -> None:
    address = tmp_path / "pmda.sock"
    with _receiver(tmp_path / "notify") as rx:
        rx.settimeout(20)
        with _daemon(tmp_path, "-u", str(address), "--standalone", notify=str(tmp_path / "notify")):
            message = rx.recv(4096).decode()
            assert address.is_socket(), "READY=1 came before the socket was there"
    assert message.splitlines() == ["READY=1", f"STATUS=listening on unix {address}"]


def test_an_abstract_notify_socket_is_reached(tmp_path: Path) -> None:
    name = f"pmda_py-notify-test-{os.getpid()}"
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as rx:
        rx.bind("\0" + name)
        rx.settimeout(20)
        with _daemon(tmp_path, "-u", str(tmp_path / "pmda.sock"), "--standalone", notify="@" + name):
            assert rx.recv(4096).decode().startswith("READY=1\n")


def test_an_agent_pmcd_starts_does_not_speak_for_pmcd(tmp_path: Path) -> None:
    """A socket agent started by pmcd (not --standalone), with pmcd's
    NOTIFY_SOCKET in its environment: nothing is sent."""
    with _receiver(tmp_path / "notify") as rx:
        rx.setblocking(False)
        with _daemon(tmp_path, "-u", str(tmp_path / "pmda.sock"), notify=str(tmp_path / "notify")) as (proc, log):
            _listening(proc, log)
            time.sleep(0.5)  # a READY sent with the "listening" line would be here by now
            try:
                got = rx.recv(4096)
            except BlockingIOError:
                got = b""
        assert got == b""

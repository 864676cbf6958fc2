"""Socket modes serve pmcd, not whoever connects first (issue 15).

Unit tests of the CREDS wait (:func:`pmda_py.runtime.admission.await_creds`) on trio's
mock clock, then the daemon as a process: idle, garbage and foreign-uid
peers are dropped while pmcd gets through; one pmcd session at a time;
``--standalone`` outlives pmcd sessions, the default exits with them.
"""

from __future__ import annotations

import os
import pwd
import signal
import socket
import struct
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import structlog.testing
import trio
import trio.testing

from pmda_py.config import ConfigFileError, parse_args
from pmda_py.runtime.admission import await_creds
from pmda_py.session import Session
from pmda_py.testing.client import PmdaClient, connect_socket_pmda
from pmda_py.testing.support import pmda_py_argv, traversable_dir
from pmda_py.wire import CredsPdu, DescReqPdu, PduReader
from tests.conftest import opens_of, require
from tests.integration.pcpbed import as_nobody, foreign_uid_connect, free_port

# ------------------------------------------------------------ await_creds


def _gate() -> tuple[trio.StapledStream, trio.StapledStream, Session]:  # type: ignore[type-arg]
    ours, peer = trio.testing.memory_stream_pair()
    return ours, peer, Session(pid=4242, require_creds=True)


async def _read_creds(peer: trio.abc.Stream) -> CredsPdu:
    reader = PduReader()
    while (pdu := reader.next_pdu()) is None:
        reader.receive_data(await peer.receive_some(4096))
    assert isinstance(pdu, CredsPdu)
    return pdu


async def test_silent_peer_is_dropped_at_the_timeout(autojump_clock: trio.testing.MockClock) -> None:
    ours, peer, session = _gate()
    t0 = trio.current_time()
    why = await await_creds(ours, session, 3.0)
    assert why == "no CREDS within 3 s (0 bytes received)"
    assert trio.current_time() - t0 == pytest.approx(3.0)
    assert (await _read_creds(peer)).from_ == 4242  # we spoke first, as pmcd expects


async def test_timeout_is_for_the_whole_creds_not_each_read(autojump_clock: trio.testing.MockClock) -> None:
    """A peer trickling a byte a second never gets past the timeout."""
    ours, peer, session = _gate()
    creds = CredsPdu.cversion(0, from_=1).encode()

    async def trickle() -> None:
        for b in creds:
            await trio.sleep(1.0)
            await peer.send_all(bytes([b]))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(trickle)
        t0 = trio.current_time()
        why = await await_creds(ours, session, 3.5)
        nursery.cancel_scope.cancel()
    assert why == "no CREDS within 3.5 s (3 bytes received)"
    assert trio.current_time() - t0 == pytest.approx(3.5)


async def test_creds_in_pieces_within_the_timeout_admits_and_keeps_what_follows(
    autojump_clock: trio.testing.MockClock,
) -> None:
    ours, peer, session = _gate()
    data = CredsPdu.cversion(0, from_=999).encode() + DescReqPdu(7, from_=2).encode()

    async def pmcd() -> None:
        await _read_creds(peer)
        await peer.send_all(data[:5])
        await trio.sleep(1.0)
        await peer.send_all(data[5:])

    async with trio.open_nursery() as nursery:
        nursery.start_soon(pmcd)
        assert await await_creds(ours, session, 3.0) is None
    assert session.handshake_done
    assert session.peer_creds is not None and session.peer_creds.from_ == 999
    ev = session.next_event()  # the request that came with the CREDS is still there
    assert getattr(ev, "pdu", None) == DescReqPdu(7, from_=2)


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (b"GET / HTTP/1.0\r\n\r\n", "not pmcd: first PDU is 0x2f204854, not CREDS"),
        (DescReqPdu(1).encode(), "not pmcd: first PDU is DESC_REQ, not CREDS"),
        (struct.pack("!ii", 8, 0x700C), "not pmcd: first PDU length 8 cannot be a CREDS"),
    ],
)
async def test_garbage_or_another_pdu_is_dropped_at_once(
    autojump_clock: trio.testing.MockClock, data: bytes, expected: str
) -> None:
    ours, peer, session = _gate()
    await peer.send_all(data)  # no close: refused on what arrived, not on EOF or timeout
    t0 = trio.current_time()
    assert await await_creds(ours, session, 3.0) == expected
    assert trio.current_time() == t0


async def test_peer_closing_without_creds(autojump_clock: trio.testing.MockClock) -> None:
    ours, peer, session = _gate()

    async def peer_side() -> None:
        await _read_creds(peer)
        await peer.send_eof()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(peer_side)
        assert await await_creds(ours, session, 3.0) == "closed without sending CREDS"


async def test_peer_closing_mid_creds(autojump_clock: trio.testing.MockClock) -> None:
    ours, peer, session = _gate()

    async def peer_side() -> None:
        await _read_creds(peer)
        await peer.send_all(CredsPdu.cversion(0).encode()[:10])
        await peer.send_eof()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(peer_side)
        why = await await_creds(ours, session, 3.0)
    assert why == "closed in the middle of its first PDU (10 bytes)"


def test_creds_timeout_option_and_config_key(tmp_path: Path) -> None:
    assert parse_args(["-u", "/x"]).creds_timeout == 3.0
    assert parse_args(["-u", "/x", "--creds-timeout", "0.5"]).creds_timeout == 0.5
    cfg = tmp_path / "c.conf"
    cfg.write_text("[pmda]\ncreds_timeout = 7\nstandalone = yes\n")
    c = parse_args(["-c", str(cfg), "-u", "/x"])
    assert (c.creds_timeout, c.standalone) == (7.0, True)
    assert parse_args(["-c", str(cfg), "-u", "/x", "--creds-timeout", "2"]).creds_timeout == 2.0
    assert parse_args(["-u", "/x", "--standalone"]).standalone
    assert not parse_args(["-u", "/x"]).standalone
    cfg.write_text("[pmda]\nname = x\ncreds_timeout = 0\n")
    with pytest.raises(ConfigFileError, match=r":3: \[pmda\] creds_timeout: 0 out of range"):
        parse_args(["-c", str(cfg)])
    cfg.write_text("[pmda]\nstandalone = maybe\n")
    with pytest.raises(ConfigFileError, match=r":2: \[pmda\] standalone: not a boolean"):
        parse_args(["-c", str(cfg)])
    with pytest.raises(SystemExit):
        parse_args(["-u", "/x", "--creds-timeout", "-1"])
    assert parse_args(["-i", "4000", "--bind", "0.0.0.0"]).bind_address == "0.0.0.0"
    with pytest.raises(SystemExit):
        parse_args(["-u", "/x", "--bind", "0.0.0.0"])


# ------------------------------------------------------ the daemon, as a process


#: ``pmda-py`` whose privilege drop (between "listening" -- a standalone
#: agent's READY=1 -- and serving) first sends the process a SIGHUP, as
#: systemd's reload may land there
_EARLY_SIGHUP = """
import os, signal, sys
import pmda_py.runtime.main as m
from pmda_py.cli import main
drop = m.drop_privileges
def sighup_then_drop(user):
    os.kill(os.getpid(), signal.SIGHUP)
    drop(user)
m.drop_privileges = sighup_then_drop
sys.exit(main(sys.argv[1:]))
"""


class Daemon:
    def __init__(self, root: Path, *args: str, early_sighup: bool = False) -> None:
        self.log = root / "pmda.log"
        cmd = pmda_py_argv(
            "run",
            "-d",
            "253",
            "-l",
            str(self.log),
            "--state-dir",
            str(root / "state"),
            "--table",
            "simple=simple",
            "--table",
            "control=simple.control",
            *args,
        )
        if early_sighup:
            cmd[1:3] = ["-c", _EARLY_SIGHUP]  # (in place of -m pmda_py)
        self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL)
        self.wait_log("listening")

    def text(self) -> str:
        try:
            return self.log.read_text()
        except OSError:
            return ""

    def wait_log(self, needle: str, count: int = 1, timeout: float = 15.0) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            text = self.text()
            if text.count(needle) >= count:
                return text
            if self.proc.poll() is not None and needle != "exit":
                break
            time.sleep(0.05)
        raise AssertionError(f"{needle!r} x{count} not in the log:\n{self.text()}")

    def lines(self, event: str) -> list[str]:
        return [line for line in self.text().splitlines() if f" {event} " in line]

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


@pytest.fixture
def root() -> Iterator[Path]:
    """World-traversable (a process as 'nobody' must reach the socket)."""
    with traversable_dir("pmda_py-admission-") as d:
        yield d


@pytest.fixture
def daemons() -> Iterator[list[Daemon]]:
    started: list[Daemon] = []
    try:
        yield started
    finally:
        for d in started:
            d.stop()


async def _pmcd(**where: object) -> PmdaClient:
    """A client that answers CREDS as pmcd does."""
    client = PmdaClient(await connect_socket_pmda(**where), timeout=5.0)  # type: ignore[arg-type]
    await client.handshake()
    return client


async def _fetch(client: PmdaClient, *names: str) -> dict[str, object]:
    return dict(await client.fetch_values(list(names)))


@pytest.mark.slow
async def test_unix_only_pmcd_gets_a_session_and_standalone_outlives_it(root: Path, daemons: list[Daemon]) -> None:
    require(os.geteuid() == 0, "needs root (to run a child as 'nobody')")
    path = str(root / "pmda.sock")
    d = Daemon(root, "-u", path, "--standalone", "--creds-timeout", "2")
    daemons.append(d)
    os.chmod(path, 0o666)  # the file mode is the first wall; open it to reach the uid check
    idle = await connect_socket_pmda(unix=path)
    garbage = await connect_socket_pmda(unix=path)
    await garbage.send_all(b"GET / HTTP/1.0\r\n\r\n")
    # refused before any PDU: not even our CREDS reach it
    assert foreign_uid_connect(path) == (pwd.getpwnam("nobody").pw_uid, 0)

    first = await _pmcd(unix=path)  # while the idle one still waits
    v = await _fetch(first, "simple.numfetch", "simple.control.pid", "simple.control.fetch.count")
    assert v["simple.control.pid"] == d.proc.pid
    d.wait_log("no CREDS within 2 s")
    await idle.aclose()
    await garbage.aclose()
    text = d.text()
    assert len(d.lines("peer_refused")) == 1 and "uid 65534 (nobody)" in text
    dropped = d.lines("peer_dropped")
    assert len(dropped) == 2, dropped  # one line each
    assert any("first PDU is 0x2f204854, not CREDS" in line for line in dropped)
    assert any("no CREDS within 2 s (0 bytes received)" in line for line in dropped)

    # one pmcd at a time: a second valid pmcd is refused while the first is live
    second = PmdaClient(await connect_socket_pmda(unix=path), timeout=5.0)
    await second.handshake()
    with pytest.raises(EOFError):
        await second.receive(timeout=5)
    await second.aclose()
    assert "a pmcd session is live" in d.wait_log("pmcd_refused")
    v2 = await _fetch(first, "simple.numfetch", "simple.control.fetch.count")
    assert v2["simple.control.fetch.count"] == v["simple.control.fetch.count"] + 1  # type: ignore[operator]
    await first.aclose()

    # pmcd goes away: the daemon listens again, same pid, counters continue
    d.wait_log("action=listening")
    again = await _pmcd(unix=path)
    v3 = await _fetch(again, "simple.numfetch", "simple.control.pid", "simple.control.fetch.count")
    assert v3["simple.control.pid"] == d.proc.pid
    assert v3["simple.numfetch"] == v2["simple.numfetch"] + 1  # type: ignore[operator]
    assert v3["simple.control.fetch.count"] == v2["simple.control.fetch.count"] + 1
    await again.aclose()
    assert d.proc.poll() is None
    d.stop()
    assert d.proc.returncode == 0
    assert not await trio.Path(path).exists()  # our socket file goes with us


async def test_a_new_pmcd_meeting_a_session_that_is_ending_is_served(root: Path, daemons: list[Daemon]) -> None:
    """A restarted pmcd may complete its handshake before the old channel's
    EOF is read: it waits (takeover grace, 1 s) instead of being refused."""
    port = free_port()
    d = Daemon(root, "-i", str(port), "--standalone")
    daemons.append(d)
    old = await _pmcd(inet=port)
    await _fetch(old, "simple.numfetch")
    new = await _pmcd(inet=port)  # handshake done while the old session is live
    await old.aclose()
    assert (await _fetch(new, "simple.numfetch"))["simple.numfetch"] == 2
    await new.aclose()
    text = d.wait_log("session_end", count=2)
    assert text.count(" session_start ") == 2 and " pmcd_refused " not in text


async def test_started_by_pmcd_exits_with_its_session_not_with_an_intruder(root: Path, daemons: list[Daemon]) -> None:
    port = free_port()
    d = Daemon(root, "-i", str(port), "--creds-timeout", "1")
    daemons.append(d)
    garbage = await connect_socket_pmda(inet=port)
    await garbage.send_all(b"\x00" * 64)
    idle = await connect_socket_pmda(inet=port)
    await idle.aclose()  # closed without a word (and with our CREDS unread)
    await garbage.aclose()
    d.wait_log("peer_dropped", count=2)
    assert d.proc.poll() is None
    client = await _pmcd(inet=port)
    assert (await _fetch(client, "simple.control.pid"))["simple.control.pid"] == d.proc.pid
    await client.aclose()
    assert d.proc.wait(timeout=10) == 0  # pmcd went away: so do we (libpcp_pmda's lifecycle)
    assert "reason=eof" in d.wait_log("exit")
    assert "action=exiting" in d.text()


async def test_unix_socket_file_is_recreated_after_pmcd_removes_it(root: Path, daemons: list[Daemon]) -> None:
    path = root / "pmda.sock"
    d = Daemon(root, "-u", str(path), "--standalone")
    daemons.append(d)
    client = await _pmcd(unix=str(path))
    await _fetch(client, "simple.numfetch")
    await client.aclose()
    path.unlink()  # what pmcd's ShutdownAgent / CleanupAgent do after closing the channel
    d.wait_log("socket_recreated")
    assert path.is_socket() and path.stat().st_mode & 0o777 == 0o660
    client = await _pmcd(unix=str(path))
    assert (await _fetch(client, "simple.numfetch"))["simple.numfetch"] == 2
    await client.aclose()


async def test_a_flood_of_idle_connections_cannot_starve_pmcd(root: Path, daemons: list[Daemon]) -> None:
    port = free_port()
    d = Daemon(root, "-i", str(port), "--standalone")
    daemons.append(d)
    idle = [await connect_socket_pmda(inet=port) for _ in range(12)]
    client = await _pmcd(inet=port)  # the oldest waiting connections make room
    assert (await _fetch(client, "simple.control.pid"))["simple.control.pid"] == d.proc.pid
    await client.aclose()
    d.wait_log("evicted")
    d.wait_log("session_end")
    await trio.sleep(0.5)
    # 5 connections were evicted: one line says so, the next ones are counted
    # (a summary at most every 10 s), not a line each (issue 19, case 10)
    assert d.text().count("evicted: more than 8 connections waiting for CREDS") == 1
    for s in idle:
        await s.aclose()


async def test_inet_listens_on_loopback_unless_told(root: Path, daemons: list[Daemon]) -> None:
    port = free_port()
    d = Daemon(root, "-i", str(port), "--standalone")
    daemons.append(d)
    listening = await trio.Path("/proc/net/tcp").read_text()
    assert f"0100007F:{port:04X} 00000000:0000 0A" in listening  # 127.0.0.1:port, LISTEN
    d.stop()
    d2 = Daemon(root, "-i", str(port), "--standalone", "--bind", "127.0.0.2")
    daemons.append(d2)
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", port), timeout=2).close()
    client = await _pmcd(inet=port, host="127.0.0.2")
    assert (await _fetch(client, "simple.control.pid"))["simple.control.pid"] == d2.proc.pid
    await client.aclose()
    assert "bind=127.0.0.2" in d2.text()


async def test_reload_keeps_the_listener_settings(root: Path, daemons: list[Daemon]) -> None:
    cfg = root / "pypmda.conf"
    base = "[pmda]\nname = pypmda\ndomain = 253\nstandalone = yes\n"  # tables: the command line's
    cfg.write_text(base)
    port = free_port()
    d = Daemon(root, "-c", str(cfg), "-i", str(port))
    daemons.append(d)
    assert "standalone=True" in d.text() and "creds_timeout=3.0" in d.text()
    cfg.write_text(base.replace("standalone = yes\n", "standalone = yes\ncreds_timeout = 9\n"))
    d.proc.send_signal(signal.SIGHUP)
    text = d.wait_log("reload_partial")
    assert "not_applied=['creds_timeout']" in text
    d.proc.send_signal(signal.SIGHUP)  # the running settings are still the old ones: said again
    assert "not_applied=['creds_timeout']" in d.wait_log("reload_partial", count=2)


async def test_reload_says_the_user_and_log_it_cannot_change(root: Path, daemons: list[Daemon]) -> None:
    """The user the daemon dropped to and its log were fixed at the start
    (root is gone): a SIGHUP after the config names another user or log
    says they are not applied, rather than a plain "reloaded" while the
    daemon runs on as before."""
    me = pwd.getpwuid(os.geteuid()).pw_name
    cfg = root / "pypmda.conf"
    base = f"[pmda]\nname = pypmda\ndomain = 253\nuser = {me}\n"
    cfg.write_text(base)
    d = Daemon(root, "-c", str(cfg), "-i", str(free_port()), "--standalone")
    daemons.append(d)
    cfg.write_text(base.replace(f"user = {me}", "user = nobody"))
    d.proc.send_signal(signal.SIGHUP)
    text = d.wait_log("reload_partial")
    assert "username" in text.split(" reload_partial ")[1].splitlines()[0], text


def test_a_sighup_right_after_listening_reloads(root: Path, daemons: list[Daemon]) -> None:
    """A SIGHUP that comes between the "listening" line (a standalone
    agent's READY=1: systemd may reload it at once) and the start of
    serving is a reload, heard once the agent serves.  The signals were
    caught only from then on: such a SIGHUP ended the agent (its default
    action), before any line of its own."""
    me = pwd.getpwuid(os.geteuid()).pw_name
    cfg = root / "pypmda.conf"
    cfg.write_text(f"[pmda]\nname = pypmda\ndomain = 253\nuser = {me}\n")
    d = Daemon(root, "-c", str(cfg), "-i", str(free_port()), "--standalone", early_sighup=True)
    daemons.append(d)
    text = d.wait_log("reloaded")
    assert " sighup " in text and d.proc.poll() is None, text
    d.stop()
    assert d.proc.returncode == 0 and "reason=SIGTERM" in d.text(), d.text()


# ------------------------------------------------ inet peers: who owns the socket


def _as_nobody_tcp(port: int, family: int, host: str, data: bytes) -> tuple[int, int | str]:
    """As 'nobody', connect to ``host:port``, send ``data`` (pmcd's CREDS):
    the uid and how many bytes were read before EOF or reset (or the error)."""

    def connect() -> int:
        s = socket.socket(family, socket.SOCK_STREAM)
        s.settimeout(10)
        s.connect((host, port))
        s.sendall(data)
        got = 0
        try:
            while chunk := s.recv(4096):
                got += len(chunk)
        except ConnectionResetError:  # closed with our CREDS unread: a reset, after what came
            pass
        return got

    return as_nobody(connect)


@pytest.mark.parametrize("family", ["inet", "ipv6"])
async def test_inet_impostor_is_refused_before_any_pdu(root: Path, daemons: list[Daemon], family: str) -> None:
    """Issue 19, case 5: a local process of another uid connecting first and
    sending CREDS does not become "the pmcd session": refused before any
    PDU (not even our CREDS reach it), logged; pmcd (root here) gets in."""
    require(os.geteuid() == 0, "needs root (to run a child as 'nobody')")
    port = free_port()
    flag, fam, host = ("-i", socket.AF_INET, "127.0.0.1") if family == "inet" else ("-6", socket.AF_INET6, "::1")
    d = Daemon(root, flag, str(port), "--standalone")
    daemons.append(d)
    creds = CredsPdu.cversion(0, from_=4242).encode()
    assert _as_nobody_tcp(port, fam, host, creds) == (pwd.getpwnam("nobody").pw_uid, 0)
    assert _as_nobody_tcp(port, fam, host, creds) == (pwd.getpwnam("nobody").pw_uid, 0)
    where = {"inet": port} if family == "inet" else {"ipv6": port}
    client = await _pmcd(**where)
    assert (await _fetch(client, "simple.control.pid"))["simple.control.pid"] == d.proc.pid
    await client.aclose()
    refused = d.lines("peer_refused")
    assert len(refused) == 1, refused  # the second impostor is counted, not logged again
    assert "uid 65534 (nobody) is not one of" in refused[0]
    assert " session_start " in d.text() and "pmcd_pid=4242" not in d.text()


def test_tcp_peer_uid_finds_the_owner_of_the_other_end(tmp_path: Path) -> None:
    from pmda_py.runtime.admission import tcp_peer_uid

    for fam, host in ((socket.AF_INET, "127.0.0.1"), (socket.AF_INET6, "::1")):
        with socket.socket(fam) as lsock:
            lsock.bind((host, 0))
            lsock.listen(1)
            with socket.create_connection(lsock.getsockname()[:2]) as c:
                conn, addr = lsock.accept()
                with conn:
                    assert tcp_peer_uid(fam, addr, conn.getsockname()) == os.geteuid()
                    # the same pair seen the other way round is our accepted socket, not the peer's
                    assert tcp_peer_uid(fam, conn.getsockname(), c.getsockname()) == os.geteuid()
                    assert tcp_peer_uid(fam, (host, 1), conn.getsockname()) is None  # no such connection
    # a /proc that has the connection in TIME_WAIT only (uid 0 there) is not an answer
    (tmp_path / "tcp").write_text(
        "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n"
        "   0: 0100007F:A000 0100007F:0FA0 06 00000000:00000000 03:00001000 00000000     0        0 0\n"
        "   1: 0100007F:A001 0100007F:0FA0 01 00000000:00000000 00:00000000 00000000  1234        0 77\n"
    )
    assert tcp_peer_uid(socket.AF_INET, ("127.0.0.1", 0xA000), ("127.0.0.1", 4000), proc=str(tmp_path)) is None
    assert tcp_peer_uid(socket.AF_INET, ("127.0.0.1", 0xA001), ("127.0.0.1", 4000), proc=str(tmp_path)) == 1234


def test_refusals_are_logged_once_then_counted() -> None:
    """Issue 19, case 10: a flood of refusals is a line per peer and kind of
    reason, then a counted summary at most every interval."""

    from pmda_py.runtime.admission import RefusalLog

    now = [100.0]
    rl = RefusalLog(interval=10.0, clock=lambda: now[0])
    with structlog.testing.capture_logs() as logs:
        for k in range(900):
            rl.refused("peer_dropped", "uid=0", f"no CREDS within 3 s ({k} bytes received)", peer=f"x:{k}")
        rl.refused("peer_dropped", "uid=0", "not pmcd: first PDU is 0x2f204854, not CREDS")
        rl.refused("peer_refused", "uid=65534", "uid 65534 (nobody) is not one of pcp, root")
        assert len(logs) == 3
        assert rl.flush() == 0  # nothing due before the interval
        now[0] += 10.0
        assert rl.flush() == 1
        assert logs[-1]["repeated"] == 899 and logs[-1]["event"] == "peer_dropped"
        now[0] += 10.0
        assert rl.flush() == 0  # nothing new: nothing said
        rl.refused("peer_dropped", "uid=0", "no CREDS within 3 s (0 bytes received)")
        assert len(logs) == 5  # quiet for an interval: the next one is a line again
        for k in range(10_000):  # many peers: a bounded number of lines and entries
            rl.refused("peer_refused", f"host{k}", "no local socket owns the connection")
        assert len(logs) <= 5 + RefusalLog.max_keys + 1
        assert len(rl._entries) <= RefusalLog.max_keys + 1


async def test_a_peer_no_local_socket_owns_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    """A connection /proc/net/tcp does not show from this host's side (a
    remote peer, with --bind on another address) is refused before any PDU;
    a local one of an allowed uid is not."""
    from pmda_py.config import Config
    from pmda_py.dispatch import Dispatcher
    from pmda_py.runtime import sockets
    from pmda_py.runtime.pump import Active, TrioRunner

    server = sockets.SocketServer(Config(transport="inet", address="0"), Active(Dispatcher(253, [], TrioRunner())))
    listener = trio.socket.socket()
    await listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    client = trio.socket.socket()
    await client.connect(listener.getsockname())
    conn, addr = await listener.accept()
    with listener, client, conn:
        check = await server._peer(conn, addr)
        peer, who, refusal = check.peer, check.who, check.refusal
        assert refusal is None and who == f"uid={os.geteuid()}" and peer.endswith(f",uid={os.geteuid()}")
        monkeypatch.setattr(sockets, "tcp_peer_uids", lambda _family, wanted: [None] * len(wanted))
        check = await server._peer(conn, addr)
        peer, who, refusal = check.peer, check.who, check.refusal
        assert refusal is not None and "not pmcd on this host" in refusal and who == "127.0.0.1"


async def test_pcp_conf_is_not_read_again_for_every_connection(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Who may be pmcd is asked at every unix connection: the PCP user it
    names comes from pcp.conf, parsed once, not once per connection."""

    from pmda_py.config import Config
    from pmda_py.dispatch import Dispatcher
    from pmda_py.runtime.pump import Active, TrioRunner
    from pmda_py.runtime.sockets import SocketServer

    user = pwd.getpwuid(os.geteuid()).pw_name
    conf = tmp_path / "pcp.conf"
    conf.write_text(f"PCP_VERSION=6.0.3\nPCP_USER={user}\n")
    monkeypatch.setenv("PCP_CONF", str(conf))
    monkeypatch.delenv("PCP_USER", raising=False)
    opened = opens_of(monkeypatch, conf)
    path = str(tmp_path / "s")
    server = SocketServer(Config(transport="unix", address=path), Active(Dispatcher(253, [], TrioRunner())))
    listener = trio.socket.socket(socket.AF_UNIX)
    await listener.bind(path)
    listener.listen(8)
    with listener:
        for _ in range(6):
            client = trio.socket.socket(socket.AF_UNIX)
            await client.connect(path)
            conn, addr = await listener.accept()
            with client, conn:
                check = await server._peer(conn, addr)
                peer, who, refusal = check.peer, check.who, check.refusal
                assert refusal is None and who == f"uid={os.geteuid()}", (peer, refusal)
    assert len(opened) <= 1, f"pcp.conf read {len(opened)} times for 6 connections"


@pytest.mark.parametrize(
    ("conf", "env", "user"),
    [("", None, "pcp"), ("PCP_USER=nobody\n", None, "nobody"), ("PCP_USER=pcp\n", "nobody", "nobody")],
)
def test_who_may_be_pmcd_is_root_the_pcp_user_and_ourselves(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, conf: str, env: str | None, user: str
) -> None:
    """docs/security.md: root, the PCP user (``PCP_USER`` in pcp.conf, the
    environment over it, default ``pcp``) and the agent's own uid; no one else."""
    from pmda_py.runtime.admission import allowed_uids

    try:
        uid = pwd.getpwnam(user).pw_uid
    except KeyError:
        pytest.skip(f"no user {user!r} here")
    (tmp_path / "pcp.conf").write_text(f"PCP_VERSION=6.0.3\n{conf}")
    monkeypatch.setenv("PCP_CONF", str(tmp_path / "pcp.conf"))
    if env is None:
        monkeypatch.delenv("PCP_USER", raising=False)
    else:
        monkeypatch.setenv("PCP_USER", env)
    allowed = allowed_uids()
    assert set(allowed) == {0, uid, os.geteuid()}, allowed
    assert allowed[uid] == user


async def test_refusal_lines_carry_no_bytes_from_the_peer(root: Path, daemons: list[Daemon]) -> None:
    """docs/security.md: a refused peer's bytes never reach the log, in any
    spelling (as sent, hex, escaped): only counts and the head of a first
    PDU that is not CREDS, as a number."""
    port = free_port()
    d = Daemon(root, "-i", str(port), "--standalone")
    daemons.append(d)
    marker = b"XyZzYsEcReT"
    creds_head = struct.pack("!iii", 20, 0x700C, 0)  # CREDS header, then no credential in it
    payloads = [
        marker * 40,  # text where a header should be
        struct.pack("!iii", 12 + len(marker) * 8, 0x700D, 0) + marker * 8,  # another PDU, marker in its body
        creds_head + marker[:8],  # a CREDS whose body is the marker
        struct.pack("!iii", 1 << 20, 0x700C, 0) + marker * 30,  # a CREDS too long to be one
        b"\x00\x00\x00\x14" + marker,  # a length, then the marker as type and body
    ]
    for data in payloads:
        stream = await connect_socket_pmda(inet=port)
        await stream.send_all(data)
        with trio.move_on_after(5):
            while await stream.receive_some(65536):  # until the agent drops it
                pass
        await stream.aclose()
    d.wait_log("not pmcd", 1)
    client = await _pmcd(inet=port)  # pmcd still gets through, and the log is flushed by then
    assert (await _fetch(client, "simple.control.pid"))["simple.control.pid"] == d.proc.pid
    await client.aclose()
    text = d.text()
    for spelling in (marker, marker[:5], marker.hex().encode(), marker[:5].hex().encode(), repr(marker[:5]).encode()):
        for form in (spelling.decode(), spelling.decode().lower(), spelling.decode().upper()):
            assert form not in text, (form, text)

"""Socket modes: the peer check before any PDU (the uid of a connection's
other end in /proc/net/tcp on -i/-6) under a flood of connections: how many
connections it holds, and how many reads of /proc/net/tcp they cost."""

from __future__ import annotations

import os
import socket

import attrs
import pytest
import structlog.testing
import trio
import trio.testing


async def test_connections_awaiting_their_peer_check_are_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    """On -i/-6 a connection's uid is looked up in /proc/net/tcp before any
    PDU, one lookup at a time.  Connections arriving faster than that must
    not each hold a descriptor while they wait (a local user's flood would
    exhaust the agent's descriptors and shut pmcd out): at most
    ``max_checking`` are accepted and unchecked at once; the others wait in
    the listen queue."""
    import threading

    from pmda_py.config import Config
    from pmda_py.dispatch import Dispatcher
    from pmda_py.runtime import sockets
    from pmda_py.runtime.pump import Active, TrioRunner

    release = threading.Event()

    def blocked_lookup(_family: int, wanted: list[object]) -> list[int | None]:
        release.wait(30)
        return [None] * len(wanted)

    monkeypatch.setattr(sockets, "tcp_peer_uids", blocked_lookup)
    server = sockets.SocketServer(Config(transport="inet", address="0"), Active(Dispatcher(253, [], TrioRunner())))
    server.max_checking = 4
    await server.open()
    assert server._sock is not None
    where = server._sock.getsockname()
    before = set(os.listdir("/proc/self/fd"))
    clients: list[socket.socket] = []
    try:
        with structlog.testing.capture_logs() as logs:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(server.serve)
                for _ in range(12):
                    c = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                    c.setblocking(False)
                    c.connect_ex(where)
                    clients.append(c)
                try:
                    await trio.testing.wait_all_tasks_blocked(0.2)
                    ours = {str(c.fileno()) for c in clients}
                    accepted = {f for f in set(os.listdir("/proc/self/fd")) - before - ours if _is_socket(f)}
                finally:
                    release.set()
                nursery.cancel_scope.cancel()
    finally:
        release.set()
        for c in clients:
            c.close()
        server.close()
    assert len(accepted) <= server.max_checking, f"{len(accepted)} connections held unchecked: {accepted}"
    # the limit reached is one line, not one per connection held back
    assert [e["event"] for e in logs].count("accept_paused") == 1, logs


def _is_socket(fd: str) -> bool:
    try:
        return os.readlink(f"/proc/self/fd/{fd}").startswith("socket:")
    except OSError:
        return False


async def test_connections_waiting_for_a_lookup_share_the_next_one(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each uid lookup reads the whole of /proc/net/tcp, which a local user
    can make long (connections in TIME_WAIT are in it), one lookup at a time:
    connections that arrive while one runs are all answered by the next
    read, not by a read each, so pmcd's connection waits for at most two
    reads behind a flood, not for one per connection ahead of it."""
    import builtins
    import threading

    from pmda_py.config import Config
    from pmda_py.dispatch import Dispatcher
    from pmda_py.runtime import sockets
    from pmda_py.runtime.pump import Active, TrioRunner

    gate = threading.Event()
    reads: list[str] = []
    real_open = builtins.open

    def gated_open(file: object, *args: object, **kw: object) -> object:
        if file == "/proc/net/tcp":
            reads.append(str(file))
            gate.wait(30)
        return real_open(file, *args, **kw)  # type: ignore[call-overload]

    monkeypatch.setattr(builtins, "open", gated_open)
    server = sockets.SocketServer(Config(transport="inet", address="0"), Active(Dispatcher(253, [], TrioRunner())))
    server.config = attrs.evolve(server.config, creds_timeout=0.01)
    await server.open()
    assert server._sock is not None
    where = server._sock.getsockname()
    clients: list[socket.socket] = []
    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(server.serve)
            try:
                for _ in range(6):
                    c = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                    c.setblocking(False)
                    c.connect_ex(where)
                    clients.append(c)
                await trio.testing.wait_all_tasks_blocked(0.2)  # one read runs (held), five wait
            finally:
                gate.set()
            with trio.fail_after(20):
                while server.checking or len(reads) == 0:  # noqa: ASYNC110 -- the peer checks end
                    await trio.sleep(0.01)
            nursery.cancel_scope.cancel()
    finally:
        gate.set()
        for c in clients:
            c.close()
        server.close()
    assert len(reads) <= 2, f"{len(reads)} reads of /proc/net/tcp for 6 connections"

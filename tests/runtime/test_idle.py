"""PipeStream's wait outside trio's loop (pmda_py/runtime/idle.py): a
request that comes while the process is idle is read by a block in poll(2),
and nothing else that wakes trio -- a timer, another thread's result, a
signal -- waits for pmcd meanwhile; a task waiting for other I/O keeps the
wait in trio's hands.  Each test lets the block last up to a minute
(``LONGEST``) and fails after ten seconds, so a wake-up the block misses
fails the test instead of being picked up at the block's end."""

from __future__ import annotations

import os
import signal
import socket
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest
import trio
import trio.testing

from pmda_py.runtime import idle
from pmda_py.runtime.pipe import PipeStream


@pytest.fixture
async def pipe(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[tuple[PipeStream, int]]:
    """A PipeStream reading a fresh pipe (and writing another, unread),
    and the fd that writes what it reads (closed by the test or here)."""
    monkeypatch.setattr(idle, "LONGEST", 60.0)
    r, w = os.pipe()
    r2, w2 = os.pipe()
    stream = PipeStream(r, w2)  # owns r and w2
    try:
        yield stream, w
    finally:
        await stream.aclose()
        os.close(r2)
        try:
            os.close(w)
        except OSError:
            pass  # the test closed it


def _later(delay: float, fn: object, *args: object) -> threading.Thread:
    assert callable(fn)
    t = threading.Timer(delay, fn, args)
    t.start()
    return t


async def test_a_request_while_idle_is_read_by_the_block(pipe: tuple[PipeStream, int]) -> None:
    stream, w = pipe
    _later(0.2, os.write, w, b"request")
    with trio.fail_after(10):
        assert await stream.receive_some() == b"request"
    assert stream.idle is not None and stream.idle.blocked == 1 and stream.idle.declined == 0


async def test_eof_while_idle_is_read(pipe: tuple[PipeStream, int]) -> None:
    stream, w = pipe
    _later(0.2, os.close, w)
    with trio.fail_after(10):
        assert await stream.receive_some() == b""
    assert stream.idle is not None and stream.idle.blocked == 1


async def _timer() -> None:
    await trio.sleep(0.2)


async def _thread() -> None:
    await trio.to_thread.run_sync(time.sleep, 0.2)


async def _read_after(stream: PipeStream, w: int, wake: Callable[[], Awaitable[None]]) -> bytes | bytearray:
    """What the stream reads while a task, once ``wake`` returns (it sleeps,
    or its thread does, while the read waits), writes to the pipe."""

    async def task() -> None:
        await wake()
        os.write(w, b"after the wake-up")

    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(task)
            await trio.testing.wait_all_tasks_blocked()
            return await stream.receive_some()


@pytest.mark.parametrize("wake", [_timer, _thread], ids=["timer", "thread's result"])
async def test_a_wake_up_of_trio_does_not_wait_for_pmcd(
    pipe: tuple[PipeStream, int], wake: Callable[[], Awaitable[None]]
) -> None:
    """A task woken by a deadline, or by another thread's run_sync_soon
    (``to_thread``), runs while the pipe is waited for: it writes what
    the wait then reads."""
    stream, w = pipe
    assert await _read_after(stream, w, wake) == b"after the wake-up"
    assert stream.idle is not None and stream.idle.blocked >= 1


async def test_a_signal_does_not_wait_for_pmcd(pipe: tuple[PipeStream, int]) -> None:
    stream, w = pipe

    async def on_signal(receiver: AsyncIterator[int]) -> None:
        async for _ in receiver:
            os.write(w, b"after the signal")
            return

    with trio.fail_after(10), trio.open_signal_receiver(signal.SIGUSR1) as receiver:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(on_signal, receiver)
            await trio.testing.wait_all_tasks_blocked()  # the receiver waits
            _later(0.2, os.kill, os.getpid(), signal.SIGUSR1)
            assert await stream.receive_some() == b"after the signal"
    assert stream.idle is not None and stream.idle.blocked >= 1


async def test_a_task_waiting_for_other_io_keeps_trio_s_wait(pipe: tuple[PipeStream, int]) -> None:
    stream, w = pipe
    a, b = socket.socketpair()
    a.setblocking(False)
    got: list[bytes] = []

    async def reader() -> None:
        await trio.lowlevel.wait_readable(a)
        got.append(a.recv(100))
        os.write(w, b"after the socket")

    try:
        with trio.fail_after(10):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(reader)
                await trio.testing.wait_all_tasks_blocked()  # the reader waits for its socket
                _later(0.2, b.send, b"socket data")
                assert await stream.receive_some() == b"after the socket"
    finally:
        a.close()
        b.close()
    assert got == [b"socket data"]
    assert stream.idle is not None and stream.idle.declined >= 1 and stream.idle.blocked == 0


async def test_an_idle_wait_comes_before_the_read(
    pipe: tuple[PipeStream, int], monkeypatch: pytest.MonkeyPatch
) -> None:
    """pmcd asks again only after our reply, so the stream waits first and
    reads once, when the request is there: no read is tried (and refused)
    before the wait, whether the request comes later or is there already."""
    stream, w = pipe
    reads: list[str] = []
    real_read = os.read

    def counting_read(fd: int, n: int) -> bytes:
        try:
            data = real_read(fd, n)
        except BlockingIOError:
            reads.append("refused")
            raise
        reads.append("read")
        return data

    monkeypatch.setattr(os, "read", counting_read)
    _later(0.2, os.write, w, b"later")
    with trio.fail_after(10):
        assert await stream.receive_some() == b"later"
    os.write(w, b"there")
    with trio.fail_after(10):
        assert await stream.receive_some() == b"there"
    assert reads == ["read", "read"]
    assert stream.idle is not None and stream.idle.blocked == 2


async def test_the_loop_read_directly_agrees_with_trio_s_statistics() -> None:
    """The wait reads trio's run loop where trio keeps it (idle._Loop);
    in every state the wait tells apart -- idle, a task runnable, a
    run_sync_soon callback queued (plain or idempotent), a task waiting to
    read or to write, a deadline near -- it must say what
    ``trio.lowlevel.current_statistics()`` says."""
    loop = idle._Loop.of()
    assert loop is not None, "this trio keeps its run loop elsewhere: the wait would use current_statistics()"
    seen: list[tuple[str, bool]] = []

    def agree(state: str) -> None:
        st = trio.lowlevel.current_statistics()
        io: Any = st.io_statistics
        busy = bool(
            st.tasks_runnable or st.run_sync_soon_queue_size or io.tasks_waiting_read > 1 or io.tasks_waiting_write
        )
        got, public = loop.idle_for(), idle._Statistics().idle_for()
        assert (got is None) == busy == (public is None), state
        if got is not None and public is not None:
            assert got == public or abs(got - public) < 0.5, state
            assert got == st.seconds_to_next_deadline or abs(got - st.seconds_to_next_deadline) < 0.5, state
        seen.append((state, busy))

    await trio.testing.wait_all_tasks_blocked()
    agree("idle")
    with trio.move_on_after(30):
        agree("a deadline")
        await trio.lowlevel.checkpoint()
    token = trio.lowlevel.current_trio_token()
    token.run_sync_soon(lambda: None)
    agree("run_sync_soon")
    await trio.testing.wait_all_tasks_blocked()  # the callback runs
    token.run_sync_soon(lambda: None, idempotent=True)
    agree("idempotent run_sync_soon")
    await trio.testing.wait_all_tasks_blocked()
    a, b = socket.socketpair()
    a.setblocking(False)
    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(trio.lowlevel.wait_readable, a)
            agree("a task runnable")
            await trio.testing.wait_all_tasks_blocked()
            agree("a task waiting to read")
            nursery.cancel_scope.cancel()
        while True:  # fill the socket so that a write would wait
            try:
                a.send(b"x" * 65536)
            except BlockingIOError:
                break
        async with trio.open_nursery() as nursery:
            nursery.start_soon(trio.lowlevel.wait_writable, a)
            await trio.testing.wait_all_tasks_blocked()
            agree("a task waiting to write")
            nursery.cancel_scope.cancel()
    finally:
        a.close()
        b.close()
    await trio.testing.wait_all_tasks_blocked()
    agree("idle again")
    assert [busy for _s, busy in seen] == [False, False, True, True, True, True, True, False], seen


async def test_where_trio_keeps_its_loop_elsewhere_the_public_statistics_serve(
    pipe: tuple[PipeStream, int], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A trio whose run loop is not where idle._Loop looks: the wait asks
    current_statistics() instead, blocks while idle, and still hands the
    wait back to trio for a timer."""
    monkeypatch.setattr(idle._Loop, "of", classmethod(lambda cls: None))
    stream, w = pipe
    assert await _read_after(stream, w, _timer) == b"after the wake-up"
    assert stream.idle is not None and isinstance(stream.idle._loop, idle._Statistics)
    assert stream.idle.blocked >= 1

"""Pipe mode: pmcd's pipes as a trio stream, and stdout kept away from them.

:func:`protect_stdio` takes private copies of fds 0/1 for the PDU channel
before any table runs, so a stray ``print()`` goes to the log, not to pmcd;
:class:`PipeStream` reads and writes them without a trip through trio's
scheduler when the data is already there, and waits for pmcd outside
trio's event loop while nothing else could run (:mod:`pmda_py.runtime.idle`)."""

from __future__ import annotations

import os

import trio

from pmda_py.runtime.idle import IdleWait

__all__ = ["PipeStream", "protect_stdio"]


class PipeStream(trio.abc.Stream):
    """pmcd's pipes: we read fd ``rfd`` (stdin) and write fd ``wfd`` (stdout),
    directly when a request is waiting or the reply fits (see the methods)."""

    #: reads served without waiting before one yields to the other tasks
    YIELD_EVERY = 32

    def __init__(self, rfd: int, wfd: int) -> None:
        self._r = trio.lowlevel.FdStream(rfd)  # makes the fds non-blocking
        self._w = trio.lowlevel.FdStream(wfd)
        self._rfd, self._wfd = rfd, wfd
        self._unyielded = 0
        #: the wait outside trio's loop (None: trio's way only), made at the first wait, in the loop
        self.idle: IdleWait | None = None
        self._idle_known = False

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        # pmcd waits for each reply, so the pipe is almost always writable: write
        # at once and let trio wait (and checkpoint) only when it is full.  The
        # next receive_some waits for pmcd's next request, which yields.
        view = memoryview(data)
        try:
            while view:
                view = view[os.write(self._wfd, view) :]
        except BlockingIOError:
            await self._w.send_all(view)

    async def wait_send_all_might_not_block(self) -> None:
        await self._w.wait_send_all_might_not_block()

    async def receive_some(self, max_bytes: int | None = None) -> bytes | bytearray:
        # What is already there is read without a trip through trio's
        # scheduler; when nothing is, wait for the pipe outside trio's loop
        # if nothing else could run meanwhile (runtime/idle.py), else trio's
        # way (its own receive_some would checkpoint and try the read once
        # more first).  trio gets a turn at least every YIELD_EVERY reads.
        size = max_bytes or 65536
        if self._unyielded < self.YIELD_EVERY:
            try:
                data = os.read(self._rfd, size)
            except BlockingIOError:
                pass
            else:
                self._unyielded += 1
                return data
            if not self._idle_known:
                self._idle_known = True
                self.idle = IdleWait.of(self._rfd)
            if self.idle is not None and self.idle.wait():
                try:
                    data = os.read(self._rfd, size)
                except OSError:
                    pass  # trio's way below: its errors, its retries
                else:
                    self._unyielded += 1
                    return data
        self._unyielded = 0
        try:
            await trio.lowlevel.wait_readable(self._rfd)
            return os.read(self._rfd, size)
        except (BlockingIOError, trio.BusyResourceError, trio.ClosedResourceError, OSError):
            return await self._r.receive_some(max_bytes)  # trio's way: its errors, its retries

    async def aclose(self) -> None:
        await self._r.aclose()
        await self._w.aclose()


def _grow_pipe(fd: int, size: int = 1 << 20) -> None:
    """Ask Linux for a bigger pipe buffer (F_SETPIPE_SZ), so a large RESULT
    reaches pmcd in a few writes instead of one per 64 KiB.  Best effort."""
    try:
        import fcntl

        fcntl.fcntl(fd, getattr(fcntl, "F_SETPIPE_SZ", 1031), size)
    except (OSError, ImportError, ValueError):
        pass


def protect_stdio() -> tuple[int, int]:
    """Take private copies of fds 0/1 for the PDU channel and point fd 1 at
    stderr (the log), so a stray print() in a table cannot corrupt it."""
    rfd = os.dup(0)
    wfd = os.dup(1)
    _grow_pipe(wfd)
    os.dup2(2, 1)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    return rfd, wfd

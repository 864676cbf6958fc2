"""Pipe mode: pmcd's pipes as a trio stream, and stdout kept away from them.

:func:`protect_stdio` takes private copies of fds 0/1 for the PDU channel
before any table runs, so a stray ``print()`` goes to the log, not to pmcd;
:class:`PipeStream` reads and writes them without a trip through trio's
scheduler when the data is already there, and waits for pmcd outside
trio's event loop while nothing else could run (:mod:`pmda_py.runtime.idle`).

A fast-path reply in shared memory (:class:`~pmda_py.wire.buffers.SharedReply`,
given to large replies once :func:`share_replies` is called) goes into the
pipe by ``splice(2)``: the pipe takes references to its pages instead of a
copy.  Those pages must not change until pmcd has read them, so the stream
holds each spliced buffer (and no layout writes a held buffer again) until
the pipe's unread bytes (``FIONREAD``) show that the reader is past it,
looked at when the next request is read (pmcd reads a reply whole before it
asks again, so a layout then writes the one buffer it wrote last, still in
this CPU's caches) and before each send."""

from __future__ import annotations

import errno
import os
import sys
from array import array
from collections import deque

import structlog
import trio

from pmda_py.runtime.idle import IdleWait
from pmda_py.wire import buffers
from pmda_py.wire.buffers import SharedReply

log = structlog.get_logger("pmda_py.runtime")

if sys.platform != "win32":
    from fcntl import ioctl
    from termios import FIONREAD

__all__ = ["PipeStream", "protect_stdio", "share_replies", "stdout_to_log"]


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
        #: whether shared replies may be spliced (False once the pipe refused it)
        self.splicing = buffers.ReplyMemory.available()
        #: bytes put into the pipe so far, and replies spliced
        self.sent = 0
        self.spliced = 0
        #: spliced buffers the reader may not have taken yet: (``sent`` at their end, buffer)
        self._held: deque[tuple[int, SharedReply]] = deque()
        self._unread = array("i", [0])  # FIONREAD's answer
        self._refusal_logged = False

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        # pmcd waits for each reply, so the pipe is almost always writable: write
        # at once and let trio wait (and checkpoint) only when it is full.  The
        # next receive_some waits for pmcd's next request, which yields.
        if self._held:
            self._release()
        if type(data) is memoryview and type(data.obj) is SharedReply and self.splicing:
            shared = data.obj
            if data.nbytes == len(shared) and data.c_contiguous:
                await self._splice(shared)
                return
        if buffers.MEMORY.refused and not self._refusal_logged:
            self._limit_reached()
        view = memoryview(data)
        try:
            while view:
                n = os.write(self._wfd, view)
                self.sent += n
                view = view[n:]
        except BlockingIOError:
            await self._w.send_all(view)
            self.sent += len(view)

    async def _splice(self, shared: SharedReply) -> None:
        """``shared``'s pages into the pipe, held until the reader is past them."""
        end = len(shared)
        self._held.append((self.sent + end, shared))
        start = 0
        while start < end:
            try:
                n = os.splice(shared.fd, self._wfd, end - start, offset_src=start)
            except BlockingIOError:
                await trio.lowlevel.wait_writable(self._wfd)
                continue
            except OSError as err:
                if start or err.errno not in (errno.EINVAL, errno.ENOSYS, errno.EBADF):
                    raise  # e.g. EPIPE: the channel's end, as a write would meet it
                n = 0  # the output does not take splices: write, from now on
            if not n:
                self.splicing = False
                if not start:
                    self._held.pop()  # nothing of it in the pipe: the write below copies it
                view = memoryview(shared)[start:]
                try:
                    await self.send_all(view)
                finally:
                    view.release()
                return
            start += n
            self.sent += n
        self.spliced += 1

    def _limit_reached(self) -> None:
        """Say once that large replies are being written, not spliced."""
        self._refusal_logged = True
        mem = buffers.MEMORY
        log.warning(
            "reply_memory_limit",
            detail="large replies are written, not spliced, while the shared reply buffers are at their limit",
            shared=mem.count,
            shared_bytes=mem.bytes,
            max_shared=buffers.MAX_SHARED,
            max_shared_bytes=buffers.MAX_SHARED_BYTES,
        )

    @property
    def held(self) -> int:
        """Spliced replies the reader may not have taken whole yet (held alive)."""
        return len(self._held)

    def _release(self) -> None:
        """Let go of the spliced buffers the reader has taken whole."""
        try:
            ioctl(self._wfd, FIONREAD, self._unread, True)  # into our buffer: no bytes made per request
            unread = self._unread[0]
        except (OSError, TypeError):
            return  # cannot tell: keep holding them
        taken = self.sent - unread
        held = self._held
        while held and held[0][0] <= taken:
            held.popleft()

    async def wait_send_all_might_not_block(self) -> None:
        await self._w.wait_send_all_might_not_block()

    async def receive_some(self, max_bytes: int | None = None) -> bytes | bytearray:
        # While nothing else could run, wait for the pipe outside trio's
        # loop (runtime/idle.py; at once if the request is there); else read
        # what is already there without a trip through trio's scheduler;
        # else trio's way (its own receive_some would checkpoint and try the
        # read once more first).  trio gets a turn at least every
        # YIELD_EVERY reads.
        # pmcd reads a reply whole before it sends the next request, so a
        # request read lets go of the spliced replies before its own is
        # written: the layout then writes the buffer it wrote last, still
        # in this CPU's caches, instead of alternating between two.
        size = max_bytes or 65536
        data = self._read_now(size) if self._unyielded < self.YIELD_EVERY else None
        if data is None:
            self._unyielded = 0
            try:
                await trio.lowlevel.wait_readable(self._rfd)
                data = os.read(self._rfd, size)
            except (BlockingIOError, trio.BusyResourceError, trio.ClosedResourceError, OSError):
                data = await self._r.receive_some(max_bytes)  # trio's way: its errors, its retries
        else:
            self._unyielded += 1
        if self._held:
            self._release()
        return data

    def _read_now(self, size: int) -> bytes | None:
        """While nothing else could run, what comes (or is there already)
        as we wait outside trio's loop; else what is there to read now;
        None: wait trio's way.

        The wait comes first: pmcd sends its next request only after our
        reply, so a read tried first would almost always find nothing, and
        its refusal (an exception) costs about as much as the wait's
        look at trio."""
        if not self._idle_known:
            self._idle_known = True
            self.idle = IdleWait.of(self._rfd)
        if self.idle is not None and self.idle.wait():
            try:
                return os.read(self._rfd, size)
            except OSError:
                return None  # trio's way: its errors, its retries
        try:
            return os.read(self._rfd, size)
        except BlockingIOError:
            return None

    async def aclose(self) -> None:
        await self._r.aclose()
        await self._w.aclose()


def share_replies() -> bool:
    """Give large fast-path replies shared memory, which :class:`PipeStream`
    splices (a pipe agent's choice, made once the channel is a pipe); False
    where the system cannot splice them."""
    return buffers.MEMORY.enable()


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


def stdout_to_log() -> None:
    """Socket modes: point fd 1 at stderr (the log), so a table's print()
    lands there, as in pipe mode (best effort)."""
    try:
        sys.stdout.flush()
        os.dup2(2, 1)
    except (OSError, ValueError):
        pass

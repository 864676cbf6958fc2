"""Memory for the fast path's reply buffers: plain ``bytearray`` objects,
or, once a pipe agent turns it on, pages of an anonymous shared-memory file
(``memfd_create(2)``) that the pipe end can hand to pmcd by ``splice(2)``
without copying them (:class:`SharedReply`).

A large RESULT written with ``write(2)`` is copied into fresh pipe pages
each time (about 0.3-0.6 ms of the agent's CPU per 2 MB on the development
machine); spliced from a memfd mapping the agent writes no byte of it
twice.  Only allocation happens here -- ``memfd_create`` and ``mmap`` are
ways of getting memory, not channel I/O -- so the module stays sans-IO: the
pipe end (``pmda_py.runtime.pipe``) does the splicing, and keeps each
spliced buffer alive (so no layout writes it again) until pmcd has read it.

Every shared buffer is a file descriptor and a mapping, so they are
bounded: at most :data:`MAX_SHARED` of them and :data:`MAX_SHARED_BYTES`
in all; a reply under :data:`MIN_SHARED` bytes (cheap to write) or past a
limit gets a ``bytearray``, and :attr:`ReplyMemory.refused` counts those
past a limit."""

from __future__ import annotations

import mmap
import os
import weakref
from typing import Final, Union

__all__ = ["MAX_SHARED", "MAX_SHARED_BYTES", "MEMORY", "MIN_SHARED", "ReplyBuffer", "ReplyMemory", "SharedReply"]

#: the smallest reply given shared memory (a smaller one costs little to write)
MIN_SHARED: Final = 64 * 1024
#: at most this many shared buffers at once (each holds two file descriptors: ours and the mapping's)
MAX_SHARED: Final = 32
#: and at most this many bytes of them
MAX_SHARED_BYTES: Final = 256 * 1024 * 1024


class SharedReply(mmap.mmap):
    """A reply buffer in a memfd's pages: a writable mapping of the whole
    file, whose descriptor :attr:`fd` the pipe end splices from (closed
    when the buffer is collected)."""

    __slots__ = ("fd",)

    fd: int


#: what a fast-path reply is written into
ReplyBuffer = Union[bytearray, SharedReply]


class ReplyMemory:
    """Where reply buffers come from (see the module): ``bytearray`` until
    :meth:`enable`, then memfd pages for large replies, within the limits."""

    __slots__ = ("bytes", "count", "enabled", "refused")

    def __init__(self) -> None:
        self.enabled = False
        #: shared buffers alive, and their bytes
        self.count = 0
        self.bytes = 0
        #: large replies given a bytearray because a limit was reached (or the memfd failed)
        self.refused = 0

    @staticmethod
    def available() -> bool:
        """Whether this system can splice a memfd's pages into a pipe (Linux, Python 3.10+)."""
        return hasattr(os, "memfd_create") and hasattr(os, "splice")

    def enable(self) -> bool:
        """Give large replies shared memory from now on (a pipe agent's
        choice); False where :meth:`available` is not."""
        self.enabled = self.available()
        return self.enabled

    def new(self, template: bytes | bytearray | SharedReply) -> ReplyBuffer:
        """A new buffer holding a copy of ``template``."""
        size = len(template)
        if not self.enabled or size < MIN_SHARED:
            return bytearray(template)
        if self.count >= MAX_SHARED or self.bytes + size > MAX_SHARED_BYTES:
            self.refused += 1
            return bytearray(template)
        try:
            fd = os.memfd_create("pmda_py-reply", os.MFD_CLOEXEC)
        except OSError:
            self.refused += 1
            return bytearray(template)
        try:
            os.ftruncate(fd, size)
            buf = SharedReply(fd, size)
        except (OSError, ValueError):
            os.close(fd)
            self.refused += 1
            return bytearray(template)
        buf.fd = fd
        buf[:] = template
        self.count += 1
        self.bytes += size
        weakref.finalize(buf, self._release, fd, size)
        return buf

    def _release(self, fd: int, size: int) -> None:
        os.close(fd)
        self.count -= 1
        self.bytes -= size


#: the process's reply memory (one PDU channel per agent process)
MEMORY: Final = ReplyMemory()

"""inotify watches on a directory (Linux, through ctypes): the one place
the package opens them.  :func:`watch_directory` gives a non-blocking
descriptor, or None where inotify is missing or its watch limit is reached
(the caller then polls).  Used by the MMV directory's watcher and by the
socket mode's watch on its socket file's directory."""

from __future__ import annotations

import functools
import os
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import ctypes

__all__ = [
    "IN_ATTRIB",
    "IN_CLOSE_WRITE",
    "IN_CREATE",
    "IN_DELETE",
    "IN_DELETE_SELF",
    "IN_IGNORED",
    "IN_MOVED_FROM",
    "IN_MOVED_TO",
    "IN_MOVE_SELF",
    "IN_Q_OVERFLOW",
    "watch_directory",
]

IN_ATTRIB = 0x4
IN_CLOSE_WRITE = 0x8
IN_MOVED_FROM = 0x40
IN_MOVED_TO = 0x80
IN_CREATE = 0x100
IN_DELETE = 0x200
IN_DELETE_SELF = 0x400
IN_MOVE_SELF = 0x800
IN_Q_OVERFLOW = 0x4000
IN_IGNORED = 0x8000


@functools.cache
def _libc() -> ctypes.CDLL:
    """libc through ctypes, loaded once (a CDLL is a reference cycle)."""
    import ctypes
    import ctypes.util

    return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)


def watch_directory(directory: str, mask: int) -> int | None:
    """A non-blocking, close-on-exec inotify descriptor watching
    ``directory`` for the events in ``mask``; None where that is not
    possible (no inotify, no libc, the watch limit reached, no such
    directory)."""
    try:
        libc = _libc()
        fd = int(libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC))
        if fd < 0:
            return None
        if int(libc.inotify_add_watch(fd, os.fsencode(directory), mask)) < 0:
            os.close(fd)
            return None
    except (OSError, AttributeError):
        return None
    return fd

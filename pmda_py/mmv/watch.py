"""Which names in a directory changed: inotify (Linux, through ctypes), read
without blocking.  :meth:`DirWatch.changes` costs one ``read`` that
usually finds nothing; where inotify is missing (or its watch limit is
reached) :meth:`DirWatch.open` returns None and the caller polls."""

from __future__ import annotations

import functools
import os
import struct
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import ctypes

__all__ = ["DirWatch"]

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
_EVENT = struct.Struct("iIII")  # wd, mask, cookie, len
#: names created, removed, renamed, rewritten and closed, chmod/chown/utime;
#: not IN_MODIFY (a writer that stores through its mapping makes none anyway)
MASK = IN_ATTRIB | IN_CLOSE_WRITE | IN_MOVED_FROM | IN_MOVED_TO | IN_CREATE | IN_DELETE | IN_DELETE_SELF | IN_MOVE_SELF


@functools.cache
def _libc() -> ctypes.CDLL:
    """libc through ctypes, loaded once (a CDLL is a reference cycle)."""
    import ctypes
    import ctypes.util

    return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)


class DirWatch:
    """inotify on one directory: the names that changed since the last call."""

    def __init__(self, fd: int) -> None:
        self.fd = fd

    @classmethod
    def open(cls, directory: str) -> DirWatch | None:
        """None where inotify is not available (the caller polls)."""
        try:
            libc = _libc()
            fd = int(libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC))
            if fd < 0:
                return None
            if int(libc.inotify_add_watch(fd, os.fsencode(directory), MASK)) < 0:
                os.close(fd)
                return None
        except (OSError, AttributeError):
            return None
        return cls(fd)

    def changes(self) -> tuple[set[str], bool]:
        """``(names, everything)``: names whose entries changed, and whether
        the caller must assume anything did (the directory itself moved or
        went, the event queue overflowed)."""
        names: set[str] = set()
        everything = False
        while True:
            try:
                buf = os.read(self.fd, 65536)
            except BlockingIOError:
                break
            except OSError:
                return names, True
            if not buf:
                break
            pos = 0
            while pos + _EVENT.size <= len(buf):
                _wd, mask, _cookie, n = _EVENT.unpack_from(buf, pos)
                raw = buf[pos + _EVENT.size : pos + _EVENT.size + n].split(b"\0", 1)[0]
                pos += _EVENT.size + n
                if mask & (IN_Q_OVERFLOW | IN_DELETE_SELF | IN_MOVE_SELF | IN_IGNORED) or not raw:
                    everything = True  # the directory itself (touched, moved, gone) or lost events
                else:
                    names.add(os.fsdecode(raw))
        return names, everything

    def close(self) -> None:
        os.close(self.fd)

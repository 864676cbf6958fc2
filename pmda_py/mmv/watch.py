"""Which names in a directory changed: inotify (Linux, through ctypes), read
without blocking.  :meth:`DirWatch.changes` costs one ``read`` that
usually finds nothing; where inotify is missing (or its watch limit is
reached) :meth:`DirWatch.open` returns None and the caller polls."""

from __future__ import annotations

import os
import struct

from pmda_py.inotify import (
    IN_ATTRIB,
    IN_CLOSE_WRITE,
    IN_CREATE,
    IN_DELETE,
    IN_DELETE_SELF,
    IN_IGNORED,
    IN_MOVE_SELF,
    IN_MOVED_FROM,
    IN_MOVED_TO,
    IN_Q_OVERFLOW,
    watch_directory,
)

__all__ = ["MASK", "DirWatch"]

_EVENT = struct.Struct("iIII")  # wd, mask, cookie, len
#: names created, removed, renamed, rewritten and closed, chmod/chown/utime;
#: not IN_MODIFY (a writer that stores through its mapping makes none anyway)
MASK = IN_ATTRIB | IN_CLOSE_WRITE | IN_MOVED_FROM | IN_MOVED_TO | IN_CREATE | IN_DELETE | IN_DELETE_SELF | IN_MOVE_SELF


class DirWatch:
    """inotify on one directory: the names that changed since the last call."""

    def __init__(self, fd: int) -> None:
        self.fd = fd

    @classmethod
    def open(cls, directory: str) -> DirWatch | None:
        """None where inotify is not available (the caller polls)."""
        fd = watch_directory(directory, MASK)
        return None if fd is None else cls(fd)

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

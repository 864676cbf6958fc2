"""The id tables' state files (``$PCP_VAR_DIR/config/pmda/DOMAIN.N.py``),
read and written in one place, through :mod:`pmda_py.safefile`.

The daemon (the cluster table, ``N`` 0) and the scrapers (each source's
metric and instance tables) both use :class:`StateFiles`; the file format
is :class:`~.names.NameTable`'s.  A problem is returned as a
:class:`~.records.LogEntry` for the caller to log (the daemon logs it, a
worker sends it with its reply).
"""

from __future__ import annotations

import os
from collections.abc import Iterable

from pmda_py import safefile
from pmda_py.openmetrics.names import NameTable
from pmda_py.openmetrics.records import LogEntry
from pmda_py.safefile import FileRefused, move_aside, read_regular

__all__ = ["STATE_READ_CAP", "StateFiles", "read_state", "write_state"]

#: the largest name table file read (a larger one is moved aside)
STATE_READ_CAP = 64 * 1024 * 1024


def write_state(path: str, data: bytes) -> str | None:
    """Write a name table file atomically, never through a link; the error
    text if it failed (the old file is then unchanged, no temporary left)."""
    try:
        safefile.atomic_write(path, data, makedirs=True)
    except OSError as err:
        return str(err)
    return None


def read_state(path: str, maxnum: int) -> tuple[NameTable, str | None]:
    """The name table saved at ``path`` (empty if none); the problem if unreadable.

    A file that cannot be read whole (over :data:`STATE_READ_CAP`, truncated,
    corrupt, not a regular file) is moved aside (``PATH.bad``, never over
    another file) and the table starts empty; if it cannot be moved, the
    table is never saved (the file is not overwritten)."""
    try:
        data = read_regular(path, STATE_READ_CAP, whole=True)
        table = NameTable.loads(data, maxnum)
    except FileNotFoundError:
        return NameTable(maxnum), None
    except (FileRefused, ValueError) as err:
        problem = err.strerror if isinstance(err, FileRefused) and err.strerror else str(err)
        table = NameTable(maxnum)
        try:
            aside = move_aside(path)
        except OSError as merr:
            table.frozen = True
            return table, f"{problem}; cannot move it aside ({merr.strerror or merr}): ids not saved"
        return table, f"{problem}; moved aside to {aside}, ids start afresh"
    except OSError as err:
        table = NameTable(maxnum)
        table.frozen = True  # (unreadable now: never written over)
        return table, f"cannot read: {err.strerror or err}; ids not saved"
    table.dirty = False
    return table, None


class StateFiles:
    """The name tables of one domain in ``state_dir``."""

    def __init__(self, state_dir: str, domain: int) -> None:
        self.state_dir = state_dir
        self.domain = domain

    def path(self, serial: int) -> str:
        return os.path.join(self.state_dir, f"{self.domain}.{serial}.py")

    def load(self, serial: int, maxnum: int) -> tuple[NameTable, LogEntry | None]:
        """Table ``serial`` as saved (empty if none), and what was wrong with its file."""
        path = self.path(serial)
        table, problem = read_state(path, maxnum)
        if problem is None:
            return table, None
        return table, LogEntry("openmetrics_state_unreadable", {"file": path, "error": problem})

    def save(self, tables: Iterable[tuple[int, NameTable]]) -> list[LogEntry]:
        """Save the changed tables (one that cannot be saved stays changed)."""
        return self.write((serial, table) for serial, table in tables if table.dirty and not table.frozen)

    @staticmethod
    def take(tables: Iterable[tuple[int, NameTable]]) -> list[tuple[int, bytes]]:
        """The images of the changed tables, which count as saved from now
        (for :meth:`write` in another thread)."""
        images = []
        for serial, table in tables:
            if table.dirty and not table.frozen:
                images.append((serial, table.dumps()))
                table.dirty = False
        return images

    def write(self, images: Iterable[tuple[int, NameTable | bytes]]) -> list[LogEntry]:
        """Write tables (or their images); a table written is no longer changed."""
        logs = []
        for serial, item in images:
            path = self.path(serial)
            problem = write_state(path, item if isinstance(item, bytes) else item.dumps())
            if problem is not None:
                logs.append(LogEntry("openmetrics_state_unsaved", {"file": path, "error": problem}))
            elif isinstance(item, NameTable):
                item.dirty = False
        return logs

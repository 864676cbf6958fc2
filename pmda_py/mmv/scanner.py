"""Reading an MMV directory without letting its writers cost the agent more
than what they export, and off the request path.

* :func:`open_mmv` opens one file without blocking (``O_NONBLOCK``; a FIFO,
  a device or a directory is refused on the opened descriptor, as is a file
  of a user not allowed), and :func:`load_file` reads only the header, the
  table of contents and the sections it names (a 1 GiB sparse tail costs
  nothing), parses it and reads the help texts it points at, then closes it.
* :class:`Scanner` is a thread that runs the table's scans when asked and a
  cheap periodic sweep (generation, writer pid, file identity) otherwise,
  so no request ever waits for more than the table lets it.
"""

from __future__ import annotations

import functools
import gc
import os
import struct
import sys
import threading
import time
from collections.abc import Callable
from typing import Generic, TypeVar

import attrs

from pmda_py.mmv.layout import HEADER, STRING_SIZE, MmvFormatError
from pmda_py.mmv.model import FileImage
from pmda_py.mmv.reader import MmvFile
from pmda_py.mmv.regions import FileRegions
from pmda_py.safefile import open_regular

__all__ = ["Loaded", "Scanner", "changed", "load_file", "open_mmv"]

T = TypeVar("T")
SWITCH_INTERVAL = 0.0002  #: seconds: the interpreter's thread switch interval while a scan runs
_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def _resident_bytes() -> int:
    """This process's resident set size (0 where ``/proc`` has none)."""
    try:
        with open("/proc/self/statm", "rb") as f:
            return int(f.read(128).split()[1]) * _PAGE
    except (OSError, ValueError, IndexError):
        return 0


@attrs.frozen
class Loaded:
    """A file as the last scan loaded it."""

    path: str
    g1: int
    flags: int
    pid: int
    head: bytes  #: header and TOC as scanned
    ident: tuple[int, int]  #: (st_dev, st_ino) of the file opened
    values: tuple[int, int] = (-1, 0)  #: (offset, bytes) of the VALUES section


def open_mmv(path: str, owners: frozenset[int] | None) -> tuple[int, os.stat_result]:
    """A descriptor on the regular file ``path`` (symlinks followed, as
    pmdammv does) and its ``fstat``; raises OSError (``FileRefused`` for a
    file that is not regular or has an owner not allowed)."""
    fd = open_regular(path, owners=owners)
    try:
        return fd, os.fstat(fd)
    except BaseException:
        os.close(fd)
        raise


def _pid_alive(pid: int) -> bool:
    return os.path.exists(f"/proc/{pid}")


def load_file(name: str, path: str, owners: frozenset[int] | None) -> tuple[FileImage, Loaded | None]:
    """One file, read as :mod:`pmda_py.mmv.reader` needs it (raises
    OSError if it cannot be opened)."""
    fd, st = open_mmv(path, owners)
    img = FileRegions(None, st.st_size)
    try:
        loaded = None
        try:
            img = FileRegions.load(functools.partial(os.pread, fd), st.st_size)
            mf = MmvFile.from_buffer(img)
            # what build() reads besides the sections: help texts (read now,
            # the descriptor is closed below)
            texts = [t for ind in mf.indoms for t in (ind.shorttext, ind.helptext)]
            texts += [t for rec in mf.metrics for t in (rec.shorttext, rec.helptext)]
            for t in texts:
                img.read(t, STRING_SIZE)
        except MmvFormatError as err:  # kept without its traceback (frames that refer to the image)
            return FileImage(name, img, error=err.with_traceback(None)), None
        alive = not (mf.flags & 0x2 and mf.process and not _pid_alive(mf.process))
        head = img.read(0, HEADER.size + 16 * max(0, struct.unpack_from("=i", img.read(0, HEADER.size), 24)[0]))
        loaded = Loaded(
            path,
            mf.g1,
            mf.flags,
            mf.process,
            head,
            (st.st_dev, st.st_ino),
            (mf.values_offset, mf.values_count * 32),
        )
        # only what build() reads is kept (the sections' bytes, up to 64 MiB
        # a file, are let go: a scan holds one file's at a time)
        kept = img.extract([(0, len(head)), *((t, STRING_SIZE) for t in texts)])
        return FileImage(name, kept, alive, parsed=mf, owner=st.st_uid), loaded
    finally:
        img.read_at = None
        os.close(fd)


def changed(loaded: Loaded, owners: frozenset[int] | None) -> str | None:
    """Why ``loaded`` must be scanned again (None: it has not changed):
    pmdammv's per-request checks (generation, writer pid), plus the file's
    identity (a name now naming another file)."""
    try:
        fd, st = open_mmv(loaded.path, owners)
    except OSError as err:
        return f"cannot open: {err}"
    try:
        head = os.pread(fd, 24, 0)
    except OSError as err:
        return f"cannot read: {err}"
    finally:
        os.close(fd)
    if (st.st_dev, st.st_ino) != loaded.ident:
        return "another file under the name"
    if len(head) < 24 or struct.unpack_from("=QQ", head, 8) != (loaded.g1, loaded.g1):
        return "generation changed"
    if loaded.flags & 0x2 and loaded.pid and not _pid_alive(loaded.pid):
        return f"writer pid {loaded.pid} is gone"
    return None


class Scanner(Generic[T]):
    """A thread running ``scan`` when :meth:`request` ed, and ``sweep``
    (True: something changed, scan) every ``interval`` seconds or
    ``cost_factor`` times its own last duration, whichever is longer.
    The latest result is taken with :meth:`take`."""

    def __init__(
        self,
        scan: Callable[[], T],
        sweep: Callable[[], bool],
        interval: float = 1.0,
        cost_factor: float = 50.0,
        name: str = "mmv-scanner",
    ) -> None:
        self._scan = scan
        self._sweep = sweep
        self.interval = interval
        self.cost_factor = cost_factor
        self._wake = threading.Event()
        self._stopped = threading.Event()
        self._done = threading.Event()
        self._lock = threading.Lock()
        self._wanted = False
        self._stop = False
        self._result: T | None = None
        self.last_scan = 0.0  #: seconds the last scan took
        self.last_sweep = 0.0
        self.scans = 0
        self.error: BaseException | None = None
        self._rss_base = _resident_bytes()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def request(self) -> None:
        """Scan again as soon as the thread is free (a scan running now is
        followed by another)."""
        with self._lock:
            self._wanted = True
            self._done.clear()
        self._wake.set()

    def wait(self, timeout: float) -> bool:
        """Block up to ``timeout`` seconds for the requested scan."""
        return self._done.wait(timeout)

    def take(self) -> T | None:
        with self._lock:
            out, self._result = self._result, None
        return out

    def _freeze(self) -> None:
        """``gc.freeze()``; and when the process's resident memory has
        doubled since the last time, a full collection first (objects
        frozen while alive that became cyclic garbage since are freed:
        memory stays within about twice what is alive, at the cost of one
        collection's pause then).  The doubling is read from
        ``/proc/self/statm`` (one small read): counting the frozen objects
        instead walks every one of them with the interpreter held (35-60 ms
        at 4 000 MMV files, a stall of the event loop)."""
        rss = _resident_bytes()
        if rss > 2 * self._rss_base + (64 << 20):
            gc.unfreeze()
            gc.collect()
            gc.freeze()
            self._rss_base = _resident_bytes()
        else:
            gc.freeze()

    def stop(self) -> None:
        self._stop = True
        self._stopped.set()
        self._wake.set()

    def _run(self) -> None:
        next_sweep = time.monotonic() + self.interval
        while True:
            self._wake.wait(max(0.0, next_sweep - time.monotonic()))
            if self._stop:
                return
            self._wake.clear()
            with self._lock:
                wanted, self._wanted = self._wanted, False
            if not wanted:
                t0 = time.monotonic()
                switch = sys.getswitchinterval()
                sys.setswitchinterval(min(switch, SWITCH_INTERVAL))
                try:
                    wanted = self._sweep()
                except Exception as err:
                    self.error = err
                finally:
                    sys.setswitchinterval(switch)
                self.last_sweep = time.monotonic() - t0
                next_sweep = time.monotonic() + max(self.interval, self.cost_factor * self.last_sweep)
                if not wanted:
                    continue
            t0 = time.monotonic()
            # the event loop takes the interpreter back within this while the scan
            # runs (CPython's default, 5 ms, made a request wait up to 5 ms at every
            # one of its blocking points: 100 ms and more for one reply)
            switch = sys.getswitchinterval()
            sys.setswitchinterval(min(switch, SWITCH_INTERVAL))
            # nor does a collection of everything the scan allocated stop the
            # loop for 100 ms: none during the scan, and then what exists is
            # frozen out of later collections (gc.freeze) before they resume
            collecting = gc.isenabled()
            gc.disable()
            try:
                result = self._scan()
            except Exception as err:  # kept for the table to log
                self.error = err
                continue
            finally:
                self._freeze()
                if collecting:
                    gc.enable()
                sys.setswitchinterval(switch)
                self.last_scan = time.monotonic() - t0
            with self._lock:
                self._result = result
                self.scans += 1
                if not self._wanted:
                    self._done.set()
            # scans back to back (a file kept in flux asks for one at every
            # request, as pmdammv rescans then) take at most half the thread's time
            self._stopped.wait(self.last_scan)

"""Instance-cache files in libpcp_pmda's own format (pmdaCache), so an agent
can move between a libpcp agent and pmda_py -- or the pcp.pmda compatibility
runtime -- and keep its instance ids.  The one implementation of the format.

The file, ``$PCP_VAR_DIR/config/pmda/DOMAIN.SERIAL``:

* a header line ``VERSION MODE MAXINST`` (written as ``2 0 2147483647``);
  version 1 files have only ``1 MODE`` (MAXINST is then 2**31-1).  MODE 0:
  a new name gets one more than the highest id used so far; MODE 1: the
  lowest free id.  A cache switches to mode 1 for good when its highest id
  reaches MAXINST, so ids are not reused until the maximum is reached;
* then one line per kept instance, in id order: ``INST STAMP [KEY] NAME``.
  STAMP is the time (seconds since the epoch) the entry was saved after it
  was last added or made active; KEY (optional, hex bytes in brackets) is
  the key of ``pmdaCacheStoreKey``, kept as it is read; NAME is the rest of
  the line, spaces included.

Entries read from the file start *inactive*; adding a name makes its entry
*active* again.  Inactive entries are written back (their ids stay reserved);
only culled entries are dropped, at the next save.  Names are matched up to
their first space, as PCP does: ``"eth0 fast"`` is found as ``"eth0"``, and
``"eth0 slow"`` cannot join it (:class:`NameClash`) unless the cache was
made with ``strings=True`` (``PMDA_CACHE_STRINGS``: whole names).

A file is read as libpcp reads it: a line libpcp rejects makes the whole file
*unreadable* for us; it is then left in place, never moved or overwritten
(the ids read before the bad line are kept in memory, as libpcp keeps them,
and nothing is saved until the file is fixed or removed).  An entry libpcp
ignores on load (an id or a name seen twice) is ignored the same way and
reported.  An empty file is an empty cache (PCP's Install scripts create
them).  Names that libpcp could not read back (a newline or NUL in them, or
a line over 1023 bytes) get ids but are not written.

Sans-IO: :func:`parse` and :func:`format_cache`.  The small I/O class,
:class:`PmdaCache`::

    cache = PmdaCache(path)            # path None: in memory only
    problem = cache.load()             # None, or a text to log; never raises for content
    cache.inactivate_all()             # PMDA_CACHE_INACTIVE
    inst = cache.lookup("eth0")        # PMDA_CACHE_ADD: id of name, new if unseen; active
    cache.save()                       # PMDA_CACHE_SAVE: written if entries were added or culled
    cache.write(); cache.sync()        # PMDA_CACHE_WRITE (always), PMDA_CACHE_SYNC (also new stamps)
    cache.hide(name); cache.cull(name) # PMDA_CACHE_HIDE, PMDA_CACHE_CULL
    cache.activate_all(); cache.cull_all()
    cache.name_of(inst); cache.inst_of(name); cache.state_of(inst)
    cache.active()                     # {inst: name} of active entries
    cache.resize(maximum); cache.reuse(); cache.purge(seconds)

Writes go through :func:`pmda_py.safefile.atomic_write`; an existing file
keeps its mode and, when we are root, its owner (a new file as root belongs
to the owner of its directory: PCP's agents run as the PCP user and rewrite
the file in place).
"""

from __future__ import annotations

import enum
import os
import re
import stat
import time
from collections.abc import Iterable

import attrs
import structlog

from pmda_py.safefile import atomic_write, read_regular

__all__ = [
    "CacheFull",
    "CacheProblem",
    "Entry",
    "NameClash",
    "ParsedCache",
    "PmdaCache",
    "State",
    "entry_line",
    "format_cache",
    "name_match",
    "parse",
]

VERSION = 2
MAXINST = 0x7FFFFFFF
#: libpcp reads lines into a 1024-byte buffer (newline included)
LINE_MAX = 1023
#: the largest file we read
FILE_LIMIT = 64 << 20

_log = structlog.get_logger("pmda_py.pmdacache")


class State(enum.IntEnum):
    """An entry's state (the values of libpcp's PMDA_CACHE_*)."""

    ACTIVE = 8
    INACTIVE = 9
    EMPTY = 5  #: culled: dropped at the next save


class CacheProblem(ValueError):
    """A cache file libpcp would not load (``line`` 1 is the header)."""

    def __init__(self, line: int, message: str) -> None:
        super().__init__(f"line {line}: {message}")
        self.line = line


class NameClash(ValueError):
    """The name matches another entry up to the first space but not after it."""


class CacheFull(ValueError):
    """Every id from 0 to the cache's maximum is taken."""


@attrs.define
class Entry:
    inst: int
    name: str
    stamp: int = 0  #: 0: not saved since it was added (stamped at the next save)
    key: bytes | None = None
    state: State = State.INACTIVE


@attrs.define
class ParsedCache:
    """What a file holds: the header's mode and maximum, the entries in file
    order, the entries libpcp would ignore (``ignored``: text per entry), and
    the problem that stopped the reading (None: the whole file was read)."""

    mode: int = 0
    maxinst: int = MAXINST
    version: int = VERSION
    entries: list[Entry] = attrs.field(factory=list)
    ignored: list[str] = attrs.field(factory=list)
    problem: CacheProblem | None = None


_INT = rb"\s*([+-]?\d+)(?!\d)"
_HEADER = {1: re.compile(_INT * 2), 2: re.compile(_INT * 3)}
_SPACE = b" \t\n\v\f\r"
_DIGITS = b"0123456789"


def _hashlen(name: str, strings: bool) -> int:
    """How much of ``name`` identifies it: up to the first space."""
    space = -1 if strings else name.find(" ")
    return len(name) if space < 0 else space


def name_match(have: str, name: str, strings: bool = False) -> int:
    """libpcp's comparison: 1 the same instance, 0 another one, -1 a clash
    (the same up to the first space, different after it)."""
    n = _hashlen(name, strings)
    if _hashlen(have, strings) != n or have[:n] != name[:n]:
        return 0
    if n == len(name):
        return 1
    if n == len(have):
        return -1
    return 1 if have[n + 1 :] == name[n + 1 :] else -1


def _skip(line: bytes, p: int, chars: bytes) -> int:
    while p < len(line) and line[p] in chars:
        p += 1
    return p


def _hex_pair(pair: bytes) -> int:
    """``sscanf("%2x")``: the leading hex digits (none: 0, undefined in libpcp)."""
    m = re.match(rb"[0-9a-fA-F]{1,2}", pair)
    return int(m.group(), 16) if m else 0


def _parse_entry(line: bytes) -> Entry:
    p = _skip(line, 0, _SPACE)
    if p == len(line):
        raise ValueError("an empty line")
    q = _skip(line, p, _DIGITS)
    inst = int(line[p:q] or b"0")
    if inst > MAXINST:
        raise ValueError("an instance id over 2**31-1")
    p = _skip(line, q, _SPACE)
    if p == len(line):
        raise ValueError("no name")
    q = _skip(line, p, _DIGITS)
    stamp = int(line[p:q] or b"0")
    p = _skip(line, q, _SPACE)
    key = None
    if line[p : p + 1] == b"[":
        start = p + 1
        end = line.find(b"]", start)
        if end < 0:
            raise ValueError("a key without ']'")
        n = (end - start) // 2  # libpcp reads pairs of hex digits, an odd one out is skipped
        key = bytes(_hex_pair(line[start + 2 * k : start + 2 * k + 2]) for k in range(n)) or None
        p = start + 2 * n + 2  # and steps over ']' and (even length) the character after it
        if p > len(line):
            raise ValueError("no name after the key")
        p = _skip(line, p, _SPACE)
    if p == len(line):
        raise ValueError("no name")
    return Entry(inst, line[p:].decode("utf-8", "surrogateescape"), stamp, key)


def parse(data: bytes, strings: bool = False) -> ParsedCache:
    """The cache in ``data`` as libpcp's PMDA_CACHE_LOAD reads it.  Never
    raises: a line libpcp rejects ends the reading (``problem``)."""
    out = ParsedCache()
    if not data:
        return out
    lines = data.split(b"\n")
    if lines[-1] == b"":
        lines.pop()
    for n, line in enumerate(lines, 1):
        if len(line) > LINE_MAX:
            out.problem = CacheProblem(n, f"longer than libpcp reads ({LINE_MAX} bytes)")
            return out
        if b"\0" in line:
            out.problem = CacheProblem(n, "a NUL byte")
            return out
    head = re.match(_INT, lines[0])
    version = int(head.group(1)) if head else 0
    fields = _HEADER[version].match(lines[0]) if version in _HEADER else None
    if fields is None:
        out.problem = CacheProblem(1, "not a pmdaCache header")
        return out
    mode = int(fields.group(2))
    maxinst = int(fields.group(3)) if version == 2 else MAXINST
    if mode not in (0, 1) or not 0 <= maxinst <= MAXINST:
        out.problem = CacheProblem(1, "not a pmdaCache header")
        return out
    out.version, out.mode, out.maxinst = version, mode, maxinst
    by_inst: dict[int, Entry] = {}
    by_key: dict[str, Entry] = {}
    for n, line in enumerate(lines[1:], 2):
        try:
            e = _parse_entry(line)
        except ValueError as err:
            out.problem = CacheProblem(n, str(err))
            return out
        key = e.name[: _hashlen(e.name, strings)]
        found = by_inst.get(e.inst) or by_key.get(key)
        if found is not None:
            # libpcp keeps the entry it has, but takes this line's stamp and key
            found.stamp, found.key = e.stamp, e.key
            if found.inst != e.inst or name_match(found.name, e.name, strings) != 1:
                out.ignored.append(
                    f"line {n}: {e.inst} {e.name!r} ignored, already there as {found.inst} {found.name!r}"
                )
            continue
        by_inst[e.inst] = by_key[key] = e
        out.entries.append(e)
    return out


def entry_line(e: Entry) -> bytes | None:
    """``e``'s line in the file, None if libpcp could not read it back (a
    newline or NUL in the name, an empty name, a line over 1023 bytes)."""
    if not e.name or "\n" in e.name or "\0" in e.name:
        return None
    key = f" [{e.key.hex()}]" if e.key else ""
    line = f"{e.inst} {e.stamp}{key} {e.name}\n".encode("utf-8", "surrogateescape")
    return line if len(line) - 1 <= LINE_MAX else None


def format_cache(mode: int, maxinst: int, entries: Iterable[Entry]) -> bytes:
    """The file for ``entries``, in id order (culled entries and those
    :func:`entry_line` refuses are left out)."""
    out = [f"{VERSION} {mode} {maxinst}\n".encode()]
    for e in sorted(entries, key=lambda e: e.inst):
        line = entry_line(e) if e.state != State.EMPTY else None
        if line is not None:
            out.append(line)
    return b"".join(out)


class PmdaCache:
    """One indom's cache, loaded from and saved to ``path`` (see the module
    docstring for the API and the semantics)."""

    def __init__(self, path: str | None = None, *, strings: bool = False) -> None:
        self.path = path
        self.strings = strings
        self.mode = 0
        self.maxinst = MAXINST
        #: False after a file we could not read: it is never overwritten
        self.writable = True
        self._by_inst: dict[int, Entry] = {}
        self._by_key: dict[str, Entry] = {}  # name up to the first space (whole name with strings)
        self._high = -1  # the highest id seen: the next new one is above it (mode 0)
        self._dirty_inst = False
        self._dirty_stamp = False
        self._unsaved_logged: set[str] = set()

    # ------------------------------------------------------------- lookups

    def _key(self, name: str) -> str:
        return name[: _hashlen(name, self.strings)]

    def _find(self, name: str) -> Entry | None:
        e = self._by_key.get(self._key(name))
        if e is None:
            return None
        if name_match(e.name, name, self.strings) != 1:
            raise NameClash(f"instance name {name!r} clashes with {e.name!r} (the same up to the first space)")
        return e

    def inst_of(self, name: str) -> int | None:
        """The id of ``name`` (any state), None if not in the cache."""
        try:
            e = self._find(name)
        except NameClash:
            return None
        return None if e is None else e.inst

    def name_of(self, inst: int) -> str | None:
        e = self._by_inst.get(inst)
        return None if e is None else e.name

    def state_of(self, inst: int) -> State | None:
        e = self._by_inst.get(inst)
        return None if e is None else e.state

    def entries(self) -> list[Entry]:
        """Every entry (culled ones are already gone), in id order."""
        return sorted(self._by_inst.values(), key=lambda e: e.inst)

    def active(self) -> dict[int, str]:
        return {e.inst: e.name for e in self.entries() if e.state == State.ACTIVE}

    @property
    def ids(self) -> dict[str, int]:
        """``{name: inst}`` of every entry."""
        return {e.name: e.inst for e in self.entries()}

    @property
    def dirty(self) -> bool:
        """Whether :meth:`save` would write."""
        return self._dirty_inst

    # ------------------------------------------------------------- changes

    def _insert(self, e: Entry) -> None:
        self._by_inst[e.inst] = e
        self._by_key[self._key(e.name)] = e
        self._high = max(self._high, e.inst)

    def _remove(self, e: Entry) -> None:
        del self._by_inst[e.inst]
        del self._by_key[self._key(e.name)]
        self._dirty_inst = True

    def _new_inst(self) -> int:
        """One above the highest id so far (mode 0) until that is the
        maximum, then the lowest free id (mode 1, for good); ids stay in
        0..maxinst (at that very edge libpcp 6.0 stops one short and 7.1
        can step over it; neither is copied)."""
        if self.mode == 0:
            if self._high < self.maxinst:
                return self._high + 1
            self.mode = 1
        inst = 0
        for used in sorted(self._by_inst):
            if inst < used:
                break
            inst = used + 1
        if inst > self.maxinst:
            raise CacheFull(f"every instance id up to {self.maxinst} is in use")
        return inst

    def lookup(self, name: str) -> int:
        """PMDA_CACHE_ADD: the id of ``name`` (a new one if it is not in the
        cache), and the entry is active.  Raises :class:`NameClash` or
        :class:`CacheFull`, and ValueError for an empty name."""
        if not name and not self.strings:
            raise ValueError("an empty instance name")
        e = self._find(name)
        if e is None:
            e = Entry(self._new_inst(), name)
            self._insert(e)
            self._dirty_inst = True
        e.state = State.ACTIVE
        e.stamp = 0
        e.key = None  # as pmdaCacheStore: an add without a key drops it
        self._dirty_stamp = True
        return e.inst

    def hide(self, name: str) -> bool:
        """PMDA_CACHE_HIDE: ``name`` is inactive (its id kept); False if absent."""
        e = self._find(name)
        if e is not None:
            e.state = State.INACTIVE
        return e is not None

    def cull(self, name: str) -> bool:
        """PMDA_CACHE_CULL: ``name`` leaves the cache (its id is free again
        in mode 1, or after a restart when it was the highest)."""
        e = self._find(name)
        if e is not None:
            self._remove(e)
        return e is not None

    def inactivate_all(self) -> int:
        return self._set_all(State.ACTIVE, State.INACTIVE)

    def activate_all(self) -> int:
        return self._set_all(State.INACTIVE, State.ACTIVE)

    def _set_all(self, old: State, new: State) -> int:
        n = 0
        for e in self._by_inst.values():
            if e.state == old:
                e.state = new
                n += 1
        return n

    def cull_all(self) -> int:
        entries = list(self._by_inst.values())
        for e in entries:
            self._remove(e)
        return len(entries)

    def purge(self, seconds: float, now: float | None = None) -> int:
        """pmdaCachePurge: cull the entries last stamped over ``seconds`` ago
        (entries active since the last save have no stamp and stay)."""
        epoch = (time.time() if now is None else now) - seconds
        old = [e for e in self._by_inst.values() if e.stamp and e.stamp < epoch]
        for e in old:
            self._remove(e)
        return len(old)

    def resize(self, maximum: int) -> None:
        """pmdaCacheResize: ids stay at or below ``maximum``."""
        if not 0 <= maximum <= MAXINST:
            raise ValueError(f"maximum {maximum} out of range")
        if self._by_inst and max(self._by_inst) > maximum:
            raise ValueError(f"an id above {maximum} is in use")
        self.maxinst = maximum
        self._dirty_stamp = True

    def reuse(self) -> None:
        """PMDA_CACHE_REUSE: new names get the lowest free id."""
        self.mode = 1

    # ------------------------------------------------------------- file I/O

    def load(self) -> str | None:
        """PMDA_CACHE_LOAD: add the file's entries (inactive).  A missing or
        empty file is an empty cache.  Returns None, or the problem (a text
        to log): entries ignored as libpcp ignores them, or a file libpcp
        would not load -- it is then left as it is and never overwritten."""
        if not self.path:
            return None
        try:
            data = read_regular(self.path, FILE_LIMIT, whole=True, follow=False)
        except (FileNotFoundError, NotADirectoryError):  # no file there to keep
            return None
        except OSError as err:
            self.writable = False
            return f"cannot read {self.path}: {err}; left in place, ids kept in memory only"
        parsed = parse(data, self.strings)
        if parsed.entries or parsed.problem is None:
            self.mode, self.maxinst = parsed.mode, parsed.maxinst
        for e in parsed.entries:
            if e.inst not in self._by_inst and self.inst_of(e.name) is None:
                self._insert(e)
        problems = parsed.ignored[:3] + ([f"and {len(parsed.ignored) - 3} more"] if len(parsed.ignored) > 3 else [])
        if parsed.problem is not None:
            self.writable = False
            return (
                f"{self.path}: not a cache libpcp reads ({parsed.problem}); left in place and never overwritten, "
                f"{len(parsed.entries)} ids read before it kept, new ids in memory only"
            )
        if problems:  # dropped from the file at the next save that has something to write (as libpcp)
            return f"{self.path}: " + "; ".join(problems)
        return None

    def save(self) -> bool:
        """PMDA_CACHE_SAVE: write the file if entries were added or culled
        since the last save.  Returns whether it was written; a failure is
        logged and tried again at the next save."""
        return self._save(self._dirty_inst)

    def sync(self) -> bool:
        """PMDA_CACHE_SYNC: also when only stamps or the maximum changed."""
        return self._save(self._dirty_inst or self._dirty_stamp)

    def write(self) -> bool:
        """PMDA_CACHE_WRITE: write whatever changed."""
        return self._save(True)

    def _save(self, needed: bool) -> bool:
        if not self.path or not needed or not self.writable:
            return False
        now = int(time.time())
        for e in self._by_inst.values():
            if e.stamp == 0:
                e.stamp = now
        data = format_cache(self.mode, self.maxinst, self._by_inst.values())
        unsaved = [e.name for e in self._by_inst.values() if e.name not in self._unsaved_logged and not entry_line(e)]
        mode, owner = self._file_identity()
        try:
            atomic_write(self.path, data, mode=mode, owner=owner, makedirs=True)
        except OSError as err:
            _log.warning("instance_cache_unsaved", path=self.path, error=str(err))
            return False
        for name in unsaved:  # once per name
            self._unsaved_logged.add(name)
            _log.warning("instance_name_not_saved", path=self.path, name=name[:80], reason="libpcp cannot read it")
        self._dirty_inst = self._dirty_stamp = False
        return True

    def _file_identity(self) -> tuple[int, tuple[int, int] | None]:
        """The mode and (as root) the owner the file is written with: the
        existing file's, else 0644 and the directory's owner."""
        assert self.path is not None
        try:
            st = os.lstat(self.path)
        except OSError:
            st = None
        if st is not None and stat.S_ISREG(st.st_mode):
            mode = stat.S_IMODE(st.st_mode) & 0o666
            ref: os.stat_result | None = st
        else:
            mode = 0o644
            try:
                ref = os.stat(os.path.dirname(self.path) or ".")
            except OSError:
                ref = None
        if os.geteuid() != 0 or ref is None:
            return mode, None
        return mode, (ref.st_uid, ref.st_gid)

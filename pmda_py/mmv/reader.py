"""MMV ("Memory Mapped Values") files, v1/v2/v3: a pure, bounds-checked parser.

:meth:`MmvFile.from_buffer` validates the header and table of contents and
reads every section the way PCP's pmdammv does (PCP's ``mmv_stats.h`` and
pmdammv's ``mmv.c``; what the drop-in keeps and changes: ``docs/mmv.md``),
checking every offset and count against the buffer: a bad file raises
:class:`MmvFormatError` (with the section and offset), a bad section or
record is dropped and recorded as a :class:`Diagnostic`.  Nothing here does
I/O or logs; nothing reads outside the buffer.

All integers are in the writer's native byte order ("=" structs).

:class:`FileRegions` is how a file is read: only the header, the table of
contents and the sections it names (through a ``read_at(length, offset)``
the caller gives, ``pread`` on a descriptor it opened), anything else the
records point at read on demand, a few KiB at a time.  A file extended with
a sparse tail costs nothing more.
"""

from __future__ import annotations

import bisect
import enum
import struct
from collections.abc import Iterable, Sequence
from typing import Any, Callable, Final, Literal, Union, overload

import attrs

from pmda_py.errors import PmdaError, PmErr

__all__ = [
    "HEADER",
    "INDOM",
    "INSTANCE1",
    "INSTANCE2",
    "LABEL",
    "METRIC1",
    "METRIC2",
    "STRING_SIZE",
    "TOC",
    "VALUE",
    "Diagnostic",
    "FileRegions",
    "MmvFile",
    "MmvFlags",
    "MmvFormatError",
    "MmvIndom",
    "MmvInstance",
    "MmvLabel",
    "MmvMetric",
    "MmvValue",
    "TocType",
    "cstring",
]

HEADER: Final = struct.Struct("=4siQQiIii")  #: mmv_disk_header_t (40)
TOC: Final = struct.Struct("=IIQ")  #: mmv_disk_toc_t (16); count read as uint32, as pmdammv does
INDOM: Final = struct.Struct("=IIQQQ")  #: mmv_disk_indom_t (32)
INSTANCE1: Final = struct.Struct("=QIi64s")  #: mmv_disk_instance_t (80)
INSTANCE2: Final = struct.Struct("=QIiQ")  #: mmv_disk_instance2_t (24)
METRIC1: Final = struct.Struct("=64sIiIIiIQQ")  #: mmv_disk_metric_t (104)
METRIC2: Final = struct.Struct("=QIiIIiIQQ")  #: mmv_disk_metric2_t (48)
VALUE: Final = struct.Struct("=8sqQQ")  #: mmv_disk_value_t (32)
LABEL: Final = struct.Struct("=IIi244s")  #: mmv_disk_label_t (256)
STRING_SIZE: Final = 256  #: mmv_disk_string_t
MAX_METRICS: Final = 1023
MAX_INDOMS: Final = 4194303
MAX_LABELS: Final = 255
MAX_DIAGNOSTICS: Final = 64  #: problems named per file parse (more are counted)
MAX_TOCS: Final = 1024  #: a TOC with more entries is refused (libpcp_mmv writes at most 6)
MAX_NAMED: Final = 64 << 20  #: sections naming more bytes than this: the file is refused
#: indoms naming more bytes of instance records than this, together: the file is refused
MAX_INSTANCES: Final = MAX_NAMED
#: a file that would have more than this read (sections, then what their
#: records point at, on demand) is refused at that read
MAX_READ: Final = 2 * MAX_NAMED
_CHUNK: Final = 4096  #: what a read on demand brings in (aligned)
#: what the texts of string values may cost to read, per file and fetch
#: (each read's bytes plus READ_CHARGE): 131 072 texts end to end, or about
#: 7 700 scattered ones; past it the file's string values are refused
TEXT_BUDGET: Final = 32 << 20
READ_CHARGE: Final = _CHUNK  #: a read costs as much as this many bytes more


class TocType(enum.IntEnum):
    """MMV_TOC_* section types."""

    INDOMS = 1
    INSTANCES = 2
    METRICS = 3
    VALUES = 4
    STRINGS = 5
    LABELS = 6


class MmvFlags(enum.IntFlag):
    """MMV_FLAG_* header flags."""

    NOPREFIX = 0x1
    PROCESS = 0x2
    SENTINEL = 0x4


#: the part of a file a problem is in
Section = Literal["header", "toc", "file", "metrics", "indoms", "instances", "values", "labels"]


class MmvFormatError(PmdaError, ValueError):
    """The whole file is unusable; ``section`` and ``offset`` say where."""

    code = PmErr.GENERIC

    def __init__(self, message: str, *, section: Section = "header", offset: int = 0) -> None:
        super().__init__(f"{section} at offset {offset}: {message}")
        self.section = section
        self.offset = offset


@attrs.frozen
class Diagnostic:
    """A section, record or label that was dropped, and why."""

    section: Section
    offset: int
    reason: str


def cstring(buf: Image, off: int, maxlen: int) -> bytes:
    """NUL-terminated bytes at ``off`` (at most ``maxlen``, never past the end)."""
    end = min(len(buf), off + maxlen)
    raw = bytes(buf[off:end])
    nul = raw.find(b"\0")
    return raw if nul < 0 else raw[:nul]


def _extent(ttype: int, count: int, version: int) -> int:
    """Bytes a TOC entry's section spans."""
    v2 = version >= 2
    sizes: dict[int, int] = {
        TocType.INDOMS: INDOM.size,
        TocType.INSTANCES: INSTANCE2.size if v2 else INSTANCE1.size,
        TocType.METRICS: METRIC2.size if v2 else METRIC1.size,
        TocType.VALUES: VALUE.size,
        TocType.STRINGS: STRING_SIZE,
        TocType.LABELS: LABEL.size,
    }
    return sizes.get(ttype, 0) * count


class FileRegions:
    """A file as the parser sees it (``len`` is the file's size, slices are
    its bytes) built from the regions actually read: ``pread`` of what the
    header names, and of whatever else is asked for, on demand.

    ``read_at`` is only used while the object is being built and read; the
    owner sets it to None when its descriptor is closed (later reads outside
    the regions then find nothing, as past the end).  It does no I/O itself."""

    def __init__(self, read_at: Callable[[int, int], bytes] | None, size: int) -> None:
        self.read_at = read_at
        self.size = size
        self._starts: list[int] = []
        self._blocks: list[bytes] = []
        self.read_bytes = 0  #: bytes read so far (the cost of this file)
        self.text_cost = 0  #: what :meth:`read_texts` read so far, with its charge per read

    def __len__(self) -> int:
        return self.size

    def add(self, offset: int, length: int) -> None:
        """Read ``[offset, offset + length)`` (clipped to the size) now;
        regions it touches are joined into one."""
        end = min(self.size, offset + length)
        if offset < 0 or end <= offset or self._covered(offset, end) is not None:
            return
        lo = bisect.bisect_right(self._starts, offset) - 1
        if lo >= 0 and self._starts[lo] + len(self._blocks[lo]) < offset:
            lo += 1
        lo = max(lo, 0)
        hi = bisect.bisect_right(self._starts, end)  # blocks [lo, hi) touch the range
        if lo < hi:
            offset = min(offset, self._starts[lo])
            end = max(end, self._starts[hi - 1] + len(self._blocks[hi - 1]))
        data = self._pread(offset, end)
        del self._starts[lo:hi]
        del self._blocks[lo:hi]
        if data:
            self._starts.insert(lo, offset)
            self._blocks.insert(lo, data)

    def prefix(self) -> bytes:
        """The block read from offset 0 (b"" if none)."""
        return self._blocks[0] if self._starts and self._starts[0] == 0 else b""

    def _pread(self, offset: int, end: int) -> bytes:
        """``[offset, end)`` from the file, counted (raises
        :class:`MmvFormatError` past :data:`MAX_READ`); short where the file
        now ends, which then becomes its size."""
        data = b""
        if self.read_at is not None:
            if self.read_bytes + (end - offset) > MAX_READ:
                raise MmvFormatError(f"its records point at more than {MAX_READ} bytes", section="file", offset=offset)
            try:
                data = self.read_at(end - offset, offset)
            except OSError:
                data = b""
        self.read_bytes += len(data)
        if len(data) < end - offset:  # the file shrank under us: what is missing is past its end
            self.size = min(self.size, offset + len(data))
        return data

    def _fill(self, start: int, end: int) -> None:
        """Read the parts of ``[start, end)`` no block holds, each a block
        of its own: nothing is read twice, nothing held is copied."""
        self._read_gaps(self._gaps(start, end))

    def _gaps(self, start: int, end: int) -> list[tuple[int, int]]:
        """The parts of ``[start, end)`` no block holds, in order."""
        starts, blocks = self._starts, self._blocks
        out: list[tuple[int, int]] = []
        k = bisect.bisect_right(starts, start)
        pos = start if k == 0 else max(start, starts[k - 1] + len(blocks[k - 1]))
        while pos < end:
            stop = min(end, starts[k]) if k < len(starts) else end
            if stop > pos:
                out.append((pos, stop))
            if k >= len(starts):
                break
            pos = max(pos, starts[k] + len(blocks[k]))
            k += 1
        return out

    def _read_gaps(self, gaps: list[tuple[int, int]]) -> None:
        """Read ``gaps`` (parts no block holds, in order), each into a block
        of its own, until the file ends."""
        for pos, stop in gaps:
            data = self._pread(pos, stop)
            if data:
                k = bisect.bisect_right(self._starts, pos)
                self._starts.insert(k, pos)
                self._blocks.insert(k, data)
            if pos + len(data) < stop:
                return  # the file ends here now

    def read_texts(self, offsets: Iterable[int], width: int) -> None:
        """Read the ``width`` bytes at each of ``offsets`` (the texts string
        values point at) that no block holds yet, in order, windows less
        than a chunk apart in one read; each read costs its bytes plus
        :data:`READ_CHARGE`, all of this object's together at most
        :data:`TEXT_BUDGET` (:class:`MmvFormatError` past it, before any of
        these is read).  Offsets outside the file are left alone."""
        spans: list[list[int]] = []
        for o in sorted(set(offsets)):
            if o < 0 or o >= self.size:
                continue
            e = min(self.size, o + width)
            if spans and o <= spans[-1][1] + _CHUNK:
                spans[-1][1] = max(spans[-1][1], e)
            else:
                spans.append([o, e])
        gaps = [g for o, e in spans for g in self._gaps(o, e)]
        cost = self.text_cost + sum(e - o for o, e in gaps) + READ_CHARGE * len(gaps)
        if cost > TEXT_BUDGET:
            self.text_cost = TEXT_BUDGET + 1  # later string values of this file in this fetch: refused too
            raise MmvFormatError(
                f"its string values point at more than {TEXT_BUDGET} bytes of text to read",
                section="values",
                offset=gaps[0][0],
            )
        self.text_cost = cost
        self._read_gaps(gaps)

    def _covered(self, start: int, end: int) -> bytes | None:
        """``[start, end)`` from the blocks held (None if not all are)."""
        k = bisect.bisect_right(self._starts, start) - 1
        if k < 0:
            return None
        base, block = self._starts[k], self._blocks[k]
        if end <= base + len(block):
            return block[start - base : end - base]
        pos = base + len(block)
        if start >= pos:
            return None
        parts = [block[start - base :]]
        for j in range(k + 1, len(self._starts)):  # blocks end to end
            if self._starts[j] != pos:
                return None
            block = self._blocks[j]
            parts.append(block[: end - pos])
            pos += len(block)
            if pos >= end:
                return b"".join(parts)
        return None

    def view(self, offset: int, length: int) -> memoryview:
        """:meth:`read` as a view: no copy where one block holds the range
        (a metric's values are a view of the values section, read once per
        fetch, however many metrics a fetch reads from it)."""
        end = min(self.size, offset + length)
        k = bisect.bisect_right(self._starts, offset) - 1
        if 0 <= offset < end and k >= 0:
            base, block = self._starts[k], self._blocks[k]
            if end <= base + len(block):
                return memoryview(block)[offset - base : end - base]
        return memoryview(self.read(offset, length))

    def read(self, offset: int, length: int) -> bytes:
        """The file's bytes ``[offset, offset + length)``, cut at its end
        (what is not read yet is read now, in aligned chunks)."""
        end = min(self.size, offset + length)
        if offset < 0 or end <= offset:
            return b""
        got = self._covered(offset, end)
        if got is None:
            first = offset - offset % _CHUNK
            self._fill(first, min(self.size, end + (-end) % _CHUNK))
            end = min(end, self.size)
            got = self._covered(offset, end) if end > offset else b""
        return got or b""

    @overload
    def __getitem__(self, key: int) -> int: ...
    @overload
    def __getitem__(self, key: slice) -> bytes: ...
    def __getitem__(self, key: int | slice) -> int | bytes:
        if isinstance(key, int):
            b = self.read(key, 1)
            if not b:
                raise IndexError(key)
            return b[0]
        start, stop, step = key.indices(self.size)
        if step != 1:
            raise ValueError("FileRegions slices have no step")
        return self.read(start, stop - start)

    @classmethod
    def load(cls, read_at: Callable[[int, int], bytes], size: int) -> FileRegions:
        """The header, TOC and every section the TOC names, read with
        ``read_at(length, offset)`` (a file of ``size`` bytes).  Raises :class:`MmvFormatError` when the
        TOC is absurd or names more than :data:`MAX_NAMED` bytes."""
        img = cls(read_at, size)
        img.add(0, HEADER.size)
        head = img.read(0, HEADER.size)
        if len(head) < HEADER.size:
            return img  # the parser says why
        version, tocs = struct.unpack_from("=i", head, 4)[0], struct.unpack_from("=i", head, 24)[0]
        if tocs > MAX_TOCS:
            raise MmvFormatError(f"TOC count {tocs} > {MAX_TOCS}", section="toc", offset=24)
        if tocs <= 0:
            return img
        img.add(HEADER.size, TOC.size * tocs)
        toc = img.read(HEADER.size, TOC.size * tocs)
        spans = []
        for t in range(len(toc) // TOC.size):
            ttype, count, offset = TOC.unpack_from(toc, t * TOC.size)
            length = _extent(ttype, count, version)
            if offset >= img.size or length <= 0:
                continue
            spans.append((offset, min(img.size, offset + length)))
        named = sum(e - o for o, e in spans)
        if named > MAX_NAMED:
            raise MmvFormatError(f"sections name {named} bytes (limit {MAX_NAMED})", section="toc", offset=40)
        spans.sort()
        merged: list[list[int]] = []
        for o, e in spans:  # one read for sections that touch or nearly do
            if merged and o <= merged[-1][1] + _CHUNK:
                merged[-1][1] = max(merged[-1][1], e)
            else:
                merged.append([o, e])
        for o, e in merged:
            img.add(o, e - o)
        return img


Image = Union[bytes, bytearray, memoryview, FileRegions]
_I32: Final = struct.Struct("=i")


#: ``unpack(record, offset)``: the record's fields (as ``struct`` gives them)
_Unpack = Callable[[struct.Struct, int], tuple[Any, ...]]


def _unpacker(buf: Image) -> _Unpack:
    """``unpack(record, offset)`` on a file image; on :class:`FileRegions`
    a record the file no longer holds (it shrank under us) is a format error."""
    if not isinstance(buf, FileRegions):
        view = memoryview(buf)
        return lambda st, off: st.unpack_from(view, off)
    regions = buf
    head = regions.prefix()  # usually the whole of what was read: one block from offset 0
    hview, hlen = memoryview(head), len(head)

    def unpack(st: struct.Struct, off: int) -> tuple[Any, ...]:
        if off >= 0 and off + st.size <= hlen:
            return st.unpack_from(hview, off)
        raw = regions.read(off, st.size)
        if len(raw) != st.size:
            raise MmvFormatError("the file shrank while it was read", section="file", offset=off)
        return st.unpack(raw)

    return unpack


@attrs.frozen
class MmvInstance:
    internal: int
    name: bytes


@attrs.frozen
class MmvIndom:
    serial: int
    instances: tuple[MmvInstance, ...]
    shorttext: int
    helptext: int
    offset: int


@attrs.frozen
class MmvMetric:
    """One metric record (``accepted`` False: kept only for value lookup order)."""

    offset: int
    name: bytes
    item: int
    type: int
    sem: int
    units: int
    indom: int
    shorttext: int
    helptext: int


@attrs.frozen
class MmvValue:
    offset: int
    metric: int  #: absolute offset of the metric record
    instance: int | None  #: internal instance id (None for singular values)


@attrs.frozen
class MmvLabel:
    flags: int
    identity: int
    internal: int
    payload: bytes
    offset: int


@attrs.frozen
class MmvFile:
    """A parsed MMV file (metadata only; values are read live by offset)."""

    size: int
    version: int
    g1: int
    g2: int
    flags: int
    process: int
    cluster: int
    indoms: tuple[MmvIndom, ...]
    metrics: tuple[MmvMetric, ...]  #: every record of the METRICS section(s), in order
    values: tuple[MmvValue, ...]
    values_offset: int  #: start of the VALUES section (-1: none usable)
    values_count: int
    labels: tuple[MmvLabel, ...]
    diagnostics: tuple[Diagnostic, ...]

    @classmethod
    def header(cls, buf: Image) -> tuple[bytes, int, int, int, int, int, int, int]:
        """The raw header fields; raises MmvFormatError if too short."""
        if len(buf) < HEADER.size:
            raise MmvFormatError(f"file of {len(buf)} bytes is smaller than the header")
        return _unpacker(buf)(HEADER, 0)

    @classmethod
    def from_buffer(cls, data: Image) -> MmvFile:
        """Parse a whole file image.

        Raises:
            MmvFormatError: bad magic, version, generation, TOC; the file is
                not loaded (pmdammv skips it).
        """
        buf = data if isinstance(data, FileRegions) else memoryview(data)
        size = len(buf)
        unpack = _unpacker(buf)
        magic, version, g1, g2, tocs, flags, process, cluster = cls.header(buf)
        if magic != b"MMV\0":
            raise MmvFormatError(f"bad magic {magic!r}")
        if version not in (1, 2, 3):
            raise MmvFormatError(f"version {version} unsupported")
        if g1 == 0 or g1 != g2:
            raise MmvFormatError(f"generation in flux (g1={g1:#x} g2={g2:#x})", offset=8)
        if tocs < 2 or HEADER.size + TOC.size * tocs > size:
            raise MmvFormatError(f"bad TOC count {tocs}", section="toc", offset=24)
        sections = _Sections(buf, unpack, version >= 2)
        for t in range(tocs):
            sections.read(HEADER.size + TOC.size * t)
        sections.read_values()
        return cls(
            size,
            version,
            g1,
            g2,
            flags,
            process,
            cluster,
            tuple(sections.indoms),
            tuple(sections.metrics),
            tuple(sections.values),
            sections.values_offset,
            sections.values_count,
            tuple(sections.labels),
            sections.noted(),
        )


class _Sections:
    """The sections a file's TOC names, read in TOC order: the records kept
    (METRICS and INDOMS sections add up, the last good VALUES and LABELS
    section wins, as in pmdammv) and what was dropped, and why."""

    def __init__(self, buf: Image, unpack: _Unpack, v2: bool) -> None:
        self.buf = buf
        self.size = len(buf)
        self.unpack = unpack
        self.v2 = v2
        self.diags: list[Diagnostic] = []
        self.indoms: list[MmvIndom] = []
        self.metrics: list[MmvMetric] = []
        self.values: list[MmvValue] = []
        self.labels: list[MmvLabel] = []
        self.values_offset, self.values_count = -1, 0
        self.instance_bytes = 0  #: instance records the indoms named so far
        self.unnamed = 0  #: problems past MAX_DIAGNOSTICS, counted only
        self.deferred: list[tuple[int, int]] = []  #: the VALUES sections, in TOC order

    def read_values(self) -> None:
        """The VALUES sections named (in TOC order: the last good one wins)."""
        for count, offset in self.deferred:
            self._values(count, offset)

    def _diag(self, diag: Diagnostic) -> None:
        """Note a problem (the first :data:`MAX_DIAGNOSTICS`; the others
        are counted: a file of a million bad records costs a count)."""
        if len(self.diags) < MAX_DIAGNOSTICS:
            self.diags.append(diag)
        else:
            self.unnamed += 1

    def noted(self) -> tuple[Diagnostic, ...]:
        """The problems noted, and how many more there were."""
        if not self.unnamed:
            return tuple(self.diags)
        more = f"{self.unnamed} more problems (only the first {MAX_DIAGNOSTICS} are named)"
        return (*self.diags, Diagnostic("file", 0, more))

    def read(self, toc_off: int) -> None:
        """The section of the TOC entry at ``toc_off``."""
        ttype, count, offset = self.unpack(TOC, toc_off)
        if ttype == TocType.METRICS:
            self._metrics(count, offset)
        elif ttype == TocType.INDOMS:
            self._indoms(count, offset)
        elif ttype == TocType.VALUES:  # read after the others: the records naming a metric record are kept
            self.deferred.append((count, offset))
        elif ttype == TocType.LABELS:
            self._labels(count, offset)
        elif ttype not in (TocType.INSTANCES, TocType.STRINGS):
            self._diag(Diagnostic("toc", toc_off, f"bad TOC type {ttype}"))

    def _metrics(self, count: int, offset: int) -> None:
        rec = METRIC2 if self.v2 else METRIC1
        if count > MAX_METRICS:
            self._diag(Diagnostic("metrics", offset, f"metrics count {count} > {MAX_METRICS}"))
            return
        if offset + count * rec.size > self.size:
            self._diag(Diagnostic("metrics", offset, f"{count} metrics past end of file"))
            return
        for k in range(count):
            off = offset + k * rec.size
            f = self.unpack(rec, off)
            if self.v2:
                noff = f[0]
                if noff + STRING_SIZE > self.size:
                    name = b""
                    self._diag(Diagnostic("metrics", off, f"name offset {noff} past end of file"))
                else:
                    name = cstring(self.buf, noff, STRING_SIZE - 1)
            else:
                name = cstring(f[0], 0, 63)
            self.metrics.append(MmvMetric(off, name, f[1], f[2], f[3], f[4], f[5], f[7], f[8]))

    def _indoms(self, count: int, offset: int) -> None:
        if count > MAX_INDOMS or offset + INDOM.size * count > self.size:
            self._diag(Diagnostic("indoms", offset, f"bad indom section ({count} entries)"))
            return
        # instances may lie outside the sections the TOC names, and many
        # indoms may name the same ones: bounded together, before any is read
        rec = (INSTANCE2 if self.v2 else INSTANCE1).size
        for k in range(count):
            self.instance_bytes += self.unpack(INDOM, offset + k * INDOM.size)[1] * rec
            if self.instance_bytes > MAX_INSTANCES:
                raise MmvFormatError(
                    f"indoms name {self.instance_bytes} bytes of instances (limit {MAX_INSTANCES})",
                    section="indoms",
                    offset=offset + k * INDOM.size,
                )
        for k in range(count):
            off = offset + k * INDOM.size
            serial, icount, ioff, short, helpt = self.unpack(INDOM, off)
            length = icount * (INSTANCE2 if self.v2 else INSTANCE1).size
            if ioff + length > self.size:
                self._diag(Diagnostic("indoms", off, f"indom {serial}: {icount} instances past end"))
                continue
            if serial > MAX_INDOMS:
                self._diag(Diagnostic("indoms", off, f"invalid serial {serial}"))
                continue
            if isinstance(self.buf, FileRegions):
                self.buf.add(ioff, length)
            self.indoms.append(MmvIndom(serial, self._instances(icount, ioff), short, helpt, off))

    def _instances(self, icount: int, ioff: int) -> tuple[MmvInstance, ...]:
        inst_rec = INSTANCE2 if self.v2 else INSTANCE1
        insts = []
        for j in range(icount):
            ro = ioff + j * inst_rec.size
            r = self.unpack(inst_rec, ro)
            if self.v2:
                if r[3] + 1 > self.size:
                    self._diag(Diagnostic("instances", ro, f"name offset {r[3]} past end"))
                    continue
                nm = cstring(self.buf, r[3], STRING_SIZE - 1)
            else:
                nm = cstring(r[3], 0, 63)
            insts.append(MmvInstance(r[2], nm))
        return tuple(insts)

    def _values(self, count: int, offset: int) -> None:
        self.values = []
        if offset + VALUE.size * count > self.size:
            self._diag(Diagnostic("values", offset, f"{count} values past end of file"))
            self.values_offset, self.values_count = -1, 0
            return
        self.values_offset, self.values_count = offset, count
        for k in self._naming_metrics(count, offset):
            off = offset + k * VALUE.size
            _v, _extra, moff, ioff = self.unpack(VALUE, off)
            inst: int | None = None
            if ioff:
                if ioff + 16 > self.size:
                    self._diag(Diagnostic("values", off, f"instance offset {ioff} past end"))
                    continue
                inst = self.unpack(_I32, ioff + 12)[0]
            self.values.append(MmvValue(off, moff, inst))

    def _naming_metrics(self, count: int, offset: int) -> Sequence[int]:
        """The indexes of the value records (of the section of ``count`` at
        ``offset``) whose metric offset is a metric record's: only those
        can be a metric's value, and a section of a million others costs a
        pass over their metric column, not a record each."""
        wanted = {m.offset for m in self.metrics}
        size = VALUE.size * count
        view = self.buf.view(offset, size) if isinstance(self.buf, FileRegions) else memoryview(self.buf)[offset:]
        if len(view) < size:
            return range(count)  # (cannot be: the section was checked to be in the file)
        column = view[:size].cast("Q")[2::4]  # each record's third word: the metric offset
        return [k for k, moff in enumerate(column) if moff in wanted]

    def _labels(self, count: int, offset: int) -> None:
        if count > MAX_LABELS or offset + LABEL.size * count > self.size:
            self._diag(Diagnostic("labels", offset, f"bad label section ({count} labels)"))
            return
        # pmdammv keeps the last good LABELS section, copies each record
        # to its stack and reads the payload with strlen(): one filling
        # all 244 bytes runs on into stack memory, and is kept or refused
        # as that memory happens to read (both seen): skipped here
        self.labels = []
        for k in range(count):
            off = offset + k * LABEL.size
            lf, ident, internal, payload = self.unpack(LABEL, off)
            if b"\0" not in payload:
                self._diag(
                    Diagnostic(
                        "labels",
                        off,
                        "label payload not NUL-terminated (pmdammv reads on into its stack): record skipped",
                    )
                )
                continue
            self.labels.append(MmvLabel(lf, ident, internal, cstring(payload, 0, 243), off))

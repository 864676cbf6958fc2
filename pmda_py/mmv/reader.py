"""MMV ("Memory Mapped Values") files, v1/v2/v3: a pure, bounds-checked parser.

:meth:`MmvFile.from_buffer` validates the header and table of contents and
reads every section the way PCP's pmdammv does (PCP's ``mmv_stats.h`` and
pmdammv's ``mmv.c``; what the drop-in keeps and changes: ``docs/mmv.md``),
checking every offset and count against the buffer: a bad file raises
:class:`MmvFormatError` (with the section and offset), a bad section or
record is dropped and recorded as a :class:`Diagnostic`.  Nothing here does
I/O or logs; nothing reads outside the buffer.

All integers are in the writer's native byte order ("=" structs).

The layout and limits are :mod:`pmda_py.mmv.layout`'s; a file is read
through :class:`~pmda_py.mmv.regions.FileRegions`.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import Any, Callable, Final, Union

import attrs

from pmda_py.mmv.layout import (
    HEADER,
    INDOM,
    INSTANCE1,
    INSTANCE2,
    LABEL,
    MAX_DIAGNOSTICS,
    MAX_INDOMS,
    MAX_INSTANCES,
    MAX_LABELS,
    MAX_METRICS,
    METRIC1,
    METRIC2,
    STRING_SIZE,
    TOC,
    VALUE,
    Diagnostic,
    MmvFormatError,
    TocType,
)
from pmda_py.mmv.regions import FileRegions

__all__ = [
    "Image",
    "MmvFile",
    "MmvIndom",
    "MmvInstance",
    "MmvLabel",
    "MmvMetric",
    "MmvValue",
    "cstring",
]


Image = Union[bytes, bytearray, memoryview, FileRegions]
_I32: Final = struct.Struct("=i")


def cstring(buf: Image, off: int, maxlen: int) -> bytes:
    """NUL-terminated bytes at ``off`` (at most ``maxlen``, never past the end)."""
    end = min(len(buf), off + maxlen)
    raw = bytes(buf[off:end])
    nul = raw.find(b"\0")
    return raw if nul < 0 else raw[:nul]


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

"""MMV ("Memory Mapped Values") files, v1/v2/v3: a pure, bounds-checked parser.

:meth:`MmvFile.from_buffer` validates the header and table of contents and
reads every section the way PCP's pmdammv does (PCP's ``mmv_stats.h`` and
pmdammv's ``mmv.c``; what the drop-in keeps and changes: ``docs/mmv.md``),
checking every offset and count against the buffer: a bad file raises
:class:`MmvFormatError` (with the section and offset), a bad section or
record is dropped and recorded as a :class:`Diagnostic`.  Nothing here does
I/O or logs; nothing reads outside the buffer.

All integers are in the writer's native byte order ("=" structs).
"""

from __future__ import annotations

import enum
import struct
from typing import Final

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


class MmvFormatError(PmdaError, ValueError):
    """The whole file is unusable; ``section`` and ``offset`` say where."""

    code = PmErr.GENERIC

    def __init__(self, message: str, *, section: str = "header", offset: int = 0) -> None:
        super().__init__(f"{section} at offset {offset}: {message}")
        self.section = section
        self.offset = offset


@attrs.frozen
class Diagnostic:
    """A section, record or label that was dropped, and why."""

    section: str
    offset: int
    reason: str


def cstring(buf: memoryview | bytes, off: int, maxlen: int) -> bytes:
    """NUL-terminated bytes at ``off`` (at most ``maxlen``, never past the end)."""
    end = min(len(buf), off + maxlen)
    raw = bytes(buf[off:end])
    nul = raw.find(b"\0")
    return raw if nul < 0 else raw[:nul]


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
    def header(cls, buf: bytes | memoryview) -> tuple[bytes, int, int, int, int, int, int, int]:
        """The raw header fields; raises MmvFormatError if too short."""
        if len(buf) < HEADER.size:
            raise MmvFormatError(f"file of {len(buf)} bytes is smaller than the header")
        return HEADER.unpack_from(buf, 0)

    @classmethod
    def from_buffer(cls, data: bytes | memoryview) -> MmvFile:
        """Parse a whole file image.

        Raises:
            MmvFormatError: bad magic, version, generation, TOC; the file is
                not loaded (pmdammv skips it).
        """
        buf = memoryview(data)
        size = len(buf)
        magic, version, g1, g2, tocs, flags, process, cluster = cls.header(buf)
        if magic != b"MMV\0":
            raise MmvFormatError(f"bad magic {magic!r}")
        if version not in (1, 2, 3):
            raise MmvFormatError(f"version {version} unsupported")
        if g1 == 0 or g1 != g2:
            raise MmvFormatError(f"generation in flux (g1={g1:#x} g2={g2:#x})", offset=8)
        if tocs < 2 or HEADER.size + TOC.size * tocs > size:
            raise MmvFormatError(f"bad TOC count {tocs}", section="toc", offset=24)
        diags: list[Diagnostic] = []
        indoms: list[MmvIndom] = []
        metrics: list[MmvMetric] = []
        values: list[MmvValue] = []
        labels: list[MmvLabel] = []
        values_offset, values_count = -1, 0
        v2 = version >= 2
        for t in range(tocs):
            toc_off = HEADER.size + TOC.size * t
            ttype, count, offset = TOC.unpack_from(buf, toc_off)
            if ttype == TocType.METRICS:
                rec = METRIC2 if v2 else METRIC1
                if count > MAX_METRICS:
                    diags.append(Diagnostic("metrics", offset, f"metrics count {count} > {MAX_METRICS}"))
                    continue
                if offset + count * rec.size > size:
                    diags.append(Diagnostic("metrics", offset, f"{count} metrics past end of file"))
                    continue
                for k in range(count):
                    off = offset + k * rec.size
                    f = rec.unpack_from(buf, off)
                    if v2:
                        noff = f[0]
                        if noff + STRING_SIZE > size:
                            name = b""
                            diags.append(Diagnostic("metrics", off, f"name offset {noff} past end of file"))
                        else:
                            name = cstring(buf, noff, STRING_SIZE - 1)
                    else:
                        name = cstring(f[0], 0, 63)
                    metrics.append(MmvMetric(off, name, f[1], f[2], f[3], f[4], f[5], f[7], f[8]))
            elif ttype == TocType.INDOMS:
                if count > MAX_INDOMS or offset + INDOM.size * count > size:
                    diags.append(Diagnostic("indoms", offset, f"bad indom section ({count} entries)"))
                    continue
                inst_rec = INSTANCE2 if v2 else INSTANCE1
                for k in range(count):
                    off = offset + k * INDOM.size
                    serial, icount, ioff, short, helpt = INDOM.unpack_from(buf, off)
                    if ioff + icount * inst_rec.size > size:
                        diags.append(Diagnostic("indoms", off, f"indom {serial}: {icount} instances past end"))
                        continue
                    if serial > MAX_INDOMS:
                        diags.append(Diagnostic("indoms", off, f"invalid serial {serial}"))
                        continue
                    insts = []
                    for j in range(icount):
                        ro = ioff + j * inst_rec.size
                        r = inst_rec.unpack_from(buf, ro)
                        if v2:
                            if r[3] + 1 > size:
                                diags.append(Diagnostic("instances", ro, f"name offset {r[3]} past end"))
                                continue
                            nm = cstring(buf, r[3], STRING_SIZE - 1)
                        else:
                            nm = cstring(r[3], 0, 63)
                        insts.append(MmvInstance(r[2], nm))
                    indoms.append(MmvIndom(serial, tuple(insts), short, helpt, off))
            elif ttype == TocType.VALUES:
                if offset + VALUE.size * count > size:
                    diags.append(Diagnostic("values", offset, f"{count} values past end of file"))
                    values_offset, values_count = -1, 0
                    values = []
                    continue
                values_offset, values_count = offset, count
                values = []
                for k in range(count):
                    off = offset + k * VALUE.size
                    _v, _extra, moff, ioff = VALUE.unpack_from(buf, off)
                    inst: int | None = None
                    if ioff:
                        if ioff + 16 > size:
                            diags.append(Diagnostic("values", off, f"instance offset {ioff} past end"))
                            continue
                        inst = struct.unpack_from("=i", buf, ioff + 12)[0]
                    values.append(MmvValue(off, moff, inst))
            elif ttype == TocType.LABELS:
                if count > MAX_LABELS or offset + LABEL.size * count > size:
                    diags.append(Diagnostic("labels", offset, f"bad label section ({count} labels)"))
                    continue
                # pmdammv keeps the last good LABELS section, copies each record
                # to its stack and reads the payload with strlen(): one filling
                # all 244 bytes runs on into stack memory, and is kept or refused
                # as that memory happens to read (both seen): skipped here
                labels = []
                for k in range(count):
                    off = offset + k * LABEL.size
                    lf, ident, internal, payload = LABEL.unpack_from(buf, off)
                    if b"\0" not in payload:
                        diags.append(
                            Diagnostic(
                                "labels",
                                off,
                                "label payload not NUL-terminated (pmdammv reads on into its stack): record skipped",
                            )
                        )
                        continue
                    labels.append(MmvLabel(lf, ident, internal, cstring(payload, 0, 243), off))
            elif ttype in (TocType.INSTANCES, TocType.STRINGS):
                continue
            else:
                diags.append(Diagnostic("toc", toc_off, f"bad TOC type {ttype}"))
        return cls(
            size,
            version,
            g1,
            g2,
            flags,
            process,
            cluster,
            tuple(indoms),
            tuple(metrics),
            tuple(values),
            values_offset,
            values_count,
            tuple(labels),
            tuple(diags),
        )

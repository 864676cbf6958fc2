"""The MMV file layout (v1/v2/v3): record structs, section types, flags,
the limits the parser holds a file to, and how it reports a problem.
Pure: constants and records only.

All integers are in the writer's native byte order ("=" structs).
"""

from __future__ import annotations

import enum
import struct
from typing import Final, Literal

import attrs

from pmda_py.errors import PmdaError, PmErr

__all__ = [
    "HEADER",
    "INDOM",
    "INSTANCE1",
    "INSTANCE2",
    "LABEL",
    "MAX_DIAGNOSTICS",
    "MAX_INDOMS",
    "MAX_INSTANCES",
    "MAX_LABELS",
    "MAX_METRICS",
    "MAX_NAMED",
    "MAX_OWNER_INSTANCES",
    "MAX_READ",
    "MAX_TOCS",
    "METRIC1",
    "METRIC2",
    "READ_CHARGE",
    "STRING_SIZE",
    "TEXT_BUDGET",
    "TOC",
    "VALUE",
    "CHUNK",
    "Diagnostic",
    "MmvFlags",
    "MmvFormatError",
    "Section",
    "TocType",
    "extent",
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
#: instance entries the indoms of one owner's files may have in all (what a
#: scan keeps: about 160 bytes each); a file that would pass it is skipped
MAX_OWNER_INSTANCES: Final = 1_000_000
#: a file that would have more than this read (sections, then what their
#: records point at, on demand) is refused at that read
MAX_READ: Final = 2 * MAX_NAMED
CHUNK: Final = 4096  #: what a read on demand brings in (aligned)
#: what the texts of string values may cost to read, per file and fetch
#: (each read's bytes plus READ_CHARGE): 131 072 texts end to end, or about
#: 7 700 scattered ones; past it the file's string values are refused
TEXT_BUDGET: Final = 32 << 20
READ_CHARGE: Final = CHUNK  #: a read costs as much as this many bytes more


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


def extent(ttype: int, count: int, version: int) -> int:
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

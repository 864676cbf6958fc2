"""The PCP value model: identifiers, units, descriptors and constants.

Bit-field words (pmID, pmInDom, pmUnits) get pack/unpack helpers here; the
wire codec and the tables both use them.  Imports :mod:`pmda_py.errors` only.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from types import MappingProxyType
from typing import Final, Literal

import attrs

__all__ = [
    "PM_ID_NULL",
    "PM_INDOM_NULL",
    "PM_IN_NULL",
    "DYNAMIC_PMID",
    "EventFlag",
    "LabelType",
    "PmDesc",
    "PmSem",
    "PmType",
    "PmUnits",
    "ProfileState",
    "TYPES",
    "TextType",
    "TypeInfo",
    "ValueForm",
    "indom",
    "indom_domain",
    "indom_serial",
    "indom_str",
    "pmid",
    "pmid_cluster",
    "pmid_domain",
    "pmid_item",
    "pmid_str",
    "signed",
    "parse_indom",
    "parse_pmid",
]

PM_ID_NULL: Final = 0xFFFFFFFF
PM_INDOM_NULL: Final = 0xFFFFFFFF
PM_IN_NULL: Final = -1
DYNAMIC_PMID: Final = 511


class PmType(enum.IntEnum):
    """``PM_TYPE_*`` metric value types."""

    NOSUPPORT = -1
    I32 = 0  #: PM_TYPE_32
    U32 = 1
    I64 = 2  #: PM_TYPE_64
    U64 = 3
    FLOAT = 4
    DOUBLE = 5
    STRING = 6
    AGGREGATE = 7
    AGGREGATE_STATIC = 8
    EVENT = 9
    HIGHRES_EVENT = 10
    UNKNOWN = 255


#: how a value travels in a pmResult: in the pmValue word itself (32-bit
#: integers), in a fixed-size value block, or in a block of its own length
ValueForm = Literal["insitu", "fixed", "var"]


@attrs.frozen
class TypeInfo:
    """One value type, everywhere it matters: on the wire, in ``array``/
    ``struct`` and in Python.  The single source of these facts (see
    :data:`TYPES`); wire, dispatch, MMV and OpenMetrics read them here."""

    #: ``struct``/``array`` code of one value ("" where values are not numbers)
    code: str
    #: bytes of one value in a value block (0 where its length varies)
    size: int
    #: how a value of this type travels in a pmResult
    form: ValueForm
    #: every ``array`` type code whose items are values of this type as they are
    #: (``"l"`` is a C long: 32-bit codes accept it as the binding does)
    array_codes: tuple[str, ...] = ()
    #: the Python types a table may return for it
    python: tuple[type, ...] = ()
    #: the integer range, for the integer types
    low: int | None = None
    high: int | None = None

    @property
    def integer(self) -> bool:
        return self.low is not None


#: :class:`TypeInfo` of each :class:`PmType` that carries values
TYPES: Final[Mapping[PmType, TypeInfo]] = MappingProxyType(
    {
        PmType.I32: TypeInfo("i", 4, "insitu", ("i", "l"), (int,), -(1 << 31), (1 << 31) - 1),
        PmType.U32: TypeInfo("I", 4, "insitu", ("I", "L"), (int,), 0, (1 << 32) - 1),
        PmType.I64: TypeInfo("q", 8, "fixed", ("q",), (int,), -(1 << 63), (1 << 63) - 1),
        PmType.U64: TypeInfo("Q", 8, "fixed", ("Q",), (int,), 0, (1 << 64) - 1),
        PmType.FLOAT: TypeInfo("f", 4, "fixed", ("f",), (float, int)),
        PmType.DOUBLE: TypeInfo("d", 8, "fixed", ("d",), (float, int)),
        PmType.STRING: TypeInfo("", 0, "var", (), (str, bytes)),
        PmType.AGGREGATE: TypeInfo("", 0, "var", (), (bytes,)),
        PmType.AGGREGATE_STATIC: TypeInfo("", 0, "var", (), (bytes,)),
        PmType.EVENT: TypeInfo("", 0, "var", (), (list,)),
        PmType.HIGHRES_EVENT: TypeInfo("", 0, "var", (), (list,)),
    }
)


class EventFlag(enum.IntFlag):
    """``PM_EVENT_FLAG_*``: an event record's flags."""

    POINT = 0x1
    START = 0x2
    END = 0x4
    ID = 0x8
    PARENT = 0x10
    MISSED = 0x80000000


class PmSem(enum.IntEnum):
    """``PM_SEM_*`` metric semantics."""

    COUNTER = 1
    INSTANT = 3
    DISCRETE = 4


class ProfileState(enum.IntEnum):
    """``PM_PROFILE_*``."""

    INCLUDE = 0
    EXCLUDE = 1


class TextType(enum.IntFlag):
    """``PM_TEXT_*`` bits of TEXT_REQ."""

    ONELINE = 0x1
    HELP = 0x2
    PMID = 0x4
    INDOM = 0x8
    DIRECT = 0x10


class LabelType(enum.IntFlag):
    """``PM_LABEL_*`` levels and per-label flags."""

    CONTEXT = 0x1
    DOMAIN = 0x2
    INDOM = 0x4
    CLUSTER = 0x8
    ITEM = 0x10
    INSTANCES = 0x20
    COMPOUND = 0x40
    OPTIONAL = 0x80


def pmid(domain: int, cluster: int, item: int) -> int:
    """Build a pmID: 9-bit domain, 12-bit cluster, 10-bit item."""
    return ((domain & 0x1FF) << 22) | ((cluster & 0xFFF) << 10) | (item & 0x3FF)


def pmid_domain(p: int) -> int:
    """Domain field of a pmID."""
    return (p >> 22) & 0x1FF


def pmid_cluster(p: int) -> int:
    """Cluster field of a pmID."""
    return (p >> 10) & 0xFFF


def pmid_item(p: int) -> int:
    """Item field of a pmID."""
    return p & 0x3FF


def pmid_str(p: int) -> str:
    """``D.C.I`` as pmIDStr prints it (``PM_ID_NULL`` for the null id)."""
    if p == PM_ID_NULL:
        return "PM_ID_NULL"
    return f"{pmid_domain(p)}.{pmid_cluster(p)}.{pmid_item(p)}"


def indom(domain: int, serial: int) -> int:
    """Build a pmInDom: 9-bit domain, 22-bit serial."""
    return ((domain & 0x1FF) << 22) | (serial & 0x3FFFFF)


def indom_domain(i: int) -> int:
    """Domain field of a pmInDom."""
    return (i >> 22) & 0x1FF


def indom_serial(i: int) -> int:
    """Serial field of a pmInDom."""
    return i & 0x3FFFFF


def indom_str(i: int) -> str:
    """``D.S`` as pmInDomStr prints it (``PM_INDOM_NULL`` for the null indom)."""
    if i == PM_INDOM_NULL:
        return "PM_INDOM_NULL"
    return f"{indom_domain(i)}.{indom_serial(i)}"


def parse_pmid(text: str) -> int:
    """Parse ``D.C.I`` into a pmID; raises ValueError."""
    parts = text.split(".")
    if len(parts) != 3:
        raise ValueError(f"not a PMID: {text!r}")
    d, c, i = (int(x) for x in parts)
    if not (0 <= d <= 511 and 0 <= c <= 0xFFF and 0 <= i <= 0x3FF):
        raise ValueError(f"PMID field out of range: {text!r}")
    return pmid(d, c, i)


def parse_indom(text: str) -> int:
    """Parse ``D.S`` into a pmInDom; raises ValueError."""
    parts = text.split(".")
    if len(parts) != 2:
        raise ValueError(f"not an InDom: {text!r}")
    d, s = (int(x) for x in parts)
    if not (0 <= d <= 511 and 0 <= s <= 0x3FFFFF):
        raise ValueError(f"InDom field out of range: {text!r}")
    return indom(d, s)


def signed(value: int, bits: int) -> int:
    """The low ``bits`` bits of ``value`` read as a two's-complement integer
    (``signed(0xFFFFFFFF, 32) == -1``: a C int's view of a 32-bit word)."""
    sign = 1 << (bits - 1)
    return (value & (sign - 1)) - (value & sign)


@attrs.frozen(kw_only=True)
class PmUnits:
    """``pmUnits``: dimensions and scales packed in one 32-bit word.

    Bits 7-0 are 6.0.3's ``pad`` (7.x: extraUnit/extraScale); they are
    kept as ``extra`` so a descriptor round-trips byte for byte.
    """

    dim_space: int = 0
    dim_time: int = 0
    dim_count: int = 0
    scale_space: int = 0
    scale_time: int = 0
    scale_count: int = 0
    extra: int = 0

    def to_int(self) -> int:
        """Pack into the big-endian word layout (as an unsigned int)."""
        return (
            ((self.dim_space & 0xF) << 28)
            | ((self.dim_time & 0xF) << 24)
            | ((self.dim_count & 0xF) << 20)
            | ((self.scale_space & 0xF) << 16)
            | ((self.scale_time & 0xF) << 12)
            | ((self.scale_count & 0xF) << 8)
            | (self.extra & 0xFF)
        )

    @classmethod
    def from_int(cls, word: int) -> PmUnits:
        """Unpack a 32-bit pmUnits word."""
        return cls(
            dim_space=signed(word >> 28, 4),
            dim_time=signed(word >> 24, 4),
            dim_count=signed(word >> 20, 4),
            scale_space=(word >> 16) & 0xF,
            scale_time=(word >> 12) & 0xF,
            scale_count=signed(word >> 8, 4),
            extra=word & 0xFF,
        )


@attrs.frozen(kw_only=True)
class PmDesc:
    """``pmDesc``: a metric descriptor."""

    pmid: int
    type: int
    indom: int = PM_INDOM_NULL
    sem: int = PmSem.INSTANT
    units: PmUnits = PmUnits()

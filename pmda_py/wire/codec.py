"""The byte level of the PDU codec: type codes, precompiled structs, padding,
the bounds-checked reader every decoder uses, and the layout TEXT_REQ and
LABEL_REQ share.  Sans-IO."""

from __future__ import annotations

import enum
import struct
from typing import ClassVar, Final, Type, TypeVar

import attrs

from pmda_py.errors import WireFormatError


class PduType(enum.IntEnum):
    """PDU type codes (``PDU_*`` in libpcp.h)."""

    ERROR = 0x7000
    RESULT = 0x7001
    PROFILE = 0x7002
    FETCH = 0x7003
    DESC_REQ = 0x7004
    DESC = 0x7005
    INSTANCE_REQ = 0x7006
    INSTANCE = 0x7007
    TEXT_REQ = 0x7008
    TEXT = 0x7009
    CONTROL_REQ = 0x700A  #: retired; never sent
    CREDS = 0x700C
    PMNS_IDS = 0x700D
    PMNS_NAMES = 0x700E
    PMNS_CHILD = 0x700F
    PMNS_TRAVERSE = 0x7010
    ATTR = 0x7011
    LABEL_REQ = 0x7012
    LABEL = 0x7013
    HIGHRES_FETCH = 0x7014
    HIGHRES_RESULT = 0x7015
    DESC_IDS = 0x7016
    DESCS = 0x7017

    @classmethod
    def name_of(cls, code: int, unknown: str = "{:#x}") -> str:
        """The name of type ``code``, or ``unknown`` formatted with it."""
        try:
            return cls(code).name
        except ValueError:
            return unknown.format(code)


class PduFlags(enum.IntFlag):
    """``PDU_FLAG_*`` bits of the CREDS ``c_flags`` field."""

    SECURE = 0x1
    COMPRESS = 0x2
    AUTH = 0x4
    CREDS_REQD = 0x8
    SECURE_ACK = 0x10
    NO_NSS_INIT = 0x20
    CONTAINER = 0x40
    CERT_REQD = 0x80
    BAD_LABEL = 0x100
    LABELS = 0x200
    HIGHRES = 0x400
    DESCS = 0x800


class ValFmt(enum.IntEnum):
    """``PM_VAL_*`` value formats of a value set."""

    INSITU = 0
    DPTR = 1
    SPTR = 2


CVERSION: Final = 1
PDU_VERSION: Final = 2
PAD_BYTE: Final = b"~"
HEADER_SIZE: Final = 12

_HDR = struct.Struct("!iii")
_I = struct.Struct("!i")
_II = struct.Struct("!ii")
_III = struct.Struct("!iii")
_IIII = struct.Struct("!iiii")
_U = struct.Struct("!I")
_Q = struct.Struct("!q")
_UQ = struct.Struct("!Q")
_F = struct.Struct("!f")
_D = struct.Struct("!d")
_DESC = struct.Struct("!IiIiI")
_LABEL = struct.Struct("!HBBHH")
_EVREC = struct.Struct("!iiIi")
_HREVREC = struct.Struct("!qqIi")


def pad4(n: int) -> int:
    """``n`` rounded up to a multiple of 4."""
    return (n + 3) & ~3


def _padded(data: bytes, fill: bytes = PAD_BYTE) -> bytes:
    extra = pad4(len(data)) - len(data)
    return data + fill * extra if extra else data


def _s(raw: bytes) -> str:
    return raw.decode("utf-8", "surrogateescape")


def _b(text: str) -> bytes:
    return text.encode("utf-8", "surrogateescape")


def _header(length: int, pdu_type: int, from_: int) -> bytes:
    return _HDR.pack(length, pdu_type, from_)


class _Reader:
    """Bounds-checked cursor over one PDU.  Raises WireFormatError only."""

    __slots__ = ("buf", "end", "name", "pos")

    def __init__(self, buf: memoryview, name: str, pos: int = HEADER_SIZE) -> None:
        self.buf = buf
        self.end = len(buf)
        self.name = name
        self.pos = pos

    def fail(self, why: str) -> WireFormatError:
        return WireFormatError(f"{self.name}: {why} (offset {self.pos}, len {self.end})")

    def need(self, n: int) -> None:
        if n < 0 or self.pos + n > self.end:
            raise self.fail(f"need {n} bytes")

    def i32(self) -> int:
        self.need(4)
        (v,) = _I.unpack_from(self.buf, self.pos)
        self.pos += 4
        return int(v)

    def u32(self) -> int:
        self.need(4)
        (v,) = _U.unpack_from(self.buf, self.pos)
        self.pos += 4
        return int(v)

    def count(self, item_size: int) -> int:
        """An i32 count that must fit in the remaining bytes."""
        n = self.i32()
        if n < 0 or n * item_size > self.end - self.pos:
            raise self.fail(f"bad count {n}")
        return n

    def raw(self, n: int) -> bytes:
        self.need(n)
        data = bytes(self.buf[self.pos : self.pos + n])
        self.pos += n
        return data

    def padded_string(self, n: int) -> bytes:
        """``n`` bytes of string followed by its padding (which must be present)."""
        if n < 0:
            raise self.fail(f"negative string length {n}")
        self.need(pad4(n))
        data = bytes(self.buf[self.pos : self.pos + n])
        self.pos += pad4(n)
        return data

    def done(self) -> None:
        if self.pos != self.end:
            raise self.fail(f"{self.end - self.pos} trailing bytes")


def _check_len(buf: memoryview, name: str, exact: int | None = None, minimum: int | None = None) -> None:
    n = len(buf)
    if exact is not None and n != exact:
        raise WireFormatError(f"{name}: length {n}, expected {exact}")
    if minimum is not None and n < minimum:
        raise WireFormatError(f"{name}: length {n} < {minimum}")


def _from(buf: memoryview) -> int:
    (v,) = _I.unpack_from(buf, 8)
    return int(v)


_IT = TypeVar("_IT", bound="_IdentTypeReq")


@attrs.frozen
class _IdentTypeReq:
    """The shared layout of TEXT_REQ and LABEL_REQ: ``ident`` u32, ``type`` i32."""

    pdu_type: ClassVar[PduType]
    ident: int
    type: int
    from_: int = 0

    def encode(self) -> bytes:
        return _header(20, self.pdu_type, self.from_) + struct.pack("!Ii", self.ident, self.type)

    @classmethod
    def decode(cls: Type[_IT], buf: memoryview) -> _IT:
        _check_len(buf, cls.pdu_type.name, exact=20)
        ident, type_ = struct.unpack_from("!Ii", buf, 12)
        return cls(ident, type_, _from(buf))

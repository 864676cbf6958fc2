"""PDU objects of the pmcd <-> PMDA protocol, with their encoders and decoders.

Sans-IO: this module turns bytes into frozen :mod:`attrs` objects and back,
and never touches a file, socket or logger.  Every layout follows
libpcp's ``p_*.c`` (see ``docs/internals.md``); every object re-encodes to the
bytes it was decoded from, padding included (libpcp pads with ``~``).

Decoders take the *whole* PDU (header included), because value-block
pointers in RESULT and JSON offsets in LABEL count from the PDU start.  Every
failure to decode raises :class:`~pmda_py.errors.WireFormatError`
(PM_ERR_IPC); ``struct.error``, ``IndexError`` and ``UnicodeDecodeError``
never escape.  Strings are decoded as UTF-8 with ``surrogateescape`` so any
byte string round-trips.
"""

from __future__ import annotations

import struct
from typing import Callable, ClassVar, Final, Protocol, Union

import attrs

from pmda_py.errors import LocalProtocolError, WireFormatError
from pmda_py.wire.buffers import SharedReply
from pmda_py.wire.codec import (
    _HDR,
    _I,
    _IIII,
    _U,
    CVERSION,
    HEADER_SIZE,
    PAD_BYTE,
    PDU_VERSION,
    PduFlags,
    PduType,
    ValFmt,
    _check_len,
    _from,
    _header,
    _Reader,
    _s,
    pad4,
)
from pmda_py.wire.labels import Label, LabelPdu, LabelReqPdu, LabelSet
from pmda_py.wire.meta import (
    DescIdsPdu,
    DescPdu,
    DescReqPdu,
    DescsPdu,
    InstanceEntry,
    InstancePdu,
    InstanceReqPdu,
    PmnsChildPdu,
    PmnsIdsPdu,
    PmnsNamesPdu,
    PmnsTraversePdu,
    TextPdu,
    TextReqPdu,
)
from pmda_py.wire.values import (
    EventArray,
    EventParam,
    EventRecord,
    HighresResultPdu,
    PmValue,
    ResultPdu,
    ValueBlock,
    ValueSet,
)

__all__ = [
    "CVERSION",
    "DECODERS",
    "EncodedPdu",
    "PAD_BYTE",
    "PDU_VERSION",
    "AttrPdu",
    "CredsPdu",
    "DescIdsPdu",
    "DescPdu",
    "DescReqPdu",
    "DescsPdu",
    "ErrorPdu",
    "EventArray",
    "EventParam",
    "EventRecord",
    "FetchPdu",
    "HighresFetchPdu",
    "HighresResultPdu",
    "InstanceEntry",
    "InstancePdu",
    "InstanceReqPdu",
    "Label",
    "LabelPdu",
    "LabelReqPdu",
    "LabelSet",
    "Pdu",
    "PduFlags",
    "PduType",
    "PmValue",
    "PmnsChildPdu",
    "PmnsIdsPdu",
    "PmnsNamesPdu",
    "PmnsTraversePdu",
    "ProfileEntry",
    "ProfilePdu",
    "ResultPdu",
    "TextPdu",
    "TextReqPdu",
    "UnknownPdu",
    "ValFmt",
    "ValueBlock",
    "ValueSet",
    "decode_pdu",
    "pad4",
]


# --------------------------------------------------------------------------
# ERROR, CREDS


@attrs.frozen
class ErrorPdu:
    """ERROR (p_error.c): status/ack, error reply, NOTCONN, PMDAREADY.

    ``datum`` is present only in the 20-byte form pmcd sends its clients.
    """

    pdu_type: ClassVar[PduType] = PduType.ERROR
    code: int
    datum: int | None = None
    from_: int = 0

    def encode(self) -> bytes:
        if self.datum is None:
            return _header(16, PduType.ERROR, self.from_) + _I.pack(self.code)
        return _header(20, PduType.ERROR, self.from_) + _I.pack(self.code) + _U.pack(self.datum)

    @classmethod
    def decode(cls, buf: memoryview) -> ErrorPdu:
        n = len(buf)
        if n == 16:
            return cls(_I.unpack_from(buf, 12)[0], None, _from(buf))
        if n == 20:
            return cls(_I.unpack_from(buf, 12)[0], _U.unpack_from(buf, 16)[0], _from(buf))
        raise WireFormatError(f"ERROR: length {n}, expected 16 or 20")


@attrs.frozen
class CredsPdu:
    """CREDS (p_creds.c): a list of 4-byte credentials; CVERSION is the only type.

    Each credential word is ``c_type`` in bits 31-24; for CVERSION bits
    23-16 are the PDU version and 15-0 the ``c_flags``.
    """

    pdu_type: ClassVar[PduType] = PduType.CREDS
    creds: tuple[int, ...] = attrs.field()
    from_: int = 0

    @classmethod
    def cversion(cls, flags: int = 0, *, version: int = PDU_VERSION, from_: int = 0) -> CredsPdu:
        """A CREDS with one CVERSION credential, as PMDAs and pmcd send."""
        return cls(((CVERSION << 24) | ((version & 0xFF) << 16) | (flags & 0xFFFF),), from_)

    @property
    def version(self) -> int | None:
        """PDU version of the first CVERSION credential (None if there is none)."""
        for c in self.creds:
            if c >> 24 == CVERSION:
                return (c >> 16) & 0xFF
        return None

    @property
    def flags(self) -> int:
        """``c_flags`` of the first CVERSION credential (0 if there is none)."""
        for c in self.creds:
            if c >> 24 == CVERSION:
                return c & 0xFFFF
        return 0

    def encode(self) -> bytes:
        body = b"".join(_U.pack(c & 0xFFFFFFFF) for c in self.creds)
        return _header(16 + len(body), PduType.CREDS, self.from_) + _I.pack(len(self.creds)) + body

    @classmethod
    def decode(cls, buf: memoryview) -> CredsPdu:
        r = _Reader(buf, "CREDS")
        n = r.count(4)
        if n > 1024:
            raise r.fail(f"numcreds {n} > 1024")
        creds = tuple(r.u32() for _ in range(n))
        r.done()
        return cls(creds, _from(buf))


# --------------------------------------------------------------------------
# PROFILE


@attrs.frozen
class ProfileEntry:
    """One per-indom entry of a PROFILE."""

    indom: int
    state: int
    instances: tuple[int, ...] = ()


@attrs.frozen
class ProfilePdu:
    """PROFILE (p_profile.c): the instance profile of a client context."""

    pdu_type: ClassVar[PduType] = PduType.PROFILE
    ctxid: int = 0
    g_state: int = 0
    entries: tuple[ProfileEntry, ...] = ()
    from_: int = 0

    def encode(self) -> bytes:
        parts = [_IIII.pack(self.ctxid, self.g_state, len(self.entries), 0)]
        for e in self.entries:
            parts.append(struct.pack("!Iiii", e.indom, e.state, len(e.instances), 0))
        for e in self.entries:
            if e.instances:
                parts.append(struct.pack(f"!{len(e.instances)}i", *e.instances))
        body = b"".join(parts)
        return _header(12 + len(body), PduType.PROFILE, self.from_) + body

    @classmethod
    def decode(cls, buf: memoryview) -> ProfilePdu:
        r = _Reader(buf, "PROFILE")
        ctxid = r.i32()
        g_state = r.i32()
        numprof = r.i32()
        if numprof < 0:
            raise r.fail(f"bad numprof {numprof}")
        if numprof == 0 and r.end == 24:  # 7.x accepts the form without pad
            return cls(ctxid, g_state, (), _from(buf))
        r.i32()  # pad
        if numprof * 16 > r.end - r.pos:
            raise r.fail(f"bad numprof {numprof}")
        heads = []
        total = 0
        for _ in range(numprof):
            ind = r.u32()
            state = r.i32()
            numinst = r.i32()
            r.i32()  # pad
            if numinst < 0:
                raise r.fail(f"bad numinst {numinst}")
            total += numinst
            heads.append((ind, state, numinst))
        if total * 4 != r.end - r.pos:
            raise r.fail(f"instance lists need {total * 4} bytes")
        entries = []
        for ind, state, numinst in heads:
            insts = struct.unpack_from(f"!{numinst}i", buf, r.pos) if numinst else ()
            r.pos += 4 * numinst
            entries.append(ProfileEntry(ind, state, insts))
        return cls(ctxid, g_state, tuple(entries), _from(buf))

    def includes(self, indom: int, inst: int) -> bool:
        """Whether instance ``inst`` of ``indom`` is in this profile (§5.4)."""
        for e in self.entries:
            if e.indom == indom:
                listed = inst in e.instances
                if e.state == 0:  # INCLUDE: all except those listed
                    return not listed
                return listed  # EXCLUDE: none except those listed
        return self.g_state == 0


# --------------------------------------------------------------------------
# FETCH


@attrs.frozen
class FetchPdu:
    """FETCH (p_fetch.c): the PMIDs to fetch for context ``from_``."""

    pdu_type: ClassVar[PduType] = PduType.FETCH
    pmids: tuple[int, ...] = attrs.field()
    ctxid: int = 0
    from_: int = 0
    unused_sec: int = 0
    unused_usec: int = 0

    def encode(self) -> bytes:
        n = len(self.pmids)
        return _header(28 + 4 * n, self.pdu_type, self.from_) + struct.pack(
            f"!iiii{n}I", self.ctxid, self.unused_sec, self.unused_usec, n, *self.pmids
        )

    @classmethod
    def decode(cls, buf: memoryview) -> FetchPdu:
        r = _Reader(buf, cls.pdu_type.name)
        ctxid = r.i32()
        sec = r.i32()
        usec = r.i32()
        n = r.count(4)
        if r.end != 28 + 4 * n:
            raise r.fail(f"length does not match numpmid {n}")
        pmids = struct.unpack_from(f"!{n}I", buf, 28)
        return cls(pmids, ctxid, _from(buf), sec, usec)


@attrs.frozen
class HighresFetchPdu(FetchPdu):
    """HIGHRES_FETCH: same layout as FETCH (client <-> pmcd only)."""

    pdu_type: ClassVar[PduType] = PduType.HIGHRES_FETCH


# --------------------------------------------------------------------------
# ATTR


@attrs.frozen
class AttrPdu:
    """ATTR (p_auth.c): a client attribute; the value is not padded.

    From pmcd the value is a NUL-terminated string, NUL included.
    """

    pdu_type: ClassVar[PduType] = PduType.ATTR
    attr: int
    value: bytes = b""
    from_: int = 0

    def encode(self) -> bytes:
        return _header(16 + len(self.value), PduType.ATTR, self.from_) + _I.pack(self.attr) + self.value

    @classmethod
    def decode(cls, buf: memoryview) -> AttrPdu:
        _check_len(buf, "ATTR", minimum=16)
        if len(buf) - 16 >= 4096:
            raise WireFormatError(f"ATTR: value of {len(buf) - 16} bytes >= 4096")
        return cls(_I.unpack_from(buf, 12)[0], bytes(buf[16:]), _from(buf))

    @property
    def text(self) -> str:
        """The value as text, without its NUL terminator."""
        v = self.value
        return _s(v[:-1] if v.endswith(b"\0") else v)


# --------------------------------------------------------------------------
# Unknown types and the registries


@attrs.frozen
class UnknownPdu:
    """A PDU of a type we do not decode (CONTROL_REQ, unknown codes)."""

    type: int
    body: bytes = b""
    from_: int = 0

    @property
    def pdu_type(self) -> int:
        return self.type

    def encode(self) -> bytes:
        return _header(12 + len(self.body), self.type, self.from_) + self.body


#: (a module constant: an enum member looked up on its class costs about 2 us
#: per reply when the caches are cold)
_ERROR: Final = PduType.ERROR


@attrs.define
class EncodedPdu:
    """A reply already encoded by a fast path (a RESULT built in bulk, a
    cached INSTANCE): its type and its bytes, header included.  Never an
    ERROR: those are built as :class:`ErrorPdu` so the session sees them.

    Read-only by convention, not frozen: one is made per fast-path reply,
    and a frozen record's ``__init__`` (a bound ``object.__setattr__`` per
    field) costs several times a plain one's when the caches are cold."""

    pdu_type: int
    #: a layout's own buffer for a fast-path RESULT (see FixedLayout.encode): read, never changed
    data: Union[bytes, bytearray, SharedReply]
    from_: int = 0

    def __attrs_post_init__(self) -> None:
        if self.pdu_type == _ERROR:
            raise LocalProtocolError("an ERROR reply is sent as ErrorPdu, not pre-encoded")

    def encode(self) -> Union[bytes, bytearray, SharedReply]:
        return self.data


Pdu = Union[
    EncodedPdu,
    ErrorPdu,
    CredsPdu,
    ProfilePdu,
    FetchPdu,
    ResultPdu,
    HighresResultPdu,
    DescReqPdu,
    DescPdu,
    DescsPdu,
    PmnsIdsPdu,
    InstanceReqPdu,
    InstancePdu,
    TextReqPdu,
    TextPdu,
    PmnsNamesPdu,
    PmnsChildPdu,
    AttrPdu,
    LabelReqPdu,
    LabelPdu,
    UnknownPdu,
]


class _Decodable(Protocol):
    """A PDU class: its type code and its decoder."""

    @property
    def pdu_type(self) -> int: ...

    def decode(self, buf: memoryview, /) -> Pdu: ...


_CLASSES: tuple[_Decodable, ...] = (
    ErrorPdu,
    CredsPdu,
    ProfilePdu,
    FetchPdu,
    HighresFetchPdu,
    ResultPdu,
    HighresResultPdu,
    DescReqPdu,
    DescPdu,
    DescIdsPdu,
    DescsPdu,
    PmnsIdsPdu,
    InstanceReqPdu,
    InstancePdu,
    TextReqPdu,
    TextPdu,
    PmnsNamesPdu,
    PmnsChildPdu,
    PmnsTraversePdu,
    AttrPdu,
    LabelReqPdu,
    LabelPdu,
)

#: PDU type code -> decoder taking the whole PDU.
DECODERS: Final[dict[int, Callable[[memoryview], Pdu]]] = {cls.pdu_type: cls.decode for cls in _CLASSES}


def decode_pdu(data: bytes | bytearray | memoryview | SharedReply) -> Pdu:
    """Decode one whole PDU (header included).

    Raises:
        WireFormatError: the bytes are not a valid PDU (PM_ERR_IPC).
    """
    buf = memoryview(data)
    if buf.ndim != 1 or buf.itemsize != 1:
        buf = buf.cast("B")
    if len(buf) < HEADER_SIZE:
        raise WireFormatError(f"PDU of {len(buf)} bytes is shorter than its header")
    length, type_, from_ = _HDR.unpack_from(buf, 0)
    if length != len(buf):
        raise WireFormatError(f"PDU header says {length} bytes, got {len(buf)}")
    if type_ < 0:
        raise WireFormatError(f"negative PDU type {type_}")
    decoder = DECODERS.get(type_)
    if decoder is None:
        return UnknownPdu(type_, bytes(buf[HEADER_SIZE:]), from_)
    try:
        return decoder(buf)
    except WireFormatError:
        raise
    except (struct.error, IndexError, ValueError, OverflowError) as err:
        raise WireFormatError(f"{PduType(type_).name}: {err}") from err

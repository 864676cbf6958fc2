"""PDU objects of the pmcd <-> PMDA protocol, with their encoders and decoders.

Sans-IO: this module turns bytes into frozen :mod:`attrs` objects and back,
and never touches a file, socket or logger.  Every layout follows
``docs/PROTOCOL.md`` §3 (libpcp ``p_*.c``); every object re-encodes to the
bytes it was decoded from, padding included (libpcp pads with ``~``).

Decoders take the *whole* PDU (header included), because value-block
pointers in RESULT and JSON offsets in LABEL count from the PDU start.  Any
failure to decode raises :class:`~pmda_py.errors.WireFormatError`
(PM_ERR_IPC); ``struct.error``, ``IndexError`` and ``UnicodeDecodeError``
never escape.  Strings are decoded as UTF-8 with ``surrogateescape`` so any
byte string round-trips.
"""

from __future__ import annotations

import enum
import math
import struct
from typing import Any, Callable, ClassVar, Final, Sequence, Type, TypeVar, Union

import attrs

from pmda_py.errors import LocalProtocolError, WireFormatError
from pmda_py.pmapi import PM_IN_NULL, PmDesc, PmType, PmUnits

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
    "encode_pdu",
    "pad4",
]


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
# RESULT: value blocks, event arrays, value sets


@attrs.frozen
class EventParam:
    """One parameter of an event record: a PMID, its type and raw value bytes."""

    pmid: int
    type: int
    payload: bytes

    def value(self) -> int | float | str | bytes:
        """The parameter value decoded by ``type`` (strings carry no NUL)."""
        return _atom_from_bytes(self.type, self.payload, nul=False)

    @classmethod
    def of(cls, pmid: int, type_: int, value: int | float | str | bytes) -> EventParam:
        """Build a parameter from a Python value."""
        return cls(pmid, type_, _atom_to_bytes(type_, value, nul=False))


@attrs.frozen
class EventRecord:
    """One event record (classic or high resolution)."""

    sec: int
    subsec: int  #: usec (EVENT) or nsec (HIGHRES_EVENT)
    flags: int
    params: tuple[EventParam, ...] = ()
    nparams: int | None = None  #: explicit er_nparams (MISSED records count events here)


@attrs.frozen
class EventArray:
    """An event array: the payload of a PM_TYPE_EVENT / HIGHRES_EVENT value."""

    highres: bool
    records: tuple[EventRecord, ...] = attrs.field()

    def encode(self, fill: bytes = PAD_BYTE) -> bytes:
        """The value-block payload (``ea_nrecords`` onwards)."""
        out = [_I.pack(len(self.records))]
        rec = _HREVREC if self.highres else _EVREC
        for r in self.records:
            nparams = r.nparams if r.nparams is not None else len(r.params)
            out.append(rec.pack(r.sec, r.subsec, r.flags, nparams))
            for p in r.params:
                out.append(_U.pack(p.pmid))
                out.append(_U.pack(((p.type & 0xFF) << 24) | ((4 + len(p.payload)) & 0xFFFFFF)))
                out.append(_padded(p.payload, fill))
        return b"".join(out)

    @classmethod
    def decode(cls, payload: bytes, highres: bool) -> EventArray:
        """Parse an event array payload; raises WireFormatError."""
        mv = memoryview(payload)
        r = _Reader(mv, "event array", 0)
        rec = _HREVREC if highres else _EVREC
        n = r.count(rec.size)
        records = []
        for _ in range(n):
            r.need(rec.size)
            sec, sub, flags, nparams = rec.unpack_from(mv, r.pos)
            r.pos += rec.size
            params = []
            missed = bool(flags & 0x80000000)
            if not missed:
                if nparams < 0 or nparams * 8 > r.end - r.pos:
                    raise r.fail(f"bad er_nparams {nparams}")
                for _ in range(nparams):
                    pm = r.u32()
                    word = r.u32()
                    plen = (word & 0xFFFFFF) - 4
                    if plen < 0:
                        raise r.fail("bad ep_len")
                    params.append(EventParam(pm, word >> 24, r.padded_string(plen)))
            records.append(EventRecord(sec, sub, flags, tuple(params), None if not missed else nparams))
        r.done()
        return cls(highres, tuple(records))


def _atom_to_bytes(type_: int, value: object, *, nul: bool) -> bytes:
    if type_ in (PmType.I32,):
        return _I.pack(int(value))  # type: ignore[call-overload]
    if type_ == PmType.U32:
        return _U.pack(int(value))  # type: ignore[call-overload]
    if type_ == PmType.I64:
        return _Q.pack(int(value))  # type: ignore[call-overload]
    if type_ == PmType.U64:
        return _UQ.pack(int(value))  # type: ignore[call-overload]
    if type_ == PmType.FLOAT:
        return _F.pack(float(value))  # type: ignore[arg-type]
    if type_ == PmType.DOUBLE:
        return _D.pack(float(value))  # type: ignore[arg-type]
    if type_ == PmType.STRING:
        raw = _b(value) if isinstance(value, str) else bytes(value)  # type: ignore[call-overload]
        return raw + b"\0" if nul else raw
    if isinstance(value, EventArray):
        return value.encode()
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value)
    raise TypeError(f"cannot encode {type(value).__name__} as PM_TYPE {type_}")


def _atom_from_bytes(type_: int, data: bytes, *, nul: bool) -> int | float | str | bytes:
    try:
        if type_ == PmType.I32 and len(data) == 4:
            return int(_I.unpack(data)[0])
        if type_ == PmType.U32 and len(data) == 4:
            return int(_U.unpack(data)[0])
        if type_ == PmType.I64 and len(data) == 8:
            return int(_Q.unpack(data)[0])
        if type_ == PmType.U64 and len(data) == 8:
            return int(_UQ.unpack(data)[0])
        if type_ == PmType.FLOAT and len(data) == 4:
            return float(_F.unpack(data)[0])
        if type_ == PmType.DOUBLE and len(data) == 8:
            return float(_D.unpack(data)[0])
    except struct.error as err:  # pragma: no cover - lengths checked above
        raise WireFormatError(f"bad value of type {type_}") from err
    if type_ == PmType.STRING:
        if nul and data.endswith(b"\0"):
            data = data[:-1]
        return _s(data)
    if type_ in (PmType.I32, PmType.U32, PmType.I64, PmType.U64, PmType.FLOAT, PmType.DOUBLE):
        raise WireFormatError(f"value of type {type_} has {len(data)} bytes")
    return data


@attrs.frozen
class ValueBlock:
    """A pmValueBlock: ``vtype`` and the payload bytes (``vlen - 4`` of them).

    The payload is kept raw so that any block, event arrays with their
    garbage padding included, re-encodes byte for byte.
    """

    vtype: int
    payload: bytes

    @classmethod
    def of(cls, type_: int, value: int | float | str | bytes | EventArray) -> ValueBlock:
        """The block libpcp_pmda's ``__pmStuffValue`` builds for ``value``."""
        if type_ in (PmType.EVENT, PmType.HIGHRES_EVENT) and isinstance(value, EventArray):
            return cls(type_, value.encode())
        return cls(type_, _atom_to_bytes(type_, value, nul=True))

    def value(self) -> int | float | str | bytes:
        """Decode the payload by ``vtype`` (STRING loses its NUL; others raw bytes)."""
        return _atom_from_bytes(self.vtype, self.payload, nul=True)

    def event_array(self) -> EventArray:
        """Decode an EVENT / HIGHRES_EVENT payload."""
        if self.vtype not in (PmType.EVENT, PmType.HIGHRES_EVENT):
            raise WireFormatError(f"vtype {self.vtype} is not an event array")
        return EventArray.decode(self.payload, self.vtype == PmType.HIGHRES_EVENT)

    def encoded_size(self) -> int:
        return pad4(4 + len(self.payload))


@attrs.frozen
class PmValue:
    """One value: an instance and either the INSITU 32-bit word or a block."""

    inst: int
    value: int | ValueBlock

    def as_i32(self) -> int:
        """The INSITU word as a signed 32-bit integer."""
        v = self.value
        if isinstance(v, ValueBlock):
            raise TypeError("not an INSITU value")
        v &= 0xFFFFFFFF
        return v - (1 << 32) if v & 0x80000000 else v


@attrs.frozen
class ValueSet:
    """A pmValueSet: a PMID and its values, or an error code for it.

    ``numval`` on the wire is ``error`` when it is negative, else the
    number of values.  ``valfmt`` is on the wire only when there are values.
    """

    pmid: int
    values: tuple[PmValue, ...] = ()
    valfmt: int = ValFmt.INSITU
    error: int = 0

    @property
    def numval(self) -> int:
        return self.error if self.error < 0 else len(self.values)

    @classmethod
    def of(cls, pmid: int, type_: int, values: Sequence[tuple[int, object]]) -> ValueSet:
        """Encode typed Python values the way libpcp_pmda does (INSITU for
        32-bit integers, DPTR blocks otherwise, SPTR for event arrays)."""
        if type_ in (PmType.I32, PmType.U32):
            return cls(pmid, tuple(PmValue(i, int(v) & 0xFFFFFFFF) for i, v in values), ValFmt.INSITU)  # type: ignore[call-overload]
        fmt = ValFmt.SPTR if type_ in (PmType.EVENT, PmType.HIGHRES_EVENT, PmType.AGGREGATE_STATIC) else ValFmt.DPTR
        return cls(
            pmid,
            tuple(PmValue(i, ValueBlock.of(type_, v)) for i, v in values),  # type: ignore[arg-type]
            fmt,
        )

    @classmethod
    def failed(cls, pmid: int, code: int) -> ValueSet:
        """A value set carrying an error code (numval < 0)."""
        return cls(pmid, (), ValFmt.INSITU, code)


def _encode_vsets(vsets: Sequence[ValueSet], base: int) -> tuple[list[bytes], list[bytes]]:
    """Encode value sets starting at PDU offset ``base``; return (sets, blocks)."""
    sets_size = 0
    for vs in vsets:
        sets_size += 12 + 8 * len(vs.values) if vs.values else 8
    cursor = base + sets_size
    sets: list[bytes] = []
    blocks: list[bytes] = []
    for vs in vsets:
        if not vs.values:
            sets.append(_Ui.pack(vs.pmid, vs.error if vs.error < 0 else 0))
            continue
        sets.append(struct.pack("!Iii", vs.pmid, len(vs.values), vs.valfmt))
        if vs.valfmt == ValFmt.INSITU:
            flat: list[int] = []
            for v in vs.values:
                if isinstance(v.value, ValueBlock):
                    raise WireFormatError("INSITU value set holds a value block")
                flat.append(v.inst)
                flat.append(v.value & 0xFFFFFFFF)
            sets.append(struct.pack("!" + "iI" * len(vs.values), *flat))
        else:
            for v in vs.values:
                blk = v.value
                if not isinstance(blk, ValueBlock):
                    raise WireFormatError("pointer value set holds an INSITU value")
                vlen = 4 + len(blk.payload)
                if vlen > 0xFFFFFF:
                    raise WireFormatError(f"value block of {vlen} bytes is too big")
                sets.append(_iU.pack(v.inst, cursor // 4))
                data = _U.pack(((blk.vtype & 0xFF) << 24) | vlen) + blk.payload
                data = _padded(data)
                blocks.append(data)
                cursor += len(data)
    return sets, blocks


_iU = struct.Struct("!iI")
_Ui = struct.Struct("!Ii")


def _decode_vsets(buf: memoryview, r: _Reader, numpmid: int) -> tuple[ValueSet, ...]:
    if numpmid < 0 or numpmid * 8 > r.end - r.pos:
        raise r.fail(f"bad numpmid {numpmid}")
    raw_sets = []
    for _ in range(numpmid):
        pm = r.u32()
        numval = r.i32()
        if numval <= 0:
            raw_sets.append((pm, numval, 0, ()))
            continue
        valfmt = r.i32()
        if numval * 8 > r.end - r.pos:
            raise r.fail(f"bad numval {numval}")
        flat = struct.unpack_from("!" + "iI" * numval, buf, r.pos)
        r.pos += 8 * numval
        raw_sets.append((pm, numval, valfmt, flat))
    blocks_start = r.pos
    used = 0
    out = []
    for pm, numval, valfmt, flat in raw_sets:
        if numval <= 0:
            out.append(ValueSet(pm, (), ValFmt.INSITU, numval))
            continue
        values = []
        if valfmt == ValFmt.INSITU:
            for k in range(0, 2 * numval, 2):
                values.append(PmValue(flat[k], flat[k + 1]))
        elif valfmt in (ValFmt.DPTR, ValFmt.SPTR):
            for k in range(0, 2 * numval, 2):
                off = flat[k + 1] * 4
                if off < blocks_start or off + 4 > r.end:
                    raise r.fail(f"value block offset {off} out of range")
                (word,) = _U.unpack_from(buf, off)
                vlen = word & 0xFFFFFF
                if vlen < 4 or off + vlen > r.end:
                    raise r.fail(f"value block at {off} has bad vlen {vlen}")
                used += pad4(vlen)
                values.append(PmValue(flat[k], ValueBlock(word >> 24, bytes(buf[off + 4 : off + vlen]))))
        else:
            raise r.fail(f"bad valfmt {valfmt}")
        out.append(ValueSet(pm, tuple(values), valfmt, 0))
    if blocks_start + used != r.end:
        raise r.fail(f"value blocks use {used} bytes, PDU has {r.end - blocks_start}")
    r.pos = r.end
    return tuple(out)


@attrs.frozen
class ResultPdu:
    """RESULT (p_result.c): a fetch reply from a PMDA, or a store request to it.

    From a PMDA ``sec`` carries the state-change flags (LABEL_CHANGE 0x8,
    NAMES_CHANGE 0x10) and ``usec`` is 0.
    """

    pdu_type: ClassVar[PduType] = PduType.RESULT
    vsets: tuple[ValueSet, ...] = attrs.field()
    sec: int = 0
    usec: int = 0
    from_: int = 0

    def encode(self) -> bytes:
        sets, blocks = _encode_vsets(self.vsets, 24)
        body = b"".join(sets) + b"".join(blocks)
        return (
            _header(24 + len(body), PduType.RESULT, self.from_) + _III.pack(self.sec, self.usec, len(self.vsets)) + body
        )

    @classmethod
    def decode(cls, buf: memoryview) -> ResultPdu:
        r = _Reader(buf, "RESULT")
        sec = r.i32()
        usec = r.i32()
        numpmid = r.i32()
        return cls(_decode_vsets(buf, r, numpmid), sec, usec, _from(buf))


@attrs.frozen
class HighresResultPdu:
    """HIGHRES_RESULT (client side only): 64-bit seconds and nanoseconds."""

    pdu_type: ClassVar[PduType] = PduType.HIGHRES_RESULT
    vsets: tuple[ValueSet, ...] = attrs.field()
    sec: int = 0
    nsec: int = 0
    from_: int = 0

    def encode(self) -> bytes:
        sets, blocks = _encode_vsets(self.vsets, 32)
        body = b"".join(sets) + b"".join(blocks)
        return (
            _header(32 + len(body), PduType.HIGHRES_RESULT, self.from_)
            + struct.pack("!iqq", len(self.vsets), self.sec, self.nsec)
            + body
        )

    @classmethod
    def decode(cls, buf: memoryview) -> HighresResultPdu:
        r = _Reader(buf, "HIGHRES_RESULT")
        numpmid = r.i32()
        r.need(16)
        sec, nsec = struct.unpack_from("!qq", buf, r.pos)
        r.pos += 16
        return cls(_decode_vsets(buf, r, numpmid), sec, nsec, _from(buf))


# --------------------------------------------------------------------------
# DESC_REQ, DESC, DESC_IDS, DESCS


@attrs.frozen
class DescReqPdu:
    """DESC_REQ (p_desc.c): the descriptor of one PMID."""

    pdu_type: ClassVar[PduType] = PduType.DESC_REQ
    pmid: int
    from_: int = 0

    def encode(self) -> bytes:
        return _header(16, PduType.DESC_REQ, self.from_) + _U.pack(self.pmid)

    @classmethod
    def decode(cls, buf: memoryview) -> DescReqPdu:
        _check_len(buf, "DESC_REQ", exact=16)
        return cls(_U.unpack_from(buf, 12)[0], _from(buf))


def _desc_pack(d: PmDesc) -> bytes:
    return _DESC.pack(d.pmid, d.type, d.indom, d.sem, d.units.to_int())


def _desc_unpack(buf: memoryview, off: int) -> PmDesc:
    p, t, ind, sem, units = _DESC.unpack_from(buf, off)
    return PmDesc(pmid=p, type=t, indom=ind, sem=sem, units=PmUnits.from_int(units))


@attrs.frozen
class DescPdu:
    """DESC (p_desc.c): one pmDesc."""

    pdu_type: ClassVar[PduType] = PduType.DESC
    desc: PmDesc
    from_: int = 0

    def encode(self) -> bytes:
        return _header(32, PduType.DESC, self.from_) + _desc_pack(self.desc)

    @classmethod
    def decode(cls, buf: memoryview) -> DescPdu:
        _check_len(buf, "DESC", exact=32)
        return cls(_desc_unpack(buf, 12), _from(buf))


@attrs.frozen
class DescsPdu:
    """DESCS (client side only): several pmDescs."""

    pdu_type: ClassVar[PduType] = PduType.DESCS
    descs: tuple[PmDesc, ...] = attrs.field()
    from_: int = 0

    def encode(self) -> bytes:
        body = b"".join(_desc_pack(d) for d in self.descs)
        return _header(16 + len(body), PduType.DESCS, self.from_) + _I.pack(len(self.descs)) + body

    @classmethod
    def decode(cls, buf: memoryview) -> DescsPdu:
        r = _Reader(buf, "DESCS")
        n = r.count(20)
        descs = tuple(_desc_unpack(buf, 16 + 20 * k) for k in range(n))
        r.pos += 20 * n
        r.done()
        return cls(descs, _from(buf))


@attrs.frozen
class PmnsIdsPdu:
    """PMNS_IDS (p_pmns.c, the IDLIST layout): a status and a list of PMIDs."""

    pdu_type: ClassVar[PduType] = PduType.PMNS_IDS
    pmids: tuple[int, ...] = attrs.field()
    sts: int = 0
    from_: int = 0

    def encode(self) -> bytes:
        n = len(self.pmids)
        return _header(20 + 4 * n, self.pdu_type, self.from_) + struct.pack(f"!ii{n}I", self.sts, n, *self.pmids)

    @classmethod
    def decode(cls, buf: memoryview) -> PmnsIdsPdu:
        r = _Reader(buf, cls.pdu_type.name)
        sts = r.i32()
        n = r.count(4)
        if r.end != 20 + 4 * n:
            raise r.fail(f"length does not match numids {n}")
        return cls(pmids=struct.unpack_from(f"!{n}I", buf, 20), sts=sts, from_=_from(buf))


@attrs.frozen
class DescIdsPdu(PmnsIdsPdu):
    """DESC_IDS (client side only): the IDLIST layout with ``sts = -1``."""

    pdu_type: ClassVar[PduType] = PduType.DESC_IDS
    sts: int = -1


# --------------------------------------------------------------------------
# INSTANCE_REQ, INSTANCE


@attrs.frozen
class InstanceReqPdu:
    """INSTANCE_REQ (p_instance.c): all instances, one by number, or one by name.

    ``name`` is None when no name is given (``namelen`` 0).
    """

    pdu_type: ClassVar[PduType] = PduType.INSTANCE_REQ
    indom: int
    inst: int = PM_IN_NULL
    name: str | None = None
    from_: int = 0
    unused_sec: int = 0
    unused_usec: int = 0

    def encode(self) -> bytes:
        raw = _b(self.name) if self.name else b""
        body = struct.pack("!Iiiii", self.indom, self.unused_sec, self.unused_usec, self.inst, len(raw)) + _padded(raw)
        return _header(12 + len(body), PduType.INSTANCE_REQ, self.from_) + body

    @classmethod
    def decode(cls, buf: memoryview) -> InstanceReqPdu:
        r = _Reader(buf, "INSTANCE_REQ")
        ind = r.u32()
        sec = r.i32()
        usec = r.i32()
        inst = r.i32()
        namelen = r.i32()
        if namelen < 0:
            raise r.fail(f"bad namelen {namelen}")
        name = _s(r.padded_string(namelen)) if namelen > 0 else None
        r.done()
        return cls(ind, inst, name, _from(buf), sec, usec)


@attrs.frozen
class InstanceEntry:
    """One instance of an INSTANCE reply; ``name`` "" means no name sent."""

    inst: int
    name: str = ""


@attrs.frozen
class InstancePdu:
    """INSTANCE (p_instance.c): instances of an indom."""

    pdu_type: ClassVar[PduType] = PduType.INSTANCE
    indom: int
    instances: tuple[InstanceEntry, ...] = attrs.field()
    from_: int = 0

    def encode(self) -> bytes:
        parts = [struct.pack("!Ii", self.indom, len(self.instances))]
        for e in self.instances:
            raw = _b(e.name)
            parts.append(_II.pack(e.inst, len(raw)))
            if raw:
                parts.append(_padded(raw))
        body = b"".join(parts)
        return _header(12 + len(body), PduType.INSTANCE, self.from_) + body

    @classmethod
    def decode(cls, buf: memoryview) -> InstancePdu:
        r = _Reader(buf, "INSTANCE")
        ind = r.u32()
        n = r.count(8)
        entries = []
        for _ in range(n):
            inst = r.i32()
            namelen = r.i32()
            if namelen < 0:
                raise r.fail(f"bad namelen {namelen}")
            entries.append(InstanceEntry(inst, _s(r.padded_string(namelen)) if namelen else ""))
        r.done()
        return cls(ind, tuple(entries), _from(buf))


# --------------------------------------------------------------------------
# TEXT_REQ, TEXT


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


@attrs.frozen
class TextReqPdu(_IdentTypeReq):
    """TEXT_REQ (p_text.c): one-line or help text of a PMID or an indom."""

    pdu_type: ClassVar[PduType] = PduType.TEXT_REQ


@attrs.frozen
class TextPdu:
    """TEXT (p_text.c): the text, no NUL, ``~``-padded.

    ``ident`` is the raw 4-byte word read big-endian; libpcp_pmda on a
    little-endian host sends it byte-reversed (see :meth:`swapped_ident`).
    """

    pdu_type: ClassVar[PduType] = PduType.TEXT
    ident: int
    text: str
    from_: int = 0

    def encode(self) -> bytes:
        raw = _b(self.text)
        body = struct.pack("!Ii", self.ident, len(raw)) + _padded(raw)
        return _header(12 + len(body), PduType.TEXT, self.from_) + body

    @classmethod
    def decode(cls, buf: memoryview) -> TextPdu:
        r = _Reader(buf, "TEXT")
        ident = r.u32()
        n = r.i32()
        if n < 0:
            raise r.fail(f"bad buflen {n}")
        text = _s(r.padded_string(n))
        r.done()
        return cls(ident, text, _from(buf))

    @staticmethod
    def swapped_ident(ident: int) -> int:
        """``ident`` byte-reversed, as a little-endian libpcp_pmda sends it."""
        return int.from_bytes(ident.to_bytes(4, "big"), "little")


# --------------------------------------------------------------------------
# PMNS_NAMES, PMNS_CHILD, PMNS_TRAVERSE


def _opt_statuses(value: Sequence[int] | None) -> tuple[int, ...] | None:
    # No names means no status words on the wire, whatever was asked.
    return tuple(value) if value else None


@attrs.frozen
class PmnsNamesPdu:
    """PMNS_NAMES (p_pmns.c, the NAMELIST layout): names, optionally with status.

    ``statuses`` is None when ``numstatus`` is 0; else one status per name
    (PMNS_LEAF_STATUS 0, PMNS_NONLEAF_STATUS 1).
    """

    pdu_type: ClassVar[PduType] = PduType.PMNS_NAMES
    names: tuple[str, ...] = attrs.field()
    statuses: tuple[int, ...] | None = attrs.field(default=None, converter=_opt_statuses)
    from_: int = 0

    def encode(self) -> bytes:
        raws = [_b(n) for n in self.names]
        nstrbytes = sum(len(x) + 1 for x in raws)
        st = self.statuses
        if st is not None and len(st) != len(raws):
            raise WireFormatError("PMNS_NAMES: statuses and names differ in number")
        parts = [_III.pack(nstrbytes, len(raws) if st is not None else 0, len(raws))]
        for k, raw in enumerate(raws):
            if st is not None:
                parts.append(_I.pack(st[k]))
            parts.append(_I.pack(len(raw)))
            parts.append(_padded(raw))
        body = b"".join(parts)
        return _header(12 + len(body), PduType.PMNS_NAMES, self.from_) + body

    @classmethod
    def decode(cls, buf: memoryview) -> PmnsNamesPdu:
        r = _Reader(buf, "PMNS_NAMES")
        nstrbytes = r.i32()
        numstatus = r.i32()
        numnames = r.count(4)
        if numstatus not in (0, numnames):
            raise r.fail(f"numstatus {numstatus} != numnames {numnames}")
        names: list[str] = []
        statuses: list[int] = []
        total = 0
        for _ in range(numnames):
            if numstatus:
                statuses.append(r.i32())
            n = r.i32()
            if n < 0:
                raise r.fail(f"bad namelen {n}")
            raw = r.padded_string(n)
            total += n + 1
            names.append(_s(raw))
        r.done()
        if nstrbytes != total:
            raise r.fail(f"nstrbytes {nstrbytes} != {total}")
        return cls(tuple(names), tuple(statuses) if numstatus else None, _from(buf))


@attrs.frozen
class PmnsChildPdu:
    """PMNS_CHILD (p_pmns.c): children of a node; subtype 1 asks for leaf status."""

    pdu_type: ClassVar[PduType] = PduType.PMNS_CHILD
    name: str
    subtype: int = 0
    from_: int = 0

    def encode(self) -> bytes:
        raw = _b(self.name)
        body = _II.pack(self.subtype, len(raw)) + _padded(raw)
        return _header(12 + len(body), self.pdu_type, self.from_) + body

    @classmethod
    def decode(cls, buf: memoryview) -> PmnsChildPdu:
        r = _Reader(buf, cls.pdu_type.name)
        subtype = r.i32()
        n = r.i32()
        if n < 0:
            raise r.fail(f"bad namelen {n}")
        name = _s(r.padded_string(n))
        r.done()
        return cls(name, subtype, _from(buf))


@attrs.frozen
class PmnsTraversePdu(PmnsChildPdu):
    """PMNS_TRAVERSE (p_pmns.c): every leaf at or below a node."""

    pdu_type: ClassVar[PduType] = PduType.PMNS_TRAVERSE


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
# LABEL_REQ, LABEL


@attrs.frozen
class LabelReqPdu(_IdentTypeReq):
    """LABEL_REQ (p_label.c): labels of one level for an ident."""

    pdu_type: ClassVar[PduType] = PduType.LABEL_REQ


@attrs.frozen
class Label:
    """A pmLabel index entry: offsets into its set's JSON, and flags."""

    name: int
    namelen: int
    flags: int
    value: int
    valuelen: int


_JSON_NAME_OK = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_")


@attrs.frozen
class LabelSet:
    """A pmLabelSet: instance, JSON text and its label index.

    ``nlabels`` is ``len(labels)`` unless the set carries an error code.
    """

    inst: int
    json: bytes
    labels: tuple[Label, ...] = ()
    error: int = 0

    @property
    def nlabels(self) -> int:
        return self.error if self.error < 0 else len(self.labels)

    @classmethod
    def from_dict(cls, labels: dict[str, object], flags: int, inst: int = PM_IN_NULL) -> LabelSet:
        """Build a set the way libpcp's label parser does: compact JSON,
        names sorted by byte order, index offsets matching the JSON.

        Values are JSON-encoded (strings quoted and escaped); a value that
        is already a :class:`RawJson` is inserted as is.
        """
        import json as _json

        items = sorted(labels.items(), key=lambda kv: kv[0].encode())
        out = bytearray(b"{")
        index = []
        for k, (name, value) in enumerate(items):
            raw_name = name.encode()
            if not raw_name or len(raw_name) >= 255 or not set(raw_name) <= _JSON_NAME_OK:
                raise ValueError(f"bad label name {name!r}")
            if k:
                out += b","
            out += b'"'
            name_off = len(out)
            out += raw_name + b'":'
            value_off = len(out)
            if isinstance(value, RawJson):
                raw_value = value.text.encode()
            elif isinstance(value, float) and not math.isfinite(value):
                raise ValueError(f"label {name!r}: {value} is not valid JSON")
            else:
                raw_value = _json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()
            out += raw_value
            index.append(Label(name_off, len(raw_name), flags, value_off, len(raw_value)))
        out += b"}"
        if len(items) >= 255:
            raise ValueError(f"{len(items)} labels: at most 254 per set")
        if len(out) >= 65535:
            raise ValueError("label set JSON too long")
        if not items:
            return cls(inst, b"", ())
        return cls(inst, bytes(out), tuple(index))

    @classmethod
    def from_items(cls, items: Sequence[tuple[str, str, int]], inst: int = PM_IN_NULL) -> LabelSet:
        """Build a set from ``(name, JSON value text, flags)`` items, sorted by
        name (compound names such as ``a.b`` allowed, as libpcp flattens maps)."""
        out = bytearray(b"{")
        index = []
        for k, (name, value, flags) in enumerate(sorted(items, key=lambda it: it[0].encode())):
            raw_name, raw_value = name.encode(), value.encode()
            if k:
                out += b","
            out += b'"'
            name_off = len(out)
            out += raw_name + b'":'
            index.append(Label(name_off, len(raw_name), flags & 0xFF, len(out), len(raw_value)))
            out += raw_value
        out += b"}"
        if not items:
            return cls(inst, b"", ())
        return cls(inst, bytes(out), tuple(index))

    def as_dict(self) -> dict[str, str]:
        """Names and raw JSON value texts, from the index (as clients read it)."""
        out: dict[str, str] = {}
        for lb in self.labels:
            out[_s(self.json[lb.name : lb.name + lb.namelen])] = _s(self.json[lb.value : lb.value + lb.valuelen])
        return out


@attrs.frozen
class RawJson:
    """A label value given as ready JSON text (e.g. an object or array)."""

    text: str


@attrs.frozen
class LabelPdu:
    """LABEL (p_label.c): label sets; JSON after all sets, unpadded."""

    pdu_type: ClassVar[PduType] = PduType.LABEL
    ident: int
    type: int
    sets: tuple[LabelSet, ...] = ()
    from_: int = 0
    padding: int = 0

    def encode(self) -> bytes:
        head = 28 + sum(16 + 8 * len(s.labels) for s in self.sets)
        json_off = head
        parts = [struct.pack("!Iiii", self.ident, self.type, self.padding, len(self.sets))]
        for s in self.sets:
            parts.append(_IIII.pack(s.inst, s.nlabels, json_off, len(s.json)))
            for lb in s.labels:
                parts.append(_LABEL.pack(lb.name, lb.namelen, lb.flags, lb.value, lb.valuelen))
            json_off += len(s.json)
        parts.extend(s.json for s in self.sets)
        body = b"".join(parts)
        return _header(12 + len(body), PduType.LABEL, self.from_) + body

    @classmethod
    def decode(cls, buf: memoryview) -> LabelPdu:
        r = _Reader(buf, "LABEL")
        ident = r.u32()
        type_ = r.i32()
        padding = r.i32()
        nsets = r.count(16)
        heads = []
        for _ in range(nsets):
            inst = r.i32()
            nlabels = r.i32()
            json_off = r.i32()
            jsonlen = r.i32()
            labels: list[Label] = []
            if nlabels > 0:
                if nlabels * 8 > r.end - r.pos:
                    raise r.fail(f"bad nlabels {nlabels}")
                for _ in range(nlabels):
                    labels.append(Label(*_LABEL.unpack_from(buf, r.pos)))
                    r.pos += 8
            heads.append((inst, nlabels, json_off, jsonlen, labels))
        json_end = r.pos
        sets = []
        for inst, nlabels, json_off, jsonlen, labels in heads:
            if jsonlen < 0 or jsonlen >= 65536:
                raise r.fail(f"bad jsonlen {jsonlen}")
            if jsonlen and (json_off < json_end or json_off + jsonlen > r.end):
                raise r.fail(f"json {json_off}+{jsonlen} outside the JSON area")
            data = bytes(buf[json_off : json_off + jsonlen]) if jsonlen else b""
            for lb in labels:
                if lb.name + lb.namelen > jsonlen or lb.value + lb.valuelen > jsonlen:
                    raise r.fail("label index outside its JSON")
            sets.append(LabelSet(inst, data, tuple(labels), nlabels if nlabels < 0 else 0))
        total = sum(h[3] for h in heads)
        if json_end + total != r.end:
            raise r.fail(f"JSON area is {r.end - json_end} bytes, sets claim {total}")
        return cls(ident, type_, tuple(sets), _from(buf), padding)


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


@attrs.frozen
class EncodedPdu:
    """A reply already encoded by a fast path (a RESULT built in bulk, a
    cached INSTANCE): its type and its bytes, header included.  Never an
    ERROR: those are built as :class:`ErrorPdu` so the session sees them."""

    pdu_type: int
    data: bytes
    from_: int = 0

    def __attrs_post_init__(self) -> None:
        if self.pdu_type == PduType.ERROR:
            raise LocalProtocolError("an ERROR reply is sent as ErrorPdu, not pre-encoded")

    def encode(self) -> bytes:
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

_CLASSES: tuple[Any, ...] = (
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


def decode_pdu(data: bytes | bytearray | memoryview) -> Pdu:
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


def encode_pdu(pdu: Pdu) -> bytes:
    """Encode a PDU object to bytes (same as ``pdu.encode()``)."""
    return pdu.encode()


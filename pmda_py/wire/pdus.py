"""PDU objects of the pmcd <-> PMDA protocol, with their encoders and decoders.

Sans-IO: this module turns bytes into frozen :mod:`attrs` objects and back,
and never touches a file, socket or logger.  Every layout follows
libpcp's ``p_*.c`` (see ``docs/internals.md``); every object re-encodes to the
bytes it was decoded from, padding included (libpcp pads with ``~``).

Decoders take the *whole* PDU (header included), because value-block
pointers in RESULT and JSON offsets in LABEL count from the PDU start.  Any
failure to decode raises :class:`~pmda_py.errors.WireFormatError`
(PM_ERR_IPC); ``struct.error``, ``IndexError`` and ``UnicodeDecodeError``
never escape.  Strings are decoded as UTF-8 with ``surrogateescape`` so any
byte string round-trips.
"""

from __future__ import annotations

import struct
from typing import Callable, ClassVar, Final, Protocol, Sequence, Union

import attrs

from pmda_py.errors import LocalProtocolError, WireFormatError
from pmda_py.pmapi import PM_IN_NULL, PmDesc, PmUnits
from pmda_py.wire.codec import (
    _DESC,
    _HDR,
    _I,
    _II,
    _III,
    _IIII,
    _U,
    CVERSION,
    HEADER_SIZE,
    PAD_BYTE,
    PDU_VERSION,
    PduFlags,
    PduType,
    ValFmt,
    _b,
    _check_len,
    _from,
    _header,
    _IdentTypeReq,
    _padded,
    _Reader,
    _s,
    pad4,
)
from pmda_py.wire.labels import Label, LabelPdu, LabelReqPdu, LabelSet
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

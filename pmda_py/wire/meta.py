"""The metadata PDUs: descriptors (DESC_REQ, DESC, DESC_IDS, DESCS), instance
domains (INSTANCE_REQ, INSTANCE), help text (TEXT_REQ, TEXT) and the namespace
(PMNS_NAMES, PMNS_IDS, PMNS_CHILD, PMNS_TRAVERSE).  Sans-IO; each object
re-encodes to the bytes it was decoded from."""

from __future__ import annotations

import struct
from typing import ClassVar, Sequence

import attrs

from pmda_py.errors import WireFormatError
from pmda_py.pmapi import PM_IN_NULL, PmDesc, PmUnits
from pmda_py.wire.codec import (
    _DESC,
    _I,
    _II,
    _III,
    _U,
    PduType,
    _b,
    _check_len,
    _from,
    _header,
    _IdentTypeReq,
    _padded,
    _Reader,
    _s,
)

__all__ = [
    "DescIdsPdu",
    "DescPdu",
    "DescReqPdu",
    "DescsPdu",
    "InstanceEntry",
    "InstancePdu",
    "InstanceReqPdu",
    "PmnsChildPdu",
    "PmnsIdsPdu",
    "PmnsNamesPdu",
    "PmnsTraversePdu",
    "TextPdu",
    "TextReqPdu",
]

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

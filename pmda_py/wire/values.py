"""RESULT's values: value blocks, event arrays, value sets, and the RESULT
PDUs themselves (pmcd's FETCH reply and a store request).  Sans-IO."""

from __future__ import annotations

import struct
from typing import ClassVar, Sequence, Union

import attrs

from pmda_py.errors import WireFormatError
from pmda_py.pmapi import PmType
from pmda_py.wire.codec import (
    _D,
    _EVREC,
    _F,
    _HREVREC,
    _I,
    _III,
    _Q,
    _U,
    _UQ,
    PAD_BYTE,
    PduType,
    ValFmt,
    _b,
    _from,
    _header,
    _padded,
    _Reader,
    _s,
    pad4,
)

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


#: a Python value of one PCP value: a number, a string, raw bytes or an event array
Atom = Union[int, float, str, bytes, EventArray]


#: the struct of each numeric type's value block
_PACKERS: dict[int, struct.Struct] = {
    PmType.I32: _I,
    PmType.U32: _U,
    PmType.I64: _Q,
    PmType.U64: _UQ,
    PmType.FLOAT: _F,
    PmType.DOUBLE: _D,
}
_FLOATS = (PmType.FLOAT, PmType.DOUBLE)


def _atom_to_bytes(type_: int, value: Atom, *, nul: bool) -> bytes:
    if isinstance(value, EventArray):
        if type_ in _PACKERS or type_ == PmType.STRING:
            raise TypeError(f"cannot encode an event array as PM_TYPE {type_}")
        return value.encode()
    packer = _PACKERS.get(type_)
    if packer is not None:
        return packer.pack(float(value) if type_ in _FLOATS else int(value))
    if type_ == PmType.STRING:
        if isinstance(value, float):
            raise TypeError("cannot encode a float as a string")
        raw = _b(value) if isinstance(value, str) else bytes(value)
        return raw + b"\0" if nul else raw
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
    def of(cls, type_: int, value: Atom) -> ValueBlock:
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
    def of(cls, pmid: int, type_: int, values: Sequence[tuple[int, Atom]]) -> ValueSet:
        """Encode typed Python values the way libpcp_pmda does (INSITU for
        32-bit integers, DPTR blocks otherwise, SPTR for event arrays)."""
        if type_ in (PmType.I32, PmType.U32):
            words = [v for _, v in values if not isinstance(v, EventArray)]
            if len(words) != len(values):
                raise TypeError("an event array is not a number")
            return cls(pmid, tuple(PmValue(i, int(w) & 0xFFFFFFFF) for (i, _), w in zip(values, words)), ValFmt.INSITU)
        fmt = ValFmt.SPTR if type_ in (PmType.EVENT, PmType.HIGHRES_EVENT, PmType.AGGREGATE_STATIC) else ValFmt.DPTR
        return cls(
            pmid,
            tuple(PmValue(i, ValueBlock.of(type_, v)) for i, v in values),
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

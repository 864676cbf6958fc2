"""LABEL_REQ and LABEL: label sets laid out as libpcp does (JSON text with
name/value offsets into it).  Sans-IO."""

from __future__ import annotations

import math
import struct
from typing import ClassVar, Sequence

import attrs

from pmda_py.pmapi import PM_IN_NULL
from pmda_py.wire.codec import _IIII, _LABEL, PduType, _from, _header, _IdentTypeReq, _Reader, _s

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

"""PCP 7's decode checks for the replies a PMDA sends, transcribed from
``src/libpcp/src/p_*.c`` (performancecopilot/pcp, 7.2 era; function names
below) and pmcd's ``ExtractState`` (``src/pmcd/src/dofetch.c``).

:func:`problems` returns why libpcp would refuse a PDU (PM_ERR_IPC), or ``[]``.
Sizes are those of the C structs on a 64-bit host.  Only the checks are
transcribed; nothing is decoded beyond what they need.
"""

from __future__ import annotations

import struct
from collections.abc import Callable

__all__ = ["CHECKED", "problems"]


def _pad(n: int) -> int:  # PM_PDU_SIZE_BYTES
    return (n + 3) & ~3


def _i32(b: bytes, off: int) -> int:
    return int(struct.unpack_from("!i", b, off)[0])


def _text(b: bytes) -> list[str]:  # __pmDecodeText
    length = len(b)
    if length < 20:
        return [f"TEXT: short PDU {length} < 20"]
    buflen = _i32(b, 16)
    if buflen < 0 or buflen > length:
        return [f"TEXT: buflen {buflen} < 0 or > len {length}"]
    if length < 20 + _pad(buflen):
        return [f"TEXT: PDU too short {length} < {20 + _pad(buflen)} (buffer not padded to 4)"]
    return []


def _instance(b: bytes) -> list[str]:  # __pmDecodeInstance
    length = len(b)
    if length < 20:
        return [f"INSTANCE: short PDU {length}"]
    numinst = _i32(b, 16)
    if numinst < 0:
        return [f"INSTANCE: numinst {numinst} < 0"]
    if numinst > (length - 20) // 8:
        return [f"INSTANCE: numinst {numinst} > max {(length - 20) // 8}"]
    used = 20
    ip = 20
    for i in range(numinst):
        if ip >= length:
            return [f"INSTANCE: inst[{i}] past end"]
        if length - ip < 8:
            return [f"INSTANCE: inst[{i}] header past end"]
        used += 8
        namelen = _i32(b, ip + 4)
        if namelen < 0:
            return [f"INSTANCE: inst[{i}] namelen {namelen} < 0"]
        if 8 + namelen > length - ip:
            return [f"INSTANCE: inst[{i}] name past end"]
        used += _pad(namelen)
        ip += 8 + _pad(namelen)
    if length - used > 0:
        return [f"INSTANCE: PDU too long, remainder {length - used}"]
    return []


def _label(b: bytes) -> list[str]:  # __pmDecodeLabel
    length = len(b)
    if length < 28:
        return [f"LABEL: short PDU {length}"]
    nsets = _i32(b, 24)
    if nsets < 0:
        return [f"LABEL: nsets {nsets} < 0"]
    if nsets > (length - 16) // 16:
        return [f"LABEL: nsets {nsets} too many for len {length}"]
    if nsets == 0:
        return []
    labeloff = 28
    jsonoff = jsonlen = 0
    for i in range(nsets):
        if length - labeloff < 16:
            return [f"LABEL: set[{i}] past end"]
        _inst, nlabels, jsonoff, jsonlen = struct.unpack_from("!iiii", b, labeloff)
        labellen = 16 + (8 * nlabels if nlabels > 0 else 0)
        if nlabels >= 255:
            return [f"LABEL: set[{i}] nlabels {nlabels} >= PM_MAXLABELS"]
        if jsonlen >= 65535:
            return [f"LABEL: set[{i}] jsonlen {jsonlen} >= PM_MAXLABELJSONLEN"]
        if jsonoff < 0 or jsonlen < 0 or jsonoff + jsonlen > length:
            return [f"LABEL: set[{i}] JSON {jsonoff}+{jsonlen} outside the PDU ({length})"]
        if length < labeloff + labellen:
            return [f"LABEL: set[{i}] labels past end"]
        if nlabels > 0:
            for j in range(nlabels):
                name, namelen, _flags, value, valuelen = struct.unpack_from("!HBBHH", b, labeloff + 16 + 8 * j)
                if jsonlen < name + namelen:
                    return [f"LABEL: set[{i}] label[{j}] name {name}+{namelen} outside its JSON ({jsonlen})"]
                if jsonlen < value + valuelen:
                    return [f"LABEL: set[{i}] label[{j}] value {value}+{valuelen} outside its JSON ({jsonlen})"]
            labeloff += 8 * nlabels
        labeloff += 16
    if length > _pad(jsonoff + jsonlen):
        return [f"LABEL: {length - _pad(jsonoff + jsonlen)} bytes after the last set's JSON"]
    return []


def _desc(b: bytes) -> list[str]:  # __pmDecodeDesc
    return [] if len(b) == 32 else [f"DESC: length {len(b)} != 32"]


def _creds(b: bytes) -> list[str]:  # __pmDecodeCreds
    length = len(b)
    if length < 20:
        return [f"CREDS: short PDU {length}"]
    n = _i32(b, 12)
    if n <= 0 or n > 1024:
        return [f"CREDS: numcreds {n} not in 1..1024"]
    if length != 20 + 4 * (n - 1):
        return [f"CREDS: length {length} != {20 + 4 * (n - 1)}"]
    return []


def _pmns_ids(b: bytes) -> list[str]:  # __pmDecodeIDList (numids: the caller's count, checked by the test)
    length = len(b)
    if length < 24:
        return [f"PMNS_IDS: short PDU {length}"]
    nids = _i32(b, 16)
    if nids <= 0:
        return [f"PMNS_IDS: numids {nids} <= 0"]
    if length != 24 + 4 * (nids - 1):
        return [f"PMNS_IDS: length {length} != {24 + 4 * (nids - 1)}"]
    return []


def _pmns_names(b: bytes) -> list[str]:  # __pmDecodeNameList
    length = len(b)
    if length < 24:
        return [f"PMNS_NAMES: short PDU {length}"]
    nstrbytes, numstatus, numnames = struct.unpack_from("!iii", b, 12)
    if numnames <= 0:
        return []  # none, or an error code
    if nstrbytes < 0 or nstrbytes > length:
        return [f"PMNS_NAMES: nstrbytes {nstrbytes} outside 0..{length}"]
    maxnames = (length - 28 + 4) // (12 if numstatus > 0 else 8)
    if numnames > maxnames:
        return [f"PMNS_NAMES: numnames {numnames} > max {maxnames}"]
    if numstatus not in (0, numnames):
        return [f"PMNS_NAMES: numstatus {numstatus} neither 0 nor numnames"]
    room = nstrbytes  # dest_end - dest: the names, each NUL-terminated
    head = 8 if numstatus else 4
    np = 24
    for i in range(numnames):
        if head > length - np:
            return [f"PMNS_NAMES: name[{i}] header past end"]
        namelen = _i32(b, np + head - 4)
        if namelen < 0:
            return [f"PMNS_NAMES: name[{i}] namelen {namelen} < 0"]
        if head + namelen > length - np:
            return [f"PMNS_NAMES: name[{i}] past end"]
        if namelen + 1 > room:
            return [f"PMNS_NAMES: name[{i}] does not fit nstrbytes {nstrbytes}"]
        room -= namelen + 1
        np += head + _pad(namelen)
    return []


def _result(b: bytes) -> list[str]:  # __pmDecodeResult_ctx + __pmDecodeValueSet, pmcd's ExtractState
    length = len(b)
    if length < 24:
        return [f"RESULT: short PDU {length}"]
    out = []
    sec = struct.unpack_from("!I", b, 12)[0]
    if sec & ~0x18:
        out.append(f"RESULT: timestamp state 0x{sec:x}: only PMCD_LABEL_CHANGE|PMCD_NAMES_CHANGE (0x18) allowed")
    numpmid = _i32(b, 20)
    if numpmid < 0 or numpmid > length:
        return [*out, f"RESULT: numpmid {numpmid}"]
    vsplit = length
    vsize = vbsize = 0
    for i in range(numpmid):
        vlp = 24 + vsize
        if length - vlp < 8:
            return [*out, f"RESULT: pmid[{i}] vlist past end"]
        vsize += 8
        numval = _i32(b, vlp + 4)
        if numval > length:
            return [*out, f"RESULT: pmid[{i}] numval {numval} > len {length}"]
        if numval <= 0:
            continue
        if length - vlp < 12:
            return [*out, f"RESULT: pmid[{i}] valfmt past end"]
        valfmt = _i32(b, vlp + 8)
        vsize += 4 + 8 * numval
        if valfmt == 0:
            continue
        for j in range(numval):
            vp = vlp + 12 + 8 * j
            if length - vp < 8:
                return [*out, f"RESULT: pmid[{i}] value[{j}] past end"]
            vindex = _i32(b, vp + 4)
            if vindex < 0 or 4 * vindex >= length:
                return [*out, f"RESULT: pmid[{i}] value[{j}] block index {vindex} outside the PDU"]
            block = 4 * vindex
            vsplit = min(vsplit, block)
            if length - block < 4:
                return [*out, f"RESULT: pmid[{i}] value[{j}] block header past end"]
            word = struct.unpack_from("!I", b, block)[0]
            vlen = word & 0xFFFFFF
            if vlen < 4 or vlen > length:
                return [*out, f"RESULT: pmid[{i}] value[{j}] vlen {vlen}"]
            if vlen > length - block:
                return [*out, f"RESULT: pmid[{i}] value[{j}] block past end"]
            vbsize += _pad(vlen)
    offset = 24 + vsize
    if offset != length - (length - vsplit):
        out.append(f"RESULT: value blocks start at {vsplit}, the value lists end at {offset}")
    if offset + vbsize != length:
        out.append(f"RESULT: lists {offset} + blocks {vbsize} != len {length}")
    return out


def _error(b: bytes) -> list[str]:  # __pmDecodeError: p_error_t, optionally with a datum
    return [] if len(b) in (16, 20) else [f"ERROR: length {len(b)}"]


CHECKED: dict[int, Callable[[bytes], list[str]]] = {
    0x7000: _error,
    0x7001: _result,
    0x7005: _desc,
    0x7007: _instance,
    0x7009: _text,
    0x700C: _creds,
    0x700D: _pmns_ids,
    0x700E: _pmns_names,
    0x7013: _label,
}


def problems(pdu: bytes) -> list[str]:
    """Why PCP 7 would refuse this reply (``[]``: it decodes)."""
    if len(pdu) < 12:
        return [f"short header {len(pdu)}"]
    length, ptype = struct.unpack_from("!ii", pdu, 0)
    if length != len(pdu):
        return [f"header length {length} != {len(pdu)} bytes"]
    check = CHECKED.get(ptype)
    return check(pdu) if check is not None else []

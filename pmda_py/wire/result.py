"""Fast encoder for fetch RESULT PDUs (the hot path).

:class:`ResultBuilder` produces exactly the bytes of
:meth:`pmda_py.wire.ResultPdu.encode` for the same values, without creating
a Python object per value: instance ids and 32-bit values go through
:mod:`array` slices, 64-bit and floating-point blocks through one
``struct.pack`` per value set, and block pointers are computed
arithmetically.  Sans-IO: no I/O, no logging.
"""

from __future__ import annotations

import struct
import sys
from array import array
from collections.abc import Sequence
from typing import Final

from pmda_py.errors import WireFormatError
from pmda_py.pmapi import PmType
from pmda_py.wire.pdus import PAD_BYTE, EventArray, PduType, ValFmt, pad4

__all__ = ["ResultBuilder"]

_LITTLE: Final = sys.byteorder == "little"
_HDR = struct.Struct("!iiiiii")  # len, type, from, sec, usec, numpmid
_FIXED: Final[dict[int, tuple[str, int]]] = {
    PmType.I64: ("q", 8),
    PmType.U64: ("Q", 8),
    PmType.DOUBLE: ("d", 8),
    PmType.FLOAT: ("f", 4),
}


def _u32(values: Sequence[int]) -> array[int]:
    """Values as 32-bit words; negative ints (down to -2^31) wrap as in C.

    Raises:
        OverflowError: a value is outside [-2^31, 2^32).
        TypeError: a value is not an integer.
    """
    try:
        return array("I", values)
    except OverflowError:
        if min(values) < -(1 << 31) or max(values) > 0xFFFFFFFF:
            raise OverflowError("value does not fit in 32 bits") from None
        return array("I", [v & 0xFFFFFFFF for v in values])


class _Set:
    """One pending value set (kind: err, insitu, fixed or var)."""

    __slots__ = ("code", "insts", "kind", "packed", "pmid", "raws", "size", "valfmt", "vtype", "words")

    def __init__(self, pmid: int, kind: str, insts: array[int] | None = None) -> None:
        self.pmid = pmid
        self.kind = kind
        self.insts: array[int] = insts if insts is not None else array("I")
        self.code = 0
        self.words: array[int] = array("I")
        self.vtype = 0
        self.size = 0
        self.packed = b""
        self.valfmt = 0
        self.raws: list[bytes] = []


class ResultBuilder:
    """Accumulates value sets in request order, then encodes one RESULT.

    Each ``add_*`` appends one value set.  Pointer value sets record their
    blocks' sizes so offsets are known only at :meth:`encode` time.
    """

    __slots__ = ("_items",)

    def __init__(self) -> None:
        self._items: list[_Set] = []

    def __len__(self) -> int:
        return len(self._items)

    def add_error(self, pmid: int, code: int) -> None:
        """A value set with ``numval = code`` (< 0), or 0 for "no values"."""
        item = _Set(pmid, "err")
        item.code = code if code < 0 else 0
        self._items.append(item)

    def add_insitu(self, pmid: int, insts: Sequence[int], words: Sequence[int]) -> None:
        """32-bit integer values (PM_TYPE_32 / U32), INSITU.

        Raises:
            TypeError, OverflowError: a value is not a 32-bit integer.
        """
        if not insts:
            self.add_error(pmid, 0)
            return
        if len(insts) != len(words):
            raise ValueError("insts and values differ in length")
        item = _Set(pmid, "insitu", _u32(insts))
        item.words = _u32(words)
        self._items.append(item)

    def add_fixed(self, pmid: int, type_: int, insts: Sequence[int], values: Sequence[int | float]) -> None:
        """64-bit integer, FLOAT or DOUBLE values as DPTR blocks.

        Raises:
            struct.error: a value does not fit the type.
        """
        if not insts:
            self.add_error(pmid, 0)
            return
        if len(insts) != len(values):
            raise ValueError("insts and values differ in length")
        code, size = _FIXED[type_]
        try:
            arr = array(code, values)
        except (TypeError, OverflowError) as err:
            raise struct.error(str(err)) from err
        if _LITTLE:
            arr.byteswap()
        item = _Set(pmid, "fixed", _u32(insts))
        item.vtype, item.size, item.packed = type_, size, arr.tobytes()
        self._items.append(item)

    def add_blocks(self, pmid: int, valfmt: int, insts: Sequence[int], vtype: int, payloads: Sequence[bytes]) -> None:
        """Variable-size blocks (STRING with its NUL, AGGREGATE, events)."""
        if not insts:
            self.add_error(pmid, 0)
            return
        if len(insts) != len(payloads):
            raise ValueError("insts and values differ in length")
        for p in payloads:
            if len(p) + 4 > 0xFFFFFF:
                raise WireFormatError(f"value block of {len(p) + 4} bytes is too big")
        item = _Set(pmid, "var", _u32(insts))
        item.valfmt, item.vtype, item.raws = valfmt, vtype, list(payloads)
        self._items.append(item)

    def add_values(self, pmid: int, type_: int, insts: Sequence[int], values: Sequence[object]) -> None:
        """Encode typed values the way libpcp_pmda's ``__pmStuffValue`` does."""
        if type_ in (PmType.I32, PmType.U32):
            self.add_insitu(pmid, insts, values)  # type: ignore[arg-type]
        elif type_ in _FIXED:
            self.add_fixed(pmid, type_, insts, values)  # type: ignore[arg-type]
        elif type_ == PmType.STRING:
            raw = [(v.encode("utf-8", "surrogateescape") if isinstance(v, str) else bytes(v)) + b"\0" for v in values]  # type: ignore[call-overload]
            self.add_blocks(pmid, ValFmt.DPTR, insts, PmType.STRING, raw)
        elif type_ == PmType.AGGREGATE:
            self.add_blocks(pmid, ValFmt.DPTR, insts, PmType.AGGREGATE, [bytes(v) for v in values])  # type: ignore[call-overload]
        elif type_ == PmType.AGGREGATE_STATIC:
            self.add_blocks(pmid, ValFmt.SPTR, insts, PmType.AGGREGATE_STATIC, [bytes(v) for v in values])  # type: ignore[call-overload]
        elif type_ in (PmType.EVENT, PmType.HIGHRES_EVENT):
            payloads = []
            for v in values:
                if not isinstance(v, EventArray):
                    raise TypeError(f"event metric value must be an EventArray, not {type(v).__name__}")
                payloads.append(v.encode())
            self.add_blocks(pmid, ValFmt.SPTR, insts, type_, payloads)
        else:
            raise TypeError(f"cannot encode values of type {type_}")

    def encode(self, flags: int = 0, from_: int = 0) -> bytes:
        """The RESULT PDU; ``flags`` are the state-change flags (timestamp sec)."""
        sets_size = 0
        for it in self._items:
            sets_size += 8 if it.kind == "err" else 12 + 8 * len(it.insts)
        cursor = 24 + sets_size  # byte offset of the next value block
        sets: list[bytes] = []
        blocks: list[bytes] = []
        for it in self._items:
            if it.kind == "err":
                sets.append(struct.pack("!Ii", it.pmid, it.code))
                continue
            n = len(it.insts)
            pairs = array("I", bytes(8 * n))
            pairs[0::2] = it.insts
            if it.kind == "insitu":
                pairs[1::2] = it.words
                fmt: int = ValFmt.INSITU
            elif it.kind == "fixed":
                blk = 4 + it.size
                start = cursor // 4
                pairs[1::2] = array("I", range(start, start + n * blk // 4, blk // 4))
                # blocks: [hdr][value] x n, built from big-endian bytes as-is
                words = array("I")
                words.frombytes(it.packed)
                per = it.size // 4
                out = array("I", bytes(4 * (1 + per) * n))
                hdr = ((it.vtype & 0xFF) << 24) | blk
                out[0 :: 1 + per] = array("I", [_bswap(hdr)]) * n
                for k in range(per):
                    out[1 + k :: 1 + per] = words[k::per]
                blocks.append(out.tobytes())
                cursor += blk * n
                fmt = ValFmt.DPTR
            else:
                ptrs = []
                for raw in it.raws:
                    ptrs.append(cursor // 4)
                    vlen = 4 + len(raw)
                    data = struct.pack("!I", ((it.vtype & 0xFF) << 24) | vlen) + raw
                    extra = pad4(vlen) - vlen
                    if extra:
                        data += PAD_BYTE * extra
                    blocks.append(data)
                    cursor += len(data)
                pairs[1::2] = array("I", ptrs)
                fmt = it.valfmt
            if _LITTLE:
                pairs.byteswap()
            sets.append(struct.pack("!Iii", it.pmid, n, fmt))
            sets.append(pairs.tobytes())
        body = b"".join(sets) + b"".join(blocks)
        return _HDR.pack(24 + len(body), PduType.RESULT, from_, flags, 0, len(self._items)) + body


def _bswap(word: int) -> int:
    """``word`` as the native uint32 whose bytes are its big-endian form."""
    return int.from_bytes(word.to_bytes(4, "big"), sys.byteorder)

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
from collections.abc import Mapping, Sequence
from typing import Final

from pmda_py.errors import WireFormatError
from pmda_py.pmapi import TYPES, PmType
from pmda_py.wire.buffers import ReplyBuffer
from pmda_py.wire.layout import FIXED_CODES, FixedLayout, RawValue
from pmda_py.wire.pdus import PAD_BYTE, EventArray, PduType, ValFmt, pad4

__all__ = [
    "FIXED_CODES",
    "FixedLayout",
    "PackedColumn",
    "PackedRun",
    "PackedRunCache",
    "ResultBuilder",
    "SectionCache",
    "encode_packed_run",
]

_LITTLE: Final = sys.byteorder == "little"
_HDR = struct.Struct("!iiiiii")  # len, type, from, sec, usec, numpmid
#: the types whose values travel as fixed-size DPTR blocks: their array code and size
_FIXED: Final[Mapping[int, tuple[str, int]]] = {t: (i.code, i.size) for t, i in TYPES.items() if i.form == "fixed"}


def _u32(values: Sequence[int]) -> array[int]:
    """Values as 32-bit words; negative ints (down to -2^31) wrap as in C.

    Raises:
        OverflowError: a value is outside [-2^31, 2^32).
        TypeError: a value is not an integer.
    """
    if isinstance(values, array) and values.typecode == "I":
        return values  # only read from
    try:
        return array("I", values)
    except OverflowError:
        if min(values) < -(1 << 31) or max(values) > 0xFFFFFFFF:
            raise OverflowError("value does not fit in 32 bits") from None
        return array("I", [v & 0xFFFFFFFF for v in values])


_NO_WORDS: Final[array[int]] = array("I")


class _Set:
    """One pending value set (kind: err, insitu, fixed or var)."""

    __slots__ = ("code", "insts", "kind", "packed", "pmid", "raws", "size", "valfmt", "vtype", "words")

    def __init__(self, pmid: int, kind: str, insts: array[int] | None = None) -> None:
        self.pmid = pmid
        self.kind = kind
        self.insts: array[int] = insts if insts is not None else array("I")
        self.code = 0
        self.words: array[int] = _NO_WORDS  # replaced, never changed in place
        self.vtype = 0
        self.size = 0
        self.packed = b""
        self.valfmt = 0
        self.raws: list[bytes] = []


class PackedColumn:
    """Values already packed big-endian, ``size`` bytes each (a fast path
    for tables that can produce them without Python objects per value)."""

    __slots__ = ("data", "size")

    def __init__(self, data: bytes, size: int) -> None:
        self.data = data
        self.size = size

    def __len__(self) -> int:
        return len(self.data) // self.size


class SectionCache:
    """What :meth:`ResultBuilder.encode` keeps between fetches: the value-set
    section of the last reply whose sets were all errors or fixed-size
    blocks, with its shape key and a copy of its instance arrays."""

    __slots__ = ("insts", "key", "sets")

    def __init__(self) -> None:
        self.key: tuple[object, ...] | None = None
        self.sets = b""
        self.insts: list[array[int]] = []


class PackedRunCache:
    """What :func:`encode_packed_run` keeps between fetches of one
    :attr:`PackedRun.token`: the reply taken apart by a :class:`FixedLayout`
    (its constant parts written once, the values moved in by two strided
    copies).  ``pmids`` is the caller's: the PMID list it was built for."""

    __slots__ = ("from_", "layout", "pmids", "token", "total")

    def __init__(self) -> None:
        self.token: object = None
        self.total = 0
        self.from_ = 0
        self.layout: FixedLayout | None = None
        self.pmids: Sequence[int] = ()


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

    def add_fixed(
        self, pmid: int, type_: int, insts: Sequence[int], values: Sequence[int | float] | PackedColumn
    ) -> None:
        """64-bit integer, FLOAT or DOUBLE values as DPTR blocks.

        Raises:
            struct.error: a value does not fit the type.
        """
        if not insts:
            self.add_error(pmid, 0)
            return
        code, size = _FIXED[type_]
        if isinstance(values, PackedColumn):  # the hot path: no per-value work at all
            if values.size != size or len(values.data) != size * len(insts):
                raise ValueError("packed column of the wrong size or length")
            item = _Set(pmid, "fixed", _u32(insts))
            item.vtype, item.size, item.packed = type_, size, values.data
            self._items.append(item)
            return
        if len(insts) != len(values):
            raise ValueError("insts and values differ in length")
        try:
            if isinstance(values, array) and values.typecode == code:
                arr: array[float] = array(code)
                arr.frombytes(values.tobytes())
            else:
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

    def add_values(self, pmid: int, type_: int, insts: Sequence[int], values: Sequence[RawValue]) -> None:
        """Encode typed values the way libpcp_pmda's ``__pmStuffValue`` does
        (``values``: what a table returned, of the metric's type; refused here
        when they are not)."""
        if type_ in (PmType.I32, PmType.U32):
            self.add_insitu(pmid, insts, values)
        elif type_ in _FIXED:
            self.add_fixed(pmid, type_, insts, values)
        elif type_ == PmType.STRING:
            raw = [(v.encode("utf-8", "surrogateescape") if isinstance(v, str) else bytes(v)) + b"\0" for v in values]
            self.add_blocks(pmid, ValFmt.DPTR, insts, PmType.STRING, raw)
        elif type_ == PmType.AGGREGATE:
            self.add_blocks(pmid, ValFmt.DPTR, insts, PmType.AGGREGATE, [bytes(v) for v in values])
        elif type_ == PmType.AGGREGATE_STATIC:
            self.add_blocks(pmid, ValFmt.SPTR, insts, PmType.AGGREGATE_STATIC, [bytes(v) for v in values])
        elif type_ in (PmType.EVENT, PmType.HIGHRES_EVENT):
            payloads = []
            for v in values:
                if not isinstance(v, EventArray):
                    raise TypeError(f"event metric value must be an EventArray, not {type(v).__name__}")
                payloads.append(v.encode())
            self.add_blocks(pmid, ValFmt.SPTR, insts, type_, payloads)
        else:
            raise TypeError(f"cannot encode values of type {type_}")

    def shape(self) -> tuple[object, ...] | None:
        """A key for the value-set section when it does not depend on the
        values (every set is an error or fixed-size blocks), else None.
        The instance lists are not in it: :meth:`encode` compares them with
        copies of the last ones (a table may change its array in place)."""
        key: list[object] = []
        for it in self._items:
            if it.kind == "err":
                key.append((it.pmid, it.code))
            elif it.kind == "fixed":
                key.append((it.pmid, it.vtype, it.size, len(it.insts)))
            else:
                return None
        return tuple(key)

    def encode(self, flags: int = 0, from_: int = 0, cache: SectionCache | None = None) -> bytes:
        """The RESULT PDU; ``flags`` are the state-change flags (timestamp sec).

        The value-set section is one preallocated native-order ``array`` filled
        by slice assignment and byte-swapped once; blocks follow in order.
        With ``cache`` (a dict the caller keeps between fetches), a value-set
        section whose :meth:`shape` repeats is reused and only the value
        blocks are rebuilt.
        """
        key = self.shape() if cache is not None else None
        if (
            cache is not None
            and key is not None
            and cache.key == key
            and cache.insts == [it.insts for it in self._items if it.kind == "fixed"]
        ):
            return self._encode_blocks_only(flags, from_, cache.sets)
        data = self._encode(flags, from_)
        if cache is not None and key is not None:  # (the shape, taken once: the section for the next fetch)
            nsets = 4 * sum(2 if it.kind == "err" else 3 + 2 * len(it.insts) for it in self._items)
            cache.key, cache.sets = key, data[24 : 24 + nsets]
            cache.insts = [array("I", it.insts) for it in self._items if it.kind == "fixed"]
        return data

    def _encode_blocks_only(self, flags: int, from_: int, sets: bytes) -> bytes:
        blocks: list[bytes] = []
        items = [it for it in self._items if it.kind == "fixed"]
        k = 0
        while k < len(items):
            it = items[k]
            run_end = k
            while run_end < len(items) and items[run_end].vtype == it.vtype and items[run_end].size == it.size:
                run_end += 1
            total = sum(len(items[j].insts) for j in range(k, run_end))
            step = (4 + it.size) // 4
            words = array("I")
            words.frombytes(b"".join(items[j].packed for j in range(k, run_end)))
            out = array("I", bytes(4 * step * total))
            out[0::step] = array("I", [_bswap(((it.vtype & 0xFF) << 24) | (4 + it.size))]) * total
            for w in range(step - 1):
                out[1 + w :: step] = words[w :: step - 1]
            blocks.append(out.tobytes())
            k = run_end
        body_len = len(sets) + sum(len(b) for b in blocks)
        return b"".join((_HDR.pack(24 + body_len, PduType.RESULT, from_, flags, 0, len(self._items)), sets, *blocks))

    def _encode(self, flags: int, from_: int) -> bytes:
        items = self._items
        nwords = 0
        for it in items:
            nwords += 2 if it.kind == "err" else 3 + 2 * len(it.insts)
        sets = array("I", bytes(4 * nwords))
        cursor = 24 + 4 * nwords  # byte offset of the next value block
        blocks: list[bytes] = []
        pos = 0
        k = 0
        nitems = len(items)
        while k < nitems:
            it = items[k]
            if it.kind == "err":
                sets[pos] = it.pmid
                sets[pos + 1] = it.code & 0xFFFFFFFF
                pos += 2
                k += 1
                continue
            if it.kind == "fixed":
                # a run of fixed-size blocks of one type: build all its blocks at once
                run_end = k
                total = 0
                while (
                    run_end < nitems
                    and items[run_end].kind == "fixed"
                    and items[run_end].vtype == it.vtype
                    and items[run_end].size == it.size
                ):
                    total += len(items[run_end].insts)
                    run_end += 1
                blk = 4 + it.size
                step = blk // 4
                first = cursor // 4
                ptrs = array("I", range(first, first + total * step, step))
                words = array("I")
                words.frombytes(b"".join(items[j].packed for j in range(k, run_end)))
                out = array("I", bytes(4 * step * total))
                out[0::step] = array("I", [_bswap(((it.vtype & 0xFF) << 24) | blk)]) * total
                for w in range(step - 1):
                    out[1 + w :: step] = words[w :: step - 1]
                blocks.append(out.tobytes())
                cursor += blk * total
                used = 0
                for j in range(k, run_end):
                    fj = items[j]
                    n = len(fj.insts)
                    sets[pos] = fj.pmid
                    sets[pos + 1] = n
                    sets[pos + 2] = ValFmt.DPTR
                    p = pos + 3
                    end = p + 2 * n
                    sets[p:end:2] = fj.insts
                    sets[p + 1 : end : 2] = ptrs[used : used + n]
                    used += n
                    pos = end
                k = run_end
                continue
            n = len(it.insts)
            sets[pos] = it.pmid
            sets[pos + 1] = n
            p = pos + 3
            end = p + 2 * n
            sets[p:end:2] = it.insts
            if it.kind == "insitu":
                sets[p + 1 : end : 2] = it.words
                sets[pos + 2] = ValFmt.INSITU
            else:
                vptrs = array("I", bytes(4 * n))
                for r, raw in enumerate(it.raws):
                    vptrs[r] = cursor // 4
                    vlen = 4 + len(raw)
                    extra = pad4(vlen) - vlen
                    blocks.append(struct.pack("!I", ((it.vtype & 0xFF) << 24) | vlen) + raw + PAD_BYTE * extra)
                    cursor += vlen + extra
                sets[p + 1 : end : 2] = vptrs
                sets[pos + 2] = it.valfmt
            pos = end
            k += 1
        if _LITTLE:
            sets.byteswap()
        body_len = 4 * nwords + sum(len(b) for b in blocks)
        return b"".join(
            (_HDR.pack(24 + body_len, PduType.RESULT, from_, flags, 0, len(items)), sets.tobytes(), *blocks)
        )


def _bswap(word: int) -> int:
    """``word`` as the native uint32 whose bytes are its big-endian form."""
    return int.from_bytes(word.to_bytes(4, "big"), sys.byteorder)


class PackedRun:
    """Several metrics' values at once, for a table that can hand them over
    in one piece: value set ``k`` is ``pmids[k]`` with instances
    ``insts[k]`` and values of type ``vtypes[k]`` (8-byte types: I64, U64,
    DOUBLE), and ``blob`` holds every value, big-endian, 8 bytes each, in
    that order.  ``token`` is an object that stays the same while pmids,
    vtypes and instances do (the encoder reuses everything but the values)."""

    __slots__ = ("blob", "insts", "pmids", "token", "vtypes")

    def __init__(
        self,
        pmids: Sequence[int],
        vtypes: Sequence[int],
        insts: Sequence[array[int]],
        blob: bytes | memoryview | array[int],
        token: object,
    ) -> None:
        self.pmids = pmids
        self.vtypes = vtypes
        self.insts = insts
        self.blob = blob
        self.token = token


def encode_packed_run(
    run: PackedRun, flags: int = 0, from_: int = 0, cache: PackedRunCache | None = None
) -> bytes | ReplyBuffer:
    """The RESULT PDU of a :class:`PackedRun` (every set DPTR blocks of 8
    bytes), the same bytes :class:`ResultBuilder` gives for those values.

    With ``cache``, the first reply of a ``run.token`` is taken apart once
    (a :class:`FixedLayout`: PMIDs, instances, pointers and block headers
    written once); a fetch then costs the strided moves of the values into
    the kept reply and one copy of it.

    Raises:
        ValueError: the blob does not hold 8 bytes per instance.
    """
    hit = cache is not None and cache.token is run.token and cache.from_ == from_
    total = cache.total if cache is not None and hit else sum(len(i) for i in run.insts)
    if memoryview(run.blob).nbytes != 8 * total:
        raise ValueError("packed run: the blob does not hold 8 bytes per value")
    if cache is not None and hit and cache.layout is not None:
        return cache.layout.encode((run.blob,), flags)
    data = _encode_run(run, total, flags, from_)
    if cache is not None and not hit:
        cache.token, cache.total, cache.from_ = run.token, total, from_
        groups = [0 if len(i) else -1 for i in run.insts]
        try:
            cache.layout = FixedLayout(data, groups, run.vtypes, 1, (0,))
        except (ValueError, KeyError):  # a type the layout does not move (the plain path each time)
            cache.layout = None
        cache.pmids = ()
    return data


def _encode_run(run: PackedRun, total: int, flags: int, from_: int) -> bytes:
    """A :class:`PackedRun`'s reply built from scratch: the value-set
    section, then the blocks (a template of their headers with the values
    moved in)."""
    nsets = len(run.pmids)
    nwords = 3 * nsets + 2 * total
    sets = array("I", bytes(4 * nwords))
    blocks = array("I", bytes(12 * total))
    first = (24 + 4 * nwords) // 4  # word offset of the first block
    pos = used = 0
    for pmid, vtype, insts in zip(run.pmids, run.vtypes, run.insts):
        n = len(insts)
        sets[pos], sets[pos + 1], sets[pos + 2] = pmid, n, ValFmt.DPTR
        p = pos + 3
        end = p + 2 * n
        sets[p:end:2] = insts
        sets[p + 1 : end : 2] = array("I", range(first + 3 * used, first + 3 * (used + n), 3))
        blocks[3 * used : 3 * (used + n) : 3] = array("I", [((vtype & 0xFF) << 24) | 12]) * n
        used += n
        pos = end
    if _LITTLE:
        sets.byteswap()
        blocks.byteswap()  # headers in network order; the value words are copied in as bytes
    words = array("I")
    words.frombytes(memoryview(run.blob).cast("B"))
    blocks[1::3] = words[0::2]
    blocks[2::3] = words[1::2]
    head = _HDR.pack(24 + 4 * nwords + 12 * total, PduType.RESULT, from_, flags, 0, nsets)
    return b"".join((head, sets.tobytes(), blocks.tobytes()))

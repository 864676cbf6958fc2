"""The fast path's reply writer: :class:`FixedLayout`, a RESULT of
fixed-size values taken apart once so that its repeats are written by a few
bulk operations.  Sans-IO: no I/O, no logging."""

from __future__ import annotations

import struct
import sys
from array import array
from collections.abc import Sequence
from typing import Any, Final, Literal, Optional

from pmda_py.pmapi import TYPES
from pmda_py.wire import buffers
from pmda_py.wire.buffers import ReplyBuffer, SharedReply
from pmda_py.wire.pdus import PduType, ValFmt

#: a value as a table returned it, not checked by type: the encoders hand it
#: to ``struct.pack``, ``array`` or ``bytes()``, which refuse a wrong one.  The
#: one untyped point of the value path (the boundary with the user's tables):
#: narrowing each value by ``isinstance`` would cost work per value on the
#: hot path, and the fast path checks types by ``type(v) in`` a set, which
#: mypy cannot follow.
RawValue = Any

__all__ = ["FIXED_CODES", "FixedLayout"]

_LITTLE: Final = sys.byteorder == "little"

#: struct codes of the types a :class:`FixedLayout` writes (32-bit INSITU, the rest 4/8-byte DPTR blocks)
FIXED_CODES: Final[dict[int, str]] = {t: info.code for t, info in TYPES.items() if info.form != "var"}

#: a memoryview format of each value size (the moves copy bytes, whatever the type)
_MOVE_FORMAT: Final[dict[int, Literal["I", "Q"]]] = {4: "I", 8: "Q"}


def _runs(codes: Sequence[str]) -> str:
    """``codes`` as a struct format with repeat counts (``"qqq" -> "3q"``)."""
    out: list[str] = []
    k = 0
    while k < len(codes):
        j = k
        while j < len(codes) and codes[j] == codes[k]:
            j += 1
        out.append(f"{j - k}{codes[k]}" if j - k > 1 else codes[k])
        k = j
    return ">" + "".join(out)


#: one planned move: (destination byte, count, destination stride, group, source byte, source stride, size)
_Move = tuple[int, int, int, int, int, int, int]


class FixedLayout:
    """A RESULT whose values are all fixed-size, taken apart once so that a
    repeat of it (same PMIDs, instances and types) is written by a few bulk
    operations: each value group's big-endian bytes -- packed (and
    range-checked) by one precompiled :class:`struct.Struct`, or, for a
    ``raw`` group, given as bytes already -- go into the reply's buffer by a
    short list of strided copies of whole values (memoryview slices).

    Built from a reply the general encoder made (``data``), so the constant
    parts (PMIDs, instances, pointers, block headers) are its bytes.
    ``groups[k]`` is the value group (``0 .. ngroups-1``) whose values fill
    value set ``k`` in order, or -1 for a set with no values (an error);
    ``types[k]`` its metric type (one of :data:`FIXED_CODES`).  ``raw``
    names the groups whose values :meth:`encode` gets as one bytes-like
    object: every value of the group, big-endian, in order (4 bytes for a
    32-bit or FLOAT value, 8 for the others).
    """

    __slots__ = ("_packed", "_plan", "_raw", "_raw_used", "_reply", "_spare", "_src", "nvalues", "raw_sizes", "structs")

    def __init__(
        self, data: bytes, groups: Sequence[int], types: Sequence[int], ngroups: int, raw: Sequence[int] = ()
    ) -> None:
        if len(data) % 4 or len(data) < 24:
            raise ValueError("not a RESULT")
        words = array("I", data)
        if _LITTLE:
            words.byteswap()
        if words[1] != PduType.RESULT or words[0] != len(data) or words[5] != len(groups):
            raise ValueError("not the RESULT of these value sets")
        codes: list[list[str]] = [[] for _ in range(ngroups)]
        entries: list[tuple[int, int, int, int]] = []  # (destination byte, group, source byte, size)
        used = [0] * ngroups  # bytes of each group's values so far
        pos = 6
        for g, t in zip(groups, types):
            numval = words[pos + 1] if words[pos + 1] < 0x80000000 else -1
            if g < 0 or numval <= 0:
                if g >= 0 or numval > 0:
                    raise ValueError("value set and layout disagree")
                pos += 2
                continue
            code = FIXED_CODES[t]
            valfmt = words[pos + 2]
            for j in range(numval):
                w = pos + 3 + 2 * j + 1
                if valfmt == ValFmt.INSITU:
                    if code not in "iI":
                        raise ValueError("INSITU value of a non-32-bit type")
                    dst, size = 4 * w, 4
                else:
                    ptr = words[w]
                    blen = words[ptr] & 0xFFFFFF
                    size = blen - 4
                    if code in "iI" or size != struct.calcsize(code) or (words[ptr] >> 24) != t:
                        raise ValueError("value block of the wrong type or size")
                    dst = 4 * (ptr + 1)
                codes[g].append(code)
                entries.append((dst, g, used[g], size))
                used[g] += size
            pos += 3 + 2 * numval
        self._raw = frozenset(raw)
        #: bytes each raw group's values take
        self.raw_sizes = {g: used[g] for g in self._raw}
        self.structs = [struct.Struct(_runs(c)) for c in codes]
        self._src = [bytearray(s.size) for s in self.structs]  # each packed group's bytes
        #: the groups that have values: (group, its struct, its bytes) packed; (group, size) raw
        self._packed = [(g, s, a) for g, (s, a) in enumerate(zip(self.structs, self._src)) if s.size and g not in raw]
        self._raw_used = [(g, used[g]) for g in sorted(self._raw) if used[g]]
        self.nvalues = sum(len(c) for c in codes)
        words[3] = 0  # the state flags: set per reply
        if _LITTLE:
            words.byteswap()
        self._plan = _plan(entries)
        # The reply being written: the constant parts once; every encode
        # writes every value byte (and the flags).
        self._reply = self._bind(words.tobytes())
        #: the other reply buffer: the last reply's, while its reader holds it
        self._spare: _Reply | None = None

    def _bind(self, template: bytes | bytearray | SharedReply) -> _Reply:
        """A new reply buffer (a copy of ``template``; shared memory for a
        large one in a pipe agent, see :mod:`pmda_py.wire.buffers`) and its moves."""
        reply = _Reply(buffers.MEMORY.new(template))
        reply.moves = self._views(reply.data)
        reply.calibrate()  # the record (and its views) now hold the buffer, nothing else
        return reply

    def _views(self, data: ReplyBuffer) -> list[_MoveViews]:
        """The moves' destination views into ``data`` (and their sources)."""
        out = memoryview(data)
        moves: list[_MoveViews] = []
        for d0, n, ds, g, s0, ss, size in self._plan:
            fmt = _MOVE_FORMAT[size]
            dview = out[d0 : d0 + (n - 1) * ds + size].cast(fmt)[:: ds // size]
            taken = slice(s0, s0 + (n - 1) * ss + size)
            sview = None if g in self._raw else memoryview(self._src[g])[taken].cast(fmt)[:: ss // size]
            moves.append((dview, sview, g, taken, ss // size, fmt))
        out.release()
        return moves

    def _writable(self) -> _Reply:
        """A reply buffer no one else holds: the last one, or else the
        spare (so a reader holding the last reply until the next request
        costs nothing), or else a new one."""
        reply = self._reply
        if reply.free():
            return reply
        spare = self._spare
        if spare is None or not spare.free():
            spare = self._bind(reply.data)
        self._reply, self._spare = spare, reply
        return spare

    def encode(self, values: Sequence[RawValue], flags: int = 0) -> ReplyBuffer:
        """The reply with ``values[g]`` (group ``g``'s values in order; a
        raw group's as one bytes-like object; a group the layout has no
        values of is not read).

        The reply is this layout's own buffer, not a copy: it is written
        again by a later encode only once nothing else holds it (its
        reference count, CPython's; elsewhere every reply is a new buffer).
        A caller may keep it as long as it likes, but must not change it;
        a writer that hands its pages to the kernel (a :class:`SharedReply`
        spliced into a pipe) holds it until the reader has taken them.

        Raises:
            struct.error, OverflowError, TypeError: a value does not fit its
                type (the general path then reports which one).
            ValueError: a raw group's bytes are not its values' size.
        """
        # The packed bytes and the reply go into buffers kept from the last
        # reply: a large reply then costs no fresh memory (a new mapping per
        # buffer and its page faults, with glibc's malloc) and no copy.
        views: dict[int, memoryview] = {}
        for g, size in self._raw_used:
            view = memoryview(values[g]).cast("B")
            if view.nbytes != size:
                raise ValueError("raw values of the wrong size")
            views[g] = view
        for g, s, a in self._packed:
            s.pack_into(a, 0, *values[g])
        reply = self._reply
        if _getrefcount is None or _getrefcount(reply.data) != reply.refs:  # held elsewhere (inlined free())
            reply = self._writable()
        for dst, src, g, taken, step, fmt in reply.moves:
            dst[:] = src if src is not None else views[g][taken].cast(fmt)[::step]
        out = reply.data
        out[12:16] = (flags & 0xFFFFFFFF).to_bytes(4, "big")
        return out


#: one move bound to a reply buffer: (destination view, source view of a
#: packed group or None, group, source slice, step, format)
_MoveViews = tuple[memoryview, Optional[memoryview], int, slice, int, Literal["I", "Q"]]

_getrefcount = getattr(sys, "getrefcount", None)


class _Reply:
    """A reply buffer of a :class:`FixedLayout` and the destination views
    of its moves; :meth:`free` says whether anything else holds it."""

    __slots__ = ("data", "moves", "refs")

    def __init__(self, data: ReplyBuffer) -> None:
        self.data = data
        self.moves: list[_MoveViews] = []
        #: the buffer's reference count while only this record (and its views) hold it
        self.refs = -1

    def calibrate(self) -> None:
        """Take the buffer's reference count now, while only this record
        (and its views) hold it, as the count of a free buffer."""
        if _getrefcount is not None:
            self.refs = _getrefcount(self.data)

    def free(self) -> bool:
        """Whether nothing but this record holds the buffer (False where
        reference counts cannot be read: every reply then gets a new one)."""
        return _getrefcount is not None and _getrefcount(self.data) == self.refs


def _plan(entries: list[tuple[int, int, int, int]]) -> list[_Move]:
    """(destination byte, group, source byte, size) value moves as strided
    moves whose strides are multiples of the value size (a run of 8-byte
    values in 12-byte blocks becomes two runs of every other block)."""
    runs: list[tuple[int, int, int, int, int, int, int]] = []
    k = 0
    n = len(entries)
    while k < n:
        d0, g, s0, size = entries[k]
        count = 1
        ds = ss = size
        if k + 1 < n and entries[k + 1][1] == g and entries[k + 1][3] == size:
            nd, _g, ns, _s = entries[k + 1]
            if nd > d0 and ns > s0:
                ds, ss = nd - d0, ns - s0
                count = 2
                while (
                    k + count < n
                    and entries[k + count][1] == g
                    and entries[k + count][3] == size
                    and entries[k + count][0] == d0 + count * ds
                    and entries[k + count][2] == s0 + count * ss
                ):
                    count += 1
        runs.append((d0, count, ds, g, s0, ss, size))
        k += count
    plan: list[_Move] = []
    for d0, count, ds, g, s0, ss, size in runs:
        # split until both strides are multiples of the size: m interleaved runs
        m = 1
        while (m * ds) % size or (m * ss) % size:
            m += 1
        m = min(m, count)
        if count == 1:
            m = 1
        for r in range(m):
            c = len(range(r, count, m))
            plan.append((d0 + r * ds, c, m * ds if c > 1 else size, g, s0 + r * ss, m * ss if c > 1 else size, size))
    return plan

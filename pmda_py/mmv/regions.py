"""How an MMV file is read: :class:`FileRegions`, only the header, the
table of contents and the sections it names (through a ``read_at(length,
offset)`` the caller gives, ``pread`` on a descriptor it opened), anything
else the records point at read on demand, within the limits of
:mod:`pmda_py.mmv.layout`.  A file extended with a sparse tail costs
nothing more.  No I/O of its own."""

from __future__ import annotations

import bisect
import struct
from collections.abc import Iterable
from typing import Callable, overload

from pmda_py.mmv.layout import (
    CHUNK,
    HEADER,
    MAX_NAMED,
    MAX_READ,
    MAX_TOCS,
    READ_CHARGE,
    TEXT_BUDGET,
    TOC,
    MmvFormatError,
    extent,
)

__all__ = ["FileRegions"]


class FileRegions:
    """A file as the parser sees it (``len`` is the file's size, slices are
    its bytes) built from the regions actually read: ``pread`` of what the
    header names, and of whatever else is asked for, on demand.

    ``read_at`` is only used while the object is being built and read; the
    owner sets it to None when its descriptor is closed (later reads outside
    the regions then find nothing, as past the end).  It does no I/O itself."""

    def __init__(self, read_at: Callable[[int, int], bytes] | None, size: int) -> None:
        self.read_at = read_at
        self.size = size
        self._starts: list[int] = []
        self._blocks: list[bytes] = []
        self.read_bytes = 0  #: bytes read so far (the cost of this file)
        self.text_cost = 0  #: what :meth:`read_texts` read so far, with its charge per read

    def __len__(self) -> int:
        return self.size

    def add(self, offset: int, length: int) -> None:
        """Read ``[offset, offset + length)`` (clipped to the size) now;
        regions it touches are joined into one."""
        end = min(self.size, offset + length)
        if offset < 0 or end <= offset or self._covered(offset, end) is not None:
            return
        lo = bisect.bisect_right(self._starts, offset) - 1
        if lo >= 0 and self._starts[lo] + len(self._blocks[lo]) < offset:
            lo += 1
        lo = max(lo, 0)
        hi = bisect.bisect_right(self._starts, end)  # blocks [lo, hi) touch the range
        if lo < hi:
            offset = min(offset, self._starts[lo])
            end = max(end, self._starts[hi - 1] + len(self._blocks[hi - 1]))
        data = self._pread(offset, end)
        del self._starts[lo:hi]
        del self._blocks[lo:hi]
        if data:
            self._starts.insert(lo, offset)
            self._blocks.insert(lo, data)

    def extract(self, windows: Iterable[tuple[int, int]]) -> FileRegions:
        """A copy holding only the parts of ``windows`` (``(offset,
        length)`` each) this one holds, to keep once the file is parsed:
        the sections' bytes are let go.  It reads nothing (``read_at``
        None); its size and ``read_bytes`` are this one's."""
        out = FileRegions(None, self.size)
        out.read_bytes = self.read_bytes
        spans: list[list[int]] = []
        for o, n in sorted(windows):
            e = min(self.size, o + n)
            if o < 0 or e <= o:
                continue
            if spans and o <= spans[-1][1]:
                spans[-1][1] = max(spans[-1][1], e)
            else:
                spans.append([o, e])
        starts, blocks = self._starts, self._blocks
        for s, e in spans:
            k = max(0, bisect.bisect_right(starts, s) - 1)
            while k < len(starts) and starts[k] < e:
                lo, hi = max(s, starts[k]), min(e, starts[k] + len(blocks[k]))
                if lo < hi:
                    out._starts.append(lo)
                    out._blocks.append(blocks[k][lo - starts[k] : hi - starts[k]])
                k += 1
        return out

    def prefix(self) -> bytes:
        """The block read from offset 0 (b"" if none)."""
        return self._blocks[0] if self._starts and self._starts[0] == 0 else b""

    def _pread(self, offset: int, end: int) -> bytes:
        """``[offset, end)`` from the file, counted (raises
        :class:`MmvFormatError` past :data:`MAX_READ`); short where the file
        now ends, which then becomes its size."""
        data = b""
        if self.read_at is not None:
            if self.read_bytes + (end - offset) > MAX_READ:
                raise MmvFormatError(f"its records point at more than {MAX_READ} bytes", section="file", offset=offset)
            try:
                data = self.read_at(end - offset, offset)
            except OSError:
                data = b""
        self.read_bytes += len(data)
        if len(data) < end - offset:  # the file shrank under us: what is missing is past its end
            self.size = min(self.size, offset + len(data))
        return data

    def _fill(self, start: int, end: int) -> None:
        """Read the parts of ``[start, end)`` no block holds, each a block
        of its own: nothing is read twice, nothing held is copied."""
        self._read_gaps(self._gaps(start, end))

    def _gaps(self, start: int, end: int) -> list[tuple[int, int]]:
        """The parts of ``[start, end)`` no block holds, in order."""
        starts, blocks = self._starts, self._blocks
        out: list[tuple[int, int]] = []
        k = bisect.bisect_right(starts, start)
        pos = start if k == 0 else max(start, starts[k - 1] + len(blocks[k - 1]))
        while pos < end:
            stop = min(end, starts[k]) if k < len(starts) else end
            if stop > pos:
                out.append((pos, stop))
            if k >= len(starts):
                break
            pos = max(pos, starts[k] + len(blocks[k]))
            k += 1
        return out

    def _read_gaps(self, gaps: list[tuple[int, int]]) -> None:
        """Read ``gaps`` (parts no block holds, in order), each into a block
        of its own, until the file ends."""
        for pos, stop in gaps:
            data = self._pread(pos, stop)
            if data:
                k = bisect.bisect_right(self._starts, pos)
                self._starts.insert(k, pos)
                self._blocks.insert(k, data)
            if pos + len(data) < stop:
                return  # the file ends here now

    def read_texts(self, offsets: Iterable[int], width: int) -> None:
        """Read the ``width`` bytes at each of ``offsets`` (the texts string
        values point at) that no block holds yet, in order, windows less
        than a chunk apart in one read; each read costs its bytes plus
        :data:`READ_CHARGE`, all of this object's together at most
        :data:`TEXT_BUDGET` (:class:`MmvFormatError` past it, before any of
        these is read).  Offsets outside the file are left alone."""
        spans: list[list[int]] = []
        for o in sorted(set(offsets)):
            if o < 0 or o >= self.size:
                continue
            e = min(self.size, o + width)
            if spans and o <= spans[-1][1] + CHUNK:
                spans[-1][1] = max(spans[-1][1], e)
            else:
                spans.append([o, e])
        gaps = [g for o, e in spans for g in self._gaps(o, e)]
        cost = self.text_cost + sum(e - o for o, e in gaps) + READ_CHARGE * len(gaps)
        if cost > TEXT_BUDGET:
            self.text_cost = TEXT_BUDGET + 1  # later string values of this file in this fetch: refused too
            raise MmvFormatError(
                f"its string values point at more than {TEXT_BUDGET} bytes of text to read",
                section="values",
                offset=gaps[0][0],
            )
        self.text_cost = cost
        self._read_gaps(gaps)

    def _covered(self, start: int, end: int) -> bytes | None:
        """``[start, end)`` from the blocks held (None if not all are)."""
        k = bisect.bisect_right(self._starts, start) - 1
        if k < 0:
            return None
        base, block = self._starts[k], self._blocks[k]
        if end <= base + len(block):
            return block[start - base : end - base]
        pos = base + len(block)
        if start >= pos:
            return None
        parts = [block[start - base :]]
        for j in range(k + 1, len(self._starts)):  # blocks end to end
            if self._starts[j] != pos:
                return None
            block = self._blocks[j]
            parts.append(block[: end - pos])
            pos += len(block)
            if pos >= end:
                return b"".join(parts)
        return None

    def view(self, offset: int, length: int) -> memoryview:
        """:meth:`read` as a view: no copy where one block holds the range
        (a metric's values are a view of the values section, read once per
        fetch, however many metrics a fetch reads from it)."""
        end = min(self.size, offset + length)
        k = bisect.bisect_right(self._starts, offset) - 1
        if 0 <= offset < end and k >= 0:
            base, block = self._starts[k], self._blocks[k]
            if end <= base + len(block):
                return memoryview(block)[offset - base : end - base]
        return memoryview(self.read(offset, length))

    def read(self, offset: int, length: int) -> bytes:
        """The file's bytes ``[offset, offset + length)``, cut at its end
        (what is not read yet is read now, in aligned chunks)."""
        end = min(self.size, offset + length)
        if offset < 0 or end <= offset:
            return b""
        got = self._covered(offset, end)
        if got is None:
            first = offset - offset % CHUNK
            self._fill(first, min(self.size, end + (-end) % CHUNK))
            end = min(end, self.size)
            got = self._covered(offset, end) if end > offset else b""
        return got or b""

    @overload
    def __getitem__(self, key: int) -> int: ...
    @overload
    def __getitem__(self, key: slice) -> bytes: ...
    def __getitem__(self, key: int | slice) -> int | bytes:
        if isinstance(key, int):
            b = self.read(key, 1)
            if not b:
                raise IndexError(key)
            return b[0]
        start, stop, step = key.indices(self.size)
        if step != 1:
            raise ValueError("FileRegions slices have no step")
        return self.read(start, stop - start)

    @classmethod
    def load(cls, read_at: Callable[[int, int], bytes], size: int) -> FileRegions:
        """The header, TOC and every section the TOC names, read with
        ``read_at(length, offset)`` (a file of ``size`` bytes).  Raises :class:`MmvFormatError` when the
        TOC is absurd or names more than :data:`MAX_NAMED` bytes."""
        img = cls(read_at, size)
        img.add(0, HEADER.size)
        head = img.read(0, HEADER.size)
        if len(head) < HEADER.size:
            return img  # the parser says why
        version, tocs = struct.unpack_from("=i", head, 4)[0], struct.unpack_from("=i", head, 24)[0]
        if tocs > MAX_TOCS:
            raise MmvFormatError(f"TOC count {tocs} > {MAX_TOCS}", section="toc", offset=24)
        if tocs <= 0:
            return img
        img.add(HEADER.size, TOC.size * tocs)
        toc = img.read(HEADER.size, TOC.size * tocs)
        spans = []
        for t in range(len(toc) // TOC.size):
            ttype, count, offset = TOC.unpack_from(toc, t * TOC.size)
            length = extent(ttype, count, version)
            if offset >= img.size or length <= 0:
                continue
            spans.append((offset, min(img.size, offset + length)))
        named = sum(e - o for o, e in spans)
        if named > MAX_NAMED:
            raise MmvFormatError(f"sections name {named} bytes (limit {MAX_NAMED})", section="toc", offset=40)
        spans.sort()
        merged: list[list[int]] = []
        for o, e in spans:  # one read for sections that touch or nearly do
            if merged and o <= merged[-1][1] + CHUNK:
                merged[-1][1] = max(merged[-1][1], e)
            else:
                merged.append([o, e])
        for o, e in merged:
            img.add(o, e - o)
        return img

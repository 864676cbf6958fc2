"""Pieces of the MMV v2 files the tests write by hand (the layout is
pmda_py/mmv/layout.py's; PCP's own writer is scripts/write_mmv.py)."""

from __future__ import annotations

import struct
from collections.abc import Sequence


def put_head(buf: bytearray, toc: Sequence[tuple[int, int, int]], cluster: int, flags: int = 0) -> None:
    """The header (version 2, generation from ``cluster``) and the TOC
    entries ``(type, count, offset)``, as many as ``toc`` has."""
    gen = 0x6E000000 + cluster
    struct.pack_into("=4siQQiIii", buf, 0, b"MMV\0", 2, gen, gen, len(toc), flags, 0, cluster)
    for t, (ttype, count, off) in enumerate(toc):
        struct.pack_into("=IIQ", buf, 40 + 16 * t, ttype, count, off)


def put_u64_metrics(buf: bytearray, m: int, off_metrics: int, off_strings: int) -> list[int]:
    """``m`` U64 instant metrics ``m0``... (items 0...) over indom 1, their
    names in the first ``m`` strings at ``off_strings``; their offsets."""
    offsets = []
    for k in range(m):
        so = off_strings + 256 * k
        name = b"m%d" % k
        buf[so : so + len(name)] = name
        mo = off_metrics + 48 * k
        struct.pack_into("=QIiIIiIQQ", buf, mo, so, k, 3, 3, 0, 1, 0, 0, 0)
        offsets.append(mo)
    return offsets

"""A fetch reads the value records its metrics need, not the whole values
section, and answers what a file that shrank still holds."""

from __future__ import annotations

import os
import struct
from pathlib import Path

import pytest
import trio

from pmda_py.mmv.table import MmvTable
from pmda_py.testing.harness import open_table_pmda
from tests.mmv.v2file import put_head

STRING, U64 = 6, 3
SENTINEL = 0x4


def reversed_file(path: Path, vtype: int, flags: int = 0, cluster: int = 9) -> tuple[int, int]:
    """A v2 file: metric ``m`` of ``vtype`` over indom 1 (instances 0 and
    1) whose value records are for instance 1 then 0 (not the indom's
    order), the values section last; the offsets of its two records."""
    tocs = 5
    off_indoms = 40 + 16 * tocs
    off_insts = off_indoms + 32
    off_metrics = off_insts + 48
    off_strings = off_metrics + 48
    off_values = off_strings + 256 * 5
    buf = bytearray(off_values + 64)
    toc = [(1, 1, off_indoms), (2, 2, off_insts), (3, 1, off_metrics), (5, 5, off_strings), (4, 2, off_values)]
    put_head(buf, toc, cluster, flags)
    struct.pack_into("=IIQQQ", buf, off_indoms, 1, 2, off_insts, 0, 0)
    for k, text in enumerate((b"m", b"i0", b"i1", b"text of 1", b"text of 0")):
        buf[off_strings + 256 * k : off_strings + 256 * k + len(text)] = text
    for i in range(2):
        struct.pack_into("=QIiQ", buf, off_insts + 24 * i, off_indoms, 0, i, off_strings + 256 * (1 + i))
    struct.pack_into("=QIiIIiIQQ", buf, off_metrics, off_strings, 0, vtype, 3, 0, 1, 0, 0, 0)
    for slot, inst in enumerate((1, 0)):
        text_at = off_strings + 256 * (3 + slot)
        struct.pack_into("=QqQQ", buf, off_values + 32 * slot, 100 + inst, text_at, off_metrics, off_insts + 24 * inst)
    path.write_bytes(bytes(buf))
    return off_values, off_values + 32


@pytest.mark.parametrize(("vtype", "flags", "want"), [(STRING, 0, "text of 1"), (U64, SENTINEL, 101)])
async def test_a_file_cut_short_answers_the_values_it_still_holds(
    tmp_path: Path, vtype: int, flags: int, want: object
) -> None:
    """The record of instance 0 (second in the file, first in the indom's
    order) cut off: instance 1's value is answered (a STRING or SENTINEL
    metric raised IndexError, which failed the whole table's fetch: the
    records kept and the instances kept were counted differently)."""
    d = tmp_path / "mmv"
    d.mkdir()
    _first, second = reversed_file(d / "app", vtype, flags)
    async with open_table_pmda(MmvTable(dir=str(d), compat="1", sweep="600"), mount="mmv", domain=70) as pmda:
        both = await pmda.fetch_values(["mmv.app.m"])
        assert len(both["mmv.app.m"]) == 2, both
        os.truncate(d / "app", second + 16)  # half of instance 0's record
        with trio.fail_after(10):
            got = (await pmda.fetch_values(["mmv.app.m"]))["mmv.app.m"]
    assert got == {1: want}, got


async def test_a_fetch_reads_the_records_it_needs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A metric whose two value records open a 48 MiB values section (a
    sparse tail of records naming nothing): a fetch reads a few KiB, not
    the section (48 MiB a fetch, where pmdammv touches a page)."""
    d = tmp_path / "mmv"
    d.mkdir()
    reversed_file(d / "app", U64)
    path = d / "app"
    data = bytearray(path.read_bytes())
    off_values = struct.unpack_from("=IIQ", data, 40 + 16 * 4)[2]
    struct.pack_into("=IIQ", data, 40 + 16 * 4, 4, 3 << 19, off_values)  # 1.5 million records
    path.write_bytes(bytes(data))
    os.truncate(path, off_values + 32 * (3 << 19))
    reads: list[int] = []
    real = os.pread

    def pread(fd: int, size: int, off: int) -> bytes:
        reads.append(size)
        return real(fd, size, off)

    async with open_table_pmda(MmvTable(dir=str(d), compat="1"), mount="mmv", domain=70) as pmda:
        monkeypatch.setattr(os, "pread", pread)
        got = await pmda.fetch_values(["mmv.app.m"])
        monkeypatch.undo()
    assert got == {"mmv.app.m": {0: 100, 1: 101}}, got
    assert 0 < sum(reads) < 64 << 10, sum(reads)


def test_runs_of_records_are_merged_when_close() -> None:
    """Runs under 128 records (4 KiB) apart are one read; overlapping ones
    one run; far ones apart; a metric's strided records are one run, in
    any number (a set of every record made a fetch of 160 000 values spend
    50 ms sorting them)."""
    from pmda_py.mmv.model import slot_runs

    assert slot_runs([(5, 1), (3, 1), (300, 2), (200, 1)]) == [(3, 3), (200, 102)]
    assert slot_runs([(0, 10), (4, 2), (500, 1)]) == [(0, 10), (500, 1)]
    assert slot_runs((k * 10_000, 10_000) for k in range(16)) == [(0, 160_000)]
    assert slot_runs([]) == []

"""A file with a great many bad or idle records costs a bounded number of
noted problems and log lines (the first few are named, the others counted:
each was kept and logged, 100 000 bad value records made 100 000 log lines
at every scan that found the file changed), and value records naming no
metric cost no object."""

from __future__ import annotations

import os
import struct
import tracemalloc
from pathlib import Path

from structlog.testing import capture_logs

from pmda_py.mmv.layout import MAX_DIAGNOSTICS
from pmda_py.mmv.reader import MmvFile
from pmda_py.mmv.table import MmvTable
from pmda_py.testing.harness import open_table_pmda
from tests.mmv.v2file import put_head


def bad_file(path: Path, bad_values: int, bad_metrics: int = 0, cluster: int = 9) -> None:
    """A v2 file: metric ``m0`` over indom 1 (instance 0), ``bad_values``
    value records for it whose instance offset is past the end, and
    ``bad_metrics`` metric records with a name pmdammv refuses, in sections
    of 1 000."""
    sections = -(-bad_metrics // 1000)
    tocs = 5 + sections
    off_indoms = 40 + 16 * tocs
    off_insts = off_indoms + 32
    off_metrics = off_insts + 24
    off_bad = off_metrics + 48
    off_values = off_bad + 48 * bad_metrics
    off_strings = off_values + 32 * (bad_values + 1)
    buf = bytearray(off_strings + 3 * 256)
    toc = [
        (1, 1, off_indoms),
        (2, 1, off_insts),
        (3, 1, off_metrics),
        (4, bad_values + 1, off_values),
        (5, 3, off_strings),
    ]
    for k in range(sections):
        toc.append((3, min(1000, bad_metrics - 1000 * k), off_bad + 48 * 1000 * k))
    put_head(buf, toc, cluster)
    struct.pack_into("=IIQQQ", buf, off_indoms, 1, 1, off_insts, 0, 0)
    buf[off_strings : off_strings + 2] = b"m0"
    buf[off_strings + 256 : off_strings + 258] = b"i0"
    buf[off_strings + 512 : off_strings + 516] = b"b-ad"  # not a name PCP takes
    struct.pack_into("=QIiQ", buf, off_insts, off_indoms, 0, 0, off_strings + 256)
    struct.pack_into("=QIiIIiIQQ", buf, off_metrics, off_strings, 0, 3, 3, 0, 1, 0, 0, 0)
    for k in range(bad_metrics):
        struct.pack_into("=QIiIIiIQQ", buf, off_bad + 48 * k, off_strings + 512, 1 + k % 1000, 3, 3, 0, 0, 0, 0, 0)
    struct.pack_into("=QqQQ", buf, off_values, 42, 0, off_metrics, off_insts)
    for k in range(1, bad_values + 1):
        struct.pack_into("=QqQQ", buf, off_values + 32 * k, k, 0, off_metrics, 1 << 40)
    path.write_bytes(bytes(buf))


def test_a_parse_names_the_first_problems_and_counts_the_others(tmp_path: Path) -> None:
    bad_file(tmp_path / "f", 5000)
    mf = MmvFile.from_buffer((tmp_path / "f").read_bytes())
    named = [d for d in mf.diagnostics if "instance offset" in d.reason]
    assert len(named) == MAX_DIAGNOSTICS, mf.diagnostics
    assert mf.diagnostics[-1].reason == f"{5000 - MAX_DIAGNOSTICS} more problems (only the first 64 are named)"
    assert len(mf.diagnostics) == MAX_DIAGNOSTICS + 1


async def test_a_file_of_bad_records_costs_a_few_log_lines(tmp_path: Path) -> None:
    d = tmp_path / "mmv"
    d.mkdir()
    bad_file(d / "app", 20_000, bad_metrics=3000)
    table = MmvTable(dir=str(d), compat="1")
    with capture_logs() as logs:
        async with open_table_pmda(table, mount="mmv", domain=70) as pmda:
            assert list(await pmda.traverse("mmv.app")) == ["mmv.app.m0"]
            assert await pmda.fetch_values(["mmv.app.m0"]) == {"mmv.app.m0": {0: 42}}
    problems = [e for e in logs if e["event"] == "mmv_problem" and e["file"] == "app"]
    more = [e for e in logs if e["event"] == "mmv_problems_not_logged" and e["file"] == "app"]
    assert len(problems) == table.LOGGED_PROBLEMS, len(problems)
    # named: the parse's 64 and its count, the build's 64 refused metrics and their count
    assert len(more) == 1 and more[0]["more"] == 2 * (MAX_DIAGNOSTICS + 1) - table.LOGGED_PROBLEMS, more
    st = table.last_scan
    assert st is not None and len([x for x in st.export.diagnostics if x[0] == "app"]) == 2 * (MAX_DIAGNOSTICS + 1)


def _sparse_values_file(path: Path, v: int, cluster: int = 9) -> None:
    """A v2 file: metric ``m0`` over indom 1 (instance 0) with value 7 in
    the first of ``v`` value records; the others are zeros (in a sparse
    tail), naming no metric."""
    tocs = 5
    off_indoms = 40 + 16 * tocs
    off_insts = off_indoms + 32
    off_metrics = off_insts + 24
    off_strings = off_metrics + 48
    off_values = off_strings + 512
    buf = bytearray(off_values + 32)
    toc = [(1, 1, off_indoms), (2, 1, off_insts), (3, 1, off_metrics), (4, v, off_values), (5, 2, off_strings)]
    put_head(buf, toc, cluster)
    struct.pack_into("=IIQQQ", buf, off_indoms, 1, 1, off_insts, 0, 0)
    buf[off_strings : off_strings + 2] = b"m0"
    buf[off_strings + 256 : off_strings + 258] = b"i0"
    struct.pack_into("=QIiQ", buf, off_insts, off_indoms, 0, 0, off_strings + 256)
    struct.pack_into("=QIiIIiIQQ", buf, off_metrics, off_strings, 0, 3, 3, 0, 1, 0, 0, 0)
    struct.pack_into("=QqQQ", buf, off_values, 7, 0, off_metrics, off_insts)
    path.write_bytes(bytes(buf))
    os.truncate(path, off_values + 32 * v)


def test_value_records_naming_no_metric_cost_no_record(tmp_path: Path) -> None:
    """A values section of 200 000 records of which one names a metric: the
    parse keeps that one, without an object per record (it kept them all:
    at 2 million, 64 MiB of zeros, 2 s and 270 MB of scan a file)."""
    _sparse_values_file(tmp_path / "f", 200_000)
    data = (tmp_path / "f").read_bytes()
    tracemalloc.start()
    try:
        mf = MmvFile.from_buffer(data)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert [(v.metric, v.instance) for v in mf.values] == [(mf.metrics[0].offset, 0)], mf.values[:3]
    assert mf.values_count == 200_000
    assert peak < 2 << 20, f"{peak} bytes allocated to parse a values section naming one metric"


async def test_a_sparse_values_section_is_served(tmp_path: Path) -> None:
    d = tmp_path / "mmv"
    d.mkdir()
    _sparse_values_file(d / "app", 200_000)
    async with open_table_pmda(MmvTable(dir=str(d), compat="1"), mount="mmv", domain=70) as pmda:
        assert await pmda.fetch_values(["mmv.app.m0"]) == {"mmv.app.m0": {0: 7}}


async def test_a_fetch_holds_one_values_section_at_a_time(tmp_path: Path) -> None:
    """Metrics of four files, each with an 8 MiB values section: a fetch
    reads one file's section, takes its metrics' values, and lets it go
    before the next (it held every file's to the end of the fetch)."""
    d = tmp_path / "mmv"
    d.mkdir()
    v = 1 << 18  # records: 8 MiB
    for k in range(4):
        _sparse_values_file(d / f"f{k}", v, cluster=20 + k)
    async with open_table_pmda(MmvTable(dir=str(d), compat="1"), mount="mmv", domain=70) as pmda:
        names = [f"mmv.f{k}.m0" for k in range(4)]
        await pmda.fetch_values(names)
        tracemalloc.start()
        try:
            got = await pmda.fetch_values(names)
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
    assert got == {name: {0: 7} for name in names}, got
    assert peak < 32 * v + (4 << 20), f"{peak} bytes allocated to fetch from four {32 * v}-byte values sections"


def test_a_scan_holds_one_file_s_sections_at_a_time(tmp_path: Path) -> None:
    """Four files with an 8 MiB values section each: a scan keeps of each
    only what building the export reads (its help texts), not its sections
    (it kept every file's until the scan's end)."""
    d = tmp_path / "mmv"
    d.mkdir()
    v = 1 << 18  # records: 8 MiB
    for k in range(4):
        _sparse_values_file(d / f"f{k}", v, cluster=20 + k)
    table = MmvTable(dir=str(d), compat="1")
    tracemalloc.start()
    try:
        table._apply(table._scan_state())
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert sorted(m.name for m in table.metrics() if ".m0" in m.name) == [f"f{k}.m0" for k in range(4)]
    assert peak < 32 * v + (4 << 20), f"{peak} bytes allocated to scan four {32 * v}-byte values sections"

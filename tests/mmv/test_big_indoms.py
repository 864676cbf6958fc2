"""A file whose indom is large and whose metrics have few values each, not
in the indom's order: scanning and fetching cost each metric its own
values, not the indom's size (each metric walked the whole indom, at the
scan and at every fetch: 100 metrics over 100 000 instances cost a quarter
of a second a fetch, 1 023 over 250 000 past pmcd's timeout)."""

from __future__ import annotations

import struct
import sys
import threading
import tracemalloc
from pathlib import Path
from types import FrameType
from typing import Any, Callable, Optional

import trio

from pmda_py.mmv.table import MmvTable
from pmda_py.testing.harness import open_table_pmda
from tests.mmv.v2file import put_head, put_u64_metrics

N = 40_000  #: instances
M = 40  #: metrics


def big_indom_file(path: Path, n: int, m: int, labels: int = 0, cluster: int = 9) -> None:
    """A v2 file: indom 1 of ``n`` instances and ``m`` U64 metrics over it,
    each with values for instances 1 and 0 (10k + 1, 10k), in that order
    (not the indom's); ``labels`` instance label records, for instances 0,
    1, ..."""
    tocs = 6 if labels else 5
    off_indoms = 40 + 16 * tocs
    off_insts = off_indoms + 32
    off_metrics = off_insts + 24 * n
    off_values = off_metrics + 48 * m
    off_labels = off_values + 32 * 2 * m
    off_strings = off_labels + 256 * labels
    buf = bytearray(off_strings + 256 * (m + n))
    toc = [(1, 1, off_indoms), (2, n, off_insts), (3, m, off_metrics), (4, 2 * m, off_values), (5, m + n, off_strings)]
    if labels:
        toc.append((6, labels, off_labels))
    put_head(buf, toc, cluster)
    struct.pack_into("=IIQQQ", buf, off_indoms, 1, n, off_insts, 0, 0)
    for i in range(n):
        so = off_strings + 256 * (m + i)
        name = b"i%d" % i
        buf[so : so + len(name)] = name
        struct.pack_into("=QIiQ", buf, off_insts + 24 * i, off_indoms, 0, i, so)
    for k, mo in enumerate(put_u64_metrics(buf, m, off_metrics, off_strings)):
        for j, inst in enumerate((1, 0)):
            struct.pack_into("=QqQQ", buf, off_values + 32 * (2 * k + j), 10 * k + inst, 0, mo, off_insts + 24 * inst)
    for k in range(labels):
        struct.pack_into("=IIi244s", buf, off_labels + 256 * k, 0x20, 1, k, b'{"k%d":%d}' % (k, k))
    path.write_bytes(bytes(buf))


_Tracer = Callable[[FrameType, str, Any], Optional["_Tracer"]]


def _line_counter(suffix: str) -> tuple[list[int], _Tracer]:
    """A trace function counting the lines run in files ending in ``suffix``
    (comprehensions included: each step of their loop is a line event)."""
    count = [0]

    def local(frame: FrameType, event: str, arg: Any) -> _Tracer:
        if event == "line":
            count[0] += 1
        return local

    def tracer(frame: FrameType, event: str, arg: Any) -> _Tracer | None:
        return local if frame.f_code.co_filename.endswith(suffix) else None

    return count, tracer


async def test_a_scan_walks_a_big_indom_once(tmp_path: Path) -> None:
    d = tmp_path / "mmv"
    d.mkdir()
    big_indom_file(d / "app", N, M)
    count, tracer = _line_counter("mmv/table/state.py")
    threading.settrace(tracer)  # the scanner's thread
    sys.settrace(tracer)  # a scan made inline
    try:
        async with open_table_pmda(MmvTable(dir=str(d), compat="1"), mount="mmv", domain=70) as pmda:
            names = list(await pmda.traverse("mmv.app"))
    finally:
        sys.settrace(None)
        threading.settrace(None)  # type: ignore[arg-type,unused-ignore]
    assert len(names) == M
    # the indom's index once (two lines an instance), then a few lines a metric
    assert 0 < count[0] < 3 * N + 200 * M, count[0]


async def test_a_fetch_costs_the_values_not_the_indom(tmp_path: Path) -> None:
    d = tmp_path / "mmv"
    d.mkdir()
    big_indom_file(d / "app", N, M)
    async with open_table_pmda(MmvTable(dir=str(d), compat="1"), mount="mmv", domain=70) as pmda:
        names = list(await pmda.traverse("mmv.app"))
        await pmda.fetch_values(names)
        tracemalloc.start()
        try:
            with trio.fail_after(30):
                got = await pmda.fetch_values(names)
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
    assert got == {f"mmv.app.m{k}": {0: 10 * k, 1: 10 * k + 1} for k in range(M)}, got
    # a list of the indom's ids is 8 bytes an instance (and the pmda's own
    # fetch of 80 values about 100 KB)
    assert peak < 5 * N, f"{peak} bytes allocated for a fetch of {2 * M} values"


async def test_instance_labels_cost_the_instances_they_name(tmp_path: Path) -> None:
    """255 instance label records (the most a file may have): the scan looks
    records up for the instances they name, not for every instance (it
    searched all 255 records per instance: 0.7 s at 20 000 instances, in the
    scanner's thread, every rescan); the labelled instances keep them."""
    d = tmp_path / "mmv"
    d.mkdir()
    n = 10_000
    big_indom_file(d / "app", n, 1, labels=255)
    count, tracer = _line_counter("mmv/model.py")
    threading.settrace(tracer)
    sys.settrace(tracer)
    try:
        table = MmvTable(dir=str(d), compat="1")
        async with open_table_pmda(table, mount="mmv", domain=70) as pmda:
            assert list(await pmda.traverse("mmv.app")) == ["mmv.app.m0"]
    finally:
        sys.settrace(None)
        threading.settrace(None)  # type: ignore[arg-type,unused-ignore]
    assert 0 < count[0] < 30 * n, count[0]
    st = table.last_scan
    assert st is not None
    (ind,) = st.export.indoms.values()
    assert sorted(ind.instance_labels) == list(range(255)), sorted(ind.instance_labels)
    assert ind.instance_labels[7].json == b'{"k7":7}', ind.instance_labels[7]


def test_an_owner_s_files_have_a_bounded_number_of_instances(tmp_path: Path, monkeypatch: Any) -> None:
    """The instance entries a scan keeps for one owner's files are bounded
    (MAX_OWNER_INSTANCES; each costs about 160 bytes for as long as the
    file is there: a sparse instance section of a million records kept
    160 MB): the file
    that would pass it is skipped, logged; the owner's others are served,
    and another owner's files are not affected."""
    import os

    from pmda_py.mmv import layout

    monkeypatch.setattr(layout, "MAX_OWNER_INSTANCES", 1000)
    d = tmp_path / "mmv"
    d.mkdir()
    big_indom_file(d / "a", 600, 1, cluster=11)
    big_indom_file(d / "b", 600, 1, cluster=12)
    other = os.geteuid() == 0  # (only root can give a file to another user)
    if other:
        big_indom_file(d / "c", 600, 1, cluster=13)
        os.chown(d / "c", 12345, 12345)
    table = MmvTable(dir=str(d), compat="1")
    table._apply(table._scan_state())
    assert set(table.export.clusters) == ({"a", "c"} if other else {"a"}), table.export.clusters
    why = [dg.reason for f, dg in table.export.diagnostics if f == "b"]
    assert why == ["its owner's files name more than 1000 instances in all: file skipped"], why
    (d / "a").unlink()
    table._apply(table._scan_state())
    assert "b" in table.export.clusters, table.export.clusters

"""The OpenMetrics table's worker processes: the same answers as scraping
in the daemon (``workers=0``), and a worker that dies or hangs is logged and
replaced, its source marked failed meanwhile, the other sources unaffected."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import stat
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import structlog
import trio

from pmda_py.openmetrics import NameTable
from pmda_py.openmetrics.exposition import Limits
from pmda_py.openmetrics.pool import WORKER_START_TIMEOUT, WorkerPool
from pmda_py.openmetrics.scheduler import BUSY_SHARE, should_grow
from pmda_py.openmetrics.scrape import Scraper
from pmda_py.openmetrics.table import OpenMetricsTable
from tests.openmetrics.servers import ControlledServer, Route
from tests.openmetrics.test_table import GOOD, OM_CONTEXT, fetch, make_table, write_sources

#: how long a wait for the workers may take before the test calls it a hang (a
#: worker's start counts as hung only after WORKER_START_TIMEOUT)
HANG = WORKER_START_TIMEOUT + 10

#: documents with what the digest has to carry: instances, prefix-mode and
#: verbatim instance names, PCP5 metadata, help, optional labels, strings,
#: hostile labels, a bad value, a malformed line
CORPUS = {
    "good": GOOD,
    "pcp": (
        b"# PCP5 pcp.disk.read 60.0.1 u64 60.1 counter Kbyte\n"
        b'disk_read{instname="sda"} 10\ndisk_read{instname="sdb"} 20\n'
        b"# PCP ctx.switches counter count / sec\nctx_switches 99\n"
        b"# PCP5 null.labelled 1.2.3 u32 PM_INDOM_NULL discrete none\n"
        b'nullm{site="x"} 5\n'
        b"# PCP5 some.text 1.2.4 string PM_INDOM_NULL instant none\nsome_text hello\n"
    ),
    "help": (
        b"# HELP edge_total A counter.\\nWith a second help line.\n# TYPE edge_total counter\n"
        b'edge_total{kind="a",path="/x"} 5 1395066363000\nedge_total{kind="b",path="/y",} 6\n'
        b"edge:colon:name 4\n"
        b'escaped{v="back\\\\slash and \\"quote\\" and \\t tab"} 1\n'
    ),
    "hostile": (
        b'q{name_with"quote="1",ok="new\\nline \\"q\\""} 1\nw{'
        + ",".join(f'l{k}="v"' for k in range(100)).encode()
        + b"} 2\nbadval nope\n"
    ),
    "malformed": b"ok_one 1\nbad{x=1} 2\nnot_seen 3\n",
    "opt": b'req_total{code="200",pod="p1"} 7\nreq_total{code="500",pod="p1"} 8\n',
}
#: per-source config lines (FILTER, METADATA)
EXTRA = {
    "opt": "FILTER: OPTIONAL LABEL pod\nMETADATA: req_total u64 instance counter count\n",
}

_L_INDOM, _L_CLUSTER, _L_ITEM, _L_INSTANCES = 0x04, 0x08, 0x10, 0x20


async def snapshot(table: OpenMetricsTable, tmp: Path) -> dict[str, Any]:
    """Everything a client can see of the table but the control counters
    (the run's directory in labels and texts made ``TMP``)."""
    out: dict[str, Any] = {}
    metrics = [m for m in table.metrics() if not m.name.startswith("control.")]
    values = await fetch(table, *(m.name for m in metrics))
    for m in metrics:
        entry: dict[str, Any] = {
            "pmid": (m.cluster, m.item),
            "desc": (m.type, m.sem, m.units, m.oneline, m.help),
            "value": values[m.name],
            "cluster_labels": table.label_items(_L_CLUSTER, m.cluster),
            "item_labels": table.label_items(_L_ITEM, m),
        }
        if m.indom is not None:
            entry["indom"] = (m.indom.serial, dict(m.indom.instances))
            entry["indom_labels"] = table.label_items(_L_INDOM, m.indom)
            entry["inst_labels"] = {i: table.label_items(_L_INSTANCES, (m.indom, i)) for i in m.indom.instances}
        out[m.name] = entry
    status = (await fetch(table, "control.status"))["control.status"]
    out["status"] = {k: v for k, v in status.items() if k}
    return json.loads(json.dumps(out, default=repr).replace(str(tmp), "TMP"))  # type: ignore[no-any-return]


async def run_corpus(tmp: Path, server: ControlledServer, workers: str) -> tuple[dict[str, Any], dict[str, Any]]:
    urls = {name: server.url(name) + "\n" + EXTRA.get(name, "") for name in CORPUS}
    write_sources(tmp / "config.d", urls)
    doc = tmp / "doc.prom"
    doc.write_text("from_file 1\nfile_gauge 2.5\n")
    (tmp / "config.d" / "f.url").write_text(f"file://{doc}\n")
    script = tmp / "config.d" / "script"
    script.write_text("#!/bin/sh\necho '# PCP5 my.metric 1.2.3 u64 PM_INDOM_NULL counter byte'\necho 'mm 42'\n")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    table = make_table(tmp, interval="60", workers=workers)
    await table.startup(OM_CONTEXT)
    await table.wait_ready()
    await table.sync_state()
    snap = await snapshot(table, tmp)
    await table.shutdown()
    await trio.sleep(0.2)
    files = {p.name: NameTable.loads(p.read_bytes(), 0x7FFFFFFF) for p in (tmp / "state").iterdir()}
    return snap, {k: (v.names, v.prefix_mode) for k, v in files.items()}


async def test_workers_answer_as_in_process(tmp_path: Path) -> None:
    with ControlledServer() as server:
        for name, body in CORPUS.items():
            server.routes[name] = Route(body)
        here, here_files = await run_corpus(tmp_path / "inproc", server, "0")
        there, there_files = await run_corpus(tmp_path / "workers", server, "2")
    # the corpus has substance
    assert here["good.up_total"]["value"] == {"0": 1.0, "1": 2.0}
    assert here["pcp.pcp.disk.read"]["indom"][1] == {"0": "sda", "1": "sdb"}
    assert here["pcp.some.text"]["value"] == "hello"
    assert here["opt.req_total"]["value"] == {"0": 7, "1": 8}
    assert here["script.my.metric"]["value"] == 42 and here["f.file_gauge"]["value"] == 2.5
    assert "hostile.w" not in here and "malformed.not_seen" not in here
    assert len(here_files) > 10
    assert there == here
    assert there_files == here_files


def _worker_pid(table: OpenMetricsTable, cluster: int) -> int:
    assert table._pool is not None
    w = table._pool.workers[cluster % table._pool.size]
    assert w is not None
    return int(w.proc.pid)


async def _status(table: OpenMetricsTable) -> dict[str, Any]:
    names = {v: k for k, v in table.c_sources.instances.items()}
    st = (await fetch(table, "control.status"))["control.status"]
    return {n: st[names[n]] for n in names}


async def _wait_status(table: OpenMetricsTable, name: str, text: str) -> str:
    while True:
        st = (await _status(table))[name]
        if text in st:
            return str(st)
        await trio.sleep(0.05)


@pytest.mark.slow
async def test_dead_worker_is_replaced(tmp_path: Path) -> None:
    with ControlledServer() as server:
        server.routes["a"] = Route(GOOD, delay=1.0)  # a scrape in flight when its worker dies
        server.routes["b"] = Route(GOOD)
        write_sources(tmp_path / "config.d", {k: server.url(k) + "\n" for k in ("a", "b")})
        table = make_table(tmp_path, interval="0.3", timeout="5", workers="2")
        with structlog.testing.capture_logs() as logs:
            await table.startup(OM_CONTEXT)
            await table.wait_ready()
            a, b = table.sources["a"], table.sources["b"]
            assert a.cluster % 2 != b.cluster % 2  # on different workers
            assert table._pool is not None and table._pool.started == 2
            hits = server.routes["a"].hits
            with trio.fail_after(HANG):
                while server.routes["a"].hits == hits:  # noqa: ASYNC110
                    await trio.sleep(0.02)
            b_calls = b.calls
            os.kill(_worker_pid(table, a.cluster), signal.SIGKILL)
            with trio.fail_after(HANG):
                failed = await _wait_status(table, "a", "worker process")
                assert "exited" in failed
                await _wait_status(table, "a", "success")  # a new worker took over
                while b.calls < b_calls + 3:  # noqa: ASYNC110
                    await trio.sleep(0.05)
            assert (await _status(table))["b"] == "success"
            assert table._pool.started == 3
            values = await fetch(table, "a.up_total", "b.up_total")
            assert values == {"a.up_total": {0: 1.0, 1: 2.0}, "b.up_total": {0: 1.0, 1: 2.0}}
            await table.shutdown()
    died = [e for e in logs if e["event"] == "openmetrics_worker_died"]
    assert len(died) == 1 and died[0]["returncode"] == -signal.SIGKILL
    failed_logs = [e for e in logs if e["event"] == "openmetrics_source_failed"]
    assert [e["source"] for e in failed_logs] == ["a"]


#: a worker that says it is up, then starts a frame of 4 GiB and keeps sending
ENDLESS_FRAME = """
import os, time
from pmda_py.openmetrics.records import Answer, Reply, encode_answer
os.write(1, encode_answer(Answer(0, Reply("ok"))))
os.write(1, b"\\xff\\xff\\xff\\xff")
for _ in range(600):
    try:
        os.write(1, b"x" * 65536)
    except OSError:
        break
    time.sleep(0.01)
"""


@pytest.mark.slow
async def test_a_worker_sending_a_frame_over_the_limit_is_killed_at_its_length(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The daemon reads a frame's length before its body: one over the bound
    # of what a worker may send marks the worker broken at once, and nothing
    # of the body is buffered (a broken worker cannot grow the daemon).
    fake = tmp_path / "fake-python"
    fake.write_text(f"#!{sys.executable}\n{ENDLESS_FRAME}")
    fake.chmod(0o755)
    with ControlledServer() as server:
        server.routes["a"] = Route(GOOD)
        write_sources(tmp_path / "config.d", {"a": server.url("a") + "\n"})
        table = make_table(tmp_path, interval="0.3", timeout="5", workers="1")
        monkeypatch.setattr(sys, "executable", str(fake))  # what the pool starts its workers with
        with structlog.testing.capture_logs() as logs:
            await table.startup(OM_CONTEXT)
            with trio.fail_after(HANG):
                while not any(e["event"] == "openmetrics_worker_died" for e in logs):  # noqa: ASYNC110
                    await trio.sleep(0.05)
            monkeypatch.undo()
            await table.shutdown()
    died = [e for e in logs if e["event"] == "openmetrics_worker_died"]
    assert "a frame of 4294967295 bytes, over the limit" in died[0]["why"], died[0]
    assert died[0]["returncode"] == -signal.SIGKILL


@pytest.mark.slow
async def test_hung_worker_is_killed_and_replaced(tmp_path: Path) -> None:
    with ControlledServer() as server:
        server.routes["a"] = Route(GOOD)
        server.routes["b"] = Route(GOOD)
        write_sources(tmp_path / "config.d", {k: server.url(k) + "\n" for k in ("a", "b")})
        table = make_table(tmp_path, interval="0.3", timeout="0.5", worker_grace="0.5", workers="2")
        with structlog.testing.capture_logs() as logs:
            await table.startup(OM_CONTEXT)
            await table.wait_ready()
            a, b = table.sources["a"], table.sources["b"]
            assert table._pool is not None
            pid = _worker_pid(table, a.cluster)
            os.kill(pid, signal.SIGSTOP)  # alive, and never answering
            try:
                with trio.fail_after(HANG):
                    failed = await _wait_status(table, "a", "worker process")
                    assert "no answer in 1 s" in failed
                    b_calls = b.calls
                    await _wait_status(table, "a", "success")
                    while b.calls < b_calls + 3:  # noqa: ASYNC110
                        await trio.sleep(0.05)
            finally:
                with contextlib.suppress(ProcessLookupError):  # (killed already if the table did its job)
                    os.kill(pid, signal.SIGCONT)
            assert (await _status(table))["b"] == "success"
            assert _worker_pid(table, a.cluster) != pid and table._pool.started == 3
            await table.shutdown()
    hung = [e for e in logs if e["event"] == "openmetrics_worker_hung"]
    assert len(hung) == 1 and hung[0]["pid"] == pid
    assert [e["source"] for e in logs if e["event"] == "openmetrics_source_failed"] == ["a"], "\n".join(
        str(e) for e in logs
    )


async def test_http_set_up_is_not_a_scrapes_time(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The HTTP side's one-time set-up (imports, the TLS context: ~0.1 s of
    CPU, over a second for a niced worker on a busy host) is done before a
    scrape's deadline starts (a worker does it before it says it is up):
    it made the first scrape of every source time out under load."""
    import ssl

    real = ssl.create_default_context

    def slow(*args: Any, **kw: Any) -> ssl.SSLContext:
        time.sleep(0.6)  # (what a busy host makes of it)
        return real(*args, **kw)

    monkeypatch.setattr(ssl, "create_default_context", slow)
    with ControlledServer() as server:
        server.routes["a"] = Route(GOOD)
        (tmp_path / "a.url").write_text(server.url("a") + "\n")
        scraper = Scraper(str(tmp_path), 144, Limits(), timeout=0.3)
        try:
            reply = await scraper.scrape("a", 1, str(tmp_path / "a.url"), False)
        finally:
            await scraper.aclose()
    assert reply.outcome == "ok", reply.status


async def test_ids_survive_a_worker_restart(tmp_path: Path) -> None:
    """A replacement worker reads the name tables its predecessor saved:
    a metric keeps its item, an instance its number."""
    with ControlledServer() as server:
        server.routes["c"] = Route(b'a 1\nb{x="1"} 2\n')
        write_sources(tmp_path / "config.d", {"c": server.url("c") + "\n"})
        table = make_table(tmp_path, interval="0.2", workers="1")
        await table.startup(OM_CONTEXT)
        await table.wait_ready()
        before = {m.name: (m.item, dict(m.indom.instances) if m.indom else None) for m in table.metrics()}
        await table.sync_state()
        assert table._pool is not None
        os.kill(_worker_pid(table, 1), signal.SIGKILL)
        server.routes["c"].body = b'b{x="2"} 3\nb{x="1"} 4\nnew_one 5\na 6\n'  # new names, in another order
        with trio.fail_after(HANG):
            while "c.new_one" not in {m.name for m in table.metrics()}:  # noqa: ASYNC110
                await trio.sleep(0.05)
        after = {m.name: (m.item, dict(m.indom.instances) if m.indom else None) for m in table.metrics()}
        assert after["c.a"] == before["c.a"] and after["c.b"][0] == before["c.b"][0]
        assert after["c.b"][1] == {0: "0 x:1", 1: "1 x:2"}
        assert (await fetch(table, "c.b"))["c.b"] == {0: 4.0, 1: 3.0}
        await table.shutdown()


async def test_workers_follow_the_daemon_user(tmp_path: Path) -> None:
    """A worker started before the daemon dropped its privileges is retired
    (it ends once its scrapes in flight are answered) and replaced by one
    running as the daemon's user now."""
    with ControlledServer() as server:
        server.routes["a"] = Route(GOOD)
        write_sources(tmp_path / "config.d", {"a": server.url("a") + "\n"})
        table = make_table(tmp_path, interval="0.2", workers="1")
        with structlog.testing.capture_logs() as logs:
            await table.startup(OM_CONTEXT)
            await table.wait_ready()
            pool = table._pool
            assert pool is not None and pool.started == 1
            old = pool.workers[0]
            assert old is not None and old.uid == os.geteuid()
            pool._uid = lambda: old.uid + 1  # type: ignore[method-assign]  # as after setuid()
            calls = table.sources["a"].calls
            with trio.fail_after(HANG):
                while table.sources["a"].calls < calls + 3:  # noqa: ASYNC110
                    await trio.sleep(0.05)
                await old.proc.wait()  # ended of itself (EOF), not killed
            assert old.proc.returncode == 0
            new = pool.workers[0]
            assert pool.started == 2 and new is not None and new.uid == old.uid + 1
            assert (await _status(table))["a"] == "success"
            await table.shutdown()
    assert not [e for e in logs if e["event"].startswith("openmetrics_worker_") or e["event"].endswith("_failed")]


def test_the_protocol_bench_runs() -> None:
    """bench/openmetrics_digest.py keeps working (its figures are not checked)."""
    import subprocess
    import sys

    bench = Path(__file__).resolve().parents[2] / "bench" / "openmetrics_digest.py"
    proc = subprocess.run(
        [sys.executable, str(bench), "--metrics", "25", "--rounds", "3"], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = proc.stdout.splitlines()
    assert [line.split()[:2] for line in lines] == [["new", "metadata"], ["values", "only"]], proc.stdout
    assert all("read_swap_us=" in line and "frame_bytes=" in line for line in lines), proc.stdout


async def test_a_grown_pool_moves_sources_with_their_ids(tmp_path: Path) -> None:
    """One worker, up to two; when the pool grows, the sources the new
    worker takes over keep their numbers: the worker they leave saves
    its tables first (it saves them late, in batches, so the new one
    would otherwise read none of the numbers given since the start)."""
    with ControlledServer() as server:
        docs = {"a": b'a 1\nb{x="1"} 2\n', "b": b'c{y="1"} 1\nd 2\n'}
        for name, body in docs.items():
            server.routes[name] = Route(body)
        write_sources(tmp_path / "config.d", {name: server.url(name) + "\n" for name in docs})
        table = make_table(tmp_path, interval="1", workers="1", max_workers="2")  # (rounds within it: no growth)
        await table.startup(OM_CONTEXT)
        await table.wait_ready()
        pool = table._pool
        assert pool is not None and (pool.size, pool.limit) == (1, 2)
        before = {m.name: (m.item, dict(m.indom.instances) if m.indom else None) for m in table.metrics()}
        assert pool.grow() and not pool.grow()  # (at the limit)
        server.routes["a"].body = b'b{x="2"} 3\nb{x="1"} 4\nnew_a 5\na 6\n'  # new names, in another order
        server.routes["b"].body = b'new_b 7\nc{y="2"} 8\nd 9\nc{y="1"} 10\n'
        with trio.fail_after(HANG):
            while not {"a.new_a", "b.new_b"} <= {m.name for m in table.metrics()}:  # noqa: ASYNC110
                await trio.sleep(0.05)
        after = {m.name: (m.item, dict(m.indom.instances) if m.indom else None) for m in table.metrics()}
        assert sorted(pool.home.values()) == [0, 1] and pool.started == 2  # (one of them moved)
        for name in ("a.a", "b.d"):
            assert after[name] == before[name]
        assert after["a.b"][0] == before["a.b"][0] and after["a.b"][1] == {0: "0 x:1", 1: "1 x:2"}
        assert after["b.c"][0] == before["b.c"][0] and after["b.c"][1] == {0: "0 y:1", 1: "1 y:2"}
        assert (await fetch(table, "a.b", "b.c")) == {"a.b": {0: 4.0, 1: 3.0}, "b.c": {0: 10.0, 1: 8.0}}
        await table.shutdown()


@contextlib.asynccontextmanager
async def _slow_source_table(tmp_path: Path) -> AsyncIterator[OpenMetricsTable]:
    """A table started and ready, scraping one source slower than its
    interval (0.4 s against 0.2), up to two workers (the test shuts it down)."""
    with ControlledServer() as server:
        server.routes["a"] = Route(GOOD, delay=0.4)
        write_sources(tmp_path / "config.d", {"a": server.url("a") + "\n"})
        table = make_table(tmp_path, interval="0.2", max_workers="2")
        await table.startup(OM_CONTEXT)
        await table.wait_ready()
        yield table


async def test_a_round_that_overruns_adds_a_busy_worker(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A round slower than the interval while the daemon (scraping with no
    worker), then the workers, were busy adds a worker (here: a source
    slower than the interval, the CPU share said to be all of it)."""
    monkeypatch.setattr(WorkerPool, "busy_share", lambda self: 1.0)
    monkeypatch.setattr(OpenMetricsTable, "_own_share", lambda self: 1.0)
    async with _slow_source_table(tmp_path) as table:
        with trio.fail_after(HANG):
            while table._pool is None or table._pool.size < 2:  # noqa: ASYNC110
                await trio.sleep(0.05)
        assert table.workers == 2
        assert table._scraper is None  # (the daemon's went with its last source)
        await table.shutdown()


async def test_an_idle_daemon_starts_no_worker(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Rounds slower than the interval because a source is slow, not because
    the daemon's CPU is short, start no worker."""
    monkeypatch.setattr(OpenMetricsTable, "_own_share", lambda self: BUSY_SHARE - 0.01)
    async with _slow_source_table(tmp_path) as table:
        with trio.fail_after(HANG):
            while table.sources["a"].scrapes < 5:  # noqa: ASYNC110  # (rounds 2-4 overran the interval)
                await trio.sleep(0.05)
        assert table._pool is None and table.workers == 0 and table._scraper is not None
        await table.shutdown()


@pytest.mark.parametrize("slow_start", [False, True])
async def test_sources_move_from_the_daemon_to_a_worker_with_their_ids(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, slow_start: bool
) -> None:
    """The daemon scrapes with no worker, each source's model its own (no
    mirror); when the first worker starts, each source moves to it with its
    numbers, the name tables the daemon had not saved yet going along, and
    its model becomes a mirror: its metrics and labels answer as before.
    ``slow_start``: the worker starts late, so the daemon's own rounds see
    the new document (and its new names) before the source moves."""
    from pmda_py.openmetrics.digest import UNUSED

    with ControlledServer() as server:
        server.routes["a"] = Route(b'a 1\nb{x="1"} 2\n')
        write_sources(tmp_path / "config.d", {"a": server.url("a") + "\n"})
        table = make_table(tmp_path, interval="0.3", max_workers="1")
        await table.startup(OM_CONTEXT)
        await table.wait_ready()
        scraper = table._scraper
        assert scraper is not None and table._pool is None
        assert table.sources["a"].model is scraper.model_of("a")  # (one model of the source)
        assert scraper.dirty  # (its new tables are saved late: none written yet)
        before = {m.name: (m.item, dict(m.indom.instances) if m.indom else None) for m in table.metrics()}
        ms = table.sources["a"].model.metrics["b"]
        assert (table.label_items(0x20, (ms_indom(table, "a.b"), 0)) or [])[:1] == [("x", '"1"', 0x20)]
        server.routes["a"].body = b'b{x="2"} 3\nb{x="1"} 4\nnew_a 5\na 6\n'
        if slow_start:
            start = table._start_pool

            async def late_start() -> None:
                await trio.sleep(1.0)  # (three of the daemon's rounds)
                await start()

            monkeypatch.setattr(table, "_start_pool", late_start)
        # as a slow round of a busy daemon would: the daemon's measured share of
        # the CPU said busy (measured, it depends on the machine's load)
        monkeypatch.setattr(OpenMetricsTable, "_own_share", lambda self: 1.0)
        table._busy = 1.0
        table._grow(time.monotonic())
        with trio.fail_after(HANG):
            while _scrapers(table)[0] is not None:  # noqa: ASYNC110  # (the source moves at its next scrape)
                await trio.sleep(0.05)
            moved = time.monotonic()
            while table.sources["a"].last_good < moved:  # noqa: ASYNC110  # (then the worker's first scrape)
                await trio.sleep(0.05)
        assert "a.new_a" in {m.name for m in table.metrics()}
        scraper_now, pool_now = _scrapers(table)
        assert scraper_now is None and pool_now is not None and table.workers == 1
        after = {m.name: (m.item, dict(m.indom.instances) if m.indom else None) for m in table.metrics()}
        assert after["a.a"] == before["a.a"]
        assert after["a.b"][0] == before["a.b"][0] and after["a.b"][1] == {0: "0 x:1", 1: "1 x:2"}
        mirror = table.sources["a"].model.metrics["b"]
        assert mirror is ms and ms.inst_labels is UNUSED and ms.seen is None  # (a mirror now, the same state)
        assert (table.label_items(0x20, (ms_indom(table, "a.b"), 1)) or [])[:1] == [("x", '"2"', 0x20)]
        assert (await fetch(table, "a.b")) == {"a.b": {0: 4.0, 1: 3.0}}
        await table.sync_state()
        await table.shutdown()
        saved = NameTable.loads((tmp_path / "state" / f"144.{ms.indom_serial}.py").read_bytes(), 10)
        assert saved.names == ["x:1", "x:2"]


def _scrapers(table: OpenMetricsTable) -> tuple[Scraper | None, WorkerPool | None]:
    """The daemon's scraper and the pool, now."""
    return table._scraper, table._pool


def ms_indom(table: OpenMetricsTable, name: str) -> Any:
    return next(m.indom for m in table.metrics() if m.name == name)


def test_should_grow() -> None:
    assert should_grow(5.0, 0.0, BUSY_SHARE, 1, 2)
    assert not should_grow(5.0, 0.0, BUSY_SHARE - 0.01, 1, 2)  # (idle: slow sources, not CPU)
    assert not should_grow(5.0, 0.0, 1.0, 2, 2)  # (at the limit)
    assert not should_grow(5.0, 6.0, 1.0, 1, 2)  # (the round began before the last growth)


def test_worker_count_options(tmp_path: Path) -> None:
    """No worker, up to the CPUs; ``workers=N`` (--openmetrics-workers N) is N, no more,
    unless ``max_workers`` is given too."""
    assert (make_table(tmp_path).workers, make_table(tmp_path).max_workers) == (0, os.cpu_count() or 1)
    assert make_table(tmp_path, workers="1", max_workers="3").max_workers == 3
    assert make_table(tmp_path, max_workers="3").max_workers == 3
    assert (make_table(tmp_path, workers="2").workers, make_table(tmp_path, workers="2").max_workers) == (2, 2)
    assert make_table(tmp_path, workers="0").max_workers == 0


def test_busy_share_keeps_only_the_live_workers_cpu_times(tmp_path: Path) -> None:
    """A replaced worker's CPU reading is dropped at the next look, so the
    pool's bookkeeping does not grow with every restart."""
    from types import SimpleNamespace

    from pmda_py.openmetrics.pool import _Worker
    from pmda_py.openmetrics.scrape import WorkerOptions

    pool = WorkerPool(1, WorkerOptions(str(tmp_path), 144, 1.0, 1.0), lambda event, **fields: None)
    live = _Worker(0, SimpleNamespace(pid=os.getpid()), None, None)  # type: ignore[arg-type]
    gone = _Worker(0, SimpleNamespace(pid=os.getpid()), None, None, gone="replaced")  # type: ignore[arg-type]
    pool.workers = [live]
    pool.busy_share()
    pool._cpu[2**22 + 12345] = (0.0, 0.0)  # a worker that was replaced since
    pool.workers = [live, gone]
    share = pool.busy_share()
    assert set(pool._cpu) == {os.getpid()}
    assert 0.0 <= share <= 1.0


def test_busy_share_is_a_share_whatever_the_ticks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """CPU time is read in clock ticks: one tick (10 ms) seen over 0.1 ms of
    wall time is a share of 1.0 (busy), not 100."""
    from types import SimpleNamespace

    from pmda_py.openmetrics import pool as pool_module
    from pmda_py.openmetrics.pool import _Worker
    from pmda_py.openmetrics.scrape import WorkerOptions

    readings = iter([(100.0, 5.0), (100.0001, 5.01), (101.0001, 5.26), (102.0001, 5.26)])
    now_cpu = [(0.0, 0.0)]

    def clock() -> float:
        now_cpu[0] = next(readings)
        return now_cpu[0][0]

    monkeypatch.setattr(pool_module, "time", SimpleNamespace(monotonic=clock))  # (the pool's clock only)
    monkeypatch.setattr(pool_module, "_cpu_seconds", lambda pid: now_cpu[0][1])
    pool = WorkerPool(1, WorkerOptions(str(tmp_path), 144, 1.0, 1.0), lambda event, **fields: None)
    pool.workers = [_Worker(0, SimpleNamespace(pid=4242), None, None)]  # type: ignore[arg-type]
    assert pool.busy_share() == 0.0  # (no earlier reading)
    assert pool.busy_share() == 1.0  # 10 ms of CPU in 0.1 ms
    assert pool.busy_share() == pytest.approx(0.25)  # 250 ms in 1 s
    assert pool.busy_share() == 0.0  # idle


async def test_a_full_flush_saves_the_tables_handed_over_and_not_read_yet(tmp_path: Path) -> None:
    """The tables handed over with a source a worker has not scraped yet
    are written by a full flush (the daemon's sync_state asks for one), not
    left to the worker's exit; a partial flush (the background saves) leaves
    them to be read first.  One whose file cannot be written stays handed
    over, for the next flush or the first scrape."""
    state = tmp_path / "state"
    scraper = Scraper(str(state), 144, Limits(), timeout=1)
    try:
        handed = NameTable(maxnum=10)
        handed.lookup("x:1")
        handed.lookup("x:2")
        scraper.adopt({5121: handed.dumps(), 5122: handed.dumps()})
        (state / "144.5122.py").mkdir(parents=True)  # (a directory where the file goes: not writable)
        await scraper.flush_later(5)
        assert not (state / "144.5121.py").exists()
        logs = await scraper.flush_later()
        assert NameTable.loads((state / "144.5121.py").read_bytes(), 10).names == ["x:1", "x:2"]
        assert [e.event for e in logs] == ["openmetrics_state_unsaved"]
        assert list(scraper.adopted) == [5122]  # (the one not written: still handed over)
    finally:
        await scraper.aclose()

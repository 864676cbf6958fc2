"""The OpenMetrics table in-process, against sources the test controls:
slow, silent, endless, huge, malformed, failing, changing, scripted."""

from __future__ import annotations

import json
import os
import stat
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import structlog
import trio

from pmda_py.errors import PmdaError, PmdaNotReady, PmErr
from pmda_py.openmetrics.table import OpenMetricsTable
from pmda_py.table import Columns, FetchRequest, Metric, StoreRequest, TableContext
from pmda_py.wire import ProfilePdu
from tests.integration.pcpbed import free_port
from tests.openmetrics.servers import ControlledServer, Route

#: what the daemon tells the drop-in at startup (domain 144, mounted at openmetrics)
OM_CONTEXT = TableContext(domain=144, mount="openmetrics", name="openmetrics")

GOOD = b'# HELP up_total Ups.\n# TYPE up_total counter\nup_total{job="a"} 1\nup_total{job="b"} 2\ntemp 21.5\n'


def write_sources(d: Path, urls: dict[str, str]) -> None:
    d.mkdir(parents=True, exist_ok=True)
    for name, text in urls.items():
        (d / f"{name}.url").write_text(text)


def make_table(tmp: Path, **opts: str) -> OpenMetricsTable:
    return OpenMetricsTable(dir=str(tmp / "config.d"), state_dir=str(tmp / "state"), **opts)


async def fetch(table: OpenMetricsTable, *names: str) -> dict[str, Any]:
    by_name = {m.name: m for m in table.metrics()}
    metrics: tuple[Metric, ...] = tuple(by_name[n] for n in names) if names else tuple(by_name.values())
    out = await table.fetch(FetchRequest(metrics, ProfilePdu()))
    res: dict[str, Any] = {}
    for m, v in out.items():
        res[m.name] = dict(zip(v.insts, v.values)) if isinstance(v, Columns) else v
    return res


async def wait_generation(table: OpenMetricsTable, gen: int) -> None:
    """Until the table's names change (polled: the table has no event for it)."""
    while table.generation == gen:  # noqa: ASYNC110
        await trio.sleep(0.05)


@pytest.fixture
async def server() -> AsyncIterator[ControlledServer]:
    with ControlledServer() as s:
        yield s


@pytest.mark.slow
async def test_bad_sources_never_hold_up_fetch(tmp_path: Path, server: ControlledServer) -> None:
    server.routes.update(
        good=Route(GOOD),
        slow=Route(GOOD, delay=30),
        silent=Route(silent=True),
        endless=Route(endless=True),
        firehose=Route(firehose=True),
        huge=Route(b"big_total 1\n" * 20000),
        malformed=Route(b"ok_one 1\nbad{x=1} 2\nnot_seen 3\n"),
        missing=Route(b"", status=404),
    )
    urls = {k: server.url(k) + "\n" for k in server.routes}
    urls["refused"] = f"http://127.0.0.1:{free_port()}/metrics\n"
    write_sources(tmp_path / "config.d", urls)
    table = make_table(tmp_path, timeout="3", interval="60", max_bytes="100000")
    with structlog.testing.capture_logs() as logs:
        await table.startup(OM_CONTEXT)
        await table.wait_ready()  # the first round ended: every source answered or timed out
        with trio.fail_after(5):  # far below the 30 s slow source: answered from memory
            values = await fetch(table)
    assert values["good.up_total"] == {0: 1.0, 1: 2.0} and values["good.temp"] == 21.5
    assert values["malformed.ok_one"] == 1.0 and "malformed.not_seen" not in values
    status = values["control.status"]
    names = {v: k for k, v in table.c_sources.instances.items()}
    assert status[names["good"]] == "success" and status[names["malformed"]] == "success"
    for bad in ("slow", "silent", "endless"):
        assert "timed out" in status[names[bad]], (bad, status[names[bad]])
    assert "larger than 100000" in status[names["huge"]]
    assert "larger than 100000" in status[names["firehose"]]
    assert "404 Client Error" in status[names["missing"]]
    assert values["control.status_code"][names["missing"]] == 404
    assert "failed to fetch URL" in status[names["refused"]]
    assert not any(k.startswith(("slow.", "huge.", "endless.", "firehose.")) for k in values)
    # every problem logged, once, per source
    failed = [e for e in logs if e["event"] == "openmetrics_source_failed"]
    assert sorted(e["source"] for e in failed) == sorted(
        ["slow", "silent", "endless", "firehose", "huge", "missing", "refused"]
    )
    parse = [e for e in logs if e["event"] == "openmetrics_parse"]
    assert [e["source"] for e in parse] == ["malformed"]
    await table.shutdown()


@pytest.mark.slow
async def test_not_ready_until_first_round(tmp_path: Path, server: ControlledServer) -> None:
    server.routes["late"] = Route(GOOD, delay=2.5)
    write_sources(tmp_path / "config.d", {"late": server.url("late") + "\n"})
    table = make_table(tmp_path, timeout="10", interval="60")
    await table.startup(OM_CONTEXT)  # gives up waiting before pmcd's deadline
    with pytest.raises(PmdaNotReady):
        await fetch(table, "control.calls")
    await table.wait_ready()
    assert (await fetch(table, "late.temp"))["late.temp"] == 21.5
    await table.shutdown()


async def test_one_scrape_serves_every_fetch(tmp_path: Path, server: ControlledServer) -> None:
    server.routes["a"] = Route(GOOD)
    write_sources(tmp_path / "config.d", {"a": server.url("a") + "\n"})
    table = make_table(tmp_path, interval="60")
    await table.startup(OM_CONTEXT)
    await table.wait_ready()
    for _ in range(50):
        await fetch(table)
    assert server.routes["a"].hits == 1
    calls = (await fetch(table, "control.calls"))["control.calls"]
    assert calls == {0: 1, 1: 1}
    await table.shutdown()


async def test_concurrency_cap(tmp_path: Path, server: ControlledServer) -> None:
    active = {"now": 0, "max": 0}
    original = server.httpd.RequestHandlerClass.do_GET  # type: ignore[attr-defined]

    def counting(handler: Any) -> None:
        active["now"] += 1
        active["max"] = max(active["max"], active["now"])
        try:
            original(handler)
        finally:
            active["now"] -= 1

    server.httpd.RequestHandlerClass.do_GET = counting  # type: ignore[attr-defined]
    for k in range(8):
        server.routes[f"s{k}"] = Route(GOOD, delay=0.3)
    write_sources(tmp_path / "config.d", {k: server.url(k) + "\n" for k in server.routes})
    table = make_table(tmp_path, interval="60", concurrency="3")
    await table.startup(OM_CONTEXT)
    await table.wait_ready()
    assert all(r.hits == 1 for r in server.routes.values())
    assert active["max"] == 3
    await table.shutdown()


async def test_changing_source_changes_names(tmp_path: Path, server: ControlledServer) -> None:
    server.routes["c"] = Route(b'a 1\nb{x="1"} 2\n')
    write_sources(tmp_path / "config.d", {"c": server.url("c") + "\n"})
    table = make_table(tmp_path, interval="0.2")
    await table.startup(OM_CONTEXT)
    await table.wait_ready()
    names = {m.name for m in table.metrics()}
    assert {"c.a", "c.b"} <= names
    gen = table.generation
    server.routes["c"].body = b'b{x="1"} 3\nb{x="2"} 4\nnew_one 5\n'
    with trio.fail_after(10):
        await wait_generation(table, gen)
    names = {m.name for m in table.metrics()}
    assert "c.a" not in names and {"c.b", "c.new_one"} <= names
    b = next(m for m in table.metrics() if m.name == "c.b")
    assert b.indom is not None and b.indom.instances == {0: "0 x:1", 1: "1 x:2"}
    assert (await fetch(table, "c.b"))["c.b"] == {0: 3.0, 1: 4.0}
    # the ids are kept: "a" comes back with its old item
    item_a = table.by_cluster[1].model.metrics["a"].item
    gen = table.generation
    server.routes["c"].body = b"a 9\n"
    with trio.fail_after(10):
        await wait_generation(table, gen)
    a = next(m for m in table.metrics() if m.name == "c.a")
    assert a.item == item_a
    await table.sync_state()  # saved by the worker processes when idle; now, for the test
    saved = (tmp_path / "state" / "144.1.py").read_bytes()
    from pmda_py.openmetrics import NameTable

    assert NameTable.loads(saved, 1023).names == ["a", "b", "new_one"]
    await table.shutdown()


@pytest.mark.parametrize("workers", ["0", "1"])
async def test_a_source_gone_during_the_first_round_does_not_hold_readiness(
    tmp_path: Path, server: ControlledServer, workers: str
) -> None:
    """The agent is ready once the first round of scrapes ends; a source
    whose config file goes while its first scrape is still running (an
    interval shorter than the timeout) leaves that round without its scrape,
    and is back as a new source when its file is."""
    server.routes["good"] = Route(GOOD)
    server.routes["slow"] = Route(GOOD, delay=30)
    conf = tmp_path / "config.d"
    write_sources(conf, {k: server.url(k) + "\n" for k in ("good", "slow")})
    table = make_table(tmp_path, interval="0.2", timeout="60", workers=workers)
    await table.startup(OM_CONTEXT)
    while server.routes["slow"].hits == 0:  # noqa: ASYNC110  # (its first scrape is on its way)
        await trio.sleep(0.05)
    (conf / "slow.url").unlink()
    with trio.fail_after(30):  # (the next rescans: before, the agent was never ready)
        await table.wait_ready()
    assert (await fetch(table, "good.temp"))["good.temp"] == 21.5
    server.routes["slow"].delay = 0
    write_sources(conf, {"slow": server.url("slow") + "\n"})
    with trio.fail_after(30):
        while "slow.temp" not in {m.name for m in table.metrics()}:  # noqa: ASYNC110
            await trio.sleep(0.05)
    assert (await fetch(table, "slow.temp"))["slow.temp"] == 21.5
    await table.shutdown()


async def test_hostile_labels(tmp_path: Path, server: ControlledServer) -> None:
    many = ",".join(f'l{k}="v"' for k in range(100))
    server.routes["h"] = Route(('q{name_with"quote="1",ok="new\\nline \\"q\\""} 1\nw{' + many + "} 2\n").encode())
    write_sources(tmp_path / "config.d", {"h": server.url("h") + "\n"})
    table = make_table(tmp_path, interval="60")
    with structlog.testing.capture_logs() as logs:
        await table.startup(OM_CONTEXT)
        await table.wait_ready()
    q = next(m for m in table.metrics() if m.name == "h.q")
    assert q.indom is not None
    items = table.label_items(0x20, (q.indom, 0))
    assert items is not None
    got = {k: json.loads(v) for k, v, _ in items}
    assert got["ok"] == 'new\nline "q"' and 'name_with"quote' not in got
    assert not any(m.name == "h.w" for m in table.metrics())  # over the label limit: logged, dropped
    assert any(e["event"] == "openmetrics_parse" and "labels" in e.get("problem", "") for e in logs)
    await table.shutdown()


@pytest.mark.parametrize(
    ("version", "instname"), [("6.0.3", True), ("6.1.0", False), ("6.3.8", False), ("7.2.2", False)]
)
async def test_instname_label_follows_the_pcp_version(tmp_path: Path, version: str, instname: bool) -> None:
    """pmdaopenmetrics before 6.1 gives each instance an optional
    ``instname`` label ("N NAME"); 6.1 dropped it (PCP commit 84be2456fe)."""
    doc = tmp_path / "doc.prom"
    doc.write_text('d{kind="a"} 1\nd{kind="b"} 2\n')
    write_sources(tmp_path / "config.d", {"s": f"file://{doc}\n"})
    table = make_table(tmp_path, interval="60", pcp_version=version)
    await table.startup(OM_CONTEXT)
    await table.wait_ready()
    d = next(m for m in table.metrics() if m.name == "s.d")
    assert d.indom is not None
    names = {name.split(" ", 1)[1]: inst for inst, name in d.indom.instances.items()}  # "N NAME"
    got = table.label_items(0x20, (d.indom, names["kind:b"]))
    want = [("kind", '"b"', 0x20)] + ([("instname", f'"{names["kind:b"]} kind:b"', 0xA0)] if instname else [])
    assert got == want
    await table.shutdown()


@pytest.mark.parametrize("version", ["6.0.3", "6.3.8", "7.0.0", "7.2.2"])
def test_debug_text_follows_the_pcp_version(tmp_path: Path, version: str) -> None:
    """pmdaopenmetrics 7.0 shortened control.debug's one-line text and gave
    it a help text of its own (PCP commit ae1adec444); before, the one-line
    text was the help text too."""
    table = make_table(tmp_path, pcp_version=version)
    one = "debug flag to enable verbose log messages"
    if version >= "7":
        want = (one, "Debugging flag to enable verbose log messages, to enable:\n> pmstore openmetrics.control.debug 1")
    else:
        want = (f"{one}, to enable: pmstore openmetrics.control.debug 1",) * 2
    assert (table.c_debug.oneline, table.c_debug.help) == want
    assert table.c_calls.oneline == table.c_calls.help == "per-end-point source call counter"


async def test_scripts_and_files(tmp_path: Path) -> None:
    cfg = tmp_path / "config.d"
    cfg.mkdir()
    doc = tmp_path / "doc.prom"
    doc.write_text("from_file 1\n")
    (cfg / "f.url").write_text(f"file://{doc}\n")
    script = cfg / "script"
    script.write_text("#!/bin/sh\necho '# PCP5 my.metric 1.2.3 u64 PM_INDOM_NULL counter byte'\necho 'mm 42'\n")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    hang = cfg / "hang"
    hang.write_text("#!/bin/sh\nexec sleep 60\n")
    hang.chmod(hang.stat().st_mode | stat.S_IXUSR)
    (cfg / "ignored.txt").write_text("not a source\n")
    table = make_table(tmp_path, interval="60", timeout="1")
    await table.startup(OM_CONTEXT)
    await table.wait_ready()
    values = await fetch(table)
    assert values["f.from_file"] == 1.0
    mm = next(m for m in table.metrics() if m.name == "script.my.metric")
    assert (mm.type, mm.indom, values["script.my.metric"]) == (3, None, 42)  # u64
    assert table.label_items(0x08, mm.cluster) == [
        ("script", json.dumps(str(script)), 0x08),
        ("source", '"script"', 0x08),
    ]
    names = {v: k for k, v in table.c_sources.instances.items()}
    assert "timed out" in values["control.status"][names["hang"]]
    assert "ignored" not in names
    await table.shutdown()


async def test_debug_store(tmp_path: Path) -> None:
    (tmp_path / "config.d").mkdir()
    table = make_table(tmp_path)
    await table.startup(OM_CONTEXT)
    await table.wait_ready()
    from pmda_py import logconfig

    before = logconfig.current_level()
    await table.store(StoreRequest(table.c_debug, {-1: 1}))
    assert (await fetch(table, "control.debug"))["control.debug"] == 1
    assert logconfig.current_level() == "debug"  # verbose logs while it is set
    await table.store(StoreRequest(table.c_debug, {-1: 0}))
    assert logconfig.current_level() == before and (await fetch(table, "control.debug"))["control.debug"] == 0
    with pytest.raises(PmdaError) as err:
        await table.store(StoreRequest(table.c_debug, {-1: -5}))
    assert err.value.pm_code == PmErr.BADSTORE
    with pytest.raises(PmdaError):
        await table.store(StoreRequest(table.c_calls, {0: 1}))
    await table.shutdown()


def test_compat_flag() -> None:
    from pmda_py.config import parse_args

    cfg = parse_args(
        [
            "--openmetrics-compat",
            "--openmetrics-dir",
            "/x",
            "--openmetrics-interval",
            "5",
            "--openmetrics-timeout",
            "1.5",
            "-l",
            os.devnull,
        ]
    )
    assert (cfg.name, cfg.domain, cfg.domain_labels) == ("openmetrics", 144, {"agent": "openmetrics"})
    (spec,) = cfg.tables
    assert (spec.table, spec.mount, spec.options["dir"], spec.options["interval"], spec.options["timeout"]) == (
        "openmetrics",
        "openmetrics",
        "/x",
        "5.0",
        "1.5",
    )


async def test_state_dir_from_the_daemon_config(tmp_path: Path) -> None:
    """``pmda-py run --openmetrics-compat --state-dir D`` keeps the name tables in D."""
    from pmda_py.config import parse_args
    from pmda_py.runtime.loader import build_dispatcher

    (tmp_path / "config.d").mkdir()
    (tmp_path / "config.d" / "f.url").write_text(f"file://{tmp_path}/doc\n")
    (tmp_path / "doc").write_text("x 1\n")
    cfg = parse_args(
        [
            "--openmetrics-compat",
            "--openmetrics-dir",
            str(tmp_path / "config.d"),
            "--state-dir",
            str(tmp_path / "st"),
            "-l",
            os.devnull,
        ]
    )
    dispatcher = build_dispatcher(cfg)
    table = dispatcher.mounts[0].table
    assert isinstance(table, OpenMetricsTable)
    await table.startup(dispatcher.context(dispatcher.mounts[0]))
    await table.wait_ready()
    await table.sync_state()
    assert sorted(p.name for p in (tmp_path / "st").iterdir()) == ["144.0.py", "144.1.py"]
    await table.shutdown()


async def test_packed_answer_matches_the_general_one(tmp_path: Path, server: ControlledServer) -> None:
    """A big fetch is answered in one piece (PackedFetch); its blob decodes
    to the values the per-metric path gives, instance for instance."""
    import struct

    from pmda_py.table import PackedFetch

    lines = [f'm{k}_total{{i="{j}"}} {k * 10 + j}' for k in range(30) for j in range(3)]
    lines += [f"g{k} {k}.25" for k in range(30)]
    server.routes["p"] = Route(("\n".join(lines) + "\n").encode())
    write_sources(tmp_path / "config.d", {"p": server.url("p") + "\n"})
    table = make_table(tmp_path, interval="60")
    await table.startup(OM_CONTEXT)
    await table.wait_ready()
    metrics = tuple(m for m in table.metrics() if m.name.startswith("p."))
    assert len(metrics) == 60
    whole = await table.fetch(FetchRequest(metrics, ProfilePdu()))
    assert isinstance(whole, PackedFetch)
    assert list(whole.metrics) == list(metrics) and whole.indoms == {m.indom.id for m in metrics if m.indom}
    blob, off = bytes(whole.blob), 0
    for m, insts in zip(metrics, whole.insts):
        n = len(insts)
        packed = dict(zip(insts, struct.unpack_from(f">{n}d", blob, off)))
        off += 8 * n
        general = (await table.fetch(FetchRequest((m,), ProfilePdu())))[m]
        if isinstance(general, Columns):
            assert packed == dict(zip(general.insts, general.values)), m.name
        else:
            assert packed == {0xFFFFFFFF: general}, m.name
    assert off == len(blob)
    again = await table.fetch(FetchRequest(metrics, ProfilePdu()))
    assert isinstance(again, PackedFetch) and again.token is whole.token  # same shape: same token
    await table.shutdown()


def test_no_scraper_worker_by_default(tmp_path: Path) -> None:
    """docs/openmetrics.md: the daemon scrapes at first (each worker is a Python of its
    own), and may start workers up to the CPUs; a number given is that number, for good."""
    default = OpenMetricsTable(dir=str(tmp_path), state_dir=str(tmp_path))
    assert default.workers == 0 and default.max_workers == (os.cpu_count() or 1)
    fixed = OpenMetricsTable(dir=str(tmp_path), state_dir=str(tmp_path), workers="0")
    assert fixed.workers == 0 and fixed.max_workers == 0
    assert OpenMetricsTable(dir=str(tmp_path), state_dir=str(tmp_path), workers="2").max_workers == 2


@pytest.mark.slow
async def test_a_failing_source_keeps_its_last_good_values_for_a_while(
    tmp_path: Path, server: ControlledServer
) -> None:
    """docs/openmetrics.md: a source that fails keeps its last good values
    for 2 x interval + timeout, then answers PM_ERR_AGAIN (one metric at a
    time and in the whole-request answer alike), and is served again once
    it scrapes well."""
    import time

    many = b"".join(b"m%d_total %d\n" % (k, k) for k in range(20))  # > 16 metrics: the one-piece answer too
    server.routes["flaky"] = Route(many)
    write_sources(tmp_path / "config.d", {"flaky": server.url("flaky") + "\n"})
    table = make_table(tmp_path, timeout="1", interval="1")
    window = 2 * 1 + 1
    names = [f"flaky.m{k}_total" for k in range(20)]

    async def whole() -> dict[Metric, object]:
        metrics = tuple({m.name: m for m in table.metrics()}[n] for n in names)
        return dict(await table.fetch(FetchRequest(metrics, ProfilePdu())))

    await table.startup(OM_CONTEXT)
    try:
        await table.wait_ready()
        assert (await fetch(table, "flaky.m3_total"))["flaky.m3_total"] == 3.0
        assert not any(isinstance(v, PmdaError) for v in (await whole()).values())
        server.routes["flaky"] = Route(b"", status=500)
        src = table.sources["flaky"]
        good = src.last_good
        with trio.fail_after(10):  # a failed scrape since: the status says so
            while "500" not in str((await fetch(table, "control.status"))["control.status"]):  # noqa: ASYNC110
                await trio.sleep(0.1)
        assert src.last_good == good  # (no good scrape since)
        served = await fetch(table, "flaky.m3_total")
        answer = await whole()
        if time.monotonic() - good < window - 0.5:  # (a machine this slow cannot tell; the rest still holds)
            assert served["flaky.m3_total"] == 3.0
            assert not any(isinstance(v, PmdaError) for v in answer.values()), answer
        await trio.sleep(max(0.0, good + window + 0.3 - time.monotonic()))
        gone = await fetch(table, "flaky.m3_total")
        assert isinstance(gone["flaky.m3_total"], PmdaError) and gone["flaky.m3_total"].pm_code == PmErr.AGAIN
        answer = await whole()
        assert all(isinstance(v, PmdaError) and v.pm_code == PmErr.AGAIN for v in answer.values()), answer
        server.routes["flaky"] = Route(many)
        with trio.fail_after(10):
            while src.last_good == good:  # noqa: ASYNC110
                await trio.sleep(0.1)
        assert (await fetch(table, "flaky.m3_total"))["flaky.m3_total"] == 3.0
    finally:
        await table.shutdown()


async def test_documents_are_read_as_utf8_whatever_the_charset(tmp_path: Path, server: ControlledServer) -> None:
    """docs/openmetrics.md: every document is read as UTF-8 (the test
    server's Content-Type, ``text/plain; version=0.0.4``, names no charset,
    which HTTP's default would read as Latin-1), and bytes that are not
    UTF-8 become U+FFFD, in an HTTP body and a ``file://`` document alike."""
    server.routes["h"] = Route('a{x="é"} 1\n'.encode())
    doc = tmp_path / "doc.txt"
    doc.write_bytes(b'a{x="\xe9"} 1\n')
    write_sources(tmp_path / "config.d", {"h": server.url("h") + "\n", "f": f"file://{doc}\n"})
    table = make_table(tmp_path, interval="60")
    await table.startup(OM_CONTEXT)
    with trio.fail_after(10):
        await table.wait_ready()
    by_name = {m.name: m for m in table.metrics()}
    await table.shutdown()
    h, f = by_name["h.a"].indom, by_name["f.a"].indom
    assert h is not None and f is not None
    assert list(h.instances.values()) == ["0 x:é"] and list(f.instances.values()) == ["0 x:\ufffd"]

"""The OpenMetrics table against hostile and careless sources and hosts:
workers that cannot be signalled, a scraper that fails, decompression
bombs, scripts that fork or read stdin, label churn, id files that cannot be
read whole, and logs that must not carry what the agent read."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import stat
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator, MutableMapping
from pathlib import Path
from typing import Any

import pytest
import structlog
import trio
from hypothesis import given, settings
from hypothesis import strategies as st

from pmda_py.openmetrics import NameTable
from pmda_py.openmetrics import state as openmetrics_state
from pmda_py.openmetrics.table import OpenMetricsTable
from pmda_py.testing.support import pmda_py_argv
from tests.openmetrics.servers import ControlledServer, Route, gzip_bomb
from tests.openmetrics.test_table import GOOD, OM_CONTEXT, fetch, make_table, write_sources
from tests.openmetrics.test_workers import _status, _wait_status, _worker_pid


@contextlib.contextmanager
def unkillable(monkeypatch: pytest.MonkeyPatch) -> Iterator[set[int]]:
    """``os.kill(pid, SIGKILL)`` of the pids in the set raises PermissionError,
    as for a worker left running as root after the daemon dropped to ``pcp``."""
    pids: set[int] = set()
    real = os.kill

    def kill(pid: int, sig: int) -> None:
        if pid in pids and sig == signal.SIGKILL:
            raise PermissionError(1, "Operation not permitted")
        real(pid, sig)

    monkeypatch.setattr(os, "kill", kill)
    yield pids


@pytest.mark.slow
async def test_a_worker_that_cannot_be_killed_is_replaced(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with ControlledServer() as server, unkillable(monkeypatch) as blocked:
        server.routes["a"] = Route(GOOD)
        server.routes["b"] = Route(GOOD)
        write_sources(tmp_path / "config.d", {k: server.url(k) + "\n" for k in ("a", "b")})
        table = make_table(tmp_path, interval="0.3", timeout="1.5", worker_grace="0.5", workers="2")
        with structlog.testing.capture_logs() as logs:
            await table.startup(OM_CONTEXT)
            await table.wait_ready()
            a, b = table.sources["a"], table.sources["b"]
            pid = _worker_pid(table, a.cluster)
            blocked.add(pid)
            os.kill(pid, signal.SIGSTOP)  # hung, and it cannot be killed
            try:
                with trio.fail_after(10):
                    failed = await _wait_status(table, "a", "could not be killed")
                    assert "PermissionError" in failed
                    await _wait_status(table, "a", "success")  # a new worker took over
                    b_calls = b.calls
                    while b.calls < b_calls + 3:  # noqa: ASYNC110
                        await trio.sleep(0.05)
                assert (await _status(table))["b"] == "success"
                assert _worker_pid(table, a.cluster) != pid and table.restarts == 0
            finally:
                blocked.discard(pid)
                os.kill(pid, signal.SIGCONT)  # (it was told to end: EOF on its requests)
            await table.shutdown()
    assert any(e["event"] == "openmetrics_worker_unkillable" and e["pid"] == pid for e in logs)
    assert not [e for e in logs if e["event"] == "openmetrics_scraper_failed"]


async def test_retired_worker_that_cannot_be_signalled(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """After the privilege drop the old worker (root) cannot be signalled by
    the daemon (pcp): it is left to end by itself, scraping carries on."""
    with ControlledServer() as server, unkillable(monkeypatch) as blocked:
        server.routes["a"] = Route(GOOD)
        write_sources(tmp_path / "config.d", {"a": server.url("a") + "\n"})
        table = make_table(tmp_path, interval="0.2", workers="1")
        await table.startup(OM_CONTEXT)
        await table.wait_ready()
        pool = table._pool
        assert pool is not None
        old = pool.workers[0]
        assert old is not None
        blocked.add(old.proc.pid)
        pool._uid = lambda: old.uid + 1  # type: ignore[method-assign]  # as after setuid()
        calls = table.sources["a"].calls
        with trio.fail_after(10):
            while table.sources["a"].calls < calls + 5:  # noqa: ASYNC110
                await trio.sleep(0.05)
            await old.proc.wait()
        assert (await _status(table))["a"] == "success" and table.restarts == 0
        await table.shutdown()


@pytest.mark.slow
async def test_a_failed_scraper_is_restarted_and_status_says_so(tmp_path: Path) -> None:
    with ControlledServer() as server:
        server.routes["a"] = Route(GOOD)
        write_sources(tmp_path / "config.d", {"a": server.url("a") + "\n"})
        table = make_table(tmp_path, interval="0.2", workers="1")
        real = table.rescan
        calls = {"n": 0}

        def rescan() -> Any:
            calls["n"] += 1
            if calls["n"] in (3, 4):  # (the 4th: the first rescan of the restarted scraper)
                raise RuntimeError("boom")
            return real()

        table.rescan = rescan  # type: ignore[method-assign]
        with structlog.testing.capture_logs() as logs:
            await table.startup(OM_CONTEXT)
            await table.wait_ready()
            with trio.fail_after(10):
                failed = await _wait_status(table, "a", "scraper failed")
                assert "RuntimeError: boom" in failed and "restarting in 1 s" in failed
                await _wait_status(table, "a", "restarting in 2 s")  # failed again at once: it waits longer
                await _wait_status(table, "a", "success")
            assert table.restarts == 2
            assert (await fetch(table, "a.up_total"))["a.up_total"] == {0: 1.0, 1: 2.0}
            await table.shutdown()
    assert [e["error"] for e in logs if e["event"] == "openmetrics_scraper_failed"] == ["RuntimeError: boom"] * 2


# ------------------------------------------------------------ decompression


@pytest.mark.parametrize("workers", ["0", "1"])
@pytest.mark.slow
async def test_decompression_bomb_refused_while_decoding(tmp_path: Path, workers: str) -> None:
    bomb = gzip_bomb()  # 2 GiB of zeros in about 5 KB
    single = gzip_bomb(64 << 20)  # ... a gzip of a gzip: its inner layer, served as plain gzip
    import gzip

    inner = gzip.decompress(single)
    with ControlledServer() as server:
        server.routes.update(
            good=Route(GOOD),
            bomb=Route(bomb, headers={"Content-Encoding": "gzip, gzip"}),
            big=Route(inner, headers={"Content-Encoding": "gzip"}),
            brotli=Route(b"x", headers={"Content-Encoding": "br"}),
            zipped=Route(gzip.compress(GOOD), headers={"Content-Encoding": "gzip"}),
        )
        write_sources(tmp_path / "config.d", {k: server.url(k) + "\n" for k in server.routes})
        table = make_table(tmp_path, interval="60", timeout="2", workers=workers)
        with structlog.testing.capture_logs() as logs:
            await table.startup(OM_CONTEXT)
            await table.wait_ready()
            status = await _status(table)
            values = await fetch(table, "good.up_total", "zipped.up_total")
            await table.shutdown()
    assert "stacked Content-Encoding 'gzip, gzip' refused" in status["bomb"]
    assert "unknown Content-Encoding 'br' refused" in status["brotli"]
    assert "larger than 16777216 bytes (decoded)" in status["big"]
    assert status["good"] == status["zipped"] == "success"
    assert values["zipped.up_total"] == values["good.up_total"] == {0: 1.0, 1: 2.0}
    failed = sorted(e["source"] for e in logs if e["event"] == "openmetrics_source_failed")
    assert failed == ["big", "bomb", "brotli"]


# ------------------------------------------------------------ scripts


def _script(path: Path, body: str) -> None:
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@pytest.mark.parametrize("workers", ["0", "1"])
async def test_timed_out_script_leaves_no_process(tmp_path: Path, workers: str) -> None:
    pids = tmp_path / "pids"
    d = tmp_path / "config.d"
    d.mkdir()
    _script(d / "forker", f"for i in $(seq 20); do sleep 60 & echo $! >> {pids}; done\necho x 1\nsleep 60\n")
    table = make_table(tmp_path, interval="60", timeout="1", workers=workers)
    await table.startup(OM_CONTEXT)
    await table.wait_ready()
    status = (await _status(table))["forker"]
    await table.shutdown()
    assert "timed out after 1 s (its process group killed)" in status
    children = [int(p) for p in pids.read_text().split()]
    assert len(children) == 20
    with trio.fail_after(5):
        while [p for p in children if _alive(p)]:  # noqa: ASYNC110  # (SIGKILL is delivered at once; reaping is init's)
            await trio.sleep(0.05)


def _spawner(pids: Path) -> str:
    """Shell lines starting five ``sleep 60`` in the background (their pids
    in ``pids``), each holding the script's stdout and stderr."""
    return f"for i in $(seq 5); do sleep 60 & echo $! >> {pids}; done\n"


async def _none_left(pids: str) -> None:
    children = [int(p) for p in pids.split()]
    assert len(children) == 5
    with trio.fail_after(5):
        while [p for p in children if _alive(p)]:  # noqa: ASYNC110  # (SIGKILL is delivered at once)
            await trio.sleep(0.05)


@contextlib.asynccontextmanager
async def _spawning_script(tmp_path: Path, name: str, rest: str, **options: str) -> AsyncIterator[OpenMetricsTable]:
    """A table of one script, ``name``, that starts five children (its
    :func:`_spawner` lines) and then runs ``rest``: the table once ready,
    and after the block none of the children left, the table shut down."""
    d = tmp_path / "config.d"
    d.mkdir()
    _script(d / name, _spawner(tmp_path / "pids") + rest)
    table = make_table(tmp_path, interval="60", timeout="20", **options)
    await table.startup(OM_CONTEXT)
    with trio.fail_after(10):
        await table.wait_ready()
    yield table
    await _none_left((tmp_path / "pids").read_text())
    await table.shutdown()


@pytest.mark.parametrize("workers", ["0", "1"])
async def test_a_script_that_exits_is_read_and_its_group_killed(tmp_path: Path, workers: str) -> None:
    """A script that exits leaving children in the background (holding its
    stdout) is done: its document read at once, its process group killed
    (they held the reading up to the deadline, and the source failed)."""
    async with _spawning_script(tmp_path, "leaver", "echo left 1\n", workers=workers) as table:
        assert (await _status(table))["leaver"] == "success"
        assert (await fetch(table, "leaver.left"))["leaver.left"] == 1.0


@pytest.mark.parametrize("workers", ["0", "1"])
async def test_a_script_over_the_cap_fails_with_the_reason(tmp_path: Path, workers: str) -> None:
    """A script that never stops writing is done at the document cap: its
    status says so and its process group is killed."""
    flood = "while :; do echo 'x_total 1'; done\n"
    async with _spawning_script(tmp_path, "flood", flood, workers=workers, max_bytes="100000") as table:
        status = (await _status(table))["flood"]
        assert status.endswith("/flood: script output larger than 100000 bytes"), status


@pytest.mark.slow
async def test_script_cannot_read_the_workers_requests(tmp_path: Path) -> None:
    """A script's child that reads stdin gets EOF; the other sources of its
    worker stay fresh."""
    d = tmp_path / "config.d"
    d.mkdir()
    stolen = tmp_path / "stolen"
    stolen.mkdir()
    # (a child that waits for its stdin to be readable, then reads it: the worker's request pipe is non-blocking)
    steal = "import os, select; select.select([0], [], [], 3); "
    steal += f"open('{stolen}/%d' % os.getpid(), 'wb').write(os.read(0, 254))"
    _script(d / "reader", f'{sys.executable} -c "{steal}"\necho "r 1"\n')
    with ControlledServer() as server:
        server.routes["a"] = Route(GOOD)
        write_sources(d, {"a": server.url("a") + "\n"})
        table = make_table(tmp_path, interval="0.2", timeout="1", workers="1")
        await table.startup(OM_CONTEXT)
        await table.wait_ready()
        a = table.sources["a"]
        calls = a.calls
        with trio.fail_after(10):
            while a.calls < calls + 8:  # noqa: ASYNC110
                await trio.sleep(0.05)
        status = await _status(table)
        assert status["a"] == status["reader"] == "success"
        assert (await fetch(table, "a.up_total"))["a.up_total"] == {0: 1.0, 1: 2.0}
        await table.shutdown()
    files = list(stolen.iterdir())
    assert files and all(f.stat().st_size == 0 for f in files)


# ------------------------------------------------------------ label churn


def _churn(hits: int) -> bytes:
    lines = [f'churn{{id="{hits}-{k}",pad="{"x" * 100}"}} {k}' for k in range(40)]
    return ("first 1\n" + "\n".join(lines) + "\nafter_total 7\n").encode()


@pytest.mark.slow
async def test_label_churn_is_bounded_and_keeps_the_rest(tmp_path: Path) -> None:
    with ControlledServer() as server:
        server.routes["c"] = Route(make=_churn)
        server.routes["ok"] = Route(GOOD)
        write_sources(tmp_path / "config.d", {k: server.url(k) + "\n" for k in server.routes})
        table = make_table(tmp_path, interval="0.1", workers="1", max_series="100", series_ttl="3")
        with structlog.testing.capture_logs() as logs:
            await table.startup(OM_CONTEXT)
            await table.wait_ready()
            c = table.sources["c"]
            with trio.fail_after(10):
                while c.calls < 8:  # noqa: ASYNC110
                    await trio.sleep(0.05)
            values = await fetch(table, "c.first", "c.after_total", "ok.up_total")
            # the first 100 series were taken; every later one refused (the metric has no values now)
            assert c.model.by_item[1].table is not None and c.model.by_item[1].table.names[99].startswith("id:3-19 ")
            assert "c.churn" not in {m.name for m in table.metrics()}
            refused = [e for e in logs if e["event"] == "openmetrics_parse" and e["source"] == "c"]
            assert len(refused) == 1 and "reached 100 instances" in refused[0]["problem"]
            # unseen for series_ttl: reclaimed, and new series are taken again (under new numbers)
            with trio.fail_after(15):
                while True:
                    churn = next((m for m in table.metrics() if m.name == "c.churn"), None)
                    if churn is not None and churn.indom is not None and min(churn.indom.instances) >= 100:
                        break  # (every one of the first 100 reclaimed: they are reclaimed as they age)
                    await trio.sleep(0.1)
            assert 40 <= len(churn.indom.instances) <= 100
            await table.shutdown()
    assert values["c.first"] == 1.0 and values["c.after_total"] == 7.0
    assert values["ok.up_total"] == {0: 1.0, 1: 2.0}
    assert not [e for e in logs if e.get("source") == "ok" and e["log_level"] == "warning"]


async def test_label_bytes_bound(tmp_path: Path) -> None:
    """Large label values: the source's label characters stay under the
    bound (the INSTANCE reply of its indoms with them)."""
    big = "".join(f'big{{k="{n}",v="{"y" * 4000}"}} 1\n' for n in range(100)) + "tail 2\n"
    with ControlledServer() as server:
        server.routes["c"] = Route(big.encode())
        write_sources(tmp_path / "config.d", {"c": server.url("c") + "\n"})
        table = make_table(tmp_path, interval="60", workers="0", max_label_bytes="100000")
        await table.startup(OM_CONTEXT)
        await table.wait_ready()
        m = next(m for m in table.metrics() if m.name == "c.big")
        assert m.indom is not None
        size = sum(len(v) for v in m.indom.instances.values())
        assert 0 < size <= 100000 and 10 <= len(m.indom.instances) < 100
        assert (await fetch(table, "c.tail"))["c.tail"] == 2.0
        await table.shutdown()


# ------------------------------------------------------------ id files


def test_amplifying_name_table_refused() -> None:
    """A 90 KB pickle whose memo references unfold to 800 MiB of names."""
    evil = b"(lp0\nV" + b"x" * 40000 + b"\np1\na" + b"g1\na" * 12000 + b"."
    assert len(evil) < 100_000
    with pytest.raises(ValueError, match="more text than the file holds"):
        NameTable.loads(evil, 0x7FFFFFFF)
    for bad in (b"(lp0\nVa\np1\na", b"(lp0\nVa\np1\naVa\np2\na.", b"cos\nsystem\n(S'x'\ntR.", b"(lp0\nI5\na."):
        with pytest.raises(ValueError):
            NameTable.loads(bad, 10)


def _pickled(names: list[str], form: str) -> bytes:
    """``names`` as protocol 0 pickles them: one append each (pickle's own
    form), a list made whole from a mark (``(...l``), or an empty list and
    one ``appends`` (``](...e``)."""
    items = b"".join(b"V" + n.encode("raw_unicode_escape") + b"\n" for n in names)
    if form == "append":
        return b"(lp0\n" + b"".join(b"V" + n.encode("raw_unicode_escape") + b"\na" for n in names) + b"."
    if form == "list":
        return b"(" + items + b"l."
    return b"](" + items + b"e."


@settings(max_examples=60)
@given(
    st.lists(st.text(st.characters(codec="ascii", exclude_characters="\n\\"), max_size=8), unique=True, max_size=12),
    st.integers(0, 10),
    st.sampled_from(["append", "list", "appends"]),
)
def test_a_name_table_holds_at_most_maxnum_plus_one_names_whatever_its_form(
    names: list[str], maxnum: int, form: str
) -> None:
    """The reader's promise (names.parse_names): more than ``maxnum + 1``
    names is refused, however the list is pickled (a cluster table of 5 000
    sources would give clusters past 4095, whose metrics PCP cannot name)."""
    data = _pickled(names, form)
    if len(names) > maxnum + 1:
        with pytest.raises(ValueError, match="names"):
            NameTable.loads(data, maxnum)
    else:
        assert NameTable.loads(data, maxnum).names == names


@pytest.mark.parametrize("kind", ["truncated", "too_big", "corrupt"])
async def test_unreadable_id_file_moved_aside(tmp_path: Path, kind: str, monkeypatch: pytest.MonkeyPatch) -> None:
    state = tmp_path / "state"
    state.mkdir()
    good = NameTable(1023, ["a_long_metric_name_" * 4, "m_b"]).dumps()
    data = {"truncated": good[: len(good) // 2], "too_big": good, "corrupt": b"garbage\n"}[kind]
    if kind == "too_big":
        monkeypatch.setattr(openmetrics_state, "STATE_READ_CAP", len(good) - 1)
    with ControlledServer() as server:
        server.routes["c"] = Route(b"m_b 1\nm_c 2\n")
        write_sources(tmp_path / "config.d", {"c": server.url("c") + "\n"})
        (state / "144.0.py").write_bytes(NameTable(0xFFF, ["control", "c"]).dumps())
        (state / "144.1.py").write_bytes(data)
        table = make_table(tmp_path, interval="60", workers="0")
        with structlog.testing.capture_logs() as logs:
            await table.startup(OM_CONTEXT)
            await table.wait_ready()
            await table.sync_state()
            await table.shutdown()
    assert (state / "144.1.py.bad").read_bytes() == data  # kept as it was
    assert NameTable.loads((state / "144.1.py").read_bytes(), 1023).names == ["m_b", "m_c"]
    bad = [e for e in logs if e["event"] == "openmetrics_state_unreadable"]
    assert len(bad) == 1 and "moved aside" in bad[0]["error"]


def test_move_aside_never_overwrites(tmp_path: Path) -> None:
    from pmda_py.safefile import move_aside

    f = tmp_path / "x"
    (tmp_path / "x.bad").write_text("older")
    f.write_text("newer")
    assert move_aside(str(f)) == str(tmp_path / "x.bad.1")
    assert (tmp_path / "x.bad").read_text() == "older" and (tmp_path / "x.bad.1").read_text() == "newer"
    assert not f.exists()


# ------------------------------------------------------------ logs


async def _first_round(tmp_path: Path, workers: str) -> tuple[dict[str, Any], list[MutableMapping[str, Any]]]:
    """A table of the sources in ``tmp_path / "config.d"``, scraping every 60 s
    with ``workers``, started and, once ready, shut down: control.status by
    source when it was ready, and the table's log."""
    table = make_table(tmp_path, interval="60", workers=workers)
    with structlog.testing.capture_logs() as logs:
        await table.startup(OM_CONTEXT)
        await table.wait_ready()
        status = await _status(table)
        await table.shutdown()
    return status, logs


async def test_logs_carry_no_contents(tmp_path: Path) -> None:
    secret = "SECRETVALUE"
    shadow = tmp_path / "shadow"
    shadow.write_text(f"root:{secret}:19000:0:99999:7:::\n{secret}_total 1\n")
    d = tmp_path / "config.d"
    d.mkdir()
    (d / "f.url").write_text(f"file://{shadow}\n")
    (d / "conf.url").write_text(f"file://{shadow}\n{secret} unknown line\nFILTER: {secret}\n")
    _script(d / "noisy", f"echo {secret} >&2\nenv >&2\nexit 3\n")
    (d / "linked.url").symlink_to(shadow)  # (a .url file that is a link to a secret: its first line is no URL)
    env_marker = "ENVMARKER_" + secret
    os.environ["PMDA_PY_TEST_MARKER"] = env_marker
    try:
        status, logs = await _first_round(tmp_path, workers="1")
    finally:
        del os.environ["PMDA_PY_TEST_MARKER"]
    text = repr(logs) + repr(status)
    assert secret not in text and "root:" not in text
    assert "status 3" in status["noisy"] and "bytes on stderr" in status["noisy"]
    assert "no http, https or file URL" in status["linked"]
    assert any(e["event"] == "openmetrics_parse" and e["source"] == "f" for e in logs)
    assert any(e["event"] == "openmetrics_config" for e in logs)


@pytest.mark.parametrize("workers", ["0", "1"])
async def test_header_lines_http_cannot_send_fail_their_source_and_never_show_the_header(
    tmp_path: Path, workers: str
) -> None:
    """A ``HEADER:`` line's value ends with its text, not with the blanks
    an editor left after it (pmdaopenmetrics sends that header); a header
    HTTP cannot send (``=`` where ``:`` was meant, a control character)
    fails its source with the line's number, and neither the status nor a
    log line shows the header's text (a token, a password)."""
    secret = "SECRETVALUE"
    with ControlledServer() as server:
        for k in ("trailing", "equals", "ctrl", "nonascii"):
            server.routes[k] = Route(GOOD)
        d = tmp_path / "config.d"
        write_sources(
            d,
            {
                "trailing": f"{server.url('trailing')}\nHEADER: Authorization: Bearer {secret} \t\n",
                "equals": f"{server.url('equals')}\n# a comment\nHEADER: Authorization=Bearer {secret}\n",
                "ctrl": f"{server.url('ctrl')}\nHEADER: X-Token: {secret}\x00\n",
                "nonascii": f"{server.url('nonascii')}\nHEADER: X-Token: {secret}\u00e9\n",
            },
        )
        status, logs = await _first_round(tmp_path, workers)
        sent = [r.get("authorization") for r in server.routes["trailing"].requests]
    assert status["trailing"] == "success" and sent == [f"Bearer {secret}"]
    for name, line in (("equals", 3), ("ctrl", 2), ("nonascii", 2)):
        assert f"line {line}" in status[name] and "HEADER" in status[name], status[name]
        assert server.routes[name].hits == 0
    text = repr(logs) + repr(status)
    assert secret not in text


async def test_too_many_sources_logged_once(tmp_path: Path) -> None:
    state = tmp_path / "state"
    state.mkdir()
    full = ["control", *(f"s{k}" for k in range(1, 0x1000))]
    (state / "144.0.py").write_bytes(NameTable(0xFFF, full).dumps())
    d = tmp_path / "config.d"
    d.mkdir()
    for k in range(5):
        (d / f"extra{k}.url").write_text("file:///nonexistent\n")
    table = make_table(tmp_path, interval="0.05", workers="0")
    with structlog.testing.capture_logs() as logs:
        await table.startup(OM_CONTEXT)
        await trio.sleep(0.6)  # a dozen rescans
        await table.shutdown()
    refused = [e for e in logs if e["event"] == "openmetrics_source_refused"]
    assert len(refused) == 1 and refused[0]["sources"] == 5


def test_series_ttl_is_an_option() -> None:
    t = OpenMetricsTable(dir="/nonexistent", max_bytes="5", max_series="7", max_label_bytes="9", series_ttl="2.5")
    assert (t.limits.max_bytes, t.limits.max_series, t.limits.max_label_bytes, t.limits.series_ttl) == (5, 7, 9, 2.5)


def test_the_limits_are_the_documented_ones() -> None:
    """docs/openmetrics.md's figures: 16 MiB documents, 50 000 series and
    8 MiB of names and labels per source, 10 000 instances per metric, a
    series_ttl of 3600 s."""
    limits = OpenMetricsTable(dir="/nonexistent").limits
    assert limits.max_bytes == 16 * 1024 * 1024 and limits.max_series == 50_000
    assert limits.max_label_bytes == 8 * 1024 * 1024 and limits.max_instances == 10_000
    assert limits.series_ttl == 3600.0


def test_the_timers_are_the_documented_ones() -> None:
    """docs/openmetrics.md: each source scraped every 10 s, under a 2 s
    deadline, at most 100 scrapes at once (pmdaopenmetrics' cap) unless
    told otherwise; the options set them."""
    t = OpenMetricsTable(dir="/nonexistent")
    assert (t.interval, t.timeout, t.concurrency) == (10.0, 2.0, 100)
    t = OpenMetricsTable(dir="/nonexistent", interval="3", timeout="0.5", concurrency="7")
    assert (t.interval, t.timeout, t.concurrency) == (3.0, 0.5, 7)


@pytest.mark.parametrize("workers", ["0", "1"])
async def test_scripts_process_groups_end_with_the_agent(tmp_path: Path, workers: str) -> None:
    pids = tmp_path / "pids"
    d = tmp_path / "config.d"
    d.mkdir()
    _script(d / "slow", f"for i in $(seq 5); do sleep 60 & echo $! >> {pids}; done\necho x 1\nsleep 60\n")
    table = make_table(tmp_path, interval="60", timeout="30", workers=workers)
    await table.startup(OM_CONTEXT)  # (not ready: the script is still running)
    with trio.fail_after(10):
        while not pids.exists() or len(pids.read_text().split()) < 5:  # noqa: ASYNC110
            await trio.sleep(0.05)
    children = [int(p) for p in pids.read_text().split()]
    assert all(_alive(p) for p in children)
    await table.shutdown()
    with trio.fail_after(10):
        while [p for p in children if _alive(p)]:  # noqa: ASYNC110
            await trio.sleep(0.05)


def test_body_decoder_forms() -> None:
    import gzip
    import zlib

    from pmda_py.openmetrics.decode import BodyDecoder, BodyRefused

    doc = GOOD * 50

    def decode(coding: str | None, body: bytes, limit: int = 1 << 20, step: int = 7) -> bytes:
        d = BodyDecoder(coding, limit)
        for k in range(0, len(body), step):
            d.feed(body[k : k + step])
        return d.finish()

    raw = zlib.compressobj(9, zlib.DEFLATED, -zlib.MAX_WBITS)
    assert decode(None, doc) == decode("identity", doc) == doc
    assert decode("gzip", gzip.compress(doc)) == decode("X-GZIP", gzip.compress(doc)) == doc
    assert decode("gzip", gzip.compress(doc[:100]) + gzip.compress(doc[100:])) == doc  # two members
    assert decode("deflate", zlib.compress(doc)) == doc
    assert decode("deflate", raw.compress(doc) + raw.flush()) == doc  # raw deflate, as HTTP clients accept
    assert decode("identity, gzip", gzip.compress(doc)) == doc
    for coding, body, why in [
        ("gzip, gzip", gzip.compress(gzip.compress(doc)), "stacked"),
        ("br", doc, "unknown"),
        ("gzip", doc, "undecodable"),
        ("gzip", gzip.compress(doc), "larger than 100 bytes"),
        (None, doc, "larger than 100 bytes"),
        ("x" * 500 + "\n\x1b", doc, "unknown"),
    ]:
        with pytest.raises(BodyRefused, match=why) as info:
            decode(coding, body, limit=100 if "larger" in why else 1 << 20)
        assert len(str(info.value)) < 120 and "\x1b" not in str(info.value)


async def test_id_file_that_cannot_be_moved_aside_is_never_written_over(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    state = tmp_path / "state"
    state.mkdir()
    (state / "144.0.py").write_bytes(NameTable(0xFFF, ["control", "c"]).dumps())
    (state / "144.1.py").write_bytes(b"corrupt")

    def cannot(path: str, suffix: str = "bad") -> str:
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(openmetrics_state, "move_aside", cannot)
    with ControlledServer() as server:
        server.routes["c"] = Route(b"m_b 1\nm_c 2\n")
        write_sources(tmp_path / "config.d", {"c": server.url("c") + "\n"})
        table = make_table(tmp_path, interval="60", workers="0")
        with structlog.testing.capture_logs() as logs:
            await table.startup(OM_CONTEXT)
            await table.wait_ready()
            await table.sync_state()
            values = await fetch(table, "c.m_b", "c.m_c")
            await table.shutdown()
    assert values == {"c.m_b": 1.0, "c.m_c": 2.0}  # served all the same
    assert (state / "144.1.py").read_bytes() == b"corrupt"
    bad = [e for e in logs if e["event"] == "openmetrics_state_unreadable"]
    assert len(bad) == 1 and "cannot move it aside" in bad[0]["error"] and "ids not saved" in bad[0]["error"]


HUNG_WORKER = """\
import subprocess, sys, time
pids = sys.argv[1]
script = f"for i in 1 2 3; do sleep 60 & echo $! >> {pids}; done; sleep 60"
subprocess.Popen(["/bin/sh", "-c", script], stdin=subprocess.DEVNULL, start_new_session=True)
time.sleep(60)  # hung mid-scrape
"""


async def test_a_hung_worker_killed_takes_its_scripts_along(tmp_path: Path) -> None:
    """A worker the pool must SIGKILL (hung) while a script source runs:
    the script and its children (a session of their own, out of the
    worker's reach once it is dead) are killed with it."""
    from pmda_py.openmetrics.procs import kill_quietly

    pids = tmp_path / "pids"
    worker = await trio.lowlevel.open_process([sys.executable, "-c", HUNG_WORKER, str(pids)])
    try:
        with trio.fail_after(10):
            while not pids.exists() or len(pids.read_text().split()) < 3:  # noqa: ASYNC110
                await trio.sleep(0.05)
        children = [int(p) for p in pids.read_text().split()]
        assert all(_alive(p) for p in children)
        assert kill_quietly(worker) is None
        await worker.wait()
        with trio.fail_after(5):
            while [p for p in children if _alive(p)]:  # noqa: ASYNC110  # (SIGKILL is delivered at once)
                await trio.sleep(0.05)
    finally:
        with contextlib.suppress(ProcessLookupError):
            worker.kill()
        for p in [int(p) for p in pids.read_text().split()] if pids.exists() else []:
            with contextlib.suppress(OSError):
                os.kill(p, signal.SIGKILL)  # (only if the test failed: started by this test)


@pytest.mark.parametrize(
    ("key", "value", "why"),
    [
        ("max_series", "lots", "not a whole number: 'lots'"),
        ("max_bytes", "0", "'0' is less than 1"),
        ("max_label_bytes", "1.5", "not a whole number: '1.5'"),
        ("concurrency", "0", "'0' is less than 1"),
        ("workers", "-1", "'-1' is less than 0"),
        ("max_workers", "many", "not a whole number: 'many'"),
        ("series_ttl", "-3", "'-3' is not a number of seconds above 0"),
        ("worker_grace", "soon", "not a number: 'soon'"),
        ("domain", "x", "not a whole number: 'x'"),
    ],
)
def test_a_bad_option_names_itself(tmp_path: Path, key: str, value: str, why: str) -> None:
    """A bad value in a ``[table]`` section is one line naming the file,
    the section, the option and the value (not Python's own wording), and
    the agent does not start."""
    with pytest.raises(ValueError, match=f"^{key}: {re.escape(why)}$"):
        OpenMetricsTable(dir="/nonexistent", **{key: value})
    conf = tmp_path / "om.conf"
    conf.write_text(f"[table om]\ntable = openmetrics\nmount = om\ndir = {tmp_path}\n{key} = {value}\n")
    r = subprocess.run(
        pmda_py_argv("run", "-c", str(conf), "-l", str(tmp_path / "om.log")),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        timeout=60,
    )
    assert r.returncode == 1
    (line,) = r.stderr.splitlines()
    assert line.startswith(f"pmda-py run: {conf}:") and f"{key}: {why}" in line, line


async def test_a_url_file_over_the_cap_is_refused_whole(tmp_path: Path) -> None:
    """A ``.url`` file over 1 MiB fails its source with the reason (it was
    cut at 1 MiB without a word, a FILTER: or HEADER: line maybe cut in
    half); the other sources carry on, and the file is read again once it
    changes."""
    from pmda_py.openmetrics.exposition import Limits
    from pmda_py.openmetrics.scrape import URL_CONFIG_MAX, Scraper

    doc = tmp_path / "doc.txt"
    doc.write_text("m 1\n")
    big, small = tmp_path / "big.url", tmp_path / "small.url"
    pad = "# a comment\n" * (URL_CONFIG_MAX // 12)
    big.write_text(f"file://{doc}\n{pad}FILTER: EXCLUDE METRIC ^m$\n")
    assert big.stat().st_size > URL_CONFIG_MAX
    small.write_text(f"file://{doc}\n")
    scraper = Scraper(str(tmp_path / "state"), 144, Limits(), timeout=5)
    try:
        refused = await scraper.scrape("big", 1, str(big), False)
        other = await scraper.scrape("small", 2, str(small), False)
        big.write_text(f"file://{doc}\n")
        os.utime(big, ns=(0, 0))  # (the change time moves whatever the times are set to)
        again = await scraper.scrape("big", 1, str(big), False)
    finally:
        await scraper.aclose()
    assert refused.outcome == "fail" and f"larger than {URL_CONFIG_MAX} bytes" in refused.status, refused.status
    assert other.outcome == "ok", other.status
    assert again.outcome == "ok", again.status


@pytest.mark.parametrize("workers", ["0", "1"])
async def test_a_failure_whose_details_change_is_logged_once(tmp_path: Path, workers: str) -> None:
    """A script that fails the same way every scrape, writing a different
    number of bytes on stderr each time: its status follows the count, but it
    is one state, logged once (every scrape was logged, the count differing)."""
    d = tmp_path / "config.d"
    d.mkdir()
    count = tmp_path / "count"
    count.write_text("0")
    _script(d / "vary", f"n=$(( $(cat {count}) + 1 )); echo $n > {count}; head -c $n /dev/zero >&2; exit 3\n")
    table = make_table(tmp_path, interval="0.1", timeout="5", workers=workers)
    statuses: set[str] = set()
    with structlog.testing.capture_logs() as logs:
        await table.startup(OM_CONTEXT)
        with trio.fail_after(20):
            while len(statuses) < 3:
                status = (await _status(table)).get("vary", "")
                if "exited" in status:  # (not before its first scrape)
                    statuses.add(status)
                await trio.sleep(0.05)
        await table.shutdown()
    assert all(re.search(r"exited with status 3 \(\d+ bytes on stderr\)$", s) for s in statuses), statuses
    failed = [e for e in logs if e["event"] == "openmetrics_source_failed"]
    assert len(failed) == 1, failed


@pytest.mark.parametrize("workers", ["0", "1"])
async def test_credentials_in_a_url_never_reach_the_status_or_the_log(tmp_path: Path, workers: str) -> None:
    """``http://user:password@host/...``: a failing source's status (a metric
    every PCP client may read) and its log line show the URL without the
    credentials (pmdaopenmetrics shows requests' text, password and all)."""
    secret = "PASSWORDVALUE"
    with ControlledServer() as server:
        server.routes["denied"] = Route(GOOD, status=401)
        with_creds = server.url("denied").replace("://", f"://alice:{secret}@", 1)
        d = tmp_path / "config.d"
        write_sources(d, {"denied": f"{with_creds}\n"})
        status, logs = await _first_round(tmp_path, workers)
        hits = server.routes["denied"].hits
    assert hits >= 1  # the request went out, credentials and all
    assert "401 Client Error" in status["denied"] and "://***@127.0.0.1" in status["denied"], status
    assert secret not in repr(logs) + repr(status)

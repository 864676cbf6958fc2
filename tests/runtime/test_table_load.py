"""Tables that misbehave at load (issue 19, case 7): stdout is protected
before any table module is imported, ``SystemExit``/``KeyboardInterrupt``/
exceptions at import or in ``startup()`` are one line on stderr and in the
log naming the table, and a slow import delays neither CREDS nor, on
SIGHUP, the fetches of the running tables."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
import trio

from pmda_py.errors import PmErr
from pmda_py.pmapi import pmid
from pmda_py.testing.client import PmdaReplyError, open_pipe_pmda, open_socket_pmda
from pmda_py.testing.support import pmda_py_argv
from pmda_py.wire import CredsPdu, ErrorPdu

TABLE = """\
import os, sys, time
from pmda_py.table import Table, Metric
from pmda_py.pmapi import PmType
{at_import}
class T(Table):
    m = Metric('x', cluster=40, item=0, type=PmType.U32)
    def __init__(self):
        super().__init__()
        {at_init}
    async def startup(self, context):
        {at_startup}
    async def fetch(self, request):
        return {{self.m: 5}}
"""


def _module(tmp_path: Path, name: str, at_import: str = "", at_init: str = "pass", at_startup: str = "pass") -> None:
    (tmp_path / f"{name}.py").write_text(TABLE.format(at_import=at_import, at_init=at_init, at_startup=at_startup))


def _env(tmp_path: Path) -> dict[str, str]:
    return dict(os.environ, PYTHONPATH=f"{tmp_path}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")


def _cmd(tmp_path: Path, *tables: str, extra: tuple[str, ...] = ()) -> list[str]:
    args = pmda_py_argv("run", "-d", "200", "-l", str(tmp_path / "pmda.log"), "--state-dir", str(tmp_path / "state"))
    for t in tables:
        args += ["--table", t]
    return [*args, *extra]


def _started(tmp_path: Path, *tables: str) -> subprocess.CompletedProcess[str]:
    """The agent with these tables, on a pipe whose pmcd goes away at once."""
    return subprocess.run(
        _cmd(tmp_path, *tables),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
        env=_env(tmp_path),
    )


@pytest.mark.parametrize("where", ["import", "init", "startup"])
def test_print_at_load_never_reaches_the_pdu_pipe(tmp_path: Path, where: str) -> None:
    """The client reads CREDS, not "PRIN..." and the agent serves on."""
    said = f"print('careless {where}' * 100)"
    _module(tmp_path, "loud", **{f"at_{where}": said})

    async def go() -> None:
        async with open_pipe_pmda(_cmd(tmp_path, "loud:T=loud", "simple=simple"), env=_env(tmp_path)) as pmda:
            assert pmda.creds is not None  # the first PDU was our CREDS
            v = await pmda.fetch_values(["loud.x", "simple.numfetch"])
            assert v == {"loud.x": 5, "simple.numfetch": 1}

    trio.run(go)
    assert f"careless {where}" in (tmp_path / "pmda.log").read_text()  # it went to the log


def test_print_at_load_in_socket_mode_goes_to_the_log(tmp_path: Path) -> None:
    """In socket mode stdout is no PDU channel, but it is pmcd's log (or
    the journal) all the same: a table's print() lands in the agent's log
    there too, as in pipe mode."""
    _module(tmp_path, "loud", at_import="print('careless import')", at_startup="print('careless startup')")
    path = tmp_path / "pmda.sock"
    cmd = _cmd(tmp_path, "loud:T=loud", extra=("-u", str(path)))
    out = tmp_path / "stdout"

    async def go() -> None:
        with out.open("wb") as stdout:
            async with open_socket_pmda(unix=str(path), command=cmd, env=_env(tmp_path), stderr=stdout) as pmda:
                assert (await pmda.fetch_values(["loud.x"])) == {"loud.x": 5}

    trio.run(go)
    log = (tmp_path / "pmda.log").read_text()
    assert "careless import" in log and "careless startup" in log, log
    assert "careless" not in out.read_text()


@pytest.mark.parametrize(
    ("raise_", "shown"),
    [
        ("raise SystemExit(3)", "SystemExit: 3"),
        ("raise KeyboardInterrupt", "KeyboardInterrupt"),
        ("raise RuntimeError('no config here')", "RuntimeError: no config here"),
    ],
)
@pytest.mark.parametrize("where", ["import", "init"])
def test_raise_at_load_is_one_line_naming_the_table(tmp_path: Path, raise_: str, shown: str, where: str) -> None:
    """A table that cannot be loaded is a configuration error: the agent
    exits 1 (not the module's status) before it speaks, one line on stderr
    and one in the log, naming the table."""
    _module(tmp_path, "quits", **{f"at_{where}": raise_})
    r = _started(tmp_path, "quits:T=q", "simple=simple")
    assert r.returncode == 1, r
    lines = r.stderr.splitlines()
    assert len(lines) == 1, r.stderr
    assert lines[0].startswith("pmda-py run: table quits:T (quits:T): ") and shown in lines[0], lines[0]
    assert r.stdout == ""
    log = (tmp_path / "pmda.log").read_text()
    errors = [line for line in log.splitlines() if " config_error " in line]
    assert len(errors) == 1 and "quits:T" in errors[0] and shown in errors[0], log
    assert "Traceback" not in log


@pytest.mark.parametrize(
    ("raise_", "shown"),
    [("raise SystemExit(3)", "SystemExit: 3"), ("raise KeyboardInterrupt", "KeyboardInterrupt")],
)
def test_raise_in_startup_is_one_line_and_the_agent_serves_on(tmp_path: Path, raise_: str, shown: str) -> None:
    _module(tmp_path, "quits", at_startup=raise_)
    stderr = tmp_path / "stderr"

    async def go() -> None:
        with stderr.open("w") as err:
            async with open_pipe_pmda(
                _cmd(tmp_path, "quits:T=q", "simple=simple"), env=_env(tmp_path), stderr=err
            ) as p:
                v = await p.fetch_values(["q.x", "simple.numfetch"])
                assert v == {"q.x": 5, "simple.numfetch": 1}

    trio.run(go)
    lines = stderr.read_text().splitlines()
    assert lines == [f"pmda-py run: table quits:T: startup() failed: {shown}"], lines
    log = (tmp_path / "pmda.log").read_text()
    assert "table_startup_failed" in log and shown in log and "reason=eof" in log


@pytest.mark.slow
def test_slow_import_delays_neither_creds_nor_the_other_tables(tmp_path: Path) -> None:
    """A module that takes 60 s to import: CREDS goes out at once (1.5 s
    at most); a request waits 2 s, then a PMNS request meets PM_ERR_AGAIN
    and a FETCH PM_ERR_PMDANOTREADY (pmcd 6.0 expects PMDAREADY only after
    the latter); at the load timeout PMDAREADY comes and the agent serves
    the other tables without the slow one."""
    _module(tmp_path, "slow", at_import="time.sleep(60)")
    stderr = tmp_path / "stderr"

    async def go() -> None:
        cmd = _cmd(tmp_path, "simple=simple", "slow:T=slow", extra=("--load-timeout", "8"))
        with stderr.open("w") as err:
            t0 = time.monotonic()
            async with open_pipe_pmda(cmd, env=_env(tmp_path), stderr=err) as pmda:
                assert time.monotonic() - t0 < 3.0  # pmcd's CREDS timeout: 3 s
                with pytest.raises(PmdaReplyError) as raised:
                    await pmda.lookup(["simple.numfetch"])
                assert raised.value.code == PmErr.AGAIN
                with pytest.raises(PmdaReplyError) as raised:
                    await pmda.fetch([pmid(200, 0, 0)])
                assert raised.value.code == PmErr.PMDANOTREADY
                ready = await pmda.receive(timeout=10)
                assert isinstance(ready, ErrorPdu) and ready.code == PmErr.PMDAREADY
                assert (await pmda.fetch_values(["simple.numfetch"]))["simple.numfetch"] == 1
                with pytest.raises(PmdaReplyError):
                    await pmda.lookup(["slow.x"])

    trio.run(go)
    lines = stderr.read_text().splitlines()
    said = "pmda-py run: table slow:T (slow:T): import did not finish within 8 s; serving without it"
    assert lines == [f"{said} (a SIGHUP tries again)"]
    assert "table_load_timeout" in (tmp_path / "pmda.log").read_text()


@pytest.mark.slow
async def test_slow_import_on_sighup_does_not_stall_fetches(tmp_path: Path) -> None:
    _module(tmp_path, "slow", at_import="time.sleep(60)")
    conf = tmp_path / "pmda.conf"
    base = "[pmda]\nname = t\ndomain = 200\n\n[table simple]\nmount = simple\n"
    conf.write_text(base)
    cmd = pmda_py_argv("run", "-c", str(conf), "-l", str(tmp_path / "pmda.log"), "--load-timeout", "2")
    async with open_pipe_pmda(cmd, env=_env(tmp_path)) as pmda:
        assert (await pmda.fetch_values(["simple.numfetch"]))["simple.numfetch"] == 1
        conf.write_text(base + "\n[table slow]\ntable = slow:T\nmount = slow\n")
        os.kill(pmda.pid, signal.SIGHUP)
        t0 = time.monotonic()
        n = 1
        while time.monotonic() - t0 < 2.5:  # the import runs in its thread meanwhile
            with trio.fail_after(1.0):  # a stalled loop would not answer within this
                n = (await pmda.fetch_values(["simple.numfetch"]))["simple.numfetch"]
            await trio.sleep(0.1)
        assert n > 10
        with trio.fail_after(10):
            while "reload_failed" not in (tmp_path / "pmda.log").read_text():  # noqa: ASYNC110
                await trio.sleep(0.1)
        assert (await pmda.fetch_values(["simple.numfetch"]))["simple.numfetch"] == n + 1  # the old tables, kept
    assert "import did not finish within 2 s" in (tmp_path / "pmda.log").read_text()


@pytest.mark.slow
def test_creds_before_the_tables_with_notready(tmp_path: Path) -> None:
    """pmcd.conf ``notready``: CREDS at once, PMDAREADY once loaded."""
    _module(tmp_path, "lazy", at_import="time.sleep(2)")

    async def go() -> None:
        cmd = _cmd(tmp_path, "simple=simple", "lazy:T=lazy", extra=("--notready",))
        async with open_pipe_pmda(cmd, env=_env(tmp_path)) as pmda:
            assert isinstance(pmda.creds, CredsPdu)
            ready = await pmda.receive(timeout=10)
            assert isinstance(ready, ErrorPdu) and ready.code == PmErr.PMDAREADY
            assert (await pmda.fetch_values(["lazy.x"]))["lazy.x"] == 5

    trio.run(go)


def test_a_long_message_is_one_bounded_line(tmp_path: Path) -> None:
    """What a table raised is said on one line, its message cut at 300
    characters: a module that puts a whole file in its exception does not
    copy it into pmcd's log."""
    _module(tmp_path, "chatty", at_import="raise RuntimeError('secret line\\n' * 1000)")
    r = _started(tmp_path, "chatty:T=c")
    assert r.returncode == 1
    lines = r.stderr.splitlines()
    assert len(lines) == 1 and "RuntimeError: secret line secret line" in lines[0], r.stderr
    assert len(lines[0]) < 400 and lines[0].count("secret line") <= 30
    log = (tmp_path / "pmda.log").read_text()
    assert log.count("secret line") <= 30, log


def test_sigterm_is_heard_while_a_reload_imports(tmp_path: Path) -> None:
    """A reload stuck in a slow import does not keep SIGTERM waiting, and
    the abandoned import thread does not keep the process alive."""
    _module(tmp_path, "slow", at_import="time.sleep(60)")
    conf = tmp_path / "pmda.conf"
    base = "[pmda]\nname = t\ndomain = 200\n\n[table simple]\nmount = simple\n"
    conf.write_text(base)
    log = tmp_path / "pmda.log"
    cmd = pmda_py_argv("run", "-c", str(conf), "-l", str(log), "-u", str(tmp_path / "s.sock"))
    proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, env=_env(tmp_path))
    try:
        deadline = time.monotonic() + 15
        while "tables_mounted" not in (log.read_text() if log.exists() else ""):
            assert time.monotonic() < deadline and proc.poll() is None
            time.sleep(0.05)
        conf.write_text(base + "\n[table slow]\ntable = slow:T\nmount = slow\n")
        proc.send_signal(signal.SIGHUP)
        while "sighup" not in log.read_text():
            assert time.monotonic() < deadline
            time.sleep(0.05)
        time.sleep(0.3)  # inside the import now
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=5) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert "reason=SIGTERM" in log.read_text()


def test_sigterm_is_heard_while_the_tables_load(tmp_path: Path) -> None:
    _module(tmp_path, "slow", at_import="time.sleep(60)")
    log = tmp_path / "pmda.log"
    cmd = _cmd(tmp_path, "simple=simple", "slow:T=slow", extra=("-u", str(tmp_path / "s.sock")))
    proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, env=_env(tmp_path))
    try:
        deadline = time.monotonic() + 15
        while "listening" not in (log.read_text() if log.exists() else ""):
            assert time.monotonic() < deadline and proc.poll() is None
            time.sleep(0.05)
        time.sleep(0.3)  # inside the import now
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=5) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    text = log.read_text()
    assert "reason=SIGTERM" in text and "tables_mounted" not in text


@pytest.mark.slow
def test_a_startup_that_overruns_is_one_line_and_the_table_serves(tmp_path: Path) -> None:
    """A ``startup()`` still running at its deadline (the table's, at least
    2 s) is cut short: one line said and logged, and the table serves what
    it can, beside the others."""
    _module(tmp_path, "stuck", at_startup="import trio; await trio.sleep(60)")
    stderr = tmp_path / "stderr"

    async def go() -> None:
        cmd = _cmd(tmp_path, "simple=simple", "stuck:T=stuck", extra=("--notready",))
        with stderr.open("w") as err:
            t0 = time.monotonic()
            async with open_pipe_pmda(cmd, env=_env(tmp_path), stderr=err) as pmda:
                ready = await pmda.receive(timeout=20)
                assert isinstance(ready, ErrorPdu) and ready.code == PmErr.PMDAREADY
                assert 2.0 <= time.monotonic() - t0 < 15
                v = await pmda.fetch_values(["stuck.x", "simple.numfetch"])
                assert v == {"stuck.x": 5, "simple.numfetch": 1}

    trio.run(go)
    lines = stderr.read_text().splitlines()
    assert lines == ["pmda-py run: table stuck:T: startup() overran 2 s; serving what it can"], lines
    assert "table_startup_timeout" in (tmp_path / "pmda.log").read_text()


def _until(proc: subprocess.Popen[bytes], log: Path, word: str, deadline: float) -> None:
    while word not in (log.read_text() if log.exists() else ""):
        assert time.monotonic() < deadline and proc.poll() is None, (word, log.read_text() if log.exists() else "")
        time.sleep(0.05)


@pytest.mark.slow
def test_a_table_left_out_at_its_load_timeout_comes_with_a_sighup(tmp_path: Path) -> None:
    """A table whose import overran the load timeout is left out (the
    others serve); once its import can finish, a SIGHUP mounts it."""
    flag = tmp_path / "hold"
    flag.touch()
    _module(tmp_path, "late", at_import=f"while os.path.exists({str(flag)!r}): time.sleep(0.05)")
    log = tmp_path / "pmda.log"
    conf = tmp_path / "pmda.conf"
    conf.write_text(
        "[pmda]\nname = t\ndomain = 200\nload_timeout = 2\n\n[table simple]\nmount = simple\n\n"
        "[table late]\ntable = late:T\nmount = late\n"
    )
    sock = tmp_path / "s.sock"
    cmd = pmda_py_argv("run", "-c", str(conf), "-l", str(log), "-u", str(sock), "--standalone")
    proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, env=_env(tmp_path))
    try:
        deadline = time.monotonic() + 20
        _until(proc, log, "tables_mounted", deadline)
        assert "table_load_timeout" in log.read_text()

        async def fetch(names: list[str]) -> dict[str, object]:
            async with open_socket_pmda(unix=str(sock)) as pmda:
                return await pmda.fetch_values(names)

        assert trio.run(fetch, ["simple.numfetch"])["simple.numfetch"] == 1  # the others serve
        with pytest.raises(PmdaReplyError):  # left out: its name is unknown
            trio.run(fetch, ["late.x"])
        flag.unlink()  # the import finishes in its thread
        time.sleep(0.5)
        proc.send_signal(signal.SIGHUP)
        _until(proc, log, "reloaded", deadline)
        assert trio.run(fetch, ["late.x"])["late.x"] == 5
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=5) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


@pytest.mark.slow
def test_a_sighup_while_the_tables_load_is_heard_and_done_after(tmp_path: Path) -> None:
    """SIGHUP during the first load neither ends the agent nor is lost: the
    reload waits for the tables of the start, then runs."""
    flag = tmp_path / "hold"
    flag.touch()
    _module(tmp_path, "late", at_import=f"while os.path.exists({str(flag)!r}): time.sleep(0.05)")
    log = tmp_path / "pmda.log"
    conf = tmp_path / "pmda.conf"
    conf.write_text("[pmda]\nname = t\ndomain = 200\n\n[table late]\ntable = late:T\nmount = late\n")
    cmd = pmda_py_argv("run", "-c", str(conf), "-l", str(log), "-u", str(tmp_path / "s.sock"))
    proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, env=_env(tmp_path))
    try:
        deadline = time.monotonic() + 20
        _until(proc, log, "listening", deadline)
        time.sleep(0.3)  # inside the import now
        proc.send_signal(signal.SIGHUP)
        _until(proc, log, "reload_deferred", deadline)
        assert "tables_mounted" not in log.read_text()
        flag.unlink()
        _until(proc, log, "reloaded", deadline)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=5) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


TWO = """\
from pmda_py.table import Table, Metric, InDom
from pmda_py.pmapi import PmType
class A(Table):
    d = InDom({a_serial}, {{0: "x"}})
    m = Metric('a', cluster={a_cluster}, item=0, type=PmType.U32, indom=d)
class B(Table):
    d = InDom({b_serial}, {{0: "y"}})
    m = Metric('b', cluster={b_cluster}, item=0, type=PmType.U32, indom=d)
"""


@pytest.mark.parametrize(
    ("clusters", "serials", "said"),
    [((1, 1), (1, 2), "both use cluster 1"), ((1, 2), (3, 3), "both use indom serial 3")],
)
def test_tables_colliding_in_one_domain_are_one_clear_error(
    tmp_path: Path, clusters: tuple[int, int], serials: tuple[int, int], said: str
) -> None:
    """docs/tables.md: clusters and indom serials that collide are refused at
    start-up with one clear error (the agent exits 1 before it speaks)."""
    (tmp_path / "two.py").write_text(
        TWO.format(a_cluster=clusters[0], b_cluster=clusters[1], a_serial=serials[0], b_serial=serials[1])
    )
    r = _started(tmp_path, "two:A=a", "two:B=b")
    assert r.returncode == 1, r
    assert r.stdout == ""
    lines = r.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("pmda-py run: ") and said in lines[0], r.stderr

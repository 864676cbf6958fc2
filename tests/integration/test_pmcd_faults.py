"""Under a real pmcd: a slow table and a crashing table do not stop the
others and pmcd keeps the agent; ``notready`` start works."""

from __future__ import annotations

import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from pmda_py.testing.support import pmda_py_line
from tests.conftest import REPO
from tests.integration.pcpbed import PrivatePmcd

pytestmark = pytest.mark.pcp


def _pmns(top: str, domain: int) -> str:
    text = Path("/var/lib/pcp/pmns/root_pmcd").read_text()
    return text.replace("root {\n    pmcd\n}", f"root {{\n    pmcd\n    {top}\t{domain}:*:*\n}}", 1)


@pytest.fixture
def workdir() -> Iterator[Path]:
    root = Path(tempfile.mkdtemp(prefix="pmda_py-pmcd-"))
    root.chmod(0o755)
    yield root
    shutil.rmtree(root, ignore_errors=True)


def _start(workdir: Path, pcp_env: dict[str, str], line: str) -> PrivatePmcd:
    """A private pmcd with one agent line for ``t`` (domain 251), once
    ``t.simple.numfetch`` is described (no FETCH reaches the agent yet)."""
    pmcd = PrivatePmcd(workdir, [line], _pmns("t", 251), env=pcp_env)
    pmcd.start()
    try:
        pmcd.wait("t.simple.numfetch", desc_only=True)
    except BaseException:
        pmcd.stop()
        raise
    return pmcd


def _start_config(workdir: Path, pcp_env: dict[str, str], tables: str) -> PrivatePmcd:
    """:func:`_start` with ``pmda-py run -c`` of a config mounting ``tables``."""
    cfg = workdir / "t.conf"
    # the fault tables live in the test package: the repository is on the agent's path
    cfg.write_text(
        f"[pmda]\nname = faulty\ndomain = 251\npythonpath = {REPO}\n[table simple]\nmount = t.simple\n" + tables
    )
    return _start(
        workdir,
        pcp_env,
        "t 251 pipe binary " + pmda_py_line("run", "-c", cfg, "-l", workdir / "t.log", "--state-dir", workdir),
    )


def test_slow_and_crashing_tables_under_pmcd(workdir: Path, pcp_env: dict[str, str]) -> None:
    pmcd = _start_config(
        workdir,
        pcp_env,
        "[table slow]\ntable = tests.tables.faults:SlowTable\nmount = t.slow\n"
        "deadline = 1.0\nsleep = 30\n[table crash]\n"
        "table = tests.tables.faults:CrashTable\nmount = t.crash\n",
    )
    try:
        t0 = time.monotonic()
        r = pmcd.tool("pminfo", "-f", "t.slow.value", "t.crash.boom", "t.simple.numfetch", check=False)
        elapsed = time.monotonic() - t0
        assert elapsed < 5, "pmcd's timeout must never be reached"
        out = r.stdout + r.stderr
        assert "t.slow.value\nError: Try again. Information not currently available" in out, out
        assert "t.crash.boom\nError: Try again. Information not currently available" in out, out
        assert "t.simple.numfetch\n    value 1" in out, out
        # a table returning the wrong type: that metric fails, its neighbours do not
        r = pmcd.tool("pminfo", "-f", "t.crash.wrongtype", "t.crash.fine", check=False)
        out = r.stdout + r.stderr
        assert "t.crash.wrongtype\nError: Unknown or illegal metric type" in out, out
        assert "t.crash.fine\n    value 7" in out, out
        # pmcd kept the agent: later requests are still answered by the same process
        for k in range(2, 5):  # numfetch counts fetches that reach the simple table
            r = pmcd.tool("pminfo", "-f", "t.simple.numfetch")
            assert f"value {k}" in r.stdout
        log = pmcd.log_text()
        assert "Cleanup" not in log and "timeout" not in log.lower(), log
        ours = (workdir / "t.log").read_text()
        assert "table_timeout" in ours and "table_exception" in ours and "table_bad_value" in ours
    finally:
        pmcd.stop()


def test_notready_start(workdir: Path, pcp_env: dict[str, str]) -> None:
    line = "t 251 pipe binary notready " + pmda_py_line(
        "run", "-d", "251", "--notready", "--table", "simple=t.simple", "-l", workdir / "t.log", "--state-dir", workdir
    )
    pmcd = _start(workdir, pcp_env, line)
    try:
        r = pmcd.tool("pminfo", "-f", "t.simple.numfetch")
        assert "value 1" in r.stdout
        ours = (workdir / "t.log").read_text()
        assert (
            ours.index("notready")
            < ours.index("tables_mounted")
            < ours.index("ready\n" if "ready\n" in ours else "[info     ] ready")
        )
        assert "Cleanup" not in pmcd.log_text()
    finally:
        pmcd.stop()


@pytest.mark.slow
def test_pmcd_killed_mid_fetch_then_restarted(workdir: Path, pcp_env: dict[str, str]) -> None:
    """pmcd dies (SIGKILL) while our agent is answering a slow fetch: the agent
    notices the closed pipe and exits cleanly (no orphan); a new pmcd starts
    a new agent that serves normally."""
    import signal as _signal
    import subprocess as _sp

    pmcd = _start_config(
        workdir,
        pcp_env,
        "[table slow]\ntable = tests.tables.faults:SlowTable\nmount = t.slow\ndeadline = 3\nsleep = 1.5\n",
    )
    try:
        agent = _agent_pid(workdir)
        client = _sp.Popen(["pminfo", "-h", pmcd.host, "-f", "t.slow.value"], stdout=_sp.PIPE, stderr=_sp.PIPE)
        time.sleep(0.5)  # the agent is inside the slow fetch now
        assert pmcd.proc is not None
        pmcd.proc.send_signal(_signal.SIGKILL)
        pmcd.proc.wait()
        client.wait(timeout=10)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and Path(f"/proc/{agent}").exists():
            time.sleep(0.1)
        assert not Path(f"/proc/{agent}").exists() or "Z" in Path(f"/proc/{agent}/stat").read_text().split()[2], (
            "the agent outlived pmcd"
        )
        log = (workdir / "t.log").read_text()
        assert "exit" in log.splitlines()[-1] or "channel_error" in log, log[-500:]
        # pmcd comes back: a fresh agent serves
        pmcd.start()
        pmcd.wait("t.simple.numfetch", desc_only=True)
        assert "value 1" in pmcd.tool("pminfo", "-f", "t.simple.numfetch").stdout
        assert _agent_pid(workdir) != agent
    finally:
        pmcd.stop()


def _agent_pid(workdir: Path) -> int:
    import re as _re

    text = (workdir / "t.log").read_text()
    return int(_re.findall(r"pid=(\d+)", text)[-1])

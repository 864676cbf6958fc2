"""Install and Remove into the system pmcd (started by scripts/install-pcp),
with PCP's own pmdaproc.sh.  Every test leaves pmcd.conf and the PMNS as it
found them, and pmcd serving its other agents."""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.pcpbed import PrivatePmcd, require_pcp

pytestmark = pytest.mark.pcp

REPO = Path(__file__).resolve().parents[2]
PMCD_CONF = Path("/etc/pcp/pmcd/pmcd.conf")
PMNS_ROOT = Path("/var/lib/pcp/pmns/root")


def _agents(text: str) -> set[str]:
    return {" ".join(ln.split()) for ln in text.splitlines() if ln.strip() and not ln.startswith(("#", "["))}


def _run(cmd: list[str], env: dict[str, str] | None = None, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, cwd=REPO, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                          env={**os.environ, **(env or {})}, timeout=timeout)  # fmt: skip


def _pminfo(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["pminfo", *args], capture_output=True, text=True, timeout=60)


@pytest.fixture(scope="module")
def system_pmcd() -> Iterator[None]:
    require_pcp()
    if os.geteuid() != 0:
        pytest.fail("Install/Remove tests need root (CI runs as root)")
    if _pminfo("-f", "pmcd.version").returncode != 0:
        pytest.fail("the system pmcd is not running (scripts/install-pcp starts it)")
    conf, pmns = PMCD_CONF.read_text(), PMNS_ROOT.read_bytes()
    yield
    # safety net: whatever happened, the original agents and names come back
    if _agents(PMCD_CONF.read_text()) != _agents(conf):
        for env in ({}, {"PYPMDA_MMV": "1"}):
            _run([str(REPO / "Remove")], env)
        if _agents(PMCD_CONF.read_text()) != _agents(conf):
            PMCD_CONF.write_text(conf)
            PMNS_ROOT.write_bytes(pmns)
            subprocess.run(["pmsignal", "-a", "-s", "HUP", "pmcd"], check=False)
            time.sleep(2)


def _wait(metric: str, present: bool = True, timeout: float = 20) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        ok = _pminfo("-f", metric).returncode == 0
        if ok == present:
            return True
        time.sleep(0.3)
    return False


def test_install_store_remove_twice(system_pmcd: None) -> None:
    before = _agents(PMCD_CONF.read_text())
    for _ in range(2):  # Install twice in a row is clean
        r = _run([str(REPO / "Install")])
        assert r.returncode == 0, r.stdout + r.stderr
        assert re.search(r"Check pypmda metrics have appeared \.\.\. \d+ metrics and \d+ values", r.stdout), r.stdout
    lines = [ln for ln in PMCD_CONF.read_text().splitlines() if ln.startswith("pypmda")]
    assert len(lines) == 1 and "pipe" in lines[0] and "310" in lines[0], lines
    out = _pminfo("-f", "pypmda").stdout
    assert "pypmda.simple.color" in out and 'inst [0 or "red"] value' in out
    r = subprocess.run(["pmstore", "pypmda.simple.numfetch", "42"], capture_output=True, text=True)
    assert "new value=42" in r.stdout, r.stdout + r.stderr
    assert "value 43" in _pminfo("-f", "pypmda.simple.numfetch").stdout
    assert "Help:" in _pminfo("-T", "pypmda.simple.now").stdout
    # the agent runs as the pcp user, not root
    pid = int(_pminfo("-f", "pypmda.control.pid").stdout.split("value")[1])
    uid = next(ln for ln in Path(f"/proc/{pid}/status").read_text().splitlines() if ln.startswith("Uid:"))
    assert uid.split()[1] != "0"
    r = _run([str(REPO / "Remove")])
    assert r.returncode == 0, r.stdout + r.stderr
    assert "metrics have gone away ... OK" in r.stdout
    assert "pypmda" not in PMCD_CONF.read_text()
    assert _pminfo("pypmda").returncode != 0
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
    assert _agents(PMCD_CONF.read_text()) == before
    assert _pminfo("-f", "pmcd.version").returncode == 0  # pmcd still serves its other agents


def test_install_socket_transport(system_pmcd: None) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    r = _run([str(REPO / "Install")], {"PYPMDA_TRANSPORT": "inet", "PYPMDA_ADDRESS": str(port)})
    try:
        assert r.returncode == 0, r.stdout + r.stderr
        line = next(ln for ln in PMCD_CONF.read_text().splitlines() if ln.startswith("pypmda"))
        assert f"socket\tinet {port}" in line and f"-i {port}" in line, line
        assert _wait("pypmda.simple.numfetch")
    finally:
        assert _run([str(REPO / "Remove")]).returncode == 0
    assert "pypmda" not in PMCD_CONF.read_text()


@pytest.mark.parametrize(("domain", "why"), [("511", "reserved"), ("0", "reserved"), ("2", "already used")])
def test_bad_domains_refused(system_pmcd: None, domain: str, why: str) -> None:
    before = PMCD_CONF.read_text()
    r = _run([str(REPO / "Install")], {"PYPMDA_DOMAIN": domain})
    assert r.returncode != 0
    assert why in r.stdout + r.stderr
    assert _agents(PMCD_CONF.read_text()) == _agents(before)


def test_mmv_dropin_replaces_and_restores_pmdammv(system_pmcd: None) -> None:
    before = PMCD_CONF.read_text()
    original = [ln for ln in before.splitlines() if ln.startswith("mmv")]
    assert original, "pmdammv is not configured in pmcd.conf"
    r = _run([str(REPO / "Install")], {"PYPMDA_MMV": "1"})
    try:
        assert r.returncode == 0, r.stdout + r.stderr
        line = next(ln for ln in PMCD_CONF.read_text().splitlines() if ln.startswith("mmv"))
        assert "pypmda-mmv/pmdammv" in line and "pipe" in line, line
        assert _wait("mmv.control.files")
        ps = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout
        assert "pmda_py run --mmv-compat" in ps
    finally:
        r = _run([str(REPO / "Remove")], {"PYPMDA_MMV": "1"})
    assert r.returncode == 0, r.stdout + r.stderr
    assert [ln for ln in PMCD_CONF.read_text().splitlines() if ln.startswith("mmv")] == original
    assert _wait("mmv.control.files")


def test_systemd_unit_command_line_with_pmcd_socket_line(tmp_path: Path) -> None:
    """Run the unit's ExecStart by hand (paths moved into a temp dir) and
    connect a private pmcd to it with a socket line that has no command."""
    require_pcp()
    unit = (REPO / "systemd" / "pypmda.service").read_text()
    if shutil.which("systemd-analyze"):
        check = tmp_path / "pypmda.service"
        check.write_text(unit.replace("/var/lib/pcp/pmdas/pypmda/venv/bin/python", sys.executable))
        r = subprocess.run(["systemd-analyze", "verify", str(check)], capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
    exec_start = re.search(r"^ExecStart=(.*)$", unit, re.M).group(1).split()  # type: ignore[union-attr]
    root = Path(tempfile.mkdtemp(prefix="pmda_py-unit-"))
    root.chmod(0o755)
    sock, log = root / "pypmda.socket", root / "pypmda.log"
    cfg = root / "pypmda.conf"
    cfg.write_text((REPO / "etc" / "pypmda.conf").read_text())
    repl = {"/var/lib/pcp/pmdas/pypmda/venv/bin/python": sys.executable, "/etc/pcp/pypmda/pypmda.conf": str(cfg),
            "/run/pcp/pypmda.socket": str(sock), "/var/log/pcp/pmcd/pypmda.log": str(log)}  # fmt: skip
    cmd = [repl.get(a, a) for a in exec_start]
    assert cmd[1:4] == ["-m", "pmda_py", "run"] and "-u" in cmd
    proc = subprocess.Popen([*cmd, "--state-dir", str(root)])
    pmns = Path("/var/lib/pcp/pmns/root_pmcd").read_text().replace(
        "root {\n    pmcd\n}", "root {\n    pmcd\n    pypmda\t310:*:*\n}", 1)  # fmt: skip
    pmcd = PrivatePmcd(root, [f"pypmda 310 socket unix {sock}"], pmns)
    try:
        for _ in range(100):
            if sock.exists():
                break
            time.sleep(0.05)
        pmcd.start()
        pmcd.wait("pypmda.simple.numfetch", desc_only=True)
        out = pmcd.tool("pminfo", "-f", "pypmda.simple.color").stdout
        assert 'inst [1 or "green"]' in out
    finally:
        pmcd.stop()
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=10)
        shutil.rmtree(root, ignore_errors=True)

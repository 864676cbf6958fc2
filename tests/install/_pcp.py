"""Shared helpers of the Install/Remove tests: where PCP keeps things, and
``require_pcp`` (skip without PCP, fail when CI=true)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from pmda_py.pcpversion import pcp_conf
from tests.integration import pcpbed

__all__ = [
    "NEWHELP",
    "has_values",
    "our_pids",
    "pminfo",
    "wait",
    "PMCD_CONF",
    "PMDAS",
    "PMNS_DIR",
    "PMSIGNAL",
    "REPO",
    "SYSCONF",
    "require_pcp",
    "require_root_pcp",
    "run",
]

REPO = Path(__file__).resolve().parents[2]
PMCD_CONF = Path("/etc/pcp/pmcd/pmcd.conf")
PMNS_DIR = Path("/var/lib/pcp/pmns")
PMDAS = Path("/var/lib/pcp/pmdas")
SYSCONF = Path("/etc/pcp")
BINADM = Path(pcp_conf().get("PCP_BINADM_DIR", "/usr/lib/pcp/bin"))
NEWHELP = str(BINADM / "newhelp")
PMSIGNAL = str(BINADM / "pmsignal")


def require_pcp() -> None:
    """Skip loudly without real PCP; a skip in CI (CI=true) is a failure."""
    pcpbed.require_pcp()


def require_root_pcp() -> None:
    """Real PCP, root, and the system pmcd answering (scripts/install-pcp)."""
    require_pcp()
    problem = ""
    if os.geteuid() != 0:
        problem = "Install/Remove need root"
    elif (
        shutil.which("pminfo") is None
        or subprocess.run(["pminfo", "-f", "pmcd.version"], capture_output=True, timeout=60).returncode
    ):
        problem = "the system pmcd is not running (scripts/install-pcp starts it)"
    if problem:
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI=true: {problem}")
        pytest.skip(problem)


def run(
    cmd: list[str], env: dict[str, str] | None = None, stdin: str | None = None, timeout: float = 300
) -> subprocess.CompletedProcess[str]:
    """Run from the checkout; stdin at EOF unless ``stdin`` gives answers."""
    return subprocess.run(
        cmd,
        cwd=REPO,
        input=stdin,
        stdin=subprocess.DEVNULL if stdin is None else None,
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        timeout=timeout,
    )


def pminfo(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["pminfo", *args], capture_output=True, text=True, timeout=60)


def wait(pred: Callable[[], bool], timeout: float = 20.0) -> bool:
    """Poll ``pred`` every 0.25 s until it holds or ``timeout`` passes."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return True
        time.sleep(0.25)
    return False


def has_values(metric: str) -> bool:
    """pmprobe finds values for ``metric`` in the system pmcd."""
    r = subprocess.run(["pmprobe", "-v", metric], capture_output=True, text=True, timeout=30)
    return r.returncode == 0 and bool(re.search(rf"^{re.escape(metric)} [1-9]\d* ", r.stdout, re.M))


def our_pids(marker: str) -> list[int]:
    """Processes running the agent of one PMDA directory (venv path in argv)."""
    pids = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                args = (d / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if any(a.startswith(marker.encode()) for a in args) and b"pmda_py" in args:
                pids.append(int(d.name))
    return pids

"""Shared helpers of the Install/Remove tests: where PCP keeps things, and
``require_pcp`` (skip without PCP, fail when CI=true)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from pmda_py.config import pcp_conf
from tests.integration import pcpbed

__all__ = [
    "NEWHELP",
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

"""``PYPMDA_OPENMETRICS=1 ./Install`` swaps pmcd.conf's openmetrics line
(PCP's pmdaopenmetrics) for the pmda_py drop-in, ``./Remove`` puts it back;
into the system pmcd, like the MMV drop-in test in test_install.py.

PCP's own pmdaopenmetrics is installed first when pmcd.conf has no
openmetrics line (and removed again at the end), since the drop-in only
stands in for an installed agent.  Everything is put back as found."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import require
from tests.install._pcp import (
    PMCD_CONF,
    PMDAS,
    PMNS_DIR,
    PMSIGNAL,
    REPO,
    has_values,
    our_pids,
    pminfo,
    require_root_pcp,
    run,
    wait,
)

pytestmark = [pytest.mark.pcp, pytest.mark.system]

INSTALL, REMOVE = str(REPO / "Install"), str(REPO / "Remove")
THEIRS_DIR = PMDAS / "openmetrics"
#: PCP's own Python agents run with pmpython, i.e. the python3 first in PATH: the
#: system's, which has the pcp module (a pyenv or venv python3 has not)
SYSTEM_PYTHON_ENV = {**os.environ, "PATH": f"/usr/bin:/bin:{os.environ.get('PATH', '')}"}
OURS_DIR = PMDAS / "pypmda-openmetrics"
SOURCE = THEIRS_DIR / "config.d" / "pmdapyinstall.url"


def _openmetrics_lines(text: str) -> list[str]:
    return [ln for ln in text.split("[access]")[0].splitlines() if ln.split()[:1] == ["openmetrics"]]


@pytest.fixture
def pmdaopenmetrics(tmp_path: Path) -> Iterator[str]:
    """PCP's pmdaopenmetrics in the system pmcd with one file:// source;
    yields pmcd.conf as it was with it installed."""
    require_root_pcp()
    require((THEIRS_DIR / "Install").exists(), "PCP's pmdaopenmetrics is not installed (pcp package)")
    require(
        subprocess.run(["/usr/bin/python3", "-c", "import requests"], capture_output=True).returncode == 0,
        "python3-requests missing (pmdaopenmetrics needs it): run scripts/install-pcp",
    )
    conf0, root0 = PMCD_CONF.read_text(), (PMNS_DIR / "root").read_bytes()
    if str(OURS_DIR) in conf0:
        print("install tests: restoring pmdaopenmetrics, an earlier run left the drop-in in pmcd.conf")
        run([REMOVE], {"PYPMDA_OPENMETRICS": "1"})
        conf0, root0 = PMCD_CONF.read_text(), (PMNS_DIR / "root").read_bytes()
    doc = Path("/var/lib/pcp/tmp/pmdapyinstall.prom")
    doc.write_text('# HELP pyinst_total A test counter.\n# TYPE pyinst_total counter\npyinst_total{k="a"} 7\n')
    SOURCE.write_text(f"file://{doc}\n")
    installed_here = not _openmetrics_lines(conf0)
    try:
        if installed_here:
            r = subprocess.run(
                ["./Install"],
                cwd=THEIRS_DIR,
                stdin=subprocess.DEVNULL,
                capture_output=True,
                text=True,
                timeout=300,
                env=SYSTEM_PYTHON_ENV,
            )
            assert r.returncode == 0, r.stdout + r.stderr
        assert wait(lambda: has_values("openmetrics.pmdapyinstall.pyinst_total"), 60), PMCD_CONF.read_text()
        yield PMCD_CONF.read_text()
    finally:
        if str(OURS_DIR) in PMCD_CONF.read_text():
            run([REMOVE], {"PYPMDA_OPENMETRICS": "1"})
        if installed_here:
            subprocess.run(
                ["./Remove"],
                cwd=THEIRS_DIR,
                stdin=subprocess.DEVNULL,
                capture_output=True,
                timeout=300,
                env=SYSTEM_PYTHON_ENV,
            )
        SOURCE.unlink(missing_ok=True)
        doc.unlink(missing_ok=True)
        if PMCD_CONF.read_text() != conf0 or (PMNS_DIR / "root").read_bytes() != root0:
            PMCD_CONF.write_text(conf0)
            (PMNS_DIR / "root").write_bytes(root0)
            subprocess.run([PMSIGNAL, "-a", "-s", "HUP", "pmcd"], check=False)
            time.sleep(2)


def test_openmetrics_dropin_replaces_and_restores_pmdaopenmetrics(pmdaopenmetrics: str) -> None:
    before = pmdaopenmetrics
    (original,) = _openmetrics_lines(before)
    ids_before = pminfo("-md", "openmetrics.pmdapyinstall.pyinst_total").stdout
    assert "PMID: 144." in ids_before, ids_before
    try:
        r = run([INSTALL], {"PYPMDA_OPENMETRICS": "1"})
        assert r.returncode == 0, r.stdout + r.stderr
        (line,) = _openmetrics_lines(PMCD_CONF.read_text())
        assert line == f"openmetrics\t144\tpipe\tbinary\tnotready\t{OURS_DIR}/pmdaopenmetrics -d 144", line
        assert wait(lambda: len(our_pids(str(OURS_DIR / "venv"))) == 1, 30)
        assert wait(lambda: has_values("openmetrics.pmdapyinstall.pyinst_total"), 60)
        out = pminfo("-mdf", "openmetrics.pmdapyinstall.pyinst_total").stdout
        assert 'inst [0 or "0 k:a"] value 7' in out, out
        # the PMID and indom pmdaopenmetrics gave it are kept (its saved name tables)
        assert re.findall(r"PMID: \S+|InDom: \S+", out) == re.findall(r"PMID: \S+|InDom: \S+", ids_before)
        status = pminfo("-f", "openmetrics.control.status").stdout
        assert '"pmdapyinstall"] value "success"' in status, status
    finally:
        r = run([REMOVE], {"PYPMDA_OPENMETRICS": "1"})
    assert r.returncode == 0, r.stdout + r.stderr
    assert PMCD_CONF.read_text() == before  # pmcd's configuration with pmdaopenmetrics, byte for byte
    assert _openmetrics_lines(PMCD_CONF.read_text()) == [original]
    assert wait(lambda: not our_pids(str(OURS_DIR / "venv")), 30)
    assert wait(lambda: has_values("openmetrics.pmdapyinstall.pyinst_total"), 60)  # theirs serves it again
    assert not (OURS_DIR / "openmetrics.pmcd.orig").exists()
    shutil.rmtree(OURS_DIR / "__pycache__", ignore_errors=True)

"""``PYPMDA_COMPAT=NAME ./Install`` runs an installed pcp.pmda agent with
``pmda-py compat`` (its pmcd.conf line's interpreter replaced), and
``PYPMDA_COMPAT=NAME ./Remove`` restores the line byte for byte; into the
system pmcd, for Debian's zswap and simple agents.  PCP's agent is
installed first when pmcd.conf lacks it (and removed at the end);
everything is put back as found."""

from __future__ import annotations

import os
import re
import subprocess
import time
from collections.abc import Iterator

import pytest

from tests.conftest import require
from tests.install._pcp import (
    PMCD_CONF,
    PMDAS,
    PMNS_DIR,
    PMSIGNAL,
    REPO,
    our_pids,
    pminfo,
    require_root_pcp,
    run,
    wait,
)

pytestmark = [pytest.mark.pcp, pytest.mark.system]

INSTALL, REMOVE = str(REPO / "Install"), str(REPO / "Remove")
#: PCP's own Python agents run with the python3 first in PATH: the system's
SYSTEM_PYTHON_ENV = {**os.environ, "PATH": f"/usr/bin:/bin:{os.environ.get('PATH', '')}"}
#: answers to simple's Install questions: collector, then the python version
SIMPLE_ANSWERS = "both\npython\n"


def _lines(text: str, name: str) -> list[str]:
    return [ln for ln in text.split("[access]")[0].splitlines() if ln.split()[:1] == [name]]


def _theirs(name: str, action: str, answers: str | None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [f"./{action}"],
        cwd=PMDAS / name,
        input=answers,
        stdin=subprocess.DEVNULL if answers is None else None,
        capture_output=True,
        text=True,
        timeout=300,
        env=SYSTEM_PYTHON_ENV,
    )


@pytest.fixture(params=["zswap", "simple"])
def installed(request: pytest.FixtureRequest) -> Iterator[tuple[str, str]]:
    """PCP's Python agent NAME in the system pmcd; yields (NAME, pmcd.conf)."""
    name: str = request.param
    require_root_pcp()
    require((PMDAS / name / f"pmda{name}.python").exists(), f"PCP's {name} agent is not installed (pcp package)")
    ours = PMDAS / f"pypmda-compat-{name}"
    conf0, root0 = PMCD_CONF.read_text(), (PMNS_DIR / "root").read_bytes()
    if str(ours) in conf0:
        run([REMOVE], {"PYPMDA_COMPAT": name})
        conf0, root0 = PMCD_CONF.read_text(), (PMNS_DIR / "root").read_bytes()
    installed_here = not _lines(conf0, name)
    try:
        if installed_here:
            r = _theirs(name, "Install", SIMPLE_ANSWERS if name == "simple" else None)
            assert r.returncode == 0, r.stdout + r.stderr
        (line,) = _lines(PMCD_CONF.read_text(), name)
        require("python" in line, f"the installed {name} agent is not the Python one: {line}")
        assert wait(lambda: f"{name}." in pminfo(name).stdout, 60)
        yield name, PMCD_CONF.read_text()
    finally:
        if str(ours) in PMCD_CONF.read_text():
            run([REMOVE], {"PYPMDA_COMPAT": name})
        if installed_here:
            _theirs(name, "Remove", None)
        if PMCD_CONF.read_text() != conf0 or (PMNS_DIR / "root").read_bytes() != root0:
            PMCD_CONF.write_text(conf0)
            (PMNS_DIR / "root").write_bytes(root0)
            subprocess.run([PMSIGNAL, "-a", "-s", "HUP", "pmcd"], check=False)
            time.sleep(2)


def test_compat_swap_and_restore(installed: tuple[str, str]) -> None:
    name, before = installed
    (original,) = _lines(before, name)
    ours = PMDAS / f"pypmda-compat-{name}"
    probe = f"{name}.numfetch" if name == "simple" else f"{name}.pool_pages"
    desc_before = pminfo("-d", probe).stdout
    try:
        r = run([INSTALL], {"PYPMDA_COMPAT": name})
        assert r.returncode == 0, r.stdout + r.stderr
        (line,) = _lines(PMCD_CONF.read_text(), name)
        script = original.split()[-1]
        assert re.fullmatch(rf"{name}\t\d+\tpipe\tbinary\t{ours}/venv/bin/python -m pmda_py compat {script}", line), (
            line
        )
        assert line.split()[1] == original.split()[1]  # the domain kept
        assert wait(lambda: len(our_pids(str(ours / "venv"))) == 1, 30)
        assert wait(lambda: pminfo("-d", probe).stdout == desc_before, 30)
        fetched = pminfo("-f", probe)
        assert fetched.returncode == 0 and "Error" not in fetched.stdout + fetched.stderr, fetched
        if name == "simple":
            assert re.search(r"value \d+", fetched.stdout), fetched.stdout
    finally:
        r = run([REMOVE], {"PYPMDA_COMPAT": name})
    assert r.returncode == 0, r.stdout + r.stderr
    assert PMCD_CONF.read_text() == before  # byte for byte
    assert wait(lambda: not our_pids(str(ours / "venv")), 30)
    assert not (ours / f"{name}.pmcd.orig").exists()

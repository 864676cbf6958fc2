"""Under a real pmcd (issue 19, case 7): a table that takes seconds to
import delays neither the agent's CREDS (pmcd waits 3 s for them) nor its
start; requests meet PM_ERR_PMDANOTREADY until the tables are there, then
pmcd gets PMDAREADY and the values; pmcd never drops the agent."""

from __future__ import annotations

import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from pmda_py.testing.support import pmda_py_line
from tests.integration.pcpbed import PrivatePmcd

pytestmark = pytest.mark.pcp

LAZY = """\
import time
from pmda_py.table import Table, Metric
from pmda_py.pmapi import PmType
time.sleep(4.5)
class Lazy(Table):
    m = Metric('x', cluster=40, item=0, type=PmType.U32)
    async def fetch(self, request):
        return {self.m: 5}
"""


@pytest.fixture
def workdir() -> Iterator[Path]:
    root = Path(tempfile.mkdtemp(prefix="pmda_py-pmcd-"))
    root.chmod(0o755)
    yield root
    shutil.rmtree(root, ignore_errors=True)


STATIC = "t {\n    simple\n    lazy\n}\nt.simple {\n    numfetch\t251:0:0\n}\nt.lazy {\n    x\t251:40:0\n}\n"


@pytest.mark.slow
@pytest.mark.parametrize("pmns", ["dynamic", "static"])
def test_slow_import_under_pmcd(workdir: Path, pcp_env: dict[str, str], pmns: str) -> None:
    """``dynamic``: pmcd asks the agent for names (PMNS requests, answered
    PM_ERR_AGAIN while loading); ``static``: pmcd knows the names and sends
    DESC and FETCH (answered PM_ERR_PMDANOTREADY, then PMDAREADY)."""
    (workdir / "lazy_table.py").write_text(LAZY)
    cfg = workdir / "t.conf"
    cfg.write_text(
        f"[pmda]\nname = lazy\ndomain = 251\npythonpath = {workdir}\n"
        "[table simple]\nmount = t.simple\n[table lazy]\ntable = lazy_table:Lazy\nmount = t.lazy\n"
    )
    log = workdir / "t.log"
    line = "t 251 pipe binary " + pmda_py_line("run", "-c", cfg, "-l", log, "--state-dir", workdir)
    text = Path("/var/lib/pcp/pmns/root_pmcd").read_text()
    top = "t\t251:*:*" if pmns == "dynamic" else "t"
    text = text.replace("root {\n    pmcd\n}", f"root {{\n    pmcd\n    {top}\n}}", 1)
    if pmns == "static":
        text += STATIC
    pmcd = PrivatePmcd(workdir, [line], text, env=pcp_env)
    t0 = time.monotonic()
    pmcd.start()
    try:
        assert time.monotonic() - t0 < 5  # CREDS came long before the 4.5 s import ended
        deadline = time.monotonic() + 30
        attempts = 0
        while True:
            attempts += 1
            r = pmcd.tool("pminfo", "-f", "t.simple.numfetch", "t.lazy.x", check=False)
            out = r.stdout + r.stderr
            if "t.lazy.x\n    value 5" in out and "t.simple.numfetch\n    value" in out:
                break
            assert time.monotonic() < deadline, out
            time.sleep(0.3)
        assert attempts > 1, out  # the first requests came while the tables were loading
        plog = pmcd.log_text()
        assert "Cleanup" not in plog and "timeout" not in plog.lower(), plog
        ours = log.read_text()
        assert ours.count(" start ") == 1  # the same agent all along
        if pmns == "static":
            assert " notready " in ours and "[info     ] ready" in ours, ours
    finally:
        pmcd.stop()

"""Under a real pmcd with ``-D pdu`` (7.2.2 in the PCP 7 bed, 6.0.3 on
Debian 12): the MMV drop-in over corpus files, every reply type asked for
through pmcd, and pmcd's log shows no PM_ERR_IPC and the agent never dropped."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import pytest

from pmda_py.testing.support import pmda_py_line
from tests.conftest import MMV_DATA
from tests.integration.pcpbed import PrivatePmcd, require_pcp

pytestmark = pytest.mark.pcp

FILES = ["qa_v3_labels", "py_v1_alltypes", "qa_v1_instances_dogs", "reg_v3_labels255", "qa_v2_genstats"]


def test_pmcd_decodes_every_reply() -> None:
    require_pcp()
    root = Path(tempfile.mkdtemp(prefix="pmda_py-strict-"))
    root.chmod(0o755)
    pmcd = None
    try:
        (root / "mmv").mkdir(mode=0o755)
        for stem in FILES:
            shutil.copy(MMV_DATA / f"{stem}.mmv", root / "mmv" / f"rs_{stem}")
        (root / "pmcd").mkdir()
        text = Path("/var/lib/pcp/pmns/root_pmcd").read_text()
        pmns = text.replace("root {\n    pmcd\n}", "root {\n    pmcd\n    mmv\t70:*:*\n}", 1)
        line = "mmv 70 pipe binary " + pmda_py_line(
            "run", "--mmv-compat", "--mmv-dir", root / "mmv", "-l", root / "pmcd" / "ours.log"
        )
        pmcd = PrivatePmcd(root / "pmcd", [line], pmns, env={"PCP_TMP_DIR": str(root)}, debug="pdu")
        pmcd.start()
        pmcd.wait("mmv.control.files")
        out = pmcd.tool("pminfo", "-fdtTl", "--labels", "mmv", check=False)
        inst = pmcd.tool("pminfo", "-f", "mmv.animals.tag", check=False)
        after = pmcd.tool("pmprobe", "-v", "mmv.control.files")
        log = pmcd.log_text()
    finally:
        if pmcd is not None:
            pmcd.stop()
        shutil.rmtree(root, ignore_errors=True)
    assert "mmv.rs_qa_v3_labels" in out.stdout and "labels" in out.stdout, out.stdout[-2000:]
    assert 'inst [0 or "Fido"]' in inst.stdout, inst.stdout
    assert " 1 " in after.stdout, after.stdout  # the agent still answers after everything
    assert "pmXmitPDU" in log or "__pmXmitPDU" in log or "XMIT" in log.upper(), log[:2000]  # -D pdu was on
    bad = [ln for ln in log.splitlines() if "PM_ERR_IPC" in ln or "IPC protocol failure" in ln]
    assert bad == [], bad[:20]
    for gone in ("agent dropped", "Cleanup", "not responding"):
        assert gone not in log, [ln for ln in log.splitlines() if gone in ln][:5]

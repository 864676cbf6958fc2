"""The benchmarks still run (figures are not checked: the tests never time
anything): each script on a tiny input, its table printed."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.conftest import require

BENCH = Path(__file__).resolve().parent.parent / "bench"


def _run(*args: str) -> str:
    proc = subprocess.run(
        [sys.executable, str(BENCH / args[0]), *args[1:]], capture_output=True, text=True, timeout=300, cwd=BENCH
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout


def test_fetch_breakdown_runs() -> None:
    out = _run("fetch_breakdown.py", "--shapes", "20x0,3x4")
    assert "20x0: 20 values" in out and "3x4: 12 values" in out
    assert "FixedLayout.encode in all" in out and "instance ids compared" in out


def test_fetch_shapes_runs_beside_pcp_pmda() -> None:
    require(Path("/usr/bin/python3").exists() and Path("/var/lib/pcp/pmdas/simple").exists(), "PCP (pcp.pmda)")
    out = _run("fetch_shapes.py", "--shapes", "5x0,2x3", "--budget", "0.05")
    rows = [line.split() for line in out.splitlines() if line.startswith(("5x0", "2x3"))]
    assert len(rows) == 2 and all(r[-1] == "yes" for r in rows), out  # byte for byte pcp.pmda's replies


def test_pdu_latency_runs() -> None:
    require(Path("/var/lib/pcp/pmdas/sample/pmdasample").exists(), "PCP's pmdasample")
    out = _run("pdu_latency.py", "--n", "10", "--iterations", "20")
    for name in ("pmda-py run", "pcp.pmda", "pre-built replies", "pmdasample (C)"):
        assert any(line.startswith(name) and "TEXT (help)" in line for line in out.splitlines()), (name, out)


def test_mmv_scale_runs_beside_pmdammv() -> None:
    require(Path("/var/lib/pcp/pmdas/mmv/pmdammv").exists() and Path("/usr/bin/python3").exists(), "PCP's pmdammv")
    out = _run("mmv_scale.py", "--files", "3", "--iterations", "5")
    rows = [line for line in out.splitlines() if line.split()[:1] == ["3"]]
    assert len(rows) == 2 and "pmdammv" in rows[0] and "pmda-py" in rows[1], out
    assert "1 GiB sparse file" in out and out.rstrip().splitlines()[-1].startswith("pmda-py"), out

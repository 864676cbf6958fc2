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


def test_openmetrics_hostile_runs() -> None:
    require(Path("/usr/lib/pcp/bin/pmcd").exists() and Path("/usr/bin/python3").exists(), "PCP (pmcd)")
    out = _run("openmetrics_hostile.py", "--quick", "--cases", "bomb", "--agents", "pmda_py-w0", "--good", "1")
    row = next(line for line in out.splitlines() if line.startswith("bomb "))
    assert "stacked Conte" in row and '"peak_rss_mb"' in row, out


def test_compat_bench_runs_beside_the_binding() -> None:
    require(Path("/usr/bin/python3").exists() and Path("/var/lib/pcp/pmdas/simple").exists(), "PCP (pcp.pmda)")
    out = _run("compat.py", "--n", "20", "--metrics", "2", "--budget", "0.05")
    rows = [line.split() for line in out.splitlines() if " compat " in f" {line} "]
    assert len(rows) == 2 and all(r[-1] == "yes" for r in rows), out  # the same RESULT as the binding's
    assert "inst_name_lookup" in out and "binding" in out

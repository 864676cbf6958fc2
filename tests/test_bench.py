"""The benchmarks still run (figures are not checked: the tests never time
anything): each script on a tiny input, its table printed."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import require

BENCH = Path(__file__).resolve().parent.parent / "bench"


def _run(*args: str) -> str:
    proc = subprocess.run(
        [sys.executable, str(BENCH / args[0]), *args[1:]], capture_output=True, text=True, timeout=300, cwd=BENCH
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout


@pytest.mark.slow
def test_fetch_breakdown_runs() -> None:
    out = _run("fetch_breakdown.py", "--shapes", "20x0,3x4")
    assert "20x0: 20 values" in out and "3x4: 12 values" in out
    assert "FixedLayout.encode in all" in out and "instance ids compared" in out
    row = next(line.split() for line in out.splitlines() if line.startswith("3x4 "))
    assert len(row) == 7 and all(float(x) > 0 for x in row[1:]), out  # the whole request in each form, and two tables


@pytest.mark.slow
def test_fetch_shapes_runs_beside_pcp_pmda() -> None:
    require(Path("/usr/bin/python3").exists() and Path("/var/lib/pcp/pmdas/simple").exists(), "PCP (pcp.pmda)")
    out = _run("fetch_shapes.py", "--shapes", "5x0,2x3", "--budget", "0.05")
    latency, rest = out.split("each form / the splice floor")
    spliced, cpu = rest.split("CPU time of each process per FETCH")
    head = next(line.split() for line in latency.splitlines() if line.startswith("shape"))
    # a column per form of the table API
    assert head[11:16] == ["dict", "Col.list", "Col.arr", "Packed", "PackedF"], out
    rows = {line.split()[0]: line.split() for line in latency.splitlines() if line.startswith(("5x0", "2x3"))}
    assert len(rows) == 2 and all(r[-1] == "yes" for r in rows.values()), out  # byte for byte pcp.pmda's replies
    floors = rows["2x3"][2:5]  # the floor, on trio's wait, spliced
    forms = rows["2x3"][6:11]  # every form ran (and answered pcp.pmda's bytes, "yes" above)
    assert all(float(x) > 0 for x in floors + forms), out
    # every form's ratio to the splice floor
    ratios = next(line.split() for line in spliced.splitlines() if line.startswith("2x3"))
    assert len(ratios) == 6 and all(float(x) > 0 for x in ratios[1:]), out
    # the CPU each process used per FETCH: floor, trio floor, splice floor, pcp.pmda, then every form
    used = next(line.split() for line in cpu.splitlines() if line.startswith("2x3"))
    assert len(used) == 10 and all(float(x) > 0 for x in used[1:]), out


@pytest.mark.slow
def test_pdu_latency_runs() -> None:
    require(Path("/var/lib/pcp/pmdas/sample/pmdasample").exists(), "PCP's pmdasample")
    out = _run("pdu_latency.py", "--n", "10", "--iterations", "20", "--startup-runs", "1")
    for name in ("pmda-py run", "pcp.pmda", "pre-built replies", "pmdasample (C)"):
        assert any(line.startswith(name) and "TEXT (help)" in line for line in out.splitlines()), (name, out)
    # start-up and footprint beside pcp.pmda: ms to CREDS, ms to DESC, RSS (MB)
    for name in ("pmda-py run --table simple", "pmdasimple.python (pcp.pmda)"):
        row = next(line for line in out.splitlines() if line.startswith(name))
        assert all(float(x) > 0 for x in row[len(name) :].split()), out
    assert "+ trio" in out and "+ pmda_py run path" in out, out


@pytest.mark.slow
def test_names_stall_runs() -> None:
    out = _run("names_stall.py", "--base", "2", "--new", "1", "--metrics", "20", "--before", "0.2")
    for label in ("updated in place", "rebuilt (as before)"):
        row = next(line for line in out.splitlines() if line.startswith(label))
        # p50/p99/max before and during, when the names came, RSS (daemon, with workers), bytes per name
        assert len(row[len(label) :].split()) == 10, out


@pytest.mark.slow
def test_openmetrics_hostile_runs() -> None:
    require(Path("/usr/lib/pcp/bin/pmcd").exists() and Path("/usr/bin/python3").exists(), "PCP (pmcd)")
    out = _run("openmetrics_hostile.py", "--quick", "--cases", "bomb", "--agents", "pmda_py-w0", "--good", "1")
    row = next(line for line in out.splitlines() if line.startswith("bomb "))
    assert "stacked Conte" in row and '"peak_rss_mb"' in row, out


def test_openmetrics_parse_runs() -> None:
    out = _run("openmetrics_parse.py", "--mb", "0.2", "--repeat", "1")
    rows = {line.split()[0]: line.split() for line in out.splitlines()[1:]}
    assert set(rows) == {"normal", "long", "escapes"}, out
    assert all(int(r[-1]) > 0 for r in rows.values()), out  # each document parsed to samples


@pytest.mark.slow
def test_openmetrics_bench_prints_memory_beside_pmdaopenmetrics() -> None:
    require(Path("/var/lib/pcp/pmdas/openmetrics").exists() and Path("/usr/bin/python3").exists(), "pmdaopenmetrics")
    out = _run(
        "openmetrics.py", "--sources", "2", "--metrics", "2", "--fetches", "1", "--servers", "1", "--scale", "2x3"
    )
    lines = [line for line in out.splitlines() if line.startswith("memory at ")]
    assert len(lines) == 2, out  # the size both agents ran at, and ours alone at --scale
    assert "pmdaopenmetrics" in lines[0] and "at most pmdaopenmetrics: " in lines[0], out
    assert lines[1].startswith("memory at 2 x 3 (6 metrics): pmda_py") and "bytes/metric" in lines[1], out
    for who in ("pmda_py", "pmdaopenmetrics"):
        row = next(line for line in out.splitlines() if line.startswith(f"{who} "))
        assert '"values_p50": 12' in row and '"bytes_per_metric": ' in row, out  # every value, and memory per metric


def test_compat_bench_runs_beside_the_binding() -> None:
    require(Path("/usr/bin/python3").exists() and Path("/var/lib/pcp/pmdas/simple").exists(), "PCP (pcp.pmda)")
    out = _run("compat.py", "--n", "20", "--metrics", "2", "--budget", "0.05")
    rows = [line.split() for line in out.splitlines() if " compat " in f" {line} "]
    assert len(rows) == 2 and all(r[-1] == "yes" for r in rows), out  # the same RESULT as the binding's
    assert "inst_name_lookup" in out and "binding" in out


def test_mmv_scale_runs_beside_pmdammv() -> None:
    require(Path("/var/lib/pcp/pmdas/mmv/pmdammv").exists() and Path("/usr/bin/python3").exists(), "PCP's pmdammv")
    out = _run("mmv_scale.py", "--files", "3", "--iterations", "5")
    rows = [line for line in out.splitlines() if line.split()[:1] == ["3"]]
    assert len(rows) == 2 and "pmdammv" in rows[0] and "pmda-py" in rows[1], out
    assert "1 GiB sparse file" in out and out.rstrip().splitlines()[-1].startswith("pmda-py"), out


@pytest.mark.slow
def test_compare_trees_runs_two_trees_side_by_side(tmp_path: Path) -> None:
    """Two trees (this one, twice: a copy stands for the code before a
    change), each form's daemons taking turns; a tree without pmda_py is
    one clear error."""
    out = _run("compare_trees.py", str(BENCH.parent), "--shapes", "2x3", "--forms", "array,packed", "--budget", "0.05")
    for line in ("array old0", "array new1", "packed old1", "floor"):
        assert line in out, out
    assert [w.split()[0] for w in out.splitlines() if "new/old" in w] == ["array", "packed"], out
    proc = subprocess.run(
        [sys.executable, str(BENCH / "compare_trees.py"), str(tmp_path)], capture_output=True, text=True, cwd=BENCH
    )
    assert proc.returncode == 2 and "has no pmda_py package" in proc.stderr

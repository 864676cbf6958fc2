"""Live: PCP's pmdaopenmetrics and ours, each under a private pmcd, on the
same sources (prometheus_client app, prometheus-node-exporter, a controlled
server with edge cases, a malformed and a failing source, a file:// source):
``pminfo -fdTtl --labels`` must match metric by metric, except the
documented differences (livecmp.KNOWN: control counters and the status
text of a source that could not be reached)."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from tests.integration.pcpbed import require_pcp
from tests.openmetrics.livecmp import KNOWN, blocks, compare, run_agent, sources

pytestmark = [pytest.mark.pcp, pytest.mark.slow]


def _need_theirs() -> None:
    require_pcp()
    import subprocess

    if subprocess.run(["/usr/bin/python3", "-c", "import requests"], capture_output=True).returncode:
        pytest.skip("python3-requests missing (pmdaopenmetrics needs it): run scripts/install-pcp")


def test_same_pminfo_as_pmdaopenmetrics(tmp_path: Path) -> None:
    _need_theirs()
    with sources(tmp_path) as urls:
        (tmp_path / "theirs").mkdir()
        (tmp_path / "ours").mkdir()
        theirs = run_agent("theirs", tmp_path / "theirs", urls)
        ours = run_agent("ours", tmp_path / "ours", urls)
    a = blocks(theirs)
    # the comparison has substance: every kind of source showed up in theirs
    for prefix in (
        "prom.app.app_requests_total",
        "node.node_load1",
        "edge.edge_total",
        "bad.good_one",
        "static.static_bytes",
        "edge.pcp.disk.read",
    ):
        assert f"openmetrics.{prefix}" in a, f"{prefix} missing from pmdaopenmetrics' output:\n{theirs[:3000]}"
    result = compare(theirs, ours)
    assert result == {"missing": [], "extra": [], "differ": []}, (result, ours[:5000])
    # the masked ones still differ only in their values
    b = blocks(ours)
    for name in KNOWN:
        assert re.sub(r"value .*", "", a[name]) == re.sub(r"value .*", "", b[name])


@pytest.mark.slow
def test_keeps_pmdaopenmetrics_ids(tmp_path: Path) -> None:
    """Ours started on the state pmdaopenmetrics saved keeps its cluster,
    item and instance numbers, with a new source sorted first."""
    _need_theirs()
    with sources(tmp_path) as urls:
        (tmp_path / "theirs").mkdir()
        theirs = run_agent("theirs", tmp_path / "theirs", urls)
        state = tmp_path / "state"
        shutil.copytree(tmp_path / "theirs" / "var", state)
        (tmp_path / "ours").mkdir()
        more = {"aaa.first": urls["static"], **urls}
        ours = run_agent("ours", tmp_path / "ours", more, state=state)
    a, b = blocks(theirs), blocks(ours)

    def ids(block: str) -> tuple[str, ...]:
        return tuple(re.findall(r"PMID: \S+|InDom: \S+|inst \[\d+ or \"[^\"]*\"\]", block))

    common = [n for n in a if not n.startswith("openmetrics.control.")]
    assert len(common) > 30
    for name in common:
        assert ids(a[name]) == ids(b[name]), name
    assert "openmetrics.aaa.first.static_bytes" in b
    # the new source took the next cluster number, after pmdaopenmetrics' six
    assert "InDom: 144.11264 " in b["openmetrics.aaa.first.static_bytes"]  # 4096 + 7*1024 + 0

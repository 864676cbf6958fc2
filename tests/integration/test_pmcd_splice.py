"""A real pmcd reads the replies our pipe agent splices: ``pminfo -f`` of a
table answering 32 U64 metrics over 256 instances (a RESULT of about
160 KB, new values every fetch: tests/tables/counting.py) shows every
value of each fetch, and the agent holds its replies in memfd pages."""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from pmda_py.testing.support import pmda_py_line
from tests.integration.pcpbed import PrivatePmcd
from tests.tables.counting import INSTS, METRICS

pytestmark = pytest.mark.pcp

REPO = Path(__file__).resolve().parents[2]
DOMAIN = 250


def _pmns() -> str:
    text = Path("/var/lib/pcp/pmns/root_pmcd").read_text()
    return text.replace("root {\n    pmcd\n}", f"root {{\n    pmcd\n    counting\t{DOMAIN}:*:*\n}}", 1)


@pytest.fixture
def pmcd(pcp_env: dict[str, str]) -> Iterator[PrivatePmcd]:
    root = Path(tempfile.mkdtemp(prefix="pmda_py-pmcd-"))
    root.chmod(0o755)
    (root / "agent").mkdir()
    (root / "agent").chmod(0o777)
    agent = pmda_py_line(
        "run", "-d", DOMAIN, "-l", root / "agent" / "pmda.log", "--state-dir", root / "agent",
        "--table", "tests.tables.counting:CountingPacked=counting",
    )  # fmt: skip
    line = f"counting {DOMAIN} pipe binary {agent}"
    env = {**pcp_env, "PYTHONPATH": str(REPO)}
    server = PrivatePmcd(root, [line], _pmns(), env=env).start()
    try:
        yield server
    finally:
        server.stop()
        shutil.rmtree(root, ignore_errors=True)


def test_pmcd_reads_spliced_replies_whole(pmcd: PrivatePmcd) -> None:
    pmcd.wait("counting.m0", desc_only=True)
    seen = []
    for _ in range(4):  # the first FETCH is the general path's, the next ones spliced
        out = pmcd.tool("pminfo", "-f", "counting").stdout
        values: dict[int, dict[int, int]] = {}
        metric = -1
        for line in out.splitlines():
            m = re.match(r"counting\.m(\d+)$", line)
            if m:
                metric = int(m.group(1))
                values[metric] = {}
                continue
            v = re.match(r'\s+inst \[(\d+) or "i\d+"\] value (\d+)$', line)
            if v:
                values[metric][int(v.group(1))] = int(v.group(2))
        assert sorted(values) == list(range(METRICS)), out
        fetches = {v >> 32 for per in values.values() for v in per.values()}
        assert len(fetches) == 1, f"values of several fetches in one reply: {sorted(fetches)}"
        for k, per in values.items():
            assert per == {i: (next(iter(fetches)) << 32) | (k << 16) | i for i in range(INSTS)}, (k, out)
        seen.append(fetches.pop())
    assert seen == sorted(set(seen)), seen  # a new fetch each time
    # the replies were in shared memory (pmcd's stop may kill the agent before
    # its exit line, so its open files are asked instead)
    log = (pmcd.root / "agent" / "pmda.log").read_text()
    pid = re.search(r" pid=(\d+) ", log)
    assert pid is not None, log
    fds = Path(f"/proc/{pid.group(1)}/fd")
    memfds = [p for p in fds.iterdir() if "memfd:pmda_py-reply" in os.readlink(p)]
    assert memfds, sorted(os.readlink(p) for p in fds.iterdir())

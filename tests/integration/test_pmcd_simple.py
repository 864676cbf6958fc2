"""A private pmcd runs ``pmda-py run`` from a pipe line and from a socket line:
``pminfo -fdTtl --labels``, ``pmprobe -I``, ``pmval`` and ``pmstore`` give the
same output for our ``simple`` table as for PCP's pmdasimple.python under the
same pmcd, apart from values that change with time (CPU times, time of day,
sample timestamps)."""

from __future__ import annotations

import re
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.pcpbed import SIMPLE_PY, PrivatePmcd, free_port, simple_cache

pytestmark = pytest.mark.pcp


def _pmns() -> str:
    text = Path("/var/lib/pcp/pmns/root_pmcd").read_text()
    # our agent (and pmdasimple.python) serve the simple subtree dynamically
    return text.replace("root {\n    pmcd\n}", "root {\n    pmcd\n    simple\t253:*:*\n}", 1)


CLIENTS: list[tuple[str, ...]] = [
    ("pminfo", "-fdTtl", "--labels", "simple"),
    ("pmprobe", "-I", "simple.color", "simple.now", "simple.numfetch"),
    ("pmval", "-s", "3", "-t", "0.2", "simple.color"),
    ("pmstore", "simple.numfetch", "42"),
    ("pmstore", "-i", "red", "simple.color", "300"),
    ("pmstore", "simple.time.user", "5"),
    ("pmstore", "-i", "green,blue", "simple.color", "7"),
    ("pminfo", "-f", "simple.numfetch", "simple.color"),
    ("pmprobe", "-v", "simple.numfetch"),
]


def _mask(tool: tuple[str, ...], out: str) -> str:
    lines = []
    in_time = in_now = False
    for line in out.splitlines():
        if line.startswith("simple.time.") or line.startswith("simple.now"):
            in_time = line.startswith("simple.time.")
            in_now = line.startswith("simple.now")
        elif line.startswith("simple."):
            in_time = in_now = False
        if in_time and line.strip().startswith("value "):
            line = "    value <cpu time>"
        if in_now and re.match(r"\s+inst \[\d+ or \"\w+\"\] value \d+", line):
            line = re.sub(r"value \d+", "value <time of day>", line)
        if tool[0] == "pmval":
            line = re.sub(r"^\d\d:\d\d:\d\d\.\d{3}", "<timestamp>", line)
        lines.append(line)
    return "\n".join(lines)


def _run_clients(pmcd: PrivatePmcd) -> list[str]:
    outs = []
    for cmd in CLIENTS:
        r = pmcd.tool(cmd[0], *cmd[1:], check=False)
        outs.append(f"$ {' '.join(cmd)}  (exit {r.returncode})\n{_mask(cmd, r.stdout + r.stderr)}")
    return outs


@pytest.fixture
def pmcd(pcp_env: dict[str, str]) -> Iterator[PrivatePmcd]:
    root = Path(tempfile.mkdtemp(prefix="pmda_py-pmcd-"))
    root.chmod(0o755)
    # pmdasimple.python keeps simple.now's ids in pmdaCache (the private
    # PCP_VAR_DIR of pcp_env, fresh per test); ours in --state-dir
    assert not simple_cache(pcp_env).exists()
    ref_line = f"simple 253 pipe binary /usr/bin/python3 {SIMPLE_PY} -d 253"
    server = PrivatePmcd(root, [ref_line], _pmns(), env=pcp_env).start()
    try:
        yield server
    finally:
        server.stop()
        shutil.rmtree(root, ignore_errors=True)


def _ours(root: Path, tag: str, *extra: str) -> str:
    (root / tag).mkdir(exist_ok=True)
    (root / tag).chmod(0o777)
    return " ".join(
        [
            sys.executable,
            "-m",
            "pmda_py",
            "run",
            "-d",
            "253",
            "--table",
            "simple=simple",
            "-l",
            str(root / tag / "pmda.log"),
            "--state-dir",
            str(root / tag),
            *extra,
        ]
    )


@pytest.mark.slow
def test_same_answers_as_pmdasimple_pipe_and_socket(pmcd: PrivatePmcd) -> None:
    pmcd.wait("simple.numfetch", desc_only=True)
    reference = _run_clients(pmcd)
    # sanity: the reference gave real answers, so equality below means something
    joined = "\n".join(reference)
    for needle in (
        'inst [0 or "red"] value 1',
        '"role":"testing"',
        "Help:\nThe time in seconds",
        'simple.now 3 "sec" "min" "hour"',
        "new value=42",
        "Bad input to pmstore",
        "No permission to perform requested operation",
        'inst [2 or "blue"] old value=',
    ):
        assert needle in joined, needle

    pmcd.reconfigure([f"simple 253 pipe binary {_ours(pmcd.root, 'pipe')}"], "simple.numfetch", desc_only=True)
    ours_pipe = _run_clients(pmcd)

    port = free_port()
    pmcd.reconfigure(
        [f"simple 253 socket inet {port} {_ours(pmcd.root, 'sock', '-i', str(port))}"],
        "simple.numfetch",
        desc_only=True,
    )
    ours_socket = _run_clients(pmcd)

    for ref, pipe, sock in zip(reference, ours_pipe, ours_socket):
        assert pipe == ref, f"pipe line differs from pmdasimple.python:\n{pipe}\n--- reference ---\n{ref}"
        assert sock == ref, f"socket line differs from pmdasimple.python:\n{sock}\n--- reference ---\n{ref}"

"""``pmda-py run --table simple`` loads the daemon and nothing else: no
HTTP client, no OpenMetrics or MMV machinery, no dbpmda tools or installer
(they cost start-up time and memory every agent would pay).  The real run
path in a child process, driven as pmcd drives it; the modules it holds are
listed when it exits."""

from __future__ import annotations

import json
import os
import struct
import subprocess
import sys
from pathlib import Path

from pmda_py.pmapi import pmid
from pmda_py.wire import CredsPdu, DescReqPdu, FetchPdu, PduType, ProfilePdu

DOMAIN = 253

#: modules (and packages, with everything below them) a simple-only agent never needs
NOT_LOADED = (
    "httpx",
    "httpcore",
    "h11",
    "anyio",
    "pmda_py.openmetrics",
    "pmda_py.mmv",
    "pmda_py.pcplabels",
    "pmda_py.testing",
    "pmda_py.tools.installer",
    "pmda_py.tools.demo",
    # the socket modes' peer admission: a pipe agent has no sockets
    "pmda_py.runtime.sockets",
    "pmda_py.runtime.admission",
)

_CHILD = """
import atexit, json, os, sys
atexit.register(lambda: json.dump(sorted(sys.modules), open(os.environ["MODULES_OUT"], "w")))
from pmda_py.cli import main
raise SystemExit(main(sys.argv[1:]))
"""


def _read_pdu(stream: object) -> bytes:
    read = stream.read  # type: ignore[attr-defined]
    head: bytes = read(4)
    assert len(head) == 4, "the agent closed the pipe"
    body: bytes = read(struct.unpack("!i", head)[0] - 4)
    return head + body


def test_a_simple_agent_loads_only_the_daemon(tmp_path: Path) -> None:
    out = tmp_path / "modules.json"
    state = tmp_path / "state"
    state.mkdir()
    cmd = [sys.executable, "-c", _CHILD, "run", "-d", str(DOMAIN), "-l", str(tmp_path / "log")]
    cmd += ["--state-dir", str(state), "--table", "simple"]
    proc = subprocess.Popen(
        cmd,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "MODULES_OUT": str(out)},
    )
    assert proc.stdin is not None and proc.stdout is not None
    try:
        assert struct.unpack_from("!i", _read_pdu(proc.stdout), 4)[0] == PduType.CREDS  # CREDS first
        proc.stdin.write(CredsPdu.cversion(0, from_=os.getpid()).encode() + ProfilePdu().encode())
        proc.stdin.write(DescReqPdu(pmid(DOMAIN, 0, 0)).encode())
        proc.stdin.write(FetchPdu((pmid(DOMAIN, 0, 0), pmid(DOMAIN, 0, 1))).encode())
        proc.stdin.flush()
        assert struct.unpack_from("!i", _read_pdu(proc.stdout), 4)[0] == PduType.DESC
        assert struct.unpack_from("!i", _read_pdu(proc.stdout), 4)[0] == PduType.RESULT
        proc.stdin.close()
        assert proc.wait(timeout=30) == 0, proc.stderr.read() if proc.stderr else ""
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    modules = set(json.loads(out.read_text()))
    assert "pmda_py.tables.simple" in modules and "pmda_py.runtime.main" in modules  # the run path did run
    loaded = sorted(m for m in modules if any(m == n or m.startswith(n + ".") for n in NOT_LOADED))
    assert loaded == [], f"a simple-only agent imported {loaded}"

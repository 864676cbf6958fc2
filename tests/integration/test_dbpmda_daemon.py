"""Real dbpmda against ``pmda-py run``: over a pipe, an inet socket and a unix
socket, for every request kind, compared line for line with what real dbpmda
prints for PCP's own pmdasimple.python (apart from addresses and values that
change between runs)."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.integration.pcpbed import PMDA_PY, SIMPLE_PY, free_port, mask, mask_simple_times, run_dbpmda, simple_cache

pytestmark = pytest.mark.pcp

PMNS = "/var/lib/pcp/pmdas/simple/root"

# every request kind: desc, fetch, instance (3 forms + errors), text (metric
# and indom, both kinds), profile+fetch, store (good, bad value, read-only),
# labels at every level, pmid/name/children/traverse, attr.
SCRIPT = """\
desc simple.numfetch
desc simple.color
desc simple.time.user
desc simple.now
desc 253.9.9
fetch simple.numfetch
fetch simple.numfetch simple.color simple.time.user simple.time.sys simple.now
fetch 253.9.9 simple.numfetch
instance 253.0
instance 253.0 1
instance 253.0 "green"
instance 253.0 "purple"
instance 253.0 99
instance 253.1
instance 253.7
text simple.numfetch
text simple.color
text simple.now
text indom 253.0
text indom 253.1
text 253.9.9
text indom 253.7
profile 253.0 none
profile 253.0 add 1
fetch simple.color
profile 253.0 all
profile 253.0 delete 2
fetch simple.color simple.numfetch
profile 253.0 all
fetch simple.color
store simple.numfetch "42"
fetch simple.numfetch
store simple.color "300"
store simple.time.user "1"
fetch simple.color
label context
label domain
label indom 253.0
label indom 253.1
label cluster 253.0
label item simple.now
label item simple.color
label instances 253.1
label instances 253.0
pmid simple.numfetch
name 253.0.0
children simple
children simple.time
traverse simple
traverse simple.time
pmid simple.nonesuch
name 253.9.9
children nonesuch
attr 11 "1000"
attr "username" "pcpuser"
fetch simple.now
close
quit
"""


def _normalise(transcript: str) -> str:
    """Drop the lines that name the channel; mask addresses, CPU times and the time of day."""
    lines = [
        ln for ln in mask(transcript).splitlines() if not ln.startswith(("open ", "Start ", "Connect to PMDA on "))
    ]
    return mask_simple_times("\n".join(lines))


@pytest.fixture
def reference(pcp_env: dict[str, str], tmp_path: Path) -> str:
    script = f"open pipe /usr/bin/python3 {SIMPLE_PY} -d 253 -l {tmp_path / 'ref.log'}\n" + SCRIPT
    _clear_simple_cache(pcp_env)
    out = run_dbpmda(script, PMNS, env=pcp_env)
    assert "253.0.0 (simple.numfetch): numval: 1" in out, out
    return _normalise(out)


def _clear_simple_cache(env: dict[str, str]) -> None:
    # pmdasimple.python keeps simple.now's instance ids in pmdaCache: start both fresh
    simple_cache(env).unlink(missing_ok=True)


def _ours(tmp_path: Path, *extra: str) -> list[str]:
    return [
        *PMDA_PY,
        "run",
        "-d",
        "253",
        "--table",
        "simple=simple",
        "-l",
        str(tmp_path / "ours.log"),
        "--state-dir",
        str(tmp_path / "state"),
        *extra,
    ]


def test_pipe_matches_pmdasimple_python(reference: str, pcp_env: dict[str, str], tmp_path: Path) -> None:
    out = run_dbpmda("open pipe " + " ".join(_ours(tmp_path)) + "\n" + SCRIPT, PMNS, env=pcp_env)
    ours = _normalise(out)
    assert ours == reference
    # sanity: the comparison covers real answers, not two empty transcripts
    for needle in (
        "Semantics: counter  Units: sec",
        'name: "green"',
        "Error PDU: Bad input to pmstore",
        'role="testing"',
        'units="hour"',
        "   non-leaf time",
        "simple.time.user",
        "Attribute: userid=1000",
        "Unknown or illegal instance domain identifier",
    ):
        assert needle in ours, needle


@pytest.mark.parametrize("transport", ["inet", "unix"])
def test_sockets_match_pmdasimple_python(
    reference: str, pcp_env: dict[str, str], tmp_path: Path, transport: str
) -> None:
    if transport == "inet":
        port = free_port()
        extra, target = ["-i", str(port)], f"inet {port}"
    else:
        path = tmp_path / "ours.sock"
        extra, target = ["-u", str(path)], f"unix {path}"
    proc = subprocess.Popen(_ours(tmp_path, *extra), env={**os.environ, **pcp_env})
    try:
        deadline = time.monotonic() + 10
        while "listening" not in _read(tmp_path / "ours.log") and time.monotonic() < deadline:
            time.sleep(0.05)
        out = run_dbpmda(f"open socket {target}\n" + SCRIPT, PMNS, env=pcp_env)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=10)
    assert _normalise(out) == reference


def _read(p: Path) -> str:
    try:
        return p.read_text()
    except OSError:
        return ""

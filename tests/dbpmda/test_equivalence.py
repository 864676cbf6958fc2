"""Live: real dbpmda and ``pmda-py dbpmda`` run the same scripts against the
same real PMDAs (pmdasample, pmdasimple.python; over a pipe and an inet
socket); stdout and stderr must be equal apart from memory addresses and
values that change between runs (CPU times, time of day, event timestamps)."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import pytest

from pmda_py.pcpversion import pcp_version
from pmda_py.testing.support import pmda_py_argv, pmda_py_line
from tests.conftest import PDUS
from tests.integration.pcpbed import SAMPLE, SIMPLE_PY, free_port, mask_simple_times, simple_cache

pytestmark = pytest.mark.pcp

SIMPLE_PMNS = "/var/lib/pcp/pmdas/simple/root"
SAMPLE_PMNS = "/var/lib/pcp/pmdas/sample/root"

# our own script: every command, including error paths and the commands no
# golden script uses (getiname, wait, status-free commands, bad input)
EXTRA_SAMPLE = """\
desc sample.long.one
fetch sample.long.one
close
fetch sample.long.one
desc sample.nonesuch
bogus command here
{open}
getiname on
fetch sample.colour sample.bin sample.string.hullo
getiname off
getdesc on
fetch sample.longlong.million sample.ulonglong.million sample.float.million sample.double.million
fetch sample.string.write_me sample.aggregate.write_me
getdesc off
fetch sample.string.write_me sample.aggregate.write_me sample.double.million
instance 29.1 "red"
instance 29.2 "bin-100"
instance 29.2 9999
text sample.colour
text indom 29.2
store sample.float.write_me "abc"
store sample.ulonglong.write_me "1.5"
store sample.aggregate.write_me "x"
store sample.bin "77"
profile 29.2 none
label instances 29.2
profile 29.2 add 300
label instances 29.2
fetch sample.bin
profile 29.2 all
attr 99 "x"
attr "nonesuch" "x"
attr 14 "12345"
label cluster 29.99
label item 29.0.999
pmid sample.secret.foo.bar.three
children sample.secret.foo.bar
traverse sample.secret.foo.bar.grunt
wait 0
close
quit
"""

EXTRA_SIMPLE = """\
{open}
fetch simple.color, simple.numfetch
store simple.numfetch "-3"
store simple.numfetch "99999999999999"
fetch simple.numfetch
store simple.color "42"
fetch simple.color
instance 253.1 "hour"
label indom 253.7
label instances 253.7
text indom 253.0
close
close
quit
"""


def _mask(text: str) -> str:
    # libpcp's log lines: "[Sat Nov 28 19:40:39] dbpmda(24201) Error: ..."
    text = re.sub(r"^\[\w{3} \w{3} [ \d]\d \d\d:\d\d:\d\d\] dbpmda\(\d+\) ", "[DATE] dbpmda(PID) ", text, flags=re.M)
    text = re.sub(r"dump from 0x[0-9a-f]+", "dump from ADDR", text)
    text = re.sub(r"timestamps? [0-9:.]+(\.\.\.[0-9:.]+)?\]", "timestamp TS]", text)
    return mask_simple_times(text)


def _run(cmd: list[str], script: str, env: dict[str, str]) -> tuple[str, str]:
    r = subprocess.run(cmd, input=script, capture_output=True, text=True, env={**os.environ, **env}, timeout=120)
    return _mask(r.stdout), _mask(r.stderr)


def _compare(script: str, pmns: str, env: dict[str, str], reset: object = None, args: Sequence[str] = ()) -> str:
    if callable(reset):
        reset()
    real = _run(["dbpmda", "-n", pmns, "-e", *args], script, env)
    if callable(reset):
        reset()
    ours = _run(pmda_py_argv("dbpmda", "-n", pmns, "-e", *args), script, env)
    assert ours[0] == real[0], "stdout differs"
    assert ours[1] == real[1], "stderr differs"
    return real[0]


def _reset_simple(env: dict[str, str]) -> None:
    simple_cache(env).unlink(missing_ok=True)


def _script(name: str, open_line: str) -> str:
    body = (PDUS / f"{name}.dbpmda.in").read_text().splitlines(keepends=True)
    return open_line + "\n" + "".join(body[1:])


def test_sample_capture_script(pcp_env: dict[str, str], tmp_path: Path) -> None:
    out = _compare(_script("dbpmda_sample", f"open pipe {SAMPLE} -d 29 -l {tmp_path}/s.log"), SAMPLE_PMNS, pcp_env)
    for needle in (
        'value "hullo world!" [68756c6c6f20776f726c6421]',
        "event records (7 missed)",
        "sample.secret.foo.bar.three",
        "Attribute: container=mycontainer",
        "29.0.1009",
    ):
        assert needle in out, needle


@pytest.mark.parametrize("name", ["dbpmda_simple", "dbpmda_simple_python"])
def test_simple_capture_scripts(name: str, pcp_env: dict[str, str], tmp_path: Path) -> None:
    # the C pmdasimple of the capture is not packaged: pmdasimple.python stands in
    script = _script(name, f"open pipe /usr/bin/python3 {SIMPLE_PY} -d 253 -l {tmp_path}/p.log")
    out = _compare(script, SIMPLE_PMNS, pcp_env, lambda: _reset_simple(pcp_env))
    assert "Error PDU: Bad input to pmstore" in out


def test_sample_inet_socket(pcp_env: dict[str, str], tmp_path: Path) -> None:
    port = free_port()
    proc = subprocess.Popen(
        [SAMPLE, "-d", "29", "-i", str(port), "-l", str(tmp_path / "i.log")], env={**os.environ, **pcp_env}
    )
    try:
        time.sleep(0.5)
        script = _script("dbpmda_sample_inet", f"open socket inet {port}").replace("quit\n", "")
        # one connection each: real dbpmda first, then (pmdasample accepts once) restart for ours
        real = _run(["dbpmda", "-n", SAMPLE_PMNS, "-e"], script + "quit\n", pcp_env)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=10)
    proc = subprocess.Popen(
        [SAMPLE, "-d", "29", "-i", str(port), "-l", str(tmp_path / "j.log")], env={**os.environ, **pcp_env}
    )
    try:
        time.sleep(0.5)
        ours = _run(pmda_py_argv("dbpmda", "-n", SAMPLE_PMNS, "-e"), script + "quit\n", pcp_env)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=10)
    assert ours == real
    assert f"Connect to PMDA on inet port {port}" in real[0]


def test_every_command_and_error_path_sample(pcp_env: dict[str, str], tmp_path: Path) -> None:
    script = EXTRA_SAMPLE.format(open=f"open pipe {SAMPLE} -d 29 -l {tmp_path}/e.log")
    out = _compare(script, SAMPLE_PMNS, pcp_env)
    assert 'inst [0 or "red"]' in out  # getiname
    assert "Getting Result Structure" in out


def test_every_command_and_error_path_simple(pcp_env: dict[str, str], tmp_path: Path) -> None:
    script = EXTRA_SIMPLE.format(open=f"open pipe /usr/bin/python3 {SIMPLE_PY} -d 253 -l {tmp_path}/f.log")
    _compare(script, SIMPLE_PMNS, pcp_env, lambda: _reset_simple(pcp_env))


TIMED_SAMPLE = """\
{open}
timer on
desc sample.long.one
desc 29.0.999
fetch sample.long.one 29.0.999
instance 29.1
instance 29.99
instance 29.1 999
text sample.colour
text indom 29.99
store sample.long.write_me "5"
store sample.long.one "5"
store sample.bad.unknown "1"
store sample.bad.novalues "1"
store sample.long.write_me "abc"
store sample.long.write_me "99999999999999999999"
store sample.event.records "1"
label domain
label cluster 29.99
label instances 29.99
pmid sample.nonesuch
name 29.0.999
children sample.long
traverse sample.long
attr 1 "x"
getdesc on
fetch 29.0.999
fetch sample.long.one
quit
"""


def test_timer_only_for_requests_answered_without_error(pcp_env: dict[str, str], tmp_path: Path) -> None:
    """``timer on``: dbpmda prints a ``Timer:`` line after each request the
    PMDA answered, none after one that ended in an error (an Error PDU, a
    value that does not fit the metric, no value to store into)."""
    script = TIMED_SAMPLE.format(open=f"open pipe {SAMPLE} -d 29 -l {tmp_path}/t.log")
    mask = re.compile(r"(?m)^Timer: \d+\.\d+ seconds$")
    real = _run(["dbpmda", "-n", SAMPLE_PMNS, "-e"], script, pcp_env)
    ours = _run(pmda_py_argv("dbpmda", "-n", SAMPLE_PMNS, "-e"), script, pcp_env)
    assert mask.sub("Timer: T", ours[0]) == mask.sub("Timer: T", real[0])
    assert ours[1] == real[1]
    assert 10 <= len(mask.findall(real[0])) < script.count("\n") - 12, real[0]


NOT_A_PMDA = """\
import struct, sys, time
kind = sys.argv[1]
first = {
    "eof": b"",
    "error": struct.pack(">iiii", 16, 0x7000, 0, -12345),  # an ERROR PDU where CREDS is due
    "odd": struct.pack(">iiii", 16, 0x7100, 0, -12345),  # a type libpcp has no name for
    "bare": struct.pack(">iii", 12, 0x7001, 0),  # a RESULT's header, no body
    "creds-empty": struct.pack(">iii", 12, 0x700C, 0),  # CREDS with no credentials
    "creds-many": struct.pack(">iiii", 16, 0x700C, 0, 1000),  # CREDS claiming 1000 of them
    "silent": b"",  # nothing, and no end either
    "partial": struct.pack(">ii", 16, 0x700C),  # half a header, then nothing
    "short": struct.pack(">iii", 8, 0x700C, 0),  # a length shorter than a header
    "negative": struct.pack(">iii", -4, 0x700C, 0),
    "text": b"hello, I am not a PMDA\\n",  # text read as a header: a length of 1.7 GB
}[kind]
sys.stdout.buffer.write(first)
sys.stdout.flush()
if kind != "eof":
    time.sleep(2)
"""


@pytest.mark.parametrize(
    "kind",
    ["eof", "error", "odd", "bare", "creds-empty", "creds-many", "silent", "partial", "short", "negative", "text"],
)
def test_a_pmda_that_sends_no_creds(kind: str, pcp_env: dict[str, str], tmp_path: Path) -> None:
    """A PMDA that exits at once, says nothing, or whose first PDU is not
    CREDS or not a PDU: dbpmda's messages (what it expected, what came or
    libpcp's error, the PDU trace) and its warning, after ``-q 1`` second."""
    prog = tmp_path / "notapmda"
    prog.write_text(f"#!{sys.executable}\n{NOT_A_PMDA}")
    prog.chmod(0o755)
    out = _compare(f"open pipe {prog} {kind}\n", SAMPLE_PMNS, pcp_env, args=["-q", "1"])
    assert "Start notapmda PMDA" in out


def test_our_daemon_under_both_dbpmdas(pcp_env: dict[str, str], tmp_path: Path) -> None:
    """Our harness also agrees with real dbpmda when the PMDA is ours."""
    cmd = "open pipe " + pmda_py_line(
        "run", "-d", "253", "--table", "simple=simple", "-l", f"{tmp_path}/o.log", "--state-dir", tmp_path
    )
    _compare(_script("dbpmda_simple", cmd), SIMPLE_PMNS, pcp_env, lambda: _rm(tmp_path / "253.1"))


def _rm(p: Path) -> None:
    try:
        p.unlink()
    except FileNotFoundError:
        pass


# the commands that talk to no PMDA: usage of bare commands, help, status,
# debug, namespace (good and bad), aliases; status with a PMDA and a profile.
# (Multi-flag debug lines come first: after some error lines, real dbpmda's
# parser refuses them or puts the caret elsewhere: history-dependent quirks
# not imitated.)
EXTRA_LOCAL = """\
debug 3
debug appl1, appl2 -pdu
status
debug none appl0
open
desc
fetch
store
text
instance
profile
name
pmid
children
traverse
attr
label
debug
timer
getdesc
getiname
wait
help
?
help attr
help attribute
help close
help debug
help desc
help fetch
help getdesc
help getiname
help text
help instance
help label
help namespace
help open
help children
help name
help pmid
help traverse
help profile
help quit
help q
help status
help store
help timer
help wait
help watch
help nonesuch
help fetch desc
status
status extra
debug nonesuch
debug all
status
debug none
debug 1073741824 134217728 8388608
status
debug none
{open}
status
profile 29.1 none
profile 29.2 add 3
profile 29.2 add 4
profile 29.3 delete 7
status
getdesc on
getiname on
timer on
status
desc sample.long.one
attribute "username" "x"
timer off
namespace /nonexistent/root
status
desc sample.long.one
namespace {simple_pmns}
status
desc simple.numfetch
desc sample.long.one
namespace {sample_pmns}
close
status
exit
"""


def _mask_status(text: str) -> str:
    text = re.sub(r"(?m)^(Connection: +daemon \(pid: )\d+\)$", r"\1PID)", text)
    return re.sub(r"(?m)^Timer: \d+\.\d+ seconds$", "Timer: T seconds", text)


def test_local_commands_help_status_debug_namespace(pcp_env: dict[str, str], tmp_path: Path) -> None:
    script = EXTRA_LOCAL.format(
        open=f"open pipe {SAMPLE} -d 29 -l {tmp_path}/l.log", simple_pmns=SIMPLE_PMNS, sample_pmns=SAMPLE_PMNS
    )
    real = _run(["dbpmda", "-n", SAMPLE_PMNS, "-e"], script, pcp_env)
    ours = _run(pmda_py_argv("dbpmda", "-n", SAMPLE_PMNS, "-e"), script, pcp_env)
    assert _mask_status(ours[0]) == _mask_status(real[0]), "stdout differs"
    assert ours[1] == real[1], "stderr differs"
    # "debug 3": 6.x sets the old bit 1 (fetch); 7.x refuses numeric flags
    first = "fetch appl1 appl2" if pcp_version() < (7, 0, 0) else "appl1 appl2"
    for needle in (
        f"Debug options:          {first}",
        "Debug options:          (all)",
        "\t\tInstances: [3] [4]",
        "Namespace:              /nonexistent/root",
        "PMDA PMAPI Version:     2",
        "Attribute: username=x",
    ):
        assert needle in real[0], needle
    assert 'dbpmda: Cannot load namespace from "/nonexistent/root"' in real[1]


def _socket_pmda(args: list[str], log: Path, env: dict[str, str]) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen([SAMPLE, "-d", "29", *args, "-l", str(log)], env={**os.environ, **env})
    time.sleep(0.5)
    return proc


def _stop(proc: subprocess.Popen[bytes]) -> None:
    proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=10)


SOCKET_SCRIPT = """\
{open}
status
desc sample.long.one
fetch sample.long.one sample.string.hullo
instance 29.1
label domain
close
quit
"""


@pytest.mark.parametrize("family", ["unix", "ipv6"])
def test_sample_unix_and_ipv6_sockets(family: str, pcp_env: dict[str, str], tmp_path: Path) -> None:
    """pmdasample accepts one connection: one run each, real dbpmda first."""
    sockdir = Path(tempfile.mkdtemp(prefix="pmda_py-dbpmda-"))  # the PMDA may run as user pcp
    sockdir.chmod(0o777)
    outputs = []
    for who, cmd in (("real", ["dbpmda"]), ("ours", pmda_py_argv("dbpmda"))):
        if family == "unix":
            target = str(sockdir / f"{who}.socket")
            proc = _socket_pmda(["-u", target], tmp_path / f"{who}.log", pcp_env)
            open_line = f"open socket unix {target}"
        else:
            port = free_port()
            proc = _socket_pmda(["-6", str(port)], tmp_path / f"{who}.log", pcp_env)
            open_line = f"open socket ipv6 {port}"
        try:
            out = _run([*cmd, "-n", SAMPLE_PMNS, "-e"], SOCKET_SCRIPT.format(open=open_line), pcp_env)
        finally:
            _stop(proc)
            shutil.rmtree(sockdir, ignore_errors=True) if who == "ours" else None
        outputs.append((out[0].replace(open_line.split()[-1], "TARGET"), out[1]))
    (real, ours) = outputs
    assert _mask_status(ours[0]) == _mask_status(real[0])
    assert ours[1] == real[1]
    assert "Connect to PMDA on " in real[0] and "value 1" in real[0]


@pytest.mark.parametrize("start", [[], ["-n", SAMPLE_PMNS]], ids=["default", "-n"])
def test_a_failed_namespace_goes_back_to_the_first(start: list[str], pcp_env: dict[str, str]) -> None:
    """After ``namespace`` failed, dbpmda reloads the namespace it started
    with (-n's, or the default), not the one loaded last, and says so."""
    script = (
        f"namespace {SIMPLE_PMNS}\ndesc simple.color\nnamespace /nonexistent/root\n"
        "desc simple.color\ndesc sample.long.one\nstatus\n"
    )
    real = _run(["dbpmda", "-f", "-e", *start], script, pcp_env)
    ours = _run(pmda_py_argv("dbpmda", "-f", "-e", *start), script, pcp_env)
    assert ours == real
    assert ("Reload namespace from" if start else "Reload default namespace") in real[1]
    if start:  # simple.color: not in sample's namespace (the default one may hold it)
        assert "Error: Unknown metric name" in real[1]

"""``pmda-py dbpmda``'s command line: its options, ``./.dbpmdarc``, its
input file, and a person's mistakes.  The transcripts are compared with real
dbpmda's on the same input, in the same directory."""

from __future__ import annotations

import os
import pty
import select
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from pmda_py.testing.dbpmda.cli import main
from pmda_py.testing.support import pmda_py_argv
from tests.integration.pcpbed import require_pcp

#: the pmda_py under test, whatever the working directory
ENV = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}

RC_FILES = [
    None,
    "debug pdu\ndebug appl0\n",
    "quit\n",
    "debug pdu",  # no newline: dbpmda reads on into its input
    "bogus stuff\nstatus\n",
    "\n\nfetch 1.2.3 foo\n",
    "desc\nstatus\n",
    "",
]
INPUTS = ["", "status\nquit\n", "bogus\n"]
OPTIONS = [[], ["-i"], ["-e"], ["-f"], ["--norc", "--echo-input", "--interactive"]]


def _run(argv: list[str], text: str, cwd: Path) -> tuple[int, str, str]:
    r = subprocess.run(argv, input=text, capture_output=True, text=True, cwd=cwd, env=ENV, timeout=60)
    return r.returncode, r.stdout, r.stderr


@pytest.mark.pcp
@pytest.mark.parametrize("rc", RC_FILES, ids=repr)
def test_options_and_dbpmdarc_as_dbpmda(rc: str | None, tmp_path: Path) -> None:
    """-e, -i, -f and their long names, and a .dbpmdarc in the working
    directory (run first, echoed after its own prompt, errors naming its
    line; -f skips it), print what dbpmda prints."""
    require_pcp()
    if rc is not None:
        (tmp_path / ".dbpmdarc").write_text(rc)
    for text in INPUTS:
        for opts in OPTIONS:
            real = _run(["dbpmda", *opts], text, tmp_path)
            ours = _run(pmda_py_argv("dbpmda", *opts), text, tmp_path)
            assert ours == real, (rc, text, opts)


@pytest.mark.pcp
def test_namespace_long_option_as_dbpmda(tmp_path: Path) -> None:
    require_pcp()
    text = "desc simple.color\npmid 253.0.1\nstatus\n"
    pmns = "/var/lib/pcp/pmdas/simple/root"
    real = _run(["dbpmda", "--namespace", pmns, "-e"], text, tmp_path)
    ours = _run(pmda_py_argv("dbpmda", "--namespace", pmns, "-e"), text, tmp_path)
    assert ours == real


def test_script_file_reads_as_stdin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The optional file argument is read as standard input would be."""
    monkeypatch.chdir(tmp_path)
    script = tmp_path / "s.dbpmda"
    script.write_text("debug pdu\nstatus\nbogus\nquit\n")
    from_file = _run(pmda_py_argv("dbpmda", "-f", "-e", str(script)), "", tmp_path)
    from_stdin = _run(pmda_py_argv("dbpmda", "-f", "-e"), script.read_text(), tmp_path)
    assert from_file == from_stdin
    assert "Debug options:          pdu" in from_file[1]


@pytest.mark.parametrize("make", ["missing", "directory"])
def test_unreadable_script_is_one_line(
    make: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "script"
    if make == "directory":
        path.mkdir()
    assert main(["-f", str(path)]) == 1
    out, err = capsys.readouterr()
    assert out == ""
    assert err.count("\n") == 1 and err.startswith(f"pmda-py dbpmda: cannot read {path}: "), err


def test_missing_namespace_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["-n", str(tmp_path / "nonesuch")]) == 1
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1 and "cannot load namespace" in err, err


def _until(fd: int, end: bytes, seconds: float = 30.0) -> bytes:
    """What ``fd`` gives until ``end`` has been read (or the time is up, or
    the file ends)."""
    got = b""
    deadline = time.monotonic() + seconds
    while end not in got and time.monotonic() < deadline:
        if select.select([fd], [], [], 0.2)[0]:
            try:
                chunk = os.read(fd, 4096)
            except OSError:  # a pty whose other end closed
                break
            if not chunk:
                break
            got += chunk
    return got


def _converse(argv: list[str], cwd: Path) -> tuple[bytes, bytes]:
    """Over a pipe: what is printed before any input, and what is printed
    after one line while stdin stays open."""
    p = subprocess.Popen(
        argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, cwd=cwd, env=ENV
    )
    assert p.stdin is not None and p.stdout is not None
    try:
        first = _until(p.stdout.fileno(), b"dbpmda> ")
        p.stdin.write(b"help quit\n")
        p.stdin.flush()
        answer = _until(p.stdout.fileno(), b"dbpmda> ")
    finally:
        p.kill()
        p.wait()
    return first, answer


def test_interactive_answers_each_line_as_it_is_typed(tmp_path: Path) -> None:
    """-i: the prompt comes before any input, and each line is answered (and
    the next prompt shown) while the person is still typing: dbpmda reads
    its input a line at a time."""
    first, answer = _converse(pmda_py_argv("dbpmda", "-f", "-i"), tmp_path)
    assert first == b"dbpmda> "
    assert answer == b"\nquit\n\nExit dbpmda.  This also closes any open PMDAs.\n\ndbpmda> "


@pytest.mark.pcp
def test_interactive_conversation_as_dbpmda(tmp_path: Path) -> None:
    require_pcp()
    assert _converse(pmda_py_argv("dbpmda", "-f", "-i"), tmp_path) == _converse(["dbpmda", "-f", "-i"], tmp_path)


def _on_terminal(argv: list[str], cwd: Path) -> bytes:
    """All a command prints on a terminal (stdin and stdout a pty) given one
    line, then the end of input."""
    pid, fd = pty.fork()
    if pid == 0:  # pragma: no cover - the child
        try:
            os.chdir(cwd)
            os.execve(argv[0], argv, ENV)
        finally:
            os._exit(127)
    try:
        got = _until(fd, b"dbpmda> ")
        os.write(fd, b"help quit\n")
        got += _until(fd, b"PMDAs.\r\n\r\ndbpmda> ")
        os.write(fd, b"\x04")
        got += _until(fd, b"\0", 5.0)
    finally:
        os.close(fd)
        os.waitpid(pid, 0)
    return got


def test_prompts_on_a_terminal(tmp_path: Path) -> None:
    """Without -i, on a terminal: the prompt, as dbpmda gives it there."""
    got = _on_terminal(pmda_py_argv("dbpmda", "-f"), tmp_path)
    assert got.startswith(b"dbpmda> help quit\r\n\r\nquit\r\n"), got
    assert got.count(b"dbpmda> ") == 2, got


@pytest.mark.pcp
def test_terminal_as_dbpmda(tmp_path: Path) -> None:
    require_pcp()
    dbpmda = shutil.which("dbpmda")
    assert dbpmda is not None
    assert _on_terminal(pmda_py_argv("dbpmda", "-f"), tmp_path) == _on_terminal([dbpmda, "-f"], tmp_path)


def test_a_pmda_that_exits_at_once(tmp_path: Path) -> None:
    """A PMDA that ends before its CREDS (a script failing as it starts):
    dbpmda's two lines (recorded from PCP 6.0.3's dbpmda; the live
    comparison is tests/dbpmda/test_equivalence.py)."""
    true = shutil.which("true")
    assert true is not None
    rc, out, err = _run(pmda_py_argv("dbpmda", "-f"), f"open pipe {true}\n", tmp_path)
    assert rc == 0 and out == f"Start true PMDA: {true}\n", out
    assert (
        err
        == f"pmdaversion: expecting PDU_CREDS, got EOF\nWarning: no version exchange with PMDA {true} after 3 secs\n"
    )


def test_creds_timeout_option(tmp_path: Path) -> None:
    """-q N: a PMDA that says nothing is given N seconds, then dbpmda's
    timeout and warning; a value that is not a positive number is one line
    and status 1, as dbpmda refuses it (the live comparison of every kind
    of first PDU is tests/dbpmda/test_equivalence.py)."""
    silent = tmp_path / "silent"
    silent.write_text("#!/bin/sh\nexec sleep 30\n")
    silent.chmod(0o755)
    started = time.monotonic()
    rc, out, err = _run(pmda_py_argv("dbpmda", "-f", "-q", "1"), f"open pipe {silent}\n", tmp_path)
    assert rc == 0 and out == f"Start silent PMDA: {silent}\n", out
    assert err == (
        f"__pmGetPDU(5): Timeout waiting for a response from PMCD\n"
        f"Warning: no version exchange with PMDA {silent} after 1 secs\n"
    )
    assert time.monotonic() - started < 3 + 5  # not the default 3 s wait and the 5 s close
    for bad in ("0", "-2", "1.5", "x"):
        rc, out, err = _run(pmda_py_argv("dbpmda", "-f", "--creds-timeout", bad), "", tmp_path)
        assert (rc, out, err) == (1, "", "pmda-py dbpmda: -q requires a positive numeric argument\n"), bad


def test_username_option(tmp_path: Path) -> None:
    """-U USER: the harness, and so every PMDA it starts, runs as USER; an
    unknown user is one line and status 1."""
    rc, out, err = _run(pmda_py_argv("dbpmda", "-f", "-U", "no-such-user-here"), "", tmp_path)
    assert (rc, out, err) == (1, "", "pmda-py dbpmda: cannot run as no-such-user-here: no such user\n")
    if os.geteuid() != 0:
        pytest.skip("switching users needs root")
    import pwd

    nobody = pwd.getpwnam("nobody")
    where = Path(tempfile.mkdtemp(prefix="pmda-py-U-"))  # one that nobody can reach
    try:
        where.chmod(0o755)
        prog = where / "whoami"
        prog.write_text("#!/bin/sh\necho uid=$(id -u) gid=$(id -g) >&2\n")
        prog.chmod(0o755)
        rc, out, err = _run(pmda_py_argv("dbpmda", "-f", "-U", "nobody"), f"open pipe {prog}\n", where)
    finally:
        shutil.rmtree(where)
    assert rc == 0, err
    assert f"uid={nobody.pw_uid} gid={nobody.pw_gid}\n" in err

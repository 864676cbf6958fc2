"""``pmda-py dbpmda``'s command line: its options, ``./.dbpmdarc``, its
input file, and a person's mistakes.  The transcripts are compared with real
dbpmda's on the same input, in the same directory."""

from __future__ import annotations

import os
import subprocess
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

"""Start-up errors reach the person: ``pmda-py run`` with a table that does
not exist, a module that does not import or a config section naming no
known table exits non-zero with one line on stderr naming the table and the
reason, even when its log goes to a file (which takes over fd 2)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.conftest import run_pmda_py


def _run(args: list[str], cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return run_pmda_py(args, cwd, env)


@pytest.mark.parametrize(
    ("args", "files", "expect"),
    [
        (["--table", "nosuch=x"], {}, "table nosuch: unknown table 'nosuch'"),
        (
            ["--table", "brokenmod:T=x"],
            {"brokenmod.py": "import nosuchmodule\n"},
            "table brokenmod:T (brokenmod:T): ModuleNotFoundError: No module named 'nosuchmodule'",
        ),
        (
            ["-c", "bad.conf"],
            {"bad.conf": "[pmda]\n[table foo]\nmount = foo\n"},
            "bad.conf:2: [table foo] table: table foo: unknown table 'foo'",
        ),
        (["-c", "bad.conf"], {"bad.conf": "[pmda]\ncolour = red\n"}, "bad.conf:2: [pmda] colour: unknown key"),
        (["-d", "99999"], {}, "domain 99999 out of range 1-510"),
    ],
    ids=["unknown-table", "module-does-not-import", "section-names-no-table", "bad-key", "bad-domain"],
)
def test_start_up_error_is_one_line_on_stderr(
    tmp_path: Path, args: list[str], files: dict[str, str], expect: str
) -> None:
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    log = tmp_path / "pmda.log"
    r = _run(["run", *args, "-l", str(log)], tmp_path, {"PYTHONPATH": str(tmp_path)})
    assert r.returncode != 0
    lines = r.stderr.splitlines()
    assert len(lines) == 1, r.stderr
    assert lines[0].startswith("pmda-py run: ") and expect in lines[0], lines[0]
    assert r.stdout == ""  # stdout is the PDU channel


def test_pmns_and_help_list_their_options(tmp_path: Path) -> None:
    for cmd in ("pmns", "help"):
        r = _run([cmd, "--help"], tmp_path)
        assert r.returncode == 0
        for opt in ("--symdom", "--under", "--output", "-c CONFIG", "--table NAME[=MOUNT]", "-d DOMAIN"):
            assert opt in r.stdout, (cmd, opt, r.stdout)

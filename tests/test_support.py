"""pmda_py.testing.support: the shared test helpers do what they say."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from pmda_py.tables.simple import SimpleTable
from pmda_py.testing.support import InlineRunner, pmda_py_argv, pmda_py_line, traversable_dir
from tests.conftest import REPO


def test_pmda_py_argv_runs_this_interpreters_pmda_py() -> None:
    argv = pmda_py_argv("--help")
    assert argv[:3] == [sys.executable, "-m", "pmda_py"]
    out = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and "run" in out.stdout


def test_pmda_py_line_splits_back_into_the_argv(tmp_path: Path) -> None:
    assert pmda_py_line("run", "-l", tmp_path / "a.log", "-d", 253).split() == pmda_py_argv(
        "run", "-l", str(tmp_path / "a.log"), "-d", "253"
    )
    for word in ("two words", "", "tab\there"):
        with pytest.raises(ValueError, match="would not split back"):
            pmda_py_line("run", "-l", word)


def test_traversable_dir_is_0755_and_removed() -> None:
    with traversable_dir() as d:
        (d / "sub").mkdir()
        (d / "sub" / "f").write_text("x")
        assert os.stat(d).st_mode & 0o777 == 0o755
    assert not d.exists()


@pytest.mark.trio
async def test_inline_runner_returns_exceptions_as_results() -> None:
    async def ok() -> int:
        return 1

    async def bad() -> int:
        raise ValueError("x")

    table = SimpleTable()
    got = await InlineRunner().gather([(table, "a", ok), (table, "b", bad)])
    assert got[0] == 1 and isinstance(got[1], ValueError)
    assert await InlineRunner().call(table, "a", ok) == 1


def test_subprocesses_import_this_checkout(tmp_path: Path) -> None:
    """A process a test starts, from any working directory, imports the
    pmda_py of the checkout under test (tests/conftest.py), not another
    checkout's that an editable install points at."""
    r = subprocess.run(
        [sys.executable, "-c", "import pmda_py; print(pmda_py.__file__)"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        check=True,
    )
    assert Path(r.stdout.strip()).resolve() == REPO / "pmda_py" / "__init__.py"

"""The test tiers (docs/testing.md): ``make test`` runs every test;
``make test-fast`` runs the sans-IO and in-process tiers only -- no test marked
``slow`` or ``pcp``, nothing of the folders whose tests start PCP or the daemon
as processes."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys

from tests.conftest import REPO, require

#: folders whose tests start real PCP or the daemon as processes
PROCESS_TIERS = ("tests/integration/", "tests/install/", "tests/hardening/", "tests/compat/", "tests/openmetrics/")


def _pytest_args(target: str) -> list[str]:
    """The arguments ``make TARGET`` gives pytest (a dry run: nothing is built)."""
    require(shutil.which("make") is not None, "make")
    # as a person types it: not what an enclosing make passes down (CI runs the
    # suite as `make test PYTEST_ARGS=...`, which reaches sub-makes through MAKEFLAGS)
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL", "PYTEST_ARGS")}
    out = subprocess.run(
        ["make", "-n", "-s", target, "PYTEST_ARGS="], cwd=REPO, env=env, capture_output=True, text=True, check=True
    ).stdout
    line = next(ln for ln in out.splitlines() if " -m pytest" in ln)
    return shlex.split(line.split(" -m pytest", 1)[1])


def test_make_test_runs_everything() -> None:
    assert _pytest_args("test") == []


def test_make_test_fast_leaves_out_the_slow_and_process_tiers() -> None:
    args = _pytest_args("test-fast")
    assert args[:2] == ["-m", "not slow and not pcp"]
    paths = args[2:]
    assert paths and all((REPO / p).exists() for p in paths), paths
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    ids = [ln for ln in proc.stdout.splitlines() if "::" in ln]
    assert len(ids) > 100, proc.stdout
    assert not [i for i in ids if i.startswith(PROCESS_TIERS)]
    assert "tests/wire/" in "\n".join(ids) and "tests/test_session.py::" in "\n".join(ids)

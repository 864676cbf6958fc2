"""Shared test configuration: the test data folder, hypothesis profiles."""

from __future__ import annotations

import builtins
import os
import random
import subprocess
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings

#: the package's own pytest plugin: the pmda_command, pmda_socket and table_pmda fixtures
pytest_plugins = ["pmda_py.testing.fixtures"]

REPO = Path(__file__).resolve().parents[1]
#: golden data recorded from real PCP (tests/data/README.md says how)
DATA = REPO / "tests" / "data"
PDUS = DATA / "pdus"
MMV_DATA = DATA / "mmv"

# Every process a test starts imports this checkout's pmda_py, wherever it
# runs (a worktree, a copy, another working directory), not the one an
# editable install of some other checkout points at.
os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p)

# Hypothesis: random every run, in CI too (a fixed seed hides bugs: see
# tests/test_pmns.py's regression example).  The seed is chosen here, printed
# in the report header and reusable with --hypothesis-seed=N.  The "fixed"
# profile (--hypothesis-profile=fixed) is the derandomised, small one.
settings.register_profile("default", deadline=None, print_blob=True, suppress_health_check=[HealthCheck.too_slow])
settings.register_profile(
    "fixed", derandomize=True, max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.load_profile(os.environ.get("PMDA_PY_HYPOTHESIS_PROFILE", "default"))


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    fixed = "fixed" in (config.getoption("hypothesis_profile", None), settings.get_current_profile_name())
    if config.getoption("hypothesis_seed", None) is None and not fixed:
        config.option.hypothesis_seed = str(random.SystemRandom().randrange(2**32))


def pytest_report_header(config: pytest.Config) -> str:
    seed = config.getoption("hypothesis_seed", None)
    return f"hypothesis seed: {seed} (re-run with --hypothesis-seed={seed})"


def require(ok: bool, why: str) -> None:
    """Skip (loudly, with ``why``) when the machine lacks something a test
    needs; under CI=true that is a failure: CI must run every test."""
    if not ok:
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI=true: {why}")
        pytest.skip(why)


#: tests that change the system pmcd (Install/Remove, pmcd.conf, the rc script)
#: run only when this is 1 or CI=true
SYSTEM_TESTS = "PMDA_PY_SYSTEM_TESTS"


def system_tests_enabled() -> bool:
    return os.environ.get("CI") == "true" or os.environ.get(SYSTEM_TESTS) == "1"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if system_tests_enabled():
        return
    skip = pytest.mark.skip(
        reason=f"changes the system pmcd (Install/Remove, pmcd.conf, rc script): set {SYSTEM_TESTS}=1 to run"
    )
    for item in items:
        if item.get_closest_marker("system"):
            item.add_marker(skip)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """No private pmcd (or its agents) outlives the run: stop what is left,
    and fail the run if a process group still survives."""
    from tests.integration import pcpbed

    alive = pcpbed.kill_leftovers()
    if alive:
        print(f"\nLEFTOVER PROCESSES: private pmcd process groups {alive} survived SIGKILL")
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def run_pmda_py(args: list[str], cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``pmda-py ARGS`` in ``cwd`` with nothing on stdin (a pipe agent's
    pmcd goes away at once), its output as text, ``env`` over ours."""
    from pmda_py.testing.support import pmda_py_argv

    return subprocess.run(
        pmda_py_argv(*args),
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, **(env or {})},
    )


def opens_of(monkeypatch: pytest.MonkeyPatch, path: Path) -> list[str]:
    """Every open() of ``path`` from now on (``builtins.open`` or ``os.open``)."""
    seen: list[str] = []
    real, real_os = builtins.open, os.open

    def counting(file: Any, *args: Any, **kw: Any) -> Any:
        if os.fspath(file) == str(path):
            seen.append(str(file))
        return real(file, *args, **kw)

    def counting_os(file: Any, *args: Any, **kw: Any) -> int:
        if os.fspath(file) == str(path):
            seen.append(str(file))
        return real_os(file, *args, **kw)

    monkeypatch.setattr(builtins, "open", counting)
    monkeypatch.setattr(os, "open", counting_os)
    return seen


@pytest.fixture
def reply_memory(monkeypatch: pytest.MonkeyPatch) -> Any:
    """A fresh reply memory, enabled (memfd buffers for large fast-path
    replies, as a pipe agent's), in place of the process's."""
    from pmda_py.wire import buffers

    mem = buffers.ReplyMemory()
    if not mem.enable():
        pytest.skip("no memfd_create/splice (Linux, Python 3.10+)")
    monkeypatch.setattr(buffers, "MEMORY", mem)
    return mem

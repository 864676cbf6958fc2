"""Every code block of README.md and of every ``docs/*.md`` is run by a
test, as written, in a fresh temporary directory outside the repository
(``tests/docblocks.py`` finds the blocks).

``CLAIMS`` says which test runs which block (by a piece of its text);
``test_every_block_is_claimed`` fails when a block is added, in any of those
documents, that no test runs.  Blocks that change the system pmcd
(``./Install``) are run by the named tests of ``tests/install``, which
execute those very commands."""

from __future__ import annotations

import importlib.util
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from pmda_py.testing.client import open_pipe_pmda
from pmda_py.testing.harness import open_table_pmda
from pmda_py.testing.support import pmda_py_argv
from tests.conftest import REPO, SYSTEM_TESTS, require, system_tests_enabled
from tests.docblocks import README, blocks, documents, find
from tests.docblocks import block as _block

pytest_plugins = ["pmda_py.testing.fixtures"]

PYTHON_BIN = str(Path(sys.executable).parent)

#: a piece of a block's text -> the test that runs that block
CLAIMS: dict[str, str] = {
    "make demo    #": "test_make_demo_and_make_test",
    "sudo bash scripts/install-pcp": "test_install_pcp_script",
    "sudo PMDA_PY_SYSTEM_TESTS=1 make test": "test_system_tests_are_opt_in",
    "class Queues(Table):": "test_table_example_serves",
    "class Logins(Table):": "test_event_example_serves",
    "--table mypkg.queues:Queues=queues": "test_run_commands",
    "[table queues]": "test_config_file",
    "trio_mode = true": "test_testing_snippets",
    "async def test_depth():": "test_testing_snippets",
    "async def test_simple(pmda_command):": "test_testing_snippets",
    "pmda-py dbpmda -n": "test_dbpmda_example",
    "pmda-py run --mmv-compat": "test_mmv_compat_command",
    "compat /var/lib/pcp/pmdas/trivial/pmdatrivial.python": "test_compat_example",
    "pmda-py run --openmetrics-compat --notready": "test_openmetrics_compat_command",
    "sudo ./Install </dev/null": "tests/install/test_install.py::test_install_fetch_store_remove_twice",
    "pypmda\t310\tpipe\tbinary": "tests/install/test_install.py::test_install_fetch_store_remove_twice",
    "pmda-py new demo": "tests/install/test_new_project.py::test_new_project_passes_its_tests",
    "sudo pmda-py install .": "tests/install/test_new_project.py::test_pmda_py_install_puts_a_new_project_into_pmcd",
}


def test_every_block_is_claimed() -> None:
    assert documents()[0] == README and len(documents()) > 1, "docs/ is missing"
    found = blocks()
    assert len(found) >= 10, "the documents lost their examples"
    here = Path(__file__).read_text()
    for b in found:
        claims = {test for piece, test in CLAIMS.items() if piece in b.text}
        assert len(claims) == 1, f"{b.name} block ({b.lang or 'plain'}) run by {sorted(claims) or 'no test'}:\n{b.text}"
    for piece in CLAIMS:
        find(piece)  # exactly one block of all the documents
    for test in set(CLAIMS.values()):
        path, _, name = test.rpartition("::")
        source = (REPO / path).read_text() if path else here
        assert re.search(rf"^(async )?def {name}\(", source, re.M), f"{test} does not exist"


def _env(tmp: Path, **extra: str) -> dict[str, str]:
    """The daemon's PCP directories in ``tmp``: the commands run verbatim
    and leave nothing in the system's /var/log/pcp or /var/lib/pcp."""
    for d in ("log/pmcd", "var/config/pmda", "tmp/mmv"):
        (tmp / d).mkdir(parents=True, exist_ok=True)
    if not os.path.lexists(tmp / "var" / "pmns"):  # PMNS files #include <stdpmid> from here (dangling without PCP)
        (tmp / "var" / "pmns").symlink_to("/var/lib/pcp/pmns")
    env = {"PCP_LOG_DIR": str(tmp / "log"), "PCP_VAR_DIR": str(tmp / "var"), "PCP_TMP_DIR": str(tmp / "tmp")}
    return {**env, **extra}


def _write_package(tmp: Path) -> None:
    """The README's first table as ``mypkg/queues.py``."""
    (tmp / "mypkg").mkdir(exist_ok=True)
    (tmp / "mypkg" / "__init__.py").write_text("")
    (tmp / "mypkg" / "queues.py").write_text(_block("class Queues(Table):"))


def _command(line: str) -> tuple[dict[str, str], list[str]]:
    """``VAR=value ... pmda-py ARGS  # comment`` -> (env, argv); ``pmda-py``
    is this interpreter's."""
    words = shlex.split(line, comments=True)
    env = {}
    while words and re.match(r"^\w+=", words[0]):
        k, _, v = words.pop(0).partition("=")
        env[k] = v
    assert words[0] == "pmda-py", line
    return env, pmda_py_argv(*words[1:])


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    """A fresh directory outside the repository (pytest's tmp_path is)."""
    assert REPO not in tmp_path.parents
    return tmp_path


def test_make_demo_and_make_test(workdir: Path) -> None:
    """``make demo`` runs ``python -m pmda_py demo``, which must work from any
    directory; ``make test`` is the command CI runs."""
    block = _block("make demo    #")
    assert [ln.split("#")[0].strip() for ln in block.splitlines()] == ["make demo", "make test"]
    dry = subprocess.run(["make", "-n", "demo", "test"], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert dry.returncode == 0, dry.stderr
    assert re.search(r"-m pmda_py demo$", dry.stdout, re.M) and re.search(r"-m pytest", dry.stdout), dry.stdout
    assert re.search(r"^make test$", (REPO / ".ci" / "run").read_text(), re.M)
    r = subprocess.run(pmda_py_argv("demo"), cwd=workdir, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    assert re.search(r"pypmda\.control\.fetch\.count = \d+", r.stdout), r.stdout


@pytest.mark.system
def test_install_pcp_script() -> None:
    """``sudo bash scripts/install-pcp`` then ``make test`` (CI's order): the
    script is idempotent and leaves pmcd running."""
    block = _block("sudo bash scripts/install-pcp")
    assert block.splitlines()[0].split("#")[0].split() == ["sudo", "bash", "scripts/install-pcp"]
    r = subprocess.run(["bash", "scripts/install-pcp"], cwd=REPO, capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "install-pcp: pmcd is running" in r.stdout


def test_system_tests_are_opt_in(workdir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    block = _block("sudo PMDA_PY_SYSTEM_TESTS=1 make test")
    assert f"{SYSTEM_TESTS}=1" in block
    env = {k: v for k, v in os.environ.items() if k not in ("CI", SYSTEM_TESTS)}
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-rs",
            "-p",
            "no:cacheprovider",
            "tests/install/test_install.py::test_systemd_unit_verifies",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert "1 skipped" in r.stdout and f"set {SYSTEM_TESTS}=1 to run" in r.stdout, r.stdout
    monkeypatch.delenv("CI", raising=False)
    monkeypatch.setenv(SYSTEM_TESTS, "1")
    assert system_tests_enabled()
    monkeypatch.setenv(SYSTEM_TESTS, "0")
    assert not system_tests_enabled()


def _table_example() -> dict[str, object]:
    ns: dict[str, object] = {"__name__": "readme_example"}
    b = find("class Queues(Table):")
    exec(compile(b.text, b.name, "exec"), ns)
    return ns


async def test_table_example_serves() -> None:
    table = _table_example()["Queues"]()  # type: ignore[operator]
    async with open_table_pmda(table, mount="queues", domain=250) as pmda:
        values = await pmda.fetch_values(["queues.depth", "queues.limit"])
        assert values["queues.depth"] == {0: 3, 1: 0}
        assert values["queues.limit"] == {0: 100, 1: 100}
        p = await pmda.pmid("queues.limit")
        from pmda_py.pmapi import PmType
        from pmda_py.wire import ValueSet

        assert await pmda.store([ValueSet.of(p, PmType.U32, [(1, 500)])]) == 0
        assert (await pmda.fetch_values(["queues.limit"]))["queues.limit"] == {0: 100, 1: 500}
        # min/max declared on the metric: refused before the table sees it
        assert await pmda.store([ValueSet.of(p, PmType.U32, [(1, 0)])]) == -12400
        assert await pmda.oneline(await pmda.pmid("queues.depth")) == "messages waiting"


async def test_event_example_serves() -> None:
    """The event example's records arrive as PCP event records: nanoseconds,
    flags, the parameter's PMID and value, and the missed-events record."""
    ns: dict[str, object] = {"__name__": "readme_events"}
    b = find("class Logins(Table):")
    exec(compile(b.text, b.name, "exec"), ns)
    async with open_table_pmda(ns["Logins"](), mount="logins", domain=250) as pmda:  # type: ignore[operator]
        arr = (await pmda.fetch_values(["logins.records"]))["logins.records"]
        user = await pmda.pmid("logins.user")
    assert arr.highres and len(arr.records) == 2
    first, missed = arr.records
    assert (first.sec, first.subsec, first.flags) == (1_700_000_000, 250_000_000, 1)
    assert [(p.pmid, p.type, p.value()) for p in first.params] == [(user, 6, "alice")]
    assert (missed.sec, missed.flags, missed.nparams, missed.params) == (1_700_000_001, 0x80000000, 3, ())


def test_table_example_type_checks(workdir: Path) -> None:
    """The example passes ``mypy --strict`` (the package ships py.typed)."""
    require(importlib.util.find_spec("mypy") is not None, "mypy is a dev dependency (pip install -e '.[dev]')")
    (workdir / "queues.py").write_text(_block("class Queues(Table):"))
    cmd = [sys.executable, "-m", "mypy", "--strict", "--no-incremental", "queues.py"]
    env = {**os.environ, "MYPYPATH": str(REPO)}
    r = subprocess.run(cmd, cwd=workdir, capture_output=True, text=True, timeout=300, env=env)
    assert r.returncode == 0, r.stdout + r.stderr


async def test_run_commands(workdir: Path) -> None:
    """Each ``pmda-py run`` line, verbatim, from a directory holding
    ``mypkg/queues.py``; the entry point is registered by a dist-info on
    PYTHONPATH, as an installed package would have it."""
    _write_package(workdir)
    site = workdir / "site"
    dist = site / "mypkg_tables-0.1.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: mypkg-tables\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[pmda_py.tables]\nqueues = mypkg.queues:Queues\n")
    lines = [ln for ln in _block("--table mypkg.queues:Queues=queues").splitlines() if ln.strip()]
    assert len(lines) == 3
    expect = ["simple.numfetch", "queues.depth", "svc.queues.depth"]
    for line, metric in zip(lines, expect):
        env, argv = _command(line)
        if "queues=svc.queues" in line:  # the entry point's package is installed
            env["PYTHONPATH"] = f"{site}{os.pathsep}{workdir}"
        async with open_pipe_pmda(argv, env=_env(workdir, **env), cwd=str(workdir)) as pmda:
            value = (await pmda.fetch_values([metric]))[metric]
        assert value == (1 if metric == "simple.numfetch" else {0: 3, 1: 0}), (line, value)


async def test_config_file(workdir: Path) -> None:
    _write_package(workdir)
    (workdir / "pypmda.conf").write_text(_block("[table queues]"))
    argv = pmda_py_argv("run", "-c", str(workdir / "pypmda.conf"))
    async with open_pipe_pmda(argv, env=_env(workdir), cwd="/") as pmda:
        values = await pmda.fetch_values(["pypmda.queues.depth"])
        assert values["pypmda.queues.depth"] == {0: 3, 1: 0}
        assert (await pmda.desc(await pmda.pmid("pypmda.queues.depth"))).pmid >> 22 == 310


def test_testing_snippets(workdir: Path) -> None:
    """Both snippets as a real pytest file with the documented pytest.ini, run
    by this interpreter with no virtualenv activated (its bin not on PATH)."""
    _write_package(workdir)
    (workdir / "pytest.ini").write_text(_block("trio_mode = true"))
    (workdir / "test_snippets.py").write_text(
        _block("async def test_depth():") + "\n\n" + _block("async def test_simple(pmda_command):")
    )
    path = os.pathsep.join(p for p in os.environ.get("PATH", "").split(os.pathsep) if p != PYTHON_BIN)
    env = {**os.environ, **_env(workdir), "PATH": path, "PYTHONPATH": str(workdir)}
    env.pop("VIRTUAL_ENV", None)
    r = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"],
        cwd=workdir,
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert r.returncode == 0 and "2 passed" in r.stdout, r.stdout + r.stderr


def test_dbpmda_example(workdir: Path) -> None:
    """The block as a shell script, with ``pmda-py`` on PATH; the same script
    through PCP's dbpmda prints the same transcript."""
    from tests.integration.pcpbed import require_pcp

    require_pcp()
    block = _block("pmda-py dbpmda -n")
    env = {**os.environ, **_env(workdir), "PATH": f"{PYTHON_BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
    ours = subprocess.run(["bash", "-c", block], cwd=workdir, capture_output=True, text=True, env=env, timeout=60)
    real_block = block.replace("pmda-py dbpmda -n", "dbpmda -n")
    real = subprocess.run(["bash", "-c", real_block], cwd=workdir, capture_output=True, text=True, env=env, timeout=60)
    assert 'inst: 0 name: "red"' in ours.stdout and "253.0.1 (simple.color): numval: 3" in ours.stdout, ours
    mask = re.compile(r"dump from 0x[0-9a-f]+")
    assert mask.sub("ADDR", ours.stdout) == mask.sub("ADDR", real.stdout)
    assert ours.stderr == real.stderr


def test_compat_example(workdir: Path) -> None:
    """The block as a shell script, with ``pmda-py`` on PATH; the same block
    with PCP's binding (``python3`` instead of ``pmda-py compat``) prints the
    same transcript, but for the time of day."""
    from tests.compat.harness import require_script

    require_script("trivial")
    block = _block("compat /var/lib/pcp/pmdas/trivial/pmdatrivial.python")
    env = {**os.environ, **_env(workdir), "PATH": f"{PYTHON_BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
    ours = subprocess.run(["bash", "-c", block], cwd=workdir, capture_output=True, text=True, env=env, timeout=60)
    real_block = block.replace("$(command -v pmda-py) compat", "/usr/bin/python3")
    real = subprocess.run(["bash", "-c", real_block], cwd=workdir, capture_output=True, text=True, env=env, timeout=60)
    assert "Semantics: counter  Units: sec" in ours.stdout and "numval: 1" in ours.stdout, ours

    def mask(text: str) -> str:
        text = re.sub(r"dump from 0x[0-9a-f]+", "ADDR", text)
        text = re.sub(r"(?m)^   value \d+ .*$", "VALUE", text)
        return re.sub(r"(?m)^(open pipe|Start) .*$", "", text)

    assert mask(ours.stdout) == mask(real.stdout)


async def test_mmv_compat_command(workdir: Path) -> None:
    """``pmda-py run --mmv-compat`` serves ``$PCP_TMP_DIR/mmv`` at domain 70,
    under "mmv", with pmdammv's control metrics."""
    env, argv = _command(_block("pmda-py run --mmv-compat").splitlines()[0])
    async with open_pipe_pmda(argv, env=_env(workdir, **env), cwd=str(workdir)) as pmda:
        values = await pmda.fetch_values(["mmv.control.files", "mmv.control.reload"])
        assert values["mmv.control.files"] == 0
        assert (await pmda.pmid("mmv.control.files")) >> 22 == 70


async def test_openmetrics_compat_command(workdir: Path) -> None:
    """``pmda-py run --openmetrics-compat --notready``: pmdaopenmetrics'
    config.d under ``$PCP_PMDAS_DIR/openmetrics``, domain 144; not ready
    (as pmcd.conf's ``notready`` expects) until the first scrape round, then
    PMDAREADY and the source's metrics."""
    from pmda_py.errors import PmErr
    from pmda_py.wire import ErrorPdu

    conf = workdir / "pmdas" / "openmetrics" / "config.d"
    conf.mkdir(parents=True)
    (workdir / "doc.txt").write_text("# TYPE jobs_total counter\njobs_total 7\n")
    (conf / "local.url").write_text(f"file://{workdir / 'doc.txt'}\n")
    env, argv = _command(_block("pmda-py run --openmetrics-compat --notready").splitlines()[0])
    env = _env(workdir, PCP_PMDAS_DIR=str(workdir / "pmdas"), **env)
    async with open_pipe_pmda(argv, env=env, cwd=str(workdir)) as pmda:
        ready = await pmda.receive(timeout=20)
        assert isinstance(ready, ErrorPdu) and ready.code == PmErr.PMDAREADY
        values = await pmda.fetch_values(["openmetrics.local.jobs_total"])
        assert values["openmetrics.local.jobs_total"] == 7.0
        assert (await pmda.pmid("openmetrics.local.jobs_total")) >> 22 == 144

"""``pmda-py new``, ``pmda-py install`` and ``pmda-py remove`` as a user of a
pip-installed pmda_py has them: a fresh virtualenv with pmda_py (this
checkout) and pytest in it, the documented commands (docs/installing.md)
run verbatim in it, and (system test) the new project installed into the
system pmcd and removed."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from pmda_py.testing.support import pmda_py_argv
from pmda_py.tools.newproject import new_main, project_files
from tests.conftest import REPO, require
from tests.docblocks import block as _block
from tests.install._pcp import PMCD_CONF, PMDAS, PMNS_DIR, SYSCONF, has_values, our_pids, require_root_pcp, wait


@pytest.fixture(scope="module")
def venv() -> Iterator[Path]:
    """A virtualenv with this checkout's pmda_py (editable, as a developer
    of pmda_py has it; ``pmda-py install`` then pip installs the checkout
    into the agent's virtualenv), pytest and pytest-trio, from PyPI."""
    top = Path(tempfile.mkdtemp(prefix="pmda_py-venv-"))
    top.chmod(0o755)
    env = top / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(env)], check=True, timeout=120)
    pip = [str(env / "bin" / "pip"), "install", "-q", "--disable-pip-version-check"]
    r = subprocess.run(
        [*pip, "-e", str(REPO), "pytest>=7", "pytest-trio>=0.8"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    require(r.returncode == 0, f"cannot pip install pmda_py and pytest into a virtualenv (PyPI?): {r.stderr[-500:]}")
    try:
        yield env
    finally:
        shutil.rmtree(top, ignore_errors=True)


def _sh(script: str, cwd: Path, venv: Path, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    """``script`` in bash with the virtualenv activated (its bin first on PATH)."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env.update(PATH=f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}", VIRTUAL_ENV=str(venv))
    return subprocess.run(["bash", "-ec", script], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


@pytest.mark.slow
def test_new_project_passes_its_tests(venv: Path, tmp_path: Path) -> None:
    """The documented line (docs/installing.md), verbatim: the project installs and its tests pass
    (in-process and through its entry point, with pmda_py's plugin)."""
    block = _block("pmda-py new demo")
    assert block.strip() == "pmda-py new demo && cd demo && pip install -e . && pytest"
    r = _sh(block, tmp_path, venv)
    assert r.returncode == 0 and "2 passed" in r.stdout, r.stdout + r.stderr
    assert sorted(str(p.relative_to(tmp_path / "demo")) for p in (tmp_path / "demo").rglob("*.py")) == [
        "demo/__init__.py",
        "demo/table.py",
        "tests/test_table.py",
    ]
    # a test that can fail: the table answering something else fails the project's tests
    table = tmp_path / "demo" / "demo" / "table.py"
    table.write_text(table.read_text().replace("self.fetches for inst", "self.fetches + 1 for inst"))
    r = _sh("pytest -q", tmp_path / "demo", venv)
    assert r.returncode != 0 and "2 failed" in r.stdout, r.stdout


@pytest.mark.parametrize("name", ["9lives", "class", "pmda_py", "a-b", "tests"])
def test_new_refuses_names_that_cannot_be_a_package(tmp_path: Path, name: str) -> None:
    r = subprocess.run(pmda_py_argv("new", name), cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "cannot name an agent" in r.stderr and not list(tmp_path.iterdir()), r.stderr


def test_new_never_writes_into_a_project(tmp_path: Path) -> None:
    (tmp_path / "demo").mkdir()
    (tmp_path / "demo" / "mine.py").write_text("keep\n")
    r = subprocess.run(pmda_py_argv("new", "demo"), cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert r.returncode == 1 and "not an empty directory" in r.stderr
    assert [p.name for p in (tmp_path / "demo").iterdir()] == ["mine.py"]


def test_project_config_names_the_entry_point() -> None:
    files = project_files("disk_io", 401)
    assert 'disk_io = "disk_io.table:DiskIoTable"' in files["pyproject.toml"]
    assert "name = disk_io\ndomain = 401\n" in files["pmda.conf"]
    assert "table = disk_io\nmount = disk_io\n" in files["pmda.conf"]


NAME, DOMAIN = "pypmdanew", "313"


@pytest.mark.pcp
@pytest.mark.system
def test_pmda_py_install_puts_a_new_project_into_pmcd(venv: Path, tmp_path: Path) -> None:
    """``pmda-py new`` then the documented ``sudo pmda-py install .``: the
    package is pip installed into the agent's virtualenv, its pmda.conf
    installed, the agent in pmcd.conf through pmdaproc.sh with values;
    ``pmda-py remove`` takes it out again."""
    require_root_pcp()
    install, remove = _block("sudo pmda-py install .").strip().splitlines()
    assert install == "sudo pmda-py install ." and remove == "sudo pmda-py remove -n demo"
    before = PMCD_CONF.read_text()
    r = _sh(f"pmda-py new {NAME} -d {DOMAIN}", tmp_path, venv)
    assert r.returncode == 0, r.stderr
    project = tmp_path / NAME
    try:
        r = _sh(install.replace("sudo ", "") + " </dev/null", project, venv)
        assert r.returncode == 0, r.stdout + r.stderr
        assert re.search(rf"Check {NAME} metrics have appeared \.\.\. 2 metrics and \d+ values", r.stdout), r.stdout
        line = next(ln for ln in PMCD_CONF.read_text().splitlines() if ln.startswith(f"{NAME}\t"))
        assert line.startswith(f"{NAME}\t{DOMAIN}\tpipe\tbinary"), line
        assert wait(lambda: has_values(f"{NAME}.count"))
        agent_venv = PMDAS / NAME / "venv"
        show = subprocess.run([str(agent_venv / "bin" / "pip"), "show", NAME], capture_output=True, text=True)
        assert show.returncode == 0 and f"Name: {NAME}" in show.stdout  # the package, in the agent's virtualenv
        assert (SYSCONF / NAME / f"{NAME}.conf").read_text().startswith("# The pypmdanew agent's config")
    finally:
        r = _sh(remove.replace("sudo ", "").replace("demo", NAME), project, venv)
        shutil.rmtree(PMDAS / NAME, ignore_errors=True)
        shutil.rmtree(SYSCONF / NAME, ignore_errors=True)
    assert r.returncode == 0 and f"Check {NAME} metrics have gone away ... OK" in r.stdout, r.stdout + r.stderr
    assert PMCD_CONF.read_text().count(f"\n{NAME}\t") == 0 and not (PMNS_DIR / NAME).exists()
    assert sorted(before.split("\n")) == sorted(PMCD_CONF.read_text().split("\n")) or NAME not in PMCD_CONF.read_text()
    assert wait(lambda: not our_pids(str(PMDAS / NAME / "venv")))
    assert not Path(f"/var/lib/pcp/config/pmlogconf/{NAME}").exists()  # its pmlogconf group went with it


def test_new_dir_and_domain(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """--dir names where the project goes (an empty directory will do), -d its domain."""
    (tmp_path / "empty").mkdir()
    assert new_main(["disk_io", "--dir", str(tmp_path / "empty"), "-d", "402"]) == 0
    assert "name = disk_io\ndomain = 402\n" in (tmp_path / "empty" / "pmda.conf").read_text()
    assert (tmp_path / "empty" / "disk_io" / "table.py").is_file() and not (tmp_path / "disk_io").exists()
    assert str(tmp_path / "empty") in capsys.readouterr().out


@pytest.mark.parametrize("domain", ["0", "511"])
def test_new_refuses_a_domain_out_of_range(tmp_path: Path, domain: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert new_main(["agent", "--dir", str(tmp_path / "p"), "-d", domain]) == 2
    err = capsys.readouterr().err
    assert err == f"pmda-py new: domain {domain} out of range 1-510\n" and not (tmp_path / "p").exists()


def test_new_into_a_dir_it_cannot_make_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "file").write_text("")
    assert new_main(["agent", "--dir", str(tmp_path / "file" / "sub")]) == 1
    err = capsys.readouterr().err
    assert err.startswith("pmda-py new: cannot write ") and err.count("\n") == 1, err

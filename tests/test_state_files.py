"""Every state file the package writes goes through pmda_py.safefile: a
symlink planted where the old code put its temporary (``PATH.tmpPID``) or at
the target itself cannot redirect a save, a failed save leaves no temporary,
and a state file that is a FIFO does not block its reader.

Run as root (CI), the victim is a root-only 0600 file: what the issue saw
overwritten by a root agent."""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from pathlib import Path

import pytest

from pmda_py.openmetrics.state import read_state, write_state
from pmda_py.table import InstanceCache
from pmda_py.tools.installer import main as installer_main

VICTIM_TEXT = "root:only:victim\n"


def _victim(tmp_path: Path) -> Path:
    victim = tmp_path / "victim"
    victim.write_text(VICTIM_TEXT)
    victim.chmod(0o600)
    return victim


def _plant(target: Path, victim: Path) -> None:
    """Symlinks to the victim at the names the old code wrote through: the
    target's ``.tmpPID`` for this and the next pids, ``.new`` and
    ``.pmda_py.PID``."""
    for pid in range(os.getpid() - 5, os.getpid() + 60):
        for name in (f"{target.name}.tmp{pid}", f"{target.name}.pmda_py.{pid}"):
            (target.parent / name).symlink_to(victim)
    (target.parent / f"{target.name}.new").symlink_to(victim)


def _cache_save(target: Path) -> None:
    cache = InstanceCache(str(target))
    cache.lookup("alpha")
    cache.lookup("beta")
    cache.save()
    assert not cache.dirty


def _state_save(target: Path) -> None:
    assert write_state(str(target), b"names\n") is None


def _pmcdconf_save(target: Path) -> None:
    target.write_text("pmcd 2 dso pmcd_init /x\n\n[access]\n")
    target.chmod(0o640)
    assert installer_main(["pmcdconf", str(target), "pypmda", "310", "pypmda 310 pipe binary /bin/true"]) == 0
    assert stat.S_IMODE(target.stat().st_mode) == 0o640  # the file's own mode is kept
    assert "pypmda 310" in target.read_text()


def _configure_save(target: Path) -> None:
    conf = target.parent.parent / "src.conf"
    conf.write_text("[pmda]\nname = pypmda\n\n[table simple]\nmount = pypmda.simple\n")
    assert installer_main(["configure", str(conf), str(target), "pypmda", "310"]) == 0
    assert "domain = 310" in target.read_text()


def _generated_save(target: Path) -> None:
    assert installer_main(["pmns", "--table", "simple", "-d", "310", "-o", str(target)]) == 0
    assert "numfetch\tPYPMDA:0:0" in target.read_text()


SAVES: dict[str, Callable[[Path], None]] = {
    "instance_cache": _cache_save,
    "openmetrics_state": _state_save,
    "installer_pmcdconf": _pmcdconf_save,
    "installer_configure": _configure_save,
    "installer_output": _generated_save,
}


@pytest.mark.parametrize("kind", list(SAVES))
def test_planted_temporaries_cannot_redirect_a_save(tmp_path: Path, kind: str) -> None:
    victim = _victim(tmp_path)
    d = tmp_path / "state"
    d.mkdir()
    target = d / "253.1"
    if kind != "installer_pmcdconf":  # pmcdconf edits an existing file
        _plant(target, victim)
    else:
        _plant(d / "253.x", victim)  # names planted next to it stay as they are
        for pid in range(os.getpid() - 5, os.getpid() + 60):
            (d / f"253.1.pmda_py.{pid}").symlink_to(victim)
    before = set(os.listdir(d))
    SAVES[kind](target)
    assert victim.read_text() == VICTIM_TEXT
    assert stat.S_IMODE(victim.stat().st_mode) == 0o600
    assert not target.is_symlink() and target.is_file()
    assert target.stat().st_uid == os.geteuid()
    # nothing but the target is new: the temporary is gone
    assert set(os.listdir(d)) - before <= {"253.1"}


@pytest.mark.parametrize("kind", ["instance_cache", "openmetrics_state", "installer_output"])
def test_a_symlink_at_the_target_is_replaced_not_followed(tmp_path: Path, kind: str) -> None:
    victim = _victim(tmp_path)
    d = tmp_path / "state"
    d.mkdir()
    target = d / "253.1"
    target.symlink_to(victim)
    SAVES[kind](target)
    assert victim.read_text() == VICTIM_TEXT
    assert not target.is_symlink()


@pytest.mark.parametrize("kind", ["instance_cache", "openmetrics_state", "installer_output"])
def test_a_failing_save_leaves_no_temporary(tmp_path: Path, kind: str) -> None:
    d = tmp_path / "state"
    d.mkdir()
    target = d / "253.1"
    target.mkdir()  # the rename over a directory fails after the temporary is written
    (target / "keep").write_text("x")
    if kind == "instance_cache":
        cache = InstanceCache(str(target))
        cache.lookup("a")
        cache.save()
        assert cache.dirty  # tried again at the next save
    elif kind == "openmetrics_state":
        assert write_state(str(target), b"x") is not None
    else:
        assert installer_main(["pmns", "--table", "simple", "-d", "310", "-o", str(target)]) == 1
    assert os.listdir(d) == ["253.1"]
    assert os.listdir(target) == ["keep"]


def test_configure_check_failure_leaves_nothing(tmp_path: Path) -> None:
    src = tmp_path / "bad.conf"
    src.write_text("[table t]\ntable = simple\nmount = pypmda.t\n")
    dest = tmp_path / "out" / "pmda_py.conf"
    dest.parent.mkdir()
    dest.write_text("old\n")

    def failing(tmp: str) -> None:
        raise ValueError("refused")

    from pmda_py import safefile

    with pytest.raises(ValueError):
        safefile.atomic_write(str(dest), b"new\n", check=failing)
    assert dest.read_text() == "old\n"
    assert os.listdir(dest.parent) == ["pmda_py.conf"]


def test_state_reads_of_a_fifo_do_not_block(tmp_path: Path) -> None:
    """A state file replaced by a FIFO (no writer: a plain open() would wait
    for one forever) is refused at once and reported."""
    fifo = tmp_path / "253.1"
    os.mkfifo(fifo)
    cache = InstanceCache(str(fifo))
    problem = cache.load()
    assert problem is not None and "not a regular file" in problem
    _table, why = read_state(str(fifo), 100)
    assert why is not None and "not a regular file" in why
    assert read_state(str(tmp_path / "missing"), 100)[1] is None

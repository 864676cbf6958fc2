"""The log is opened as root, in a directory the PCP user may own
(``/var/log/pcp/pmcd`` is pcp's): a symlink, FIFO or hard link planted at
its name is refused, never followed, and the agent logs to stderr instead
(issue 19: nothing of the agent can be redirected)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from pmda_py.safefile import FileRefused, open_append
from pmda_py.testing.support import pmda_py_argv


def _run(log: Path) -> subprocess.CompletedProcess[bytes]:
    """The agent on a pipe whose pmcd goes away at once (EOF)."""
    cmd = pmda_py_argv("run", "-d", "253", "-l", str(log), "--table", "simple=simple")
    return subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True, timeout=60)


@pytest.mark.parametrize("planted", ["symlink", "fifo", "hardlink"])
def test_a_planted_log_name_is_not_followed(tmp_path: Path, planted: str) -> None:
    victim = tmp_path / "victim"
    victim.write_text("root's file\n")
    log = tmp_path / "pmda.log"
    if planted == "symlink":
        log.symlink_to(victim)
    elif planted == "fifo":
        os.mkfifo(log)
    else:
        os.link(victim, log)
    r = _run(log)
    assert r.returncode == 0, r.stderr
    assert victim.read_text() == "root's file\n"  # not a byte added
    err = r.stderr.decode()
    assert "cannot open log" in err and "logging to stderr" in err, err
    assert " exit " in err  # the agent ran and logged to stderr


def test_a_log_is_created_and_appended(tmp_path: Path) -> None:
    log = tmp_path / "pmda.log"
    assert _run(log).returncode == 0
    assert _run(log).returncode == 0
    assert log.read_text().count(" exit ") == 2
    fd = open_append(str(log))
    os.close(fd)
    os.link(log, tmp_path / "other")
    with pytest.raises(FileRefused):
        open_append(str(log))


@pytest.mark.parametrize("swapped", ["log directory", "its parent"])
def test_a_log_directory_swapped_for_a_link_is_not_followed(tmp_path: Path, swapped: str) -> None:
    """``/var/log/pcp`` belongs to the PCP user too: it can rename
    ``pmcd`` away and put a symlink to any directory in its place, and a log
    opened as root by name would then be created (or appended to) there.
    A symlink in a directory that others than root and the agent can write
    is not followed on the way to the log: the agent logs to stderr."""
    shared = tmp_path / "var"  # writable by others, as /var/log/pcp is by pcp
    shared.mkdir()
    shared.chmod(0o777)
    elsewhere = tmp_path / "etc"
    elsewhere.mkdir()
    if swapped == "log directory":
        (shared / "pmcd").symlink_to(elsewhere)
        log = shared / "pmcd" / "pmda.log"
    else:
        (shared / "pcp").symlink_to(elsewhere)
        (elsewhere / "pmcd").mkdir()
        log = shared / "pcp" / "pmcd" / "pmda.log"
    r = _run(log)
    assert r.returncode == 0, r.stderr
    assert [p.name for p in elsewhere.rglob("*.log")] == [], "the log was made through the link"
    err = r.stderr.decode()
    assert "cannot open log" in err and "logging to stderr" in err, err


def test_a_log_directory_reached_through_links_only_root_can_change_is_used(tmp_path: Path) -> None:
    """A link in a directory only the agent's user (or root) can write is
    the site's own (``/var/log`` kept on another disk): it is followed, and
    missing directories are made."""
    real = tmp_path / "disk"
    real.mkdir()
    (tmp_path / "log").symlink_to(real)
    tmp_path.chmod(0o755)
    log = tmp_path / "log" / "pmcd" / "pmda.log"
    assert _run(log).returncode == 0
    assert " exit " in (real / "pmcd" / "pmda.log").read_text()

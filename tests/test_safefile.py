"""pmda_py.safefile: state files cannot be redirected, reads cannot block."""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

import pytest

from pmda_py.safefile import FileRefused, atomic_write, read_regular


def test_write_replaces_a_symlink_at_the_target_instead_of_following_it(tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.write_text("root only\n")
    target = tmp_path / "253.1"
    target.symlink_to(victim)
    atomic_write(str(target), b"ours\n")
    assert victim.read_text() == "root only\n"
    assert not target.is_symlink()
    assert target.read_bytes() == b"ours\n"


def test_write_never_uses_a_planted_temporary(tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.write_text("keep\n")
    target = tmp_path / "state"
    # the old scheme's names, planted for the next pids
    for pid in range(os.getpid(), os.getpid() + 50):
        (tmp_path / f"state.tmp{pid}").symlink_to(victim)
    atomic_write(str(target), b"new\n", mode=0o600)
    assert victim.read_text() == "keep\n"
    assert target.read_bytes() == b"new\n"
    assert stat.S_IMODE(target.stat().st_mode) == 0o600


def test_a_failed_write_leaves_no_temporary(tmp_path: Path) -> None:
    target = tmp_path / "adir"
    target.mkdir()
    (target / "x").write_text("x")
    before = sorted(os.listdir(tmp_path))
    with pytest.raises(OSError):
        atomic_write(str(target), b"data")
    assert sorted(os.listdir(tmp_path)) == before


def test_read_of_a_fifo_does_not_block(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(FileRefused):
        read_regular(str(fifo), 100)


def test_read_is_bounded_and_whole_refuses_a_larger_file(tmp_path: Path) -> None:
    f = tmp_path / "big"
    with open(f, "wb") as out:
        out.truncate(1 << 30)  # sparse: costs no disk
    assert len(read_regular(str(f), 10)) == 10
    with pytest.raises(FileRefused):
        read_regular(str(f), 4096, whole=True)


def test_read_checks_the_owner_and_nofollow(tmp_path: Path) -> None:
    f = tmp_path / "f"
    f.write_bytes(b"abc")
    link = tmp_path / "link"
    link.symlink_to(f)
    assert read_regular(str(link), 10) == b"abc"
    with pytest.raises(OSError):
        read_regular(str(link), 10, follow=False)
    with pytest.raises(FileRefused):
        read_regular(str(f), 10, owners=frozenset({os.getuid() + 1}))


def test_a_device_is_not_even_opened(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Opening some devices has effects (a watchdog starts counting): a name
    that is not a regular file is refused before any open."""
    link = tmp_path / "link"
    link.symlink_to("/dev/null")
    opened: list[str] = []
    real = os.open

    def counting(path: Any, *args: Any, **kw: Any) -> int:
        opened.append(os.fsdecode(path))
        return real(path, *args, **kw)

    monkeypatch.setattr(os, "open", counting)
    with pytest.raises(FileRefused):
        read_regular(str(link), 10)
    assert opened == []

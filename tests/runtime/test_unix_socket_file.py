"""The unix socket's file is made as root in a directory that the PCP user
(or whoever ``-u`` names a directory of) may write: between the ``bind``
that creates it and the calls that give it its mode and owner, the name can
be swapped for a link to any file.  Those calls must reach only the socket."""

from __future__ import annotations

import os
import socket
import stat
from pathlib import Path
from typing import Any

import pytest
import trio

from pmda_py.runtime import sockets


def _swap_after_bind(monkeypatch: pytest.MonkeyPatch, path: Path, victim: Path) -> list[str]:
    """Make the first mode or owner change of the socket's file find, at
    ``path``, a symlink to ``victim`` (as a local attacker who can write the
    socket's directory would plant it, right after the bind)."""
    seen: list[str] = []
    real_chmod, real_chown = os.chmod, os.chown

    def plant() -> None:
        if not seen:
            if os.path.lexists(path):
                os.rename(path, str(path) + ".moved")
            os.symlink(victim, path)
        seen.append("planted")

    def chmod(p: Any, mode: int, *args: Any, **kw: Any) -> None:
        plant()
        real_chmod(p, mode, *args, **kw)

    def chown(p: Any, uid: int, gid: int, *args: Any, **kw: Any) -> None:
        plant()
        real_chown(p, uid, gid, *args, **kw)

    monkeypatch.setattr(os, "chmod", chmod)
    monkeypatch.setattr(os, "chown", chown)
    return seen


def test_a_name_swapped_after_the_bind_costs_no_other_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    victim = tmp_path / "shadow"
    victim.write_text("secret\n")
    victim.chmod(0o600)
    before = victim.stat()
    path = tmp_path / "pmda.sock"
    seen = _swap_after_bind(monkeypatch, path, victim)

    async def main() -> None:
        listener = await sockets._bind_unix(str(path), None)
        try:
            assert seen, "the socket's file was given no mode"
            after = victim.stat()
            assert stat.S_IMODE(after.st_mode) == 0o600, "the planted link's target got the socket's mode"
            assert (after.st_uid, after.st_gid) == (before.st_uid, before.st_gid)
            # the listener's name is the socket, connectable, with its mode
            st = os.lstat(path)
            assert stat.S_ISSOCK(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o660
            assert (st.st_dev, st.st_ino) == listener.ident
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as c:
                c.connect(str(path))
        finally:
            listener.sock.close()

    trio.run(main)
    assert victim.read_text() == "secret\n"
    # nothing of ours is left beside it but the socket (and what was planted)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pmda.sock", "shadow"]


def test_the_socket_file_is_made_with_its_mode_and_nothing_else_left(tmp_path: Path) -> None:
    path = tmp_path / "pmda.sock"

    async def main() -> None:
        listener = await sockets._bind_unix(str(path), None)
        listener.sock.close()

    old = os.umask(0)  # the mode does not depend on the caller's umask
    try:
        trio.run(main)
    finally:
        os.umask(old)
    st = os.lstat(path)
    assert stat.S_ISSOCK(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o660
    assert [p.name for p in tmp_path.iterdir()] == ["pmda.sock"]


def test_a_path_at_the_length_limit_still_binds(tmp_path: Path) -> None:
    """The private directory's name is longer than the socket's own: a path
    that fits the 107 bytes of a unix socket address binds all the same."""
    base = tmp_path / ("d" * max(1, 100 - len(str(tmp_path))))
    base.mkdir()
    path = base / ("s" * (107 - len(str(base)) - 1))
    assert len(str(path)) == 107

    async def main() -> None:
        listener = await sockets._bind_unix(str(path), None)
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as c:
                c.connect(str(path))
        finally:
            listener.sock.close()

    trio.run(main)
    assert stat.S_ISSOCK(os.lstat(path).st_mode)
    assert [p.name for p in base.iterdir()] == [path.name]


class _SwapDirectoryOnBind:
    """A trio socket whose ``bind`` is followed at once by what a local user
    who can write the socket's directory can do to the private directory
    made beside it: rename it away (a directory's name is its parent's
    entry: no write permission on it is needed) and put in its place a
    directory of their own holding a symlink ``s`` to ``victim``."""

    def __init__(self, real: Any, victim: Path) -> None:
        self._real = real
        self._victim = victim
        self.swapped: list[str] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)

    async def bind(self, address: str) -> None:
        await self._real.bind(address)
        parent = Path(address).parent
        if str(parent).startswith("/proc/self/fd/"):  # bound through a descriptor on the directory
            parent = Path(os.readlink(parent))
        os.rename(parent, str(parent) + ".moved")
        os.mkdir(parent)
        os.symlink(self._victim, parent / "s")
        self.swapped.append(str(parent))


def test_a_private_directory_swapped_after_the_bind_costs_no_other_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The private directory is bound in by name; whoever can write its
    parent can rename it and plant another of the same name in the gap
    before the socket is given its mode and owner and renamed into place:
    those must still reach only the socket, and the planted link must not
    become the agent's socket path."""
    victim = tmp_path / "shadow"
    victim.write_text("secret\n")
    victim.chmod(0o600)
    before = victim.stat()
    path = tmp_path / "pmda.sock"
    made: list[_SwapDirectoryOnBind] = []
    real_socket = trio.socket.socket

    def socket_(*args: Any, **kw: Any) -> Any:
        s = _SwapDirectoryOnBind(real_socket(*args, **kw), victim)
        made.append(s)
        return s

    monkeypatch.setattr(trio.socket, "socket", socket_)

    async def main() -> None:
        try:
            listener = await sockets._bind_unix(str(path), None)
        except OSError:
            return  # refusing is fine; giving the victim the socket's mode is not
        try:
            st = os.lstat(path)
            assert stat.S_ISSOCK(st.st_mode), "the planted link was renamed into the socket's place"
            assert (st.st_dev, st.st_ino) == listener.ident
        finally:
            listener.sock.close()

    trio.run(main)
    assert made and made[0].swapped, "the race was not played"
    after = victim.stat()
    assert stat.S_IMODE(after.st_mode) == 0o600, "the planted link's target got the socket's mode"
    assert (after.st_uid, after.st_gid) == (before.st_uid, before.st_gid)
    assert victim.read_text() == "secret\n"


def test_a_socket_another_agent_listens_on_is_not_taken(tmp_path: Path) -> None:
    """A socket left at ``-u PATH`` by an earlier run is replaced; one that a
    running agent still listens on (a second copy started by mistake: the
    systemd unit and a pmcd.conf line with a command) is not: taking its
    name would cut the running agent off from pmcd."""
    path = tmp_path / "pmda.sock"
    live = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    live.bind(str(path))
    live.listen(1)
    before = os.lstat(path)

    async def main() -> None:
        with pytest.raises(OSError, match="in use"):
            await sockets._bind_unix(str(path), None)

    with live:
        trio.run(main)
        after = os.lstat(path)
        assert (after.st_dev, after.st_ino) == (before.st_dev, before.st_ino)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pmda.sock"]

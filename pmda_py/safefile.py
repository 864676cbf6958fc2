"""Files that cannot be turned against the agent: the one way pmda_py writes
state files and reads files that somebody else may control.

Writes (:func:`atomic_write`) go to a fresh temporary in the target's own
directory, opened with ``O_CREAT | O_EXCL | O_NOFOLLOW`` (a planted file or
symlink makes the open fail instead of redirecting it), are flushed, given
their mode, renamed over the target, and the temporary is removed on every
failure path.  A symlink at the target itself is replaced, never followed.

Reads (:func:`read_regular`) open with ``O_NONBLOCK`` (a FIFO or a device
cannot stall the caller), check on the opened descriptor that it is a regular
file (a name swapped between a ``stat`` and the ``open`` gains nothing), and
read at most ``limit`` bytes.  :func:`open_regular` is the same check for
callers that read part of a file themselves.
"""

from __future__ import annotations

import errno
import os
import secrets
import stat
from typing import Callable

__all__ = [
    "FileRefused",
    "atomic_write",
    "move_aside",
    "open_append",
    "open_directory",
    "open_regular",
    "read_regular",
]

_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_NONBLOCK = getattr(os, "O_NONBLOCK", 0)
_NOCTTY = getattr(os, "O_NOCTTY", 0)
_TRIES = 16


class FileRefused(OSError):
    """A file that is not what a reader may safely take (not a regular
    file, too large, or the wrong owner): ``strerror`` says which,
    ``filename`` is the path, :attr:`uid` the owner of a file refused for it."""

    #: the owner of a file refused for its owner (else None)
    uid: int | None = None


def atomic_write(
    path: str,
    data: bytes,
    *,
    mode: int = 0o644,
    makedirs: bool = False,
    owner: tuple[int, int] | None = None,
    check: Callable[[str], None] | None = None,
) -> None:
    """Replace ``path`` with ``data`` atomically and without following links.
    ``owner`` (uid, gid): the file is given to them (on the descriptor,
    before the rename; needs the privilege to do so).

    ``check``, if given, is called with the temporary's path once it is
    complete, before the rename: whatever it raises leaves the target as it
    was (a file validated by another program before it is put in place).

    Raises :class:`OSError` (or what ``check`` raised) on failure; the
    target is then unchanged and no temporary is left behind.
    """
    directory = os.path.dirname(path) or "."
    if makedirs:
        os.makedirs(directory, exist_ok=True)
    base = os.path.basename(path)
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | _CLOEXEC
    for _ in range(_TRIES):
        tmp = os.path.join(directory, f".{base}.{secrets.token_hex(6)}.tmp")
        try:
            fd = os.open(tmp, flags, 0o600)
        except FileExistsError:
            continue
        break
    else:  # pragma: no cover - 16 collisions of 48 random bits
        raise OSError(errno.EEXIST, f"no free temporary name for {path}")
    try:
        try:
            view = memoryview(data)
            while view:
                n = os.write(fd, view)
                view = view[n:]
            if owner is not None:
                os.fchown(fd, *owner)
            os.fchmod(fd, mode)
            os.fsync(fd)
        finally:
            os.close(fd)
        if check is not None:
            check(tmp)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def open_regular(path: str, *, follow: bool = True, owners: frozenset[int] | None = None) -> int:
    """A read-only descriptor on ``path`` that cannot block, never opened
    unless ``stat`` says it is a regular file, and checked on the
    descriptor to be a regular file (and, with ``owners``, to belong to one
    of those uids).  With ``follow=False`` a symlink at ``path`` is refused.
    The caller closes the descriptor."""
    # a name that is not a regular file now is not opened at all (opening a
    # device can have effects of its own); the check on the descriptor below
    # is the one that counts (the name may be swapped in between)
    if not stat.S_ISREG(os.stat(path, follow_symlinks=follow).st_mode):
        raise FileRefused(errno.EINVAL, "not a regular file", path)
    flags = os.O_RDONLY | _NONBLOCK | _CLOEXEC | _NOCTTY | (0 if follow else _NOFOLLOW)
    fd = os.open(path, flags)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise FileRefused(errno.EINVAL, "not a regular file", path)
        if owners is not None and st.st_uid not in owners:
            refused = FileRefused(errno.EPERM, f"owned by uid {st.st_uid}", path)
            refused.uid = st.st_uid
            raise refused
    except BaseException:
        os.close(fd)
        raise
    return fd


def read_regular(
    path: str, limit: int, *, follow: bool = True, owners: frozenset[int] | None = None, whole: bool = False
) -> bytes:
    """At most ``limit`` bytes of the regular file ``path`` (see
    :func:`open_regular`).  With ``whole=True`` a file larger than ``limit``
    is refused (:class:`FileRefused`) instead of being cut short."""
    fd = open_regular(path, follow=follow, owners=owners)
    try:
        if whole and os.fstat(fd).st_size > limit:
            raise FileRefused(errno.EFBIG, f"larger than {limit} bytes", path)
        chunks: list[bytes] = []
        left = limit + 1 if whole else limit
        while left > 0:
            chunk = os.read(fd, min(left, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        data = b"".join(chunks)
        if whole and len(data) > limit:
            raise FileRefused(errno.EFBIG, f"larger than {limit} bytes", path)
        return data
    finally:
        os.close(fd)


def move_aside(path: str, suffix: str = "bad") -> str:
    """Move ``path`` to a new name beside it (``PATH.SUFFIX``, or
    ``PATH.SUFFIX.N`` if taken) without ever replacing an existing file;
    the new name.  Raises :class:`OSError` if it cannot be moved."""
    for n in range(_TRIES * 64):
        aside = f"{path}.{suffix}" if n == 0 else f"{path}.{suffix}.{n}"
        try:
            os.link(path, aside, follow_symlinks=False)  # (fails if ``aside`` exists: nothing overwritten)
        except FileExistsError:
            continue
        except OSError as err:
            if err.errno not in (errno.EPERM, errno.ENOTSUP, errno.EXDEV, errno.EMLINK):
                raise
            if os.path.lexists(aside):  # (no hard links here: a rename to a free name)
                continue
            os.rename(path, aside)
            return aside
        os.unlink(path)
        return aside
    raise OSError(errno.EEXIST, f"no free name to move {path} aside")


def open_append(path: str, *, mode: int = 0o644, makedirs: bool = False) -> int:
    """A write-only ``O_APPEND`` descriptor on ``path`` (created with
    ``mode`` if missing) for a log: a symlink at ``path`` is refused
    (``O_NOFOLLOW``), and so is one on the way to it in a directory others
    can write (:func:`open_directory`; ``makedirs`` makes the missing
    directories on that way); the open cannot block on a FIFO, and the
    descriptor is checked to be a regular file with no other name (a hard
    link planted to another file is refused).  The caller closes the
    descriptor."""
    dirfd = open_directory(os.path.dirname(os.path.abspath(path)), makedirs=makedirs)
    try:
        flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | _NOFOLLOW | _NONBLOCK | _CLOEXEC
        fd = os.open(os.path.basename(path), flags, mode, dir_fd=dirfd)
    finally:
        os.close(dirfd)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise FileRefused(errno.EINVAL, "not a regular file", path)
        if st.st_nlink != 1:
            raise FileRefused(errno.EMLINK, f"{st.st_nlink} names (a hard link)", path)
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _others_can_write(st: os.stat_result) -> bool:
    """Whether a directory may be written by someone other than root and us
    (its owner, its group, anyone)."""
    if st.st_uid not in (0, os.geteuid()) or st.st_mode & stat.S_IWOTH:
        return True
    return bool(st.st_mode & stat.S_IWGRP) and st.st_gid != 0


def open_directory(path: str, *, makedirs: bool = False) -> int:
    """A descriptor on the directory ``path`` (absolute), reached from
    ``/`` one name at a time: a symlink is followed only in a directory
    that no one but root and this process's user can write (the site's
    own, e.g. ``/var/log`` on another disk); one in a directory others can
    write (``/var/log/pcp`` is the PCP user's, ``/tmp`` anyone's) is
    refused (:class:`FileRefused`), as it may have been planted to send
    root's files elsewhere.  ``makedirs`` makes missing directories (mode
    0755).  The caller closes the descriptor."""
    flags = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | _CLOEXEC
    fd = os.open("/", flags)
    try:
        for name in [p for p in path.split("/") if p]:
            careful = _others_can_write(os.fstat(fd))
            try:
                try:
                    nfd = os.open(name, flags | (_NOFOLLOW if careful else 0), dir_fd=fd)
                except FileNotFoundError:
                    if not makedirs:
                        raise
                    try:
                        os.mkdir(name, 0o755, dir_fd=fd)
                    except FileExistsError:
                        pass
                    nfd = os.open(name, flags | _NOFOLLOW, dir_fd=fd)
            except OSError as err:
                if careful and err.errno == errno.ELOOP:  # (O_NOFOLLOW met a symlink)
                    raise FileRefused(
                        errno.ELOOP, f"{name} is a symlink in a directory others can write", path
                    ) from None
                raise
            os.close(fd)
            fd = nfd
    except BaseException:
        os.close(fd)
        raise
    return fd

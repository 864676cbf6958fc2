"""``-U USER``: the daemon drops to the user (groups, gid, uid) after its
log and sockets are open and before anything of a table runs."""

from __future__ import annotations

import os

import structlog

__all__ = ["drop_privileges"]

log = structlog.get_logger("pmda_py.runtime")


def drop_privileges(username: str) -> None:
    """Become ``username``.  Not running as root, only the user the daemon
    already is can be asked for (nothing to do); another one is refused,
    as PCP's own agents refuse it (their setgid fails), rather than run
    under an identity the caller did not ask for.

    Raises:
        KeyError: no such user.
        PermissionError: another user, and not root.
    """
    import pwd

    pw = pwd.getpwnam(username)
    if os.geteuid() != 0:
        if pw.pw_uid != os.geteuid():
            raise PermissionError(f"only root can switch users (running as uid {os.geteuid()})")
        return
    os.setgroups(os.getgrouplist(pw.pw_name, pw.pw_gid))
    os.setgid(pw.pw_gid)
    os.setuid(pw.pw_uid)
    log.info("privileges_dropped", user=username, uid=pw.pw_uid, gid=pw.pw_gid)

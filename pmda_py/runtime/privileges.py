"""``-U USER``: the daemon drops to the user (groups, gid, uid) after its
log and sockets are open and before anything of a table runs."""

from __future__ import annotations

import os

import structlog

__all__ = ["drop_privileges"]

log = structlog.get_logger("pmda_py.runtime")


def drop_privileges(username: str) -> None:
    if os.geteuid() != 0:
        return
    import pwd

    pw = pwd.getpwnam(username)
    os.setgroups(os.getgrouplist(pw.pw_name, pw.pw_gid))
    os.setgid(pw.pw_gid)
    os.setuid(pw.pw_uid)
    log.info("privileges_dropped", user=username, uid=pw.pw_uid, gid=pw.pw_gid)

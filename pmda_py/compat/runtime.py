"""Where a compat script meets the engine: the log, the user, ``run()``.

``run()`` mounts the script's :class:`~pmda_py.compat.table.CompatTable` at
the root of its domain in a :class:`~pmda_py.compat.meta.CompatDispatcher`
(the daemon's trio runner enforces the deadlines) and serves pmcd on the
pipe ``connect_pmcd()`` opened, until pmcd closes it or a SIGTERM/SIGINT.
"""

from __future__ import annotations

import os
import signal
import sys
from typing import TYPE_CHECKING

import structlog
import trio

from pmda_py import logconfig
from pmda_py.compat.agent import AGENT
from pmda_py.compat.meta import CompatDispatcher
from pmda_py.compat.table import CheckedCompatTable, CompatTable
from pmda_py.dispatch import Dispatcher, HelpSource, Mount
from pmda_py.pmapi import PM_INDOM_NULL, indom_serial, pmid, pmid_cluster, pmid_item, pmid_str
from pmda_py.runtime.pipe import PipeStream, share_replies
from pmda_py.runtime.pump import TrioRunner, serve_session

if TYPE_CHECKING:
    from pmda_py.compat.pmda import MetricDispatch

__all__ = ["open_log", "serve", "set_user", "undefined_indom"]

log = structlog.get_logger("pmda_py.compat")

_opened = {"log": False}


def open_log(logfile: str) -> None:
    """pmdaOpenLog: the log takes over stderr (relative names land in the
    current directory, pmcd's log directory when pmcd starts us)."""
    if _opened["log"]:
        return
    _opened["log"] = True
    if AGENT.rfd >= 0:
        sys.stdout.flush()  # what was printed before the log opened goes where stderr went
    # the binding's PCP_PYTHON_DEBUG (libpcp debug options: its PDU traces
    # and the like in the log): any value turns on the debug lines, as -D does
    level = "debug" if os.environ.get("PCP_PYTHON_DEBUG") else "info"
    where = logconfig.configure(logfile, "console", level)
    if AGENT.rfd >= 0:
        os.dup2(2, 1)  # the script's print()s follow stderr into the log, a line at a time
        reconfigure = getattr(sys.stdout, "reconfigure", None)
        if reconfigure is not None:
            reconfigure(line_buffering=True)
    log.info("start", pmda=AGENT.pmdaname, domain=AGENT.domain, log=where, pid=os.getpid(), engine="pmda_py compat")


def set_user(username: str) -> int:
    """pmSetProcessIdentity: as root, become ``username`` (groups, gid,
    uid); otherwise nothing to do."""
    if os.geteuid() != 0 or not username:
        return 0
    import pwd

    pw = pwd.getpwnam(username)
    os.setgroups(os.getgrouplist(pw.pw_name, pw.pw_gid))
    os.setgid(pw.pw_gid)
    os.setuid(pw.pw_uid)
    log.info("privileges_dropped", user=username, uid=pw.pw_uid, gid=pw.pw_gid)
    return 0


def _help_source(path: str) -> tuple[bool, HelpSource | None]:
    """The binding's rule: a readable help file ``path`` means texts come
    from ``path.dir``/``path.pag`` (none if those do not open), not from
    add_metric's strings."""
    if not path or not os.access(path, os.R_OK):
        return False, None
    from pmda_py.helpfile import HelpFile

    try:
        return True, HelpFile.open(path)
    except (OSError, ValueError) as err:
        log.warning("helpfile_unreadable", path=path, error=str(err))
        return True, None


def build(pmda: MetricDispatch) -> tuple[CompatTable, Dispatcher]:
    """The script's table mounted in a dispatcher of its domain.
    ``PYPMDA_COMPAT_DEADLINE`` (seconds) overrides the callbacks' deadline."""
    help_file, help_source = _help_source(AGENT.helpfile)
    kind = CheckedCompatTable if AGENT.callbacks["refresh_metrics"] is not None else CompatTable
    table = kind(pmda, help_file=help_file)
    deadline = os.environ.get("PYPMDA_COMPAT_DEADLINE")
    if deadline:
        table.deadline = float(deadline)
    dispatcher = CompatDispatcher(
        AGENT.domain,
        [Mount(table, "", AGENT.name)],
        TrioRunner(),
        name=AGENT.name,
        help_source=help_source,
    )
    table.dispatcher = dispatcher
    return table, dispatcher


def undefined_indom(pmda: MetricDispatch) -> str | None:
    """Why libpcp_pmda's start (pmdaInit) would refuse the script's tables,
    or None: a metric whose indom's serial is that of no indom the script
    added (serials alone are compared, and only when it added any)."""
    serials = {indom_serial(int(pi.it_indom)) for pi in pmda._indomtable}
    if not serials:
        return None
    for m in pmda._metrictable:
        it = int(m.m_desc.indom) & 0xFFFFFFFF
        if it != PM_INDOM_NULL and indom_serial(it) not in serials:
            p = int(m.m_desc.pmid)
            name = pmda._metric_names.get(p, "?")
            where = pmid_str(pmid(AGENT.domain, pmid_cluster(p), pmid_item(p)))
            return f"metric {where} ({name}) names instance domain serial {indom_serial(it)}, which no added indom has"
    return None


def serve(pmda: MetricDispatch) -> None:
    """The binding's ``run()`` outside Install: serve pmcd until EOF; or,
    as the binding, return at once (the script goes on after ``run()``)
    when libpcp_pmda would refuse its tables: pmcd then sees the agent
    end."""
    AGENT.connect()
    refused = undefined_indom(pmda)
    if refused is not None:
        log.error("pmda_init_failed", reason=refused, served=False)
        return
    table, dispatcher = build(pmda)
    log.info("serving", metrics=len(table.metrics()), indoms=len(table.indoms()))
    assert AGENT.session is not None
    reason = trio.run(_serve, dispatcher)
    log.info("exit", reason=reason)


async def _serve(dispatcher: Dispatcher) -> str:
    assert AGENT.session is not None
    AGENT.serving = True
    stream = PipeStream(AGENT.rfd, AGENT.wfd)
    share_replies()  # large fast-path replies are spliced into the pipe, not copied
    reason = "eof"
    with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        async with trio.open_nursery() as nursery:

            async def watch() -> None:
                nonlocal reason
                async for signum in signals:
                    reason = signal.Signals(signum).name
                    nursery.cancel_scope.cancel()

            nursery.start_soon(watch)
            reason = await serve_session(stream, AGENT.session, dispatcher)
            nursery.cancel_scope.cancel()
    AGENT.serving = False
    return reason

"""The process-wide state of a compat PMDA (what the binding keeps in its C
extension's globals): the dispatch domain and name, the callbacks a script
registered, the instance caches, the pmcd channel once connected, and the
lock that keeps the script's callbacks from running two at a time.

``connect_pmcd()`` speaks first on the pipe at once (CREDS), as pmdaConnect
does, so a script may do a long initialisation (or ``pmda_notready()``)
before ``run()``; the channel's file descriptors are private copies, and
fd 1 is pointed at the log so a ``print()`` cannot corrupt a PDU.
"""

from __future__ import annotations

import os
import threading
from typing import TYPE_CHECKING, Callable

import structlog

from pmda_py.compat.cache import IndomCache
from pmda_py.errors import PmErr
from pmda_py.session import Session
from pmda_py.wire import ErrorPdu

if TYPE_CHECKING:
    from pmda_py.compat.pmda import MetricDispatch

__all__ = ["Agent", "AGENT", "generating"]

log = structlog.get_logger("pmda_py.compat")

#: a script's callback: its arguments are the binding's, what it returns is
#: the script's (read where it is used)
Callback = Callable[..., object]

#: the callback names a script may set (set_NAME)
CALLBACKS = (
    "fetch",
    "fetch_callback",
    "refresh",
    "refresh_all",
    "refresh_metrics",
    "instance",
    "store_callback",
    "label",
    "label_callback",
    "notes",
    "notes_callback",
    "attribute_callback",
    "endcontext_callback",
)


def generating() -> bool:
    """Install-time runs (PCP_PYTHON_DOMAIN / _PMNS / _PROBE): no pmcd, no log."""
    return any(k in os.environ for k in ("PCP_PYTHON_DOMAIN", "PCP_PYTHON_PMNS", "PCP_PYTHON_PROBE"))


class Agent:
    """One per process, like the binding's dispatch structure."""

    def __init__(self) -> None:
        self.domain = 0
        self.name = ""
        self.pmdaname = ""
        self.logfile = ""
        self.helpfile = ""
        self.callbacks: dict[str, Callback | None] = dict.fromkeys(CALLBACKS)
        self.caches: dict[int, IndomCache] = {}
        self.pmda: MetricDispatch | None = None  # the script's PMDA object (its metric and indom tables)
        self.version = 0  # bumped when metrics or indoms are added, removed or replaced
        self.notify_change = False
        self.comm_flags = 0
        self.context = 0  # the client context of the request being served
        self.lock = threading.Lock()  # one callback batch at a time
        self.session: Session | None = None
        self.rfd = -1
        self.wfd = -1
        self.serving = False

    def cache(self, indom: int) -> IndomCache:
        c = self.caches.get(indom)
        if c is None:
            from pmda_py.compat.cache import cache_path

            c = self.caches[indom] = IndomCache(indom, cache_path(indom))
        return c

    def need_refresh(self) -> None:
        self.version += 1

    # ------------------------------------------------------------ channel

    def take_channel(self) -> None:
        """Keep pmcd's pipe (fds 0/1) for the PDUs, on private descriptors,
        and point fd 1 at stderr (the log, once it is open): a ``print()``
        anywhere in the script, even before the PMDA exists, never reaches
        the PDU stream."""
        if self.rfd >= 0 or generating():
            return
        self.rfd = os.dup(0)
        self.wfd = os.dup(1)
        os.dup2(2, 1)
        devnull = os.open(os.devnull, os.O_RDONLY)
        os.dup2(devnull, 0)
        os.close(devnull)

    def connect(self) -> None:
        """pmdaConnect: send our CREDS on pmcd's pipe."""
        if self.session is not None or generating():
            return
        self.take_channel()
        self.session = Session(pid=os.getpid(), flags=self.comm_flags)
        self._write(self.session.start())
        log.info("connected", pmda=self.pmdaname, domain=self.domain, pid=os.getpid())

    def _write(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            n = os.write(self.wfd, view)
            view = view[n:]

    def notready(self) -> None:
        """pmda_notready: tell pmcd to wait (an unsolicited ERROR PDU)."""
        if self.session is None:
            self.connect()
        if self.session is None or self.serving:
            log.warning("notready_ignored", reason="not connected" if self.session is None else "already serving")
            return
        self.session.not_ready()
        self._write(ErrorPdu(PmErr.PMDANOTREADY).encode())
        log.info("notready")

    def ready(self) -> None:
        """pmda_ready: pmcd may send requests again."""
        if self.session is None or self.serving:
            log.warning("ready_ignored", reason="not connected" if self.session is None else "already serving")
            return
        from pmda_py.session import SessionState

        # sent whatever state we think pmcd is in, as the binding does: a
        # pmcd.conf line with ``notready`` waits for it without our notready
        if self.session.state is not SessionState.NOTREADY:
            self.session.not_ready()
        self._write(self.session.ready())
        log.info("ready")


AGENT = Agent()

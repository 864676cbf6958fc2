"""``pmda-py run``: the PMDA daemon, where trio meets the sans-IO core.

Opens the transport as a ``pmdaGetOpt`` daemon does (pipe by default; ``-i``
inet, ``-6`` ipv6, ``-u`` unix socket) and protects stdout, drops privileges
(``-U``) after the log and sockets are open, and only then loads the tables
(:mod:`pmda_py.loading`: imports in a worker thread under the load timeout,
then their startups), speaking first (CREDS) on time meanwhile; then runs
one receive -> dispatch -> send loop: one request at a time, one reply each,
in order.  Table calls run under their deadlines so pmcd's 5 s timeout is
never reached.  Exits cleanly on EOF and SIGTERM/SIGINT.

Socket modes (:class:`SocketServer`) serve pmcd, not whoever connects first:
the listener stays open; every connection gets our CREDS and must answer
with pmcd's CREDS within the creds timeout (from root, the PCP user or our
own uid, checked before any PDU: SO_PEERCRED on unix sockets, the owner of
the connecting socket in /proc/net/tcp{,6} on inet/ipv6), else it is
dropped, logged once per peer and reason (:mod:`pmda_py.admission`).  One
pmcd session at a time: a second pmcd is refused (pmcd only reconnects an
agent it has lost, so it never needs to take over).  When the session ends
the daemon exits (pmcd started it, as libpcp_pmda's agents do), or with
``--standalone`` goes back to listening with its tables intact, re-creating
its unix socket when pmcd removes it.
"""

from __future__ import annotations

import errno
import importlib
import os
import signal
import socket
import struct
import sys
from collections.abc import Awaitable, Sequence
from functools import partial
from typing import IO, Any, Callable, TypeVar

import attrs
import structlog
import trio

from pmda_py import logconfig
from pmda_py.admission import RefusalLog, tcp_peer_uid
from pmda_py.config import Config, ConfigFileError, TableSpec, _line_of, parse_args, pcp_conf
from pmda_py.dispatch import ConfigError, Dispatcher, HelpSource, Mount, TableTimeout
from pmda_py.errors import PmErr, WireFormatError, codename
from pmda_py.loading import Say, TableLoadError, describe, load_all, start_all
from pmda_py.session import (
    CLOSED,
    NEED_DATA,
    BadRequest,
    HandshakeError,
    Ignored,
    Notice,
    Request,
    Session,
    SessionState,
)
from pmda_py.stats import PmdaStats
from pmda_py.table import CheckMode, Table
from pmda_py.table.base import check_mode_of
from pmda_py.wire import ErrorPdu, Pdu, PduType

__all__ = [
    "BUILTIN_TABLES",
    "SocketServer",
    "TrioRunner",
    "await_creds",
    "load_table",
    "main",
    "run",
    "serve_session",
    "serve_stream",
]

log = structlog.get_logger("pmda_py.daemon")

_T = TypeVar("_T")

#: Built-in tables by name.
BUILTIN_TABLES: dict[str, str] = {
    "simple": "pmda_py.tables.simple:SimpleTable",
    "control": "pmda_py.tables.control:ControlTable",
    "mmv": "pmda_py.tables.mmv:MmvTable",
    "openmetrics": "pmda_py.tables.openmetrics:OpenMetricsTable",
}


def _entry_point(name: str) -> Any | None:
    try:
        from importlib.metadata import entry_points
    except ImportError:  # pragma: no cover
        return None
    all_eps: Any = entry_points()
    # Python 3.9 returns a dict of groups; later versions have select()
    eps = all_eps.select(group="pmda_py.tables") if hasattr(all_eps, "select") else all_eps.get("pmda_py.tables", [])
    for ep in eps:
        if ep.name == name:
            return ep.load()
    return None


def load_table(spec: TableSpec, config: Config) -> Table:
    """Find and construct the table of ``spec``: built-in name, entry point
    (group ``pmda_py.tables``) or ``module:Class``."""
    target = BUILTIN_TABLES.get(spec.table)
    factory: Any = None
    try:
        if target is None:
            factory = _entry_point(spec.table)
            if factory is None:
                target = spec.table
        if factory is None:
            assert target is not None
            if ":" not in target:
                raise TableLoadError(f"table {spec.name}: unknown table {spec.table!r} (not built-in, no entry point)")
            mod, _, attr = target.partition(":")
            for directory in reversed(config.python_path):  # the config's pythonpath, searched first
                if directory not in sys.path:
                    sys.path.insert(0, directory)
            factory = getattr(importlib.import_module(mod), attr)
        table = factory(**spec.options) if _accepts_options(factory) else factory()
    except TableLoadError as err:
        raise TableLoadError(_where(spec, config) + str(err)) from err
    except BaseException as err:  # SystemExit/KeyboardInterrupt at import too: a table that cannot load
        raise TableLoadError(f"{_where(spec, config)}table {spec.name} ({spec.table}): {describe(err)}") from err
    if not isinstance(table, Table):
        raise TableLoadError(f"{_where(spec, config)}table {spec.name}: {spec.table} is not a pmda_py Table")
    if spec.deadline is not None:
        table.deadline = spec.deadline
    return table


def _where(spec: TableSpec, config: Config) -> str:
    """``file:line: [table NAME] table: `` for a table from the config file
    (found when the file was read: after the privilege drop it may be unreadable)."""
    if spec.source or not config.config_path:
        return spec.source
    try:
        with open(config.config_path, encoding="utf-8") as f:
            text = f.read()
    except OSError:
        return ""
    section = f"table {spec.name}"
    line = _line_of(config.config_path, text, section, "table") or _line_of(config.config_path, text, section, None)
    return f"{config.config_path}:{line}: [{section}] table: " if line else ""


def _accepts_options(factory: Any) -> bool:
    return bool(getattr(factory, "accepts_options", False))


#: seconds an async check() that overran (and was cancelled) is not run again
CHECK_PAUSE = 1.0


_IDLE: Any = object()  # no check of the table pending
_DONE: Any = object()  # a check left running ended without raising


class TrioRunner:
    """Runs table calls under their deadlines (trio.move_on_after), and
    tables' checks under theirs (see :meth:`Table.check`)."""

    def __init__(self) -> None:
        #: id(table) -> the outcome of its plain check left running in a
        #: worker thread: None while it runs, then what it raised, or
        #: ``_DONE``; an async check's id -> when its pause ends
        self._pending: dict[int, Any] = {}
        self._how: dict[type[Table], CheckMode] = {}

    async def check(self, table: Table) -> None:
        key = id(table)
        pending = self._pending.get(key, _IDLE)
        if pending is not _IDLE:
            if pending is None or (type(pending) is float and pending > trio.current_time()):
                return  # still running in its thread, or paused after an overrun
            del self._pending[key]
            if isinstance(pending, BaseException):
                raise pending
        kind = type(table)
        how = self._how.get(kind)
        if how is None:
            how = self._how[kind] = check_mode_of(kind)
        if how == "inline":  # declared: a plain def called here, no deadline (nothing could cut it short)
            table.check()
            return
        deadline = table.check_deadline
        if how == "async":
            with trio.move_on_after(deadline):
                await table.check()  # type: ignore[misc]
                return
            self._pending[key] = trio.current_time() + CHECK_PAUSE
            raise TableTimeout(f"{kind.__name__}.check overran {deadline}s (cancelled)")
        outcome: list[Any] = []  # the thread's result, read only once it ended

        def run() -> None:
            try:
                table.check()
            except Exception as exc:
                outcome.append(exc)
            except BaseException as exc:  # e.g. sys.exit() in a check: it must not end the daemon
                outcome.append(RuntimeError(f"check raised {type(exc).__name__}: {exc}"))
            else:
                outcome.append(_DONE)
            if key in self._pending:  # the request gave up on it: report at the next one
                self._pending[key] = outcome[0]

        self._pending[key] = None  # no second check of this table while this one runs
        with trio.move_on_after(deadline):
            await trio.to_thread.run_sync(run, abandon_on_cancel=True)
            del self._pending[key]
            if outcome and isinstance(outcome[0], BaseException):
                raise outcome[0]
            return
        if outcome:  # it ended just as the deadline fired
            del self._pending[key]
            if isinstance(outcome[0], BaseException):
                raise outcome[0]
            return
        raise TableTimeout(f"{kind.__name__}.check overran {deadline}s (left running in its thread)")

    async def call(self, table: Table, what: str, fn: Callable[[], Awaitable[_T]]) -> _T:
        with trio.move_on_after(table.deadline) as scope:
            return await fn()
        assert scope.cancelled_caught
        raise TableTimeout(f"{type(table).__name__}.{what} overran {table.deadline}s")

    async def gather(self, calls: Sequence[tuple[Table, str, Callable[[], Awaitable[Any]]]]) -> list[Any]:
        results: list[Any] = [None] * len(calls)

        async def one(k: int, table: Table, what: str, fn: Callable[[], Awaitable[Any]]) -> None:
            try:
                results[k] = await self.call(table, what, fn)
            except Exception as exc:
                results[k] = exc

        if len(calls) == 1:
            await one(0, *calls[0])
            return results
        async with trio.open_nursery() as nursery:
            for k, (table, what, fn) in enumerate(calls):
                nursery.start_soon(one, k, table, what, fn)
        return results


async def serve_stream(
    stream: trio.abc.Stream,
    session: Session,
    dispatcher: Dispatcher | Active,
    *,
    notready: bool = False,
    on_ready: Callable[[], Awaitable[None]] | None = None,
) -> str:
    """Serve one pmcd channel until EOF; returns why it ended.

    ``dispatcher`` may be an :class:`Active` holder, whose dispatcher is
    looked up for every request (so a reload takes effect between requests).
    """
    await stream.send_all(session.start())
    return await serve_session(stream, session, dispatcher, notready=notready, on_ready=on_ready)


async def serve_session(
    stream: trio.abc.Stream,
    session: Session,
    dispatcher: Dispatcher | Active,
    *,
    notready: bool = False,
    on_ready: Callable[[], Awaitable[None]] | None = None,
) -> str:
    """:func:`serve_stream` for a session whose CREDS were already sent
    (and pmcd's perhaps received, by :func:`await_creds`)."""
    active = dispatcher if isinstance(dispatcher, Active) else Active(dispatcher)
    if notready:
        session.not_ready()
        log.info("notready", detail="pmcd.conf 'notready': starting tables before READY")
        if on_ready is not None:
            await on_ready()
        await stream.send_all(session.ready())
        log.info("ready")
    while True:
        try:
            event = session.next_event()
        except WireFormatError as err:
            log.error("protocol_error", error=str(err), code=codename(err.pm_code), action="closing channel")
            return "protocol error"
        if event is NEED_DATA:
            try:
                data = await stream.receive_some(65536)
            except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as err:
                log.info("channel_error", error=str(err))
                return "channel error"
            session.receive_data(data)
            continue
        if event is CLOSED:
            if session.truncated:
                log.warning("eof_mid_pdu", detail="pmcd closed the channel in the middle of a PDU")
            return "eof"
        if isinstance(event, (Request, BadRequest)):
            if isinstance(event, BadRequest):
                log.warning(
                    "bad_request",
                    type=_type_name(event.pdu_type),
                    context=event.context,
                    code=codename(event.code),
                    error=event.reason,
                )
            if not active.loaded.is_set() and isinstance(event, Request):
                with trio.move_on_after(active.request_grace):  # tables still loading
                    await active.loaded.wait()
            try:
                reply: Pdu = (
                    await active.dispatcher.handle(event)
                    if active.loaded.is_set() or not isinstance(event, Request)
                    else _loading_reply(event)
                )
            except Exception as exc:  # a bug: still answer, pmcd must not wait
                log.exception("dispatch_failed", error=f"{type(exc).__name__}: {exc}")
                reply = ErrorPdu(PmErr.GENERIC)
            data = session.send(reply)
            if session.refused_reply is not None:
                kind, size = session.refused_reply
                session.refused_reply = None
                log.warning("reply_too_big", type=_type_name(kind), bytes=size, limit=session.max_length)
            try:
                await stream.send_all(data)
                if session.state is SessionState.NOTREADY:
                    log.info("notready", detail="waiting for the tables before sending PMDAREADY")
                    await active.wait_ready()
                    await stream.send_all(session.ready())
                    log.info("ready")
            except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as err:
                session.send_failed()
                log.info("channel_error", error=str(err))
                return "channel error"
        elif isinstance(event, Notice):
            pdu = event.pdu
            if isinstance(pdu, ErrorPdu) and pdu.code == PmErr.NOTCONN:
                active.dispatcher.end_context(event.context)
                log.debug("end_context", context=event.context)
            else:
                log.debug("notice", type=_type_name(pdu.pdu_type), context=event.context)
        elif isinstance(event, Ignored):
            log.warning("ignored_pdu", type=_type_name(event.pdu_type), context=event.context, reason=event.reason)


#: requests after whose PM_ERR_PMDANOTREADY reply pmcd waits for PMDAREADY
#: (they go through its CheckError); the PMNS requests do not in PCP 6.0 --
#: there a later PMDAREADY would be read as the next reply, a protocol
#: failure that ends the agent -- so they are answered PM_ERR_AGAIN
_NOTREADY_TYPES = frozenset(
    {PduType.FETCH, PduType.DESC_REQ, PduType.INSTANCE_REQ, PduType.TEXT_REQ, PduType.LABEL_REQ, PduType.RESULT}
)


def _loading_reply(event: Request) -> ErrorPdu:
    """The answer to a request that came before the tables were loaded:
    PM_ERR_PMDANOTREADY (PMDAREADY follows) where pmcd expects it, else
    PM_ERR_AGAIN."""
    if event.pdu.pdu_type in _NOTREADY_TYPES:
        return ErrorPdu(PmErr.PMDANOTREADY)
    return ErrorPdu(PmErr.AGAIN)


def _type_name(t: int) -> str:
    try:
        return PduType(t).name
    except ValueError:
        return hex(t)


# ------------------------------------------------------------------ transports


class PipeStream(trio.abc.Stream):
    """pmcd's pipes: we read fd ``rfd`` (stdin) and write fd ``wfd`` (stdout),
    directly when a request is waiting or the reply fits (see the methods)."""

    #: reads served without waiting before one yields to the other tasks
    YIELD_EVERY = 32

    def __init__(self, rfd: int, wfd: int) -> None:
        self._r = trio.lowlevel.FdStream(rfd)  # makes the fds non-blocking
        self._w = trio.lowlevel.FdStream(wfd)
        self._rfd, self._wfd = rfd, wfd
        self._unyielded = 0

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        # pmcd waits for each reply, so the pipe is almost always writable: write
        # at once and let trio wait (and checkpoint) only when it is full.  The
        # next receive_some waits for pmcd's next request, which yields.
        view = memoryview(data)
        try:
            while view:
                view = view[os.write(self._wfd, view) :]
        except BlockingIOError:
            await self._w.send_all(view)

    async def wait_send_all_might_not_block(self) -> None:
        await self._w.wait_send_all_might_not_block()

    async def receive_some(self, max_bytes: int | None = None) -> bytes | bytearray:
        # What is already there is read without a trip through trio's
        # scheduler; when nothing is, wait for the pipe and read (trio's own
        # receive_some would checkpoint and try the read once more first).
        size = max_bytes or 65536
        if self._unyielded < self.YIELD_EVERY:
            try:
                data = os.read(self._rfd, size)
            except BlockingIOError:
                pass
            else:
                self._unyielded += 1
                return data
        self._unyielded = 0
        try:
            await trio.lowlevel.wait_readable(self._rfd)
            return os.read(self._rfd, size)
        except (BlockingIOError, trio.BusyResourceError, trio.ClosedResourceError, OSError):
            return await self._r.receive_some(max_bytes)  # trio's way: its errors, its retries

    async def aclose(self) -> None:
        await self._r.aclose()
        await self._w.aclose()


def _grow_pipe(fd: int, size: int = 1 << 20) -> None:
    """Ask Linux for a bigger pipe buffer (F_SETPIPE_SZ), so a large RESULT
    reaches pmcd in a few writes instead of one per 64 KiB.  Best effort."""
    try:
        import fcntl

        fcntl.fcntl(fd, getattr(fcntl, "F_SETPIPE_SZ", 1031), size)
    except (OSError, ImportError, ValueError):
        pass


def _protect_stdio() -> tuple[int, int]:
    """Take private copies of fds 0/1 for the PDU channel and point fd 1 at
    stderr (the log), so a stray print() in a table cannot corrupt it."""
    rfd = os.dup(0)
    wfd = os.dup(1)
    _grow_pipe(wfd)
    os.dup2(2, 1)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    return rfd, wfd


async def await_creds(stream: trio.abc.Stream, session: Session, timeout: float) -> str | None:
    """Send our CREDS and wait up to ``timeout`` seconds in all (not per
    read) for the peer's; None once pmcd's CREDS came, else why not.

    ``session`` should have ``require_creds``; bytes after the CREDS stay
    in it for :func:`serve_session`."""
    received = 0
    with trio.move_on_after(timeout):
        try:
            await stream.send_all(session.start())
            while True:
                event = session.next_event()
                if event is NEED_DATA:
                    data = await stream.receive_some(4096)
                    received += len(data)
                    session.receive_data(data)
                    continue
                if event is CLOSED:
                    if session.truncated:
                        return f"closed in the middle of its first PDU ({received} bytes)"
                    return "closed without sending CREDS"
                if session.handshake_done and session.peer_creds is not None:
                    return None
                return "no CREDS"  # pragma: no cover - require_creds raises first
        except HandshakeError as err:
            return f"not pmcd: {err}"
        except WireFormatError as err:
            return f"not pmcd: {err}"
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as err:
            if isinstance(err.__cause__, ConnectionResetError) or isinstance(err, ConnectionResetError):
                return f"reset without sending CREDS ({received} bytes received)"
            return f"channel error: {err}"
    return f"no CREDS within {timeout:g} s ({received} bytes received)"


def peer_credentials(sock: trio.socket.SocketType) -> tuple[int, int, int] | None:
    """(pid, uid, gid) of a unix socket's peer (SO_PEERCRED), None if unknown."""
    opt = getattr(socket, "SO_PEERCRED", None)
    if opt is None:
        return None
    try:
        raw = sock.getsockopt(socket.SOL_SOCKET, opt, struct.calcsize("3i"))
    except OSError:
        return None
    pid, uid, gid = struct.unpack("3i", raw)
    return pid, uid, gid


def allowed_uids() -> dict[int, str]:
    """Who may be pmcd on a unix socket: root, the PCP user, and our own
    uid (a process of our uid can signal or ptrace us anyway)."""
    import pwd

    out = {0: "root"}
    user = pcp_conf().get("PCP_USER", "pcp")
    try:
        out.setdefault(pwd.getpwnam(user).pw_uid, user)
    except KeyError:
        pass
    euid = os.geteuid()
    if euid not in out:
        try:
            out[euid] = pwd.getpwuid(euid).pw_name
        except KeyError:
            out[euid] = str(euid)
    return out


def _user_name(uid: int) -> str:
    import pwd

    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)


def _listen_address(config: Config) -> tuple[str, int]:
    port = socket.getservbyname(config.address) if not config.address.isdigit() else int(config.address)
    loopback = "::1" if config.transport == "ipv6" else "127.0.0.1"
    return config.bind_address or loopback, port


async def _bind_unix(path: str, username: str | None) -> tuple[trio.socket.SocketType, tuple[int, int]]:
    """A listening unix socket at ``path``; returns it and the file's (dev, ino)."""
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
    sock = trio.socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        await sock.bind(path)
        os.chmod(path, 0o660)
        if os.geteuid() == 0:
            # as libpcp_pmda does: the socket belongs to the PCP user (or -U's)
            owner = username or pcp_conf().get("PCP_USER", "pcp")
            try:
                import pwd

                pw = pwd.getpwnam(owner)
                os.chown(path, pw.pw_uid, pw.pw_gid)
            except (KeyError, OSError) as err:
                log.warning("chown_failed", path=path, user=owner, error=str(err))
        sock.listen(16)
        st = os.stat(path)
    except BaseException:
        sock.close()
        raise
    return sock, (st.st_dev, st.st_ino)


async def _listen(config: Config) -> tuple[trio.socket.SocketType, tuple[int, int] | None]:
    if config.transport == "unix":
        return await _bind_unix(config.address, config.username)
    family = socket.AF_INET6 if config.transport == "ipv6" else socket.AF_INET
    host, port = _listen_address(config)
    sock = trio.socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if family == socket.AF_INET6:
            sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
        await sock.bind((host, port))
        sock.listen(16)
    except BaseException:
        sock.close()
        raise
    return sock, None


class _Handshake:
    """A connection waiting for pmcd's CREDS."""

    def __init__(self) -> None:
        self.scope = trio.CancelScope()
        self.evicted = False


class _Live:
    """The pmcd session being served."""

    def __init__(self, pmcd_pid: int, peer: str) -> None:
        self.pmcd_pid = pmcd_pid
        self.peer = peer
        self.done = trio.Event()


class SocketServer:
    """Socket modes: admit only pmcd, serve one pmcd session at a time.

    Every accepted connection is handled in its own task, so an idle or
    slow peer never delays pmcd's connection: unix peers are checked with
    SO_PEERCRED first, then our CREDS are sent and pmcd's awaited for
    ``config.creds_timeout`` seconds in all.  At most ``max_pending``
    connections wait at once; one more evicts the oldest.  A valid pmcd
    while a session is live waits up to ``takeover_grace`` seconds for that
    session to end (a restarted pmcd's old channel may still be draining),
    else is refused.  :attr:`finished` is set when a session ends and the
    daemon is not ``standalone``.
    """

    max_pending = 8
    takeover_grace = 1.0
    socket_check_interval = 1.0
    #: seconds between two lines about the same kind of refusal of the same peer
    refusal_log_interval = 10.0

    def __init__(
        self,
        config: Config,
        active: Active,
        *,
        on_ready: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        self.config = config
        self.active = active
        self.on_ready = on_ready
        self.standalone = config.standalone
        self.finished = trio.Event()
        self.reason = "eof"
        self.sessions = 0
        self._sock: trio.socket.SocketType | None = None
        self._ident: tuple[int, int] | None = None
        self._pending: list[_Handshake] = []
        self._live: _Live | None = None
        #: refused connections, logged once per (event, peer, reason) then counted
        self.refusals = RefusalLog(self.refusal_log_interval)
        #: one /proc/net/tcp lookup at a time (a flood of connections costs one thread)
        self._lookups = trio.CapacityLimiter(1)

    async def open(self) -> None:
        """Bind and listen (before privileges are dropped)."""
        self._sock, self._ident = await _listen(self.config)

    def close(self) -> None:
        """Close the listener; remove our unix socket file if it is still ours."""
        if self._sock is not None:
            self._sock.close()
        if self.config.transport == "unix" and self._ident is not None:
            try:
                st = os.stat(self.config.address)
                if (st.st_dev, st.st_ino) == self._ident:
                    os.unlink(self.config.address)
            except OSError:
                pass

    async def serve(self) -> None:
        """Accept connections until cancelled."""
        async with trio.open_nursery() as nursery:
            if self.standalone and self.config.transport == "unix":
                nursery.start_soon(self._keep_socket_file)
            nursery.start_soon(self._flush_refusals)
            while True:
                sock = self._sock
                assert sock is not None
                try:
                    conn, addr = await sock.accept()
                except trio.ClosedResourceError:
                    if sock is self._sock:
                        raise
                    continue  # the socket file was re-created: accept on the new listener
                except OSError as err:
                    if err.errno in (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM):
                        log.error("accept_failed", error=str(err), action="retrying in 0.1 s")
                        await trio.sleep(0.1)
                    continue
                nursery.start_soon(self._admit, conn, addr)

    async def _flush_refusals(self) -> None:
        while True:
            await trio.sleep(self.refusals.interval)
            self.refusals.flush()

    # ------------------------------------------------------------ admission

    async def _peer(self, conn: trio.socket.SocketType, addr: Any) -> tuple[str, str, str | None]:
        """A name for the peer, who it is (``uid=N``, or its host where the
        uid is unknown: what refusals are counted by), and why it is refused
        before any PDU (or None).  Unix sockets: SO_PEERCRED; inet/ipv6: the
        owner of the connecting socket in /proc/net/tcp{,6}."""
        if self.config.transport != "unix":
            if isinstance(addr, tuple) and len(addr) >= 2:
                host = f"[{addr[0]}]" if ":" in str(addr[0]) else str(addr[0])
                peer = f"{host}:{addr[1]}"
            else:
                host = peer = str(addr)
            try:
                local = conn.getsockname()
            except OSError:
                return peer, host, "its connection is gone"
            uid = await trio.to_thread.run_sync(tcp_peer_uid, conn.family, addr, local, limiter=self._lookups)
            if uid is None:
                return peer, host, "no local socket owns the connection (/proc/net/tcp): not pmcd on this host"
            peer = f"{peer},uid={uid}"
        else:
            creds = peer_credentials(conn)
            if creds is None:
                return "unix:?", "?", "peer credentials (SO_PEERCRED) unavailable"
            pid, uid, _gid = creds
            peer = f"unix:pid={pid},uid={uid}"
        allowed = allowed_uids()
        if uid not in allowed:
            names = ", ".join(sorted(set(allowed.values())))
            return peer, f"uid={uid}", f"uid {uid} ({_user_name(uid)}) is not one of {names}"
        return peer, f"uid={uid}", None

    async def _admit(self, conn: trio.socket.SocketType, addr: Any) -> None:
        stream = trio.SocketStream(conn)
        transport = self.config.transport
        refusals = self.refusals
        try:
            peer, who, refusal = await self._peer(conn, addr)
            if refusal is not None:
                refusals.refused("peer_refused", who, refusal, transport=transport, peer=peer)
                return
            session = Session(pid=os.getpid(), flags=0, require_creds=True)
            entry = _Handshake()
            self._pending.append(entry)
            if len(self._pending) > self.max_pending:
                oldest = self._pending.pop(0)
                oldest.evicted = True
                oldest.scope.cancel()
            why: str | None = "cancelled"
            try:
                with entry.scope:
                    why = await await_creds(stream, session, self.config.creds_timeout)
            finally:
                if entry in self._pending:
                    self._pending.remove(entry)
            if entry.evicted:
                why = f"evicted: more than {self.max_pending} connections waiting for CREDS"
            if why is not None:
                refusals.refused("peer_dropped", who, why, transport=transport, peer=peer)
                return
            assert session.peer_creds is not None
            pmcd_pid = session.peer_creds.from_
            if self._live is not None:
                with trio.move_on_after(self.takeover_grace):
                    await self._live.done.wait()
            if self._live is not None or self.finished.is_set():
                live = self._live
                refusals.refused(
                    "pmcd_refused",
                    who,
                    (
                        f"a pmcd session is live (pmcd pid {live.pmcd_pid}, {live.peer})"
                        if live is not None
                        else "the daemon is exiting"
                    ),
                    transport=transport,
                    peer=peer,
                    pmcd_pid=pmcd_pid,
                )
                return
            await self._serve(stream, session, peer, pmcd_pid)
        finally:
            with trio.CancelScope(shield=True):
                await stream.aclose()

    async def _serve(self, stream: trio.SocketStream, session: Session, peer: str, pmcd_pid: int) -> None:
        live = self._live = _Live(pmcd_pid, peer)
        self.sessions += 1
        log.info(
            "session_start",
            transport=self.config.transport,
            peer=peer,
            pmcd_pid=pmcd_pid,
            session=self.sessions,
            pdu_version=session.peer_creds.version if session.peer_creds else None,
        )
        reason = "cancelled"
        try:
            reason = await serve_session(
                stream, session, self.active, notready=self.config.notready, on_ready=self.on_ready
            )
        finally:
            for context in session.contexts:  # that pmcd's clients are gone
                self.active.dispatcher.end_context(context)
            self._live = None
            live.done.set()
        log.info(
            "session_end",
            reason=reason,
            pmcd_pid=pmcd_pid,
            session=self.sessions,
            action="listening" if self.standalone else "exiting",
        )
        if not self.standalone:
            self.reason = reason
            self.finished.set()

    # ------------------------------------------------------- unix socket file

    async def _keep_socket_file(self) -> None:
        """pmcd removes an agent's unix socket when it stops or drops the
        agent (CleanupAgent, ShutdownAgent): put a new one in its place at
        once, so the next pmcd (which may start a few milliseconds later)
        can connect.  Woken by inotify on the socket's directory where
        there is one, and every ``socket_check_interval`` seconds anyway.
        A file someone else put there is left alone."""
        path = self.config.address
        watch = _DirectoryWatch.open(_parent_dir(path))
        complained = False
        try:
            while True:
                if watch is not None:
                    with trio.move_on_after(self.socket_check_interval):
                        await watch.wait()
                else:
                    await trio.sleep(self.socket_check_interval)
                try:
                    st = os.stat(path)
                except FileNotFoundError:
                    pass
                except OSError:
                    continue
                else:
                    if (st.st_dev, st.st_ino) != self._ident and not complained:
                        log.warning("socket_replaced", path=path, action="not ours: leaving it alone")
                        complained = True
                    continue
                try:
                    sock, ident = await _bind_unix(path, None)
                except OSError as err:
                    if not complained:
                        log.error("socket_recreate_failed", path=path, error=str(err), action="retrying")
                        complained = True
                    continue
                old, self._sock, self._ident = self._sock, sock, ident
                complained = False
                if old is not None:
                    old.close()
                log.info("socket_recreated", path=path, reason="removed (pmcd removes it when it stops)")
        finally:
            if watch is not None:
                watch.close()


def _parent_dir(path: str) -> str:
    return os.path.dirname(os.path.abspath(path))


class _DirectoryWatch:
    """inotify on a directory (Linux, through ctypes): :meth:`wait` returns
    when a name in it is removed or renamed away."""

    _IN_MOVED_FROM = 0x40
    _IN_DELETE = 0x200
    _IN_DELETE_SELF = 0x400
    _IN_MOVE_SELF = 0x800

    def __init__(self, fd: int) -> None:
        self.fd = fd

    @classmethod
    def open(cls, directory: str) -> _DirectoryWatch | None:
        """None where inotify is not available (the caller polls)."""
        try:
            import ctypes
            import ctypes.util

            libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
            fd = int(libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC))
            if fd < 0:
                return None
            mask = cls._IN_MOVED_FROM | cls._IN_DELETE | cls._IN_DELETE_SELF | cls._IN_MOVE_SELF
            if int(libc.inotify_add_watch(fd, os.fsencode(directory), mask)) < 0:
                os.close(fd)
                return None
        except (OSError, AttributeError):
            return None
        return cls(fd)

    async def wait(self) -> None:
        await trio.lowlevel.wait_readable(self.fd)
        try:
            while os.read(self.fd, 65536):
                pass
        except BlockingIOError:
            pass

    def close(self) -> None:
        trio.lowlevel.notify_closing(self.fd)
        os.close(self.fd)


def _drop_privileges(username: str) -> None:
    if os.geteuid() != 0:
        return
    import pwd

    pw = pwd.getpwnam(username)
    os.setgroups(os.getgrouplist(pw.pw_name, pw.pw_gid))
    os.setgid(pw.pw_gid)
    os.setuid(pw.pw_uid)
    log.info("privileges_dropped", user=username, uid=pw.pw_uid, gid=pw.pw_gid)


def _helpfile(config: Config) -> HelpSource | None:
    if not config.helpfile:
        return None
    from pmda_py.helpfile import HelpFile

    try:
        return HelpFile.open(config.helpfile)
    except (OSError, ValueError) as err:
        log.warning("helpfile_unreadable", path=config.helpfile, error=str(err))
        return None


class Active:
    """The dispatcher in service; swapped whole on a successful reload.

    At start it holds an empty dispatcher until the tables are loaded
    (``loaded`` is set then): a request that arrives before waits up to
    :attr:`request_grace` seconds, then is answered PM_ERR_PMDANOTREADY
    (PMDAREADY follows when the tables are there), or PM_ERR_AGAIN for the
    PMNS requests (see :data:`_NOTREADY_TYPES`)."""

    #: seconds a request waits for the tables still loading (pmcd waits 5 s for a reply)
    request_grace = 2.0

    def __init__(self, dispatcher: Dispatcher, *, loaded: bool = True) -> None:
        self.dispatcher = dispatcher
        self.loaded = trio.Event()
        if loaded:
            self.loaded.set()

    async def wait_ready(self) -> None:
        """Until the tables are loaded and every not-ready one is ready."""
        await self.loaded.wait()
        await self.dispatcher.wait_ready()


def build_dispatcher(config: Config, stats: PmdaStats | None = None) -> Dispatcher:
    """Load the config's tables here and now (no thread, no deadline: tools
    and tests; the daemon uses :func:`load_dispatcher`) and mount them (no
    table code runs yet but imports and constructors).  Raises ConfigError /
    TableLoadError."""
    mounts = [Mount(load_table(spec, config), spec.mount, spec.name, dict(spec.options)) for spec in config.tables]
    return make_dispatcher(config, mounts, stats)


def make_dispatcher(config: Config, mounts: Sequence[Mount], stats: PmdaStats | None = None) -> Dispatcher:
    """The dispatcher of ``mounts`` under ``config``'s domain, name and labels."""
    return Dispatcher(
        config.domain,
        mounts,
        TrioRunner(),
        name=config.name,
        domain_labels=config.domain_labels,
        help_source=_helpfile(config),
        state_dir=config.state_dir or None,
        stats=stats,
    )


async def load_dispatcher(
    config: Config, *, stats: PmdaStats | None = None, skip_slow: bool = False, say: Say | None = None
) -> Dispatcher:
    """:func:`build_dispatcher` with each table loaded in a worker thread
    under ``config.load_timeout`` (see :mod:`pmda_py.loading`)."""
    loaded = await load_all(config, load_table, timeout=config.load_timeout, skip_slow=skip_slow, say=say)
    mounts = [Mount(table, spec.mount, spec.name, dict(spec.options)) for spec, table in loaded]
    return make_dispatcher(config, mounts, stats)


async def start_tables(dispatcher: Dispatcher, domain: int, *, say: Say | None = None) -> None:
    """Run every table's startup under its deadline; failures are logged
    (and said) and the table serves what it can."""
    started = [(m.name or type(m.table).__name__, m.table, dispatcher.context(m)) for m in dispatcher.mounts]
    await start_all(started, say=say)
    dispatcher.reindex()
    log.info(
        "tables_mounted",
        tables=[f"{m.name}@{m.prefix or '.'}" for m in dispatcher.mounts],
        metrics=len(dispatcher.all_names),
        domain=domain,
    )


async def shutdown_tables(dispatcher: Dispatcher) -> None:
    with trio.move_on_after(2):
        for m in dispatcher.mounts:
            try:
                await m.table.shutdown()
            except Exception as exc:
                log.error("table_shutdown_failed", table=m.name, error=str(exc))


async def reload(active: Active, config: Config, argv: Sequence[str]) -> Config:
    """SIGHUP: re-read the command line's config and swap in new tables
    atomically.  A bad new config keeps the old one running; the new tables
    are imported in a worker thread (fetches go on meanwhile), and one that
    overruns the load timeout fails the reload."""
    if not active.loaded.is_set():
        log.info("reload_deferred", detail="the tables of the start are still loading")
        await active.loaded.wait()
    try:
        new = parse_args(argv)
        if (new.domain, new.name, new.transport, new.address) != (
            config.domain,
            config.name,
            config.transport,
            config.address,
        ):
            raise ConfigError("domain, name and transport cannot change on reload; restart the agent instead")
        # the counters carry over: the control table of the new tables reads them
        dispatcher = await load_dispatcher(new, stats=active.dispatcher.stats)
    except (ConfigFileError, ConfigError, TableLoadError, SystemExit) as err:
        log.error("reload_failed", error=str(err), action="keeping the running configuration")
        return config
    await start_tables(dispatcher, new.domain)
    old = active.dispatcher
    if set(old.all_names) != set(dispatcher.all_names):
        dispatcher.names_changed = True
    active.dispatcher = dispatcher
    log.info("reloaded", config=new.config_path, tables=[m.name for m in dispatcher.mounts])
    kept = [k for k in ("creds_timeout", "standalone", "bind_address") if getattr(new, k) != getattr(config, k)]
    if kept:
        log.warning("reload_partial", not_applied=kept, detail="the listener's settings change on restart only")
        new = attrs.evolve(
            new, creds_timeout=config.creds_timeout, standalone=config.standalone, bind_address=config.bind_address
        )
    await shutdown_tables(old)
    return new


#: pipe mode: seconds CREDS waits for the tables (a table that fails to load
#: at once ends the agent before it speaks); then CREDS goes out and requests
#: meet PM_ERR_PMDANOTREADY (or PM_ERR_AGAIN) until the tables are there
#: (pmcd waits 3 s for CREDS).  With ``--notready`` CREDS goes out first and the tables load after.
CREDS_GRACE = 1.5


async def run(
    config: Config, *, stream: trio.abc.Stream | None = None, argv: Sequence[str] = (), say: Say | None = None
) -> int:
    """Serve pmcd; returns the exit status.

    The order is the guarantee: the PDU channel is opened and stdout
    protected, sockets bound and ``-U`` privileges dropped first; only then
    are the tables imported (in a worker thread, under ``load_timeout``) and
    started (under their deadlines), while CREDS goes out on time and
    requests meet PM_ERR_PMDANOTREADY until the tables are there.  ``say``
    tells the person who started the agent (one line) what failed."""
    active = Active(
        Dispatcher(config.domain, [], TrioRunner(), name=config.name, domain_labels=config.domain_labels),
        loaded=False,
    )
    server: SocketServer | None = None
    if stream is None:
        if config.transport == "pipe":
            if config.standalone:
                log.warning("standalone_ignored", reason="a pipe agent lives and dies with pmcd")
            rfd, wfd = _protect_stdio()  # before any table: a print() must not reach pmcd
            # pmcd's pipes: we write fd wfd (stdout) and read fd rfd (stdin)
            stream = PipeStream(rfd, wfd)
        else:
            server = SocketServer(config, active, on_ready=active.loaded.wait)
            await server.open()
            where = {"bind": _listen_address(config)[0]} if config.transport != "unix" else {}
            log.info(
                "listening",
                transport=config.transport,
                address=config.address,
                **where,
                standalone=config.standalone,
                creds_timeout=config.creds_timeout,
            )
    status = 0
    try:
        if config.username:
            try:
                _drop_privileges(config.username)
            except (KeyError, OSError) as err:
                log.error("privilege_drop_failed", user=config.username, error=str(err))
                if say is not None:
                    say(f"pmda-py run: cannot run as {config.username}: {err}")
                return 1
        reason = "eof"
        current = config
        reloading = trio.Lock()
        with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT, signal.SIGHUP) as signals:
            async with trio.open_nursery() as nursery:

                async def load() -> None:
                    nonlocal status, reason
                    try:
                        dispatcher = await load_dispatcher(
                            config, stats=active.dispatcher.stats, skip_slow=True, say=say
                        )
                    except (ConfigError, TableLoadError) as err:
                        log.error("config_error", error=str(err), action="exiting")
                        if say is not None:
                            say(f"pmda-py run: {err}")
                        status, reason = 1, "config error"
                        nursery.cancel_scope.cancel()
                        return
                    await start_tables(dispatcher, config.domain, say=say)
                    active.dispatcher = dispatcher
                    active.loaded.set()

                async def do_reload() -> None:
                    nonlocal current
                    async with reloading:  # one at a time, in the order asked
                        current = await reload(active, current, argv)

                async def watch_signals() -> None:
                    nonlocal reason
                    async for signum in signals:
                        if signum == signal.SIGHUP:
                            log.info("sighup", action="reloading configuration")
                            nursery.start_soon(do_reload)  # signals are still heard while it loads
                            continue
                        log.info("signal", signal=signal.Signals(signum).name, action="exiting")
                        reason = signal.Signals(signum).name
                        nursery.cancel_scope.cancel()

                async def load_then_ready() -> None:  # pipe + notready: tables after CREDS, as pmcd expects
                    nursery.start_soon(load)
                    await active.loaded.wait()

                nursery.start_soon(watch_signals)
                if server is not None:
                    nursery.start_soon(load)
                    nursery.start_soon(server.serve)
                    await server.finished.wait()
                    reason = server.reason
                else:
                    assert stream is not None
                    if not config.notready:
                        nursery.start_soon(load)
                        with trio.move_on_after(CREDS_GRACE):
                            await active.loaded.wait()
                    session = Session(pid=os.getpid(), flags=0)
                    reason = await serve_stream(
                        stream, session, active, notready=config.notready, on_ready=load_then_ready
                    )
                nursery.cancel_scope.cancel()
    finally:
        if server is not None:
            server.close()
    await shutdown_tables(active.dispatcher)
    log.info("exit", reason=reason)
    return status


#: glibc mallopt() parameters (malloc.h)
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3
#: buffers below this come from the heap and are reused, not mapped afresh
MALLOC_MMAP_THRESHOLD = 32 << 20  # glibc's ceiling for the setting on 64-bit hosts
#: free memory kept at the heap's top for the next reply rather than given back
MALLOC_TRIM_THRESHOLD = 64 << 20


def tune_malloc() -> bool:
    """Keep large reply buffers in the heap (glibc): by default a buffer of
    128 KiB or more (a 10 000-value RESULT) is a fresh mapping per fetch,
    page-faulted in and unmapped again, which costs a large fetch about a
    third of its time.  Memory freed at the heap's top is kept up to
    :data:`MALLOC_TRIM_THRESHOLD` for the next fetch.  False where the C
    library is not glibc (nothing changed)."""
    try:
        import ctypes

        libc = ctypes.CDLL(None)
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    mallopt.restype = ctypes.c_int
    return bool(mallopt(_M_MMAP_THRESHOLD, MALLOC_MMAP_THRESHOLD)) and bool(
        mallopt(_M_TRIM_THRESHOLD, MALLOC_TRIM_THRESHOLD)
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``pmda-py run``."""
    try:
        config = parse_args(sys.argv[1:] if argv is None else argv)
    except ConfigFileError as err:
        print(f"pmda-py run: bad config: {err}", file=sys.stderr)
        return 1
    # the log takes over fd 2 (as pmdaOpenLog does); a start-up failure is
    # also said on the stderr we were given (the terminal, or pmcd's log)
    given_stderr: IO[str] | None = None
    if config.logfile and config.logfile != "-":
        try:
            given_stderr = os.fdopen(os.dup(2), "w")
        except OSError:
            pass
    where = logconfig.configure(config.logfile, config.log_format, config.log_level)
    log.info(
        "start",
        name=config.name,
        domain=config.domain,
        transport=config.transport,
        address=config.address or None,
        pid=os.getpid(),
        log=where,
        python=sys.version.split()[0],
        malloc_tuned=tune_malloc(),
    )
    try:
        args = list(sys.argv[1:] if argv is None else argv)
        return trio.run(partial(run, config, argv=args, say=partial(_say, given_stderr)))
    except (ConfigError, TableLoadError) as err:
        # the log may be a file nobody is looking at: the person (or pmcd's
        # log, where an agent's stderr goes) gets the reason too
        log.error("config_error", error=str(err))
        _say(given_stderr, f"pmda-py run: {err}")
        return 1
    except OSError as err:
        if err.errno in (errno.EADDRINUSE, errno.EACCES, errno.ENOENT):
            log.error("transport_failed", error=str(err))
            _say(given_stderr, f"pmda-py run: cannot open the {config.transport} channel: {err}")
            return 1
        raise
    except KeyboardInterrupt:
        return 0
    finally:
        if given_stderr is not None:
            given_stderr.close()


def _say(stream: IO[str] | None, line: str) -> None:
    """One line to the person who started us, when the log is a file
    (best effort)."""
    if stream is None:
        return
    try:
        print(line, file=stream, flush=True)
    except (OSError, ValueError):
        pass

"""``pmda-py run``: the PMDA daemon, where trio meets the sans-IO core.

Opens the transport as a ``pmdaGetOpt`` daemon does (pipe by default; ``-i``
inet, ``-6`` ipv6, ``-u`` unix socket: listen, accept one connection, close
the listener), drops privileges (``-U``) after the log and sockets are open,
speaks first (CREDS), then runs one receive -> dispatch -> send loop: one
request at a time, one reply each, in order.  Table calls run under their
deadlines so pmcd's 5 s timeout is never reached.  Exits cleanly on EOF and
SIGTERM/SIGINT.
"""

from __future__ import annotations

import errno
import importlib
import os
import signal
import socket
import sys
from collections.abc import Awaitable, Sequence
from functools import partial
from typing import Any, Callable, TypeVar

import structlog
import trio

from pmda_py import logconfig
from pmda_py.config import Config, ConfigFileError, TableSpec, _line_of, parse_args, pcp_conf
from pmda_py.dispatch import ConfigError, Dispatcher, EncodedReply, HelpSource, Mount, TableTimeout
from pmda_py.errors import PmErr, WireFormatError, codename
from pmda_py.session import CLOSED, NEED_DATA, BadRequest, Ignored, Notice, Request, Session, SessionState
from pmda_py.table import Table
from pmda_py.wire import ErrorPdu, Pdu, PduType

__all__ = ["BUILTIN_TABLES", "TrioRunner", "load_table", "main", "run", "serve_stream"]

log = structlog.get_logger("pmda_py.daemon")

_T = TypeVar("_T")

#: Built-in tables by name.
BUILTIN_TABLES: dict[str, str] = {
    "simple": "pmda_py.tables.simple:SimpleTable",
    "control": "pmda_py.tables.control:ControlTable",
    "mmv": "pmda_py.tables.mmv:MmvTable",
    "slow": "pmda_py.tables.testing:SlowTable",
    "crash": "pmda_py.tables.testing:CrashTable",
}


class TableLoadError(Exception):
    """A table could not be found or constructed."""


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
    except Exception as err:
        raise TableLoadError(
            f"{_where(spec, config)}table {spec.name} ({spec.table}): {type(err).__name__}: {err}"
        ) from err
    if not isinstance(table, Table):
        raise TableLoadError(f"{_where(spec, config)}table {spec.name}: {spec.table} is not a pmda_py Table")
    if spec.deadline is not None:
        table.deadline = spec.deadline
    table.config = config  # type: ignore[attr-defined]
    table.options = dict(spec.options)  # type: ignore[attr-defined]
    return table


def _where(spec: TableSpec, config: Config) -> str:
    """``file:line: [table NAME] table: `` for a table from the config file."""
    if not config.config_path:
        return ""
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


class TrioRunner:
    """Runs table calls under their deadlines (trio.move_on_after)."""

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
    active = dispatcher if isinstance(dispatcher, Active) else Active(dispatcher)
    await stream.send_all(session.start())
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
            try:
                reply: Pdu | EncodedReply = await active.dispatcher.handle(session, event)
            except Exception as exc:  # a bug: still answer, pmcd must not wait
                log.exception("dispatch_failed", error=f"{type(exc).__name__}: {exc}")
                reply = ErrorPdu(PmErr.GENERIC)
            data = session.send(reply) if not isinstance(reply, EncodedReply) else _send_encoded(session, reply)
            try:
                await stream.send_all(data)
                if session.state is SessionState.NOTREADY:
                    log.info("notready", detail="waiting for the tables before sending PMDAREADY")
                    await active.dispatcher.wait_ready()
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


def _send_encoded(session: Session, reply: EncodedReply) -> bytes:
    return session.send_raw(reply.data)


def _type_name(t: int) -> str:
    try:
        return PduType(t).name
    except ValueError:
        return hex(t)


# ------------------------------------------------------------------ transports


class _PipeStream(trio.abc.Stream):
    """pmcd's pipes: we read fd ``rfd`` (stdin) and write fd ``wfd`` (stdout)."""

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
        # what is already there is read without a trip through trio's scheduler
        # (two checkpoints per read otherwise); when nothing is, trio waits
        if self._unyielded < self.YIELD_EVERY:
            try:
                data = os.read(self._rfd, max_bytes or 65536)
            except BlockingIOError:
                pass
            else:
                self._unyielded += 1
                return data
        self._unyielded = 0
        return await self._r.receive_some(max_bytes)

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


async def _listen(config: Config) -> trio.SocketListener:
    if config.transport == "unix":
        path = config.address
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass
        sock = trio.socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        await sock.bind(path)
        os.chmod(path, 0o660)
        if os.geteuid() == 0:
            # as libpcp_pmda does: the socket belongs to the PCP user (or -U's)
            owner = config.username or pcp_conf().get("PCP_USER", "pcp")
            try:
                import pwd

                pw = pwd.getpwnam(owner)
                os.chown(path, pw.pw_uid, pw.pw_gid)
            except (KeyError, OSError) as err:
                log.warning("chown_failed", path=path, user=owner, error=str(err))
    else:
        family = socket.AF_INET6 if config.transport == "ipv6" else socket.AF_INET
        port = socket.getservbyname(config.address) if not config.address.isdigit() else int(config.address)
        sock = trio.socket.socket(family, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if family == socket.AF_INET6:
            sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            await sock.bind(("::1", port))
        else:
            await sock.bind(("127.0.0.1", port))
    sock.listen(1)
    return trio.SocketListener(sock)


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
    """The dispatcher in service; swapped whole on a successful reload."""

    def __init__(self, dispatcher: Dispatcher) -> None:
        self.dispatcher = dispatcher


def build_dispatcher(config: Config) -> Dispatcher:
    """Load the config's tables and mount them (no table code runs yet but
    constructors).  Raises ConfigError / TableLoadError."""
    mounts: list[Mount] = []
    for spec in config.tables:
        table = load_table(spec, config)
        mounts.append(Mount(table, spec.mount, spec.name, dict(spec.options)))
    dispatcher = Dispatcher(
        config.domain,
        mounts,
        TrioRunner(),
        name=config.name,
        domain_labels=config.domain_labels,
        help_source=_helpfile(config),
    )
    for m in mounts:
        m.table.dispatcher = dispatcher  # type: ignore[attr-defined]
    return dispatcher


async def start_tables(dispatcher: Dispatcher, domain: int) -> None:
    """Run every table's startup under its deadline; failures are logged and
    the table serves what it can."""
    for m in dispatcher.mounts:
        t0 = trio.current_time()
        with trio.move_on_after(max(m.table.deadline, 2.0)) as scope:
            try:
                await m.table.startup(m.options)
            except Exception as exc:
                log.error("table_startup_failed", table=m.name, error=f"{type(exc).__name__}: {exc}")
                continue
        if scope.cancelled_caught:
            log.error("table_startup_timeout", table=m.name, seconds=round(trio.current_time() - t0, 3))
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
    atomically.  A bad new config keeps the old one running."""
    try:
        new = parse_args(argv)
        if (new.domain, new.name, new.transport, new.address) != (
            config.domain,
            config.name,
            config.transport,
            config.address,
        ):
            raise ConfigError("domain, name and transport cannot change on reload; restart the agent instead")
        dispatcher = build_dispatcher(new)
    except (ConfigFileError, ConfigError, TableLoadError, SystemExit) as err:
        log.error("reload_failed", error=str(err), action="keeping the running configuration")
        return config
    await start_tables(dispatcher, new.domain)
    old = active.dispatcher
    if set(old.all_names) != set(dispatcher.all_names):
        dispatcher.names_changed = True
    dispatcher.stats = old.stats
    active.dispatcher = dispatcher
    log.info("reloaded", config=new.config_path, tables=[m.name for m in dispatcher.mounts])
    await shutdown_tables(old)
    return new


async def run(config: Config, *, stream: trio.abc.Stream | None = None, argv: Sequence[str] = ()) -> int:
    """Start the tables and serve pmcd; returns the exit status."""
    active = Active(build_dispatcher(config))

    async def on_ready() -> None:
        await start_tables(active.dispatcher, config.domain)

    if not config.notready:
        await on_ready()

    listener = None
    if stream is None:
        if config.transport == "pipe":
            rfd, wfd = _protect_stdio()
            stream = _PipeStream(rfd, wfd)
        else:
            listener = await _listen(config)
            log.info("listening", transport=config.transport, address=config.address)
    if config.username:
        try:
            _drop_privileges(config.username)
        except (KeyError, OSError) as err:
            log.error("privilege_drop_failed", user=config.username, error=str(err))
            return 1
    if listener is not None:
        stream = await listener.accept()
        await listener.aclose()
        log.info("connected", transport=config.transport)
    assert stream is not None
    session = Session(pid=os.getpid(), flags=0)
    reason = "eof"
    current = config
    with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT, signal.SIGHUP) as signals:
        async with trio.open_nursery() as nursery:

            async def watch_signals() -> None:
                nonlocal reason, current
                async for signum in signals:
                    if signum == signal.SIGHUP:
                        log.info("sighup", action="reloading configuration")
                        current = await reload(active, current, argv)
                        continue
                    log.info("signal", signal=signal.Signals(signum).name, action="exiting")
                    reason = signal.Signals(signum).name
                    nursery.cancel_scope.cancel()

            nursery.start_soon(watch_signals)
            reason = await serve_stream(stream, session, active, notready=config.notready, on_ready=on_ready)
            nursery.cancel_scope.cancel()
    await shutdown_tables(active.dispatcher)
    log.info("exit", reason=reason)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``pmda-py run``."""
    try:
        config = parse_args(sys.argv[1:] if argv is None else argv)
    except ConfigFileError as err:
        print(f"pmda-py run: bad config: {err}", file=sys.stderr)
        return 1
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
    )
    try:
        return trio.run(partial(run, config, argv=list(sys.argv[1:] if argv is None else argv)))
    except (ConfigError, TableLoadError) as err:
        log.error("config_error", error=str(err))
        return 1
    except OSError as err:
        if err.errno in (errno.EADDRINUSE, errno.EACCES, errno.ENOENT):
            log.error("transport_failed", error=str(err))
            return 1
        raise
    except KeyboardInterrupt:
        return 0

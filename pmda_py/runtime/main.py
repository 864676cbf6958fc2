"""``pmda-py run``: the PMDA daemon, where trio meets the sans-IO core.

Opens the transport as a ``pmdaGetOpt`` daemon does (pipe by default; ``-i``
inet, ``-6`` ipv6, ``-u`` unix socket: :mod:`pmda_py.runtime.pipe`,
:mod:`pmda_py.runtime.sockets`) and protects stdout, drops privileges
(``-U``) after the log and sockets are open, and only then loads the tables
(:mod:`pmda_py.runtime.loader`: imports in a worker thread under the load
timeout, then their startups), speaking first (CREDS) on time meanwhile;
then runs the pump (:mod:`pmda_py.runtime.pump`): one request at a time, one
reply each, in order.  Exits cleanly on EOF and SIGTERM/SIGINT; SIGHUP
reloads (:mod:`pmda_py.runtime.reload`).
"""

from __future__ import annotations

import errno
import os
import signal
import sys
from collections.abc import AsyncIterator, Sequence
from functools import partial
from typing import IO, TYPE_CHECKING

import structlog
import trio

from pmda_py import logconfig
from pmda_py.config import Config, ConfigFileError, parse_args
from pmda_py.dispatch import ConfigError, Dispatcher
from pmda_py.malloc import tune_malloc
from pmda_py.runtime.loader import Say, TableLoadError, load_dispatcher, shutdown_tables, start_tables
from pmda_py.runtime.notify import forget_notify_socket, notify_ready
from pmda_py.runtime.pipe import PipeStream, protect_stdio, share_replies, stdout_to_log
from pmda_py.runtime.privileges import drop_privileges
from pmda_py.runtime.pump import Active, TrioRunner, serve_stream
from pmda_py.runtime.reload import reload
from pmda_py.session import Session

if TYPE_CHECKING:
    from pmda_py.runtime.sockets import SocketServer

__all__ = ["CREDS_GRACE", "main", "run"]

log = structlog.get_logger("pmda_py.runtime")


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
    tells the person who started the agent (one line) what failed.

    SIGTERM, SIGINT and SIGHUP are caught from the start: one that comes
    while the channel opens or the tables load is handled once the agent
    serves (a SIGHUP just after a standalone agent said it is ready --
    systemd's reload -- must not end it)."""
    with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT, signal.SIGHUP) as signals:
        return await _run(config, signals, stream=stream, argv=argv, say=say)


async def _run(
    config: Config,
    signals: AsyncIterator[int],
    *,
    stream: trio.abc.Stream | None,
    argv: Sequence[str],
    say: Say | None,
) -> int:
    """:func:`run`, its signals caught (``signals``)."""
    active = Active(
        Dispatcher(config.domain, [], TrioRunner(), name=config.name, domain_labels=config.domain_labels),
        loaded=False,
    )
    server: SocketServer | None = None
    if not (config.standalone and config.transport != "pipe"):
        forget_notify_socket()  # pmcd's unit's, if pmcd started us: never ours to speak on
    if stream is None:
        if config.transport == "pipe":
            if config.standalone:
                log.warning("standalone_ignored", reason="a pipe agent lives and dies with pmcd")
            rfd, wfd = protect_stdio()  # before any table: a print() must not reach pmcd
            # pmcd's pipes: we write fd wfd (stdout) and read fd rfd (stdin)
            stream = PipeStream(rfd, wfd)
            share_replies()  # large fast-path replies are spliced into the pipe, not copied
        else:
            # the socket modes' machinery (peer admission, /proc/net lookups):
            # imported only where it is used, not by every pipe agent
            from pmda_py.runtime.sockets import SocketServer, listen_address

            # stdout is no PDU channel here, but pmcd's log (or the journal): a
            # table's print() goes to our log, as in pipe mode
            stdout_to_log()
            server = SocketServer(config, active, on_ready=active.loaded.wait)
            try:
                await server.open()
            except (OSError, OverflowError) as err:
                # port in use, an address not of this host or not of the
                # family, a name that does not resolve, a socket path whose
                # directory is missing: the person's mistake, one line
                at = config.address
                if config.transport != "unix":
                    host, port = listen_address(config)
                    at = f"{host} port {port}"
                log.error("transport_failed", transport=config.transport, address=at, error=str(err))
                if say is not None:
                    say(f"pmda-py run: cannot open the {config.transport} channel ({at}): {err}")
                return 1
            where = {"bind": listen_address(config)[0]} if config.transport != "unix" else {}
            log.info(
                "listening",
                transport=config.transport,
                address=config.address,
                **where,
                standalone=config.standalone,
                creds_timeout=config.creds_timeout,
            )
            if config.standalone:  # its own unit, of Type=notify (systemd/pypmda.service): ready for pmcd
                notify_ready(f"listening on {config.transport} {config.address}")
    status = 0
    try:
        if config.username:
            try:
                drop_privileges(config.username)
            except (KeyError, OSError) as err:
                why = "no such user" if isinstance(err, KeyError) else str(err)
                log.error("privilege_drop_failed", user=config.username, error=why)
                if say is not None:
                    say(f"pmda-py run: cannot run as {config.username}: {why}")
                return 1
        reason = "eof"
        current = config
        reloading = trio.Lock()
        async with trio.open_nursery() as nursery:

            async def load() -> None:
                nonlocal status, reason
                try:
                    dispatcher = await load_dispatcher(config, stats=active.dispatcher.stats, skip_slow=True, say=say)
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
                reason = await serve_stream(stream, session, active, notready=config.notready, on_ready=load_then_ready)
            nursery.cancel_scope.cancel()
    finally:
        if server is not None:
            server.close()
    await shutdown_tables(active.dispatcher)
    spliced = {"replies_spliced": stream.spliced} if isinstance(stream, PipeStream) else {}
    log.info("exit", reason=reason, **spliced)
    return status


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

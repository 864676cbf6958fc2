"""The pump: bytes from pmcd's channel through the sans-IO session to the
dispatcher and back (:func:`serve_stream`, :func:`serve_session`), one
request at a time, one reply each, in order; and :class:`TrioRunner`, which
runs table calls and checks under their deadlines so pmcd's 5 s timeout is
never reached.  :class:`Active` holds the dispatcher in service (swapped
whole on a reload; empty until the tables are loaded)."""

from __future__ import annotations

from collections.abc import Awaitable, Sequence
from typing import Callable, Literal, TypeVar

import attrs
import structlog
import trio

from pmda_py.dispatch import Dispatcher, TableTimeout
from pmda_py.errors import PmErr, WireFormatError, codename
from pmda_py.runtime.eager import finish, never_suspends
from pmda_py.session import (
    CLOSED,
    NEED_DATA,
    BadRequest,
    Ignored,
    Notice,
    Request,
    Session,
    SessionState,
)
from pmda_py.table import CheckMode, Table
from pmda_py.table.base import check_mode_of
from pmda_py.wire import ErrorPdu, Pdu, PduType
from pmda_py.wire.buffers import SharedReply

__all__ = ["CHECK_PAUSE", "Active", "TrioRunner", "serve_session", "serve_stream"]

log = structlog.get_logger("pmda_py.runtime")

_T = TypeVar("_T")


#: (a module constant: an enum member looked up on its class costs about 2 us
#: per request when the caches are cold, see session.py)
_NOTREADY = SessionState.NOTREADY

#: seconds an async check() that overran (and was cancelled) is not run again
CHECK_PAUSE = 1.0


#: where a table's check stands for the runner when it is not simply idle:
#: ``"running"`` in its worker thread, ``"ended"`` (a check left running
#: past its deadline finished; its error, if any, is raised at the next
#: request), ``"paused"`` (an async check overran and was cancelled; not
#: run again until ``until``)
CheckState = Literal["running", "ended", "paused"]


@attrs.define
class _Check:
    """One table's check that is not idle (see :data:`CheckState`)."""

    state: CheckState
    #: what an ended check raised (None: it returned)
    error: Exception | None = None
    #: trio time a pause ends
    until: float = 0.0


class TrioRunner:
    """Runs table calls under their deadlines (trio.move_on_after), and
    tables' checks under theirs (see :meth:`Table.check`)."""

    def __init__(self) -> None:
        #: id(table) -> its check, while not idle (absent: idle)
        self._pending: dict[int, _Check] = {}
        self._how: dict[type[Table], CheckMode] = {}

    async def check(self, table: Table) -> None:
        key = id(table)
        pending = self._pending.get(key)
        if pending is not None:
            if pending.state == "running" or (pending.state == "paused" and pending.until > trio.current_time()):
                return  # still running in its thread, or paused after an overrun
            del self._pending[key]
            if pending.error is not None:
                raise pending.error
        kind = type(table)
        how = self._how.get(kind)
        if how is None:
            how = self._how[kind] = check_mode_of(kind)
        if how == "inline":  # declared: a plain def called here, no deadline (nothing could cut it short)
            table.check()
            return
        deadline = table.check_deadline
        if how == "async":
            coro = table.check()
            if coro is None:  # never, for an async def (check_mode_of saw to it)
                return
            if never_suspends(coro):  # no checkpoint: no deadline could cut it short
                finish(coro)
                return
            with trio.move_on_after(deadline):
                await coro
                return
            self._pending[key] = _Check("paused", until=trio.current_time() + CHECK_PAUSE)
            raise TableTimeout(f"{kind.__name__}.check overran {deadline}s (cancelled)")
        # no second check of this table while this one runs; the thread
        # writes its outcome here, read only once it is "ended"
        running = self._pending[key] = _Check("running")

        def run() -> None:
            try:
                table.check()
            except Exception as exc:
                running.error = exc
            except BaseException as exc:  # e.g. sys.exit() in a check: it must not end the daemon
                running.error = RuntimeError(f"check raised {type(exc).__name__}: {exc}")
            running.state = "ended"  # last: the error is in place before anyone reads it

        with trio.move_on_after(deadline):
            await trio.to_thread.run_sync(run, abandon_on_cancel=True)
            del self._pending[key]
            if running.error is not None:
                raise running.error
            return
        if running.state == "ended":  # it ended just as the deadline fired
            del self._pending[key]
            if running.error is not None:
                raise running.error
            return
        raise TableTimeout(f"{kind.__name__}.check overran {deadline}s (left running in its thread)")

    async def call(self, table: Table, what: str, fn: Callable[[], Awaitable[_T]]) -> _T:
        """``fn()`` awaited under ``table``'s deadline (TableTimeout when it
        overruns); a coroutine that cannot suspend is simply run
        (:mod:`pmda_py.runtime.eager`)."""
        aw = fn()
        if never_suspends(aw):
            return finish(aw)
        return await self._under_deadline(table, what, aw)

    async def _under_deadline(self, table: Table, what: str, aw: Awaitable[_T]) -> _T:
        with trio.move_on_after(table.deadline) as scope:
            return await aw
        assert scope.cancelled_caught
        raise TableTimeout(f"{type(table).__name__}.{what} overran {table.deadline}s")

    async def gather(self, calls: Sequence[tuple[Table, str, Callable[[], Awaitable[object]]]]) -> list[object]:
        """Each call's value, or the Exception it raised, in order.  The
        coroutines that cannot suspend run one after the other, at once;
        the others side by side in a nursery, each under its deadline."""
        results: list[object] = [None] * len(calls)
        waiting: list[tuple[int, Table, str, Awaitable[object]]] = []
        for k, (table, what, fn) in enumerate(calls):
            try:
                aw = fn()
                if never_suspends(aw):
                    results[k] = await aw  # runs here to its end: it has no instruction to suspend at
                else:
                    waiting.append((k, table, what, aw))
            except Exception as exc:
                results[k] = exc
        if waiting:
            await self._run_waiting(waiting, results)
        return results

    async def _run_waiting(
        self, waiting: list[tuple[int, Table, str, Awaitable[object]]], results: list[object]
    ) -> None:
        """:meth:`gather`'s calls that may suspend, side by side, each under its deadline."""

        async def one(k: int, table: Table, what: str, aw: Awaitable[object]) -> None:
            try:
                results[k] = await self._under_deadline(table, what, aw)
            except Exception as exc:
                results[k] = exc

        if len(waiting) == 1:
            await one(*waiting[0])
            return
        async with trio.open_nursery() as nursery:
            for k, table, what, aw in waiting:
                nursery.start_soon(one, k, table, what, aw)


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
    data: bytes | bytearray | SharedReply  # read, then the reply (held until the next request's bytes)
    loaded = active.loaded.is_set()  # once set, set for good (a trio.Event is never cleared)
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
                    type=PduType.name_of(event.pdu_type),
                    context=event.context,
                    code=codename(event.code),
                    error=event.reason,
                )
            if not loaded and isinstance(event, Request):
                with trio.move_on_after(active.request_grace):  # tables still loading
                    await active.loaded.wait()
                loaded = active.loaded.is_set()
            try:
                reply: Pdu = (
                    await active.dispatcher.handle(event)
                    if loaded or not isinstance(event, Request)
                    else _loading_reply(event)
                )
            except Exception as exc:  # a bug: still answer, pmcd must not wait
                log.exception("dispatch_failed", error=f"{type(exc).__name__}: {exc}")
                reply = ErrorPdu(PmErr.GENERIC)
            data = session.send(reply)
            del reply  # the reply's buffer is held by ``data`` only (a layout then reuses it)
            if session.refused_reply is not None:
                kind, size = session.refused_reply
                session.refused_reply = None
                # as like as not a table's answer at every request: logged as a table's problem (ProblemLog)
                active.dispatcher.problems.warning(
                    "(reply)", "reply_too_big", type=PduType.name_of(kind), limit=session.max_length, bytes=size
                )
            try:
                # a reply in shared memory goes as a view of it, which the pipe end splices
                await stream.send_all(memoryview(data) if isinstance(data, SharedReply) else data)
                if session.state is _NOTREADY:
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
                log.debug("notice", type=PduType.name_of(pdu.pdu_type), context=event.context)
        elif isinstance(event, Ignored):
            log.warning("ignored_pdu", type=PduType.name_of(event.pdu_type), context=event.context, reason=event.reason)


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

"""The :class:`Dispatcher`: one reply per request, from the mounted tables
(see :mod:`pmda_py.dispatch`)."""

from __future__ import annotations

import gc
import os
import sys
import time
from collections.abc import Awaitable, Mapping, Sequence
from contextlib import AbstractContextManager
from typing import Any, Callable, Protocol, TypeVar

import structlog

from pmda_py.dispatch.coerce import store_value
from pmda_py.dispatch.fetch import FetchPlanner
from pmda_py.dispatch.meta import MetaRequests
from pmda_py.dispatch.mounts import ConfigError, Mount, MountIndex
from pmda_py.dispatch.problems import ProblemLog, cut
from pmda_py.dispatch.replies import ReplyCache
from pmda_py.errors import PmdaError, PmErr, codename, errstr
from pmda_py.pmapi import (
    PM_IN_NULL,
)
from pmda_py.pmdacache import PmdaCache
from pmda_py.session import BadRequest, Request
from pmda_py.stats import PmdaStats
from pmda_py.table import (
    InDom,
    Metric,
    Scalar,
    StoreRequest,
    Table,
    TableContext,
)
from pmda_py.table.base import check_mode_of
from pmda_py.wire import (
    ErrorPdu,
    Pdu,
    PduType,
    ResultPdu,
)

__all__ = [
    "Dispatcher",
    "Mount",
    "Runner",
    "TableTimeout",
    "ConfigError",
    "HelpSource",
]

log = structlog.get_logger("pmda_py.dispatch")

_T = TypeVar("_T")

_LITTLE = sys.byteorder == "little"


class TableTimeout(PmdaError):
    """A table call overran its deadline (answered PM_ERR_AGAIN)."""

    code = PmErr.AGAIN


class Runner(Protocol):
    """**Protocol:** runs table coroutines under deadlines (the daemon's trio side)."""

    async def call(self, table: Table, what: str, fn: Callable[[], Awaitable[_T]]) -> _T:
        """Run ``fn()`` for ``table``; raise :class:`TableTimeout` past its deadline."""
        ...

    async def gather(self, calls: Sequence[tuple[Table, str, Callable[[], Awaitable[object]]]]) -> list[object]:
        """Run several calls concurrently; each result is a value or the
        exception it raised (TableTimeout on deadline)."""
        ...

    async def check(self, table: Table) -> None:
        """Run ``table.check()`` for at most ``table.check_deadline`` seconds
        (see :meth:`Table.check`): raise :class:`TableTimeout` when it
        overran, what it raised (or an earlier check, left running past its
        deadline, raised since); return at once while such a check is still
        running or the table's checks are paused."""
        ...


class Cancellable(Protocol):
    """What a runtime's deadline scope tells once it is left (trio's ``CancelScope``)."""

    @property
    def cancelled_caught(self) -> bool: ...


class HelpSource(Protocol):
    """**Protocol:** help text from outside the tables (a newhelp help file)."""

    def text(self, ident: int, type_: int) -> str | None:
        """The one-line or long text for a PMID or indom, or None."""
        ...


class Dispatcher:
    """Answers every request of one PMDA domain from its mounted tables.

    Args:
        domain: the PMDA domain number.
        mounts: the tables and their mount points.
        runner: enforces table deadlines.
        name: the PMDA name (default domain label ``{"agent": name}``).
        domain_labels: labels for the domain level, overriding the tables'.
        help_source: optional help file consulted when a table has no text.
    """

    #: what answers DESC, INSTANCE, TEXT, LABEL and the PMNS requests (a
    #: subclass of dispatcher may answer them its own way)
    meta_requests: type[MetaRequests] = MetaRequests

    def __init__(
        self,
        domain: int,
        mounts: Sequence[Mount],
        runner: Runner,
        *,
        name: str = "pmda_py",
        domain_labels: Mapping[str, object] | None = None,
        help_source: HelpSource | None = None,
        state_dir: str | None = None,
        stats: PmdaStats | None = None,
    ) -> None:
        self.domain = domain
        #: where persistent indoms keep their instance ids (None: not kept)
        self.state_dir = state_dir
        self.mounts = list(mounts)
        self.runner = runner
        self.name = name
        self.help_source = help_source
        #: counters; a reloaded configuration's dispatcher gets the old one's
        self.stats = stats if stats is not None else PmdaStats()
        self.domain_labels_override = dict(domain_labels) if domain_labels is not None else None
        self._generations: list[int] = []
        #: where every PMID, indom and name of the mounted tables is
        self.index = MountIndex()
        #: full index builds, and in-place updates of tables whose generation moved
        self.index_rebuilds = 0
        self.index_updates = 0
        #: DESC/TEXT/LABEL/INSTANCE replies remembered by their request's
        #: bytes (see :mod:`.replies`); cleared with the index
        self.replies = ReplyCache()
        #: the one way a FETCH is answered (see :mod:`.fetch`)
        self.planner = FetchPlanner(self)
        #: tables' problems, each logged once an hour at most
        self.problems = ProblemLog()
        #: the other requests' replies (see :mod:`.meta`)
        self.meta = self.meta_requests(self)
        #: tables that raised PmdaNotReady, awaited by :meth:`wait_ready`
        self.not_ready: list[Table] = []
        self.names_changed = False
        self.labels_changed = False  # a table's labels changed: LABEL_CHANGE in the next RESULT
        #: tables with a check() of their own (the base one does nothing)
        self._checked = [m for m in self.mounts if type(m.table).check is not Table.check]
        #: those whose check may wait (the runner bounds it), and those declared inline (run here)
        modes = {}
        for m in self._checked:
            try:
                modes[id(m)] = check_mode_of(type(m.table))
            except TypeError as err:
                raise ConfigError(f"table {m.label}: {err}") from None
        self._bounded = [m for m in self._checked if modes[id(m)] != "inline"]
        self._inline = [m for m in self._checked if modes[id(m)] == "inline"]
        #: request PDU type -> its handler (the session hands out only these); each
        #: handler takes the PDU class the session decodes for its type, which a
        #: dict keyed by the type number cannot express: hence the PDU left untyped
        meta = self.meta
        self._routes: dict[int, Callable[[Request, Any], Awaitable[Pdu]]] = {
            PduType.FETCH: self.planner.fetch,
            PduType.DESC_REQ: meta.desc,
            PduType.INSTANCE_REQ: meta.instance,
            PduType.TEXT_REQ: meta.text,
            PduType.RESULT: self._store,
            PduType.LABEL_REQ: meta.label,
            PduType.PMNS_TRAVERSE: meta.traverse,
            PduType.PMNS_CHILD: meta.children,
            PduType.PMNS_NAMES: meta.pmns_names,
            PduType.PMNS_IDS: meta.pmns_ids,
        }
        for m in self.mounts:
            if m.mount and not all(p.isidentifier() for p in m.mount.split(".")):
                raise ConfigError(f"table {m.label}: bad mount point {m.mount!r}")
        self.reindex(strict=True)

    # ------------------------------------------------------------ indexing

    def reindex(self, strict: bool = False, old_names: set[str] | None = None) -> None:
        """Rebuild the PMID, indom and name indexes from the tables.

        With ``strict`` (start-up) any collision is a ConfigError; later a
        colliding metric of a dynamic table is dropped with a log line.
        ``old_names``: the names served before (default: the index's).
        """
        # The index is 100 000s of new objects at 100 000 metrics: the cyclic
        # collector would walk everything several times while it is built
        # (60% of the time); it runs once the build is done.
        collecting = gc.isenabled()
        gc.disable()
        try:
            index = MountIndex.build(self.mounts, self.domain, strict=strict, prepare=self._attach_cache)
        finally:
            if collecting:
                gc.enable()
        if old_names is None:
            old_names = set(self.index.by_name)
        if index.problems:  # each collision once while it lasts, not at every rebuild
            known = set(self.index.problems)
            for msg in index.problems:
                if msg not in known:
                    log.error("table_collision", problem=msg)
        self.index = index
        self._generations = index.generations
        self.index_rebuilds += 1
        self.planner.clear()
        self.replies.clear()
        if old_names and old_names != set(index.by_name):
            self.names_changed = True

    def context(self, mount: Mount) -> TableContext:
        """What ``mount``'s table is told at startup."""
        name = mount.label
        return TableContext(
            domain=self.domain,
            mount=mount.mount,
            name=name,
            pmda=self.name,
            options=mount.options,
            state_dir=self.state_dir,
            log=log.bind(table=name),
            stats=self.stats,
            tables=[m.label for m in self.mounts],
        )

    async def start_tables(self, deadline_scope: Callable[[float], AbstractContextManager[Cancellable]]) -> None:
        """Run every table's startup under its deadline (``deadline_scope``
        is the runtime's move-on-after, e.g. ``trio.move_on_after``);
        failures are logged and the table serves what it can."""
        for m in self.mounts:
            t0 = time.monotonic()
            with deadline_scope(max(m.table.deadline, 2.0)) as scope:
                try:
                    await m.table.startup(self.context(m))
                except Exception as exc:
                    log.error("table_startup_failed", table=m.name, error=f"{type(exc).__name__}: {exc}")
                    continue
            if scope.cancelled_caught:
                log.error("table_startup_timeout", table=m.name, seconds=round(time.monotonic() - t0, 3))
        self.reindex()

    def _attach_cache(self, ind: InDom) -> None:
        """A persistent indom's ids live in ``STATE_DIR/DOMAIN.SERIAL`` in
        pmdaCache's format (loaded once, before the table's startup names
        its instances)."""
        if not ind.persistent or ind.cache.path or not self.state_dir:
            return
        cache = PmdaCache(os.path.join(self.state_dir, f"{self.domain}.{ind.serial}"))
        problem = cache.load()
        if problem:
            log.warning("instance_cache_problem", indom=f"{self.domain}.{ind.serial}", problem=problem)
        ind.cache = cache
        if ind.instances:  # named before it was mounted: the saved ids win
            ind.set_names(list(ind.instances.values()))

    def _refresh_index(self) -> None:
        """Bring the index up to the tables' generations: each table whose
        generation moved is updated in place (a cost in the names that
        came and went; the remembered layouts and replies of other PMIDs
        stay), or, where an update cannot give what a rebuild would, the
        index is rebuilt."""
        generations = self._generations
        changed: set[int] | None = None
        for k, m in enumerate(self.mounts):
            if m.table.generation == generations[k]:
                continue
            if changed is None:
                changed = set()
            collecting = gc.isenabled()
            gc.disable()  # (as for a build: the collector would walk the whole index for each few new objects)
            try:
                done = self.index.update(k, self.mounts, self.domain, self._attach_cache)
            finally:
                if collecting:
                    gc.enable()
            if done is None:
                gone, came = self.index.partial  # the names before the update that gave up
                self.reindex(old_names=(set(self.index.by_name) - came) | gone)
                return
            changed |= done[0]
            if done[1]:
                self.names_changed = True
        if changed is None:
            return
        self.index_updates += 1
        if not changed:
            return
        # forget what was built from the PMIDs that came or went, and the
        # remembered replies (their requests name PMIDs, indoms, names)
        self.planner.forget(changed)
        self.replies.clear()

    def metric(self, p: int) -> tuple[Mount, Metric] | None:
        """The mount and metric of PMID ``p``."""
        return self.index.by_pmid.get(p)

    def pmid_of(self, name: str) -> int | None:
        return self.index.by_name.get(name)

    @property
    def all_names(self) -> dict[str, int]:
        return dict(self.index.by_name)

    # ---------------------------------------------------------- dispatching

    async def handle(self, event: Request | BadRequest) -> Pdu:
        """The one reply to ``event``: the tables' checks run, the index
        is brought up to their generations, then the reply remembered for
        the request's bytes is sent if there is one (see :mod:`.replies`),
        else the reply is built."""
        if isinstance(event, BadRequest):
            self.stats.bad_requests += 1
            self.stats.count("BAD")
            return ErrorPdu(event.code)
        pdu = event.pdu
        for m in self._bounded:  # checks that may wait: bounded by the runner, the request is answered anyway
            try:
                await self.runner.check(m.table)
            except Exception as exc:
                self.table_failed(m.label, "check", exc)
        for m in self._inline:  # the checks declared inline (check_mode "inline": plain defs, called here)
            try:
                m.table.check()
            except Exception as exc:
                self.table_failed(m.label, "check", exc)
        self._refresh_index()  # if a table's generation moved
        kind = _KIND_NAMES[pdu.pdu_type]
        self.stats.count(kind)
        remember = event.key is not None and self.replies.enabled
        if remember:
            remembered = self.replies.get(pdu.pdu_type, event.key)
            if remembered is not None:
                return remembered
        route = self._routes.get(pdu.pdu_type)
        if route is None:  # the session passes only request types: a bug if reached
            return ErrorPdu(PmErr.IPC)
        try:
            reply = await route(event, pdu)
        except PmdaError as err:
            return ErrorPdu(err.pm_code)
        if remember:
            return self.meta.remember(event, reply)
        return reply

    # --------------------------------------------------------------- FETCH

    def state_flags(self) -> int:
        """The RESULT timestamp's state flags (PMDA_EXT_NAMES_CHANGE 0x10,
        PMDA_EXT_LABEL_CHANGE 0x8).  They are cleared only once a RESULT
        carrying them is built (the fetch planner's): an encoder that fails
        and falls back must not lose them."""
        return (0x10 if self.names_changed else 0) | (0x8 if self.labels_changed else 0)

    def table_failed(self, tname: str, what: str, exc: BaseException) -> int:
        """Count and log (see :class:`~pmda_py.dispatch.problems.ProblemLog`)
        what a table's call raised; the PCP error code to answer with."""
        if isinstance(exc, TableTimeout):
            self.stats.table_timeouts[tname] = self.stats.table_timeouts.get(tname, 0) + 1
            self.problems.warning(tname, "table_timeout", call=what, code=codename(PmErr.AGAIN), detail=str(exc))
            return PmErr.AGAIN
        if isinstance(exc, PmdaError):  # the table's own answer, not a failure
            log.debug("table_refused", table=tname, call=what, code=codename(exc.pm_code), error=cut(str(exc)))
            return exc.pm_code
        self.stats.table_errors[tname] = self.stats.table_errors.get(tname, 0) + 1
        self.problems.error(
            tname, "table_exception", call=what, error=cut(f"{type(exc).__name__}: {exc}"), code=codename(PmErr.AGAIN)
        )
        return PmErr.AGAIN

    # --------------------------------------------------------------- STORE

    async def _store(self, event: Request, pdu: ResultPdu) -> Pdu:
        context, attributes = event.context, event.attributes
        requests: list[tuple[Mount, StoreRequest]] = []
        for vs in pdu.vsets:
            found = self.index.by_pmid.get(vs.pmid)
            if found is None:
                return ErrorPdu(PmErr.PMID)
            mount, metric = found
            if not metric.writable:
                return ErrorPdu(PmErr.PERMISSION)
            values: dict[int, Scalar] = {}
            for v in vs.values:
                if metric.indom is None:
                    if v.inst != PM_IN_NULL:
                        return ErrorPdu(PmErr.INST)
                elif v.inst not in metric.indom.instances:
                    return ErrorPdu(PmErr.INST)
                try:
                    values[v.inst] = store_value(metric, vs.valfmt, v.value)
                except PmdaError as err:
                    return ErrorPdu(err.pm_code)
            requests.append((mount, StoreRequest(metric, values, context, attributes)))
        for mount, req in requests:
            try:
                await self.runner.call(mount.table, "store", _bind_store(mount.table, req))
            except Exception as exc:
                code = self.table_failed(mount.label, "store", exc)
                log.info("store_refused", metric=mount.full(req.metric), code=codename(code), reason=errstr(code))
                return ErrorPdu(code)
            log.info("store", metric=mount.full(req.metric), values=len(req.values), context=context)
        return ErrorPdu(0)

    async def wait_ready(self) -> None:
        """Await every not-ready table's ``wait_ready()`` (no deadline: pmcd
        sends nothing to a not-ready agent)."""
        while self.not_ready:
            table = self.not_ready.pop()
            try:
                await table.wait_ready()
            except Exception as exc:
                log.error("wait_ready_failed", table=type(table).__name__, error=str(exc))
        self._refresh_index()  # the names the tables have now, before pmcd's first request

    # ------------------------------------------------------------- context

    def end_context(self, context: int) -> None:
        """Tell every table that a client context closed."""
        for m in self.mounts:
            try:
                m.table.end_context(context)
            except Exception as exc:
                self.table_failed(m.label, "end_context", exc)


_KIND_NAMES: dict[int, str] = {t: t.name for t in PduType}


def _bind_store(table: Table, req: StoreRequest) -> Callable[[], Awaitable[None]]:
    return lambda: table.store(req)

"""The :class:`Dispatcher`: one reply per request, from the mounted tables
(see :mod:`pmda_py.dispatch`)."""

from __future__ import annotations

import gc
import os
import struct
import sys
import time
from collections.abc import Awaitable, Mapping, Sequence
from typing import Any, Callable, Protocol, TypeVar

import attrs
import structlog

from pmda_py.dispatch.coerce import PACKED_SIZE, check_range, columns, event_arrays, includes_all, store_value
from pmda_py.dispatch.fast import FastFetch
from pmda_py.dispatch.mounts import ConfigError, Mount, MountIndex
from pmda_py.dispatch.replies import ReplyCache
from pmda_py.errors import PmdaError, PmdaNotReady, PmErr, codename, errstr
from pmda_py.namespace import Namespace, Node
from pmda_py.pmapi import (
    PM_IN_NULL,
    LabelType,
    PmType,
    TextType,
    pmid_cluster,
    pmid_domain,
)
from pmda_py.pmdacache import PmdaCache
from pmda_py.session import BadRequest, Request
from pmda_py.stats import PmdaStats
from pmda_py.table import (
    PACKED_TYPECODES,
    FetchRequest,
    InDom,
    LabelText,
    Metric,
    PackedColumns,
    PackedFetch,
    StoreRequest,
    Table,
    TableContext,
)
from pmda_py.table.core import check_mode_of
from pmda_py.wire import (
    DescPdu,
    DescReqPdu,
    EncodedPdu,
    ErrorPdu,
    FetchPdu,
    InstanceEntry,
    InstancePdu,
    InstanceReqPdu,
    Label,
    LabelPdu,
    LabelReqPdu,
    LabelSet,
    Pdu,
    PduType,
    PmnsChildPdu,
    PmnsIdsPdu,
    PmnsNamesPdu,
    PmnsTraversePdu,
    ProfilePdu,
    ResultPdu,
    TextPdu,
    TextReqPdu,
)
from pmda_py.wire.result import (
    PackedColumn,
    PackedRun,
    PackedRunCache,
    ResultBuilder,
    SectionCache,
    encode_packed_run,
)

__all__ = [
    "DispatchStats",
    "Dispatcher",
    "EncodedReply",
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

    async def gather(self, calls: Sequence[tuple[Table, str, Callable[[], Awaitable[Any]]]]) -> list[Any]:
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


class HelpSource(Protocol):
    """**Protocol:** help text from outside the tables (a newhelp help file)."""

    def text(self, ident: int, type_: int) -> str | None:
        """The one-line or long text for a PMID or indom, or None."""
        ...


#: a reply already encoded (the fast fetch and INSTANCE paths)
EncodedReply = EncodedPdu


#: the dispatcher's counters (the name this module exported before pmda_py.stats)
DispatchStats = PmdaStats


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

    def __init__(
        self,
        domain: int,
        mounts: Sequence[Mount],
        runner: Runner,
        *,
        name: str = "pmda_py",
        domain_labels: Mapping[str, Any] | None = None,
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
        self._domain_labels_override = dict(domain_labels) if domain_labels is not None else None
        self._generations: list[int] = []
        self._index = MountIndex()
        #: full index builds, and in-place updates of tables whose generation moved
        self.index_rebuilds = 0
        self.index_updates = 0
        self._by_pmid: dict[int, tuple[Mount, Metric]] = {}
        self._by_indom: dict[int, tuple[Mount, InDom]] = {}
        self._by_name: dict[str, int] = {}
        self._pmns = Namespace()  # the mounted names, for the PMNS PDUs
        self._instance_cache: dict[int, tuple[dict[int, str], EncodedReply]] = {}
        #: the last fetch's value-set section, reused when the next has the same shape
        self._result_cache = SectionCache()
        #: the packed encoder's templates, by the request's PMIDs (a sweep of several fetches keeps one each)
        self._packed_caches: dict[tuple[int, ...], PackedRunCache] = {}
        #: the layouts of repeated fetches, by the request's PMIDs (see :class:`FastFetch`)
        self._fast: dict[tuple[int, ...], FastFetch | int] = {}
        #: the metrics of a request's PMIDs by table, by the request's PMIDs
        self._wanted: dict[tuple[int, ...], dict[int, tuple[Mount, list[Metric]]]] = {}
        #: whether repeated fetches take the fast path (off: always the general one)
        self.fast_fetch = True
        #: DESC/TEXT/LABEL/INSTANCE replies remembered by their request's
        #: bytes (see :meth:`_remember`); cleared with the index
        self.replies = ReplyCache()
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
                raise ConfigError(f"table {m.name or type(m.table).__name__}: {err}") from None
        self._bounded = [m for m in self._checked if modes[id(m)] != "inline"]
        self._inline = [m for m in self._checked if modes[id(m)] == "inline"]
        #: tables that compute their labels (label_items): their LABEL replies are never remembered
        self._computed_labels = {id(m.table) for m in self.mounts if type(m.table).label_items is not Table.label_items}
        #: request PDU type -> its handler (the session hands out only these)
        self._routes: dict[int, Callable[[Request, Any], Awaitable[Pdu]]] = {
            PduType.FETCH: self._fetch,
            PduType.DESC_REQ: self._desc,
            PduType.INSTANCE_REQ: self._instance,
            PduType.TEXT_REQ: self._text,
            PduType.RESULT: self._store,
            PduType.LABEL_REQ: self._label,
            PduType.PMNS_TRAVERSE: self._traverse,
            PduType.PMNS_CHILD: self._children,
            PduType.PMNS_NAMES: self._pmns_names,
            PduType.PMNS_IDS: self._pmns_ids,
        }
        for m in self.mounts:
            if m.prefix and not all(p.isidentifier() for p in m.prefix.split(".")):
                raise ConfigError(f"table {m.name or type(m.table).__name__}: bad mount point {m.prefix!r}")
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
            old_names = set(self._by_name)
        self._index = index
        self._by_pmid, self._by_indom, self._pmns, self._by_name = (
            index.by_pmid,
            index.by_indom,
            index.pmns,
            index.by_name,
        )
        self._generations = index.generations
        self.index_rebuilds += 1
        self._fast.clear()
        self._wanted.clear()
        self.replies.clear()
        if old_names and old_names != set(index.by_name):
            self.names_changed = True

    def context(self, mount: Mount) -> TableContext:
        """What ``mount``'s table is told at startup."""
        name = mount.name or type(mount.table).__name__
        return TableContext(
            domain=self.domain,
            mount=mount.prefix,
            name=name,
            pmda=self.name,
            options=mount.options,
            state_dir=self.state_dir,
            log=log.bind(table=name),
            stats=self.stats,
            tables=[m.name or type(m.table).__name__ for m in self.mounts],
        )

    async def start_tables(self, deadline_scope: Callable[[float], Any]) -> None:
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
                done = self._index.update(k, self.mounts, self.domain, self._attach_cache)
            finally:
                if collecting:
                    gc.enable()
            if done is None:
                gone, came = self._index.partial  # the names before the update that gave up
                self.reindex(old_names=(set(self._by_name) - came) | gone)
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
        for cache in (self._fast, self._wanted, self._packed_caches):
            for key in [key for key in cache if not changed.isdisjoint(key)]:
                del cache[key]
        self.replies.clear()

    def metric(self, p: int) -> tuple[Mount, Metric] | None:
        """The mount and metric of PMID ``p``."""
        return self._by_pmid.get(p)

    def pmid_of(self, name: str) -> int | None:
        return self._by_name.get(name)

    @property
    def all_names(self) -> dict[str, int]:
        return dict(self._by_name)

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
                self._table_failed(m.name or type(m.table).__name__, "check", exc)
        self._before_request()
        kind = _KIND_NAMES[pdu.pdu_type]
        self.stats.count(kind)
        remember = event.key is not None and self.replies.enabled
        if remember:
            data = self.replies.get(pdu.pdu_type, event.key)
            if data is not None:
                return EncodedReply(pdu.pdu_type, data)
        route = self._routes.get(pdu.pdu_type)
        if route is None:  # the session passes only request types: a bug if reached
            return ErrorPdu(PmErr.IPC)
        try:
            reply = await route(event, pdu)
        except PmdaError as err:
            return ErrorPdu(err.pm_code)
        if remember:
            return self._remember(event, reply)
        return reply

    def _before_request(self) -> None:
        """What runs before every request but the bounded checks (awaited by
        :meth:`handle`): the checks declared inline (``check_mode =
        "inline"``: plain defs, called here), then the index is rebuilt if
        a table's generation moved."""
        for m in self._inline:
            try:
                m.table.check()
            except Exception as exc:
                self._table_failed(m.name or type(m.table).__name__, "check", exc)
        self._refresh_index()

    # ------------------------------------------------------ remembered replies

    def _labels_computed(self, pdu: LabelReqPdu) -> bool:
        """Whether a table's label_items took part in the reply to ``pdu``."""
        if not self._computed_labels:
            return False
        t = pdu.type & 0x3F
        if t == LabelType.ITEM:
            found = self._by_pmid.get(pdu.ident)
            return found is not None and id(found[0].table) in self._computed_labels
        if t == LabelType.INDOM:
            found_i = self._by_indom.get(pdu.ident)
            return found_i is not None and id(found_i[0].table) in self._computed_labels
        # CLUSTER: any table owning the cluster may be asked (not worth the search)
        return bool(t == LabelType.CLUSTER)

    def _remember(self, event: Request, reply: Pdu) -> Pdu:
        """Keep ``reply``'s bytes for ``event``'s request bytes when they are
        fixed until the index changes: DESC and TEXT always (frozen metrics,
        help file, indom texts), LABEL unless of instances (the profile
        picks them) or computed by a table (label_items), INSTANCE of an
        indom with no refresh hook and no repeated ids, while its
        ``instances`` map is the same (InDom's ``version`` and size).
        Returns the reply to send: its bytes, once encoded here."""
        pdu = event.pdu
        assert event.key is not None
        if isinstance(reply, ErrorPdu) and (reply.code != PmErr.TEXT or pdu.pdu_type != PduType.TEXT_REQ):
            return reply
        indom: InDom | None = None
        if isinstance(pdu, LabelReqPdu):
            if pdu.type & 0x3F == LabelType.INSTANCES or self._labels_computed(pdu):
                return reply
        elif isinstance(pdu, InstanceReqPdu):
            found = self._by_indom.get(pdu.indom)
            if found is None:
                return reply
            mount, indom = found
            if indom.listing is not None or type(mount.table).refresh_instances is not Table.refresh_instances:
                return reply
        if isinstance(reply, EncodedReply):
            data = reply.data
        else:
            data = reply.encode() if reply.from_ == 0 else attrs.evolve(reply, from_=0).encode()
        self.replies.put(pdu.pdu_type, event.key, data, indom)
        # an ERROR stays an ErrorPdu for the session; anything else goes out as these bytes
        return reply if isinstance(reply, ErrorPdu) else EncodedReply(reply.pdu_type, data)

    async def _label(self, event: Request, pdu: LabelReqPdu) -> Pdu:
        return _label_fits(await self._label_reply(event, pdu))

    # ---------------------------------------------------------------- DESC

    async def _desc(self, event: Request, pdu: DescReqPdu) -> Pdu:
        found = self._by_pmid.get(pdu.pmid)
        if found is None:
            return ErrorPdu(PmErr.PMID)
        return DescPdu(found[1].desc(self.domain))

    # --------------------------------------------------------------- FETCH

    async def _fetch(self, event: Request, pdu: FetchPdu) -> Pdu:
        t0 = time.perf_counter()
        context, profile, attributes = event.context, event.profile, event.attributes
        wanted = self._wanted.get(pdu.pmids)
        if wanted is None:
            wanted = self._group(pdu.pmids)
        calls = []
        for mount, metrics in wanted.values():
            req = FetchRequest(tuple(metrics), profile, context, attributes)
            calls.append((mount.table, "fetch", _bind_fetch(mount.table, req)))
        outcomes = await self.runner.gather(calls) if calls else []
        if len(outcomes) == 1:
            packed = self._packed_result(pdu, next(iter(wanted.values()))[1], outcomes[0], profile)
            if packed is not None:
                self._fetch_done(t0, packed[1])
                return EncodedReply(PduType.RESULT, packed[0])
        fast = self._fast.get(pdu.pmids) if self.fast_fetch else None
        if type(fast) is FastFetch and (fast.profile is profile or fast.profile == profile):
            fast.profile = profile  # pmcd resends an equal profile when it switches client contexts
            data = fast.encode(outcomes, self._state_flags())
            if data is not None:
                self.names_changed = self.labels_changed = False
                self._fetch_done(t0, fast.layout.nvalues)
                return EncodedReply(PduType.RESULT, data)
        answers: dict[int, Mapping[Metric, Any]] = {}  # id(mount) -> metric -> value or exception
        for (mount, _metrics), outcome in zip(wanted.values(), outcomes):
            if isinstance(outcome, PmdaNotReady):
                self.not_ready.append(mount.table)
        if self.not_ready:
            log.info("not_ready", tables=[type(t).__name__ for t in self.not_ready])
            return ErrorPdu(PmErr.PMDANOTREADY)
        for (mount, metrics), outcome in zip(wanted.values(), outcomes):
            tname = mount.name or type(mount.table).__name__
            if isinstance(outcome, BaseException):
                failed = PmdaError(code=self._table_failed(tname, "fetch", outcome))
                answers[id(mount)] = dict.fromkeys(metrics, failed)
            elif not isinstance(outcome, Mapping):
                self._table_failed(tname, "fetch", TypeError(f"fetch returned {type(outcome).__name__}"))
                answers[id(mount)] = dict.fromkeys(metrics, PmdaError(code=PmErr.TYPE))
            else:
                answers[id(mount)] = outcome
        builder = ResultBuilder()
        nvalues = 0
        by_pmid, add_values = self._by_pmid, self._add_values
        for p in pdu.pmids:
            found = by_pmid.get(p)
            if found is None:
                builder.add_error(p, PmErr.PMID)
                continue
            mount, metric = found
            nvalues += add_values(builder, p, mount, metric, answers[id(mount)].get(metric), profile)
        data = builder.encode(self._state_flags(), cache=self._result_cache)
        if self.fast_fetch:
            self._learn(pdu, profile, outcomes, answers, data, fast)
        self._fetch_done(t0, nvalues)
        return EncodedReply(PduType.RESULT, data)

    def _learn(
        self,
        pdu: FetchPdu,
        profile: ProfilePdu,
        outcomes: list[Any],
        answers: dict[int, Mapping[Metric, Any]],
        data: bytes,
        old: FastFetch | int | None,
    ) -> None:
        """After a general-path fetch: keep its layout for the next fetch
        of the same PMIDs if every value is fixed-size (else remember not to
        try again for a while)."""
        if type(old) is int and old > self.stats.fetches:
            return  # not eligible lately: retry later
        fast = None
        if all(type(o) is dict for o in outcomes):
            fast = FastFetch.build(pdu.pmids, profile, self._by_pmid, answers, data, len(outcomes))
        if fast is None or (type(old) is FastFetch and old.hits == 0 and old.profile == profile):
            # not eligible, or the shape keeps changing: try again in a while
            fast_or_retry: FastFetch | int = self.stats.fetches + _FAST_RETRY
        else:
            fast_or_retry = fast
        cache = self._fast
        cache.pop(pdu.pmids, None)
        if len(cache) >= _FAST_SLOTS:
            del cache[next(iter(cache))]
        cache[pdu.pmids] = fast_or_retry

    def _group(self, pmids: tuple[int, ...]) -> dict[int, tuple[Mount, list[Metric]]]:
        """The request's known metrics by table (id of the mount), each once,
        in request order; kept for the next FETCH of the same PMIDs."""
        wanted: dict[int, tuple[Mount, list[Metric]]] = {}
        for p in dict.fromkeys(pmids):
            found = self._by_pmid.get(p)
            if found is None:
                continue
            mount, metric = found
            entry = wanted.get(id(mount))
            if entry is None:
                wanted[id(mount)] = (mount, [metric])
            else:
                entry[1].append(metric)
        if len(self._wanted) >= _FAST_SLOTS:
            del self._wanted[next(iter(self._wanted))]
        self._wanted[pmids] = wanted
        return wanted

    def _packed_result(
        self, pdu: FetchPdu, metrics: list[Metric], outcome: Any, profile: ProfilePdu
    ) -> tuple[bytes, int] | None:
        """One table answered the whole request in one piece: encode it
        without visiting each metric, when the request is exactly its metrics
        (no repeats, no unknown PMIDs) and the profile takes every instance."""
        if type(outcome) is not PackedFetch or len(metrics) != len(pdu.pmids) or list(outcome.metrics) != metrics:
            return None
        if not all(includes_all(profile, ind) for ind in outcome.indoms):
            return None
        cache = self._packed_caches.get(pdu.pmids)
        if cache is None:
            if len(self._packed_caches) >= _FAST_SLOTS:
                del self._packed_caches[next(iter(self._packed_caches))]
            cache = self._packed_caches[pdu.pmids] = PackedRunCache()
        if cache.pmids != pdu.pmids:  # the table's token covers metrics, not our PMIDs
            cache.token = None
        try:
            data = encode_packed_run(
                PackedRun(pdu.pmids, outcome.vtypes, outcome.insts, outcome.blob, outcome.token),
                self._state_flags(),
                cache=cache,
            )
        except (ValueError, TypeError, OverflowError) as err:  # a table bug: the general path reports it per metric
            log.error("table_bad_packed_fetch", error=str(err))
            return None
        cache.pmids = pdu.pmids
        return data, cache.total

    def _state_flags(self) -> int:
        """The RESULT timestamp's state flags (PMDA_EXT_NAMES_CHANGE 0x10,
        PMDA_EXT_LABEL_CHANGE 0x8).  They are cleared only once a RESULT
        carrying them is built (:meth:`_fetch_done`): an encoder that fails
        and falls back must not lose them."""
        return (0x10 if self.names_changed else 0) | (0x8 if self.labels_changed else 0)

    def _fetch_done(self, t0: float, nvalues: int) -> None:
        self.names_changed = self.labels_changed = False  # the RESULT just built told pmcd
        dt = time.perf_counter() - t0
        st = self.stats
        st.fetches += 1
        st.fetch_values += nvalues
        st.fetch_time_total += dt
        st.fetch_time_last = dt
        st.fetch_time_max = max(st.fetch_time_max, dt)
        st.recent.append(dt)

    def _table_failed(self, tname: str, what: str, exc: BaseException) -> int:
        if isinstance(exc, TableTimeout):
            self.stats.table_timeouts[tname] = self.stats.table_timeouts.get(tname, 0) + 1
            log.warning("table_timeout", table=tname, call=what, code=codename(PmErr.AGAIN), detail=str(exc))
            return PmErr.AGAIN
        if isinstance(exc, PmdaError):  # the table's own answer, not a failure
            log.debug("table_refused", table=tname, call=what, code=codename(exc.pm_code), error=str(exc))
            return exc.pm_code
        self.stats.table_errors[tname] = self.stats.table_errors.get(tname, 0) + 1
        log.error(
            "table_exception",
            table=tname,
            call=what,
            error=f"{type(exc).__name__}: {exc}",
            code=codename(PmErr.AGAIN),
        )
        return PmErr.AGAIN

    def _add_values(
        self, builder: ResultBuilder, p: int, mount: Mount, metric: Metric, value: Any, profile: ProfilePdu
    ) -> int:
        if (
            type(value) is PackedColumns  # the packed fast path (e.g. MMV): values already encoded
            and metric.indom is not None
            and PACKED_TYPECODES.get(metric.type) == value.typecode
            and len(value.data) == PACKED_SIZE[metric.type] * len(value.insts)
            and includes_all(profile, metric.indom.id)
        ):
            builder.add_fixed(p, metric.type, value.insts, PackedColumn(value.data, PACKED_SIZE[metric.type]))
            return len(value.insts)
        if metric.type == PmType.NOSUPPORT:
            builder.add_error(p, PmErr.APPVERSION)
            return 0
        if value is None:
            builder.add_error(p, 0)
            return 0
        if isinstance(value, PmdaError):
            builder.add_error(p, value.pm_code)
            return 0
        try:
            if metric.indom is None:
                insts: Sequence[int] = (PM_IN_NULL,)
                vals: Sequence[Any] = (value,)
            else:
                insts, vals = columns(value, metric.type)
                ind = metric.indom.id
                if not includes_all(profile, ind):
                    if isinstance(vals, PackedColumn):
                        size = vals.size
                        vals = [vals.data[k * size : (k + 1) * size] for k in range(len(vals))]
                        keep = [k for k, i in enumerate(insts) if profile.includes(ind, i)]
                        insts = [insts[k] for k in keep]
                        vals = PackedColumn(b"".join(vals[k] for k in keep), size)  # type: ignore[assignment]
                    else:
                        keep = [k for k, i in enumerate(insts) if profile.includes(ind, i)]
                        insts = [insts[k] for k in keep]
                        vals = [vals[k] for k in keep]
            if metric.type in _EVENT_TYPES:
                vals = event_arrays(metric.type, vals, self.domain)
            check_range(metric.type, vals)
            builder.add_values(p, metric.type, insts, vals)
            return len(insts)
        except (TypeError, ValueError, OverflowError, AttributeError, struct.error) as err:
            tname = mount.name or type(mount.table).__name__
            self.stats.table_errors[tname] = self.stats.table_errors.get(tname, 0) + 1
            log.error(
                "table_bad_value",
                table=tname,
                metric=mount.full(metric),
                type=PmType(metric.type).name,
                error=f"{type(err).__name__}: {err}",
                code=codename(PmErr.TYPE),
            )
            builder.add_error(p, PmErr.TYPE)
            return 0

    # ------------------------------------------------------------ INSTANCE

    async def _refreshed(self, ident: int) -> tuple[Mount, InDom] | int:
        """The mount and indom ``ident`` after the table's refresh, or the
        error code to answer."""
        found = self._by_indom.get(ident)
        if found is None:
            return PmErr.INDOM
        code = await self._refresh_indom(*found)
        return code if code else found

    async def _instance(self, event: Request, pdu: InstanceReqPdu) -> Pdu:
        found = await self._refreshed(pdu.indom)
        if isinstance(found, int):
            return ErrorPdu(found)
        ind = found[1]
        if pdu.name is not None:
            return InstancePdu(pdu.indom, (InstanceEntry(ind.id_of(pdu.name), ""),))
        if pdu.inst != PM_IN_NULL:
            return InstancePdu(pdu.indom, (InstanceEntry(PM_IN_NULL, ind.name_of(pdu.inst)),))
        if ind.listing is not None:  # repeated ids: listed as the table lists them, not cached
            return InstancePdu(pdu.indom, tuple(InstanceEntry(i, n) for i, n in ind.listing))
        cached = self._instance_cache.get(pdu.indom)
        if cached is not None and cached[0] == ind.instances:
            return cached[1]
        reply = EncodedReply(
            PduType.INSTANCE,
            InstancePdu(pdu.indom, tuple(InstanceEntry(i, n) for i, n in ind.instances.items())).encode(),
        )
        self._instance_cache[pdu.indom] = (dict(ind.instances), reply)
        return reply

    async def _refresh_indom(self, mount: Mount, ind: InDom) -> int:
        if getattr(mount.table.refresh_instances, "__func__", None) is Table.refresh_instances:
            return 0  # the base class's no-op: no table call, no deadline to arm
        try:
            await self.runner.call(mount.table, "instances", lambda: mount.table.refresh_instances(ind))
        except Exception as exc:
            return self._table_failed(mount.name or type(mount.table).__name__, "instances", exc)
        return 0

    # ---------------------------------------------------------------- TEXT

    async def _text(self, event: Request, pdu: TextReqPdu) -> Pdu:
        text: str | int | None = None
        oneline = bool(pdu.type & TextType.ONELINE)
        if pdu.type & TextType.INDOM:
            found_i = self._by_indom.get(pdu.ident)
            if found_i is not None:
                text = found_i[1].oneline if oneline else found_i[1].help
        elif pdu.type & TextType.PMID:
            found_m = self._by_pmid.get(pdu.ident)
            if found_m is not None:
                text = found_m[1].oneline if oneline else found_m[1].help
        if text is None and self.help_source is not None:
            text = self.help_source.text(pdu.ident, pdu.type)
        if text is None:
            return ErrorPdu(PmErr.TEXT)
        if isinstance(text, int):  # a table's error for this text (pmdammv's PM_ERR_PMID, PM_ERR_INDOM)
            return ErrorPdu(text)
        # libpcp_pmda sends the ident in host order (the byte-order quirk).
        ident = TextPdu.swapped_ident(pdu.ident) if _LITTLE else pdu.ident
        return TextPdu(ident, text)

    # --------------------------------------------------------------- STORE

    async def _store(self, event: Request, pdu: ResultPdu) -> Pdu:
        context, attributes = event.context, event.attributes
        requests: list[tuple[Mount, StoreRequest]] = []
        for vs in pdu.vsets:
            found = self._by_pmid.get(vs.pmid)
            if found is None:
                return ErrorPdu(PmErr.PMID)
            mount, metric = found
            if not metric.writable:
                return ErrorPdu(PmErr.PERMISSION)
            values: dict[int, Any] = {}
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
                code = self._table_failed(mount.name or type(mount.table).__name__, "store", exc)
                log.info("store_refused", metric=mount.full(req.metric), code=codename(code), reason=errstr(code))
                return ErrorPdu(code)
            log.info("store", metric=mount.full(req.metric), values=len(req.values), context=context)
        return ErrorPdu(0)

    # -------------------------------------------------------------- LABELS

    def domain_labels(self) -> dict[str, Any]:
        """The domain level: ``{"agent": name}`` (what libpcp gives an agent
        that sets no domain labels) plus the configured ones (``[pmda]
        labels``; the compat modes' agent names).  Tables' own domain labels
        go to their clusters (:meth:`cluster_labels`), unless one table is
        all the agent has: then it stands for a libpcp agent that sets its
        domain labels (pmdasimple's ``role``), and gets no ``agent`` label."""
        extra = self._domain_labels_override or {}
        if len(self.mounts) == 1 and self.mounts[0].table.domain_labels:
            return {**self.mounts[0].table.domain_labels, **extra}
        return {"agent": self.name, **extra}

    def cluster_labels(self, table: Table, cluster: int) -> Mapping[str, Any]:
        """A cluster's labels: its table's domain labels (several tables
        share the domain) and then the cluster's own."""
        own = table.cluster_labels.get(cluster, {})
        if len(self.mounts) == 1 or not table.domain_labels:
            return own
        return {**table.domain_labels, **own}

    async def _label_reply(self, event: Request, pdu: LabelReqPdu) -> Pdu:
        t = pdu.type & 0x3F
        if t == LabelType.INSTANCES:
            refreshed = await self._refreshed(pdu.ident)
            if isinstance(refreshed, int):
                return ErrorPdu(refreshed)
            mount, ind = refreshed
            profile = event.profile
            sets = []
            # a listing that repeats an id (MMV): one set per entry, as pmdammv sends
            for inst in ind.instances if ind.listing is None else [i for i, _ in ind.listing]:
                if not profile.includes(ind.id, inst):
                    continue
                inst_items = mount.table.label_items(LabelType.INSTANCES, (ind, inst))
                if isinstance(inst_items, LabelText):
                    sets.append(_label_text(inst_items, inst))
                elif inst_items is not None:
                    sets.append(LabelSet.from_items(inst_items, inst))
                else:
                    sets.append(LabelSet.from_dict(dict(ind.labels_for(inst)), LabelType.INSTANCES, inst))
            return LabelPdu(pdu.ident, pdu.type, tuple(sets))
        labels: Mapping[str, Any] = {}
        items: list[tuple[str, str, int]] | LabelText | None = None
        flag = t
        if t == LabelType.DOMAIN:
            labels = self.domain_labels()
        elif t == LabelType.INDOM:
            found_i = self._by_indom.get(pdu.ident)
            if found_i is None:
                return ErrorPdu(PmErr.INDOM)
            labels = found_i[1].labels
            items = found_i[0].table.label_items(LabelType.INDOM, found_i[1])
        elif t == LabelType.CLUSTER:
            if pmid_domain(pdu.ident) == self.domain:
                c = pmid_cluster(pdu.ident)
                for m in self.mounts:
                    if c in m.table.clusters():
                        items = m.table.label_items(LabelType.CLUSTER, c)
                        labels = self.cluster_labels(m.table, c)
                        break
                    if c in m.table.cluster_labels:
                        labels = m.table.cluster_labels[c]
                        break
        elif t == LabelType.ITEM:
            found_m = self._by_pmid.get(pdu.ident)
            if found_m is None:
                return ErrorPdu(PmErr.PMID)
            labels = found_m[1].labels
            items = found_m[0].table.label_items(LabelType.ITEM, found_m[1])
        if isinstance(items, LabelText):
            return LabelPdu(pdu.ident, pdu.type, (_label_text(items),))
        if items is not None:
            if not items:
                return LabelPdu(pdu.ident, pdu.type, ())
            return LabelPdu(pdu.ident, pdu.type, (LabelSet.from_items(items),))
        if not labels:
            return LabelPdu(pdu.ident, pdu.type, ())
        return LabelPdu(pdu.ident, pdu.type, (LabelSet.from_dict(dict(labels), flag),))

    # ---------------------------------------------------------------- PMNS

    async def _pmns_names(self, event: Request, pdu: PmnsNamesPdu) -> Pdu:
        if len(pdu.names) != 1:
            return ErrorPdu(PmErr.IPC)
        node = self._pmns.node(pdu.names[0])
        if node is None or node.pmid is None:
            return ErrorPdu(PmErr.NAME)
        return PmnsIdsPdu((node.pmid,), 0)

    async def _pmns_ids(self, event: Request, pdu: PmnsIdsPdu) -> Pdu:
        if len(pdu.pmids) != 1:
            return ErrorPdu(PmErr.IPC)
        found = self._by_pmid.get(pdu.pmids[0])  # (one name per PMID: the index refuses a second)
        if found is None:
            return ErrorPdu(PmErr.PMID)
        return PmnsNamesPdu((found[0].full(found[1]),))

    async def _children(self, event: Request, pdu: PmnsChildPdu) -> Pdu:
        node = self._pmns.node(pdu.name)
        if node is None or not pdu.name:
            return ErrorPdu(PmErr.NAME)
        # libpcp_pmda's tree lists the newest child first
        kids = list(reversed(node.children.items()))
        names = tuple(k for k, _ in kids)
        if pdu.subtype:
            return PmnsNamesPdu(names, tuple(0 if c.is_leaf else 1 for _, c in kids))
        return PmnsNamesPdu(names)

    async def _traverse(self, event: Request, pdu: PmnsTraversePdu) -> Pdu:
        node = self._pmns.node(pdu.name)
        if node is None or not pdu.name:
            return ErrorPdu(PmErr.NAME)
        out: list[str] = []
        _walk(node, pdu.name, out)
        return PmnsNamesPdu(tuple(out))

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
                self._table_failed(m.name or type(m.table).__name__, "end_context", exc)


def _walk(node: Node, prefix: str, out: list[str]) -> None:
    """Leaves at and below ``node``, newest child first (libpcp_pmda's order)."""
    if node.is_leaf:
        out.append(prefix)
        return
    for name, child in reversed(node.children.items()):
        _walk(child, f"{prefix}.{name}", out)


_KIND_NAMES: dict[int, str] = {t: t.name for t in PduType}

_FAST_SLOTS = 32  # PMID lists whose layout is kept (pmcd's clients each fetch their own)
_FAST_RETRY = 64  # fetches before a PMID list found ineligible is looked at again
_EVENT_TYPES = frozenset((PmType.EVENT, PmType.HIGHRES_EVENT))


def _bind_fetch(table: Table, req: FetchRequest) -> Callable[[], Awaitable[Any]]:
    return lambda: table.fetch(req)


def _bind_store(table: Table, req: StoreRequest) -> Callable[[], Awaitable[None]]:
    return lambda: table.store(req)


def _label_text(text: LabelText, inst: int = PM_IN_NULL) -> LabelSet:
    return LabelSet(inst, text.json, tuple(Label(*e) for e in text.index))


def _label_fits(reply: Pdu) -> Pdu:
    """PCP's decoders (p_label.c) refuse a set of 255 labels or more, of
    64 KiB of JSON, or whose index points outside its JSON, with PM_ERR_IPC,
    and pmcd 6.3+ then drops the agent: such a reply becomes PM_ERR_TOOBIG
    (pmdammv sends it, and is dropped)."""
    if isinstance(reply, LabelPdu):
        for s in reply.sets:
            if len(s.labels) >= 255 or len(s.json) >= 65535:
                log.warning(
                    "label_set_too_big",
                    ident=reply.ident,
                    type=reply.type,
                    labels=len(s.labels),
                    json_bytes=len(s.json),
                    limit="254 labels, 65534 bytes",
                )
                return ErrorPdu(PmErr.TOOBIG)
            for lb in s.labels:
                # p_label.c (6.3+): name and value must lie inside the set's JSON
                if lb.name + lb.namelen > len(s.json) or lb.value + lb.valuelen > len(s.json):
                    log.warning(
                        "label_set_refused",
                        ident=reply.ident,
                        type=reply.type,
                        inst=s.inst,
                        reason="a label's name or value lies outside the set's JSON text (PCP's decoders refuse it)",
                    )
                    return ErrorPdu(PmErr.TOOBIG)
    return reply

"""Turn session requests into table calls, and their results into replies.

The :class:`Dispatcher` owns the mounted tables of one PMDA domain: it
indexes their metrics by PMID and name and their indoms by id, answers
DESC, INSTANCE, TEXT, LABEL and the dynamic-namespace PDUs from that index,
and calls the tables (through a :class:`Runner` that enforces deadlines)
for FETCH, store and instance refreshes.  A table that raises, overruns its
deadline or returns values of the wrong type gets an error code for its own
metrics and a log line; every other table is unaffected.

Runtime-neutral: no trio here (the daemon supplies the Runner).
"""

from __future__ import annotations

import math
import struct
import sys
import time
from array import array
from collections import deque
from collections.abc import Awaitable, Iterable, Mapping, Sequence
from itertools import chain
from operator import itemgetter
from typing import Any, Callable, Protocol, TypeVar

import attrs
import structlog

from pmda_py.errors import PmdaError, PmdaNotReady, PmErr, codename, errstr
from pmda_py.namespace import Namespace, Node
from pmda_py.pmapi import (
    PM_IN_NULL,
    PM_INDOM_NULL,
    LabelType,
    PmType,
    TextType,
    indom_serial,
    pmid_cluster,
    pmid_domain,
    pmid_str,
)
from pmda_py.session import BadRequest, Request, Session
from pmda_py.table import Columns, FetchRequest, InDom, Metric, PackedFetch, StoreRequest, Table
from pmda_py.wire import (
    DescPdu,
    DescReqPdu,
    ErrorPdu,
    EventArray,
    FetchPdu,
    InstanceEntry,
    InstancePdu,
    InstanceReqPdu,
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
    ValFmt,
    ValueBlock,
    ValueSet,
)
from pmda_py.wire.result import (
    FIXED_CODES,
    FixedLayout,
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


class ConfigError(PmdaError):
    """The tables cannot be mounted together (collisions, bad names)."""

    code = PmErr.GENERIC


class Runner(Protocol):
    """**Protocol:** runs table coroutines under deadlines (the daemon's trio side)."""

    async def call(self, table: Table, what: str, fn: Callable[[], Awaitable[_T]]) -> _T:
        """Run ``fn()`` for ``table``; raise :class:`TableTimeout` past its deadline."""
        ...

    async def gather(self, calls: Sequence[tuple[Table, str, Callable[[], Awaitable[Any]]]]) -> list[Any]:
        """Run several calls concurrently; each result is a value or the
        exception it raised (TableTimeout on deadline)."""
        ...


class HelpSource(Protocol):
    """**Protocol:** help text from outside the tables (a newhelp help file)."""

    def text(self, ident: int, type_: int) -> str | None:
        """The one-line or long text for a PMID or indom, or None."""
        ...


@attrs.frozen
class EncodedReply:
    """A reply already encoded (the fast fetch path)."""

    pdu_type: int
    data: bytes
    from_: int = 0

    def encode(self) -> bytes:
        return self.data


@attrs.define
class DispatchStats:
    """Counters the ``control`` table exports."""

    requests: dict[str, int] = attrs.field(factory=dict)
    fetches: int = 0
    fetch_values: int = 0
    fetch_time_total: float = 0.0
    fetch_time_last: float = 0.0
    fetch_time_max: float = 0.0
    table_errors: dict[str, int] = attrs.field(factory=dict)
    table_timeouts: dict[str, int] = attrs.field(factory=dict)
    bad_requests: int = 0
    started: float = attrs.field(factory=time.time)
    #: the last 4096 fetch times (bounded: memory never grows)
    recent: deque[float] = attrs.field(factory=lambda: deque(maxlen=4096))

    def percentile(self, q: float) -> float:
        """Fetch time at quantile ``q`` (0..1) over the recent fetches, in seconds."""
        if not self.recent:
            return 0.0
        s = sorted(self.recent)
        return s[min(len(s) - 1, int(q * len(s)))]

    def count(self, kind: str) -> None:
        self.requests[kind] = self.requests.get(kind, 0) + 1


@attrs.define(eq=False)
class Mount:
    """A table mounted at ``prefix`` (the full name prefix, may be empty)."""

    table: Table
    prefix: str
    name: str = ""
    options: dict[str, str] = attrs.field(factory=dict)

    def full(self, metric: Metric) -> str:
        return f"{self.prefix}.{metric.name}" if self.prefix else metric.name


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
    ) -> None:
        self.domain = domain
        self.mounts = list(mounts)
        self.runner = runner
        self.name = name
        self.help_source = help_source
        self.stats = DispatchStats()
        self._domain_labels_override = dict(domain_labels) if domain_labels is not None else None
        self._generations: list[int] = []
        self._by_pmid: dict[int, tuple[Mount, Metric]] = {}
        self._by_indom: dict[int, tuple[Mount, InDom]] = {}
        self._by_name: dict[str, int] = {}
        self._pmns = Namespace()  # the mounted names, for the PMNS PDUs
        self._instance_cache: dict[int, tuple[dict[int, str], EncodedReply]] = {}
        #: the last fetch's value-set section, reused when the next has the same shape
        self._result_cache = SectionCache()
        self._packed_cache = PackedRunCache()
        #: the layouts of repeated fetches, by the request's PMIDs (see :class:`_FastFetch`)
        self._fast: dict[tuple[int, ...], _FastFetch | int] = {}
        #: the metrics of a request's PMIDs by table, by the request's PMIDs
        self._wanted: dict[tuple[int, ...], dict[int, tuple[Mount, list[Metric]]]] = {}
        #: encoded DESC replies by PMID (cleared with the index)
        self._desc_replies: dict[int, EncodedReply] = {}
        #: whether repeated fetches take the fast path (off: always the general one)
        self.fast_fetch = True
        #: tables that raised PmdaNotReady, awaited by :meth:`wait_ready`
        self.not_ready: list[Table] = []
        self.names_changed = False
        for m in self.mounts:
            if m.prefix and not all(p.isidentifier() for p in m.prefix.split(".")):
                raise ConfigError(f"table {m.name or type(m.table).__name__}: bad mount point {m.prefix!r}")
        self.reindex(strict=True)

    # ------------------------------------------------------------ indexing

    def reindex(self, strict: bool = False) -> None:
        """Rebuild the PMID, indom and name indexes from the tables.

        With ``strict`` (start-up) any collision is a ConfigError; later a
        colliding metric of a dynamic table is dropped with a log line.
        """
        by_pmid: dict[int, tuple[Mount, Metric]] = {}
        by_indom: dict[int, tuple[Mount, InDom]] = {}
        cluster_owner: dict[int, Mount] = {}
        pmns = Namespace()
        by_name: dict[str, int] = {}

        def problem(msg: str) -> None:
            if strict:
                raise ConfigError(msg)
            log.error("table_collision", problem=msg)

        for mount in self.mounts:
            t = mount.table
            tname = mount.name or type(t).__name__
            for c in sorted(t.clusters()):
                other = cluster_owner.get(c)
                if other is not None and other is not mount:
                    problem(f"tables {other.name or type(other.table).__name__} and {tname} both use cluster {c}")
                    continue
                cluster_owner[c] = mount
            for ind in t.indoms():
                ind.domain = self.domain
                prev = by_indom.get(ind.id)
                if prev is not None and prev[1] is not ind:
                    problem(f"tables {prev[0].name} and {tname} both use indom serial {ind.serial}")
                    continue
                by_indom[ind.id] = (mount, ind)
            for m in t.metrics():
                if cluster_owner.get(m.cluster) is not mount:
                    continue
                p = m.pmid(self.domain)
                if p in by_pmid:
                    problem(f"{tname}: PMID {pmid_str(p)} declared twice ({m.name})")
                    continue
                if m.indom is not None and m.indom.id not in by_indom:
                    m.indom.domain = self.domain
                    by_indom[m.indom.id] = (mount, m.indom)
                full = mount.full(m)
                if full in by_name:
                    problem(f"{tname}: metric name {full} declared twice")
                    continue
                try:
                    pmns.add(full, p)
                except ValueError:
                    problem(f"{tname}: metric name {full} clashes with a non-leaf or leaf of the same name")
                    continue
                by_pmid[p] = (mount, m)
                by_name[full] = p
        old_names = set(self._by_name)
        self._by_pmid, self._by_indom, self._pmns, self._by_name = by_pmid, by_indom, pmns, by_name
        self._generations = [m.table.generation for m in self.mounts]
        self._fast.clear()
        self._wanted.clear()
        self._desc_replies.clear()
        if old_names and old_names != set(by_name):
            self.names_changed = True

    def _refresh_index(self) -> None:
        for k, m in enumerate(self.mounts):
            if m.table.generation != self._generations[k]:
                self.reindex()
                return

    def metric(self, p: int) -> tuple[Mount, Metric] | None:
        """The mount and metric of PMID ``p``."""
        return self._by_pmid.get(p)

    def pmid_of(self, name: str) -> int | None:
        return self._by_name.get(name)

    @property
    def all_names(self) -> dict[str, int]:
        return dict(self._by_name)

    # ---------------------------------------------------------- dispatching

    async def handle(self, session: Session, event: Request | BadRequest) -> Pdu | EncodedReply:
        """The one reply to ``event``."""
        if isinstance(event, BadRequest):
            self.stats.bad_requests += 1
            self.stats.count("BAD")
            return ErrorPdu(event.code)
        pdu = event.pdu
        for m in self.mounts:
            try:
                m.table.check()
            except Exception as exc:
                self._table_failed(m.name or type(m.table).__name__, "check", exc)
        self._refresh_index()
        kind = _KIND_NAMES[pdu.pdu_type]
        self.stats.count(kind)
        try:
            if isinstance(pdu, FetchPdu):
                return await self._fetch(session, event.context, pdu)
            if isinstance(pdu, DescReqPdu):
                return self._desc(pdu)
            if isinstance(pdu, InstanceReqPdu):
                return await self._instance(pdu)
            if isinstance(pdu, TextReqPdu):
                return self._text(pdu)
            if isinstance(pdu, ResultPdu):
                return await self._store(session, event.context, pdu)
            if isinstance(pdu, LabelReqPdu):
                return await self._label(session, event.context, pdu)
            if isinstance(pdu, PmnsTraversePdu):
                return self._traverse(pdu)
            if isinstance(pdu, PmnsChildPdu):
                return self._children(pdu)
            if isinstance(pdu, PmnsNamesPdu):
                return self._pmns_names(pdu)
            if isinstance(pdu, PmnsIdsPdu):
                return self._pmns_ids(pdu)
        except PmdaError as err:
            return ErrorPdu(err.pm_code)
        return ErrorPdu(PmErr.IPC)

    # ---------------------------------------------------------------- DESC

    def _desc(self, pdu: DescReqPdu) -> Pdu | EncodedReply:
        reply = self._desc_replies.get(pdu.pmid)
        if reply is not None:
            return reply
        found = self._by_pmid.get(pdu.pmid)
        if found is None:
            return ErrorPdu(PmErr.PMID)
        # a metric's descriptor is fixed (Metric is frozen): encode it once per index
        reply = self._desc_replies[pdu.pmid] = EncodedReply(PduType.DESC, DescPdu(found[1].desc(self.domain)).encode())
        return reply

    # --------------------------------------------------------------- FETCH

    async def _fetch(self, session: Session, context: int, pdu: FetchPdu) -> EncodedReply | ErrorPdu:
        t0 = time.perf_counter()
        profile = session.profile(context)
        attributes = session.attributes(context)
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
        if type(fast) is _FastFetch and (fast.profile is profile or fast.profile == profile):
            fast.profile = profile  # pmcd resends an equal profile when it switches client contexts
            data = fast.encode(outcomes, 0x10 if self.names_changed else 0)
            if data is not None:
                self.names_changed = False
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
        old: _FastFetch | int | None,
    ) -> None:
        """After a general-path fetch: keep its layout for the next fetch
        of the same PMIDs if every value is fixed-size (else remember not to
        try again for a while)."""
        if type(old) is int and old > self.stats.fetches:
            return  # not eligible lately: retry later
        fast = None
        if all(type(o) is dict for o in outcomes):
            fast = _FastFetch.build(pdu.pmids, profile, self._by_pmid, answers, data, len(outcomes))
        if fast is None or (type(old) is _FastFetch and old.hits == 0 and old.profile == profile):
            # not eligible, or the shape keeps changing: try again in a while
            fast_or_retry: _FastFetch | int = self.stats.fetches + _FAST_RETRY
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
        if not all(_includes_all(profile, ind) for ind in outcome.indoms):
            return None
        cache = self._packed_cache
        if cache.pmids != pdu.pmids:  # the table's token covers metrics, not our PMIDs
            cache.token = None
        try:
            data = encode_packed_run(PackedRun(pdu.pmids, outcome.vtypes, outcome.insts, outcome.blob, outcome.token),
                                     self._state_flags(), cache=cache)  # fmt: skip
        except ValueError as err:  # a table bug: the general path reports it per metric
            log.error("table_bad_packed_fetch", error=str(err))
            return None
        cache.pmids = pdu.pmids
        return data, cache.total

    def _state_flags(self) -> int:
        flags = 0
        if self.names_changed:
            flags |= 0x10  # PMDA_EXT_NAMES_CHANGE
            self.names_changed = False
        return flags

    def _fetch_done(self, t0: float, nvalues: int) -> None:
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
        if type(value) is Columns and metric.indom is not None:
            packed: Any = value.values
            if (
                type(packed) is PackedColumn  # the packed fast path (e.g. MMV): values already encoded
                and _PACKED_SIZE.get(metric.type) == packed.size
                and len(value.insts) == len(packed)
                and _includes_all(profile, metric.indom.id)
            ):
                builder.add_fixed(p, metric.type, value.insts, packed)
                return len(packed)
        if metric.type == PmType.NOSUPPORT:
            builder.add_error(p, PmErr.APPVERSION)
            return 0
        if value is None:
            builder.add_error(p, 0)
            return 0
        if isinstance(value, PmdaError):
            builder.add_error(p, value.pm_code)
            return 0
        if isinstance(value, ValueSet):
            return self._add_valueset(builder, value, p)
        try:
            if metric.indom is None:
                insts: Sequence[int] = (PM_IN_NULL,)
                vals: Sequence[Any] = (value,)
            else:
                insts, vals = _columns(value)
                ind = metric.indom.id
                if not _includes_all(profile, ind):
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
            _check_range(metric.type, vals)
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

    @staticmethod
    def _add_valueset(builder: ResultBuilder, vs: ValueSet, p: int) -> int:
        if vs.error < 0 or not vs.values:
            builder.add_error(p, vs.error)
            return 0
        insts = [v.inst for v in vs.values]
        if vs.valfmt == ValFmt.INSITU:
            builder.add_insitu(p, insts, [v.value for v in vs.values])  # type: ignore[misc]
        else:
            blocks = [v.value for v in vs.values]
            if not all(isinstance(b, ValueBlock) for b in blocks) or len({b.vtype for b in blocks}) != 1:  # type: ignore[union-attr]
                raise TypeError("ValueSet blocks must share one vtype")
            vtype = blocks[0].vtype  # type: ignore[union-attr]
            builder.add_blocks(p, vs.valfmt, insts, vtype, [b.payload for b in blocks])  # type: ignore[union-attr]
        return len(insts)

    # ------------------------------------------------------------ INSTANCE

    async def _instance(self, pdu: InstanceReqPdu) -> Pdu | EncodedReply:
        found = self._by_indom.get(pdu.indom)
        if found is None:
            return ErrorPdu(PmErr.INDOM)
        mount, ind = found
        code = await self._refresh_indom(mount, ind)
        if code:
            return ErrorPdu(code)
        if pdu.name is not None:
            return InstancePdu(pdu.indom, (InstanceEntry(ind.id_of(pdu.name), ""),))
        if pdu.inst != PM_IN_NULL:
            return InstancePdu(pdu.indom, (InstanceEntry(PM_IN_NULL, ind.name_of(pdu.inst)),))
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

    def _text(self, pdu: TextReqPdu) -> Pdu:
        text: str | None = None
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
        # libpcp_pmda sends the ident in host order (the byte-order quirk).
        ident = TextPdu.swapped_ident(pdu.ident) if _LITTLE else pdu.ident
        return TextPdu(ident, text)

    # --------------------------------------------------------------- STORE

    async def _store(self, session: Session, context: int, pdu: ResultPdu) -> Pdu:
        attributes = session.attributes(context)
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
                    values[v.inst] = _store_value(metric, vs.valfmt, v.value)
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
        if self._domain_labels_override is not None:
            return dict(self._domain_labels_override)
        merged: dict[str, Any] = {}
        for m in self.mounts:
            merged.update(m.table.domain_labels)
        return merged or {"agent": self.name}

    async def _label(self, session: Session, context: int, pdu: LabelReqPdu) -> Pdu:
        t = pdu.type & 0x3F
        if t == LabelType.INSTANCES:
            found_i = self._by_indom.get(pdu.ident)
            if found_i is None:
                return ErrorPdu(PmErr.INDOM)
            mount, ind = found_i
            code = await self._refresh_indom(mount, ind)
            if code:
                return ErrorPdu(code)
            profile = session.profile(context)
            sets = []
            for inst in ind.instances:
                if not profile.includes(ind.id, inst):
                    continue
                inst_items = mount.table.label_items(LabelType.INSTANCES, (ind, inst))
                if inst_items is not None:
                    sets.append(LabelSet.from_items(inst_items, inst))
                else:
                    sets.append(LabelSet.from_dict(dict(ind.labels_for(inst)), LabelType.INSTANCES, inst))
            return LabelPdu(pdu.ident, pdu.type, tuple(sets))
        labels: Mapping[str, Any] = {}
        items: list[tuple[str, str, int]] | None = None
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
                    if c in m.table.cluster_labels:
                        labels = m.table.cluster_labels[c]
                        break
                    if items is not None:
                        break
        elif t == LabelType.ITEM:
            found_m = self._by_pmid.get(pdu.ident)
            if found_m is None:
                return ErrorPdu(PmErr.PMID)
            labels = found_m[1].labels
            items = found_m[0].table.label_items(LabelType.ITEM, found_m[1])
        if items is not None:
            if not items:
                return LabelPdu(pdu.ident, pdu.type, ())
            return LabelPdu(pdu.ident, pdu.type, (LabelSet.from_items(items),))
        if not labels:
            return LabelPdu(pdu.ident, pdu.type, ())
        return LabelPdu(pdu.ident, pdu.type, (LabelSet.from_dict(dict(labels), flag),))

    # ---------------------------------------------------------------- PMNS

    def _pmns_names(self, pdu: PmnsNamesPdu) -> Pdu:
        if len(pdu.names) != 1:
            return ErrorPdu(PmErr.IPC)
        node = self._pmns.node(pdu.names[0])
        if node is None or node.pmid is None:
            return ErrorPdu(PmErr.NAME)
        return PmnsIdsPdu((node.pmid,), 0)

    def _pmns_ids(self, pdu: PmnsIdsPdu) -> Pdu:
        if len(pdu.pmids) != 1:
            return ErrorPdu(PmErr.IPC)
        names = self._pmns.names(pdu.pmids[0])
        if not names:
            return ErrorPdu(PmErr.PMID)
        return PmnsNamesPdu(tuple(names))

    def _children(self, pdu: PmnsChildPdu) -> Pdu:
        node = self._pmns.node(pdu.name)
        if node is None or not pdu.name:
            return ErrorPdu(PmErr.NAME)
        # libpcp_pmda's tree lists the newest child first
        kids = list(reversed(node.children.items()))
        names = tuple(k for k, _ in kids)
        if pdu.subtype:
            return PmnsNamesPdu(names, tuple(0 if c.is_leaf else 1 for _, c in kids))
        return PmnsNamesPdu(names)

    def _traverse(self, pdu: PmnsTraversePdu) -> Pdu:
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
_NUMBERS = frozenset((int, float))
_DICTS = frozenset((dict,))
_INTS = frozenset((int,))


class _FastFetch:
    """The layout of a repeated FETCH (same PMIDs, same profile, same
    instances): its values come out of the tables' dicts by a few C-level
    passes (``map``, ``chain``, ``itemgetter``) and go into the reply through
    :class:`FixedLayout` (one precompiled ``struct`` per group, which checks
    each value's range).  Group 0 holds the singular metrics' values, group
    1 the ``{inst: value}`` metrics' values, each in request order.  Anything
    unexpected (another instance list, a non-number, a value out of range)
    answers None: the general path then encodes that fetch and reports the
    bad value precisely."""

    __slots__ = ("hits", "keys", "layout", "multis", "ntables", "pick", "profile", "singles")

    def __init__(
        self,
        profile: ProfilePdu,
        singles: list[Metric],
        multis: list[Metric],
        keys: list[tuple[Any, ...]],
        pick: Callable[[Sequence[Any]], Any] | None,
        layout: FixedLayout,
        ntables: int,
    ) -> None:
        self.profile = profile
        self.singles, self.multis, self.keys, self.pick = singles, multis, keys, pick
        self.layout = layout
        self.ntables = ntables
        self.hits = 0

    @classmethod
    def build(
        cls,
        pmids: Sequence[int],
        profile: ProfilePdu,
        by_pmid: Mapping[int, tuple[Mount, Metric]],
        answers: Mapping[int, Mapping[Metric, Any]],
        data: bytes,
        ntables: int,
    ) -> _FastFetch | None:
        """The layout of the reply ``data`` the general path made, or None
        when some value is not a plain number of a fixed-size type."""
        singles: list[Metric] = []
        multis: list[Metric] = []
        keys: list[tuple[Any, ...]] = []
        picked: list[int] = []
        flat = 0  # values of the {inst: value} metrics, before the profile
        groups: list[int] = []
        types: list[int] = []
        for p in pmids:
            found = by_pmid.get(p)
            if found is None:
                groups.append(-1)
                types.append(0)
                continue
            mount, metric = found
            if metric.type not in FIXED_CODES:
                return None
            value = answers[id(mount)].get(metric)
            types.append(metric.type)
            if metric.indom is None:
                if type(value) not in _NUMBERS:
                    return None
                singles.append(metric)
                groups.append(0)
                continue
            if type(value) is not dict:
                return None
            insts = tuple(value)
            ind = metric.indom.id
            if _includes_all(profile, ind):
                picked.extend(range(flat, flat + len(insts)))
                kept = len(insts)
            else:
                kept = 0
                for k, i in enumerate(insts):
                    if type(i) is int and profile.includes(ind, i):
                        picked.append(flat + k)
                        kept += 1
            multis.append(metric)
            keys.append(insts)
            flat += len(insts)
            groups.append(1 if kept else -1)
        try:
            layout = FixedLayout(data, groups, types, 2)
        except (ValueError, KeyError, IndexError):
            return None  # the general path answered otherwise (e.g. an error for a bad instance)
        if layout.nvalues != len(singles) + len(picked):
            return None
        pick: Callable[[Sequence[Any]], Any] | None = None
        if len(picked) != flat:
            pick = itemgetter(*picked) if len(picked) > 1 else (lambda v: [v[k] for k in picked])
        return cls(profile, singles, multis, keys, pick, layout, ntables)

    def encode(self, outcomes: list[Any], flags: int) -> bytes | None:
        """The reply for these table answers, or None to take the general path."""
        if len(outcomes) != self.ntables:
            return None
        if len(outcomes) == 1:
            answer = outcomes[0]
            if type(answer) is not dict:
                return None
        else:
            answer = {}
            for o in outcomes:
                if type(o) is not dict:
                    return None
                answer.update(o)
        get = answer.get
        single = list(map(get, self.singles))
        if not _NUMBERS.issuperset(map(type, single)):
            return None
        multi: Any = ()
        if self.multis:
            dicts: list[Any] = list(map(get, self.multis))
            if not _DICTS.issuperset(map(type, dicts)) or list(map(tuple, dicts)) != self.keys:
                return None
            multi = list(chain.from_iterable(map(dict.values, dicts)))
            if self.pick is not None:
                multi = self.pick(multi)
            if not _NUMBERS.issuperset(map(type, multi)):
                return None
        try:
            data = self.layout.encode((single, multi), flags)
        except (struct.error, OverflowError, TypeError):
            return None
        self.hits += 1
        return data


def _bind_fetch(table: Table, req: FetchRequest) -> Callable[[], Awaitable[Any]]:
    return lambda: table.fetch(req)


def _bind_store(table: Table, req: StoreRequest) -> Callable[[], Awaitable[None]]:
    return lambda: table.store(req)


# types a PackedColumn can carry (DPTR blocks of fixed size), and that size
_PACKED_SIZE: dict[int, int] = {PmType.I64: 8, PmType.U64: 8, PmType.DOUBLE: 8, PmType.FLOAT: 4}


def _includes_all(profile: ProfilePdu, indom: int) -> bool:
    if profile.g_state != 0:
        return False
    for e in profile.entries:
        if e.indom == indom:
            return e.state == 0 and not e.instances
    return True


def _columns(value: Any) -> tuple[Sequence[int], Sequence[Any]]:
    if isinstance(value, Columns):
        if len(value.insts) != len(value.values):
            raise ValueError("Columns: insts and values differ in length")
        return value.insts, value.values
    if isinstance(value, Mapping):
        return list(value.keys()), list(value.values())
    if isinstance(value, (str, bytes, int, float)):
        raise TypeError(f"a metric with an indom needs {{inst: value}}, got {type(value).__name__}")
    pairs = list(value)
    return [p[0] for p in pairs], [p[1] for p in pairs]


_RANGES: dict[int, tuple[int, int]] = {
    PmType.I32: (-(1 << 31), (1 << 31) - 1),
    PmType.U32: (0, (1 << 32) - 1),
    PmType.I64: (-(1 << 63), (1 << 63) - 1),
    PmType.U64: (0, (1 << 64) - 1),
}


_ARRAY_CODES: dict[int, tuple[str, ...]] = {
    PmType.I32: ("i", "l"),
    PmType.U32: ("I", "L"),
    PmType.I64: ("q",),
    PmType.U64: ("Q",),
    PmType.FLOAT: ("f",),
    PmType.DOUBLE: ("d",),
}


def _check_range(type_: int, vals: Sequence[Any]) -> None:
    if isinstance(vals, PackedColumn):
        return  # already encoded for the type
    if isinstance(vals, array) and vals.typecode in _ARRAY_CODES.get(type_, ()):
        return  # a typed array of the metric's own type: in range by construction
    rng = _RANGES.get(type_)
    if rng is None or not vals:
        if type_ in (PmType.FLOAT, PmType.DOUBLE):
            for v in vals:
                if not isinstance(v, (int, float)) or isinstance(v, bool):
                    raise TypeError(f"{PmType(type_).name} value {v!r}")
        elif type_ == PmType.STRING:
            for v in vals:
                if not isinstance(v, (str, bytes)):
                    raise TypeError(f"STRING value {v!r}")
        elif type_ in (PmType.EVENT, PmType.HIGHRES_EVENT):
            for v in vals:
                if not isinstance(v, EventArray):
                    raise TypeError(f"event value {v!r}")
        return
    if not _INTS.issuperset(map(type, vals)):  # min/max alone let a float or bool in between through
        for v in vals:
            if not isinstance(v, int) or isinstance(v, bool):
                raise TypeError(f"{PmType(type_).name} value {v!r} is not an int")
    lo, hi = min(vals), max(vals)
    if lo < rng[0] or hi > rng[1]:
        raise OverflowError(f"{PmType(type_).name} value out of range [{lo}, {hi}]")


def _store_value(metric: Metric, valfmt: int, value: int | ValueBlock) -> Any:
    """Decode one stored value per the metric's type, and range-check it."""
    t = metric.type
    if t in (PmType.I32, PmType.U32):
        if isinstance(value, ValueBlock):
            raise PmdaError(code=PmErr.TYPE)
        v: Any = value & 0xFFFFFFFF
        if t == PmType.I32 and v & 0x80000000:
            v -= 1 << 32
    else:
        if not isinstance(value, ValueBlock):
            raise PmdaError(code=PmErr.TYPE)
        if value.vtype != t and not (t == PmType.AGGREGATE_STATIC and value.vtype == PmType.AGGREGATE):
            raise PmdaError(code=PmErr.TYPE)
        try:
            v = value.value()
        except PmdaError:
            raise PmdaError(code=PmErr.BADSTORE) from None
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        if metric.min is not None and v < metric.min:
            raise PmdaError(code=PmErr.BADSTORE)
        if metric.max is not None and v > metric.max:
            raise PmdaError(code=PmErr.BADSTORE)
        if isinstance(v, float) and math.isnan(v) and (metric.min is not None or metric.max is not None):
            raise PmdaError(code=PmErr.BADSTORE)
    return v


# Unused imports kept for typing completeness.
_ = (PM_INDOM_NULL, indom_serial, Iterable)

"""The one FETCH planner: every FETCH comes in by :meth:`FetchPlanner.fetch`,
which asks the tables (through the runner) and picks the encoder for their
answers, in this order:

1. packed -- one table answered the whole request with a
   :class:`~pmda_py.table.PackedFetch`: its values are already encoded;
2. fast -- the same PMIDs were fetched before and every value was a fixed-size
   number: the layout learnt then (:class:`~pmda_py.dispatch.fast.FastFetch`
   over :class:`~pmda_py.wire.layout.FixedLayout`) takes the new values;
3. general -- each metric's value is coerced and encoded one by one
   (:class:`~pmda_py.wire.result.ResultBuilder`), and its layout is learnt
   for the next time.

Sans-IO, no trio.
"""

from __future__ import annotations

import struct
import time
from collections.abc import Awaitable, Mapping, Sequence
from functools import partial
from typing import TYPE_CHECKING, Callable, Final, Union

import structlog

from pmda_py.dispatch.coerce import PACKED_SIZE, check_range, columns, event_arrays, includes_all
from pmda_py.dispatch.fast import FastFetch
from pmda_py.dispatch.mounts import Mount
from pmda_py.dispatch.problems import cut
from pmda_py.errors import PmdaError, PmdaNotReady, PmErr, codename
from pmda_py.pmapi import PM_IN_NULL, PmType
from pmda_py.session import Request
from pmda_py.table import (
    PACKED_TYPECODES,
    FetchRequest,
    FetchResult,
    Metric,
    PackedColumns,
    PackedFetch,
    Table,
    Values,
)
from pmda_py.wire import EncodedPdu, ErrorPdu, FetchPdu, Pdu, PduType, ProfilePdu
from pmda_py.wire.buffers import ReplyBuffer
from pmda_py.wire.layout import RawValue
from pmda_py.wire.result import (
    PackedColumn,
    PackedRun,
    PackedRunCache,
    ResultBuilder,
    SectionCache,
    encode_packed_run,
)

if TYPE_CHECKING:
    from pmda_py.dispatch.dispatcher import Dispatcher

__all__ = ["FetchPlanner"]

log = structlog.get_logger("pmda_py.dispatch")

#: PMID lists whose plan is kept (pmcd's clients each fetch their own)
SLOTS: Final = 32
#: decoded requests whose plan is found by identity (several client contexts may send one PMID list)
REQUESTS: Final = 4 * SLOTS
#: PMIDs the kept plans and requests may name in all (each holds its PMID list; a
#: client of pmcd chooses how long the lists are): a list over a quarter of it is
#: planned afresh every time, and one over PLAN_PMIDS // REQUESTS is found by its
#: PMIDs, not by its request's identity (the request is not held)
PLAN_PMIDS: Final = 1 << 20
#: fetches before a PMID list found ineligible for the fast path is looked at again
RETRY: Final = 64
#: (a module constant: an enum member looked up on its class costs about 2 us
#: per request when the caches are cold)
_RESULT = PduType.RESULT
_EVENT_TYPES = frozenset((PmType.EVENT, PmType.HIGHRES_EVENT))

#: what a table's fetch came back with: its answer, or the exception it raised
Outcome = Union[FetchResult, BaseException, object]
#: the request's known metrics by table (id of the mount), each once, in request order
Wanted = dict[int, tuple[Mount, tuple[Metric, ...]]]


class _Plan:
    """What a FETCH of one PMID list needs again: its known metrics by table,
    the layout of its fast path (or the fetch count after which a list found
    ineligible is looked at again), the packed encoder's template."""

    __slots__ = (
        "asked_attributes",
        "asked_context",
        "asked_profile",
        "calls",
        "fast",
        "kept",
        "packed",
        "pmids",
        "wanted",
    )

    def __init__(self, pmids: tuple[int, ...], wanted: Wanted) -> None:
        self.pmids = pmids
        self.wanted = wanted
        #: the tables' fetch calls of the last fetch, and the profile, context and
        #: attributes they asked with (a repeated FETCH asks again with the same objects)
        self.calls: list[tuple[Table, str, Callable[[], Awaitable[object]]]] | None = None
        self.asked_profile: ProfilePdu | None = None
        self.asked_context = -1
        self.asked_attributes: Mapping[str, str] | None = None
        #: whether the planner keeps it (a list too long to keep: no layout is learnt for it)
        self.kept = False
        self.fast: FastFetch | int | None = None
        self.packed: PackedRunCache | None = None


class FetchPlanner:
    """Answers the FETCHes of one dispatcher (see the module docstring);
    keeps what it learnt by the request's PMIDs until the index changes.

    A repeated FETCH comes decoded as the same object (the session keeps
    requests decoded by their bytes), so its plan is found by that object's
    identity: hashing a PMID list reads every PMID's int object, about a
    cache line per metric of a big request when other processes have
    cooled the caches."""

    def __init__(self, dispatcher: Dispatcher) -> None:
        self.dispatcher = dispatcher
        #: whether repeated fetches take the fast path (off: always the general one)
        self.fast_enabled = True
        #: FETCHes planned (the clock of the fast path's retries)
        self.planned = 0
        #: the last fetch's value-set section, reused when the next has the same shape
        self._result_cache = SectionCache()
        #: the plans by the request's PMIDs (pmcd's clients each fetch their own lists)
        self._plans: dict[tuple[int, ...], _Plan] = {}
        self._plan_pmids = 0  # PMIDs of the kept plans, in all
        #: the plans by the identity of the decoded request last seen with them (held, so its id stays its own)
        self._by_request: dict[int, tuple[FetchPdu, _Plan]] = {}

    def clear(self) -> None:
        """Forget every plan (the index was rebuilt)."""
        self._plans.clear()
        self._plan_pmids = 0
        self._by_request.clear()

    def forget(self, changed: set[int]) -> None:
        """Forget the plans of requests naming one of the ``changed`` PMIDs."""
        for key in [key for key in self._plans if not changed.isdisjoint(key)]:
            del self._plans[key]
            self._plan_pmids -= len(key)
        self._by_request.clear()

    def holding(self) -> tuple[int, int, int]:
        """What the planner holds, against its bounds: plans kept, the PMIDs
        they name in all, requests held to find their plans by identity."""
        return len(self._plans), self._plan_pmids, len(self._by_request)

    def layouts(self) -> dict[tuple[int, ...], FastFetch | int]:
        """The fast path's layout (or retry count) of each PMID list planned so far."""
        return {pmids: plan.fast for pmids, plan in self._plans.items() if plan.fast is not None}

    def _plan(self, pdu: FetchPdu) -> _Plan:
        """The plan of ``pdu``'s PMID list (made on first sight), remembered
        by ``pdu``'s identity; within :data:`PLAN_PMIDS` (a list too long to
        keep is planned for this request only)."""
        n = len(pdu.pmids)
        plan = self._plans.get(pdu.pmids)
        if plan is None:
            plan = _Plan(pdu.pmids, self._group(pdu.pmids))
            if n > PLAN_PMIDS // 4:
                return plan
            plans = self._plans
            while plans and (len(plans) >= SLOTS or self._plan_pmids + n > PLAN_PMIDS):
                gone = plans.pop(next(iter(plans)))
                self._plan_pmids -= len(gone.pmids)
                for key in [key for key, (_p, held) in self._by_request.items() if held is gone]:
                    del self._by_request[key]
            plans[pdu.pmids] = plan
            plan.kept = True
            self._plan_pmids += n
        if n <= PLAN_PMIDS // REQUESTS:  # the request is held: so are its PMIDs
            if len(self._by_request) >= REQUESTS:
                del self._by_request[next(iter(self._by_request))]
            self._by_request[id(pdu)] = (pdu, plan)
        return plan

    async def fetch(self, event: Request, pdu: FetchPdu) -> Pdu:
        """The reply to one FETCH."""
        t0 = time.perf_counter()
        d = self.dispatcher
        self.planned += 1
        context, profile, attributes = event.context, event.profile, event.attributes
        seen = self._by_request.get(id(pdu))
        plan = seen[1] if seen is not None and seen[0] is pdu else self._plan(pdu)
        wanted = plan.wanted
        calls = plan.calls
        if (
            calls is None
            or plan.asked_profile is not profile
            or plan.asked_context != context
            or plan.asked_attributes is not attributes
        ):
            calls = []
            for mount, metrics in wanted.values():
                req = FetchRequest(metrics, profile, context, attributes, pdu.pmids)
                calls.append((mount.table, "fetch", partial(mount.table.fetch, req)))
            plan.calls = calls
            plan.asked_profile, plan.asked_context, plan.asked_attributes = profile, context, attributes
        outcomes: list[Outcome] = await d.runner.gather(calls) if calls else []
        if len(outcomes) == 1 and type(outcomes[0]) is PackedFetch:
            packed = self._packed(pdu, plan, outcomes[0], profile)
            if packed is not None:
                self._done(t0, packed[1])
                return EncodedPdu(_RESULT, packed[0])
        fast = plan.fast if self.fast_enabled else None
        if type(fast) is FastFetch and (fast.profile is profile or fast.profile == profile):
            fast.profile = profile  # pmcd resends an equal profile when it switches client contexts
            written = fast.encode(outcomes, d.state_flags())
            if written is not None:
                self._done(t0, fast.layout.nvalues)
                return EncodedPdu(_RESULT, written)
        for (mount, _metrics), outcome in zip(wanted.values(), outcomes):
            if isinstance(outcome, PmdaNotReady):
                d.not_ready.append(mount.table)
        if d.not_ready:
            log.info("not_ready", tables=[type(t).__name__ for t in d.not_ready])
            return ErrorPdu(PmErr.PMDANOTREADY)
        answers: dict[int, Mapping[Metric, Values]] = {}  # id(mount) -> metric -> value or exception
        for (mount, metrics), outcome in zip(wanted.values(), outcomes):
            if isinstance(outcome, BaseException):
                failed = PmdaError(code=d.table_failed(mount.label, "fetch", outcome))
                answers[id(mount)] = dict.fromkeys(metrics, failed)
            elif not isinstance(outcome, Mapping):
                d.table_failed(mount.label, "fetch", TypeError(f"fetch returned {type(outcome).__name__}"))
                answers[id(mount)] = dict.fromkeys(metrics, PmdaError(code=PmErr.TYPE))
            else:
                answers[id(mount)] = outcome
        data, nvalues = self._general(pdu, profile, answers)
        if self.fast_enabled and plan.kept:
            self._learn(plan, pdu, profile, outcomes, answers, data)
        self._done(t0, nvalues)
        return EncodedPdu(_RESULT, data)

    # ------------------------------------------------------------ planning

    def _group(self, pmids: tuple[int, ...]) -> Wanted:
        """The request's known metrics by table (id of the mount), each once,
        in request order (and the tables that see every FETCH)."""
        by_pmid = self.dispatcher.index.by_pmid
        grouped: dict[int, tuple[Mount, list[Metric]]] = {}
        for p in dict.fromkeys(pmids):
            found = by_pmid.get(p)
            if found is None:
                continue
            mount, metric = found
            entry = grouped.get(id(mount))
            if entry is None:
                grouped[id(mount)] = (mount, [metric])
            else:
                entry[1].append(metric)
        for mount in self.dispatcher.mounts:
            if mount.table.sees_every_fetch:
                grouped.setdefault(id(mount), (mount, []))
        return {key: (mount, tuple(metrics)) for key, (mount, metrics) in grouped.items()}

    def _learn(
        self,
        plan: _Plan,
        pdu: FetchPdu,
        profile: ProfilePdu,
        outcomes: list[Outcome],
        answers: dict[int, Mapping[Metric, Values]],
        data: bytes,
    ) -> None:
        """After a general-path fetch: keep its layout for the next fetch
        of the same PMIDs if every value is fixed-size (else remember not to
        try again for a while)."""
        old = plan.fast
        if type(old) is int and old > self.planned:
            return  # not eligible lately: retry later
        fast = None
        if all(type(o) is dict for o in outcomes):
            fast = FastFetch.build(pdu.pmids, profile, self.dispatcher.index.by_pmid, answers, data, len(outcomes))
        if fast is None or (type(old) is FastFetch and old.hits == 0 and old.profile == profile):
            # not eligible, or the shape keeps changing: try again in a while
            plan.fast = self.planned + RETRY
        else:
            plan.fast = fast

    def _done(self, t0: float, nvalues: int) -> None:
        d = self.dispatcher
        d.names_changed = d.labels_changed = False  # the RESULT just built told pmcd
        dt = time.perf_counter() - t0
        st = d.stats
        st.fetches += 1
        st.fetch_values += nvalues
        st.fetch_time_total += dt
        st.fetch_time_last = dt
        st.fetch_time_max = max(st.fetch_time_max, dt)
        st.recent.append(dt)

    # ------------------------------------------------------------ encoders

    def _packed(
        self, pdu: FetchPdu, plan: _Plan, outcome: Outcome, profile: ProfilePdu
    ) -> tuple[bytes | ReplyBuffer, int] | None:
        """One table answered the whole request in one piece: encode it
        without visiting each metric, when the request is exactly its metrics
        (no repeats, no unknown PMIDs) and the profile takes every instance."""
        if type(outcome) is not PackedFetch:
            return None
        metrics = next(iter(plan.wanted.values()))[1]
        if len(metrics) != len(pdu.pmids) or tuple(outcome.metrics) != metrics:
            return None
        if not all(includes_all(profile, ind) for ind in outcome.indoms):
            return None
        cache = plan.packed
        if cache is None:
            cache = plan.packed = PackedRunCache()
        if cache.pmids != pdu.pmids:  # the table's token covers metrics, not our PMIDs
            cache.token = None
        try:
            data = encode_packed_run(
                PackedRun(pdu.pmids, outcome.vtypes, outcome.insts, outcome.blob, outcome.token),
                self.dispatcher.state_flags(),
                cache=cache,
            )
        except (ValueError, TypeError, OverflowError) as err:  # a table bug: the general path reports it per metric
            mount = next(iter(plan.wanted.values()))[0]
            self.dispatcher.problems.error(mount.label, "table_bad_packed_fetch", error=cut(str(err)))
            return None
        cache.pmids = pdu.pmids
        return data, cache.total

    def _general(
        self, pdu: FetchPdu, profile: ProfilePdu, answers: dict[int, Mapping[Metric, Values]]
    ) -> tuple[bytes, int]:
        """Each metric's value coerced and encoded on its own; the reply and
        how many values it has."""
        d = self.dispatcher
        builder = ResultBuilder()
        nvalues = 0
        by_pmid, add_values = d.index.by_pmid, self._add_values
        for p in pdu.pmids:
            found = by_pmid.get(p)
            if found is None:
                builder.add_error(p, PmErr.PMID)
                continue
            mount, metric = found
            nvalues += add_values(builder, p, mount, metric, answers[id(mount)].get(metric), profile)
        return builder.encode(d.state_flags(), cache=self._result_cache), nvalues

    def _add_values(
        self, builder: ResultBuilder, p: int, mount: Mount, metric: Metric, value: Values, profile: ProfilePdu
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
        if isinstance(value, PmdaError):  # a table's own answer, also for a NOSUPPORT metric
            builder.add_error(p, value.pm_code)
            return 0
        if metric.type == PmType.NOSUPPORT:
            builder.add_error(p, PmErr.APPVERSION)
            return 0
        if value is None:
            builder.add_error(p, 0)
            return 0
        try:
            if metric.indom is None:
                insts: Sequence[int] = (PM_IN_NULL,)
                vals: Sequence[RawValue] | PackedColumn = (value,)
            else:
                insts, vals = columns(value, metric.type)
                ind = metric.indom.id
                if not includes_all(profile, ind):
                    keep = [k for k, i in enumerate(insts) if profile.includes(ind, i)]
                    if isinstance(vals, PackedColumn):
                        size, raw = vals.size, vals.data
                        vals = PackedColumn(b"".join(raw[k * size : (k + 1) * size] for k in keep), size)
                    else:
                        vals = [vals[k] for k in keep]
                    insts = [insts[k] for k in keep]
            if isinstance(vals, PackedColumn):  # already encoded for the type (a 64-bit or floating one)
                builder.add_fixed(p, metric.type, insts, vals)
                return len(insts)
            if metric.type in _EVENT_TYPES:
                vals = event_arrays(metric.type, vals, self.dispatcher.domain)
            check_range(metric.type, vals)
            builder.add_values(p, metric.type, insts, vals)
            return len(insts)
        except (TypeError, ValueError, OverflowError, AttributeError, struct.error) as err:
            tname = mount.label
            stats = self.dispatcher.stats
            stats.table_errors[tname] = stats.table_errors.get(tname, 0) + 1
            self.dispatcher.problems.error(
                tname,
                "table_bad_value",
                metric=mount.full(metric),
                type=PmType(metric.type).name,
                error=cut(f"{type(err).__name__}: {err}"),
                code=codename(PmErr.TYPE),
            )
            builder.add_error(p, PmErr.TYPE)
            return 0

"""The table API: how users declare metrics and instance domains and serve them.

A *table* is a group of metrics mounted under one subtree of a PMDA's
namespace.  Several tables mount in one domain; each owns its clusters and
instance-domain serials (collisions are refused at start-up).

Write a table by subclassing :class:`Table`, declaring :class:`Metric` and
:class:`InDom` objects, and implementing :meth:`Table.fetch` -- one call per
FETCH for all of the table's requested metrics (bulk, never one call per
value)::

    class Counters(Table):
        colour = InDom(0, {0: "red", 1: "green"}, oneline="colours")
        hits = Metric("hits", 0, 0, PmType.U64, sem=PmSem.COUNTER, indom=colour,
                      oneline="hits per colour", writable=True)

        async def fetch(self, request):
            return {self.hits: {0: 10, 1: 20}}

Values a fetch may return, per metric:
  * a Python value (int, float, str, bytes; for an EVENT or HIGHRES_EVENT
    metric a sequence of :class:`Event` records) for a metric without an
    indom;
  * a mapping ``{inst: value}`` (or an iterable of ``(inst, value)``) for a
    metric with an indom -- the profile is applied for you;
  * :class:`Columns` (instances and values as two sequences) or
    :class:`PackedColumns` (instances and values already packed big-endian)
    for big indoms, and :class:`PackedFetch` for a whole answer in one piece;
  * ``None`` (no values), or a :class:`~pmda_py.errors.PmdaError` instance
    (an error code for that metric only).
Metrics left out of the returned mapping get no values.  How values become
PDUs is the daemon's business: nothing here is a wire-protocol type.

A table whose source changes under it overrides :meth:`Table.check`, called
before every request: it never holds a request up past the table's
``check_deadline`` and never stops the daemon (an overrun or an exception is
logged with the table's name and the request answered from the table's state
as it is); a plain ``def`` runs in a worker thread, an ``async def`` on the
event loop under the deadline.

This module never imports trio: tables are runtime-neutral (user tables
may use trio freely).
"""

from __future__ import annotations

import inspect
import json
import re
import time
from collections.abc import Awaitable, Iterable, Iterator, Mapping, Sequence
from types import MappingProxyType
from typing import Any, Callable, ClassVar, Literal, Protocol, Union

import attrs
import structlog

from pmda_py.errors import PmdaError, PmErr, UnknownInstance
from pmda_py.pmapi import (
    PM_INDOM_NULL,
    EventFlag,
    PmDesc,
    PmSem,
    PmType,
    PmUnits,
    indom,
    pmid,
)
from pmda_py.pmdacache import PmdaCache
from pmda_py.stats import PmdaStats

__all__ = [
    "CheckMode",
    "Columns",
    "Event",
    "EventFlag",
    "FetchRequest",
    "FetchResult",
    "InDom",
    "InstanceCache",
    "InstanceProfile",
    "LabelText",
    "Metric",
    "PACKED_TYPECODES",
    "PackedColumns",
    "PackedFetch",
    "Scalar",
    "StoreRequest",
    "Table",
    "TableContext",
    "Value",
    "Values",
    "units",
]

Scalar = Union[int, float, str, bytes]

#: how a table's check() runs (:attr:`Table.check_mode`)
CheckMode = Literal["thread", "async", "inline"]


@attrs.frozen
class LabelText:
    """A label set laid out already: the JSON text and its index entries
    ``(name offset, name length, flags, value offset, value length)``, sent
    as given (for tables that must reply what a C PMDA replies, byte for byte,
    e.g. the MMV drop-in running libpcp's label parser)."""

    json: bytes
    index: tuple[tuple[int, int, int, int, int], ...] = ()


@attrs.frozen
class Columns:
    """Values of a metric with an indom as two parallel sequences (fast path:
    no per-value objects; any sequence, e.g. an ``array`` or a strided
    ``memoryview``'s ``tolist()``)."""

    insts: Sequence[int]
    values: Sequence[Any]


#: the ``array`` type code of each type :class:`PackedColumns` may carry
PACKED_TYPECODES: Mapping[int, str] = MappingProxyType(
    {PmType.I64: "q", PmType.U64: "Q", PmType.DOUBLE: "d", PmType.FLOAT: "f"}
)


@attrs.frozen
class PackedColumns:
    """Values of a metric with an indom already packed (the fastest path):
    ``data`` holds one value per instance of ``insts``, in order, big-endian,
    laid out as the ``array`` type code ``typecode`` says -- ``"q"`` for an
    I64 metric, ``"Q"`` U64, ``"d"`` DOUBLE, ``"f"`` FLOAT (see
    :data:`PACKED_TYPECODES`); e.g. ``a = array("d", values); a.byteswap()``
    on a little-endian host, then ``a.tobytes()``.

    The daemon copies the bytes into the reply as they are when the client's
    profile takes every instance (and picks its instances otherwise).  A type
    code other than the metric's, or ``data`` of the wrong length, answers
    PM_ERR_TYPE for that metric with a ``table_bad_value`` log line."""

    insts: Sequence[int]
    data: bytes
    typecode: str


@attrs.frozen
class Event:
    """One record of an event metric's value (PM_TYPE_EVENT or
    HIGHRES_EVENT): the value of such a metric, per instance, is a sequence
    of records, oldest first (an empty one: no events).

    Attributes:
        sec, nsec: when it happened (seconds since the epoch, nanoseconds);
            an EVENT metric carries microseconds (``nsec // 1000``), a
            HIGHRES_EVENT one nanoseconds.  :meth:`now` stamps the present.
        params: ``(metric, value)`` pairs, in order: each a :class:`Metric`
            (its PMID and type name the parameter; declare it so clients can
            look its descriptor up) and a Python value of its type.
        flags: :class:`~pmda_py.pmapi.EventFlag` bits (POINT, START, END, ID,
            PARENT).
        missed: above 0: this record only says that many events were missed
            (PM_EVENT_FLAG_MISSED; it carries no parameters).
    """

    sec: int
    nsec: int = 0
    params: Sequence[tuple[Metric, Scalar]] = ()
    flags: int = 0
    missed: int = 0

    def __attrs_post_init__(self) -> None:
        if not 0 <= self.nsec < 1_000_000_000:
            raise ValueError(f"event nsec {self.nsec} out of range")
        if self.missed < 0 or (self.missed and self.params):
            raise ValueError("a missed-events record has a positive count and no parameters")

    @classmethod
    def now(cls, params: Sequence[tuple[Metric, Scalar]] = (), flags: int = 0) -> Event:
        """A record stamped with the present time (``time.time_ns()``)."""
        sec, nsec = divmod(time.time_ns(), 1_000_000_000)
        return cls(sec, nsec, tuple(params), int(flags))


class PackedFetch(Mapping["Metric", Any]):
    """A FETCH answer in one piece (the fast path of tables such as MMV):
    ``metrics`` exactly as the request gave them, each with an instance
    array ``insts[k]`` and type ``vtypes[k]`` (I64, U64 or DOUBLE), and
    ``blob`` holding every value, big-endian, 8 bytes each, in that order.
    ``indoms`` are the metrics' instance domains; ``token`` stays the same
    object while metrics, types and instances do.

    The daemon encodes it without looking at each metric when the client's
    profile takes every instance; otherwise it reads it as the usual
    ``{metric: PackedColumns}`` mapping."""

    __slots__ = ("_as_dict", "blob", "indoms", "insts", "metrics", "token", "vtypes")

    def __init__(
        self,
        metrics: Sequence[Metric],
        vtypes: Sequence[int],
        insts: Sequence[Any],
        blob: Any,
        indoms: frozenset[int],
        token: object,
    ) -> None:
        self.metrics, self.vtypes, self.insts, self.blob = metrics, vtypes, insts, blob
        self.indoms, self.token = indoms, token
        self._as_dict: dict[Metric, Any] | None = None

    def _mapping(self) -> dict[Metric, Any]:
        if self._as_dict is None:
            raw = memoryview(self.blob).cast("B")
            out: dict[Metric, Any] = {}
            off = 0
            for m, vtype, insts in zip(self.metrics, self.vtypes, self.insts):
                n = 8 * len(insts)
                out[m] = PackedColumns(insts, bytes(raw[off : off + n]), PACKED_TYPECODES.get(vtype, "?"))
                off += n
            self._as_dict = out
        return self._as_dict

    def __getitem__(self, m: Metric) -> Any:
        return self._mapping()[m]

    def __iter__(self) -> Iterator[Metric]:
        return iter(self._mapping())

    def __len__(self) -> int:
        return len(self.metrics)


#: one instance's value: a Python value, or an event metric's records
Value = Union[Scalar, Sequence[Event]]
Values = Union[Value, Mapping[int, Value], Iterable[tuple[int, Value]], Columns, PackedColumns, PmdaError, None]
FetchResult = Mapping["Metric", Values]

# pmdammv's rule (MMV.md §11): ASCII letters, digits, '_' and '.'; dots may
# repeat or lead (PCP clients cope), other bytes are refused
_NAME_RE = re.compile(r"^[A-Za-z0-9_.]+$")


def units(
    space: int = 0,
    time: int = 0,
    count: int = 0,
    *,
    scale_space: int = 0,
    scale_time: int = 0,
    scale_count: int = 0,
) -> PmUnits:
    """Shorthand for :class:`~pmda_py.pmapi.PmUnits` (dimensions, then scales).

    ``units(time=1, scale_time=3)`` is seconds; ``units(count=1)`` a count.
    """
    return PmUnits(
        dim_space=space,
        dim_time=time,
        dim_count=count,
        scale_space=scale_space,
        scale_time=scale_time,
        scale_count=scale_count,
    )


def _check_labels(owner: str, labels: Mapping[str, Any]) -> None:
    for k, v in labels.items():
        if not isinstance(k, str) or not re.fullmatch(r"[A-Za-z0-9_]{1,254}", k):
            raise ValueError(f"{owner}: bad label name {k!r}")
        try:
            json.dumps(v, allow_nan=False)
        except (TypeError, ValueError) as err:
            raise ValueError(f"{owner}: label {k!r} is not JSON-serialisable: {err}") from err


#: the persistent cache of an indom: libpcp_pmda's pmdaCache format (see pmda_py.pmdacache)
InstanceCache = PmdaCache


#: the labels of a metric or indom that has none: one read-only mapping shared by
#: all of them (tables make 100 000s of metrics; an empty dict each is 64 bytes)
_NO_LABELS: Mapping[Any, Any] = MappingProxyType({})


@attrs.define(eq=False)
class InDom:
    """An instance domain.

    Args:
        serial: the indom serial, unique within the PMDA's domain.
        instances: the initial ``{id: name}`` map (static indoms).
        oneline, help: help text for ``text indom``.
        labels: indom-level labels.
        instance_labels: ``{id: {name: value}}`` or a callable ``(id, name) -> dict``.
        persistent: keep name -> id assignments across restarts (dynamic
            indoms updated with :meth:`set_names`): the daemon keeps them in
            its state directory (``--state-dir``, default
            ``$PCP_VAR_DIR/config/pmda``) as ``DOMAIN.SERIAL`` in
            libpcp_pmda's pmdaCache format (:mod:`pmda_py.pmdacache`), so a
            libpcp agent of the same domain and pmda_py keep each other's
            ids; ids of names that went away are not given to another name
            until the maximum id is reached.
    """

    serial: int
    #: the ``{id: name}`` map; assigning a new one (or :meth:`set`,
    #: :meth:`set_names`) moves :attr:`version`
    instances: dict[int, str] = attrs.field(factory=dict, on_setattr=lambda ind, _a, value: ind._new_map(value))
    oneline: str | int | None = None  #: an int: the PCP error code answered instead
    help: str | int | None = None
    labels: Mapping[str, Any] = _NO_LABELS
    instance_labels: Mapping[int, Mapping[str, Any]] | Callable[[int, str], Mapping[str, Any]] = _NO_LABELS
    persistent: bool = False
    cache: PmdaCache = attrs.field(factory=PmdaCache)
    #: every entry in listing order, a repeated id too (pmdammv lists an MMV
    #: indom so); None: the ``instances`` map is the listing
    listing: tuple[tuple[int, str], ...] | None = None
    #: set by the daemon when mounted
    domain: int = -1
    #: moves whenever a new ``instances`` map is set (what the daemon's
    #: remembered INSTANCE replies are checked against)
    version: int = attrs.field(default=0, init=False)
    _by_name: dict[str, int] = attrs.field(factory=dict, init=False, repr=False)
    _refused: set[str] = attrs.field(factory=set, init=False, repr=False)

    def _new_map(self, value: dict[int, str]) -> dict[int, str]:
        self.version += 1
        return value

    def __attrs_post_init__(self) -> None:
        if not 0 <= self.serial <= 0x3FFFFF:
            raise ValueError(f"indom serial {self.serial} out of range")
        _check_labels(f"indom {self.serial}", self.labels)
        self.instances = dict(self.instances)
        self._by_name = {v: k for k, v in self.instances.items()}
        for k, v in self.listing or ():
            self._by_name.setdefault(v, k)

    @property
    def id(self) -> int:
        """The pmInDom (needs the domain: set when the table is mounted)."""
        return indom(self.domain, self.serial) if self.domain >= 0 else PM_INDOM_NULL

    def set(self, instances: Mapping[int, str]) -> None:
        """Replace the instances with an explicit ``{id: name}`` map (change
        them this way, with :meth:`set_names` or by assigning a new dict to
        ``instances``: the daemon sees a new map; a map changed in place is
        seen only when its size changes, and name lookups miss it)."""
        self.instances = dict(instances)
        self._by_name = {v: k for k, v in self.instances.items()}

    def set_names(self, names: Iterable[str]) -> dict[int, str]:
        """Replace the instances by names; ids stay stable (pmdaCache: the
        names given are active, the others inactive and their ids kept) and
        are persisted when the indom is ``persistent``.  A name the cache
        refuses (empty, or the same as another up to the first space but
        not after it) is left out and logged once."""
        self.cache.inactivate_all()
        new: dict[int, str] = {}
        for n in names:
            try:
                new[self.cache.lookup(n)] = n
            except ValueError as err:  # NameClash, CacheFull, an empty name
                if n not in self._refused:
                    self._refused.add(n)
                    structlog.get_logger("pmda_py.table").warning(
                        "instance_refused", indom=self.serial, name=n[:80], reason=str(err)
                    )
        self.set(new)
        self.cache.save()
        return new

    def name_of(self, inst: int) -> str:
        try:
            return self.instances[inst]
        except KeyError:
            raise UnknownInstance() from None

    def id_of(self, name: str) -> int:
        """Instance id by name; like pmdaInstance, an exact match first,
        then a match on the name up to the first space."""
        inst = self._by_name.get(name)
        if inst is not None:
            return inst
        for k, v in self.instances.items():
            if v.split(" ", 1)[0] == name:
                return k
        raise UnknownInstance()

    def labels_for(self, inst: int) -> Mapping[str, Any]:
        il = self.instance_labels
        if callable(il):
            return il(inst, self.instances.get(inst, ""))
        return il.get(inst, {})


#: the types a metric may have (a set once, not per Metric: tables make 100 000s of them)
_METRIC_TYPES = frozenset(PmType) - {PmType.UNKNOWN}


@attrs.frozen(eq=False, kw_only=True)
class Metric:
    """A metric declared by a table: ``Metric(name, *, cluster, item, type, ...)``.

    Args:
        name: the name below the table's mount point (``"time.user"``); the
            only positional argument.
        cluster, item: the PMID fields (the domain comes from the daemon).
        type: :class:`~pmda_py.pmapi.PmType`.
        sem: semantics (default instant).
        units: :class:`~pmda_py.pmapi.PmUnits` (see :func:`units`).
        indom: the :class:`InDom`, or None for a singular metric.
        oneline, help: help text (None: none, answered PM_ERR_TEXT).
        labels: item-level labels.
        writable: whether pmstore may change it (else PM_ERR_PERMISSION).
        min, max: range checked before :meth:`Table.store` (PM_ERR_BADSTORE).
    """

    name: str = attrs.field(kw_only=False)
    cluster: int
    item: int
    type: int
    sem: int = PmSem.INSTANT
    units: PmUnits = attrs.field(factory=PmUnits)
    indom: InDom | None = None
    oneline: str | int | None = None  #: None: no text (PM_ERR_TEXT); "" is an empty text; int: that error
    help: str | int | None = None
    labels: Mapping[str, Any] = _NO_LABELS
    writable: bool = False
    min: float | None = None
    max: float | None = None
    keep_sem: bool = False  #: NOSUPPORT still reports ``sem`` (pmdammv does; else 0)

    def __attrs_post_init__(self) -> None:
        if not _NAME_RE.match(self.name) or (self.name.endswith(".") and self.name.strip(".") == ""):
            raise ValueError(f"bad metric name {self.name!r}")
        if not 0 <= self.cluster <= 0xFFF or not 0 <= self.item <= 0x3FF:
            raise ValueError(f"{self.name}: cluster {self.cluster} / item {self.item} out of range")
        if self.type not in _METRIC_TYPES:
            raise ValueError(f"{self.name}: bad type {self.type}")
        _check_labels(self.name, self.labels)

    def pmid(self, domain: int) -> int:
        return pmid(domain, self.cluster, self.item)

    def desc(self, domain: int) -> PmDesc:
        return PmDesc(
            pmid=self.pmid(domain),
            type=self.type,
            indom=self.indom.id if self.indom is not None else PM_INDOM_NULL,
            sem=self.sem if self.type != PmType.NOSUPPORT or self.keep_sem else 0,
            units=self.units,
        )


class InstanceProfile(Protocol):
    """Which instances a client wants (what pmcd forwards of its
    ``pmAddProfile``/``pmDelProfile`` calls): all of an indom's by default."""

    def includes(self, indom: int, inst: int) -> bool:
        """Whether instance ``inst`` of indom ``indom`` (a pmInDom) is wanted."""
        ...


@attrs.frozen
class FetchRequest:
    """What :meth:`Table.fetch` is asked for.

    Attributes:
        metrics: the requested metrics of this table, each once, in request order.
        profile: the client's instance profile (use :meth:`wanted`).
        context: the client context (pmcd's slot number, the PDU ``from``).
        attributes: the client's attributes (e.g. ``{"userid": "1000"}``).
    """

    metrics: tuple[Metric, ...]
    profile: InstanceProfile
    context: int = 0
    attributes: Mapping[str, str] = attrs.field(factory=dict)

    def wanted(self, indom: InDom, inst: int) -> bool:
        """Whether the client's profile includes instance ``inst`` of ``indom``."""
        return self.profile.includes(indom.id, inst)

    def instances(self, indom: InDom) -> list[tuple[int, str]]:
        """The instances of ``indom`` the profile includes."""
        return [(i, n) for i, n in indom.instances.items() if self.profile.includes(indom.id, i)]


@attrs.frozen
class StoreRequest:
    """One metric's share of a store: validated values by instance."""

    metric: Metric
    values: Mapping[int, Scalar]
    context: int = 0
    attributes: Mapping[str, str] = attrs.field(factory=dict)


def _read_only(options: Mapping[str, str]) -> Mapping[str, str]:
    return MappingProxyType(dict(options))


def _names(names: Iterable[str]) -> tuple[str, ...]:
    return tuple(names)


@attrs.frozen(kw_only=True)
class TableContext:
    """What the daemon tells a table when it starts (:meth:`Table.startup`).

    Attributes:
        domain: the PMDA's domain number.
        mount: where the table's names are mounted (``"pypmda.queues"``; ""
            for the root).
        name: the table's name in the configuration (``[table NAME]``).
        pmda: the PMDA's name (``pypmda``).
        options: the table's options from the config file (its section's
            keys other than ``table``, ``mount`` and ``deadline``).
        state_dir: where the PMDA keeps state across restarts (persistent
            instance ids), or None when it keeps none.
        log: a structlog logger bound with ``table=name``.
        stats: the PMDA's own counters (requests, fetch times, failures).
        tables: the names of every table mounted in this PMDA, in order.
    """

    domain: int
    mount: str
    name: str
    pmda: str = "pmda_py"
    options: Mapping[str, str] = attrs.field(factory=dict, converter=_read_only)
    state_dir: str | None = None
    log: Any = attrs.field(factory=lambda: structlog.get_logger("pmda_py.table"))
    stats: PmdaStats = attrs.field(factory=PmdaStats)
    tables: tuple[str, ...] = attrs.field(default=(), converter=_names)


class Table:
    """Base class of every table.

    Class attributes a subclass sets (or sets on the instance in ``__init__``):
        name: the default mount point (``--table NAME`` mounts it there).
        domain_labels: labels of the table as a whole: given at its clusters'
            level (the domain level is the agent's, ``{"agent": NAME}``), or
            at the domain level when it is the only table mounted.
        cluster_labels: ``{cluster: labels}``.
        deadline: seconds a fetch/store/instances call may take before its
            metrics are answered PM_ERR_AGAIN (pmcd kills agents at 5 s).
        check_deadline: seconds a request waits for :meth:`check`.
        accepts_options: the constructor takes the table's config-file
            options as keyword arguments (``Table(**options)``); otherwise it
            is called with none (the options are in the startup context).
        dynamic_names: the table's names below its mount point appear at
            run time (its metrics() changes): Install writes the mount as a
            dynamic PMNS subtree (``DOMAIN:*:*``) and pmcd asks the PMDA.

    :class:`Metric` and :class:`InDom` objects found as class attributes
    are collected automatically; dynamic tables override :meth:`metrics` and
    :meth:`indoms` and bump :attr:`generation` when they change.

    DESC, TEXT and LABEL replies (and INSTANCE replies of an indom with no
    :meth:`refresh_instances`) are remembered by their request until
    :attr:`generation` moves: a table that changes an InDom's help or
    labels, or its ``cluster_labels``/``domain_labels``, bumps it too.
    Labels computed by :meth:`label_items` are asked for every time.
    """

    name: ClassVar[str] = ""
    domain_labels: Mapping[str, Any] = {}
    cluster_labels: Mapping[int, Mapping[str, Any]] = {}
    deadline: float = 2.0
    check_deadline: float = 0.25
    accepts_options: ClassVar[bool] = False
    dynamic_names: ClassVar[bool] = False
    #: incremented by dynamic tables whenever metrics() or indoms() change
    generation: int = 0
    #: how :meth:`check` runs (see there); None: from how it is written
    check_mode: ClassVar[CheckMode | None] = None

    def metrics(self) -> Sequence[Metric]:
        """The table's metrics (default: every Metric class/instance attribute)."""
        return _collect(self, Metric)

    def indoms(self) -> Sequence[InDom]:
        """The table's instance domains (default: every InDom attribute and
        every indom of a metric)."""
        found = {id(x): x for x in _collect(self, InDom)}
        for m in self.metrics():
            if m.indom is not None:
                found.setdefault(id(m.indom), m.indom)
        return list(found.values())

    def clusters(self) -> set[int]:
        """Clusters this table owns (default: those of its metrics)."""
        return {m.cluster for m in self.metrics()}

    async def startup(self, context: TableContext) -> None:
        """Called once, under the table's deadline, before the daemon reports
        ready; ``context`` says where and how the table is mounted."""

    async def fetch(self, request: FetchRequest) -> FetchResult:
        """Return values for ``request.metrics`` (see the module docstring)."""
        raise PmdaError(code=PmErr.NYI)

    async def refresh_instances(self, indom: InDom) -> None:
        """Called before an INSTANCE or instance-labels request for ``indom``."""

    async def store(self, request: StoreRequest) -> None:
        """Apply a validated store; raise a PmdaError to refuse it."""
        raise PmdaError(code=PmErr.PERMISSION)

    def check(self) -> Awaitable[None] | None:
        """Called before every request the daemon answers, when a table
        overrides it: notice cheaply whether the table's source changed (a
        stat, not a scan); a dynamic table may rescan here and bump
        :attr:`generation`.  Write it ``async def`` or plain ``def``; how it
        runs is :attr:`check_mode` (declared, never guessed):

        * ``async def check`` (``check_mode`` None or ``"async"``): runs in
          the daemon's event loop, so keep it short and await anything slow
          (``trio.to_thread.run_sync`` for blocking work); past
          :attr:`check_deadline` it is cancelled at its next await, and the
          table is not checked again for a second;
        * plain ``def check`` with ``check_mode = "inline"``: called in the
          event loop, with no deadline to arm (the cheapest kind, for a
          stat: it must not block, nothing can cut it short);
        * plain ``def check`` (``check_mode`` None or ``"thread"``): runs in
          a worker thread (about 0.1 ms a
          request), so a blocking one stalls nothing; past the deadline the
          request is answered without waiting for it, it goes on in its
          thread, and no new check of the table starts until it has ended
          (its changes then land while requests are served: swap new state
          in with single assignments);
        * otherwise a request is never held up for more than
          :attr:`check_deadline` seconds, and the daemon never stops: an
          overrun is logged as ``table_timeout`` (``call="check"``), an
          exception as ``table_exception`` (one a background check raised, at
          the next request); either way the request is answered with the
          table's state as it is, and the next check runs as usual.
        """
        return None

    def label_items(self, level: int, subject: Any) -> list[tuple[str, str, int]] | LabelText | None:
        """Labels as ``(name, JSON value text, flags)`` items for ``level``
        (PM_LABEL_CLUSTER: cluster number; ITEM: the Metric; INDOM: the InDom;
        INSTANCES: ``(InDom, inst)``), or None to use the dict labels.  For
        tables that carry labels already in JSON (MMV v3 files).  A
        :class:`LabelText` is sent as is (one set, even with no labels)."""
        return None

    async def wait_ready(self) -> None:
        """Called after the table raised :class:`~pmda_py.errors.PmdaNotReady`;
        return when it can answer again (default: at once)."""

    def end_context(self, context: int) -> None:
        """A client context closed (pmcd's NOTCONN)."""

    async def shutdown(self) -> None:
        """Called once when the daemon exits."""


def check_mode_of(table: type[Table]) -> CheckMode:
    """How ``table``'s :meth:`~Table.check` runs: its declared
    :attr:`~Table.check_mode`, else ``"async"`` for an ``async def`` and
    ``"thread"`` for a plain one.  Raises TypeError when the declaration
    does not fit the method (``"async"`` for a plain def, ``"thread"`` or
    ``"inline"`` for an async def)."""
    is_async = inspect.iscoroutinefunction(table.check)
    declared = table.check_mode
    if declared is None:
        return "async" if is_async else "thread"
    if declared not in ("thread", "async", "inline"):
        raise TypeError(f"{table.__name__}.check_mode {declared!r}: not 'thread', 'async', 'inline' or None")
    if is_async != (declared == "async"):
        kind = "an async def" if is_async else "a plain def"
        raise TypeError(f"{table.__name__}.check_mode {declared!r} does not fit its check(), {kind}")
    return declared


def _collect(obj: object, kind: type[Any]) -> list[Any]:
    seen: dict[int, Any] = {}
    for klass in reversed(type(obj).__mro__):
        for value in vars(klass).values():
            if isinstance(value, kind):
                seen[id(value)] = value
    for value in vars(obj).values() if hasattr(obj, "__dict__") else ():
        if isinstance(value, kind):
            seen[id(value)] = value
    return list(seen.values())

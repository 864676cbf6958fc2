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
from collections.abc import Awaitable, Mapping, Sequence
from typing import ClassVar, Literal, TypeVar, Union

from pmda_py.errors import PmdaError, PmErr
from pmda_py.table.indom import InDom
from pmda_py.table.metric import Metric
from pmda_py.table.requests import FetchRequest, StoreRequest, TableContext
from pmda_py.table.values import FetchResult, LabelText

__all__ = ["CheckMode", "LabelSubject", "Table", "check_mode_of"]

_C = TypeVar("_C")

#: what :meth:`Table.label_items` is asked about, by level: a cluster
#: number, a Metric (ITEM), an InDom (INDOM), or ``(InDom, instance id)``
LabelSubject = Union[int, Metric, InDom, tuple[InDom, int]]

#: how a table's check() runs (:attr:`Table.check_mode`)
CheckMode = Literal["thread", "async", "inline"]


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
        sees_every_fetch: :meth:`fetch` is called for every FETCH, also one
            naming none of the table's metrics (``request.metrics`` empty;
            ``request.pmids`` says what was asked), e.g. to run hooks that
            PCP's agents run per FETCH whatever it names.

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
    domain_labels: Mapping[str, object] = {}
    cluster_labels: Mapping[int, Mapping[str, object]] = {}
    deadline: float = 2.0
    check_deadline: float = 0.25
    accepts_options: ClassVar[bool] = False
    dynamic_names: ClassVar[bool] = False
    sees_every_fetch: ClassVar[bool] = False
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
        """Called once, under the table's deadline (at least 2 s), before the
        daemon reports ready; ``context`` says where and how the table is
        mounted.  One that raises or overruns is logged and said in one line,
        and the table serves what it can."""

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
          table's state as it is, and the next check runs as the kinds
          above say (an overrunning ``async def check`` after a second, a
          thread's once it has ended; an exception costs no pause).
        """
        return None

    def label_items(self, level: int, subject: LabelSubject) -> list[tuple[str, str, int]] | LabelText | None:
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


def _collect(obj: object, kind: type[_C]) -> list[_C]:
    seen: dict[int, _C] = {}
    for klass in reversed(type(obj).__mro__):
        for value in vars(klass).values():
            if isinstance(value, kind):
                seen[id(value)] = value
    for value in vars(obj).values() if hasattr(obj, "__dict__") else ():
        if isinstance(value, kind):
            seen[id(value)] = value
    return list(seen.values())

"""What a table is asked and told: a fetch, a store, its mount."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from types import MappingProxyType
from typing import Protocol

import attrs
import structlog
from structlog.typing import FilteringBoundLogger

from pmda_py.stats import PmdaStats
from pmda_py.table.indom import InDom
from pmda_py.table.metric import Metric
from pmda_py.table.values import Scalar

__all__ = ["FetchRequest", "InstanceProfile", "StoreRequest", "TableContext"]


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
        pmids: every PMID of the FETCH as the client sent it (repeats, other
            tables' and unknown PMIDs included; empty when the request did
            not come from a FETCH PDU).
    """

    metrics: tuple[Metric, ...]
    profile: InstanceProfile
    context: int = 0
    attributes: Mapping[str, str] = attrs.field(factory=dict)
    pmids: tuple[int, ...] = ()

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
    log: FilteringBoundLogger = attrs.field(factory=lambda: structlog.get_logger("pmda_py.table"))
    stats: PmdaStats = attrs.field(factory=PmdaStats)
    tables: tuple[str, ...] = attrs.field(default=(), converter=_names)

"""A metric as a table declares it, and :func:`units`."""

from __future__ import annotations

import re

import attrs

from pmda_py.pmapi import PM_INDOM_NULL, PmDesc, PmSem, PmType, PmUnits, pmid
from pmda_py.table.indom import NO_LABELS, InDom
from pmda_py.table.values import Labels, check_labels

__all__ = ["METRIC_TYPES", "Metric", "units"]

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


#: the types a metric may have (a set once, not per Metric: tables make 100 000s of them)
METRIC_TYPES = frozenset(PmType) - {PmType.UNKNOWN}


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
    labels: Labels = NO_LABELS
    writable: bool = False
    min: float | None = None
    max: float | None = None
    keep_sem: bool = False  #: NOSUPPORT still reports ``sem`` (pmdammv does; else 0)

    def __attrs_post_init__(self) -> None:
        if not _NAME_RE.match(self.name) or (self.name.endswith(".") and self.name.strip(".") == ""):
            raise ValueError(f"bad metric name {self.name!r}")
        if not 0 <= self.cluster <= 0xFFF or not 0 <= self.item <= 0x3FF:
            raise ValueError(f"{self.name}: cluster {self.cluster} / item {self.item} out of range")
        if self.type not in METRIC_TYPES:
            raise ValueError(f"{self.name}: bad type {self.type}")
        check_labels(self.name, self.labels)

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

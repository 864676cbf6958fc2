"""What one scan of the MMV directory makes for the table: the metrics and
indoms of the table API built from pmdammv's export (the previous scan's
objects reused where nothing a client sees changed), the packed fetch path
decided per metric, and the plan of a request answered in one piece."""

from __future__ import annotations

from array import array
from collections.abc import Mapping, Sequence
from typing import Union

import attrs
import structlog

from pmda_py.errors import PmErr
from pmda_py.mmv.model import Export, ExportMetric
from pmda_py.mmv.scanner import Loaded
from pmda_py.pmapi import TYPES, PmType, PmUnits
from pmda_py.table import InDom, Metric

__all__ = ["PackedPlan", "PackedSlots", "ScanState", "derive"]

log = structlog.get_logger("pmda_py.mmv")

_Text = Union[str, int, None]  #: help text, a PM_ERR code, or none
#: what a metric is made of (its indom by identity): equal keys, the same Metric again
_ReuseKey = tuple[str, int, int, int, int, PmUnits, int, _Text, _Text]


@attrs.frozen
class PackedSlots:
    """A metric on the packed path: its values are the value slots
    ``first`` to ``first + count`` of its file, for the instances ``insts``
    (32-bit words), 64-bit values of the ``array`` type code ``typecode``."""

    first: int
    count: int
    insts: array[int]
    typecode: str


@attrs.define(eq=False)
class ScanState:
    """One scan's result, built in the scanner thread, swapped in whole."""

    export: Export
    files: dict[str, Loaded]
    dir_state: tuple[int, int]
    indoms: dict[int, InDom] = attrs.field(factory=dict)
    metrics: list[Metric] = attrs.field(factory=list)
    by_metric: dict[int, ExportMetric] = attrs.field(factory=dict)
    #: for each metric over an indom whose values are not in its order: the
    #: instance ids it is fetched along (pmdammv's order: the indom's
    #: listing, else its instances), only those it has values for, each as
    #: often as the order lists it (a metric not here is in order)
    fetch_order: dict[int, list[int]] = attrs.field(factory=dict)
    packed: dict[int, PackedSlots] = attrs.field(factory=dict)
    #: each metric by what it was made of (see derive)
    reuse: dict[_ReuseKey, Metric] = attrs.field(factory=dict)
    seconds: float = 0.0
    read_bytes: int = 0


@attrs.frozen(eq=False)
class PackedPlan:
    """What a request shape needs for the one-piece answer
    (``file`` None: the shape cannot take that path)."""

    metrics: Sequence[Metric]
    generation: int
    file: str | None = None
    values_offset: int = 0
    runs: tuple[tuple[int, int], ...] = ()  # (first slot, count), slots consecutive within a run
    vtypes: tuple[int, ...] = ()
    insts: tuple[array[int], ...] = ()
    indoms: frozenset[int] = frozenset()

    @classmethod
    def make(
        cls,
        metrics: Sequence[Metric],
        by_metric: Mapping[int, ExportMetric],
        packed: Mapping[int, PackedSlots],
        generation: int,
    ) -> PackedPlan:
        files: set[str] = set()
        runs: list[tuple[int, int]] = []
        vtypes: list[int] = []
        insts: list[array[int]] = []
        indoms: set[int] = set()
        offset = 0
        for m in metrics:
            em, fast = by_metric.get(id(m)), packed.get(id(m))
            if em is None or fast is None or m.indom is None:
                return cls(metrics, generation)
            files.add(em.file)
            offset = em.values_offset
            first, n = fast.first, fast.count
            if runs and runs[-1][0] + runs[-1][1] == first:
                runs[-1] = (runs[-1][0], runs[-1][1] + n)
            else:
                runs.append((first, n))
            vtypes.append(em.type)
            insts.append(fast.insts)
            indoms.add(m.indom.id)
        if len(files) != 1 or offset < 0:
            return cls(metrics, generation)
        return cls(
            metrics, generation, files.pop(), offset, tuple(runs), tuple(vtypes), tuple(insts), frozenset(indoms)
        )


def indom_text(serial: int, export: Export, pcp7: bool) -> tuple[_Text, _Text]:
    """pmdammv's indom help: 6.x answers none (PM_ERR_TEXT); 7.x looks
    the indom's 22-bit PCP serial up among the serials as the files wrote
    them (mmv_lookup_stat_indom), so only a file serial equal to it finds
    text, and no match is PM_ERR_INDOM."""
    if not pcp7:
        return None, None
    for ei in export.indoms.values():
        if ei.file_serial == serial:
            return ei.oneline, ei.help
    return PmErr.INDOM, PmErr.INDOM


def derive(
    export: Export, files: dict[str, Loaded], dir_state: tuple[int, int], prev: ScanState | None, pcp7: bool
) -> ScanState:
    """The table's metrics and indoms for ``export``.  A metric or indom
    equal to one of the previous scan's (every field a client sees, its
    indom the same object) is that object again: the dispatcher's index
    update then costs the names of the files that changed, not of every
    file (a new object is a name that went and came)."""
    st = ScanState(export, files, dir_state)
    old_indoms = prev.indoms if prev is not None else {}
    _derive_indoms(st, export, old_indoms, pcp7)
    old_metrics = prev.reuse if prev is not None else {}
    orders: dict[int, _OrderIndex] = {}  # made once per indom: a metric then costs its own values, not the indom
    for em in export.metrics:
        ind = None
        if em.indom is not None:  # a missing indom still gets one (no instances)
            ind = st.indoms.get(em.indom)
            if ind is None:
                was = old_indoms.get(em.indom)
                if was is None or was.instances or was.listing is not None or was.oneline or was.help:
                    was = InDom(em.indom)
                ind = st.indoms[em.indom] = was
        key = (em.name, em.cluster, em.item, em.type, em.sem, em.units, id(ind), em.oneline, em.help)
        m: Metric | None = None if key in st.reuse else old_metrics.get(key)
        if m is None or m.indom is not ind:
            m = _metric(em, ind)
            if m is None:
                continue
        st.reuse[key] = m
        st.metrics.append(m)
        st.by_metric[id(m)] = em
        if ind is not None:
            _plan_fetch(st, m, em, ind, orders)
    return st


def _derive_indoms(st: ScanState, export: Export, old_indoms: Mapping[int, InDom], pcp7: bool) -> None:
    for serial, ei in export.indoms.items():
        one, hlp = indom_text(serial, export, pcp7)
        listing = tuple(ei.listing) if ei.listing is not None else None  # a repeated id: pmdammv lists each
        was = old_indoms.get(serial)
        if (
            was is not None
            and was.instances == ei.instances
            and was.listing == listing
            and was.oneline == one
            and was.help == hlp
        ):
            st.indoms[serial] = was
        else:
            st.indoms[serial] = InDom(serial, dict(ei.instances), oneline=one, help=hlp, listing=listing)


def _metric(em: ExportMetric, ind: InDom | None) -> Metric | None:
    try:
        return Metric(
            em.name,
            cluster=em.cluster,
            item=em.item,
            type=em.type,
            sem=em.sem,
            units=em.units,
            indom=ind,
            oneline=em.oneline,  # an int: pmdammv's error (PM_ERR_PMID for NOSUPPORT)
            help=em.help,
            keep_sem=True,  # a NOSUPPORT metric keeps the file's semantics, as in pmdammv
        )
    except ValueError as err:
        log.warning("mmv_metric_refused", file=em.file, metric=em.name, error=str(err))
        return None


#: an indom's fetch order (pmdammv's: its listing, else its instances), and where each id is in it
_OrderIndex = tuple[list[int], dict[int, list[int]]]


def _plan_fetch(st: ScanState, m: Metric, em: ExportMetric, ind: InDom, orders: dict[int, _OrderIndex]) -> None:
    """Whether the metric's values come in instance order, and in one
    strided run of 64-bit values (the packed path, decided once per scan)."""
    # an indom listing an id twice: pmdammv fetches along the listing, each
    # entry getting its id's (first) value, so the repeated one comes twice
    index = orders.get(id(ind))
    if index is None:
        ids = list(ind.instances) if ind.listing is None else [i for i, _ in ind.listing]
        where: dict[int, list[int]] = {}
        for p, i in enumerate(ids):
            where.setdefault(i, []).append(p)
        index = orders[id(ind)] = (ids, where)
    ids, where = index
    present = {i for i, _ in em.slots if i is not None}
    order = [ids[p] for p in sorted(p for i in present for p in where.get(i, ()))]
    ordered = ind.listing is None and em.insts == order
    if not ordered:
        st.fetch_order[id(m)] = order
    if (
        ordered
        and em.strided is not None
        and not (em.sentinel or em.elapsed)
        and em.type in (PmType.I64, PmType.U64, PmType.DOUBLE)
    ):
        first, count = em.strided
        st.packed[id(m)] = PackedSlots(first, count, em.insts_u32, TYPES[PmType(em.type)].code)

"""The OpenMetrics table's answers: a scrape's digest swapped into the
daemon's mirror of the source (:func:`swap_values`), and a big repeated
FETCH answered in one packed piece (:class:`PackedPlans`), sans-IO."""

from __future__ import annotations

import sys
from array import array
from collections.abc import Callable

import attrs

from pmda_py.openmetrics.digest import PACK_CODES
from pmda_py.openmetrics.model import MetricState, SourceModel
from pmda_py.openmetrics.records import Digest, Value
from pmda_py.openmetrics.sources import Source
from pmda_py.pmapi import PM_IN_NULL
from pmda_py.table import Metric, PackedFetch

__all__ = ["Cached", "PackedPlans", "swap_values"]

_LITTLE = sys.byteorder == "little"

#: packed-fetch plans kept (a sweep of several fetches keeps one each); the oldest goes first
MAX_PLANS = 64


class Cached:
    """A metric's answer from the last good parse: its instances (an
    ``array('I')``, ascending) and values (packed big-endian 8-byte words
    for I64, U64 and DOUBLE, else a list); lists made on demand."""

    __slots__ = ("_insts", "blob", "iarr", "image", "listed", "mtype")

    def __init__(
        self, mtype: int, image: bytes, iarr: array[int], blob: bytes | None, values: list[Value] | None
    ) -> None:
        self.mtype, self.image, self.iarr, self.blob = mtype, image, iarr, blob
        #: the values as a list (made from ``blob`` on demand)
        self.listed = values
        self._insts: list[int] | None = None

    @property
    def insts(self) -> list[int]:
        if self._insts is None:
            self._insts = [PM_IN_NULL if i == 0xFFFFFFFF else i for i in self.iarr]
        return self._insts

    @property
    def values(self) -> list[Value]:
        if self.listed is None:
            arr = array(PACK_CODES[self.mtype])
            arr.frombytes(self.blob or b"")
            if _LITTLE:
                arr.byteswap()
            values: list[Value] = list(arr.tolist())
            self.listed = values
            return values
        return self.listed


def swap_values(model: SourceModel, result: Digest) -> bool:
    """The digest's values become the answers of ``model``'s metrics (a
    metric without values has none); whether any metric's instances changed."""
    shape = False
    seen = set()
    by_item = model.by_item
    for item, image, blob, vals in zip(result.items, result.images, result.blobs, result.values):
        ms = by_item.get(item)
        if ms is None:  # (a digest without the metadata of a new metric: a scraper bug)
            continue
        seen.add(item)
        old = ms.cache
        if old is not None and old.image == image:
            # the same instances: the same object, new values (the packed plans check the instance
            # array by identity; and no new object for the cyclic collector to walk, 100 000 a round)
            old.blob, old.listed = blob, vals
        else:
            iarr = array("I")
            iarr.frombytes(image)
            shape = True
            ms.cache = Cached(ms.type, image, iarr, blob, vals)
    if len(seen) != len(model.metrics):
        for ms in model.metrics.values():
            if ms.cache is not None and ms.item not in seen:
                ms.cache = None
                shape = True
    return shape


#: the source and metric state behind each exported metric, by ``id(metric)``
ByMetric = dict[int, tuple[Source, MetricState]]


@attrs.define(eq=False)
class _Plan:
    """How a repeated big fetch is answered in one piece."""

    key: tuple[int, int]  #: the table's (shape, generation) it was made for
    token: object | None  #: None: not every metric can be packed
    parts: list[MetricState] = attrs.field(factory=list)
    sources: list[Source] = attrs.field(factory=list)
    vtypes: list[int] = attrs.field(factory=list)
    insts: list[array[int]] = attrs.field(factory=list)
    indoms: frozenset[int] = frozenset()
    versions: list[int] = attrs.field(factory=list)  #: the sources' versions ``blob`` was joined at
    blob: bytes = b""

    @classmethod
    def make(cls, metrics: tuple[Metric, ...], key: tuple[int, int], by_metric: ByMetric) -> _Plan:
        plan = cls(key, object())
        sources: dict[int, Source] = {}
        indoms: set[int] = set()
        for m in metrics:
            found = by_metric.get(id(m))
            cached = found[1].cache if found is not None else None
            if found is None or cached is None or cached.blob is None:
                return cls(key, None)
            sources[id(found[0])] = found[0]
            plan.parts.append(found[1])
            plan.vtypes.append(m.type)
            plan.insts.append(cached.iarr)
            if m.indom is not None:
                indoms.add(m.indom.id)
        plan.sources = list(sources.values())
        plan.indoms = frozenset(indoms)
        plan.versions = [-1]
        return plan


class PackedPlans:
    """Packed-fetch plans by the request's metrics."""

    def __init__(self) -> None:
        self._plans: dict[tuple[Metric, ...], _Plan] = {}

    def answer(
        self, metrics: tuple[Metric, ...], key: tuple[int, int], by_metric: ByMetric, fresh: Callable[[Source], bool]
    ) -> PackedFetch | None:
        """Every value in one big-endian blob (the dispatcher's fast path), when
        every metric asked for is a source's numeric metric with ``fresh``
        values.  The blob is joined again only when one of its sources was
        scraped since; ``key`` changes when instances or names do."""
        plan = self._plans.get(metrics)
        if plan is None or plan.key != key:
            if len(self._plans) >= MAX_PLANS:
                del self._plans[next(iter(self._plans))]
            plan = self._plans[metrics] = _Plan.make(metrics, key, by_metric)
        if plan.token is None:
            return None
        versions = []
        for src in plan.sources:
            if not fresh(src):
                return None
            versions.append(src.version)
        if versions != plan.versions:
            blobs = []
            for ms, ins in zip(plan.parts, plan.insts):
                cached = ms.cache
                if cached is None or cached.blob is None or cached.iarr is not ins:  # instances changed since
                    return None
                blobs.append(cached.blob)
            plan.blob, plan.versions = b"".join(blobs), versions
        return PackedFetch(metrics, plan.vtypes, plan.insts, plan.blob, plan.indoms, plan.token)

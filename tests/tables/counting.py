"""Tables whose every fetch answers new values, large enough for a shared
reply (a pipe agent splices it): 32 U64 metrics over 256 instances, a
RESULT of about 160 KB.  Fetch ``n`` (from 1) answers
``value(n, metric, inst)`` for every value, so a reply that shows another
fetch's values (a buffer written again while its pages were still in the
pipe) is seen.  ``counting`` answers ``PackedColumns``, ``countingarr``
``Columns`` of an ``array("Q")``.  Cluster 4090."""

from __future__ import annotations

import sys
from array import array

from pmda_py.pmapi import PmType
from pmda_py.table import Columns, FetchRequest, FetchResult, InDom, Metric, PackedColumns, Table

__all__ = ["INSTS", "METRICS", "CountingArray", "CountingPacked", "value"]

METRICS = 32
INSTS = 256


def value(fetch: int, metric: int, inst: int) -> int:
    """What fetch ``fetch`` answers for ``metric``'s instance ``inst``."""
    return (fetch << 32) | (metric << 16) | inst


class CountingPacked(Table):
    name = "counting"

    def __init__(self) -> None:
        self.indom = InDom(4090, {i: f"i{i}" for i in range(INSTS)}, oneline="instances")
        self._metrics = [
            Metric(f"m{k}", cluster=4090, item=k, type=PmType.U64, indom=self.indom, oneline="counts fetches")
            for k in range(METRICS)
        ]
        self._insts = array("I", range(INSTS))
        self.fetches = 0

    def metrics(self) -> list[Metric]:
        return self._metrics

    def indoms(self) -> list[InDom]:
        return [self.indom]

    def values(self, metric: int) -> array[int]:
        return array("Q", (value(self.fetches, metric, i) for i in range(INSTS)))

    async def fetch(self, request: FetchRequest) -> FetchResult:
        self.fetches += 1
        out: dict[Metric, PackedColumns] = {}
        for k, m in enumerate(self._metrics):
            vals = self.values(k)
            if sys.byteorder == "little":
                vals.byteswap()
            out[m] = PackedColumns(self._insts, vals.tobytes(), "Q")
        return out


class CountingArray(CountingPacked):
    name = "countingarr"

    async def fetch(self, request: FetchRequest) -> FetchResult:
        self.fetches += 1
        return {m: Columns(self._insts, self.values(k)) for k, m in enumerate(self._metrics)}

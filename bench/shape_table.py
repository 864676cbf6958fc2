"""Our side of bench/fetch_shapes.py: a table of the shape $BENCH_SHAPE,
the same shape as pcp_pmda_shapes.python, its values returned in the form
$BENCH_FORM names (each of the table API's):

* ``dict`` (default): ``{metric: value}`` and ``{metric: {inst: value}}``;
* ``list``: ``{metric: Columns(insts, [values])}``;
* ``array``: ``{metric: Columns(insts, array("Q", values))}`` (the metric's type);
* ``packed``: ``{metric: PackedColumns(insts, big-endian bytes, "Q")}``;
* ``fetch``: one ``PackedFetch`` for the whole answer (every value, big-endian,
  in one blob), the form the MMV table answers in.

$BENCH_BASE (default 0) moves its clusters (BASE, BASE+1) and its indom's
serial (BASE) out of the way of another table mounted beside it.

Shapes: ``MxN`` (M U64 metrics over an indom of N instances, N=0: singular)
or ``S+MxN`` (S singular metrics plus M metrics over N instances).
"""

from __future__ import annotations

import os
import sys
from array import array
from typing import Any

from pmda_py.pmapi import PM_IN_NULL, PmSem, PmType
from pmda_py.table import Columns, FetchRequest, FetchResult, InDom, Metric, PackedColumns, PackedFetch, Table, units

FORMS = ("dict", "list", "array", "packed", "fetch")


def parse(shape: str) -> tuple[int, int, int]:
    """(singular metrics, indom metrics, instances) of a shape."""
    singular = 0
    if "+" in shape:
        head, shape = shape.split("+", 1)
        singular = int(head)
    m, n = (int(x) for x in shape.split("x"))
    if n == 0:
        return singular + m, 0, 0
    return singular, m, n


class ShapeTable(Table):
    name = "bench"

    def __init__(self) -> None:
        singular, multi, n = parse(os.environ.get("BENCH_SHAPE", "100x10"))
        base = int(os.environ.get("BENCH_BASE", "0"))
        self.indom = InDom(base, {i: f"i{i}" for i in range(n)}, oneline="bench instances")
        ms = [
            Metric(
                f"s{k}",
                cluster=base,
                item=k,
                type=PmType.U64,
                sem=PmSem.COUNTER,
                units=units(count=1),
                oneline="a singular metric",
            )
            for k in range(singular)
        ]
        ms += [
            Metric(
                f"m{k}",
                cluster=base + 1,
                item=k,
                type=PmType.U64,
                sem=PmSem.COUNTER,
                units=units(count=1),
                indom=self.indom,
                oneline="a metric with instances",
            )
            for k in range(multi)
        ]
        self._metrics = ms
        self._answer: dict[Metric, Any] = {}
        form = os.environ.get("BENCH_FORM", "dict")
        if form not in FORMS:
            raise ValueError(f"BENCH_FORM={form!r}: one of {', '.join(FORMS)}")
        insts = array("I", range(n))
        self._form = form
        self._packed: dict[tuple[Metric, ...], PackedFetch] = {}
        for m in ms:  # the values pcp_pmda_shapes.python answers
            if m.indom is None:
                self._answer[m] = m.item * 3
                continue
            values = [i * 3 + m.item for i in range(n)]
            if form == "dict":
                self._answer[m] = dict(zip(range(n), values))
            elif form == "list":
                self._answer[m] = Columns(list(range(n)), values)
            elif form == "array":
                self._answer[m] = Columns(insts, array("Q", values))
            elif form == "fetch":
                self._answer[m] = Columns(insts, array("Q", values))  # packed per request, in fetch()
            else:
                packed = array("Q", values)
                if sys.byteorder == "little":
                    packed.byteswap()
                self._answer[m] = PackedColumns(insts, packed.tobytes(), "Q")

    def metrics(self) -> list[Metric]:
        return self._metrics

    def indoms(self) -> list[InDom]:
        return [self.indom]

    async def fetch(self, request: FetchRequest) -> FetchResult:
        if self._form == "fetch":
            return self._packed.get(request.metrics) or self._pack(request.metrics)
        return self._answer

    def _pack(self, metrics: tuple[Metric, ...]) -> PackedFetch:
        """The answer to a request for ``metrics`` as one PackedFetch (made
        once per request shape, as a table that packs its values would
        keep its layout)."""
        blob = array("Q")
        singular = array("I", [PM_IN_NULL & 0xFFFFFFFF])
        insts = []
        for m in metrics:
            value = self._answer[m]
            if m.indom is None:
                insts.append(singular)
                blob.append(value)
            else:
                insts.append(value.insts)
                blob.extend(value.values)
        if sys.byteorder == "little":
            blob.byteswap()
        indoms = frozenset(m.indom.id for m in metrics if m.indom is not None)
        packed = PackedFetch(metrics, [m.type for m in metrics], insts, blob.tobytes(), indoms, object())
        self._packed[metrics] = packed
        return packed

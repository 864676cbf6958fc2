"""Our side of bench/fetch_shapes.py: a table of the shape $BENCH_SHAPE,
written the plain way (fetch returns ``{metric: value}`` and
``{metric: {inst: value}}`` dicts); the same shape as pcp_pmda_shapes.python.

Shapes: ``MxN`` (M U64 metrics over an indom of N instances, N=0: singular)
or ``S+MxN`` (S singular metrics plus M metrics over N instances).
"""

from __future__ import annotations

import os
from typing import Any

from pmda_py.pmapi import PmSem, PmType
from pmda_py.table import FetchRequest, FetchResult, InDom, Metric, Table, units


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
        self.indom = InDom(0, {i: f"i{i}" for i in range(n)}, oneline="bench instances")
        ms = [
            Metric(
                f"s{k}",
                cluster=0,
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
                cluster=1,
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
        for m in ms:  # the values pcp_pmda_shapes.python answers
            self._answer[m] = m.item * 3 if m.indom is None else {i: i * 3 + m.item for i in range(n)}

    def metrics(self) -> list[Metric]:
        return self._metrics

    def indoms(self) -> list[InDom]:
        return [self.indom]

    async def fetch(self, request: FetchRequest) -> FetchResult:
        return self._answer

"""Our side of the benchmark: one U64 metric over an indom of BENCH_N
instances (default 1000), the same shape as pcp_pmda_bench.python."""

from __future__ import annotations

import os

from pmda_py.pmapi import PmSem, PmType
from pmda_py.table import FetchRequest, FetchResult, InDom, Metric, Table, units

N = int(os.environ.get("BENCH_N", "1000"))


class BenchTable(Table):
    name = "bench"

    def __init__(self) -> None:
        self.indom = InDom(0, {i: f"i{i}" for i in range(N)})
        self.values = Metric(
            "values",
            cluster=0,
            item=0,
            type=PmType.U64,
            sem=PmSem.COUNTER,
            units=units(count=1),
            indom=self.indom,
            oneline="values of the benchmark",
            help="The values of the benchmark, one per instance.",
        )
        self._data = {i: i * 3 for i in range(N)}

    async def fetch(self, request: FetchRequest) -> FetchResult:
        return {self.values: self._data}

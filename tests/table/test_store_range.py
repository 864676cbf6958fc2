"""``Metric(min=..., max=...)``: a stored value below ``min``, above ``max``,
or NaN where either is set is refused with PM_ERR_BADSTORE before
:meth:`Table.store` is called (pmda_py/table/metric.py); a value in range,
bounds included, reaches it as sent."""

from __future__ import annotations

import math

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from pmda_py.errors import PmErr
from pmda_py.pmapi import PM_IN_NULL, PmType, pmid
from pmda_py.table import FetchRequest, FetchResult, Metric, StoreRequest, Table
from pmda_py.testing.harness import open_table_pmda
from pmda_py.wire import ValueSet

DOMAIN = 253


class Ranged(Table):
    name = "ranged"

    def __init__(self) -> None:
        self.count = Metric("count", cluster=0, item=0, type=PmType.I32, writable=True, min=-5, max=10)
        self.ratio = Metric("ratio", cluster=0, item=1, type=PmType.DOUBLE, writable=True, min=0.0, max=1.0)
        self.low = Metric("low", cluster=0, item=2, type=PmType.DOUBLE, writable=True, max=2.5)  # max alone
        self.free = Metric("free", cluster=0, item=3, type=PmType.DOUBLE, writable=True)  # no range: NaN is a value
        self.stored: list[tuple[str, object]] = []

    def metrics(self) -> list[Metric]:
        return [self.count, self.ratio, self.low, self.free]

    async def fetch(self, request: FetchRequest) -> FetchResult:
        return {}

    async def store(self, request: StoreRequest) -> None:
        self.stored.append((request.metric.name, request.values[PM_IN_NULL]))


def _refused(metric: Metric, v: float) -> bool:
    if isinstance(v, float) and math.isnan(v):
        return metric.min is not None or metric.max is not None
    return (metric.min is not None and v < metric.min) or (metric.max is not None and v > metric.max)


VALUES = st.one_of(
    st.sampled_from([-5, 10, -6, 11, 0.0, 1.0, 2.5, -0.0, math.nan, math.inf, -math.inf]),
    st.integers(min_value=-(2**31), max_value=2**31 - 1),
    st.floats(allow_nan=True, allow_infinity=True),
)


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(values=st.lists(st.tuples(st.sampled_from(range(4)), VALUES), min_size=1, max_size=12))
@example(values=[(1, math.nan), (2, math.nan), (3, math.nan), (0, 11), (0, -6), (0, 10), (2, 2.5), (1, -0.0)])
@example(values=[(1, math.inf), (2, -math.inf), (1, 1.0000000000000002), (2, 2.5000000000000004)])
async def test_range_checked_before_the_table(values: list[tuple[int, float]]) -> None:
    table = Ranged()
    metrics = table.metrics()
    async with open_table_pmda(table, mount="r", domain=DOMAIN) as pmda:
        for k, v in values:
            metric = metrics[k]
            if metric.type == PmType.I32:
                if type(v) is float:  # a float is not an I32's value
                    continue
                sent: float = v
            else:
                sent = float(v)
            before = len(table.stored)
            code = await pmda.store([ValueSet.of(pmid(DOMAIN, 0, k), metric.type, [(PM_IN_NULL, sent)])])
            if _refused(metric, sent):
                assert code == PmErr.BADSTORE, (metric.name, sent)
                assert len(table.stored) == before
            else:
                assert code == 0, (metric.name, sent, code)
                name, got = table.stored[-1]
                assert name == metric.name
                assert got == sent or (isinstance(got, float) and math.isnan(got) and math.isnan(sent))

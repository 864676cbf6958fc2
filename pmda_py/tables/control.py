"""The daemon's own metrics: requests by PDU type, fetch latency, per-table
errors and timeouts, and the log level (storable with pmstore).

Clusters 4090-4095 and indom serials 4090-4091 are reserved for it.
"""

from __future__ import annotations

import os
import time

from pmda_py import logconfig
from pmda_py.errors import PmdaError, PmErr
from pmda_py.pmapi import PmSem, PmType
from pmda_py.stats import PmdaStats
from pmda_py.table import FetchRequest, FetchResult, InDom, Metric, StoreRequest, Table, TableContext, Values, units
from pmda_py.wire import PduType

__all__ = ["ControlTable"]

_LEVELS = ("debug", "info", "warning", "error")
_PDU_KINDS = [t.name for t in PduType] + ["BAD"]


def rss_kb(pid: int | str = "self") -> int:
    """Resident set size of a process in kB (Linux ``/proc``), 0 if unknown."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


class ControlTable(Table):
    """Self-monitoring metrics of the pmda_py daemon."""

    name = "control"

    def __init__(self) -> None:
        #: the PMDA's counters (from the startup context)
        self.stats = PmdaStats()
        self.pdus = InDom(4090, dict(enumerate(_PDU_KINDS)), oneline="PDU types received")
        self.tables = InDom(4091, oneline="tables mounted in this PMDA")
        count = units(count=1)
        msec = units(time=1, scale_time=2)
        self.requests = Metric(
            "requests",
            cluster=4090,
            item=0,
            type=PmType.U64,
            sem=PmSem.COUNTER,
            units=count,
            indom=self.pdus,
            oneline="requests received, by PDU type",
            help="Number of PDUs received from pmcd since the daemon started, per PDU type\n"
            '("BAD" counts requests that failed to decode and were answered PM_ERR_IPC).',
        )
        self.fetches = Metric(
            "fetch.count",
            cluster=4090,
            item=1,
            type=PmType.U64,
            sem=PmSem.COUNTER,
            units=count,
            oneline="FETCH requests answered",
        )
        self.values = Metric(
            "fetch.values",
            cluster=4090,
            item=2,
            type=PmType.U64,
            sem=PmSem.COUNTER,
            units=count,
            oneline="values returned by fetches",
        )
        self.latency_last = Metric(
            "fetch.latency.last",
            cluster=4090,
            item=3,
            type=PmType.DOUBLE,
            units=msec,
            oneline="time to answer the last FETCH",
        )
        self.latency_avg = Metric(
            "fetch.latency.mean",
            cluster=4090,
            item=4,
            type=PmType.DOUBLE,
            units=msec,
            oneline="mean time to answer a FETCH",
        )
        self.latency_max = Metric(
            "fetch.latency.max",
            cluster=4090,
            item=5,
            type=PmType.DOUBLE,
            units=msec,
            oneline="longest time to answer a FETCH",
        )
        self.latency_p99 = Metric(
            "fetch.latency.p99",
            cluster=4090,
            item=7,
            type=PmType.DOUBLE,
            units=msec,
            oneline="99th percentile of the time to answer a FETCH (last 4096 fetches)",
        )
        self.rss = Metric(
            "rss",
            cluster=4092,
            item=3,
            type=PmType.U64,
            units=units(space=1, scale_space=1),
            oneline="resident set size of the daemon",
        )
        self.errors = Metric(
            "table.errors",
            cluster=4091,
            item=0,
            type=PmType.U64,
            sem=PmSem.COUNTER,
            units=count,
            indom=self.tables,
            oneline="table calls that raised or returned bad values",
        )
        self.timeouts = Metric(
            "table.timeouts",
            cluster=4091,
            item=1,
            type=PmType.U64,
            sem=PmSem.COUNTER,
            units=count,
            indom=self.tables,
            oneline="table calls that overran their deadline (answered PM_ERR_AGAIN)",
        )
        self.loglevel = Metric(
            "log.level",
            cluster=4092,
            item=0,
            type=PmType.STRING,
            sem=PmSem.DISCRETE,
            writable=True,
            oneline="log level (debug, info, warning, error); storable",
            help="The daemon's log level.  Change it with, e.g.,\n  pmstore NAME.control.log.level debug",
        )
        self.uptime = Metric(
            "uptime",
            cluster=4092,
            item=1,
            type=PmType.U32,
            units=units(time=1, scale_time=3),
            oneline="seconds since the daemon started",
        )
        self.pid = Metric(
            "pid", cluster=4092, item=2, type=PmType.U32, sem=PmSem.DISCRETE, oneline="process id of the daemon"
        )
        self.bad = Metric(
            "bad_requests",
            cluster=4090,
            item=6,
            type=PmType.U64,
            sem=PmSem.COUNTER,
            units=count,
            oneline="requests that failed to decode",
        )

    async def startup(self, context: TableContext) -> None:
        self.stats = context.stats
        self.tables.set_names(context.tables)

    async def fetch(self, request: FetchRequest) -> FetchResult:
        st = self.stats
        tables = {v: k for k, v in self.tables.instances.items()}
        out: dict[Metric, Values] = {}
        for m in request.metrics:
            if m is self.requests:
                out[m] = {k: st.requests.get(n, 0) for k, n in self.pdus.instances.items()}
            elif m is self.fetches:
                out[m] = st.fetches
            elif m is self.values:
                out[m] = st.fetch_values
            elif m is self.latency_last:
                out[m] = st.fetch_time_last * 1000.0
            elif m is self.latency_avg:
                out[m] = st.fetch_time_total * 1000.0 / st.fetches if st.fetches else 0.0
            elif m is self.latency_max:
                out[m] = st.fetch_time_max * 1000.0
            elif m is self.latency_p99:
                out[m] = st.percentile(0.99) * 1000.0
            elif m is self.rss:
                out[m] = rss_kb()
            elif m is self.errors:
                out[m] = {k: st.table_errors.get(n, 0) for n, k in tables.items()}
            elif m is self.timeouts:
                out[m] = {k: st.table_timeouts.get(n, 0) for n, k in tables.items()}
            elif m is self.loglevel:
                out[m] = logconfig.current_level()
            elif m is self.uptime:
                out[m] = int(time.time() - st.started)
            elif m is self.pid:
                out[m] = os.getpid()
            elif m is self.bad:
                out[m] = st.bad_requests
        return out

    async def store(self, request: StoreRequest) -> None:
        if request.metric is not self.loglevel:
            raise PmdaError(code=PmErr.PERMISSION)
        for value in request.values.values():
            level = str(value).strip().lower()
            if level not in _LEVELS:
                raise PmdaError(f"log level must be one of {', '.join(_LEVELS)}", code=PmErr.BADSTORE)
            logconfig.set_level(level)

"""An example third-party table for pmda_py (installed next to the config).

Mount it with a config section:

    [table loadavg]
    table = example_table:LoadAverage
    mount = pypmda.loadavg

(with this file's directory on PYTHONPATH, or package it with an entry point
in the ``pmda_py.tables`` group and write ``table = loadavg``).
"""

from __future__ import annotations

import os

from pmda_py.pmapi import PmSem, PmType
from pmda_py.table import FetchRequest, FetchResult, InDom, Metric, Table


class LoadAverage(Table):
    """The 1, 5 and 15 minute load averages, one metric over three instances."""

    name = "loadavg"

    def __init__(self) -> None:
        self.period = InDom(100, {1: "1 minute", 5: "5 minute", 15: "15 minute"}, oneline="load average periods",
                            labels={"source": "os.getloadavg"})  # fmt: skip
        self.load = Metric("load", cluster=100, item=0, type=PmType.DOUBLE, sem=PmSem.INSTANT, indom=self.period,
                           oneline="run queue length averaged over a period",
                           help="The system load average (os.getloadavg()) over 1, 5 and 15 minutes.")  # fmt: skip

    async def fetch(self, request: FetchRequest) -> FetchResult:
        one, five, fifteen = os.getloadavg()
        return {self.load: {1: one, 5: five, 15: fifteen}}

"""A table with labels of its own at the domain and cluster levels, for
the label-placement tests: they must reach only this table's metrics."""

from __future__ import annotations

from pmda_py.pmapi import PmType
from pmda_py.table import FetchRequest, FetchResult, Metric, Table


class Labelled(Table):
    name = "labelled"

    def __init__(self, **_options: str) -> None:
        self.domain_labels = {"team": "storage"}
        self.cluster_labels = {41: {"tier": "gold"}}
        self.one = Metric("one", cluster=40, item=0, type=PmType.U32, oneline="always 1")
        self.two = Metric("two", cluster=41, item=0, type=PmType.U32, oneline="always 2")

    async def fetch(self, request: FetchRequest) -> FetchResult:
        return {self.one: 1, self.two: 2}
